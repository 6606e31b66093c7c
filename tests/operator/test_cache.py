"""The informer's cache of one kind, and what a re-list of it wakes: new objects, spec edits, deletions started
or done - not status writes. No cluster: the list is the test's."""
from __future__ import annotations

import threading

from kubernetes import client

from metal3_operator.cache import Cache, at_least
from metal3_operator.informer import Informer
from metal3_operator.watches import Watch

WATCH = Watch("ipam.metal3.io", "v1alpha1", "IPClaim", role="r")


def claim(name: str, namespace: str = "ns", generation: int = 1, **status: str) -> dict:
    return {"metadata": {"name": name, "namespace": namespace, "generation": generation}, "status": status}


def test_the_cache_serves_an_object_and_a_namespaces_objects_by_name():
    cache = Cache(WATCH.api_version, WATCH.kind)
    for obj in (claim("b"), claim("a"), claim("a", "other")):
        cache.put(obj)
    assert cache.get("ns", "a")["kind"] == "IPClaim"  # a list's items lack it; the cache's do not
    assert cache.get("ns", "missing") is None
    assert [o["metadata"]["name"] for o in cache.list("ns")] == ["a", "b"]
    assert len(cache.list()) == 3 and cache.keys() == [("ns", "a"), ("ns", "b"), ("other", "a")]


def test_a_relist_replaces_only_its_namespace():
    cache = Cache(WATCH.api_version, WATCH.kind)
    for obj in (claim("a"), claim("b"), claim("a", "other")):
        cache.put(obj)
    gone, replaced = cache.replace("ns", [claim("b", generation=2), claim("c")])
    assert gone == [("ns", "a")]
    assert replaced[("ns", "b")]["metadata"]["generation"] == 1 and replaced[("ns", "c")] is None
    assert cache.keys() == [("ns", "b"), ("ns", "c"), ("other", "a")]


def test_a_relist_wakes_what_changed_in_a_way_that_wants_a_reconcile():
    woken: list = []
    synced: list = []
    informer = Informer(WATCH, client.ApiClient(), Cache(WATCH.api_version, WATCH.kind), ["ns"], woken.append,
                        lambda: synced.append(True), threading.Event())
    lists = iter([
        [claim("edited"), claim("status-only"), claim("deleted"), claim("deleting")],
        [claim("edited", generation=2), claim("status-only", phase="Ready"),
         {**claim("deleting"), "metadata": {**claim("deleting")["metadata"], "deletionTimestamp": "t"}},
         claim("new")],
    ])
    informer._list = lambda namespace, **kwargs: {"items": next(lists), "metadata": {"resourceVersion": "7"}}
    assert informer.relist("ns") == "7"
    assert len(woken) == 4 and synced == [True] and informer.synced.is_set()
    woken.clear()
    informer.relist("ns")
    assert sorted(woken) == [("ns", "deleted"), ("ns", "deleting"), ("ns", "edited"), ("ns", "new")]
    assert synced == [True]  # once


def versioned(name: str, version: str) -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": version}}


def test_waiting_for_a_version_returns_it_or_a_later_one_once_the_cache_holds_it():
    cache = Cache(WATCH.api_version, WATCH.kind)
    cache.put(versioned("a", "9"))
    assert cache.wait_for(("ns", "a"), "9", 0)["metadata"]["resourceVersion"] == "9"
    assert cache.wait_for(("ns", "a"), "10", 0) is None  # "9" < "10": as numbers, not as text
    later = threading.Timer(0.05, cache.put, [versioned("a", "11")])
    later.start()
    assert cache.wait_for(("ns", "a"), "10", 5)["metadata"]["resourceVersion"] == "11"
    assert cache.wait_for(("ns", "gone"), "1", 0) is None


def test_at_least_compares_revisions_as_numbers_and_anything_else_for_equality():
    assert at_least(versioned("a", "10"), "9") and not at_least(versioned("a", "9"), "10")
    assert at_least(versioned("a", "x"), "x") and not at_least(versioned("a", "x"), "y")
