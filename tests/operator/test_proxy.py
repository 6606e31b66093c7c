"""The proxy the roles reach the API through: reads of watched objects answered from the operator's cache,
everything else forwarded to the real kube-apiserver with the operator's credentials, answers passed through
unchanged, and every request counted."""
from __future__ import annotations

import copy
import json
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import (
    AlreadyExists,
    Conflict,
    NotFound,
    Unavailable,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.store.kube import KubernetesStore
from metal3_operator.proxy import Proxy, Request, parse
from tests.harness.cluster import KubeCluster, free_port

IPAM = ("ipam.metal3.io", "v1alpha1")
API_VERSION = "ipam.metal3.io/v1alpha1"
CLAIMS = "ipam.metal3.io/ipclaims"


# -- what a request asks (no cluster) --------------------------------------------------------------------------

@pytest.mark.parametrize(("method", "path", "expected"), [
    ("GET", "/apis/ipam.metal3.io/v1alpha1/namespaces/ns/ipclaims/c1",
     Request("get", API_VERSION, "ipclaims", "ns", "c1")),
    ("GET", "/apis/ipam.metal3.io/v1alpha1/namespaces/ns/ipclaims/c1/status",
     Request("get", API_VERSION, "ipclaims", "ns", "c1", "status")),
    ("GET", "/apis/ipam.metal3.io/v1alpha1/namespaces/ns/ipclaims?labelSelector=a%3Db",
     Request("list", API_VERSION, "ipclaims", "ns")),
    ("GET", "/apis/ipam.metal3.io/v1alpha1/ipclaims?watch=true&resourceVersion=5",
     Request("watch", API_VERSION, "ipclaims")),
    ("POST", "/apis/ipam.metal3.io/v1alpha1/namespaces/ns/ipclaims",
     Request("create", API_VERSION, "ipclaims", "ns")),
    ("PUT", "/apis/ipam.metal3.io/v1alpha1/namespaces/ns/ipclaims/c1/status",
     Request("update", API_VERSION, "ipclaims", "ns", "c1", "status")),
    ("PATCH", "/api/v1/namespaces/ns/events/e1", Request("patch", "v1", "events", "ns", "e1")),
    ("DELETE", "/api/v1/namespaces/ns/configmaps", Request("deletecollection", "v1", "configmaps", "ns")),
    ("GET", "/api/v1/namespaces/ns", Request("get", "v1", "namespaces", None, "ns")),
    ("GET", "/api/v1/namespaces", Request("list", "v1", "namespaces")),
    ("GET", "/apis/metal3.io/v1alpha1/baremetalhosts/h1",
     Request("get", "metal3.io/v1alpha1", "baremetalhosts", None, "h1")),
])
def test_a_request_is_read_as_kube_apiserver_reads_it(method: str, path: str, expected: Request) -> None:
    request = parse(method, path)
    assert request.key == expected.key
    assert (request.verb, request.subresource) == (expected.verb, expected.subresource)


@pytest.mark.parametrize(("method", "path", "verb", "resource"), [
    ("GET", "/apis/ipam.metal3.io/v1alpha1/namespaces/ns/ipclaims/c1", "get", CLAIMS),
    ("PUT", "/apis/ipam.metal3.io/v1alpha1/namespaces/ns/ipclaims/c1/status", "update", f"{CLAIMS}/status"),
    ("POST", "/api/v1/namespaces/ns/events", "create", "core/events"),
    ("GET", "/apis", "get", "discovery"),
    ("GET", "/apis/ipam.metal3.io/v1alpha1", "get", "discovery"),
    ("GET", "/version", "get", "version"),
])
def test_requests_are_counted_by_verb_and_resource(method: str, path: str, verb: str, resource: str) -> None:
    request = parse(method, path)
    assert (request.verb, request.resource) == (verb, resource)


# -- against the real kube-apiserver ---------------------------------------------------------------------------

class Cache:
    """What the operator's watch cache would hold: objects by (api_version, plural, namespace, name)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str | None, str], dict[str, Any]] = {}

    def put(self, obj: dict[str, Any], plural: str = "ipclaims") -> None:
        meta = obj["metadata"]
        self.objects[obj["apiVersion"], plural, meta.get("namespace"), meta["name"]] = copy.deepcopy(obj)

    def lookup(self, api_version: str, plural: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.objects.get((api_version, plural, namespace, name))

    def lister(self, api_version: str, plural: str, namespace: str | None) -> tuple[str, list[dict[str, Any]]] | None:
        """A synced cache of IPClaims in every namespace (lists.ListCaches)."""
        if (api_version, plural) != (API_VERSION, "ipclaims"):
            return None
        return "IPClaim", [o for k, o in self.objects.items() if k[:2] == (api_version, plural)
                           and namespace in (None, k[2])]


@pytest.fixture
def cache() -> Cache:
    return Cache()


@pytest.fixture
def proxy(kube_cluster: KubeCluster, cache: Cache) -> Iterator[Proxy]:
    started = Proxy(kube_cluster.api_client(), cache.lookup, registry=CollectorRegistry()).start()
    yield started
    started.shutdown()


@pytest.fixture
def through(proxy: Proxy) -> client.CustomObjectsApi:
    """A client of the proxy, as a role's is: no credentials of its own."""
    return client.CustomObjectsApi(client.ApiClient(client.Configuration(host=proxy.url)))


def ipclaim(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "IPClaim", "metadata": {"name": name, "namespace": namespace},
            "spec": {"pool": {"name": "pool"}}}


def api_status(e: ApiException) -> dict[str, Any]:
    return json.loads(e.body)


@pytest.mark.kubernetes
def test_a_cached_object_is_read_from_the_cache(proxy: Proxy, cache: Cache, through: client.CustomObjectsApi,
                                                kube_namespace: str) -> None:
    # Only in the cache, with a mark the API server never saw: the answer can only have come from there.
    cached = ipclaim("c1", kube_namespace)
    cached["metadata"]["annotations"] = {"from": "cache"}
    cache.put(cached)
    got = through.get_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "c1")
    assert got["metadata"]["annotations"] == {"from": "cache"}
    status = through.get_namespaced_custom_object_status(*IPAM, kube_namespace, "ipclaims", "c1")
    assert status["metadata"]["annotations"] == {"from": "cache"}
    assert proxy.counts() == {("get", CLAIMS, "cache"): 1, ("get", f"{CLAIMS}/status", "cache"): 1}


