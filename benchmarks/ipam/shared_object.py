"""What one shared object costs on kube-apiserver: the ceiling of any allocator in which every claimer writes the
pool (or any other one object) once per allocation. Not part of `make test`.

Two measurements on a kube-apiserver the benchmark starts with the test harness:

- an IPPool status merge patch that adds one key to its index, and a GET of the pool, by the size of the index
  (upstream's ``indexes`` alone, and with this collection's ``allocations`` copy beside it);
- the writes per second one small object takes from 1 and from 16 writer processes: a resourceVersion-checked
  read-modify-write retried on Conflict (compare-and-swap), and an unconditional merge patch (which the API
  server applies one at a time, retrying internally).

    .venv/bin/python benchmarks/ipam/shared_object.py            # figures into docs/benchmarks.md
    .venv/bin/python benchmarks/ipam/shared_object.py --no-report
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "build" / "collections"), str(REPO)]

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Conflict  # noqa: E402
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref  # noqa: E402
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store  # noqa: E402
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import IPAM_API  # noqa: E402
from benchmarks.report import machine, write_section  # noqa: E402

NAMESPACE = "bench"
SHARED = Ref("v1", "ConfigMap", "shared", NAMESPACE)
REPEAT = 100


def index_costs(options: dict, sizes: list[int]) -> list[dict]:
    rows = []
    with open_store(options) as store:
        for size in sizes:
            for copies in (("indexes",), ("indexes", "allocations")):
                name = f"pool-{size}-{len(copies)}"
                store.create({"apiVersion": IPAM_API, "kind": "IPPool",
                              "metadata": {"name": name, "namespace": NAMESPACE},
                              "spec": {"namePrefix": name, "pools": [{"subnet": "10.128.0.0/16"}], "prefix": 16}})
                ref = Ref(IPAM_API, "IPPool", name, NAMESPACE)
                index = {f"claim-{i}": f"10.128.{i // 256}.{i % 256}" for i in range(size)}
                store.patch_status(ref, {"status": {field: index for field in copies}})
                started = time.perf_counter()
                for i in range(REPEAT):
                    store.patch_status(ref, {"status": {field: {f"new-{i}": "10.129.0.1"} for field in copies}})
                patch_ms = (time.perf_counter() - started) * 1000 / REPEAT
                started = time.perf_counter()
                for _repeat in range(REPEAT):
                    pool = store.get(ref)
                get_ms = (time.perf_counter() - started) * 1000 / REPEAT
                rows.append({"keys": size, "maps": " + ".join(copies), "patch_ms": round(patch_ms, 1),
                             "get_ms": round(get_ms, 1), "kib": round(len(json.dumps(pool)) / 1024, 1)})
                print(json.dumps(rows[-1]), flush=True)
    return rows


def _writer(options: dict, writes: int, way: str, barrier, results) -> None:
    requests = 0
    with open_store(options) as store:
        barrier.wait()
        for _write in range(writes):
            if way == "compare-and-swap":
                while True:
                    shared = store.get(SHARED)
                    shared["data"]["taken"] += f",{random.randrange(10**6)}"
                    requests += 2
                    try:
                        store.update(shared)
                        break
                    except Conflict:
                        time.sleep(random.uniform(0, 0.005))
            else:
                store.patch(SHARED, {"data": {f"shard-{random.randrange(16)}": f"{random.random()}" * 100}})
                requests += 1
    results.put(requests)


def write_ceiling(options: dict, way: str, writers: int, writes: int) -> dict:
    # Spawned, not forked: a child forked from a process that has spoken TLS to the API server may die at start.
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(writers + 1)
    results = spawn.Queue()
    processes = [spawn.Process(target=_writer, args=(options, writes, way, barrier, results))
                 for _writer in range(writers)]
    for process in processes:
        process.start()
    barrier.wait()
    started = time.perf_counter()
    requests = sum(results.get() for _process in processes)
    elapsed = time.perf_counter() - started
    for process in processes:
        process.join()
    row = {"way": way, "writers": writers, "writes_per_second": round(writers * writes / elapsed, 1),
           "requests_per_write": round(requests / (writers * writes), 2)}
    print(json.dumps(row), flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-report", action="store_true", help="print only, leave docs/benchmarks.md alone")
    args = parser.parse_args()
    from kubernetes import client

    from tests.harness.cluster import KubeCluster

    with tempfile.TemporaryDirectory() as scratch, KubeCluster(Path(scratch) / "kube") as cluster:
        cluster.install_crds()
        client.CoreV1Api(cluster.api_client()).create_namespace({"metadata": {"name": NAMESPACE}})
        options = {"backend": "kubernetes", "kubeconfig": str(cluster.kubeconfig)}
        indexes = index_costs(options, [0, 300, 1000, 3000])
        with open_store(options) as store:
            store.create({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": SHARED.name, "namespace": NAMESPACE}, "data": {"taken": "0-999"}})
        ceilings = [write_ceiling(options, way, writers, 200 if writers == 1 else 20)
                    for way in ("compare-and-swap", "merge patch") for writers in (1, 16)]
    if not args.no_report:
        write_report(indexes, ceilings)
    return 0


def write_report(indexes: list[dict], ceilings: list[dict]) -> None:
    lines = ["## One shared object on kube-apiserver (`benchmarks/ipam/shared_object.py`)", "",
             f"Machine: {machine()}. Run: {time.strftime('%Y-%m-%d')}, "
             "`.venv/bin/python benchmarks/ipam/shared_object.py`.", "",
             f"An IPPool's status patch adding one key to its index, and a GET of the pool (mean of {REPEAT}), by the "
             "index's size; the pool's size as JSON (managedFields included).", "",
             "| keys | maps | patch ms | GET ms | KiB |", "|---|---|---|---|---|"]
    lines += [f"| {r['keys']:,} | {r['maps']} | {r['patch_ms']} | {r['get_ms']} | {r['kib']} |" for r in indexes]
    lines += ["", "Writes per second one small object (a ConfigMap) takes from 1 and from 16 writer processes: a "
              "resourceVersion-checked read-modify-write retried on Conflict, and an unconditional merge patch.", "",
              "| way | writers | writes/s | requests per write |", "|---|---|---|---|"]
    lines += [f"| {r['way']} | {r['writers']} | {r['writes_per_second']} | {r['requests_per_write']} |"
              for r in ceilings]
    write_section("ipam-shared-object", lines)


if __name__ == "__main__":
    sys.exit(main())
