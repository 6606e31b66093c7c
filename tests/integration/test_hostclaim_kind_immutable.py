"""A HostClaim's class of compute is fixed once it is bound, on both backends: the engine's admission on the local
store, and the CRD's own validation rule on kube-apiserver, where no webhook serves HostClaims (issue 30, item 3).
What a claim may do before it is bound, it still may."""
from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store

METAL3 = ("metal3.io", "v1alpha1")
IMAGE = {"url": "http://images.example/os.img", "checksum": "0" * 64, "checksumType": "sha256"}
BOUND = {"bareMetalHost": {"name": "host-0", "namespace": "infra"}}
SWITCHES = [({}, "libvirt"), ({"kind": "libvirt"}, "baremetal"), ({"kind": "baremetal"}, "libvirt")]


def claim(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "metal3.io/v1alpha1", "kind": "HostClaim", "metadata": {"name": "web"},
            "spec": {"poweredOn": True, "image": IMAGE, **spec}}


@pytest.mark.kubernetes
@pytest.mark.parametrize(("spec", "switched"), SWITCHES)
def test_kube_apiserver_refuses_switching_a_bound_claim_s_kind_naming_spec_kind(kube_cluster, kube_namespace, spec,
                                                                                switched):
    custom = client.CustomObjectsApi(kube_cluster.api_client())
    custom.create_namespaced_custom_object(*METAL3, kube_namespace, "hostclaims", claim(spec))
    # Not yet bound: the tenant may change its mind.
    custom.patch_namespaced_custom_object(*METAL3, kube_namespace, "hostclaims", "web", {"spec": {"kind": switched}})
    custom.patch_namespaced_custom_object(*METAL3, kube_namespace, "hostclaims", "web",
                                          {"spec": {"kind": spec.get("kind", "baremetal")}})
    bound = BOUND if spec.get("kind") != "libvirt" else {"virtualMachine": {"name": "web", "namespace": "x"}}
    custom.patch_namespaced_custom_object_status(*METAL3, kube_namespace, "hostclaims", "web", {"status": bound})
    before = custom.get_namespaced_custom_object(*METAL3, kube_namespace, "hostclaims", "web")
    with pytest.raises(ApiException) as refused:
        custom.patch_namespaced_custom_object(*METAL3, kube_namespace, "hostclaims", "web",
                                              {"spec": {"kind": switched}})
    assert refused.value.status == 422
    assert "spec.kind: Forbidden: is immutable once the claim is bound" in refused.value.body
    after = custom.get_namespaced_custom_object(*METAL3, kube_namespace, "hostclaims", "web")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    # What else the tenant writes still goes through, and the controller's status writes too.
    custom.patch_namespaced_custom_object(*METAL3, kube_namespace, "hostclaims", "web", {"spec": {"poweredOn": False}})
    custom.patch_namespaced_custom_object_status(*METAL3, kube_namespace, "hostclaims", "web",
                                                 {"status": {"poweredOn": False}})


@pytest.mark.parametrize(("spec", "switched"), SWITCHES)
def test_the_local_store_refuses_it_the_same_way(tmp_path, spec, switched):
    with open_store({"backend": "local", "store_path": str(tmp_path / "store.db")}) as store:
        made = store.create({**claim(spec), "metadata": {"name": "web", "namespace": "tenant"}})
        store.update_status({**made, "status": BOUND if spec.get("kind") != "libvirt" else
                             {"virtualMachine": {"name": "web", "namespace": "tenant"}}})
        ref = Ref("metal3.io/v1alpha1", "HostClaim", "web", "tenant")
        with pytest.raises(Invalid, match=r"spec\.kind"):
            store.patch(ref, {"spec": {"kind": switched}})
        assert store.get(ref)["spec"].get("kind") == spec.get("kind")
