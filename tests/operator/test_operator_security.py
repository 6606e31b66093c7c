"""The operator as it is deployed, running as its shipped ServiceAccount's ClusterRole on the real kube-apiserver
(issue 12): a tenant who may write Metal3Data but not Secrets cannot make it delete a Secret, and a name that
is no object name never becomes a request to another namespace."""
from __future__ import annotations

import secrets
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.harness.cluster import KubeCluster
from tests.harness.operator_process import Operator
from tests.operator.conftest import condition, eventually

pytestmark = pytest.mark.kubernetes

REPO = Path(__file__).resolve().parents[2]
INFRA = ("infrastructure.cluster.x-k8s.io", "v1beta1")


@pytest.fixture
def operator_as_its_service_account(kube_cluster: KubeCluster, kube_namespace: str, tmp_path: Path) -> Any:
    """The operator with a kubeconfig holding a token of a ServiceAccount bound to the shipped ClusterRole."""
    api = kube_cluster.api_client()
    documents = yaml.safe_load_all((REPO / "operator/config/rbac/role.yaml").read_text())
    role = [d for d in documents if d and d["kind"] == "ClusterRole"][0]
    name = f"metal3-operator-under-test-{secrets.token_hex(3)}"
    role["metadata"] = {"name": name}
    rbac = client.RbacAuthorizationV1Api(api)
    rbac.create_cluster_role(role)
    core = client.CoreV1Api(api)
    core.create_namespaced_service_account(kube_namespace, {"metadata": {"name": "operator"}})
    rbac.create_cluster_role_binding({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": kube_namespace}]})
    token = core.create_namespaced_service_account_token(
        "operator", kube_namespace, {"spec": {"expirationSeconds": 3600}}).status.token
    kubeconfig = tmp_path / "operator.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "operator",
        "clusters": [{"name": "harness", "cluster": {"server": kube_cluster.server,
                                                     "certificate-authority": str(kube_cluster.ca_cert)}}],
        "users": [{"name": "operator", "user": {"token": token}}],
        "contexts": [{"name": "operator", "context": {"cluster": "harness", "user": "operator"}}]}))
    operator = Operator(SimpleNamespace(kubeconfig=kubeconfig), tmp_path / "operator", kube_namespace).start()
    yield operator
    operator.stop()
    print(f"--- {operator.log.name}\n{operator.tail(60)}")
    rbac.delete_cluster_role_binding(name)
    rbac.delete_cluster_role(name)


def test_deleting_a_metal3data_that_names_a_secret_leaves_the_secret(
        operator_as_its_service_account, kube_cluster, kube_namespace):
    core = client.CoreV1Api(kube_cluster.api_client())
    custom = client.CustomObjectsApi(kube_cluster.api_client())
    core.create_namespaced_secret(kube_namespace, {"metadata": {"name": "victim"},
                                                   "stringData": {"password": "victim-password"}})
    custom.create_namespaced_custom_object(*INFRA, kube_namespace, "metal3datas", {
        "apiVersion": "/".join(INFRA), "kind": "Metal3Data", "metadata": {"name": "net-0"},
        "spec": {"index": 0, "template": {"name": "net"}, "claim": {"name": "m"},
                 "metaData": {"name": "victim"}, "networkData": {"name": "victim"}}})

    def reconciled() -> bool:
        data = custom.get_namespaced_custom_object(*INFRA, kube_namespace, "metal3datas", "net-0")
        return condition(data, "Successful").get("status") == "True"

    eventually(reconciled, "the Metal3Data reconciled by the operator")
    custom.delete_namespaced_custom_object(*INFRA, kube_namespace, "metal3datas", "net-0")

    def gone() -> bool:
        return not custom.list_namespaced_custom_object(*INFRA, kube_namespace, "metal3datas")["items"]

    eventually(gone, "the Metal3Data released and removed by the operator")
    assert core.read_namespaced_secret("victim", kube_namespace).data


def test_a_traversal_in_a_status_the_engine_reads_is_refused_before_any_request(
        operator_as_its_service_account, kube_cluster, kube_namespace):
    """Status is written only by the operator, but whoever may write it must not reach another namespace."""
    core = client.CoreV1Api(kube_cluster.api_client())
    custom = client.CustomObjectsApi(kube_cluster.api_client())
    other = kube_cluster.new_namespace("other")
    custom.create_namespaced_custom_object(*INFRA, other, "metal3datas", {
        "apiVersion": "/".join(INFRA), "kind": "Metal3Data", "metadata": {"name": "theirs"},
        "spec": {"index": 0, "template": {"name": "net"}, "claim": {"name": "m"}}})
    custom.create_namespaced_custom_object(*INFRA, kube_namespace, "metal3dataclaims", {
        "apiVersion": "/".join(INFRA), "kind": "Metal3DataClaim", "metadata": {"name": "intruder"},
        "spec": {"template": {"name": "net"}}})
    eventually(lambda: custom.get_namespaced_custom_object(*INFRA, kube_namespace, "metal3dataclaims", "intruder")
               ["metadata"].get("finalizers"), "the operator's finalizer on the claim")
    custom.patch_namespaced_custom_object_status(*INFRA, kube_namespace, "metal3dataclaims", "intruder", {
        "status": {"renderedData": {"name": f"../../{other}/metal3datas/theirs"}}})
    custom.delete_namespaced_custom_object(*INFRA, kube_namespace, "metal3dataclaims", "intruder")

    def refused() -> str:
        claim = custom.get_namespaced_custom_object(*INFRA, kube_namespace, "metal3dataclaims", "intruder")
        return condition(claim, "Failure").get("message", "")

    message = eventually(refused, "the claim's deletion refused")
    assert "Metal3Data name: Invalid value" in message
    theirs = custom.get_namespaced_custom_object(*INFRA, other, "metal3datas", "theirs")
    assert not theirs["metadata"].get("deletionTimestamp")
    assert core.read_namespace(other)
