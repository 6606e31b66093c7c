"""Hosts benchmark, side by side: BareMetalHosts registered -> available -> provisioned -> deprovisioned
(available again) -> deleted, by the collection's operator and by upstream's baremetal-operator (built from its
snapshot: benchmarks/upstream), each on a fresh harness kube-apiserver, both driving one Ironic and the same
emulated BMCs. The stacks take turns, in the order given.

What emulates what:
- the BMCs: sushy-tools' fake systems driver (one emulator process per 250 hosts), Redfish over HTTP with basic
  authentication. Power, boot device and virtual media really go through Redfish; nothing boots.
- the servers' disks and operating system: nothing. Hosts are provisioned with a live ISO (``image.format:
  live-iso``): Ironic's ramdisk deploy inserts it as virtual media and powers the system on, with no agent to
  wait for. Inspection (``inspectionMode: disabled``) and cleaning (``automatedCleaningMode: disabled``) are
  off: both need an agent (Metal3's scale tests run fake-ipa for it; it is not packaged, and not run here).
- Ironic: the harness's (one process, API and conductor, SQLite), started once and shared by both stacks.

Measured for each stack: the wall time of each phase; each host's latency in each phase (p50, p95); the
controller's requests of kube-apiserver on the metal3.io kinds, Secrets and Events (the benchmark's own creates,
patches and deletes taken off) per host; Ironic API requests per host (Ironic's own API log); the controller's
CPU seconds (its process tree: the operator, its prefork server and the playbook runs) and peak memory (RSS of the
controller, PSS of its tree). Each runs with its defaults. Not part of ``make test``: tests/operator/
test_hosts_requests.py runs the collection's side at three hosts and asserts its counts.

    .venv/bin/python benchmarks/hosts/bench.py --snapshots <dir> [--hosts 100]   # figures into docs/benchmarks.md
    .venv/bin/python benchmarks/hosts/bench.py --stacks ours --hosts 10 --print
"""
from __future__ import annotations

import argparse
import concurrent.futures
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Protocol

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "build" / "collections"), str(REPO), str(REPO / "operator")]

from kubernetes import client, watch  # noqa: E402

from benchmarks.operator.bench import MemorySampler, api_request_counts, percentile, tree_cpu  # noqa: E402
from benchmarks.report import machine, write_section  # noqa: E402
from tests.harness.cluster import KubeCluster, free_port  # noqa: E402
from tests.harness.http_files import LIVE_ISO, ServedDirectory, live_iso  # noqa: E402
from tests.harness.ironic import Ironic, RedfishEmulator  # noqa: E402
from tests.harness.operator_process import Operator, metrics_at, reconciles  # noqa: E402

BMH = ("metal3.io", "v1alpha1", "baremetalhosts")
PER_EMULATOR = 250  # a fake system's MAC is its emulator's prefix and its index, one octet
PHASES = ("available", "provisioned", "deprovisioned", "deleted")
# Ironic's log of an API request: "... INFO ironic.api [req-...] 127.0.0.1 - GET /nodes/<id> - 200 (6.34ms)"
IRONIC_REQUEST = re.compile(r" ironic\.api \[[^]]*\] \S+ - [A-Z]+ /")


