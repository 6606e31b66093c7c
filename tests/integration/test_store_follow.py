"""kube-apiserver's live views (KubernetesStore.follow), and what the IP allocator gains from them: claimers that
see each other's addresses from a watch, as upstream's controller does from its cache, and so neither read nor
write the pool's index per claim."""
from __future__ import annotations

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import (
    IPAM_API,
    POOL_LABEL,
    reconcile_ip_claim,
    reconcile_ip_pool,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.claims import claim_object
from tests.conftest import eventually
from tests.harness.counting_store import CountingStore


@pytest.fixture
def kube(kube_cluster):
    with open_store({"backend": "kubernetes", "kubeconfig": str(kube_cluster.kubeconfig)}) as opened:
        yield opened


def address(name: str, namespace: str, ip: str, pool: str = "pool") -> dict:
    return {"apiVersion": IPAM_API, "kind": "IPAddress",
            "metadata": {"name": name, "namespace": namespace, "labels": {POOL_LABEL: pool}},
            "spec": {"address": ip, "pool": {"name": pool}, "claim": {"name": "someone"}}}


def names(view) -> set[str]:
    return {o["metadata"]["name"] for o in view.objects()}


def test_a_view_sees_another_clients_creates_changes_and_deletes(kube, kube_cluster, kube_namespace):
    kube.create(address("before", kube_namespace, "10.0.0.1"))
    kube.create(address("other-pool", kube_namespace, "10.0.0.9", pool="other"))
    view = kube.follow(IPAM_API, "IPAddress", kube_namespace, f"{POOL_LABEL}=pool")
    assert view is not None and names(view) == {"before"}  # listed before it is returned
    assert not view.kept  # a one-shot process's view: one list, no watch
    assert kube.follow(IPAM_API, "IPAddress", kube_namespace, f"{POOL_LABEL}=pool") is view  # once per selector
    assert view.kept  # used again: the process lives on, and a watch keeps the view current
    with open_store({"backend": "kubernetes", "kubeconfig": str(kube_cluster.kubeconfig)}) as another:
        another.create(address("after", kube_namespace, "10.0.0.2"))
        assert eventually(lambda: names(view) == {"before", "after"})
        another.patch(Ref(IPAM_API, "IPAddress", "after", kube_namespace), {"metadata": {"annotations": {"a": "b"}}})
        assert eventually(lambda: any((o["metadata"].get("annotations") or {}).get("a") == "b"
                                      for o in view.objects()))
        another.delete(Ref(IPAM_API, "IPAddress", "before", kube_namespace))
        assert eventually(lambda: names(view) == {"after"})
    assert all(o["kind"] == "IPAddress" and o["apiVersion"] == IPAM_API for o in view.objects())


def test_the_local_store_offers_no_view(tmp_path):
    with open_store({"backend": "local", "store_path": str(tmp_path / "store.db")}) as local:
        assert not local.follows
        assert local.follow(IPAM_API, "IPAddress", "ns", f"{POOL_LABEL}=pool") is None


def test_an_allocation_on_kube_apiserver_makes_four_requests_after_the_claims_create_and_none_to_the_pools_index(
        kube, kube_namespace):
    """A claimer's first allocation lists the pool's addresses and, as one that may run only once (a module),
    records its address in the pool's index; from its second, a watch keeps its view and each allocation reads
    the pool, reserves the address on the claim, creates the IPAddress and writes the claim's status: the index
    is then the pool reconcile's, rebuilt from the IPAddresses."""
    pool = Ref(IPAM_API, "IPPool", "pool", kube_namespace)
    kube.create({"apiVersion": IPAM_API, "kind": "IPPool", "metadata": {"name": "pool", "namespace": kube_namespace},
                 "spec": {"namePrefix": "pool", "pools": [{"subnet": "10.0.0.0/24"}], "prefix": 24}})
    reconcile_ip_pool(kube, pool)
    counting = CountingStore(kube)
    taken = []
    for i in range(4):
        created = counting.create(claim_object(f"claim-{i}", kube_namespace, "pool"))
        counting.counts.clear()
        allocation = reconcile_ip_claim(counting, Ref(IPAM_API, "IPClaim", f"claim-{i}", kube_namespace),
                                        current=created)
        taken.append(allocation.summary()["address"])
        once = {"patch_status IPPool": 1} if i == 0 else {}
        assert {f"{verb} {kind}": n for (verb, kind), n in counting.counts.items()} == {
            "get IPPool": 1, "update IPClaim": 1, "create IPAddress": 1, "update_status IPClaim": 1, **once}
    assert taken == ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]  # in order: a claimer alone never spreads
    assert kube.get(pool)["status"]["indexes"] == {"claim-0": "10.0.0.1"}
    reconcile_ip_pool(kube, pool)
    assert kube.get(pool)["status"]["indexes"] == {f"claim-{i}": a for i, a in enumerate(taken)}


def test_closing_a_store_ends_its_views_watch_at_once_and_cleanly(kube_cluster, kube_namespace):
    """As an action plugin does once per task: open, follow, close; the watch's read ends with the store, and
    nothing it does while ending reaches the caller."""
    import threading

    def following() -> int:
        return sum(1 for t in threading.enumerate() if t.name == "follow IPAddress" and t.is_alive())

    before = following()
    for i in range(20):
        with open_store({"backend": "kubernetes", "kubeconfig": str(kube_cluster.kubeconfig)}) as opened:
            for _use in range(2):  # its second use starts the watch
                assert opened.follow(IPAM_API, "IPAddress", kube_namespace, f"{POOL_LABEL}=pool") is not None
            assert following() > before
            opened.create(address(f"a{i}", kube_namespace, f"10.0.0.{i + 1}"))
    assert eventually(lambda: following() == before, timeout=10)