@pytest.fixture
def listing(kube_cluster: KubeCluster, cache: Cache) -> Iterator[tuple[Proxy, client.CustomObjectsApi]]:
    """A proxy that answers lists from the cache too, and a client of it."""
    started = Proxy(kube_cluster.api_client(), cache.lookup, lister=cache.lister).start()
    yield started, client.CustomObjectsApi(client.ApiClient(client.Configuration(host=started.url)))
    started.shutdown()


@pytest.mark.kubernetes
def test_a_list_with_label_equalities_at_most_is_answered_from_the_cache(
        listing: tuple[Proxy, client.CustomObjectsApi], cache: Cache, kube_namespace: str) -> None:
    proxy, through = listing
    for name, labels in (("c1", {"pool": "a"}), ("c2", {"pool": "b"}), ("c3", {"pool": "a", "x": "y"})):
        claim = ipclaim(name, kube_namespace)  # in the cache only: an answer with them came from there
        claim["metadata"]["labels"] = labels
        cache.put(claim)
    listed = through.list_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", label_selector="pool=a")
    assert listed["kind"] == "IPClaimList" and listed["apiVersion"] == API_VERSION
    assert [o["metadata"]["name"] for o in listed["items"]] == ["c1", "c3"]
    assert listed["metadata"]["resourceVersion"] == ""  # nothing can watch from a cache's answer
    everything = through.list_cluster_custom_object(*IPAM, "ipclaims", label_selector="pool==a,x=y")
    assert [o["metadata"]["name"] for o in everything["items"]] == ["c3"]
    assert proxy.counts() == {("list", CLAIMS, "cache"): 2}

    # Any other selector, a field selector or paging: the API server answers (it holds none of them).
    for asked in ({"label_selector": "pool!=a"}, {"label_selector": "pool in (a)"}, {"label_selector": "pool"},
                  {"field_selector": "metadata.name=c1"}, {"limit": 1}):
        assert through.list_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", **asked)["items"] == []
    assert proxy.counts()[("list", CLAIMS, "api")] == 5


