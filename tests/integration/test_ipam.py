"""IP allocation through the engine's reconcile functions, on both backends."""
from __future__ import annotations

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import (
    CAPI_IPAM_API,
    EXHAUSTED,
    IPAM_API,
    reconcile_ip_address_claim,
    reconcile_ip_claim,
    reconcile_ip_pool,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.store.writes import remove_finalizer


def make_pool(store, namespace, name="pool", labels=None, **spec):
    spec.setdefault("pools", [{"start": "192.168.10.10", "end": "192.168.10.20"}])
    spec.setdefault("prefix", 24)
    spec = {k: v for k, v in spec.items() if v is not None}
    return store.create({"apiVersion": IPAM_API, "kind": "IPPool",
                         "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
                         "spec": {"namePrefix": name, **spec}})


def claim(store, namespace, name, pool="pool", labels=None, address=None):
    metadata = {"name": name, "namespace": namespace, "labels": labels or {}}
    if address:
        metadata["annotations"] = {"ipAddress": address}
    spec = {"pool": {"name": pool}} if pool else {}
    store.create({"apiVersion": IPAM_API, "kind": "IPClaim", "metadata": metadata, "spec": spec})
    return reconcile_ip_claim(store, Ref(IPAM_API, "IPClaim", name, namespace))


def release(store, namespace, name):
    ref = Ref(IPAM_API, "IPClaim", name, namespace)
    store.delete(ref)
    return reconcile_ip_claim(store, ref)


def addresses(store, namespace):
    return sorted(a["spec"]["address"] for a in store.list(IPAM_API, "IPAddress", namespace))


def test_sequential_allocation_takes_the_lowest_free_address_and_skips_the_gateway(store, namespace):
    make_pool(store, namespace, gateway="192.168.10.10", dnsServers=["192.168.10.53"])
    first = claim(store, namespace, "c1")
    assert first.summary() == {"address": "192.168.10.11", "prefix": 24, "gateway": "192.168.10.10",
                               "dns_servers": ["192.168.10.53"]}
    assert first.address["metadata"]["name"] == "pool-192-168-10-11"
    assert claim(store, namespace, "c2").summary()["address"] == "192.168.10.12"
    status = store.get(Ref(IPAM_API, "IPClaim", "c1", namespace))["status"]
    assert status["address"]["name"] == "pool-192-168-10-11"


def test_the_same_claim_always_gets_its_same_address(store, namespace):
    make_pool(store, namespace)
    first = claim(store, namespace, "c1")
    for _again in range(3):
        assert reconcile_ip_claim(store, Ref(IPAM_API, "IPClaim", "c1", namespace)).summary() == first.summary()
    assert addresses(store, namespace) == ["192.168.10.10"]


def test_a_released_address_is_the_next_one_handed_out(store, namespace):
    make_pool(store, namespace)
    for name in ("c1", "c2", "c3"):
        claim(store, namespace, name)
    assert release(store, namespace, "c2").released
    with pytest.raises(NotFound):
        store.get(Ref(IPAM_API, "IPClaim", "c2", namespace))
    assert addresses(store, namespace) == ["192.168.10.10", "192.168.10.12"]
    assert claim(store, namespace, "c4").summary()["address"] == "192.168.10.11"


def test_a_requested_address_is_honoured_or_refused_with_a_reason(store, namespace):
    make_pool(store, namespace)
    assert claim(store, namespace, "wants-15", address="192.168.10.15").summary()["address"] == "192.168.10.15"
    taken = claim(store, namespace, "wants-15-too", address="192.168.10.15")
    assert taken.error == "Requested IP not available"
    outside = claim(store, namespace, "wants-outside", address="10.9.9.9")
    assert outside.error == EXHAUSTED  # upstream's words for an address no entry holds
    bad = claim(store, namespace, "wants-nonsense", address="not-an-ip")
    assert bad.error == 'Invalid ipAddress annotation "not-an-ip": not a valid IP address'
    assert store.get(Ref(IPAM_API, "IPClaim", "wants-nonsense", namespace))["status"]["errorMessage"] == bad.error


def test_a_claim_asking_for_the_gateway_is_refused_naming_the_annotation(store, namespace):
    make_pool(store, namespace, gateway="192.168.10.10")
    refused = claim(store, namespace, "wants-gateway", address="192.168.10.10")
    assert refused.error == ('Invalid ipAddress annotation "192.168.10.10": the gateway of spec.pools[0], which is '
                             "never handed out")
    assert refused.address is None and addresses(store, namespace) == []


def test_pre_allocations_stay_reserved_for_their_claim(store, namespace):
    make_pool(store, namespace, preAllocations={"reserved": "192.168.10.10"})
    assert claim(store, namespace, "other").summary()["address"] == "192.168.10.11"
    assert claim(store, namespace, "reserved").summary()["address"] == "192.168.10.10"
    release(store, namespace, "reserved")
    assert claim(store, namespace, "third").summary()["address"] == "192.168.10.12"


def test_an_exhausted_pool_says_so_and_failed_claims_leave_nothing_behind(store, namespace):
    make_pool(store, namespace, pools=[{"start": "192.168.10.10", "end": "192.168.10.11"}])
    got = [claim(store, namespace, f"c{i}").summary()["address"] for i in (1, 2)]
    assert got == ["192.168.10.10", "192.168.10.11"]
    failed = claim(store, namespace, "c3")
    assert failed.error == EXHAUSTED
    assert failed.waits_on == [Ref(IPAM_API, "IPPool", "pool", namespace)]  # only its pool's change can serve it
    assert store.get(Ref(IPAM_API, "IPClaim", "c3", namespace))["status"]["errorMessage"] == EXHAUSTED
    assert release(store, namespace, "c3").released
    assert addresses(store, namespace) == ["192.168.10.10", "192.168.10.11"]
    assert [c["metadata"]["name"] for c in store.list(IPAM_API, "IPClaim", namespace)] == ["c1", "c2"]


def test_a_claim_of_a_missing_pool_waits_on_that_pool(store, namespace):
    waiting = claim(store, namespace, "c", pool="later")
    assert waiting.waiting == f"IPPool {namespace}/later not found"
    assert waiting.waits_on == [Ref(IPAM_API, "IPPool", "later", namespace)]


def test_a_pool_cannot_go_while_it_has_allocations(store, namespace):
    make_pool(store, namespace)
    claim(store, namespace, "c1")
    pool_ref = Ref(IPAM_API, "IPPool", "pool", namespace)
    assert store.delete(pool_ref) is not None
    state = reconcile_ip_pool(store, pool_ref)
    assert state.waiting and "1 allocations" in state.waiting
    assert store.get(pool_ref)
    release(store, namespace, "c1")
    assert reconcile_ip_pool(store, pool_ref).removed
    with pytest.raises(NotFound):
        store.get(pool_ref)


def test_the_pool_status_lists_its_allocations(store, namespace):
    make_pool(store, namespace)
    claim(store, namespace, "c1")
    claim(store, namespace, "c2")
    state = reconcile_ip_pool(store, Ref(IPAM_API, "IPPool", "pool", namespace))
    assert state.allocations == {"c1": "192.168.10.10", "c2": "192.168.10.11"}
    status = store.get(Ref(IPAM_API, "IPPool", "pool", namespace))["status"]
    assert status["indexes"] == status["allocations"] == state.allocations  # upstream's name, and ours


def test_ipv6_and_point_to_point_entries(store, namespace):
    make_pool(store, namespace, "v6", pools=[{"subnet": "2001:db8::/127"}], prefix=None)
    got = [claim(store, namespace, f"c{i}", pool="v6").summary() for i in range(2)]
    assert [g["address"] for g in got] == ["2001:db8::", "2001:db8::1"]
    assert got[0]["prefix"] == 127
    assert got[0]["address"] and store.get(Ref(IPAM_API, "IPAddress", "v6-2001-db8", namespace))  # upstream's name
    assert claim(store, namespace, "c2", pool="v6").error == EXHAUSTED


def test_random_allocation_stays_in_the_pool_and_never_repeats(store, namespace):
    make_pool(store, namespace, allocationStrategy="random")
    got = [claim(store, namespace, f"c{i}").summary()["address"] for i in range(11)]
    assert sorted(got) == [f"192.168.10.{i}" for i in range(10, 21)]
    assert claim(store, namespace, "c11").error == EXHAUSTED


POOLS_BY_LABEL = [
    ({"cluster.x-k8s.io/ip-pool-name": "named"}, "192.168.1.10"),
    ({"cluster.x-k8s.io/ip-pool-group": "prod", "cluster.x-k8s.io/network-name": "storage"}, "192.168.2.10"),
    ({}, "192.168.3.10"),
]


@pytest.mark.parametrize(("labels", "expected"), POOLS_BY_LABEL, ids=["by-name", "by-group-and-network", "default"])
def test_pools_chosen_by_labels(store, namespace, labels, expected):
    make_pool(store, namespace, "named", pools=[{"start": "192.168.1.10", "end": "192.168.1.20"}])
    make_pool(store, namespace, "storage", pools=[{"start": "192.168.2.10", "end": "192.168.2.20"}],
              labels={"cluster.x-k8s.io/ip-pool-group": "prod", "cluster.x-k8s.io/network-name": "storage"})
    make_pool(store, namespace, "fallback", pools=[{"start": "192.168.3.10", "end": "192.168.3.20"}],
              labels={"ippool.cluster.x-k8s.io/is-default": "true"})
    assert claim(store, namespace, "c", pool=None, labels=labels).summary()["address"] == expected


def test_a_claim_with_no_matching_pool_waits_with_a_clear_message(store, namespace):
    waiting = claim(store, namespace, "c", pool=None, labels={"cluster.x-k8s.io/network-name": "nowhere"})
    assert waiting.requeue and waiting.address is None
    # Any pool of the namespaces the labels are looked up in may come to match.
    assert waiting.waits_on == [Ref(IPAM_API, "IPPool", "", namespace), Ref(IPAM_API, "IPPool", "", "default")]
    message = store.get(Ref(IPAM_API, "IPClaim", "c", namespace))["status"]["errorMessage"]
    assert message == "no IPPool matches cluster.x-k8s.io/network-name=nowhere"
    make_pool(store, namespace, "late", labels={"cluster.x-k8s.io/network-name": "nowhere"})
    assert reconcile_ip_claim(store, Ref(IPAM_API, "IPClaim", "c", namespace)).summary()["address"] == "192.168.10.10"
    assert "errorMessage" not in store.get(Ref(IPAM_API, "IPClaim", "c", namespace))["status"]


def test_a_cluster_api_ip_address_claim_is_answered_with_an_ip_address(store, namespace):
    make_pool(store, namespace, gateway="192.168.10.1")
    ref = Ref(CAPI_IPAM_API, "IPAddressClaim", "machine-0-eth0", namespace)
    store.create({"apiVersion": CAPI_IPAM_API, "kind": "IPAddressClaim",
                  "metadata": {"name": ref.name, "namespace": namespace},
                  "spec": {"poolRef": {"apiGroup": "ipam.metal3.io", "kind": "IPPool", "name": "pool"}}})
    result = reconcile_ip_address_claim(store, ref)
    assert result.summary()["address"] == "192.168.10.10"
    answer = store.get(Ref(CAPI_IPAM_API, "IPAddress", "machine-0-eth0", namespace))
    assert answer["spec"] == {"address": "192.168.10.10", "prefix": 24, "gateway": "192.168.10.1",
                              "poolRef": {"apiGroup": "ipam.metal3.io", "kind": "IPPool", "name": "pool"},
                              "claimRef": {"name": "machine-0-eth0"}}
    claim_uid, pool_uid = store.get(ref)["metadata"]["uid"], store.get(Ref(IPAM_API, "IPPool", "pool", namespace))[
        "metadata"]["uid"]
    # owned as the contract says: by the claim (controller), and by the pool
    assert [(o["kind"], o["uid"], o["controller"], o["blockOwnerDeletion"])
            for o in answer["metadata"]["ownerReferences"]] == [("IPAddressClaim", claim_uid, True, True),
                                                                ("IPPool", pool_uid, False, True)]
    status = store.get(ref)["status"]
    assert status["addressRef"] == {"name": "machine-0-eth0"}
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [("Ready", "True", "Ready")]

    store.delete(ref)
    assert reconcile_ip_address_claim(store, ref).released
    assert addresses(store, namespace) == []
    with pytest.raises(NotFound):
        store.get(Ref(CAPI_IPAM_API, "IPAddress", "machine-0-eth0", namespace))


def test_an_exhausted_cluster_api_claim_is_not_ready_with_upstreams_reason(store, namespace):
    make_pool(store, namespace, pools=[{"start": "192.168.10.10", "end": "192.168.10.10"}])
    claim(store, namespace, "c1")
    ref = Ref(CAPI_IPAM_API, "IPAddressClaim", "late", namespace)
    store.create({"apiVersion": CAPI_IPAM_API, "kind": "IPAddressClaim",
                  "metadata": {"name": "late", "namespace": namespace},
                  "spec": {"poolRef": {"apiGroup": "ipam.metal3.io", "kind": "IPPool", "name": "pool"}}})
    assert reconcile_ip_address_claim(store, ref).error == EXHAUSTED
    ready = store.get(ref)["status"]["conditions"][0]
    assert (ready["status"], ready["reason"], ready["message"]) == ("False", "PoolExhausted", EXHAUSTED)


def test_a_reservation_left_by_a_crash_is_taken_up_not_leaked(store, namespace):
    make_pool(store, namespace)
    # What a reconcile leaves when it dies after reserving 192.168.10.15 and before creating its IPAddress.
    store.create({"apiVersion": IPAM_API, "kind": "IPClaim",
                  "metadata": {"name": "crashed", "namespace": namespace, "finalizers": ["ipclaim.ipam.metal3.io"],
                               "annotations": {"ipam.metal3.io/ip-address": "192.168.10.15"}},
                  "spec": {"pool": {"name": "pool"}}})
    result = reconcile_ip_claim(store, Ref(IPAM_API, "IPClaim", "crashed", namespace))
    assert result.summary()["address"] == "192.168.10.15"
    assert addresses(store, namespace) == ["192.168.10.15"]


def _reconcile_in_a_process(store_path: str, namespace: str, barrier, results) -> None:
    from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

    with LocalStore(store_path) as store:
        barrier.wait()
        results.put(reconcile_ip_claim(store, Ref(IPAM_API, "IPClaim", "contested", namespace)).summary()["address"])


@pytest.mark.parametrize("backend", ["local"], indirect=True)
def test_one_claim_reconciled_by_many_processes_at_once_holds_one_address(store, store_options, namespace):
    import multiprocessing

    make_pool(store, namespace)
    store.create({"apiVersion": IPAM_API, "kind": "IPClaim", "metadata": {"name": "contested", "namespace": namespace},
                  "spec": {"pool": {"name": "pool"}}})
    barrier, results = multiprocessing.Barrier(8), multiprocessing.Queue()
    workers = [multiprocessing.Process(target=_reconcile_in_a_process,
                                       args=(store_options["store_path"], namespace, barrier, results))
               for _worker in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    got = {results.get(timeout=5) for _worker in workers}
    assert got == {"192.168.10.10"}
    assert addresses(store, namespace) == ["192.168.10.10"]


# -- claims deleted with no reconcile of their own (issue 12, defect 7) ------------------------------

def test_a_claim_deleted_without_its_own_reconcile_is_released_by_its_pool(store, namespace):
    make_pool(store, namespace)
    for name in ("c1", "c2"):
        claim(store, namespace, name)
    ref = Ref(IPAM_API, "IPClaim", "c1", namespace)
    assert store.delete(ref) is not None, "its finalizer should hold it"
    state = reconcile_ip_pool(store, Ref(IPAM_API, "IPPool", "pool", namespace))
    assert (state.allocations, state.released) == ({"c2": "192.168.10.11"}, 1)
    with pytest.raises(NotFound):
        store.get(ref)
    assert addresses(store, namespace) == ["192.168.10.11"]
    assert claim(store, namespace, "c3").summary()["address"] == "192.168.10.10"


def test_a_pool_deleted_with_its_claims_goes_on_its_own_reconcile(store, namespace):
    make_pool(store, namespace)
    claim(store, namespace, "c1")
    # A claim that never got an address (and its finalizer) is released too.
    store.create({"apiVersion": IPAM_API, "kind": "IPClaim",
                  "metadata": {"name": "never-reconciled", "namespace": namespace,
                               "finalizers": ["ipclaim.ipam.metal3.io"]},
                  "spec": {"pool": {"name": "pool"}}})
    pool_ref = Ref(IPAM_API, "IPPool", "pool", namespace)
    for ref in (Ref(IPAM_API, "IPClaim", "c1", namespace), Ref(IPAM_API, "IPClaim", "never-reconciled", namespace),
                pool_ref):
        store.delete(ref)
    assert reconcile_ip_pool(store, pool_ref).removed
    assert store.list(IPAM_API, "IPClaim", namespace) == []
    assert addresses(store, namespace) == []
    with pytest.raises(NotFound):
        store.get(pool_ref)


def test_a_deleted_claim_held_by_another_finalizer_keeps_its_address_until_it_goes(store, namespace):
    make_pool(store, namespace)
    claim(store, namespace, "c1")
    ref = Ref(IPAM_API, "IPClaim", "c1", namespace)
    held = store.get(ref)
    held["metadata"]["finalizers"].append("example.com/hold")
    store.update(held)
    store.delete(ref)
    pool_ref = Ref(IPAM_API, "IPPool", "pool", namespace)
    assert reconcile_ip_pool(store, pool_ref).allocations == {"c1": "192.168.10.10"}
    remove_finalizer(store, ref, "example.com/hold")
    assert reconcile_ip_pool(store, pool_ref).allocations == {}
    with pytest.raises(NotFound):
        store.get(ref)


def test_an_address_whose_claim_is_gone_is_released_by_its_pool(store, namespace):
    make_pool(store, namespace)
    claim(store, namespace, "c1")
    claim(store, namespace, "c2")
    # Gone without its release: what a claimer that died after taking leaves when the claim goes meanwhile.
    ref = Ref(IPAM_API, "IPClaim", "c1", namespace)
    remove_finalizer(store, ref, "ipclaim.ipam.metal3.io")
    store.delete(ref)
    assert addresses(store, namespace) == ["192.168.10.10", "192.168.10.11"]
    state = reconcile_ip_pool(store, Ref(IPAM_API, "IPPool", "pool", namespace))
    assert (state.allocations, state.released) == ({"c2": "192.168.10.11"}, 1)
    assert addresses(store, namespace) == ["192.168.10.11"]
    assert reconcile_ip_pool(store, Ref(IPAM_API, "IPPool", "pool", namespace)).released == 0


def test_a_deleted_cluster_api_claim_is_released_by_its_pool(store, namespace):
    make_pool(store, namespace)
    ref = Ref(CAPI_IPAM_API, "IPAddressClaim", "m-0", namespace)
    store.create({"apiVersion": CAPI_IPAM_API, "kind": "IPAddressClaim",
                  "metadata": {"name": "m-0", "namespace": namespace},
                  "spec": {"poolRef": {"apiGroup": "ipam.metal3.io", "kind": "IPPool", "name": "pool"}}})
    assert reconcile_ip_address_claim(store, ref).address is not None
    store.delete(ref)
    assert reconcile_ip_pool(store, Ref(IPAM_API, "IPPool", "pool", namespace)).allocations == {}
    assert addresses(store, namespace) == []
    with pytest.raises(NotFound):
        store.get(ref)
    with pytest.raises(NotFound):
        store.get(Ref(CAPI_IPAM_API, "IPAddress", "m-0", namespace))


def test_a_v1beta1_ip_address_claim_written_by_someone_else_is_answered(store, namespace):
    """Infrastructure providers still on the v1beta1 contract write v1beta1 claims; the engine reads them at
    v1beta2 (spec.poolRef and status.addressRef are the same JSON in both) and they read their answer at v1beta1."""
    v1beta1 = "ipam.cluster.x-k8s.io/v1beta1"
    make_pool(store, namespace, gateway="192.168.10.1")
    for name, pool_ref in (("with-group", {"apiGroup": "ipam.metal3.io", "kind": "IPPool", "name": "pool"}),
                           ("without-group", {"kind": "IPPool", "name": "pool"})):  # v1beta1 allows no apiGroup
        store.create({"apiVersion": v1beta1, "kind": "IPAddressClaim",
                      "metadata": {"name": name, "namespace": namespace}, "spec": {"poolRef": pool_ref}})
        assert reconcile_ip_address_claim(store, Ref(CAPI_IPAM_API, "IPAddressClaim", name, namespace)).address
        read = store.get(Ref(v1beta1, "IPAddressClaim", name, namespace))
        assert read["status"]["addressRef"] == {"name": name}
        answer = store.get(Ref(v1beta1, "IPAddress", name, namespace))["spec"]
        assert (answer["prefix"], answer["gateway"], answer["claimRef"]) == (24, "192.168.10.1", {"name": name})
    assert addresses(store, namespace) == ["192.168.10.10", "192.168.10.11"]


def test_a_cluster_api_claim_honours_the_ip_address_annotation_as_upstream(store, namespace):
    make_pool(store, namespace)
    for name, wanted in (("wants-15", "192.168.10.15"), ("wants-garbage", "garbage")):
        store.create({"apiVersion": CAPI_IPAM_API, "kind": "IPAddressClaim",
                      "metadata": {"name": name, "namespace": namespace, "annotations": {"ipAddress": wanted}},
                      "spec": {"poolRef": {"apiGroup": "ipam.metal3.io", "kind": "IPPool", "name": "pool"}}})
    ref = Ref(CAPI_IPAM_API, "IPAddressClaim", "wants-15", namespace)
    assert reconcile_ip_address_claim(store, ref).summary()["address"] == "192.168.10.15"
    ref = Ref(CAPI_IPAM_API, "IPAddressClaim", "wants-garbage", namespace)
    assert reconcile_ip_address_claim(store, ref).error == \
        'Invalid ipAddress annotation "garbage": not a valid IP address'
    ready = store.get(ref)["status"]["conditions"][0]
    assert (ready["status"], ready["reason"], ready["message"]) == \
        ("False", "AllocationFailed", 'Invalid ipAddress annotation "garbage": not a valid IP address')


def test_a_cluster_api_claim_is_never_pointed_at_an_ip_address_of_its_name_made_by_someone_else(store, namespace):
    make_pool(store, namespace)
    store.create({"apiVersion": CAPI_IPAM_API, "kind": "IPAddress", "metadata": {"name": "m-0", "namespace": namespace},
                  "spec": {"address": "10.0.0.9", "prefix": 24, "claimRef": {"name": "m-0"},
                           "poolRef": {"apiGroup": "example.com", "kind": "Pool", "name": "p"}}})
    ref = Ref(CAPI_IPAM_API, "IPAddressClaim", "m-0", namespace)
    store.create({"apiVersion": CAPI_IPAM_API, "kind": "IPAddressClaim",
                  "metadata": {"name": "m-0", "namespace": namespace},
                  "spec": {"poolRef": {"apiGroup": "ipam.metal3.io", "kind": "IPPool", "name": "pool"}}})
    reconcile_ip_address_claim(store, ref)
    status = store.get(ref)["status"]
    assert "addressRef" not in status
    assert status["conditions"][0]["message"] == "IPAddress m-0 exists and was not made for this claim"
