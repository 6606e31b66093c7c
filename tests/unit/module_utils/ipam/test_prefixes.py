"""Prefix allocation (ipam/prefixes.py): a pool of prefixes, claims of one, the IPPrefix that records each.

Free child prefixes come lowest first, from every parent, IPv4 and IPv6; an IPPrefix is named after its pool and
its prefix; bad input is refused naming the field, with nothing written; a claim keeps the prefix it holds, gives
it back when deleted, and waits, saying why, when its pool has none left or is not there.
"""
from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import DNS_SUBDOMAIN, Object, Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.prefixes import (
    CLAIM_KIND,
    POOL_KIND,
    PREFIX_ANNOTATION,
    PREFIX_API,
    PREFIX_CLAIM_FINALIZER,
    PREFIX_CLAIM_LABEL,
    PREFIX_KIND,
    PREFIX_POOL_FINALIZER,
    PREFIX_POOL_LABEL,
    admit_prefix_pool,
    parse_prefix_pool,
    prefix_claim_object,
    prefix_name,
    reconcile_prefix_claim,
    reconcile_prefix_pool,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.store.admitted import admitted
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.harness.cache_behind import CacheBehind

NS = "infra"


def pool_object(prefixes: list[str] | None = None, length: int = 24, name: str = "nodes", **extra: object) -> Object:
    spec = {"prefixes": prefixes if prefixes is not None else ["10.8.0.0/21"], "prefixLength": length, **extra}
    return {"apiVersion": PREFIX_API, "kind": POOL_KIND, "metadata": {"name": name, "namespace": NS}, "spec": spec}


def pool_ref(name: str = "nodes") -> Ref:
    return Ref(PREFIX_API, POOL_KIND, name, NS)


def claim_ref(name: str) -> Ref:
    return Ref(PREFIX_API, CLAIM_KIND, name, NS)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
def store(path: Path):
    with LocalStore(str(path)) as opened:
        yield opened


def fingerprint(path: Path) -> str:
    digest = hashlib.sha256()
    for suffix in ("", "-wal"):
        part = Path(f"{path}{suffix}")
        digest.update(part.read_bytes() if part.exists() else b"")
    return digest.hexdigest()


def make_claim(store, name: str, pool: str = "nodes") -> Ref:
    store.create(prefix_claim_object(name, NS, pool))
    return claim_ref(name)


def prefixes_of(store) -> dict[str, str]:
    """Every IPPrefix of the namespace: claim name → prefix (and no claim twice)."""
    records = store.list(PREFIX_API, PREFIX_KIND, NS)
    held = {p["spec"]["claim"]["name"]: p["spec"]["prefix"] for p in records}
    assert len(held) == len(records), f"a claim holds two prefixes: {records}"
    return held


# -- free child prefixes -----------------------------------------------------------------------------------------

# parents, prefixLength, taken, the first free ones (lowest first)
FREE = [
    (["10.8.0.0/22"], 24, [], ["10.8.0.0/24", "10.8.1.0/24", "10.8.2.0/24", "10.8.3.0/24"]),
    (["10.8.0.0/22"], 24, ["10.8.0.0/24", "10.8.2.0/24"], ["10.8.1.0/24", "10.8.3.0/24"]),
    (["10.8.0.0/24"], 24, ["10.8.0.0/24"], []),
    (["10.8.0.0/24"], 24, [], ["10.8.0.0/24"]),  # a child as long as its parent: the parent itself
    (["10.8.0.0/24"], 26, ["10.8.0.64/26"], ["10.8.0.0/26", "10.8.0.128/26", "10.8.0.192/26"]),
    # several parents: lowest first whatever the order they are listed in
    (["10.9.0.0/23", "10.8.0.0/24"], 24, [], ["10.8.0.0/24", "10.9.0.0/24", "10.9.1.0/24"]),
    (["10.9.0.0/23", "10.8.0.0/24"], 24, ["10.8.0.0/24"], ["10.9.0.0/24", "10.9.1.0/24"]),
    (["fd00:10::/62"], 64, [], ["fd00:10::/64", "fd00:10:0:1::/64", "fd00:10:0:2::/64", "fd00:10:0:3::/64"]),
    (["fd00:10::/62"], 64, ["FD00:10:0:0::/64"], ["fd00:10:0:1::/64", "fd00:10:0:2::/64", "fd00:10:0:3::/64"]),
    (["fd00:10::/48"], 56, [], ["fd00:10::/56", "fd00:10:0:100::/56", "fd00:10:0:200::/56"]),
    # billions of /64s in a /32: the first few come at once
    (["2001:db8::/32"], 64, ["2001:db8::/64"], ["2001:db8:0:1::/64", "2001:db8:0:2::/64"]),
    # both families with one length that fits each: IPv4 first
    (["fd00::/29", "192.168.0.0/29"], 31, ["192.168.0.2/31"],
     ["192.168.0.0/31", "192.168.0.4/31", "192.168.0.6/31", "fd00::/31", "fd00:2::/31", "fd00:4::/31",
      "fd00:6::/31"]),
]


@pytest.mark.parametrize(("parents", "length", "taken", "first"), FREE)
def test_free_prefixes_come_lowest_first(parents, length, taken, first):
    """Each row lists every free prefix of a pool of at most 16, and the first few of a larger one."""
    pool = parse_prefix_pool(pool_object(parents, length))
    found = list(itertools.islice(pool.free(taken), 16))
    assert found[:len(first)] == first
    if pool.size <= 16:
        assert found == first


# parents, prefixLength, how many child prefixes
SIZES = [
    (["10.8.0.0/21"], 24, 8),
    (["10.8.0.0/24", "10.9.0.0/23"], 24, 3),
    (["fd00:10::/48"], 64, 1 << 16),
    (["10.8.0.0/16"], 16, 1),
]


@pytest.mark.parametrize(("parents", "length", "size"), SIZES)
def test_a_pool_holds_its_parents_children(parents, length, size):
    assert parse_prefix_pool(pool_object(parents, length)).size == size


def test_only_the_pools_own_children_are_held():
    pool = parse_prefix_pool(pool_object(["10.8.0.0/21", "fd00::/16"], 24))
    assert pool.holds("10.8.7.0/24") and pool.holds("fd00:ff00::/24")
    assert not pool.holds("fd00:10::/24")  # not a network
    assert not pool.holds("10.8.8.0/24")  # outside
    assert not pool.holds("10.8.0.0/25")  # another length
    assert not pool.holds("10.8.0.1/24")  # not a network
    assert not pool.holds("garbage")


# -- names -------------------------------------------------------------------------------------------------------

NAMES = [
    ("nodes", "10.8.4.0/24", "nodes-10-8-4-0-24"),
    ("nodes", "fd00:10::/64", "nodes-fd00-10---64"),
    ("nodes", "fd00:10:0:1::/64", "nodes-fd00-10-0-1---64"),
    ("az-a.nodes", "192.168.0.0/31", "az-a.nodes-192-168-0-0-31"),
]


@pytest.mark.parametrize(("pool", "prefix", "name"), NAMES)
def test_an_ipprefix_is_named_after_its_pool_and_prefix(pool, prefix, name):
    assert prefix_name(pool, prefix) == name


def test_a_name_past_253_characters_is_shortened_keeping_the_prefix_and_staying_unique():
    long_a, long_b = "a" * 250, "a" * 249 + "b"
    names = {prefix_name(pool, prefix) for pool in (long_a, long_b) for prefix in ("10.8.4.0/24", "10.8.5.0/24")}
    assert len(names) == 4
    for name in names:
        assert len(name) <= 253 and DNS_SUBDOMAIN.match(name), name
        assert name.startswith("aaaa") and name.endswith(("-10-8-4-0-24", "-10-8-5-0-24"))
    ipv6 = prefix_name("p" * 253, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff00/120")
    assert len(ipv6) == 253 and DNS_SUBDOMAIN.match(ipv6)


# -- bad input ---------------------------------------------------------------------------------------------------

# what, the pool's spec (over a good one), a fragment of the message that names the field and what is wrong,
# whether the store itself (its schema) takes the pool: then a claim's reconcile is what refuses it
BAD_POOLS = [
    ("not a CIDR", {"prefixes": ["10.8.0/16"]}, "spec.prefixes[0]: Invalid value: '10.8.0/16': not a CIDR", True),
    ("an address", {"prefixes": ["10.8.0.0"]}, "spec.prefixes[0]: Invalid value: '10.8.0.0': not a CIDR", True),
    ("host bits set", {"prefixes": ["10.8.0.1/16"]},
     "spec.prefixes[0]: Invalid value: '10.8.0.1/16': has host bits set: the network is 10.8.0.0/16", True),
    ("the second entry bad", {"prefixes": ["10.8.0.0/16", "fd00::1::/48"]}, "spec.prefixes[1]: Invalid value", True),
    ("overlapping parents", {"prefixes": ["10.8.0.0/16", "10.8.128.0/17"]},
     "spec.prefixes[1]: Invalid value: '10.8.128.0/17': overlaps spec.prefixes[0] (10.8.0.0/16)", True),
    ("children longer than the parent", {"prefixes": ["10.8.0.0/16"], "prefixLength": 8},
     "spec.prefixLength: Invalid value: 8: shorter than spec.prefixes[0] (10.8.0.0/16)", True),
    ("an IPv6 length for an IPv4 parent", {"prefixes": ["fd00:10::/48", "10.8.0.0/16"], "prefixLength": 64},
     "spec.prefixLength: Invalid value: 64: longer than an IPv4 address (32 bits), which spec.prefixes[1]", True),
    ("an IPv4 length for an IPv6 parent", {"prefixes": ["10.8.0.0/16", "fd00:10::/48"], "prefixLength": 24},
     "spec.prefixLength: Invalid value: 24: shorter than spec.prefixes[1] (fd00:10::/48)", True),
    ("no parent", {"prefixes": []}, "spec.prefixes", False),
    ("a length of 0", {"prefixLength": 0}, "spec.prefixLength", False),
    ("a length past 128", {"prefixLength": 129}, "spec.prefixLength", False),
    ("a length as a string", {"prefixLength": "24"}, "spec.prefixLength", False),
    ("a CIDR as a number", {"prefixes": [10]}, "spec.prefixes[0]", False),
]


@pytest.mark.parametrize(("what", "spec", "message", "stored"), BAD_POOLS, ids=[row[0] for row in BAD_POOLS])
def test_a_bad_pool_is_refused_naming_the_field(what, spec, message, stored, store, path):
    obj = pool_object()
    obj["spec"].update(spec)
    with pytest.raises(Invalid) as refused:
        parse_prefix_pool(obj)
    assert message in str(refused.value)
    with pytest.raises(Invalid) as refused:  # as every store open_store gives admits it
        admitted(store).create(obj)
    assert message in str(refused.value)
    assert store.get_if_exists(pool_ref()) is None


@pytest.mark.parametrize(("what", "spec", "message", "stored"), [row for row in BAD_POOLS if row[3]],
                         ids=[row[0] for row in BAD_POOLS if row[3]])
def test_a_claim_of_a_bad_pool_that_got_stored_fails_naming_the_field_and_writes_nothing(
        what, spec, message, stored, store, path):
    obj = pool_object()
    obj["spec"].update(spec)
    store.create(obj)  # past admission: written before its rules, say
    ref = make_claim(store, "c")
    before = fingerprint(path)
    with pytest.raises(Invalid) as refused:
        reconcile_prefix_claim(store, ref)
    assert f'IPPrefixPool.ipam.metal3.io "nodes" is invalid: {message}' in str(refused.value)
    with pytest.raises(Invalid):
        reconcile_prefix_pool(store, pool_ref())
    assert fingerprint(path) == before


class Tampered(LocalStore):
    """A store whose claims name their pool as ``pool`` (what the schema would refuse to store)."""

    pool: object = None

    def get(self, ref):
        obj = super().get(ref)
        if ref.kind == CLAIM_KIND:
            obj["spec"]["pool"] = {"name": self.pool} if self.pool is not None else {}
        return obj


@pytest.mark.parametrize(("pool", "message"), [
    ("../../other", "spec.pool.name: Invalid value: '../../other': a lowercase RFC 1123 subdomain"),
    ("Nodes", "spec.pool.name: Invalid value: 'Nodes'"),
    (None, "spec.pool.name: Required value"),
])
def test_a_claim_whose_pool_name_is_no_object_name_fails_naming_the_field_and_writes_nothing(pool, message, path):
    with Tampered(str(path)) as store:
        store.create(pool_object())
        ref = make_claim(store, "c")
        store.pool = pool
        before = fingerprint(path)
        with pytest.raises(Invalid) as refused:
            reconcile_prefix_claim(store, ref)
        assert f'IPPrefixClaim.ipam.metal3.io "c" is invalid: {message}' in str(refused.value)
        assert fingerprint(path) == before


# -- claims ------------------------------------------------------------------------------------------------------

def test_claims_get_the_lowest_free_prefixes_and_their_ipprefix_records(store):
    store.create(pool_object())
    first, second = make_claim(store, "a"), make_claim(store, "b")
    a, b = reconcile_prefix_claim(store, first), reconcile_prefix_claim(store, second)
    assert (a.prefix, b.prefix) == ("10.8.0.0/24", "10.8.1.0/24")
    assert a.changed and not a.requeue and a.reason == ""
    claim = store.get(first)
    assert claim["status"]["prefix"] == "10.8.0.0/24"
    assert claim["metadata"]["annotations"][PREFIX_ANNOTATION] == "10.8.0.0/24"
    [ready] = [c for c in claim["status"]["conditions"] if c["type"] == "Ready"]
    assert (ready["status"], ready["reason"]) == ("True", "PrefixAllocated")
    record = store.get(Ref(PREFIX_API, PREFIX_KIND, "nodes-10-8-0-0-24", NS))
    assert record["spec"] == {"pool": {"name": "nodes"}, "claim": {"name": "a"}, "prefix": "10.8.0.0/24"}
    assert record["metadata"]["labels"] == {PREFIX_POOL_LABEL: "nodes", PREFIX_CLAIM_LABEL: "a"}
    assert [(r["kind"], r["name"], r["uid"], r["controller"]) for r in record["metadata"]["ownerReferences"]] == \
        [(CLAIM_KIND, "a", claim["metadata"]["uid"], True)]
    assert PREFIX_POOL_FINALIZER in store.get(pool_ref())["metadata"]["finalizers"]


def test_a_claim_that_holds_a_prefix_gets_the_same_one_back_and_nothing_is_written(store, path):
    store.create(pool_object())
    ref = make_claim(store, "a")
    assert reconcile_prefix_claim(store, ref).prefix == "10.8.0.0/24"
    before = fingerprint(path)
    again = reconcile_prefix_claim(store, ref)
    assert (again.prefix, again.changed, again.requeue) == ("10.8.0.0/24", False, False)
    assert fingerprint(path) == before


def test_check_mode_says_which_prefix_and_writes_nothing(store, path):
    store.create(pool_object())
    ref = make_claim(store, "a")
    before = fingerprint(path)
    assert reconcile_prefix_claim(store, ref, dry_run=True).prefix == "10.8.0.0/24"
    assert fingerprint(path) == before


def test_an_exhausted_pool_makes_a_claim_wait_saying_so(store):
    store.create(pool_object(["10.8.0.0/23"]))
    for name in ("a", "b"):
        assert reconcile_prefix_claim(store, make_claim(store, name)).prefix is not None
    late = reconcile_prefix_claim(store, make_claim(store, "c"))
    assert (late.prefix, late.reason, late.requeue_after) == (None, "PoolExhausted", 10.0)
    assert late.message == "IPPrefixPool infra/nodes has no free /24 left: all 2 are taken"
    assert late.waits_on == [pool_ref()]
    status = store.get(claim_ref("c"))["status"]
    [ready] = [c for c in status["conditions"] if c["type"] == "Ready"]
    assert (ready["status"], ready["reason"], ready["message"]) == ("False", "PoolExhausted", late.message)
    assert status["errorMessage"] == late.message and "prefix" not in status
    assert sorted(prefixes_of(store)) == ["a", "b"]


def test_a_claim_of_a_missing_pool_waits_then_gets_a_prefix_once_it_is_there(store):
    ref = make_claim(store, "a")
    waiting = reconcile_prefix_claim(store, ref)
    assert (waiting.reason, waiting.requeue_after) == ("PoolNotFound", 10.0)
    assert waiting.message == "IPPrefixPool infra/nodes not found"
    store.create(pool_object())
    held = reconcile_prefix_claim(store, ref)
    assert held.prefix == "10.8.0.0/24"
    assert "errorMessage" not in store.get(ref)["status"]


def test_a_deleted_claim_gives_its_prefix_back_for_the_next_claim(store):
    store.create(pool_object(["10.8.0.0/24"]))
    first = make_claim(store, "a")
    assert reconcile_prefix_claim(store, first).prefix == "10.8.0.0/24"
    second = make_claim(store, "b")
    assert reconcile_prefix_claim(store, second).reason == "PoolExhausted"
    store.delete(first)  # held by its finalizer until its reconcile gives the prefix back
    released = reconcile_prefix_claim(store, first)
    assert released.released and released.changed
    assert store.get_if_exists(first) is None and prefixes_of(store) == {}
    assert store.get(pool_ref())["status"]["allocated"] == 0  # the pool moved: the claims waiting on it wake
    assert reconcile_prefix_claim(store, second).prefix == "10.8.0.0/24"


def test_a_prefix_whose_claim_went_without_its_reconcile_goes_back_before_a_claim_waits(store):
    """A claim deleted with its finalizer stripped leaves its IPPrefix: the next claim that finds the pool full gives
    it back and takes it, with no reconcile of the pool in between."""
    store.create(pool_object(["10.8.0.0/24"]))
    gone = make_claim(store, "a")
    assert reconcile_prefix_claim(store, gone).prefix == "10.8.0.0/24"
    claim = store.get(gone)
    claim["metadata"]["finalizers"] = []
    store.update(claim)
    store.delete(gone)
    assert reconcile_prefix_claim(store, make_claim(store, "b")).prefix == "10.8.0.0/24"
    assert prefixes_of(store) == {"b": "10.8.0.0/24"}


def test_a_claim_replaced_without_its_annotation_keeps_its_prefix(store):
    store.create(pool_object())
    ref = make_claim(store, "a")
    assert reconcile_prefix_claim(store, ref).prefix == "10.8.0.0/24"
    claim = store.get(ref)
    del claim["metadata"]["annotations"][PREFIX_ANNOTATION]
    store.update(claim)
    assert reconcile_prefix_claim(store, ref).prefix == "10.8.0.0/24"
    assert store.get(ref)["metadata"]["annotations"][PREFIX_ANNOTATION] == "10.8.0.0/24"
    assert prefixes_of(store) == {"a": "10.8.0.0/24"}


def test_a_claim_owning_two_prefixes_keeps_the_one_its_status_names(store):
    """What a reconcile of another claimer moving the claim could leave: the next one leaves one."""
    store.create(pool_object())
    ref = make_claim(store, "a")
    assert reconcile_prefix_claim(store, ref).prefix == "10.8.0.0/24"
    extra = store.get(Ref(PREFIX_API, PREFIX_KIND, "nodes-10-8-0-0-24", NS))
    extra = {**extra, "metadata": {k: v for k, v in extra["metadata"].items()
                                   if k not in ("uid", "resourceVersion", "creationTimestamp", "generation")},
             "spec": {**extra["spec"], "prefix": "10.8.3.0/24"}}
    extra["metadata"]["name"] = prefix_name("nodes", "10.8.3.0/24")
    store.create(extra)
    claim = store.get(ref)
    claim["metadata"]["annotations"][PREFIX_ANNOTATION] = "10.8.5.0/24"  # leads nowhere
    store.update(claim)
    result = reconcile_prefix_claim(store, ref)
    assert (result.prefix, result.changed) == ("10.8.0.0/24", True)
    assert prefixes_of(store) == {"a": "10.8.0.0/24"}


class MovedMeanwhile(LocalStore):
    """Another reconcile of the same claim names another prefix on it just before this one writes its status."""

    def update_status(self, obj, dry_run=False):
        if obj["kind"] == CLAIM_KIND and not getattr(self, "moved", False):
            self.moved = True
            claim = self.get(Ref.of(obj))
            claim["metadata"]["annotations"][PREFIX_ANNOTATION] = "10.8.6.0/24"
            self.update(claim)
        return super().update_status(obj, dry_run)


def test_a_reconcile_whose_claim_was_moved_meanwhile_gives_its_prefix_back(path):
    with MovedMeanwhile(str(path)) as store:
        store.create(pool_object())
        ref = make_claim(store, "a")
        assert reconcile_prefix_claim(store, ref).prefix == "10.8.6.0/24"
        assert prefixes_of(store) == {"a": "10.8.6.0/24"}


def test_a_reconcile_whose_reads_are_a_cache_behind_the_claims_deletion_keeps_no_prefix(store):
    """A reconcile read its claim (holding a prefix) before the claim was deleted and released; its reads are a
    cache's, still from before. It takes the prefix the claim's marker names again: the claim, written back
    unchanged (the API server checks the write), is gone, so the prefix goes back."""
    store.create(pool_object(["10.8.0.0/24"]))
    ref = make_claim(store, "a")
    assert reconcile_prefix_claim(store, ref).prefix == "10.8.0.0/24"
    read = store.get(ref)
    store.delete(ref)
    assert reconcile_prefix_claim(store, ref).released
    cached = CacheBehind(store, gets={(CLAIM_KIND, "a"): read})
    assert reconcile_prefix_claim(cached, ref).prefix is None
    assert prefixes_of(store) == {}


def test_a_claim_object_is_born_with_its_finalizer_and_owner():
    cluster = {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
               "metadata": {"name": "c1", "namespace": NS, "uid": "u-1"}}
    obj = prefix_claim_object("c1-nodes", NS, "nodes", owner=cluster)
    assert obj == {"apiVersion": PREFIX_API, "kind": CLAIM_KIND,
                   "metadata": {"name": "c1-nodes", "namespace": NS, "finalizers": [PREFIX_CLAIM_FINALIZER],
                                "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
                                                     "name": "c1", "uid": "u-1", "controller": True,
                                                     "blockOwnerDeletion": True}]},
                   "spec": {"pool": {"name": "nodes"}}}
    assert "ownerReferences" not in prefix_claim_object("x", NS, "nodes")["metadata"]


