"""An allocation's requests to the store (each one API request on the kubernetes backend): the budget the
allocator keeps, counted call by call on the local store."""
from __future__ import annotations

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam import allocation as allocation_module
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import (
    IPAM_API,
    reconcile_ip_claim,
    reconcile_ip_pool,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.claims import claim_object
from tests.harness.cache_behind import CacheBehind
from tests.harness.counting_store import CountingStore

NS = "ns"
POOL = Ref(IPAM_API, "IPPool", "pool", NS)


@pytest.fixture
def store(tmp_path):
    with CountingStore(open_store({"backend": "local", "store_path": str(tmp_path / "store.db")})) as opened:
        opened.create({"apiVersion": IPAM_API, "kind": "IPPool", "metadata": {"name": "pool", "namespace": NS},
                       "spec": {"namePrefix": "pool", "pools": [{"subnet": "10.0.0.0/24"}], "prefix": 24}})
        reconcile_ip_pool(opened, POOL)  # its finalizer, once
        yield opened


def allocate(store, name: str, **claim) -> tuple[str, dict]:
    created = store.create(claim_object(name, NS, "pool", **claim))
    store.counts.clear()
    allocation = reconcile_ip_claim(store, Ref(IPAM_API, "IPClaim", name, NS), current=created)
    return allocation.summary()["address"], {f"{verb} {kind}": n for (verb, kind), n in store.counts.items()}


IDLE_POOL = {"get IPPool": 1, "update IPClaim": 1, "create IPAddress": 1, "patch_status IPPool": 1,
             "update_status IPClaim": 1}


def test_an_allocation_on_an_idle_pool_makes_five_requests_after_the_claims_create(store):
    for i in range(3):
        address, requests = allocate(store, f"claim-{i}")
        assert address == f"10.0.0.{i + 1}"
        assert requests == IDLE_POOL


def test_the_reconcile_of_an_allocated_claim_only_reads(store):
    allocate(store, "claim")
    store.counts.clear()
    reconcile_ip_claim(store, Ref(IPAM_API, "IPClaim", "claim", NS))
    assert {verb for verb, _kind in store.counts} == {"get"}


def test_a_claim_whose_index_has_not_caught_up_loses_one_create_and_reads_the_index_again(store):
    store.patch_status(POOL, {"status": {"indexes": None, "allocations": None}})
    store.create({"apiVersion": IPAM_API, "kind": "IPAddress", "metadata": {"name": "pool-10-0-0-1", "namespace": NS},
                  "spec": {"address": "10.0.0.1", "pool": {"name": "pool"}, "claim": {"name": "elsewhere"}}})
    address, requests = allocate(store, "late")
    assert address == "10.0.0.2"
    # It reads the address it lost: having reserved it, it could be the claim's own, made by another reconcile of
    # the claim. And it names the address it took instead of the one it had reserved: one more claim update.
    assert requests == {**IDLE_POOL, "get IPPool": 2, "create IPAddress": 2, "get IPAddress": 1,
                        "patch_status IPPool": 2, "update IPClaim": 2}


def test_an_exhausted_claim_leaves_no_key_in_the_index(store):
    for i in range(254):
        allocate(store, f"claim-{i}")
    store.patch_status(POOL, {"status": {"indexes": {"claim-0": None}, "allocations": {"claim-0": None}}})
    _address, _requests = allocate(store, "last")
    assert "last" not in store.get(POOL)["status"]["indexes"]


def test_a_claimers_hint_onto_a_pool_that_moved_on_is_dropped_not_retried(store):
    from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import _record

    pool = store.get(POOL)
    allocate(store, "first")  # the pool moves on
    store.counts.clear()
    assert _record(store, POOL, {"late": "10.0.0.9"}, False, version=pool["metadata"]["resourceVersion"]) is None
    assert "late" not in store.get(POOL)["status"]["indexes"]
    assert store.counts[("patch_status", "IPPool")] == 1


def test_an_address_another_reconcile_of_the_claim_created_first_is_the_claims_not_lost(store):
    """Two reconciles of one claim: this one reserves 10.0.0.1 on the claim, the other (reading that reservation)
    creates its IPAddress first. This one must find it is the claim's own, not take 10.0.0.2 as well."""
    real_create = store.inner.create

    def the_other_reconcile_creates_it_first(obj, **kwargs):
        if obj["kind"] == "IPAddress" and not store.inner.list(IPAM_API, "IPAddress", NS):
            real_create(obj, **kwargs)
        return real_create(obj, **kwargs)

    store.inner.create = the_other_reconcile_creates_it_first
    address, _requests = allocate(store, "contested")
    assert address == "10.0.0.1"
    assert [a["spec"]["address"] for a in store.list(IPAM_API, "IPAddress", NS)] == ["10.0.0.1"]


def test_the_ip_claim_modules_path_reads_the_claim_once_the_one_it_creates(store):
    from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.claims import claim_present

    store.counts.clear()
    result = claim_present(store, claim_object("claim", NS, "pool"))
    assert result["address"] == "10.0.0.1"
    requests = {f"{verb} {kind}": n for (verb, kind), n in store.counts.items()}
    assert requests == {"get IPClaim": 1, "create IPClaim": 1, **IDLE_POOL}


def another_claimer_writes_the_index_first(store):
    """Between this claimer's read of the pool and its hint, another claimer takes 10.0.0.1 in the index."""
    real_patch = store.inner.patch_status

    def patch_status(ref, patch, **kwargs):
        if (patch.get("metadata") or {}).get("resourceVersion"):
            real_patch(ref, {"status": {"indexes": {"other": "10.0.0.1"}, "allocations": {"other": "10.0.0.1"}}})
        return real_patch(ref, patch, **kwargs)

    store.inner.patch_status = patch_status


def test_a_claimer_whose_hint_meets_a_pool_that_moved_on_spreads_out_before_its_create(store):
    """Another claimer wrote the index between this one's read and its hint: both read the same first free
    address. This one picks among the next free ones instead, and still makes one create."""
    another_claimer_writes_the_index_first(store)
    address, requests = allocate(store, "herd")
    assert address in {f"10.0.0.{i}" for i in range(2, 66)}
    assert requests["create IPAddress"] == 1


def test_a_herd_claimer_that_loses_its_spread_pick_picks_again_among_the_lowest_free_addresses(store, monkeypatch):
    """The window a claimer spreads over starts at the pool's first free address, however high the address it
    lost: so the gaps a herd leaves behind are the next picks, and never more than a window of them stays open."""
    from ansible_collections.metal3.baremetal.plugins.module_utils.ipam import allocation

    monkeypatch.setattr(allocation.random, "choice", lambda free: free[-1])  # the highest of each window
    store.create({"apiVersion": IPAM_API, "kind": "IPAddress", "metadata": {"name": "pool-10-0-0-65", "namespace": NS},
                  "spec": {"address": "10.0.0.65", "pool": {"name": "pool"}, "claim": {"name": "elsewhere"}}})
    another_claimer_writes_the_index_first(store)
    address, _requests = allocate(store, "herd")  # spreads to .65 (taken), then the window .2-.64, .66
    assert address == "10.0.0.66"


def test_a_reconcile_that_read_its_claim_before_the_claims_release_keeps_no_address(store):
    """A reconcile reads its claim (holding .1); the claim is deleted and released (its address goes); the reconcile
    goes on from the claim it read, finds no address and takes the one its marker names. The claim's status,
    written after the take even though it names that address already (a no-op write the API server still checks),
    finds the claim gone: the address goes back, or it would stay for ever (as one did under the Ansible
    Operator, in CI). No read tells that: one may be a cache's (the next test)."""
    allocate(store, "claim")
    ref = Ref(IPAM_API, "IPClaim", "claim", NS)
    read = store.get(ref)
    store.delete(ref)
    assert reconcile_ip_claim(store, ref).released
    store.counts.clear()
    allocation = reconcile_ip_claim(store, ref, current=read)
    assert allocation.released and allocation.address is None
    assert store.list(IPAM_API, "IPAddress", NS) == []
    assert store.counts[("update_status", "IPClaim")] == 1 and ("get", "IPClaim") not in store.counts


def test_a_reconcile_whose_reads_are_a_cache_behind_the_claims_deletion_keeps_no_address(store):
    """As above, but every read of the claim answers the copy from before its deletion, as the Ansible Operator's
    proxy's cache may: the claim is gone, and only the write tells."""
    allocate(store, "claim")
    ref = Ref(IPAM_API, "IPClaim", "claim", NS)
    read = store.get(ref)
    store.delete(ref)
    assert reconcile_ip_claim(store, ref).released
    cached = CacheBehind(store, gets={("IPClaim", "claim"): read})
    allocation = reconcile_ip_claim(cached, ref, current=read)
    assert allocation.released and allocation.address is None
    assert store.list(IPAM_API, "IPAddress", NS) == []


def test_a_reconcile_whose_claim_is_being_released_as_it_takes_gives_the_address_back(store):
    """The claim is being deleted and its release has let its address go but not yet its finalizer; a reconcile
    that read the claim before (and whose first read again is a cache's, still from before) takes the address
    again. Its status write conflicts, the claim read again shows the deletion: the address goes back, and the
    release ends with nothing left."""
    allocate(store, "claim")
    ref = Ref(IPAM_API, "IPClaim", "claim", NS)
    read = store.get(ref)
    store.delete(ref)  # marked deleted, held by its finalizer
    for address in store.list(IPAM_API, "IPAddress", NS):  # the release's first step
        allocation_module._release_address(store, "claim", address, False)
    lagging = CacheBehind(store, gets={("IPClaim", "claim"): read}, catching_up=True)
    allocation = reconcile_ip_claim(lagging, ref, current=read)
    assert allocation.released and allocation.address is None
    assert store.list(IPAM_API, "IPAddress", NS) == []
    assert reconcile_ip_claim(store, ref).released
    assert store.get_if_exists(ref) is None


def test_a_release_whose_list_is_a_cache_behind_frees_the_address_its_claim_names(store):
    """A claim deleted a moment after its address was taken: the release's list (a cache's) does not show the
    address yet. The claim's status names it; it is read by name and freed."""
    allocate(store, "claim")
    ref = Ref(IPAM_API, "IPClaim", "claim", NS)
    store.delete(ref)
    assert reconcile_ip_claim(CacheBehind(store, lists={"IPAddress": []}), ref).released
    assert store.list(IPAM_API, "IPAddress", NS) == []
    assert store.get_if_exists(ref) is None


def test_a_release_whose_list_is_a_cache_behind_frees_the_address_its_marker_names(store):
    """As above, for a reconcile that died between its take and its status write: only the claim's marker names
    the address."""
    allocate(store, "claim")
    ref = Ref(IPAM_API, "IPClaim", "claim", NS)
    store.patch_status(ref, {"status": {"address": None}})
    store.delete(ref)
    assert reconcile_ip_claim(CacheBehind(store, lists={"IPAddress": []}), ref).released
    assert store.list(IPAM_API, "IPAddress", NS) == []
    assert store.get_if_exists(ref) is None
