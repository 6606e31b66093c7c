"""Moving a cluster between two stores (a pivot): what moves, in what order, and that a move killed at any write
finishes when run again, exactly as a move that was never killed."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils import engine  # noqa: F401  # pylint: disable=unused-import
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.pivot.move import (
    MOVING_ANNOTATION,
    SOURCE_UID_ANNOTATION,
    MoveRefused,
    move_cluster,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.harness.crashing_store import Crash, CrashingStore, Writes

NS = "tenant"
INFRA = "infrastructure.cluster.x-k8s.io/v1beta2"
CAPI = "cluster.x-k8s.io/v1beta1"
IPAM = "ipam.metal3.io/v1alpha1"
BMH = "metal3.io/v1alpha1"
LABEL = {"cluster.x-k8s.io/cluster-name": "c1"}
POOL_SPEC = {"namePrefix": "pool", "pools": [{"start": "192.0.2.20", "end": "192.0.2.30"}], "prefix": 24}


def _owner(obj: Object) -> dict[str, Any]:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": True}


def _make(store: Store, obj: Object, status: dict[str, Any] | None = None) -> Object:
    obj["metadata"].setdefault("namespace", NS)
    made = store.create(obj)
    if status is not None:
        made = store.update_status({**made, "status": status})
    return made


def build_cluster(store: Store, with_host: bool = True, host_state: str = "provisioned") -> None:
    """A small cluster: Cluster → Metal3Cluster; a Machine → Metal3Machine on a host, its data template naming a
    pool, a rendered user-data Secret owned by the machine, an IPClaim and IPAddress from the pool; and what stays:
    a host with its BMC Secret, and another cluster's Metal3Machine."""
    infra_ref = {"apiVersion": INFRA, "kind": "Metal3Cluster", "name": "c1"}
    cluster = _make(store, {"apiVersion": CAPI, "kind": "Cluster", "metadata": {"name": "c1", "labels": LABEL},
                            "spec": {"infrastructureRef": infra_ref}},
                    {"phase": "Provisioned"})
    _make(store, {"apiVersion": INFRA, "kind": "Metal3Cluster",
                  "metadata": {"name": "c1", "labels": LABEL, "ownerReferences": [_owner(cluster)]},
                  "spec": {"controlPlaneEndpoint": {"host": "192.0.2.10", "port": 6443}}},
          {"initialization": {"provisioned": True}})
    pool = _make(store, {"apiVersion": IPAM, "kind": "IPPool", "metadata": {"name": "pool"},
                         "spec": POOL_SPEC})
    network = {"id": "eth0", "link": "eth0", "ipAddressFromIPPool": "pool"}
    _make(store, {"apiVersion": INFRA, "kind": "Metal3DataTemplate", "metadata": {"name": "tpl", "labels": LABEL},
                  "spec": {"clusterName": "c1", "networkData": {"networks": {"ipv4": [network]}}}})
    machine = _make(store, {"apiVersion": CAPI, "kind": "Machine",
                            "metadata": {"name": "m0", "labels": LABEL, "ownerReferences": [_owner(cluster)]},
                            "spec": {"clusterName": "c1", "infrastructureRef": {
                                "apiVersion": INFRA, "kind": "Metal3Machine", "name": "m0"}}},
                    {"phase": "Running"})
    m3m = _make(store, {"apiVersion": INFRA, "kind": "Metal3Machine",
                        "metadata": {"name": "m0", "ownerReferences": [_owner(machine)],
                                     "annotations": {"metal3.io/BareMetalHost": f"{NS}/host-0"},
                                     "finalizers": ["metal3machine.infrastructure.cluster.x-k8s.io"]},
                        "spec": {"image": {"url": "http://x/i.img", "checksum": "http://x/i.sha"},
                                 "dataTemplate": {"name": "tpl"}, "userData": {"name": "m0-user-data"}}},
                {"initialization": {"provisioned": True},
                 "addresses": [{"type": "InternalIP", "address": "192.0.2.20"}]})
    _make(store, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "m0-user-data"},
                  "data": {"userData": "I2Nsb3VkLWNvbmZpZw=="}})
    claim = _make(store, {"apiVersion": IPAM, "kind": "IPClaim",
                          "metadata": {"name": "m0-pool", "ownerReferences": [_owner(m3m)]},
                          "spec": {"pool": {"name": "pool"}}},
                  {"address": {"name": "pool-192-0-2-20"}})
    _make(store, {"apiVersion": IPAM, "kind": "IPAddress",
                  "metadata": {"name": "pool-192-0-2-20", "ownerReferences": [_owner(pool), _owner(claim)]},
                  "spec": {"pool": {"name": "pool"}, "claim": {"name": "m0-pool"}, "address": "192.0.2.20",
                           "prefix": 24}})
    other_labels = {"cluster.x-k8s.io/cluster-name": "c2"}
    _make(store, {"apiVersion": INFRA, "kind": "Metal3Machine", "metadata": {"name": "other", "labels": other_labels},
                  "spec": {"image": {"url": "http://x/i.img", "checksum": "http://x/i.sha"}}})
    if with_host:
        _make(store, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "host-0-bmc"},
                      "data": {"username": "YWRtaW4=", "password": "cGFzcw=="}})
        _make(store, {"apiVersion": BMH, "kind": "BareMetalHost",
                      "metadata": {"name": "host-0", "finalizers": ["baremetalhost.metal3.io"]},
                      "spec": {"online": True, "bootMACAddress": "52:54:00:00:00:01",
                               "bmc": {"address": "ipmi://192.0.2.1", "credentialsName": "host-0-bmc"},
                               "image": {"url": "http://x/i.img", "checksum": "http://x/i.sha"},
                               "consumerRef": {"apiVersion": INFRA, "kind": "Metal3Machine", "name": "m0",
                                               "namespace": NS}}},
              {"provisioning": {"state": host_state, "ID": "node-uuid"}, "operationalStatus": "OK",
               "poweredOn": True, "errorCount": 0, "lastUpdated": "2024-01-01T00:00:00Z"})