@pytest.mark.kubernetes
def test_a_list_waits_for_the_cache_to_hold_what_went_through_the_proxy(
        listing: tuple[Proxy, client.CustomObjectsApi], cache: Cache, kube_namespace: str) -> None:
    proxy, through = listing
    created = through.create_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims",
                                                      ipclaim("c1", kube_namespace))
    # The watch has not brought the creation yet: the API server answers, with it.
    assert [o["metadata"]["name"] for o in
            through.list_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims")["items"]] == ["c1"]
    cache.put(created)  # now it has
    assert [o["metadata"]["name"] for o in
            through.list_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims")["items"]] == ["c1"]
    through.delete_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "c1")
    # Deleted through the proxy, still in the cache: the API server answers, without it.
    assert through.list_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims")["items"] == []
    assert proxy.counts() == {("create", CLAIMS, "api"): 1, ("list", CLAIMS, "api"): 2, ("list", CLAIMS, "cache"): 1,
                              ("delete", CLAIMS, "api"): 1}


@pytest.mark.kubernetes
def test_what_the_cache_does_not_hold_is_read_from_the_api_server(
        proxy: Proxy, custom: client.CustomObjectsApi, through: client.CustomObjectsApi, kube_namespace: str) -> None:
    custom.create_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", ipclaim("c1", kube_namespace))
    got = through.get_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "c1")
    assert got["spec"] == {"pool": {"name": "pool"}}
    listed = through.list_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims")
    assert [o["metadata"]["name"] for o in listed["items"]] == ["c1"]
    assert proxy.counts() == {("get", CLAIMS, "api"): 1, ("list", CLAIMS, "api"): 1}


@pytest.mark.kubernetes
def test_writes_go_to_the_api_server(proxy: Proxy, cache: Cache, custom: client.CustomObjectsApi,
                                     through: client.CustomObjectsApi, kube_namespace: str) -> None:
    created = through.create_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims",
                                                      ipclaim("c1", kube_namespace))
    created["metadata"]["labels"] = {"updated": "yes"}
    through.replace_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "c1", created)
    through.patch_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "c1",
                                           {"metadata": {"annotations": {"patched": "yes"}}})
    on_server = custom.get_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "c1")
    assert on_server["metadata"]["labels"] == {"updated": "yes"}
    assert on_server["metadata"]["annotations"] == {"patched": "yes"}
    through.delete_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "c1")
    with pytest.raises(ApiException) as gone:
        custom.get_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "c1")
    assert gone.value.status == 404
    assert proxy.counts() == {("create", CLAIMS, "api"): 1, ("update", CLAIMS, "api"): 1,
                              ("patch", CLAIMS, "api"): 1, ("delete", CLAIMS, "api"): 1}


@pytest.mark.kubernetes
def test_errors_pass_through_with_the_api_servers_status(through: client.CustomObjectsApi,
                                                         kube_namespace: str) -> None:
    with pytest.raises(ApiException) as missing:
        through.get_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "nowhere")
    assert missing.value.status == 404
    assert api_status(missing.value)["reason"] == "NotFound"
    assert "nowhere" in api_status(missing.value)["message"]

    created = through.create_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims",
                                                      ipclaim("c1", kube_namespace))
    with pytest.raises(ApiException) as exists:
        through.create_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", ipclaim("c1", kube_namespace))
    assert exists.value.status == 409
    assert api_status(exists.value)["reason"] == "AlreadyExists"

    through.patch_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "c1",
                                           {"metadata": {"labels": {"a": "b"}}})
    with pytest.raises(ApiException) as stale:
        through.replace_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "c1", created)
    assert stale.value.status == 409
    assert api_status(stale.value)["reason"] == "Conflict"


@pytest.mark.kubernetes
def test_a_cached_copy_older_than_a_write_through_the_proxy_is_not_served(
        proxy: Proxy, cache: Cache, through: client.CustomObjectsApi, kube_namespace: str) -> None:
    created = through.create_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims",
                                                      ipclaim("c1", kube_namespace))
    cache.put(created)  # the watch delivered the creation
    key = (API_VERSION, "ipclaims", kube_namespace, "c1")
    assert proxy.newest(*key) == (True, created["metadata"]["resourceVersion"])
    updated = through.patch_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "c1",
                                                     {"metadata": {"labels": {"a": "b"}}})
    assert proxy.newest(*key) == (True, updated["metadata"]["resourceVersion"])  # what the operator waits for
    # The cache still holds the creation: the read goes to the API server, and sees the role's own write.
    assert through.get_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "c1")["metadata"]["labels"] == \
        {"a": "b"}
    cache.put(updated)  # the watch caught up
    through.get_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "c1")
    assert proxy.newest(*key) == (False, None)  # nothing the cache lacks
    assert proxy.counts() == {("create", CLAIMS, "api"): 1, ("patch", CLAIMS, "api"): 1,
                              ("get", CLAIMS, "api"): 1, ("get", CLAIMS, "cache"): 1}

    # A write made elsewhere (the operator's own status write) counts when it is told.
    written = copy.deepcopy(updated)
    written["metadata"]["resourceVersion"] = "newer"
    proxy.saw(written, API_VERSION, "ipclaims")
    through.get_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "c1")
    assert proxy.counts()[("get", CLAIMS, "api")] == 2

    # Deleted through the proxy: a copy the cache still holds is not served.
    through.delete_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "c1")
    with pytest.raises(ApiException) as gone:
        through.get_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "c1")
    assert gone.value.status == 404


