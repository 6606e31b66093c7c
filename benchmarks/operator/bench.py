"""Operator benchmark, side by side: IPClaims reconciled on a real kube-apiserver, create to Ready, by the
collection's operator (with and without its prefork server) and by the real Ansible Operator
(``ansible-operator``, hack/ansible-operator.sh), each running the shipped operator/watches.yaml.

- burst: 100 IPClaims created at once (10 threads) on a running operator - time until all are Ready,
  p50/p95 of each claim's create-to-Ready;
- idle: one claim at a time on an idle operator, create to Ready (p50 of 10);
- memory: the operator's peak RSS, and the peak PSS of its whole process tree (operator, prefork server or
  ansible-runner processes, ansible-playbook runs), sampled every 0.1 s. PSS counts a page shared by n processes
  1/n in each, so the tree's sum is what the pod's memory cgroup would charge;
- API requests per reconcile: kube-apiserver's own count (``apiserver_request_total``) of requests on the IPAM
  kinds and Events from the pool's creation until every claim is Ready, less the benchmark's own creates, over
  the reconciles run meanwhile - the roles' and the operator's requests together; and, for the collection's
  operator, what its proxy did with the roles' requests (answered from the watch cache, or forwarded).

Each operator runs with its defaults (workers per kind = the CPU count); the Ansible Operator with
ANSIBLE_GATHERING=explicit, as operator/README.md advises (it gathers facts before each role otherwise). Ready is
the claim's Ready condition together with the operator's Successful one, seen on a watch. Not part of
`make test`.

    .venv/bin/python benchmarks/operator/bench.py            # figures into docs/benchmarks.md
    .venv/bin/python benchmarks/operator/bench.py --print    # printed only
"""
from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "build" / "collections"), str(REPO), str(REPO / "operator")]

import requests  # noqa: E402
from kubernetes import client, watch  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from benchmarks.report import machine, write_section  # noqa: E402
from tests.harness.cluster import KubeCluster  # noqa: E402
from tests.harness.operator_process import AnsibleOperator, Operator, ansible_operator_binary  # noqa: E402
from tests.harness.processes import process_tree  # noqa: E402

IPAM = ("ipam.metal3.io", "v1alpha1")
POOL = {"apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPPool", "metadata": {"name": "bench"},
        "spec": {"namePrefix": "bench", "pools": [{"start": "10.10.0.10", "end": "10.10.15.250"}], "prefix": 20,
                 "gateway": "10.10.0.1"}}


def claim(name: str) -> dict:
    return {"apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPClaim", "metadata": {"name": name},
            "spec": {"pool": {"name": "bench"}}}


def _ready(obj: dict) -> bool:
    conditions = {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}
    return conditions.get("Ready") == "True" and conditions.get("Successful") == "True"


def _addressed(obj: dict) -> bool:
    """Upstream's answer: the claim's status names its IPAddress (it writes no Ready condition on IPClaims)."""
    return bool((obj.get("status") or {}).get("address"))


class ReadyWatch:
    """When each claim of the namespace was first seen Ready, from a watch (no polling delay); and, whatever
    Ready is, when it was first seen with the operator's Successful condition too (never, for upstream's)."""

    def __init__(self, custom: client.CustomObjectsApi, namespace: str, ready: Callable[[dict], bool] = _ready) \
            -> None:
        self.is_ready = ready
        self.ready: dict[str, float] = {}
        self.successful: dict[str, float] = {}
        self.cond = threading.Condition()
        self._stream = watch.Watch()
        threading.Thread(target=self._run, args=(custom, namespace), daemon=True).start()

    def _run(self, custom: client.CustomObjectsApi, namespace: str) -> None:
        with contextlib.suppress(Exception):  # the cluster stops under it at the end
            for event in self._stream.stream(custom.list_namespaced_custom_object, *IPAM, namespace, "ipclaims"):
                obj, seen = event["object"], time.monotonic()
                if _ready(obj):
                    self.successful.setdefault(obj["metadata"]["name"], seen)
                if self.is_ready(obj):
                    with self.cond:
                        self.ready.setdefault(obj["metadata"]["name"], seen)
                        self.cond.notify_all()

    def wait(self, names: list[str], timeout: float = 900) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: all(n in self.ready for n in names), timeout):
                missing = [n for n in names if n not in self.ready]
                raise SystemExit(f"{len(missing)} claims not Ready after {timeout:.0f}s, e.g. {missing[:3]}")


