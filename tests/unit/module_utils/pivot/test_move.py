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


def build_neighbour(store: Store, share_pool: bool = False) -> None:
    """Cluster c2 beside c1 in the namespace: its Cluster and a machine, its data template taking addresses from
    c1's pool ``pool`` (``share_pool``) or from a pool of its own (``pool-c2``, c2's by spec.clusterName as
    ip-address-manager has it), an IPClaim and an IPAddress labelled c2 with their finalizers; its machine's user
    data is c1's Secret ``m0-user-data`` (shared); and a Secret labelled c2 that c1's Metal3Machine names."""
    labels = {"cluster.x-k8s.io/cluster-name": "c2"}
    cluster = _make(store, {"apiVersion": CAPI, "kind": "Cluster", "metadata": {"name": "c2", "labels": labels},
                            "spec": {"infrastructureRef": {"apiVersion": INFRA, "kind": "Metal3Cluster",
                                                           "name": "c2"}}})
    _make(store, {"apiVersion": INFRA, "kind": "Metal3Cluster",
                  "metadata": {"name": "c2", "labels": labels, "ownerReferences": [_owner(cluster)]},
                  "spec": {"controlPlaneEndpoint": {"host": "192.0.2.50", "port": 6443}}})
    if share_pool:
        pool = store.get(Ref(IPAM, "IPPool", "pool", NS))
    else:
        pool = _make(store, {"apiVersion": IPAM, "kind": "IPPool", "metadata": {"name": "pool-c2"},
                             "spec": {**POOL_SPEC, "clusterName": "c2", "namePrefix": "pool-c2",
                                      "pools": [{"start": "192.0.2.60", "end": "192.0.2.70"}]}})
    pool_name = pool["metadata"]["name"]
    network = {"id": "eth0", "link": "eth0", "ipAddressFromIPPool": pool_name}
    _make(store, {"apiVersion": INFRA, "kind": "Metal3DataTemplate", "metadata": {"name": "tpl-c2", "labels": labels},
                  "spec": {"clusterName": "c2", "networkData": {"networks": {"ipv4": [network]}}}})
    machine = _make(store, {"apiVersion": INFRA, "kind": "Metal3Machine",
                            "metadata": {"name": "b0", "labels": labels,
                                         "finalizers": ["metal3machine.infrastructure.cluster.x-k8s.io"]},
                            "spec": {"image": {"url": "http://x/i.img", "checksum": "http://x/i.sha"},
                                     "dataTemplate": {"name": "tpl-c2"}, "userData": {"name": "m0-user-data"}}})
    claim = _make(store, {"apiVersion": IPAM, "kind": "IPClaim",
                          "metadata": {"name": "b0-pool", "labels": labels, "ownerReferences": [_owner(machine)],
                                       "finalizers": ["ipclaim.ipam.metal3.io"]},
                          "spec": {"pool": {"name": pool_name}}})
    address = "192.0.2.21" if share_pool else "192.0.2.60"
    _make(store, {"apiVersion": IPAM, "kind": "IPAddress",
                  "metadata": {"name": f"{pool_name}-{address.replace('.', '-')}", "labels": labels,
                               "ownerReferences": [_owner(pool), _owner(claim)],
                               "finalizers": ["ipaddress.ipam.metal3.io"]},
                  "spec": {"pool": {"name": pool_name}, "claim": {"name": "b0-pool"}, "address": address,
                           "prefix": 24}})
    _make(store, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c2-metadata", "labels": labels},
                  "stringData": {"metaData": "{}"}})
    store.patch(Ref(INFRA, "Metal3Machine", "m0", NS), {"spec": {"metaData": {"name": "c2-metadata"}}})


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


def build(store: Store, neighbour: bool) -> None:
    build_cluster(store)
    if neighbour:
        build_neighbour(store)


def clean_move(tmp_path: Path, include_hosts: bool, neighbour: bool) -> tuple[dict[tuple[str, str], Object], set[Any]]:
    with LocalStore(str(tmp_path / "clean-s.db")) as source, LocalStore(str(tmp_path / "clean-t.db")) as target:
        build(source, neighbour)
        move_cluster(source, target, "c1", NS, include_hosts=include_hosts)
        return {k: comparable(v) for k, v in everything(target).items()}, set(everything(source))


@pytest.mark.parametrize("include_hosts, neighbour", [(False, False), (True, False), (False, True)])
def test_a_move_killed_at_any_write_finishes_when_run_again(tmp_path, include_hosts, neighbour):
    """``neighbour``: with cluster c2 beside c1, sharing a Secret: what stays is never written, at any crash."""
    expected_target, expected_source = clean_move(tmp_path, include_hosts, neighbour)
    n = 0
    while True:
        with LocalStore(str(tmp_path / f"s{n}.db")) as source, LocalStore(str(tmp_path / f"t{n}.db")) as target:
            build(source, neighbour)
            before = everything(source)
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
            after = everything(source)
            assert set(after) == expected_source, f"killed at write {n}"
            assert all(after[k] == before[k] for k in after), f"killed at write {n}"  # what stays: untouched
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


C2 = {("Cluster", "c2"), ("Metal3Cluster", "c2"), ("IPPool", "pool-c2"), ("Metal3DataTemplate", "tpl-c2"),
      ("Metal3Machine", "b0"), ("IPClaim", "b0-pool"), ("IPAddress", "pool-c2-192-0-2-60"), ("Secret", "c2-metadata")}


