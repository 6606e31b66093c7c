"""What only the local backend has to prove: its file, and that processes sharing it are safe."""
from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
import stat
from pathlib import Path

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import AlreadyExists, Conflict, Unavailable
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore, resolve_path

COUNTER = Ref("v1", "ConfigMap", "counter", "race")


def test_the_file_is_created_mode_0600_in_wal_mode(tmp_path: Path):
    path = tmp_path / "deep" / "store.db"
    with LocalStore(str(path)) as store:
        store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with LocalStore(str(path)) as store:
        assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_the_path_comes_from_the_option_then_the_environment_then_the_default(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("METAL3_STORE_PATH", str(tmp_path / "env.db"))
    assert resolve_path(str(tmp_path / "opt.db")) == str(tmp_path / "opt.db")
    assert resolve_path(None) == str(tmp_path / "env.db")
    monkeypatch.delenv("METAL3_STORE_PATH")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_path(None) == str(tmp_path / ".local/share/metal3-baremetal/store.db")


def test_a_store_that_cannot_be_written_is_unavailable_and_names_the_file(tmp_path: Path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    with pytest.raises(Unavailable, match="not-a-directory"):
        LocalStore(str(blocker / "store.db"))
    path = tmp_path / "store.db"
    LocalStore(str(path)).close()
    path.write_bytes(b"this is not a database, just sixteen+ bytes of junk")
    with pytest.raises(Unavailable, match="store.db"):
        LocalStore(str(path))


def _create_same_name(path: str, barrier: multiprocessing.synchronize.Barrier, results: multiprocessing.Queue) -> None:
    with LocalStore(path) as store:
        barrier.wait()
        try:
            store.create({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "only-one", "namespace": "race"}, "data": {"by": str(os.getpid())}})
            results.put("created")
        except AlreadyExists:
            results.put("exists")


def _increment(path: str, barrier: multiprocessing.synchronize.Barrier, times: int,
               results: multiprocessing.Queue) -> None:
    conflicts = 0
    with LocalStore(path) as store:
        barrier.wait()
        for _round in range(times):
            while True:  # the read-modify-write loop every claimer in the engine runs
                current = store.get(COUNTER)
                current["data"]["count"] = str(int(current["data"]["count"]) + 1)
                try:
                    store.update(current)
                    break
                except Conflict:
                    conflicts += 1
    results.put(conflicts)


PROCESSES = 8


def test_processes_racing_to_create_one_name_get_exactly_one_winner(tmp_path: Path):
    path = str(tmp_path / "store.db")
    LocalStore(path).close()
    barrier = multiprocessing.Barrier(PROCESSES)
    results: multiprocessing.Queue = multiprocessing.Queue()
    workers = [multiprocessing.Process(target=_create_same_name, args=(path, barrier, results))
               for _worker in range(PROCESSES)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    outcomes = sorted(results.get(timeout=5) for _worker in workers)
    assert outcomes.count("created") == 1
    assert outcomes.count("exists") == PROCESSES - 1


def test_processes_racing_read_modify_write_lose_no_update(tmp_path: Path):
    path = str(tmp_path / "store.db")
    with LocalStore(path) as store:
        store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "counter", "namespace": "race"},
                      "data": {"count": "0"}})
    times = 25
    barrier = multiprocessing.Barrier(PROCESSES)
    results: multiprocessing.Queue = multiprocessing.Queue()
    workers = [multiprocessing.Process(target=_increment, args=(path, barrier, times, results))
               for _worker in range(PROCESSES)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(300)
    assert sum(results.get(timeout=5) for _worker in workers) > 0, "writers never collided: the race proved nothing"
    with LocalStore(path) as store:
        # A lost update would show as a lower count.
        assert store.get(COUNTER)["data"]["count"] == str(PROCESSES * times)


def test_opening_an_existing_store_does_not_wait_for_the_write_lock(tmp_path: Path):
    path = str(tmp_path / "store.db")
    LocalStore(path).close()
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process in the middle of a write
    try:
        with LocalStore(path, busy_timeout=0.2) as store:
            assert store.list("v1", "ConfigMap", "default") == []
    finally:
        writer.execute("ROLLBACK")
        writer.close()


INFRA_V1 = "infrastructure.cluster.x-k8s.io/v1beta1"
INFRA_V2 = "infrastructure.cluster.x-k8s.io/v1beta2"


def stored_body(path: Path, kind: str, name: str) -> dict:
    with sqlite3.connect(str(path)) as db:
        (body,) = db.execute("SELECT body FROM objects WHERE kind=? AND name=?", (kind, name)).fetchone()
    return json.loads(body)


def test_capm3_objects_are_kept_at_v1beta2_what_it_cannot_hold_in_the_conversion_annotation(tmp_path: Path):
    path = tmp_path / "store.db"
    with LocalStore(str(path)) as store:
        store.create({"apiVersion": INFRA_V1, "kind": "Metal3Cluster", "metadata": {"name": "c", "namespace": "ns"},
                      "spec": {"noCloudProvider": True, "failureDomains": {"az-a": {"controlPlane": True}}}})
        store.create({"apiVersion": INFRA_V1, "kind": "Metal3Machine", "metadata": {"name": "m", "namespace": "ns"},
                      "spec": {"image": {"url": "http://images/os.img", "format": "raw"}}})
    cluster, machine = stored_body(path, "Metal3Cluster", "c"), stored_body(path, "Metal3Machine", "m")
    assert cluster["apiVersion"] == machine["apiVersion"] == INFRA_V2
    assert cluster["spec"] == {"cloudProviderEnabled": False,
                               "failureDomains": [{"name": "az-a", "controlPlane": True}]}
    assert '"noCloudProvider":true' in cluster["metadata"]["annotations"]["cluster.x-k8s.io/conversion-data"]
    assert machine["spec"]["image"] == {"url": "http://images/os.img", "diskFormat": "raw"}
    assert "annotations" not in machine["metadata"]  # nothing lost: no annotation


def test_objects_an_earlier_collection_stored_at_v1beta1_are_served_and_moved_to_v1beta2_on_their_next_write(
        tmp_path: Path):
    path = tmp_path / "store.db"
    with LocalStore(str(path)) as store:
        store.create({"apiVersion": INFRA_V1, "kind": "Metal3Machine", "metadata": {"name": "m", "namespace": "ns"},
                      "spec": {"image": {"url": "http://images/os.img", "format": "raw"}}})
    old = stored_body(path, "Metal3Machine", "m")
    old.update(apiVersion=INFRA_V1, spec={"image": {"url": "http://images/os.img", "format": "raw"}})
    with sqlite3.connect(str(path)) as db:  # as the collection stored it when v1beta1 was its only version
        db.execute("UPDATE objects SET body=? WHERE kind='Metal3Machine'", (json.dumps(old),))
    with LocalStore(str(path)) as store:
        assert store.get(Ref(INFRA_V1, "Metal3Machine", "m", "ns"))["spec"]["image"]["format"] == "raw"
        current = store.get(Ref(INFRA_V2, "Metal3Machine", "m", "ns"))
        assert current["spec"]["image"]["diskFormat"] == "raw"
        store.patch(Ref(INFRA_V2, "Metal3Machine", "m", "ns"), {"spec": {"failureDomain": "az-a"}})
    moved = stored_body(path, "Metal3Machine", "m")
    assert moved["apiVersion"] == INFRA_V2
    assert moved["spec"] == {"image": {"url": "http://images/os.img", "diskFormat": "raw"}, "failureDomain": "az-a"}