class MemorySampler:
    """Peak RSS of the operator and peak summed PSS of its process tree."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_rss = 0
        self.peak_tree_pss = 0
        self.stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    @staticmethod
    def _kib(path: str, field: str) -> int:
        try:
            for line in Path(path).read_text().splitlines():
                if line.startswith(field):
                    return int(line.split()[1])
        except OSError:
            pass
        return 0

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            seen = process_tree(self.pid)
            self.peak_rss = max(self.peak_rss, self._kib(f"/proc/{self.pid}/status", "VmRSS:"))
            self.peak_tree_pss = max(self.peak_tree_pss,
                                     sum(self._kib(f"/proc/{p}/smaps_rollup", "Pss:") for p in seen))


def process_cpu(pid: int) -> float:
    """User and system seconds of a process, with those of the children it reaped."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime


def tree_cpu(root: int) -> float:
    """CPU seconds of ``root``'s process tree: each live process's, with what it reaped of its children."""
    return sum(process_cpu(pid) for pid in process_tree(root))


def controller_cpu(cluster: KubeCluster) -> float:
    """CPU seconds the machine spent so far outside kube-apiserver, etcd and this benchmark: the controller's,
    whichever processes it spread its work over (ansible's workers leave the operator's process tree)."""
    ticks = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    busy = sum(ticks) - ticks[3] - ticks[4]  # user nice system idle iowait irq softirq steal: less idle, iowait
    others = sum(process_cpu(p.pid) for p in cluster.processes.values()) + process_cpu(os.getpid())
    return busy / os.sysconf("SC_CLK_TCK") - others


