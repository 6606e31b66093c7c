"""A claim never holds two IPAddresses, whatever point a claimer dies at, on both backends.

Two ways of dying: a fault hook (a store that "crashes" at its Nth write, for every N of a scenario where a
competitor steals the reserved address), and real processes SIGKILLed at random moments and restarted.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import signal
import time
from collections import defaultdict
from typing import Any, Callable

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import AlreadyExists, NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import (
    ADDRESS_ANNOTATION,
    IPAM_API,
    reconcile_ip_claim,
    reconcile_ip_pool,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.claims import claim_object
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.kube import KubernetesStore
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.harness.crashing_store import Crash, CrashingStore


def claim_ref(namespace: str, name: str) -> Ref:
    return Ref(IPAM_API, "IPClaim", name, namespace)


def make_pool(store: Store, namespace: str, name: str, start: str, end: str) -> None:
    store.create({"apiVersion": IPAM_API, "kind": "IPPool", "metadata": {"name": name, "namespace": namespace},
                  "spec": {"namePrefix": name, "pools": [{"start": start, "end": end}], "prefix": 24}})


def make_claim(store: Store, namespace: str, name: str, pool: str, requested: str | None = None) -> Ref:
    store.create(claim_object(name, namespace, pool, address=requested))
    return claim_ref(namespace, name)


def run_until_done(store: Store, attempt: Callable[[Store], object], first_crash: int = 0) -> int:
    """``attempt`` through a store that dies at write ``first_crash``, then again (a fresh process) at the next
    write, ..., until an attempt completes; how many attempts died."""
    for deaths in range(first_crash, 100):
        try:
            attempt(CrashingStore(store, deaths))
            return deaths - first_crash
        except Crash:
            continue
    raise AssertionError("never completed")


def check_one_address_per_claim(store: Store, namespace: str, pool: str | None = None) -> dict[str, str]:
    """Every live claim (of ``pool``) holds exactly one IPAddress, the one its status and annotation name; no
    IPAddress belongs to a claim that is gone. Returns claim name → address."""
    claims = {c["metadata"]["name"]: c for c in store.list(IPAM_API, "IPClaim", namespace)
              if pool is None or c["spec"]["pool"]["name"] == pool}
    owned: dict[str, list[Object]] = defaultdict(list)
    for address in store.list(IPAM_API, "IPAddress", namespace):
        if pool is None or address["spec"]["pool"]["name"] == pool:
            owned[address["spec"]["claim"]["name"]].append(address)
    orphans = sorted(name for name in owned if name not in claims)
    assert not orphans, f"IPAddresses of claims that are gone: {orphans}"
    held = {}
    for name, claim in claims.items():
        names = sorted(a["metadata"]["name"] for a in owned[name])
        assert len(names) == 1, f"claim {name} holds {names}"
        assert (claim.get("status") or {}).get("address", {}).get("name") == names[0], (name, claim.get("status"))
        assert claim["metadata"]["annotations"][ADDRESS_ANNOTATION] == owned[name][0]["spec"]["address"]
        held[name] = owned[name][0]["spec"]["address"]
    assert len(set(held.values())) == len(held), f"an address is held twice: {held}"
    return held


# -- fault hook ------------------------------------------------------------------------------------

def steal_then_die(store: Store, namespace: str, tag: str, crash_at: int) -> bool:
    """Claim v-<tag> reserves the pool's first address; competitor s-<tag> takes it just before v does (it asks
    for it by annotation: the pool's index, which names v's pick, would send it elsewhere), so v takes the next
    one; v dies at write ``crash_at``. Whether it died."""
    victim, thief = claim_ref(namespace, f"v-{tag}"), claim_ref(namespace, f"s-{tag}")

    def steal() -> None:
        assert reconcile_ip_claim(store, thief).summary()["address"] == "10.1.0.1"

    crashing = CrashingStore(store, crash_at, steal)
    try:
        reconcile_ip_claim(crashing, victim)
    except Crash:
        if crashing.before_take is not None:  # it died before the theft: the competitor comes anyway
            steal()
        return True
    return False


@pytest.mark.parametrize("thief_releases", [True, False], ids=["stolen-address-freed", "stolen-address-kept"])
def test_a_claimer_killed_at_any_write_while_losing_its_address_leaves_one_address(store, namespace,
                                                                                   thief_releases):
    """Every write of the allocation path is a point of death; so is every write of the reconcile that
    recovers from it. Whatever the pair, the claim ends with one address."""
    scenarios = 0
    for first in range(100):
        tag = f"{first}"
        make_pool(store, namespace, f"p{tag}", "10.1.0.1", "10.1.0.9")
        victim = make_claim(store, namespace, f"v-{tag}", f"p{tag}")
        make_claim(store, namespace, f"s-{tag}", f"p{tag}", "10.1.0.1")
        if not steal_then_die(store, namespace, tag, first):
            break
        if thief_releases:  # the stolen address is free again: the one the dead claimer's annotation names
            store.delete(claim_ref(namespace, f"s-{tag}"))
            assert reconcile_ip_claim(store, claim_ref(namespace, f"s-{tag}")).released
        scenarios += 1 + run_until_done(store, lambda s, ref=victim: reconcile_ip_claim(s, ref))
        assert reconcile_ip_claim(store, victim).address is not None
        held = check_one_address_per_claim(store, namespace, f"p{tag}")
        assert held[f"v-{tag}"] == "10.1.0.2" or (thief_releases and held[f"v-{tag}"] == "10.1.0.1")
        state = reconcile_ip_pool(store, Ref(IPAM_API, "IPPool", f"p{tag}", namespace))
        assert state.allocations == held
    # pick .1 (in the pool's index, where claimers see each other through it), reserve it, lose it, pick .2, take
    # it, name it, write status.
    assert first >= (6 if store.follows else 7), f"the allocation path made only {first} writes"
    assert scenarios > first


def test_the_fault_hook_reproduces_the_second_address_of_issue_12(store, namespace):
    """What the loop above guards, spelt out: death right after taking the replacement address."""
    make_pool(store, namespace, "pool", "10.1.0.1", "10.1.0.9")
    victim = make_claim(store, namespace, "v-x", "pool")
    make_claim(store, namespace, "s-x", "pool", "10.1.0.1")
    # writes: the pool's finalizer, .1 in the pool's index, the reservation of .1, the failed create of .1, .2 in
    # the index, the create of .2; then die. Claimers that follow the pool's addresses write no index.
    assert steal_then_die(store, namespace, "x", 4 if store.follows else 6)
    left = store.get(victim)["metadata"]["annotations"][ADDRESS_ANNOTATION]
    assert left == "10.1.0.1", "the death should come before the annotation names the replacement"
    store.delete(claim_ref(namespace, "s-x"))
    reconcile_ip_claim(store, claim_ref(namespace, "s-x"))
    assert reconcile_ip_claim(store, victim).summary()["address"] == "10.1.0.2"
    assert check_one_address_per_claim(store, namespace) == {"v-x": "10.1.0.2"}


def test_extra_addresses_of_a_claim_are_released_and_the_one_its_status_names_is_kept(store, namespace):
    """Two addresses of one claim (as a reconcile of an older version could leave): the next reconcile whose
    annotation leads to neither keeps the one the status names."""
    make_pool(store, namespace, "pool", "10.1.0.1", "10.1.0.9")
    ref = make_claim(store, namespace, "c", "pool")
    first = reconcile_ip_claim(store, ref).address
    pool = store.get(Ref(IPAM_API, "IPPool", "pool", namespace))
    extra = {**first, "metadata": {**first["metadata"], "name": "pool-10-1-0-5"},
             "spec": {**first["spec"], "address": "10.1.0.5"}}
    for key in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"):
        extra["metadata"].pop(key, None)
    extra["metadata"]["ownerReferences"] = [{"apiVersion": IPAM_API, "kind": "IPPool", "name": "pool",
                                             "uid": pool["metadata"]["uid"]}]
    store.create(extra)
    claim = store.get(ref)
    claim["metadata"]["annotations"][ADDRESS_ANNOTATION] = "10.1.0.7"  # leads nowhere
    store.update(claim)
    result = reconcile_ip_claim(store, ref)
    assert result.summary()["address"] == "10.1.0.1" and result.changed
    assert check_one_address_per_claim(store, namespace) == {"c": "10.1.0.1"}
    assert reconcile_ip_pool(store, Ref(IPAM_API, "IPPool", "pool", namespace)).allocations == {"c": "10.1.0.1"}


def test_a_claim_replaced_without_its_annotation_keeps_its_one_address(store, namespace):
    """A replace of the whole claim (kubectl replace of its manifest) drops the annotation; its status still
    names the address, so the next reconcile finds it rather than taking a second."""
    make_pool(store, namespace, "pool", "10.1.0.1", "10.1.0.9")
    ref = make_claim(store, namespace, "c", "pool")
    assert reconcile_ip_claim(store, ref).summary()["address"] == "10.1.0.1"
    claim = store.get(ref)
    del claim["metadata"]["annotations"][ADDRESS_ANNOTATION]
    store.update(claim)
    assert reconcile_ip_claim(store, ref).summary()["address"] == "10.1.0.1"
    assert check_one_address_per_claim(store, namespace) == {"c": "10.1.0.1"}


# -- SIGKILL loop ----------------------------------------------------------------------------------

KILLS = {"local": 400, "kubernetes": 200}
WORKERS = 4
CLAIMS_PER_WORKER = 4
# A pool a little larger than the claims: claimers collide on the lowest free addresses, and churn frees them.
POOL_END = "10.9.0.20"
MAX_DELAY = {"local": 0.01, "kubernetes": 0.05}


def _open(options: dict[str, str]) -> Store:
    if options["backend"] == "kubernetes":
        return KubernetesStore(kubeconfig=options["kubeconfig"])
    return LocalStore(options["store_path"])


def _churn(options: dict[str, str], namespace: str, names: list[str], progress: Any, seed: int) -> None:
    """One claimer process: forever, one of its claims is created or deleted, then reconciled."""
    rng = random.Random(seed)
    store = _open(options)
    while True:
        ref = claim_ref(namespace, rng.choice(names))
        obj = store.get_if_exists(ref)
        if obj is None:  # most steps allocate, where a claimer dies between losing and naming an address
            # A killed incarnation's create may still land after this one's read (the request was on its way).
            with contextlib.suppress(AlreadyExists):
                store.create(claim_object(ref.name, namespace, "churn"))
        elif not obj["metadata"].get("deletionTimestamp") and rng.random() < 0.5:
            with contextlib.suppress(NotFound):
                store.delete(ref)
        reconcile_ip_claim(store, ref)
        progress.value += 1


def _start(options: dict[str, str], namespace: str, worker: int, progress: Any) -> multiprocessing.Process:
    names = [f"w{worker}-c{c}" for c in range(CLAIMS_PER_WORKER)]
    process = multiprocessing.get_context("fork").Process(
        target=_churn, args=(options, namespace, names, progress, random.randrange(1 << 30)), daemon=True)
    process.start()
    return process


def _wait_for_progress(progress: Any, process: multiprocessing.Process) -> None:
    """Until the (re)started claimer has done one step, so that the kill lands inside its work, not its start."""
    deadline = time.monotonic() + 60
    while progress.value == 0:
        assert process.is_alive(), f"a claimer exited with {process.exitcode}"
        assert time.monotonic() < deadline, "a claimer made no progress"
        time.sleep(0.001)


def test_claimers_sigkilled_at_random_moments_leave_one_address_per_claim(store, store_options, namespace, backend):
    make_pool(store, namespace, "churn", "10.9.0.1", POOL_END)
    # Lock-free counters (one writer each): a process killed while holding a lock would never release it.
    progress = [multiprocessing.get_context("fork").RawValue("q", 0) for _worker in range(WORKERS)]
    workers = [_start(store_options, namespace, w, progress[w]) for w in range(WORKERS)]
    started, kills, steps = time.monotonic(), 0, 0
    try:
        while kills < KILLS[backend]:
            w = random.randrange(WORKERS)
            _wait_for_progress(progress[w], workers[w])
            # A random moment inside the next steps: a step takes a few milliseconds (tens on kube-apiserver).
            time.sleep(random.uniform(0, MAX_DELAY[backend]))
            with contextlib.suppress(ProcessLookupError):  # already dead: the exit code says how
                os.kill(workers[w].pid, signal.SIGKILL)
            workers[w].join()
            assert workers[w].exitcode == -signal.SIGKILL, "a claimer failed on its own (its traceback is above)"
            kills += 1
            steps += progress[w].value
            progress[w].value = 0
            workers[w] = _start(store_options, namespace, w, progress[w])
    finally:
        for worker in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGKILL)
            worker.join()
    elapsed = time.monotonic() - started
    steps += sum(p.value for p in progress)
    # A fresh reconcile of every claim: deleted ones finish going, the others end with their address.
    names = [f"w{w}-c{c}" for w in range(WORKERS) for c in range(CLAIMS_PER_WORKER)]
    for name in names:
        if store.get_if_exists(claim_ref(namespace, name)) is None:
            store.create(claim_object(name, namespace, "churn"))
        result = reconcile_ip_claim(store, claim_ref(namespace, name))
        if result.released:
            store.create(claim_object(name, namespace, "churn"))
            result = reconcile_ip_claim(store, claim_ref(namespace, name))
        assert result.address is not None, (name, result.error, result.waiting)
    held = check_one_address_per_claim(store, namespace)
    assert sorted(held) == sorted(names)
    assert len(store.list(IPAM_API, "IPAddress", namespace)) == len(names)
    assert reconcile_ip_pool(store, Ref(IPAM_API, "IPPool", "churn", namespace)).allocations == held
    print(f"\n{backend}: {kills} kills in {elapsed:.1f}s ({steps} steps), {len(names)} claims, {len(held)} addresses")
    assert kills >= KILLS[backend] >= 100
