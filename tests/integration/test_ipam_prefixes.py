"""Prefix allocation on both backends (the local file and a real kube-apiserver): claims get disjoint prefixes;
claimers racing in real processes never get one prefix twice; a claimer killed at any write never ends up
holding two prefixes, nor leaves one that no claim holds.
"""
from __future__ import annotations

import multiprocessing
import queue
from collections import defaultdict
from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.prefixes import (
    CLAIM_KIND,
    POOL_KIND,
    PREFIX_ANNOTATION,
    PREFIX_API,
    PREFIX_KIND,
    prefix_claim_object,
    reconcile_prefix_claim,
    reconcile_prefix_pool,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.modules.ipam_reconcile import SPEC as IPAM_RECONCILE
from ansible_collections.metal3.baremetal.plugins.plugin_utils.engine_action import run_spec
from tests.harness.crashing_store import Crash, CrashingStore
from tests.integration.test_ipam_crash import run_until_done

EXHAUSTED = "PoolExhausted"


def make_pool(store: Store, namespace: str, name: str, prefixes: list[str], length: int) -> Ref:
    store.create({"apiVersion": PREFIX_API, "kind": POOL_KIND, "metadata": {"name": name, "namespace": namespace},
                  "spec": {"prefixes": prefixes, "prefixLength": length, "partition": "fra-equ01"}})
    return Ref(PREFIX_API, POOL_KIND, name, namespace)


def make_claim(store: Store, namespace: str, name: str, pool: str) -> Ref:
    store.create(prefix_claim_object(name, namespace, pool))
    return Ref(PREFIX_API, CLAIM_KIND, name, namespace)


def check_one_prefix_per_claim(store: Store, namespace: str, pool: str | None = None) -> dict[str, str]:
    """Every claim (of ``pool``) that holds a prefix holds exactly one IPPrefix, the one its status and annotation
    name, and owned by it; no prefix is held twice; no IPPrefix belongs to a claim that is gone. Returns claim name
    → prefix, for the claims that hold one."""
    claims = {c["metadata"]["name"]: c for c in store.list(PREFIX_API, CLAIM_KIND, namespace)
              if pool is None or c["spec"]["pool"]["name"] == pool}
    owned: dict[str, list[Object]] = defaultdict(list)
    for record in store.list(PREFIX_API, PREFIX_KIND, namespace):
        if pool is None or record["spec"]["pool"]["name"] == pool:
            owned[record["spec"]["claim"]["name"]].append(record)
    orphans = sorted(name for name in owned if name not in claims)
    assert not orphans, f"IPPrefixes of claims that are gone: {orphans}"
    held = {}
    for name, claim in claims.items():
        status = claim.get("status") or {}
        records = owned[name]
        if not records:
            assert "prefix" not in status, (name, status)
            continue
        assert len(records) == 1, f"claim {name} holds {[r['spec']['prefix'] for r in records]}"
        prefix = records[0]["spec"]["prefix"]
        assert status.get("prefix") == prefix, (name, status)
        assert claim["metadata"]["annotations"][PREFIX_ANNOTATION] == prefix
        assert [r["uid"] for r in records[0]["metadata"]["ownerReferences"]] == [claim["metadata"]["uid"]]
        held[name] = prefix
    assert len(set(held.values())) == len(held), f"a prefix is held twice: {held}"
    return held


def ready(store: Store, ref: Ref) -> dict[str, Any]:
    conditions = (store.get(ref).get("status") or {}).get("conditions") or []
    return next(c for c in conditions if c["type"] == "Ready")


# -- (a) disjoint prefixes ---------------------------------------------------------------------------------------

def test_two_claims_get_disjoint_prefixes_of_one_pool(store, namespace):
    pool = make_pool(store, namespace, "nodes", ["10.8.0.0/21", "fd00::/8"], 24)
    first, second = (make_claim(store, namespace, name, "nodes") for name in ("cluster-a", "cluster-b"))
    assert reconcile_prefix_claim(store, first).prefix == "10.8.0.0/24"
    assert reconcile_prefix_claim(store, second).prefix == "10.8.1.0/24"
    assert reconcile_prefix_claim(store, first).prefix == "10.8.0.0/24"  # held: the same one
    assert check_one_prefix_per_claim(store, namespace) == {"cluster-a": "10.8.0.0/24", "cluster-b": "10.8.1.0/24"}
    assert (ready(store, first)["status"], ready(store, first)["reason"]) == ("True", "PrefixAllocated")
    state = reconcile_prefix_pool(store, pool)
    assert (state.allocated, state.free) == (2, 8 + 2 ** 16 - 2)  # the /24s of an IPv4 /21 and an IPv6 /8


def test_the_ipam_reconcile_module_reconciles_prefix_pools_and_claims(store, store_options, namespace):
    make_pool(store, namespace, "nodes", ["10.8.0.0/23"], 24)
    for name in ("a", "b", "c"):
        make_claim(store, namespace, name, "nodes")

    def step(kind: str, name: str) -> dict[str, Any]:
        return run_spec(IPAM_RECONCILE, {"kind": kind, "name": name, "namespace": namespace, **store_options},
                        check_mode=False)

    assert [step("IPPrefixClaim", name)["prefix"] for name in ("a", "b")] == ["10.8.0.0/24", "10.8.1.0/24"]
    waiting = step("IPPrefixClaim", "c")
    assert not waiting.get("failed") and not waiting["ready"]
    assert (waiting["reason"], waiting["requeue_after"]) == (EXHAUSTED, 10.0)
    assert waiting["message"] == f"IPPrefixPool {namespace}/nodes has no free /24 left: all 2 are taken"
    assert waiting["waits_on"] == [{"api_version": PREFIX_API, "kind": POOL_KIND, "namespace": namespace,
                                    "name": "nodes"}]
    pool = step("IPPrefixPool", "nodes")
    assert (pool["ready"], pool["allocated"], pool["free"]) == (True, 2, 0)
    again = step("IPPrefixClaim", "a")
    assert again["prefix"] == "10.8.0.0/24" and again["ready"] and not again["changed"]


# -- (b) racing processes ----------------------------------------------------------------------------------------

CLAIMERS = 10
ROOM = 8  # a /21 of /24s


def _claimer(options: dict[str, str], namespace: str, name: str, barrier: Any, results: Any) -> None:
    """One claimer process: its own store, opened from the store options as a module opens it; all start at once."""
    with open_store(options) as store:
        ref = Ref(PREFIX_API, CLAIM_KIND, name, namespace)
        store.get(ref)  # connected before the start
        barrier.wait(timeout=120)
        result = reconcile_prefix_claim(store, ref)
        results.put((name, result.prefix, result.reason))


def race(store_options: dict[str, str], namespace: str, names: list[str]) -> dict[str, tuple[str | None, str]]:
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(len(names)), context.Queue()
    processes = [context.Process(target=_claimer, args=(store_options, namespace, name, barrier, results))
                 for name in names]
    for process in processes:
        process.start()
    outcomes = {}
    try:
        for _name in names:
            name, prefix, reason = results.get(timeout=300)
            outcomes[name] = (prefix, reason)
    except queue.Empty:
        raise AssertionError(f"claimers did not all answer: {sorted(outcomes)} of {names}") from None
    finally:
        for process in processes:
            process.join(60)
    assert [p.exitcode for p in processes] == [0] * len(names), "a claimer failed (its traceback is above)"
    return outcomes


def test_ten_claimers_in_ten_processes_share_a_pool_of_eight_and_never_one_prefix(store, store_options, namespace):
    for round_ in range(2):
        pool_name = f"race{round_}"
        pool = make_pool(store, namespace, pool_name, [f"10.{8 + round_}.0.0/21"], 24)
        names = [f"r{round_}-c{i}" for i in range(CLAIMERS)]
        for name in names:
            make_claim(store, namespace, name, pool_name)
        outcomes = race(store_options, namespace, names)

        allocated = {name: prefix for name, (prefix, _reason) in outcomes.items() if prefix}
        waiting = sorted(name for name, (prefix, _reason) in outcomes.items() if not prefix)
        assert len(allocated) == ROOM and len(set(allocated.values())) == ROOM, outcomes
        assert {outcomes[name][1] for name in waiting} == {EXHAUSTED} and len(waiting) == CLAIMERS - ROOM
        assert check_one_prefix_per_claim(store, namespace, pool_name) == allocated
        records = [r for r in store.list(PREFIX_API, PREFIX_KIND, namespace) if r["spec"]["pool"]["name"] == pool_name]
        assert sorted(r["spec"]["prefix"] for r in records) == [f"10.{8 + round_}.{i}.0/24" for i in range(ROOM)]
        for name in waiting:
            condition = ready(store, Ref(PREFIX_API, CLAIM_KIND, name, namespace))
            assert (condition["status"], condition["reason"]) == ("False", EXHAUSTED)
            assert condition["message"] == f"IPPrefixPool {namespace}/{pool_name} has no free /24 left: all 8 are taken"
        state = reconcile_prefix_pool(store, pool)
        assert (state.allocated, state.free) == (ROOM, 0)

        # One cluster goes: its prefix goes back, and one waiting claim gets it; the other still waits.
        leaving = sorted(allocated)[0]
        leaving_ref = Ref(PREFIX_API, CLAIM_KIND, leaving, namespace)
        store.delete(leaving_ref)
        assert reconcile_prefix_claim(store, leaving_ref).released
        first, second = (reconcile_prefix_claim(store, Ref(PREFIX_API, CLAIM_KIND, name, namespace))
                         for name in waiting)
        assert first.prefix == allocated[leaving]
        assert (second.prefix, second.reason) == (None, EXHAUSTED)
        held = check_one_prefix_per_claim(store, namespace, pool_name)
        assert held[waiting[0]] == allocated[leaving] and leaving not in held and len(held) == ROOM


# -- (c) crash safety --------------------------------------------------------------------------------------------

def steal_then_die(store: Store, namespace: str, tag: str, crash_at: int) -> bool:
    """Claim v-<tag> reserves the pool's lowest prefix; competitor s-<tag> takes it just before v creates it, so v
    loses it and takes another; v dies at write ``crash_at``. Whether it died."""
    victim = Ref(PREFIX_API, CLAIM_KIND, f"v-{tag}", namespace)
    thief = Ref(PREFIX_API, CLAIM_KIND, f"s-{tag}", namespace)

    def steal() -> None:
        assert reconcile_prefix_claim(store, thief).prefix == "10.8.0.0/24"

    crashing = CrashingStore(store, crash_at, steal, take_kind=PREFIX_KIND)
    try:
        reconcile_prefix_claim(crashing, victim)
    except Crash:
        if crashing.before_take is not None:  # it died before the theft: the competitor comes anyway
            steal()
        return True
    return False


def test_a_claimer_killed_at_any_write_ends_with_one_prefix_and_no_orphan(store, namespace):
    """Every write of the allocation path is a point of death (the pool's finalizer, the reservation, the lost
    create, the next reservation, the create, the status), and so is every write of the reconcile that recovers;
    half the scenarios give the stolen prefix back before the rerun, so the reservation a dead claimer left
    leads to a free prefix."""
    scenarios = 0
    for first in range(100):
        tag = f"{first}"
        pool = make_pool(store, namespace, f"p{tag}", ["10.8.0.0/21"], 24)
        victim = make_claim(store, namespace, f"v-{tag}", f"p{tag}")
        thief = make_claim(store, namespace, f"s-{tag}", f"p{tag}")
        if not steal_then_die(store, namespace, tag, first):
            break
        freed = first % 2 == 1
        if freed:
            store.delete(thief)
            assert reconcile_prefix_claim(store, thief).released
        scenarios += 1 + run_until_done(store, lambda s, ref=victim: reconcile_prefix_claim(s, ref))
        assert reconcile_prefix_claim(store, victim).prefix is not None
        held = check_one_prefix_per_claim(store, namespace, f"p{tag}")
        assert held[f"v-{tag}"] != "10.8.0.0/24" or freed
        assert len(store.list(PREFIX_API, PREFIX_KIND, namespace,
                              f"ipam.metal3.io/pool-name=p{tag}")) == len(held) == (1 if freed else 2)
        assert reconcile_prefix_pool(store, pool).allocated == len(held)
    assert first >= 6, f"the allocation path made only {first} writes"
    assert scenarios > first


def test_a_claim_released_by_a_process_killed_at_any_write_leaves_no_prefix(store, namespace):
    for first in range(30):
        pool = make_pool(store, namespace, f"p{first}", ["10.8.0.0/21"], 24)
        ref = make_claim(store, namespace, f"c{first}", f"p{first}")
        assert reconcile_prefix_claim(store, ref).prefix == "10.8.0.0/24"
        store.delete(ref)
        try:
            reconcile_prefix_claim(CrashingStore(store, first), ref)
            died = False
        except Crash:
            died = True
        run_until_done(store, lambda s, r=ref: reconcile_prefix_claim(s, r))
        assert store.get_if_exists(ref) is None
        assert check_one_prefix_per_claim(store, namespace, f"p{first}") == {}
        assert reconcile_prefix_pool(store, pool).allocated == 0
        if not died:
            break
    assert first >= 2, f"the release path made only {first} writes"
