"""The watch caches the proxy answers the roles' lists from: which kinds --list-cache names, and when a cache
answers for a namespace. No cluster: the informers are never started."""
from __future__ import annotations

import pytest
from kubernetes import client

from metal3_operator.cache import Cache
from metal3_operator.informer import Informer
from metal3_operator.lists import DEFAULT_LIST_CACHE, ListCaches, parse_kinds
from metal3_operator.watches import Watch, WatchesError


@pytest.mark.parametrize("text, kinds", [
    (DEFAULT_LIST_CACHE, [("ipam.metal3.io", "v1alpha1", "IPAddress")]),
    ("", []),
    (" metal3.io/v1alpha1/BareMetalHost , v1/ConfigMap",
     [("metal3.io", "v1alpha1", "BareMetalHost"), ("", "v1", "ConfigMap")]),
])
def test_list_cache_names_kinds_as_group_version_kind(text, kinds):
    assert [(w.group, w.version, w.kind) for w in parse_kinds(text)] == kinds


@pytest.mark.parametrize("text, error", [
    ("ipaddresses", "'ipaddresses' is not group/version/Kind"),
    ("ipam.metal3.io/v1alpha1/ipaddresses", "is not group/version/Kind"),  # a resource, not a kind
    ("ipam.metal3.io//IPAddress", "is not group/version/Kind"),
    ("v1/Secret", "Secrets are never cached"),
])
def test_list_cache_refuses_what_is_not_a_kind_and_secrets(text, error):
    with pytest.raises(WatchesError, match=error):
        parse_kinds(text)


def caches(namespaces: list[str], selector: dict | None = None) -> tuple[ListCaches, Informer]:
    w = Watch("ipam.metal3.io", "v1alpha1", "IPAddress", selector=selector or {})
    cache = Cache(w.api_version, w.kind)
    cache.put({"metadata": {"name": "a", "namespace": "ns"}})
    cache.put({"metadata": {"name": "b", "namespace": "other"}})
    informer = Informer(w, client.ApiClient(), cache, namespaces, lambda key: None, lambda: None, None)
    informer.plural = "ipaddresses"
    lists = ListCaches()
    lists.add(informer, cache)
    return lists, informer


@pytest.mark.parametrize("namespaces, asked, answered", [
    ([""], "ns", ["a"]),
    ([""], None, ["a", "b"]),  # every namespace, watched whole
    (["ns"], "ns", ["a"]),
    (["ns"], "elsewhere", None),  # a namespace the operator does not watch
    (["ns"], None, None),  # every namespace, of which it watches one
], ids=["all-one", "all-all", "one-one", "one-other", "one-all"])
def test_a_synced_cache_answers_for_the_namespaces_it_watches(namespaces, asked, answered):
    lists, informer = caches(namespaces)
    assert lists("ipam.metal3.io/v1alpha1", "ipaddresses", asked) is None  # not synced yet
    informer.synced.set()
    got = lists("ipam.metal3.io/v1alpha1", "ipaddresses", asked)
    assert (None if got is None else [o["metadata"]["name"] for o in got[1]]) == answered
    assert lists("ipam.metal3.io/v1alpha1", "ipclaims", asked) is None  # no cache of that kind


def test_a_cache_whose_watch_selects_by_label_answers_no_list():
    lists, informer = caches([""], selector={"matchLabels": {"a": "b"}})
    informer.synced.set()
    assert lists("ipam.metal3.io/v1alpha1", "ipaddresses", "ns") is None