# -- pools -------------------------------------------------------------------------------------------------------

def test_a_pool_counts_its_prefixes_and_gives_back_those_whose_claim_is_gone(store):
    store.create(pool_object())
    refs = [make_claim(store, name) for name in "abc"]
    for ref in refs:
        reconcile_prefix_claim(store, ref)
    state = reconcile_prefix_pool(store, pool_ref())
    assert (state.allocated, state.free, state.released) == (3, 5, 0)
    status = store.get(pool_ref())["status"]
    assert (status["allocated"], status["free"]) == (3, 5) and status["lastUpdated"]
    # Claim b goes with no reconcile of its own (its finalizer stripped): its IPPrefix is left to the pool.
    claim = store.get(refs[1])
    claim["metadata"]["finalizers"] = []
    store.update(claim)
    store.delete(refs[1])
    # Claim c is deleted, and never reconciled again.
    store.delete(refs[2])
    state = reconcile_prefix_pool(store, pool_ref())
    assert (state.allocated, state.free, state.released) == (1, 7, 2) and state.changed
    assert prefixes_of(store) == {"a": "10.8.0.0/24"}
    assert store.get_if_exists(refs[2]) is None


def test_a_deleted_pool_stays_while_prefixes_are_allocated_from_it(store):
    store.create(pool_object())
    ref = make_claim(store, "a")
    reconcile_prefix_claim(store, ref)
    store.delete(pool_ref())
    state = reconcile_prefix_pool(store, pool_ref())
    assert state.waiting == "IPPrefixPool nodes still has 1 prefixes allocated; delete their claims first"
    assert state.requeue_after == 10.0 and not state.removed
    assert reconcile_prefix_claim(store, ref).prefix == "10.8.0.0/24"  # what a claim holds stays with it
    other = reconcile_prefix_claim(store, make_claim(store, "b"))
    assert other.reason == "PoolDeleting"
    store.delete(ref)
    reconcile_prefix_claim(store, ref)
    assert reconcile_prefix_pool(store, pool_ref()).removed
    assert store.get_if_exists(pool_ref()) is None