WORKLOAD = {("Cluster", "c1"), ("Metal3Cluster", "c1"), ("Metal3DataTemplate", "tpl"), ("IPPool", "pool"),
            ("Machine", "m0"), ("Metal3Machine", "m0"), ("Secret", "m0-user-data"), ("IPClaim", "m0-pool"),
            ("IPAddress", "pool-192-0-2-20")}
HOSTS = {("BareMetalHost", "host-0"), ("Secret", "host-0-bmc")}


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[LocalStore, LocalStore]]:
    with LocalStore(str(tmp_path / "source.db")) as source, LocalStore(str(tmp_path / "target.db")) as target:
        yield source, target


def everything(store: Store) -> dict[tuple[str, str], Object]:
    found = {}
    for api, kind in ((CAPI, "Cluster"), (CAPI, "Machine"), (INFRA, "Metal3Cluster"), (INFRA, "Metal3Machine"),
                      (INFRA, "Metal3DataTemplate"), (IPAM, "IPPool"), (IPAM, "IPClaim"), (IPAM, "IPAddress"),
                      ("v1", "Secret"), (BMH, "BareMetalHost")):
        for obj in store.list(api, kind, NS):
            found[(kind, obj["metadata"]["name"])] = obj
    return found


def comparable(obj: Object) -> Object:
    """What a move must keep: labels, the user's annotations, spec, status, data; the owners by kind and name."""
    metadata = obj["metadata"]
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items() if k != SOURCE_UID_ANNOTATION}
    return {"labels": metadata.get("labels"), "annotations": annotations,
            "owners": sorted((r["kind"], r["name"]) for r in metadata.get("ownerReferences") or []),
            **{k: v for k, v in obj.items() if k in ("spec", "status", "data")}}


def test_the_cluster_s_graph_moves_owners_first_and_the_rest_stays(stores):
    source, target = stores
    build_cluster(source)
    before = everything(source)
    result = move_cluster(source, target, "c1", NS)
    assert result.changed
    moved = [(m["kind"], m["name"]) for m in result.moved]
    assert set(moved) == WORKLOAD
    assert all(m["namespace"] == NS for m in result.moved)
    position = {key: i for i, key in enumerate(moved)}
    for before_key, after_key in ((("Cluster", "c1"), ("Metal3Cluster", "c1")),
                                  (("Cluster", "c1"), ("Machine", "m0")),
                                  (("Machine", "m0"), ("Metal3Machine", "m0")),
                                  (("Metal3Machine", "m0"), ("IPClaim", "m0-pool")),
                                  (("IPClaim", "m0-pool"), ("IPAddress", "pool-192-0-2-20")),
                                  (("IPPool", "pool"), ("IPAddress", "pool-192-0-2-20"))):
        assert position[before_key] < position[after_key], (before_key, after_key)
    after_source, after_target = everything(source), everything(target)
    assert set(after_target) == WORKLOAD
    assert set(after_source) == HOSTS | {("Metal3Machine", "other")}
    for key in WORKLOAD:
        assert comparable(after_target[key]) == comparable(before[key]), key
        assert after_target[key]["metadata"]["annotations"][SOURCE_UID_ANNOTATION] == before[key]["metadata"]["uid"]
    # ownerReferences point at the target's objects
    address = after_target[("IPAddress", "pool-192-0-2-20")]
    uids = {r["kind"]: r["uid"] for r in address["metadata"]["ownerReferences"]}
    assert uids == {"IPPool": after_target[("IPPool", "pool")]["metadata"]["uid"],
                    "IPClaim": after_target[("IPClaim", "m0-pool")]["metadata"]["uid"]}
    # the host that stays is left as it was: not paused, its status unchanged
    assert comparable(after_source[("BareMetalHost", "host-0")]) == comparable(before[("BareMetalHost", "host-0")])