def api_request_counts(cluster: KubeCluster, groups: tuple[str, ...] = (IPAM[0],),
                       core: tuple[str, ...] = ("events",)) -> dict[tuple[str, str, str, str], float]:
    """kube-apiserver's count of requests so far on the kinds a reconcile of the benchmark touches (those of
    ``groups`` and the ``core`` resources: the IPAM kinds and Events by default), by verb, resource, subresource
    and response code."""
    text = requests.get(f"{cluster.server}/metrics", headers={"Authorization": f"Bearer {cluster.token}"},
                        verify=str(cluster.ca_cert), timeout=10).text
    counts: dict[tuple[str, str, str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            group = labels.get("group")
            ours = group in groups or (not group and labels.get("resource") in core)
            if sample.name == "apiserver_request_total" and ours:
                key = (labels["verb"], labels["resource"], labels.get("subresource", ""), labels.get("code", ""))
                counts[key] = counts.get(key, 0) + sample.value
    return counts


def proxy_counts(operator: Operator) -> dict[str, float]:
    """The collection's operator's proxy: the roles' requests so far, answered from the cache or forwarded."""
    counts = {"cache": 0.0, "api": 0.0}
    for sample, value in operator.metrics().items():
        if sample.startswith("metal3_operator_proxy_requests_total{"):
            counts["cache" if 'source="cache"' in sample else "api"] += value
    return counts


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def measure(claims: int, kind: type, flags: list[str], ready_when: Callable[[dict], bool] = _ready,
            idle_claims: int = 11) -> dict:
    """One operator (``kind``, with ``flags``) on a fresh cluster: the idle latencies, the burst, the memory
    peaks, the CPU time, the requests. ``idle_claims``: one at a time before the burst (the first warms the
    operator up and is not timed)."""
    work = Path(tempfile.mkdtemp(prefix="bench-operator-", dir=REPO / "build"))
    cluster = KubeCluster(work / "kube")
    cluster.start()
    operator = None
    try:
        cluster.install_crds()
        namespace = cluster.new_namespace("bench")
        custom = client.CustomObjectsApi(cluster.api_client())
        operator = kind(cluster, work / "operator", namespace, *flags).start()
        sampler = MemorySampler(operator.process.pid)
        ready = ReadyWatch(custom, namespace, ready_when)
        api_before, proxy_before, reconciles_before = api_request_counts(cluster), proxy_counts(operator), \
            operator.reconciles()
        custom.create_namespaced_custom_object(*IPAM, namespace, "ippools", POOL)

        # Idle: one claim at a time; the first also warms the operator up (Ansible imported once).
        idle, idle_successful = [], []
        for i in range(idle_claims):
            name = f"idle-{i}"
            created = time.monotonic()
            custom.create_namespaced_custom_object(*IPAM, namespace, "ipclaims", claim(name))
            ready.wait([name])
            time.sleep(1)
            if i:
                idle.append(ready.ready[name] - created)
                if name in ready.successful:
                    idle_successful.append(ready.successful[name] - created)

        # Burst: every claim created at once.
        names = [f"burst-{i}" for i in range(claims)]
        created_at: dict[str, float] = {}

        def create(name: str) -> None:
            created_at[name] = time.monotonic()
            custom.create_namespaced_custom_object(*IPAM, namespace, "ipclaims", claim(name))

        started, cpu_before = time.monotonic(), controller_cpu(cluster)
        with concurrent.futures.ThreadPoolExecutor(10) as pool:
            list(pool.map(create, names))
        ready.wait(names, timeout=max(900, claims * 3))
        all_ready = max(ready.ready[n] for n in names) - started
        cpu = controller_cpu(cluster) - cpu_before
        # Read before anything else asks the API server; the benchmark's own requests (the pool and each claim
        # created) are not the operator's.
        api_after, proxy_after, reconciles = api_request_counts(cluster), proxy_counts(operator), \
            operator.reconciles()
        reconciled = reconciles - reconciles_before
        detail = {key: value - api_before.get(key, 0) for key, value in api_after.items()
                  if value > api_before.get(key, 0)}
        # The benchmark's own creates (the pool and each claim) are not the operator's.
        detail[("POST", "ippools", "", "201")] -= 1
        detail[("POST", "ipclaims", "", "201")] -= claims + idle_claims
        api: dict[str, float] = {}
        for (verb, *_rest), value in detail.items():
            api[verb] = api.get(verb, 0) + value
        latencies = [ready.ready[n] - created_at[n] for n in names]
        addresses = {a["spec"]["address"] for a in custom.list_namespaced_custom_object(
            *IPAM, namespace, "ipaddresses")["items"]}
        assert len(addresses) == claims + idle_claims, f"{len(addresses)} distinct addresses"
        sampler.stop.set()
        return {"all_ready": all_ready, "latencies": latencies, "idle": idle, "idle_successful": idle_successful,
                "rss": sampler.peak_rss, "cpu": cpu,
                "pss": sampler.peak_tree_pss, "reconciles": reconciles, "api": api, "api_detail": detail,
                "reconciled": reconciled,
                "proxy": {k: proxy_after[k] - proxy_before[k] for k in proxy_after}}
    finally:
        if operator:
            operator.stop()
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--print", action="store_true", help="print the figures, do not write docs/benchmarks.md")
    parser.add_argument("--claims", type=int, default=100)
    parser.add_argument("--versus-upstream", action="store_true",
                        help="instead: our operator beside upstream's ip-address-manager built from its snapshot "
                             "(benchmarks/upstream/sources.py), for each --sizes")
    parser.add_argument("--snapshots", type=Path,
                        help="where `fetch` put Metal3's repositories (else $METAL3_UPSTREAM_SNAPSHOTS)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--workers", type=int, nargs="+", metavar="N",
                        help="instead: the burst of --claims with each number of workers per kind")
    args = parser.parse_args()
    if args.versus_upstream:
        from benchmarks.upstream.sources import SourceError, snapshots_dir

        try:
            versus_upstream(snapshots_dir(args.snapshots), args.sizes, args.print)
        except SourceError as e:
            raise SystemExit(f"error: {e}") from None
        return
    if args.workers:
        workers_per_kind(args.claims, args.workers, args.print)
        return
    version = ansible_operator_binary().parent.name.removeprefix("ansible-operator-")
    runs = {"metal3_operator": measure(args.claims, Operator, []),
            "metal3_operator --no-proxy": measure(args.claims, Operator, ["--no-proxy"]),
            "metal3_operator --no-prefork": measure(args.claims, Operator, ["--no-prefork"]),
            f"ansible-operator {version}": measure(args.claims, AnsibleOperator, [])}

    def per_reconcile(r: dict, verbs: tuple[str, ...]) -> str:
        return f"{sum(v for k, v in r['api'].items() if k in verbs) / r['reconciled']:.1f}"

    def proxied(r: dict) -> str:
        if not any(r["proxy"].values()):
            return "-"
        return " / ".join(f"{r['proxy'][source] / r['reconciled']:.1f}" for source in ("cache", "api"))

    def row(measure_: str, figure, target: str = "") -> str:
        return f"| {measure_} | {' | '.join(figure(r) for r in runs.values())} | {target} |"

    lines = [
        "## Operator: IPClaims reconciled through ansible-runner, side by side",
        "",
        f"Machine: {machine()}. Command: `.venv/bin/python benchmarks/operator/bench.py`.",
        "Each operator runs the shipped `operator/watches.yaml` with its defaults (workers per kind = CPU count),",
        "against the harness's kube-apiserver and etcd on the same machine; Ready = the claim's Ready and the",
        "operator's Successful conditions, seen on a watch. `metal3_operator` is the collection's operator, its",
        "roles reaching the API through its proxy, which answers their reads of watched objects from its watch",
        "cache; `--no-proxy` is the same with the roles asking kube-apiserver themselves; `--no-prefork` is the",
        "same with a fresh ansible-playbook per run; `ansible-operator` is the real Ansible Operator (built by",
        "`hack/ansible-operator.sh`), with `ANSIBLE_GATHERING=explicit` and its default verbosity (2): per",
        "reconcile it starts `ansible-runner`, which starts `ansible-playbook`, and it reads the events over HTTP;",
        "its roles reach the API through its caching proxy too. API requests are kube-apiserver's own count",
        "(`apiserver_request_total`) on the IPAM kinds and Events, from the pool's creation until every claim is",
        "Ready, less the benchmark's own creates, over the reconciles run meanwhile: the roles' and the operator's",
        "requests together (watches are counted as they end; discovery is not in it). The proxy row is the",
        "collection's operator's own count of its roles' requests. The targets are ours.",
        "",
        f"| measure | {' | '.join(runs)} | target |",
        f"|---|{'---|' * len(runs)}---|",
        row(f"{args.claims} IPClaims created at once: all Ready", lambda r: f"{r['all_ready']:.1f} s", "within 20 s"),
        row("create to Ready, p50 / p95",
            lambda r: f"{percentile(r['latencies'], 50):.1f} s / {percentile(r['latencies'], 95):.1f} s"),
        row("one claim on an idle operator, create to Ready (p50 of 10)",
            lambda r: f"{statistics.median(r['idle']):.2f} s (max {max(r['idle']):.2f} s)", "p50 within 1.5 s"),
        row("operator peak RSS", lambda r: f"{r['rss'] / 1024:.0f} MB", "under 300 MB"),
        row("operator and every process it starts, peak summed PSS", lambda r: f"{r['pss'] / 1024:.0f} MB"),
        row("reconciles run (claims + pool)", lambda r: f"{r['reconciles']:.0f}"),
        row("API requests per reconcile (IPAM kinds and Events; roles and operator)",
            lambda r: per_reconcile(r, ("GET", "LIST", "WATCH", "POST", "PUT", "PATCH", "DELETE"))),
        row("of which reads (GET, LIST) / writes", lambda r: f"{per_reconcile(r, ('GET', 'LIST'))} / "
            f"{per_reconcile(r, ('POST', 'PUT', 'PATCH', 'DELETE'))}"),
        row("roles' requests per reconcile through the proxy: from its cache / forwarded (discovery included)",
            proxied),
    ]
    print("\n".join(lines))
    if not args.print:
        write_section("operator", lines)


def workers_per_kind(claims: int, counts: list[int], print_only: bool) -> None:
    """How many workers per kind the operator's default should be: the same burst with each count."""
    runs = {n: measure(claims, Operator, ["--max-concurrent-reconciles", str(n)], _addressed) for n in counts}
    lines = [
        "## Operator: workers per kind",
        "",
        f"Machine: {machine()} ({os.cpu_count()} CPUs). Command: `.venv/bin/python benchmarks/operator/bench.py "
        f"--claims {claims} --workers {' '.join(map(str, counts))}`.",
        f"{claims} IPClaims created at once on the collection's operator with `--max-concurrent-reconciles N`,",
        "each on a fresh harness cluster; addressed = the claim's `status.address`, seen on a watch.",
        "",
        "| workers per kind | all addressed | create to address, p50 / p95 | CPU seconds per claim | peak PSS |",
        "|---|---|---|---|---|",
        *(f"| {n} | {r['all_ready']:.1f} s | {percentile(r['latencies'], 50):.2f} s / "
          f"{percentile(r['latencies'], 95):.2f} s | {r['cpu'] / claims:.3f} | {r['pss'] / 1024:.0f} MB |"
          for n, r in runs.items()),
        "",
    ]
    print("\n".join(lines))
    if not print_only:
        write_section("operator-workers", lines)


def versus_upstream(snapshots: Path, sizes: list[int], print_only: bool) -> None:
    """Issue 20's table: our operator and upstream's controller (at its client's default rate limit, and with
    none), one after the other on a fresh harness cluster each, for each size."""
    from benchmarks.operator.upstream_ipam import UNTHROTTLED, upstream_kind
    from benchmarks.upstream.sources import IPAM, revisions

    upstream = upstream_kind(snapshots)
    commit = revisions("ip-address-manager", snapshots)[IPAM]
    kinds = {"metal3_operator": (Operator, [], _addressed),
             "ip-address-manager (20 qps, burst 30)": (upstream, [], _addressed),
             "ip-address-manager (unthrottled)": (upstream, UNTHROTTLED, _addressed)}
    lines = [
        "## Operator beside upstream's ip-address-manager",
        "",
        f"Machine: {machine()}. Command: `.venv/bin/python benchmarks/operator/bench.py --versus-upstream "
        f"--snapshots <dir> --sizes {' '.join(map(str, sizes))}`.",
        f"Upstream's controller is built from its source (commit {commit[:7]} of {IPAM}, the snapshot `fetch`",
        "brings: benchmarks/upstream/sources.py) and runs with its defaults, then with",
        "its client's rate limit (20 qps, burst 30) lifted. Each run has a fresh kube-apiserver and etcd of the",
        "test harness, on this machine.",
        "Addressed: the claim's `status.address`, seen on a watch, for both (upstream writes no condition on an",
        "IPClaim; ours writes the address with the claim's Ready condition, and the operator its Successful",
        "condition after the run: a row gives that too, for ours). Requests: kube-apiserver's",
        "own count on the IPAM kinds and Events over the whole run (11 idle claims and the burst), less the",
        "benchmark's creates, per claim. CPU: the machine's busy seconds during the burst less kube-apiserver's,",
        "etcd's and the benchmark's own, per claim (ansible's workers leave the operator's process tree, so the",
        "tree's own count would miss them); anything else running on the machine would count too, so run it",
        "quiet. ratio: ours over upstream's default.",
        "",
    ]
    for claims in sizes:
        runs = {name: measure(claims, kind, flags, ready_when) for name, (kind, flags, ready_when) in kinds.items()}
        lines += versus_table(claims, runs, "ip-address-manager (20 qps, burst 30)")
        print("\n".join(lines), flush=True)
    if not print_only:
        write_section("operator-upstream", lines)


def versus_table(claims: int, runs: dict[str, dict], baseline: str) -> list[str]:
    """The rows for one size: each run's figures, and ours over ``baseline``'s."""
    ours, theirs, total = runs["metal3_operator"], runs[baseline], claims + 11
    figures: list[tuple[str, Callable[[dict], float], Callable[[float], str]]] = [
        ("all addressed", lambda r: r["all_ready"], lambda v: f"{v:.1f} s"),
        ("create to address, p50", lambda r: percentile(r["latencies"], 50), lambda v: f"{v:.2f} s"),
        ("create to address, p95", lambda r: percentile(r["latencies"], 95), lambda v: f"{v:.2f} s"),
        ("one claim on an idle controller (p50 of 10)", lambda r: statistics.median(r["idle"]),
         lambda v: f"{v:.3f} s"),
        ("peak memory of the process tree (summed PSS)", lambda r: r["pss"] / 1024, lambda v: f"{v:.0f} MB"),
        ("API requests per claim", lambda r: sum(r["api"].values()) / total, lambda v: f"{v:.1f}"),
        ("CPU seconds per claim (burst)", lambda r: r["cpu"] / claims, lambda v: f"{v:.3f}"),
    ]
    lines = [f"| {claims} IPClaims at once | {' | '.join(runs)} | ratio |", f"|---|{'---|' * len(runs)}---|"]
    for name, value, shown in figures:
        ratio = value(ours) / value(theirs) if value(theirs) else float("nan")
        lines.append(f"| {name} | {' | '.join(shown(value(r)) for r in runs.values())} | {ratio:.1f}x |")
    idle_gap = statistics.median(ours["idle"]) - statistics.median(theirs["idle"])
    lines.append(f"| one claim on an idle controller, ours minus upstream's | {idle_gap:.3f} s |"
                 f"{' |' * (len(runs) - 1)} |")
    successful = [f"{statistics.median(r['idle_successful']):.3f} s" if r["idle_successful"] else "-"
                  for r in runs.values()]
    lines.append(f"| idle claim, to the operator's Successful condition (p50 of 10) | {' | '.join(successful)} | |")
    return [*lines, ""]


if __name__ == "__main__":
    main()