def resolves(store: Store, obj: Object) -> bool:
    """Whether what ``obj`` uses is in ``store``: its owners (by uid), its pool, claim, data template, user data."""
    uids = {o["metadata"]["uid"] for o in everything(store).values()}
    spec = obj.get("spec") or {}
    named = [(IPAM, "IPPool", (spec.get("pool") or {}).get("name")),
             (IPAM, "IPClaim", (spec.get("claim") or {}).get("name")),
             (INFRA, "Metal3DataTemplate", (spec.get("dataTemplate") or {}).get("name")),
             ("v1", "Secret", (spec.get("userData") or {}).get("name"))]
    for network in ((spec.get("networkData") or {}).get("networks") or {}).get("ipv4") or []:
        named.append((IPAM, "IPPool", network["ipAddressFromIPPool"]))
    return all(r["uid"] in uids for r in obj["metadata"].get("ownerReferences") or []) and \
        all(store.get_if_exists(Ref(api, kind, name, NS)) is not None for api, kind, name in named if name)


def test_what_another_cluster_uses_or_owns_stays_in_the_source_as_it_was(stores):
    """c1 and c2 share c1's user data Secret, and c1's machine names a Secret of c2's: both stay, listed with why;
    every object of c2 stays exactly as it was (finalizers, resourceVersion) and what it uses is still there."""
    source, target = stores
    build_cluster(source)
    build_neighbour(source)
    before = everything(source)
    stays = {("Secret", "m0-user-data"), ("Secret", "c2-metadata")}
    plan = move_cluster(source, target, "c1", NS, dry_run=True)
    result = move_cluster(source, target, "c1", NS)
    for outcome in (plan, result):
        assert {(m["kind"], m["name"]) for m in outcome.moved} == WORKLOAD - stays
        assert [(s["kind"], s["name"]) for s in outcome.stayed] == [("Secret", "c2-metadata"),
                                                                    ("Secret", "m0-user-data")]
        reasons = {s["name"]: s["reason"] for s in outcome.stayed}
        assert reasons["m0-user-data"] == "used outside the move by Metal3Machine tenant/b0 too"
        assert reasons["c2-metadata"].startswith("belongs to cluster c2, not to c1 (named by Metal3Machine tenant/m0")
        assert "stay in the source (see stayed)" in outcome.message
    after_source, after_target = everything(source), everything(target)
    assert set(after_target) == WORKLOAD - stays
    assert set(after_source) == HOSTS | {("Metal3Machine", "other")} | C2 | stays
    for key in C2 | stays:
        assert after_source[key] == before[key], key  # untouched: not paused, finalizers kept, same version
        assert resolves(source, after_source[key]), key
    assert after_source[("IPAddress", "pool-c2-192-0-2-60")]["metadata"]["finalizers"] == ["ipaddress.ipam.metal3.io"]
    assert not move_cluster(source, target, "c1", NS).changed


def _share_pool(source: Store) -> None:
    build_neighbour(source, share_pool=True)


def _share_owned_secret(source: Store) -> None:
    build_neighbour(source)
    m3m = source.get(Ref(INFRA, "Metal3Machine", "m0", NS))
    source.patch(Ref("v1", "Secret", "m0-user-data", NS), {"metadata": {"ownerReferences": [_owner(m3m)]}})


def _use_the_neighbour_s_pool(source: Store) -> None:
    build_neighbour(source)
    network = {"id": "eth0", "link": "eth0", "ipAddressFromIPPool": "pool-c2"}
    source.patch(Ref(INFRA, "Metal3DataTemplate", "tpl", NS),
                 {"spec": {"networkData": {"networks": {"ipv4": [network]}}}})


def _share_bmc_credentials(source: Store) -> None:
    _make(source, {"apiVersion": BMH, "kind": "BareMetalHost", "metadata": {"name": "host-1"},
                   "spec": {"online": False, "bootMACAddress": "52:54:00:00:00:02",
                            "bmc": {"address": "ipmi://192.0.2.2", "credentialsName": "host-0-bmc"}}},
          {"provisioning": {"state": "available"}, "operationalStatus": "OK"})


@pytest.mark.parametrize("share, include_hosts, refusal", [
    pytest.param(_share_pool, False,
                 "IPPool tenant/pool: used outside the move of cluster c1 by IPAddress tenant/pool-192-0-2-21, "
                 "IPClaim tenant/b0-pool, Metal3DataTemplate tenant/tpl-c2: a pool is the record",
                 id="a pool both clusters take addresses from"),
    pytest.param(_use_the_neighbour_s_pool, False,
                 "IPPool tenant/pool-c2: belongs to cluster c2, and is needed by Metal3DataTemplate tenant/tpl of "
                 "cluster c1", id="the other cluster's pool"),
    pytest.param(_share_owned_secret, False,
                 "Secret tenant/m0-user-data: used outside the move of cluster c1 by Metal3Machine tenant/b0, "
                 "and it is owned by Metal3Machine tenant/m0, which moves",
                 id="a Secret another cluster uses, owned by a machine that moves"),
    pytest.param(_share_bmc_credentials, True,
                 "Secret tenant/host-0-bmc: used outside the move of cluster c1 by BareMetalHost tenant/host-1, "
                 "and it holds the BMC credentials of a host that moves",
                 id="BMC credentials of a host that moves and one that stays"),
])
def test_what_cannot_be_split_from_its_users_refuses_the_move_naming_them(stores, share, include_hosts, refusal):
    source, target = stores
    build_cluster(source)
    share(source)
    before = everything(source)
    for dry_run in (True, False):
        with pytest.raises(MoveRefused) as refused:
            move_cluster(source, target, "c1", NS, include_hosts=include_hosts, dry_run=dry_run)
        assert str(refused.value).startswith("the move of cluster tenant/c1 is refused, nothing was written: ")
        assert refusal in str(refused.value)
    assert everything(source) == before and everything(target) == {}
