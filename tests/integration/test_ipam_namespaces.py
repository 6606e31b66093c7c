"""A claim allocates from a pool of another namespace only where the pool says so (issue 12, defect 9).

The pool's ipam.metal3.io/allowed-namespaces annotation lists the namespaces it serves besides its own
("*": all); the claim names the pool through spec.pool.namespace, the ip-pool-namespace label, or falls back
to the default namespace. On both backends.
"""
from __future__ import annotations

import contextlib
import secrets
from typing import Any, Iterator

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import (
    ALLOWED_NAMESPACES_ANNOTATION,
    IPAM_API,
    POOL_NAME_LABEL,
    POOL_NAMESPACE_LABEL,
    reconcile_ip_claim,
    reconcile_ip_pool,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.modules import ip_claim, ip_pool


@pytest.fixture
def other_namespace(backend: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """The namespace of the pools: another than the claims'."""
    if backend != "kubernetes":
        yield "pools"
        return
    cluster = request.getfixturevalue("kube_cluster")
    name = cluster.new_namespace("ipam-pools")
    yield name
    cluster.delete_namespace(name)


def make_pool(store: Store, namespace: str, name: str = "pool", allowed: str | None = None,
              labels: dict[str, str] | None = None) -> Object:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    if allowed is not None:
        metadata["annotations"] = {ALLOWED_NAMESPACES_ANNOTATION: allowed}
    return store.create({"apiVersion": IPAM_API, "kind": "IPPool", "metadata": metadata,
                         "spec": {"namePrefix": name, "pools": [{"start": "10.7.0.1", "end": "10.7.0.9"}],
                                  "prefix": 24}})


def make_claim(store: Store, namespace: str, name: str, pool: dict[str, str] | None = None,
               labels: dict[str, str] | None = None) -> Ref:
    store.create({"apiVersion": IPAM_API, "kind": "IPClaim",
                  "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
                  "spec": {"pool": pool} if pool else {}})
    return Ref(IPAM_API, "IPClaim", name, namespace)


def refusal(pool_namespace: str, pool: str, namespace: str) -> str:
    return (f"IPPool {pool_namespace}/{pool} does not serve namespace {namespace}: its "
            f"{ALLOWED_NAMESPACES_ANNOTATION} annotation must list {namespace} (or \"*\") to serve claims of it")


def allow(store: Store, ref: Ref, value: str | None) -> None:
    store.patch(ref, {"metadata": {"annotations": {ALLOWED_NAMESPACES_ANNOTATION: value}}})


def test_a_pool_of_another_namespace_refuses_a_claim_it_does_not_serve(store, namespace, other_namespace):
    make_pool(store, other_namespace)
    ref = make_claim(store, namespace, "c", {"name": "pool", "namespace": other_namespace})
    result = reconcile_ip_claim(store, ref)
    expected = refusal(other_namespace, "pool", namespace)
    assert (result.address, result.error) == (None, expected)
    status = store.get(ref)["status"]
    assert status["errorMessage"] == expected
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"], ready["message"]) == ("False", "AllocationFailed", expected)
    assert store.list(IPAM_API, "IPAddress", other_namespace) == []
    pool = store.get(Ref(IPAM_API, "IPPool", "pool", other_namespace))
    assert not pool["metadata"].get("finalizers"), "a refused claim writes nothing to the pool"


@pytest.mark.parametrize("allowed", ["{ns}", "elsewhere,{ns}", " elsewhere , {ns} ", "*"])
def test_a_pool_that_lists_the_claims_namespace_serves_it(store, namespace, other_namespace, allowed):
    make_pool(store, other_namespace, allowed=allowed.format(ns=namespace))
    ref = make_claim(store, namespace, "c", {"name": "pool", "namespace": other_namespace})
    result = reconcile_ip_claim(store, ref)
    assert result.summary()["address"] == "10.7.0.1"
    address = result.address
    assert address["metadata"]["namespace"] == other_namespace
    assert address["spec"]["claim"]["namespace"] == namespace
    # No owner reference across namespaces: the garbage collector would take it for a dangling one.
    assert [o["kind"] for o in address["metadata"]["ownerReferences"]] == ["IPPool"]
    assert store.get(ref)["status"]["address"] == {"name": "pool-10-7-0-1", "namespace": other_namespace}


@pytest.mark.parametrize("allowed", ["", "elsewhere", "{ns}-x", "{ns}*"])
def test_a_pool_that_does_not_list_the_claims_namespace_refuses_it(store, namespace, other_namespace, allowed):
    make_pool(store, other_namespace, allowed=allowed.format(ns=namespace))
    ref = make_claim(store, namespace, "c", {"name": "pool", "namespace": other_namespace})
    assert reconcile_ip_claim(store, ref).error == refusal(other_namespace, "pool", namespace)


def test_the_pool_namespace_label_is_held_to_the_same_rule(store, namespace, other_namespace):
    pool_ref = Ref.of(make_pool(store, other_namespace))
    ref = make_claim(store, namespace, "c", labels={POOL_NAME_LABEL: "pool", POOL_NAMESPACE_LABEL: other_namespace})
    assert reconcile_ip_claim(store, ref).error == refusal(other_namespace, "pool", namespace)
    allow(store, pool_ref, namespace)
    assert reconcile_ip_claim(store, ref).summary()["address"] == "10.7.0.1"
    assert "errorMessage" not in store.get(ref)["status"]


def test_a_serving_pool_is_chosen_over_one_that_does_not_serve(store, namespace, other_namespace):
    labels = {"cluster.x-k8s.io/network-name": "shared"}
    make_pool(store, other_namespace, "a-closed", labels=labels)
    make_pool(store, other_namespace, "b-open", allowed=namespace, labels=labels)
    ref = make_claim(store, namespace, "c", labels={**labels, POOL_NAMESPACE_LABEL: other_namespace})
    assert reconcile_ip_claim(store, ref).address["spec"]["pool"]["name"] == "b-open"


def test_taking_a_namespace_off_the_list_stops_new_claims_and_keeps_what_is_held(store, namespace, other_namespace):
    pool_ref = Ref.of(make_pool(store, other_namespace, allowed=namespace))
    held = make_claim(store, namespace, "held", {"name": "pool", "namespace": other_namespace})
    assert reconcile_ip_claim(store, held).summary()["address"] == "10.7.0.1"
    allow(store, pool_ref, None)
    assert reconcile_ip_claim(store, held).summary()["address"] == "10.7.0.1"
    late = make_claim(store, namespace, "late", {"name": "pool", "namespace": other_namespace})
    assert reconcile_ip_claim(store, late).error == refusal(other_namespace, "pool", namespace)
    assert reconcile_ip_pool(store, pool_ref).allocations == {"held": "10.7.0.1"}


def test_the_fallback_to_the_default_namespace_is_held_to_the_same_rule(store, namespace):
    """A claim whose namespace has no pool of the name it asks for falls back to the default namespace's, which
    must serve it too. The pool has a name of its own: the default namespace is shared by every test."""
    name = f"fallback-{secrets.token_hex(3)}"
    pool_ref = Ref.of(make_pool(store, "default", name))
    ref = make_claim(store, namespace, "c", labels={POOL_NAME_LABEL: name})
    try:
        assert reconcile_ip_claim(store, ref).error == refusal("default", name, namespace)
        allow(store, pool_ref, f"{namespace}")
        assert reconcile_ip_claim(store, ref).address["metadata"]["namespace"] == "default"
    finally:
        store.delete(ref)
        reconcile_ip_claim(store, ref)
        with contextlib.suppress(NotFound):
            store.delete(pool_ref)
            reconcile_ip_pool(store, pool_ref)
    with pytest.raises(NotFound):
        store.get(pool_ref)


# -- the modules ---------------------------------------------------------------------------------

def params(module_spec: Any, store_options: dict[str, str], **given: Any) -> dict[str, Any]:
    """A module's parameters as Ansible gives them to its run function: every option, defaults filled in."""
    defaults = {name: option.get("default") for name, option in module_spec.argument_spec.items()}
    return {**defaults, **store_options, **given}


def test_ip_claim_fails_naming_the_pool_and_the_namespace(store, store_options, namespace, other_namespace):
    make_pool(store, other_namespace)
    result = ip_claim.run(params(ip_claim.SPEC, store_options, name="c", namespace=namespace, pool="pool",
                                 pool_namespace=other_namespace), False)
    assert result["failed"] and not result["allocated"]
    assert result["msg"] == refusal(other_namespace, "pool", namespace)


def test_ip_pool_sets_and_removes_the_allowed_namespaces(store, store_options, namespace, other_namespace):
    spec = {"namePrefix": "pool", "pools": [{"start": "10.7.0.1", "end": "10.7.0.9"}], "prefix": 24}

    def run_pool(**given: Any) -> dict[str, Any]:
        return ip_pool.run(params(ip_pool.SPEC, store_options, name="pool", namespace=other_namespace, **given),
                           False)

    def annotations() -> dict[str, str]:
        return store.get(Ref(IPAM_API, "IPPool", "pool", other_namespace))["metadata"].get("annotations") or {}

    assert run_pool(spec=spec, allowed_namespaces=[])["changed"]
    assert ALLOWED_NAMESPACES_ANNOTATION not in annotations()
    assert run_pool(allowed_namespaces=[namespace, "elsewhere"])["changed"]
    assert annotations()[ALLOWED_NAMESPACES_ANNOTATION] == f"{namespace},elsewhere"
    claim = ip_claim.run(params(ip_claim.SPEC, store_options, name="c", namespace=namespace, pool="pool",
                                pool_namespace=other_namespace), False)
    assert claim["address"] == "10.7.0.1" and not claim.get("failed")
    assert not run_pool(spec=spec)["changed"], "left out, the annotation stays"
    assert annotations()[ALLOWED_NAMESPACES_ANNOTATION] == f"{namespace},elsewhere"
    assert run_pool(allowed_namespaces=[])["changed"]
    assert ALLOWED_NAMESPACES_ANNOTATION not in annotations()