class Emulators:
    """``hosts`` fake Redfish systems over as many sushy-tools processes as it takes."""

    def __init__(self, base: Path, hosts: int) -> None:
        count = -(-hosts // PER_EMULATOR)
        self.emulators = [RedfishEmulator(base / f"emulator-{k}", free_port(),
                                          min(PER_EMULATOR, hosts - k * PER_EMULATOR), prefix=f"e{k}",
                                          mac_prefix=f"00:5c:52:40:{k:02x}")
                          for k in range(count)]

    def start(self) -> None:
        for emulator in self.emulators:
            emulator.start()

    def stop(self) -> None:
        for emulator in self.emulators:
            emulator.stop()

    def host(self, index: int) -> dict[str, Any]:
        """The BareMetalHost of system ``index``: off, inspection and cleaning off, virtual media."""
        emulator, i = self.emulators[index // PER_EMULATOR], index % PER_EMULATOR
        name = f"{emulator.prefix}-{i}"
        return {"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost", "metadata": {"name": name},
                "spec": {"online": False, "bootMACAddress": emulator.mac(i), "automatedCleaningMode": "disabled",
                         "inspectionMode": "disabled",
                         "bmc": {"address": emulator.address(name, "redfish-virtualmedia+http"),
                                 "credentialsName": "bench-bmc"}}}


class StateWatch:
    """When each host reached each phase, as a watch of the namespace sees it: available (first), provisioned,
    deprovisioned (available after provisioned), deleted."""

    def __init__(self, custom: client.CustomObjectsApi, namespace: str) -> None:
        self.custom, self.namespace = custom, namespace
        self.reached: dict[str, dict[str, float]] = {}
        self.states: dict[str, str] = {}
        self.cond = threading.Condition()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.is_set():
            try:
                for event in watch.Watch().stream(self.custom.list_namespaced_custom_object, BMH[0], BMH[1],
                                                  self.namespace, BMH[2], timeout_seconds=5):
                    self._seen(event["type"], event["object"])
            except Exception:  # noqa: BLE001, S112 - a dropped watch is watched again
                time.sleep(0.2)

    def stop(self) -> None:
        """Stop watching (within the watch's 5 s timeout): no thread is left reading when the process exits."""
        self.stopped.set()
        self.thread.join(10)

    def _seen(self, kind: str, obj: dict[str, Any]) -> None:
        name, now = obj["metadata"]["name"], time.monotonic()
        state = ((obj.get("status") or {}).get("provisioning") or {}).get("state") or ""
        with self.cond:
            reached = self.reached.setdefault(name, {})
            self.states[name] = "deleted" if kind == "DELETED" else state
            if kind == "DELETED":
                reached.setdefault("deleted", now)
            elif state == "provisioned":
                reached.setdefault("provisioned", now)
            elif state == "available":
                reached.setdefault("deprovisioned" if "provisioned" in reached else "available", now)
            self.cond.notify_all()

    def wait(self, names: list[str], phase: str, timeout: float) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: all(phase in self.reached.get(n, {}) for n in names), timeout):
                late = [f"{n} ({self.states.get(n)})" for n in names if phase not in self.reached.get(n, {})]
                raise TimeoutError(f"{len(late)} hosts not {phase} after {timeout:.0f}s, e.g. {late[:3]}")


def ironic_requests(ironic: Ironic) -> int:
    """Ironic's API requests so far, as its log counts them."""
    log = ironic.base_dir / "log" / "ironic.log"
    with log.open(errors="replace") as lines:
        return sum(1 for line in lines if IRONIC_REQUEST.search(line))


class Stack(Protocol):
    """A controller of BareMetalHosts, started on one cluster against the benchmark's Ironic."""

    def start(self) -> int:
        """Start it; its process id."""

    def stop(self) -> None: ...

    def host_reconciles(self) -> float:
        """Its BareMetalHost controller's reconciles so far (controller-runtime's count)."""


class StackKind(Protocol):
    name: str

    def __call__(self, cluster: KubeCluster, ironic: Ironic, namespace: str, work: Path,
                 snapshots: Path | None) -> Stack: ...

    def crds(self, work: Path, snapshots: Path | None) -> list[Path] | None:
        """The CRDs it serves with (None: the collection's)."""


class Ours:
    """The collection's operator, with its defaults, running the shipped watches."""
    name = "metal3.baremetal operator"

    def __init__(self, cluster: KubeCluster, ironic: Ironic, namespace: str, work: Path, snapshots: Path | None):
        del snapshots  # built from this checkout
        self.process = Operator(cluster, work / "operator", namespace, env=ironic.env)

    @staticmethod
    def crds(work: Path, snapshots: Path | None) -> list[Path] | None:
        return None  # the collection's

    def start(self) -> int:
        return self.process.start().process.pid

    def stop(self) -> None:
        self.process.stop()

    def host_reconciles(self) -> float:
        return self.process.reconciles("baremetalhost")


class Upstream:
    """baremetal-operator, with its defaults, its own CRDs, and its webhooks off."""
    name = "baremetal-operator"

    def __init__(self, cluster: KubeCluster, ironic: Ironic, namespace: str, work: Path, snapshots: Path | None):
        from benchmarks.upstream.bmo import UpstreamBMO
        from benchmarks.upstream.sources import snapshots_dir

        self.process = UpstreamBMO(snapshots_dir(snapshots), cluster, ironic, namespace, work)

    @staticmethod
    def crds(work: Path, snapshots: Path | None) -> list[Path] | None:
        from benchmarks.upstream.bmo import crds
        from benchmarks.upstream.sources import snapshots_dir

        return crds(snapshots_dir(snapshots), work / "crds")

    def start(self) -> int:
        process = self.process.start().process
        assert process is not None  # noqa: S101 - start() made it
        return process.pid

    def stop(self) -> None:
        self.process.stop()

    def host_reconciles(self) -> float:
        return reconciles(metrics_at(self.process.metrics_port), "baremetalhost")


STACKS: dict[str, StackKind] = {"ours": Ours, "upstream": Upstream}


def measure(stack: StackKind, hosts: int, ironic: Ironic, emulators: Emulators, iso: ServedDirectory,
            snapshots: Path | None, work: Path) -> dict[str, Any]:
    """One stack on a fresh cluster: ``hosts`` hosts through every phase, and what it cost."""
    cluster = KubeCluster(work / "kube")
    cluster.start()
    controller: Stack | None = None
    try:
        cluster.install_crds(stack.crds(work, snapshots))
        namespace = cluster.new_namespace("bench")
        api = cluster.api_client()
        custom = client.CustomObjectsApi(api)
        client.CoreV1Api(api).create_namespaced_secret(namespace, {
            "metadata": {"name": "bench-bmc"},
            "stringData": {"username": emulators.emulators[0].username,
                           "password": emulators.emulators[0].password}})
        controller = stack(cluster, ironic, namespace, work, snapshots)
        pid = controller.start()
        sampler = MemorySampler(pid)
        states = StateWatch(custom, namespace)
        objects = [emulators.host(i) for i in range(hosts)]
        names = [o["metadata"]["name"] for o in objects]
        api_before, ironic_before, cpu_before = _api(cluster), ironic_requests(ironic), tree_cpu(pid)
        reconciles_before = controller.host_reconciles()
        asked: dict[str, dict[str, float]] = {name: {} for name in names}

        def each(phase: str, act: Callable[[dict[str, Any]], None]) -> float:
            def one(obj: dict[str, Any]) -> None:
                asked[obj["metadata"]["name"]][phase] = time.monotonic()
                act(obj)
            started = time.monotonic()
            with concurrent.futures.ThreadPoolExecutor(10) as pool:
                list(pool.map(one, objects))
            states.wait(names, phase, timeout=600 + 6 * hosts)
            return max(states.reached[n][phase] for n in names) - started

        def patch(spec: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
            def one(obj: dict[str, Any]) -> None:
                custom.patch_namespaced_custom_object(*BMH[:2], namespace, BMH[2], obj["metadata"]["name"],
                                                      {"spec": spec})
            return one

        booted_iso = {"online": True, "image": {"url": f"{iso.url}/{LIVE_ISO}", "format": "live-iso"}}
        walls = {
            "available": each("available", lambda obj: custom.create_namespaced_custom_object(
                *BMH[:2], namespace, BMH[2], obj)),
            "provisioned": each("provisioned", patch(booted_iso)),
            "deprovisioned": each("deprovisioned", patch({"image": None})),
            "deleted": each("deleted", lambda obj: custom.delete_namespaced_custom_object(
                *BMH[:2], namespace, BMH[2], obj["metadata"]["name"])),
        }
        cpu = tree_cpu(pid) - cpu_before
        api_after, ironic_after = _api(cluster), ironic_requests(ironic)
        host_reconciles = controller.host_reconciles() - reconciles_before
        sampler.stop.set()
        states.stop()
        detail = {key: value - api_before.get(key, 0) for key, value in api_after.items()
                  if value > api_before.get(key, 0)}
        # The benchmark's own: each host created, patched twice and deleted.
        for key, own in ((("POST", "baremetalhosts", "", "201"), hosts),
                         (("PATCH", "baremetalhosts", "", "200"), 2 * hosts),
                         (("DELETE", "baremetalhosts", "", "200"), hosts)):
            detail[key] = detail.get(key, 0) - own
        return {"walls": walls, "latencies": {phase: [states.reached[n][phase] - asked[n][phase] for n in names]
                                              for phase in PHASES},
                "reached": {n: sorted(states.reached[n]) for n in names},
                "reconciles": host_reconciles / hosts,
                "api": sum(detail.values()) / hosts, "api_detail": detail,
                "ironic": (ironic_after - ironic_before) / hosts, "cpu": cpu, "rss": sampler.peak_rss,
                "pss": sampler.peak_tree_pss}
    finally:
        if controller:
            controller.stop()
        cluster.stop()


def _api(cluster: KubeCluster) -> dict[tuple[str, str, str, str], float]:
    return api_request_counts(cluster, groups=("metal3.io",), core=("secrets", "events"))


def run(stacks: list[str], hosts: int, snapshots: Path | None) -> dict[str, dict[str, Any]]:
    work = Path(tempfile.mkdtemp(prefix="bench-hosts-", dir=REPO / "build"))
    ironic = Ironic(work / "ironic", free_port(), free_port())
    emulators = Emulators(work, hosts)
    runs: dict[str, dict[str, Any]] = {}
    try:
        ironic.start()
        emulators.start()
        iso = live_iso(work / "images")
        try:
            for name in stacks:
                runs[name] = measure(STACKS[name], hosts, ironic, emulators, iso, snapshots, work / name)
        finally:
            iso.close()
        return runs
    finally:
        emulators.stop()
        ironic.stop()
        shutil.rmtree(work, ignore_errors=True)


def table(hosts: int, runs: dict[str, dict[str, Any]]) -> list[str]:
    lines = [f"{hosts} hosts, registered to deleted:", "",
             "| | " + " | ".join(STACKS[name].name for name in runs) + " |",
             "|---|" + "---|" * len(runs)]

    def row(label: str, cell: Callable[[dict[str, Any]], str]) -> None:
        lines.append(f"| {label} | " + " | ".join(cell(r) for r in runs.values()) + " |")

    for phase in PHASES:
        row(f"{phase}: all (s)", lambda r, p=phase: f"{r['walls'][p]:.1f}")
        row(f"{phase}: p50 / p95 per host (s)",
            lambda r, p=phase: f"{percentile(r['latencies'][p], 50):.1f} / {percentile(r['latencies'][p], 95):.1f}")
    row("BareMetalHost reconciles per host", lambda r: f"{r['reconciles']:.1f}")
    row("kube-apiserver requests per host", lambda r: f"{r['api']:.1f}")
    row("Ironic API requests per host", lambda r: f"{r['ironic']:.1f}")
    row("controller CPU (s)", lambda r: f"{r['cpu']:.1f}")
    row("peak RSS / tree PSS (MiB)", lambda r: f"{r['rss'] / 1024:.0f} / {r['pss'] / 1024:.0f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--stacks", default="ours,upstream", help="which, in this order (ours, upstream)")
    parser.add_argument("--snapshots", type=Path, help="the fetched snapshots (else $METAL3_UPSTREAM_SNAPSHOTS)")
    parser.add_argument("--print", action="store_true", help="print the table, do not write docs/benchmarks.md")
    args = parser.parse_args(argv)
    stacks = [s.strip() for s in args.stacks.split(",") if s.strip()]
    unknown = [s for s in stacks if s not in STACKS]
    if unknown or not stacks:
        parser.error(f"--stacks: {', '.join(unknown) or 'none'}: not one of {', '.join(STACKS)}")
    if args.hosts < 1:
        parser.error("--hosts: at least 1")
    try:
        runs = run(stacks, args.hosts, args.snapshots)
    except TimeoutError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    lines = table(args.hosts, runs)
    print("\n".join(lines))
    for name, r in runs.items():
        print(f"{name}: kube-apiserver requests per host:",
              ", ".join(f"{' '.join(k[:3]).strip()} {k[3]}: {v / args.hosts:.1f}"
                        for k, v in sorted(r["api_detail"].items(), key=lambda kv: -kv[1]) if v))
    if not args.print:
        write_section(f"hosts-{args.hosts}", [
            f"## Hosts, {args.hosts}: the operator beside baremetal-operator (`benchmarks/hosts/bench.py`)", "",
            f"Machine: {machine()}. Run: {time.strftime('%Y-%m-%d')}, `.venv/bin/python benchmarks/hosts/bench.py "
            f"--hosts {args.hosts} --stacks {','.join(stacks)} --snapshots <dir>`. What emulates what: the "
            "script's docstring (sushy-tools' fake Redfish systems; live-ISO deploys, no agent; inspection and "
            "cleaning off).", "", *lines])
    return 0


if __name__ == "__main__":
    sys.exit(main())