@pytest.mark.kubernetes
def test_a_cached_copy_newer_than_a_write_through_the_proxy_is_served(
        proxy: Proxy, cache: Cache, through: client.CustomObjectsApi, custom: client.CustomObjectsApi,
        kube_namespace: str) -> None:
    """The role wrote, then the operator wrote its result (not through the proxy), and the watch brought both
    before the next read: the cache holds all the proxy waited for, and more."""
    created = through.create_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims",
                                                      ipclaim("c1", kube_namespace))
    later = custom.patch_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "c1",
                                                  {"metadata": {"labels": {"result": "written"}}})
    assert int(later["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    cache.put(later)
    got = through.get_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "c1")
    assert got["metadata"]["labels"] == {"result": "written"}
    assert proxy.counts()[("get", CLAIMS, "cache")] == 1 and ("get", CLAIMS, "api") not in proxy.counts()
    assert proxy.newest(API_VERSION, "ipclaims", kube_namespace, "c1") == (False, None)


@pytest.mark.kubernetes
def test_a_watch_streams_through(proxy: Proxy, custom: client.CustomObjectsApi, through: client.CustomObjectsApi,
                                 kube_namespace: str) -> None:
    seen: list[tuple[str, str]] = []
    started = threading.Event()
    stream = watch.Watch()

    def follow() -> None:
        started.set()
        for event in stream.stream(through.list_namespaced_custom_object, *IPAM, kube_namespace, "ipclaims",
                                   timeout_seconds=20):
            seen.append((event["type"], event["object"]["metadata"]["name"]))
            if len(seen) == 2:
                stream.stop()

    follower = threading.Thread(target=follow)
    follower.start()
    started.wait()
    for name in ("c1", "c2"):
        custom.create_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", ipclaim(name, kube_namespace))
    follower.join(30)
    assert seen == [("ADDED", "c1"), ("ADDED", "c2")]
    assert proxy.counts()[("watch", CLAIMS, "api")] == 1


@pytest.mark.kubernetes
def test_a_watch_its_role_leaves_early_does_not_spoil_the_next_requests(
        proxy: Proxy, custom: client.CustomObjectsApi, through: client.CustomObjectsApi, kube_namespace: str) -> None:
    """A role process that ends while its watch is open (a store's live view, say): the API server's connection
    that carried it still has the rest of the watch on its way, and must not be handed to the next request."""
    import socket
    import urllib.parse

    custom.create_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", ipclaim("c0", kube_namespace))
    where = urllib.parse.urlsplit(proxy.url)
    for round_ in range(5):
        with socket.create_connection((where.hostname, where.port)) as role:
            role.sendall(f"GET /apis/{API_VERSION}/namespaces/{kube_namespace}/ipclaims?watch=true "
                         f"HTTP/1.1\r\nHost: {where.netloc}\r\n\r\n".encode())
            assert role.recv(65536).startswith(b"HTTP/1.")  # the watch is on, its first event maybe with it
        custom.create_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims",
                                               ipclaim(f"c{round_ + 1}", kube_namespace))
        listed = through.list_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims")
        assert len(listed["items"]) == round_ + 2


@pytest.mark.kubernetes
def test_the_collections_kube_store_works_through_the_proxy(proxy: Proxy, cache: Cache, kube_namespace: str,
                                                            tmp_path: Path) -> None:
    store = KubernetesStore(kubeconfig=str(proxy.write_kubeconfig(tmp_path / "kubeconfig")))
    ref = Ref(API_VERSION, "IPClaim", "c1", kube_namespace)
    created = store.create(ipclaim("c1", kube_namespace))
    cache.put(created)
    assert store.get(ref)["metadata"]["uid"] == created["metadata"]["uid"]
    created["metadata"]["labels"] = {"a": "b"}
    updated = store.update(created)
    assert store.get(ref)["metadata"]["labels"] == {"a": "b"}  # its own write, though the cache lags
    cache.put(updated)
    assert store.get(ref)["metadata"]["resourceVersion"] == updated["metadata"]["resourceVersion"]
    with pytest.raises(Conflict):
        store.update(created)  # the version it was read at is gone
    with pytest.raises(AlreadyExists):
        store.create(ipclaim("c1", kube_namespace))
    assert [o["metadata"]["name"] for o in store.list(API_VERSION, "IPClaim", kube_namespace)] == ["c1"]
    store.delete(ref)
    with pytest.raises(NotFound):
        store.get(ref)
    store.close()
    counts = proxy.counts()
    assert counts[("get", CLAIMS, "cache")] == 2
    assert counts[("get", CLAIMS, "api")] == 2  # after its own update, and after the deletion