def test_a_second_move_changes_nothing(stores):
    source, target = stores
    build_cluster(source)
    move_cluster(source, target, "c1", NS)
    snapshot = everything(target)
    again = move_cluster(source, target, "c1", NS)
    assert not again.changed and again.moved == []
    assert everything(target) == snapshot


def test_a_dry_run_plans_and_writes_nothing(stores):
    source, target = stores
    build_cluster(source)
    before = everything(source)
    plan = move_cluster(source, target, "c1", NS, dry_run=True)
    assert plan.changed and {(m["kind"], m["name"]) for m in plan.moved} == WORKLOAD
    assert everything(source) == before and everything(target) == {}


def test_with_hosts_the_consumed_host_and_its_bmc_secret_move_with_their_status(stores):
    source, target = stores
    build_cluster(source)
    host_before = everything(source)[("BareMetalHost", "host-0")]
    result = move_cluster(source, target, "c1", NS, include_hosts=True)
    assert {(m["kind"], m["name"]) for m in result.moved} == WORKLOAD | HOSTS
    host = everything(target)[("BareMetalHost", "host-0")]
    assert host["status"] == host_before["status"]
    annotations = host["metadata"]["annotations"]
    assert "baremetalhost.metal3.io/paused" not in annotations and MOVING_ANNOTATION not in annotations
    assert json.loads(annotations["baremetalhost.metal3.io/status"]) == host_before["status"]
    assert set(everything(source)) == {("Metal3Machine", "other")}


def test_what_its_user_had_paused_stays_paused(stores):
    source, target = stores
    build_cluster(source)
    source.patch(Ref(CAPI, "Cluster", "c1", NS), {"spec": {"paused": True}})
    source.patch(Ref(INFRA, "Metal3Machine", "m0", NS),
                 {"metadata": {"annotations": {"cluster.x-k8s.io/paused": ""}}})
    move_cluster(source, target, "c1", NS)
    moved = everything(target)
    assert moved[("Cluster", "c1")]["spec"]["paused"] is True
    assert "cluster.x-k8s.io/paused" in moved[("Metal3Machine", "m0")]["metadata"]["annotations"]
    assert "cluster.x-k8s.io/paused" not in moved[("Metal3Cluster", "c1")]["metadata"].get("annotations", {})


def clean_move(tmp_path: Path, include_hosts: bool) -> tuple[dict[tuple[str, str], Object], set[Any]]:
    with LocalStore(str(tmp_path / "clean-s.db")) as source, LocalStore(str(tmp_path / "clean-t.db")) as target:
        build_cluster(source)
        move_cluster(source, target, "c1", NS, include_hosts=include_hosts)
        return {k: comparable(v) for k, v in everything(target).items()}, set(everything(source))


@pytest.mark.parametrize("include_hosts", [False, True])
def test_a_move_killed_at_any_write_finishes_when_run_again(tmp_path, include_hosts):
    expected_target, expected_source = clean_move(tmp_path, include_hosts)
    n = 0
    while True:
        with LocalStore(str(tmp_path / f"s{n}.db")) as source, LocalStore(str(tmp_path / f"t{n}.db")) as target:
            build_cluster(source)
            counter = Writes(n)
            try:
                move_cluster(CrashingStore(source, counter), CrashingStore(target, counter), "c1", NS,
                             include_hosts=include_hosts)
                finished = True
            except Crash:
                finished = False
                move_cluster(source, target, "c1", NS, include_hosts=include_hosts)
            moved = everything(target)
            assert {k: comparable(v) for k, v in moved.items()} == expected_target, f"killed at write {n}"
            assert set(everything(source)) == expected_source, f"killed at write {n}"
            assert not move_cluster(source, target, "c1", NS, include_hosts=include_hosts).changed
        if finished:
            break
        n += 1
    assert n > 20  # every write was a crash point: pauses, creates, statuses, finalizers, deletes, unpauses


def test_refusals_name_the_problem_and_write_nothing(stores):
    source, target = stores
    build_cluster(source, host_state="provisioning")
    before = everything(source)
    with pytest.raises(MoveRefused, match="Cluster tenant/absent: not found in the source"):
        move_cluster(source, target, "absent", NS)
    with pytest.raises(MoveRefused, match="BareMetalHost tenant/host-0: is provisioning, not in a steady state"):
        move_cluster(source, target, "c1", NS, include_hosts=True)
    target.create({"apiVersion": IPAM, "kind": "IPPool", "metadata": {"name": "pool", "namespace": NS},
                   "spec": POOL_SPEC})
    with pytest.raises(MoveRefused, match="IPPool tenant/pool: exists in the target and was not moved there"):
        move_cluster(source, target, "c1", NS)
    with pytest.raises(Invalid, match="cluster: Invalid value: 'C_1'"):
        move_cluster(source, target, "C_1", NS)
    with pytest.raises(Invalid, match="namespace: Invalid value"):
        move_cluster(source, target, "c1", "../x")
    assert everything(source) == before
    assert set(everything(target)) == {("IPPool", "pool")}
