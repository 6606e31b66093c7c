"""IPAM allocation benchmark: allocations per second and per-claim latency through the engine.

Each claim is what the ip_claim module does: create the IPClaim, then reconcile it to an address.
Claimers are separate processes sharing one store (the local SQLite file, or a kube-apiserver the
benchmark starts with the test harness). Not part of `make test`.

    .venv/bin/python benchmarks/ipam/bench.py            # every case, figures into docs/benchmarks.md
    .venv/bin/python benchmarks/ipam/bench.py --quick    # 1,000 claims only, printed
"""
from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "build" / "collections"), str(REPO)]

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref  # noqa: E402
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store  # noqa: E402
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import (  # noqa: E402
    IPAM_API,
    reconcile_ip_claim,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.claims import claim_object  # noqa: E402
from benchmarks.report import machine, write_section  # noqa: E402
from tests.harness.counting_store import CountingStore  # noqa: E402

NAMESPACE = "bench"


def _claimer(options: dict, names: list[str], barrier, results) -> None:
    latencies = []
    addresses = []
    with open_store(options) as opened:
        store = CountingStore(opened)
        barrier.wait()
        for name in names:
            started = time.perf_counter()
            created = store.create(claim_object(name, NAMESPACE, "bench"))
            # What ip_claim does: the claim as the create returned it is the reconcile's first read.
            allocation = reconcile_ip_claim(store, Ref(IPAM_API, "IPClaim", name, NAMESPACE), current=created)
            latencies.append(time.perf_counter() - started)
            addresses.append(allocation.summary()["address"])
    results.put((latencies, addresses, dict(store.counts)))


def run_case(options: dict, claims: int, claimers: int) -> dict:
    with open_store(options) as store:
        store.create({"apiVersion": IPAM_API, "kind": "IPPool", "metadata": {"name": "bench", "namespace": NAMESPACE},
                      "spec": {"namePrefix": "bench", "pools": [{"subnet": "10.128.0.0/16"}], "prefix": 16}})
    names = [f"claim-{i}" for i in range(claims)]
    barrier = multiprocessing.Barrier(claimers + 1)
    results: multiprocessing.Queue = multiprocessing.Queue()
    workers = [multiprocessing.Process(target=_claimer, args=(options, names[i::claimers], barrier, results))
               for i in range(claimers)]
    for worker in workers:
        worker.start()
    barrier.wait()
    started = time.perf_counter()
    gathered = [results.get() for _worker in workers]
    elapsed = time.perf_counter() - started
    for worker in workers:
        worker.join()
    latencies = [lat for lats, _addrs, _counts in gathered for lat in lats]
    addresses = [a for _lats, addrs, _counts in gathered for a in addrs]
    counts: collections.Counter = collections.Counter()
    for _lats, _addrs, worker_counts in gathered:
        counts.update(worker_counts)
    # Per-claim latency by position, from the first claimer's own sequence: early claims vs late ones.
    sequence = gathered[0][0]
    window = max(1, len(sequence) // 20)
    quantiles = statistics.quantiles(latencies, n=100)
    return {
        "claims": claims, "claimers": claimers, "seconds": round(elapsed, 2),
        "per_second": round(claims / elapsed, 1),
        "p50_ms": round(quantiles[49] * 1000, 2), "p95_ms": round(quantiles[94] * 1000, 2),
        "first_ms": round(statistics.median(sequence[:window]) * 1000, 2),
        "last_ms": round(statistics.median(sequence[-window:]) * 1000, 2),
        "duplicates": len(addresses) - len(set(addresses)),
        # Requests per allocation, the claim's own create included; and IPAddress creates per address.
        "requests": round(sum(counts.values()) / claims, 2),
        "address_posts": round(counts[("create", "IPAddress")] / claims, 2),
        "by_verb": {f"{verb} {kind}": round(n / claims, 2) for (verb, kind), n in sorted(counts.items())},
        "unallocated": sum(1 for a in addresses if not a),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1,000 claims on the local store only; print")
    parser.add_argument("--backends", default="local,kubernetes")
    parser.add_argument("--sizes", default="1000,10000", help="claims per case (each with 1 and 16 claimers)")
    parser.add_argument("--no-report", action="store_true", help="print only, leave docs/benchmarks.md alone")
    args = parser.parse_args()
    sizes = [1000] if args.quick else [int(n) for n in args.sizes.split(",")]
    cases = [(claims, claimers) for claims in sizes for claimers in (1, 16)]
    backends = ["local"] if args.quick else args.backends.split(",")
    rows = []
    for backend in backends:
        for claims, claimers in cases:
            with tempfile.TemporaryDirectory() as scratch:
                if backend == "local":
                    rows.append({"backend": backend, **run_case({"backend": "local",
                                                                 "store_path": f"{scratch}/store.db"},
                                                                claims, claimers)})
                else:
                    from tests.harness.cluster import KubeCluster

                    with KubeCluster(Path(scratch) / "kube") as cluster:
                        cluster.install_crds()
                        from kubernetes import client

                        client.CoreV1Api(cluster.api_client()).create_namespace({"metadata": {"name": NAMESPACE}})
                        rows.append({"backend": backend, **run_case(
                            {"backend": "kubernetes", "kubeconfig": str(cluster.kubeconfig)}, claims, claimers)})
            print(json.dumps(rows[-1]), flush=True)
    if not (args.quick or args.no_report):
        write_report(rows)
    return 0


def write_report(rows: list[dict]) -> None:
    table = ["## IPAM allocation (`benchmarks/ipam/bench.py`)", "",
             f"Machine: {machine()}. Run: {time.strftime('%Y-%m-%d')}, "
             "`.venv/bin/python benchmarks/ipam/bench.py --sizes "
             f"{','.join(str(n) for n in sorted({r['claims'] for r in rows}))}`.", "",
             "Each claim: create an IPClaim, reconcile it to an address (what `ip_claim` does), through the engine, "
             "claimers in separate processes on one store; pool `10.128.0.0/16`, sequential. "
             "first/last: median latency of the first and last 5% of one claimer's claims. "
             "requests: the store's calls per allocation, the claim's own create included (each one API request on "
             "the kubernetes backend); POSTs: IPAddress creates per address taken.", "",
             "| backend | claims | claimers | allocations/s | p50 ms | p95 ms | first ms | last ms | requests | "
             "POSTs | duplicates |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        table.append(f"| {r['backend']} | {r['claims']:,} | {r['claimers']} | {r['per_second']} | {r['p50_ms']} | "
                     f"{r['p95_ms']} | {r['first_ms']} | {r['last_ms']} | {r['requests']} | {r['address_posts']} | "
                     f"{r['duplicates']} |")
    write_section("ipam", table + [""] + BEFORE)


# The figures before issue 14 (pool status written under a conflict-checked read-modify-write per claim), kept
# beside the new ones; and the same-day run of that code the targets are measured against.
BEFORE = ["Before issue 14 (2026-11-22, the same command, 1,000 claims): local 947.1/s with 1 claimer, 422.4/s with "
          "16; kubernetes 39.3/s with 1 claimer, 16.4/s with 16; 10 requests per allocation (the claim's create "
          "included), and with 16 claimers on kubernetes 1,300 IPAddress POSTs for 100 addresses. This machine runs "
          "the same code up to 3 times slower from day to day, so the targets (3 times the allocations/s on "
          "kubernetes) are measured against the code before issue 14 (commit eaec9c2) run the same day with the same "
          "benchmark: on 2026-11-27 it made, on kubernetes, 13.1 allocations/s with 1 claimer (10.0 requests per "
          "allocation, p50 71.7 ms, the last claims 100.8 ms) and 6.7/s with 16 (43.8 requests and 14.2 IPAddress "
          "POSTs per allocation); on the local store 158.8/s and 133.7/s. This code, right after that run: 60.2/s "
          "and 83.3/s on kubernetes (1.68 POSTs per address); the table is a later run of the same day. Claimers on "
          "kube-apiserver list the pool's IPAddresses and, from their second claim, follow them with a watch "
          "(counted in neither column: two lists and one watch per claimer process); only a claimer's first claim "
          "writes its key of the pool's index. On the local store claimers still write their key of the pool's "
          "index before each create: every write there goes through the one SQLite lock, and the index is how "
          "claimers in separate processes see each other."]


if __name__ == "__main__":
    sys.exit(main())