@pytest.mark.kubernetes
def test_an_api_server_out_of_reach_is_unavailable_to_the_roles(kube_cluster: KubeCluster, tmp_path: Path) -> None:
    api = kube_cluster.api_client()
    api.configuration.host = f"https://127.0.0.1:{free_port()}"  # nothing listens there
    unreachable = Proxy(client.ApiClient(api.configuration)).start()
    try:
        # The 503 the proxy answers is the store's Unavailable, at its first request (discovery) or any other.
        with pytest.raises(Unavailable, match="cannot reach the API server"):
            store = KubernetesStore(kubeconfig=str(unreachable.write_kubeconfig(tmp_path / "kubeconfig")))
            store.get(Ref(API_VERSION, "IPClaim", "c1", "ns"))
    finally:
        unreachable.shutdown()


@pytest.mark.kubernetes
def test_an_answer_does_not_wait_for_the_roles_acknowledgement(
        proxy: Proxy, cache: Cache, through: client.CustomObjectsApi, kube_namespace: str) -> None:
    # Headers and body leave in two writes; with Nagle's algorithm on, each answer took the client's delayed
    # ACK, 40 ms, where the cache answers in well under one.
    cache.put(ipclaim("c1", kube_namespace))
    through.get_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "c1")
    started = time.monotonic()
    for _unused in range(20):
        through.get_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "c1")
    assert (time.monotonic() - started) / 20 < 0.02


@pytest.mark.kubernetes
def test_requests_are_exported_as_metrics(kube_cluster: KubeCluster, cache: Cache, kube_namespace: str) -> None:
    registry = CollectorRegistry()
    counted = Proxy(kube_cluster.api_client(), cache.lookup, registry=registry).start()
    try:
        cache.put(ipclaim("c1", kube_namespace))
        through = client.CustomObjectsApi(client.ApiClient(client.Configuration(host=counted.url)))
        through.get_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "c1")
        labels = {"verb": "get", "resource": CLAIMS, "source": "cache"}
        assert registry.get_sample_value("metal3_operator_proxy_requests_total", labels) == 1
    finally:
        counted.shutdown()


# -- in the operator -------------------------------------------------------------------------------------------

def proxied(samples: dict[str, float], source: str) -> dict[str, float]:
    """The operator's proxy counters of one source, by their labels."""
    prefix = "metal3_operator_proxy_requests_total{"
    return {k[len(prefix):-1]: v for k, v in samples.items() if k.startswith(prefix) and f'source="{source}"' in k}


@pytest.mark.kubernetes
def test_the_operators_roles_read_watched_objects_from_its_cache(operators: Any, custom: client.CustomObjectsApi,
                                                                 kube_namespace: str) -> None:
    from tests.operator.conftest import eventually
    from tests.operator.test_operator_ipam import create_claims, create_pool, ready_claims

    port = free_port()
    operator = operators("--proxy-port", str(port))
    # The roles' kubeconfig, in the runner directory, names the proxy and holds no credentials.
    kubeconfig = yaml.safe_load((operator.workdir / "runner" / "kubeconfig").read_text())
    assert kubeconfig["clusters"][0]["cluster"] == {"server": f"http://127.0.0.1:{port}"}
    assert kubeconfig["users"][0]["user"] == {}
    create_pool(custom, kube_namespace)
    create_claims(custom, kube_namespace, 3)
    eventually(lambda: ready_claims(custom, kube_namespace, 3), "3 claims Ready")
    samples = operator.metrics()
    cache, api = proxied(samples, "cache"), proxied(samples, "api")
    assert sum(v for k, v in cache.items() if 'resource="ipam.metal3.io/ipclaims"' in k) >= 3
    # What no cache holds goes to the API server: the addresses the claims are given.
    assert api['resource="ipam.metal3.io/ipaddresses",source="api",verb="create"'] >= 3


@pytest.mark.kubernetes
def test_without_the_proxy_the_roles_reach_the_api_server_themselves(operators: Any, custom: client.CustomObjectsApi,
                                                                     kube_namespace: str) -> None:
    from tests.operator.conftest import eventually
    from tests.operator.test_operator_ipam import create_claims, create_pool, ready_claims

    operator = operators("--no-proxy")
    create_pool(custom, kube_namespace)
    create_claims(custom, kube_namespace, 1)
    eventually(lambda: ready_claims(custom, kube_namespace, 1), "the claim Ready")
    assert not proxied(operator.metrics(), "cache") and not proxied(operator.metrics(), "api")
