"""HostClaims through the operator on the real kube-apiserver and a real Ironic (fake-hardware): hosts in an
infrastructure namespace, a policy admitting one tenant by name and another by label, the tenants' claims bound
and provisioned, a third tenant's claim pending with the policy's reason, and a deleted claim's host
deprovisioned and freed."""
from __future__ import annotations

import base64
import json
import secrets
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ansible_collections.metal3.baremetal.plugins.module_utils.store.kube import KubernetesStore
from tests.harness.cluster import KubeCluster
from tests.harness.demo import demo_objects
from tests.harness.operator_process import Operator
from tests.operator.conftest import condition, eventually

pytestmark = pytest.mark.kubernetes

METAL3 = ("metal3.io", "v1alpha1")
IMAGE = {"url": "http://images.example/os.img", "checksum": "0" * 64, "checksumType": "sha256"}


def claim_of(custom: client.CustomObjectsApi, ns: str, name: str) -> dict[str, Any] | None:
    try:
        return custom.get_namespaced_custom_object(*METAL3, ns, "hostclaims", name)
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def test_claims_of_admitted_tenants_are_provisioned_and_released_by_the_operator(kube_cluster: KubeCluster,
                                                                                 custom, ironic, tmp_path: Path):
    core = client.CoreV1Api(kube_cluster.api_client())
    ns = {role: kube_cluster.new_namespace(role) for role in ("infra", "tenant-a", "tenant-b", "tenant-c")}
    # The label's value is this test's own: another test's policy on the same cluster must not admit tenant-b
    # (its hosts, in a namespace this operator does not watch, would never be provisioned).
    label = secrets.token_hex(4)
    core.patch_namespace(ns["tenant-b"], {"metadata": {"labels": {"metal3.baremetal/tenant": label}}})
    with KubernetesStore(kubeconfig=str(kube_cluster.kubeconfig)) as store:
        for obj in demo_objects(ns["infra"], 3, ("hosts.yaml",)):
            store.create(obj)
    for name, constraints in (("by-name", {"names": [ns["tenant-a"]]}),
                              ("by-label", {"hasLabels": [{"name": "metal3.baremetal/tenant", "value": label}]})):
        custom.create_namespaced_custom_object(*METAL3, ns["infra"], "hostdeploypolicies", {
            "apiVersion": "metal3.io/v1alpha1", "kind": "HostDeployPolicy", "metadata": {"name": name},
            "spec": {"hostClaimNamespaces": constraints}})
    for role in ("tenant-a", "tenant-b", "tenant-c"):
        core.create_namespaced_secret(ns[role], {"metadata": {"name": "cloud-init"}, "data": {
            "userData": base64.b64encode(b"#cloud-config\n").decode()}})
        custom.create_namespaced_custom_object(*METAL3, ns[role], "hostclaims", {
            "apiVersion": "metal3.io/v1alpha1", "kind": "HostClaim", "metadata": {"name": "web"},
            "spec": {"poweredOn": True, "image": IMAGE, "userData": {"name": "cloud-init"}}})
    operator = Operator(kube_cluster, tmp_path / "operator", ",".join(ns.values()), env=ironic.env).start()
    try:
        for role in ("tenant-a", "tenant-b"):
            # Generous: each step of a claim and of a host is an ansible-playbook run, on a machine make test loads.
            claim = eventually(lambda role=role: (c := claim_of(custom, ns[role], "web")) and
                               (c.get("status") or {}).get("state") == "provisioned" and c,
                               f"{role}'s claim provisioned", timeout=900)
            assert condition(claim, "Ready")["status"] == "True"
            assert claim["status"]["bareMetalHost"]["namespace"] == ns["infra"]
            hardware = custom.get_namespaced_custom_object(*METAL3, ns[role], "hardwaredata", "web")
            assert hardware["spec"]["hardware"]["nics"]
        pending = eventually(lambda: condition(claim_of(custom, ns["tenant-c"], "web") or {}, "Associated"),
                             "tenant-c's claim refused")
        assert pending["status"] == "False" and pending["reason"] == "NoBareMetalHost"
        assert pending["message"] == f"no HostDeployPolicy admits namespace {ns['tenant-c']}"

        held = claim_of(custom, ns["tenant-a"], "web")["status"]["bareMetalHost"]["name"]
        custom.delete_namespaced_custom_object(*METAL3, ns["tenant-a"], "hostclaims", "web")
        eventually(lambda: claim_of(custom, ns["tenant-a"], "web") is None, "tenant-a's claim released", timeout=900)
        host = custom.get_namespaced_custom_object(*METAL3, ns["infra"], "baremetalhosts", held)
        assert "consumerRef" not in host["spec"] and "image" not in host["spec"]
        assert host["status"]["provisioning"]["state"] == "available"
    finally:
        operator.stop()
        print(operator.tail(200))
        for role in ("tenant-a", "tenant-b"):  # what a failure needs to be understood
            print(role, json.dumps((claim_of(custom, ns[role], "web") or {}).get("status"), indent=1))