def test_a_pools_prefixes_and_length_are_immutable_while_prefixes_are_allocated(store):
    guarded = admitted(store)
    guarded.create(pool_object())
    pool = guarded.get(pool_ref())
    pool["spec"]["prefixLength"] = 25
    guarded.update(pool)  # nothing allocated yet: it may change
    ref = make_claim(store, "a")
    assert reconcile_prefix_claim(store, ref).prefix == "10.8.0.0/25"
    for field, value in (("prefixLength", 24), ("prefixes", ["10.8.0.0/21", "10.9.0.0/24"])):
        pool = guarded.get(pool_ref())
        pool["spec"][field] = value
        with pytest.raises(Invalid) as refused:
            guarded.update(pool)
        assert f'IPPrefixPool.ipam.metal3.io "nodes" is invalid: spec.{field}: Forbidden: field is immutable ' \
               "while prefixes are allocated from the pool (1: 10.8.0.0/25)" in str(refused.value)
    pool = guarded.get(pool_ref())
    pool["spec"]["partition"] = "fra-equ01"
    guarded.update(pool)


def test_admission_holds_a_new_pool_to_the_rules(store):
    with pytest.raises(Invalid, match=r"spec\.prefixLength: Invalid value: 16: shorter than"):
        admit_prefix_pool(store, pool_object(["10.8.0.0/21"], 16), None)
    admit_prefix_pool(store, pool_object(["10.8.0.0/21", "fd00::/16"], 28, partition="az-a", clusterName="c1"),
                      None)
