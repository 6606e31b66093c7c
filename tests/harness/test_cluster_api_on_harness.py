"""Cluster API's real managers on the harness's kube-apiserver (issue 32): installed as ``clusterctl init`` would,
with the webhooks on loopback and the harness's CA. Core reconciles a v1beta2 Cluster whose infrastructure is one
of the collection's Metal3Clusters (it finds the kind through the CRD's contract labels), kube-apiserver converts
the Cluster to v1beta1 through core's conversion webhook, core's validating webhook refuses what upstream
refuses, and the managers stop without leaving a process."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.conftest import eventually
from tests.harness.cluster_api import BINARIES, ClusterAPI, with_conversion, with_urls

pytestmark = pytest.mark.kubernetes

CORE, INFRA = "cluster.x-k8s.io", "infrastructure.cluster.x-k8s.io"
CLUSTER_FINALIZER = "cluster.cluster.x-k8s.io"


def objects(capi: ClusterAPI) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(capi.cluster.api_client())


def metal3_cluster(name: str) -> dict:
    return {"apiVersion": f"{INFRA}/v1beta2", "kind": "Metal3Cluster", "metadata": {"name": name},
            "spec": {"controlPlaneEndpoint": {"host": "192.168.111.249", "port": 6443}}}


def cluster(name: str, infrastructure: str) -> dict:
    return {"apiVersion": f"{CORE}/v1beta2", "kind": "Cluster", "metadata": {"name": name},
            "spec": {"infrastructureRef": {"apiGroup": INFRA, "kind": "Metal3Cluster", "name": infrastructure}}}


def condition(obj: dict, kind: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


# -- the manifests, as upstream's kustomize and cert-manager would make them for loopback -------------------

CRD = {"metadata": {"name": "things.example.io"},
       "spec": {"group": "example.io", "versions": [{"name": "v1beta1", "served": True, "storage": False},
                                                    {"name": "v1beta2", "served": True, "storage": True}]}}
CLIENT = {"url": "https://127.0.0.1:1/convert", "caBundle": "Q0E="}


@pytest.mark.parametrize(("served", "converted"), [
    ((True, True), True),
    ((False, True), False),  # a version kept for stored objects only is not converted to
])
def test_a_crd_serving_several_versions_converts_through_the_webhook(served, converted):
    crd = {**CRD, "spec": {**CRD["spec"], "versions": [{**version, "served": serves} for version, serves
                                                       in zip(CRD["spec"]["versions"], served, strict=True)]}}
    conversion = with_conversion(crd, CLIENT)["spec"].get("conversion")
    if converted:
        assert conversion == {"strategy": "Webhook", "webhook": {
            "clientConfig": CLIENT, "conversionReviewVersions": ["v1", "v1beta1"]}}
    else:
        assert conversion is None


def test_a_webhook_service_becomes_a_url_on_the_managers_port_with_the_ca():
    service = {"name": "webhook-service", "namespace": "system", "path": "/validate-cluster-x-k8s-io-v1beta2-cluster"}
    configuration = {"kind": "ValidatingWebhookConfiguration", "metadata": {"name": "validating-webhook-configuration"},
                     "webhooks": [{"name": "validation.cluster.cluster.x-k8s.io", "failurePolicy": "Fail",
                                   "clientConfig": {"service": service}}]}
    rendered = with_urls(configuration, "capi-", "https://127.0.0.1:9443", "Q0E=")
    assert rendered["metadata"]["name"] == "capi-validating-webhook-configuration"
    assert rendered["webhooks"] == [{
        "name": "validation.cluster.cluster.x-k8s.io", "failurePolicy": "Fail",
        "clientConfig": {"url": "https://127.0.0.1:9443/validate-cluster-x-k8s-io-v1beta2-cluster", "caBundle": "Q0E="},
    }]


# -- the managers, running ------------------------------------------------------------------------------------

@pytest.mark.parametrize("crd", ["kubeadmconfigtemplates.bootstrap.cluster.x-k8s.io",
                                 "kubeadmcontrolplanes.controlplane.cluster.x-k8s.io"])
def test_the_kubeadm_providers_crds_carry_the_contract_labels_as_their_kustomizations_set(cluster_api, crd):
    """Core resolves a MachineDeployment's KubeadmConfigTemplate, or a Cluster's KubeadmControlPlane, by them."""
    got = client.ApiextensionsV1Api(cluster_api.cluster.api_client()).read_custom_resource_definition(crd)
    assert {"cluster.x-k8s.io/v1beta1": "v1beta1", "cluster.x-k8s.io/v1beta2": "v1beta2"}.items() <= \
        got.metadata.labels.items()


def test_core_reconciles_a_cluster_on_our_metal3cluster(cluster_api, cluster_api_namespace):
    api = objects(cluster_api)
    api.create_namespaced_custom_object(INFRA, "v1beta2", cluster_api_namespace, "metal3clusters",
                                        metal3_cluster("m3"))
    created = api.create_namespaced_custom_object(CORE, "v1beta2", cluster_api_namespace, "clusters",
                                                  cluster("one", "m3"))

    def reconciled() -> dict | None:
        # Core writes the finalizer, the conditions and the phase in patches of their own: any may be seen first.
        got = api.get_namespaced_custom_object(CORE, "v1beta2", cluster_api_namespace, "clusters", "one")
        finalized = CLUSTER_FINALIZER in (got["metadata"].get("finalizers") or [])
        phased = bool((got.get("status") or {}).get("phase"))
        return got if condition(got, "InfrastructureReady") and finalized and phased else None

    got = eventually(reconciled, timeout=60)
    assert got, "core did not write the Cluster's InfrastructureReady condition and its finalizer"
    assert got["status"]["phase"] == "Provisioning"
    # Core read the Metal3Cluster at the version its contract label names, and found it not yet provisioned:
    # not "InvalidContractVersion" or "...NotFound", which is what it says of a kind it cannot use.
    infrastructure = condition(got, "InfrastructureReady")
    assert (infrastructure["status"], infrastructure["reason"]) == ("False", "NotReady")
    assert infrastructure["message"] == "Metal3Cluster status.initialization.provisioned is false"
    # ... and made the Metal3Cluster the Cluster's, as it does CAPM3's.
    m3 = api.get_namespaced_custom_object(INFRA, "v1beta2", cluster_api_namespace, "metal3clusters", "m3")
    assert m3["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"] == "one"
    assert [(o["kind"], o["name"], o["uid"]) for o in m3["metadata"]["ownerReferences"]] == [
        ("Cluster", "one", created["metadata"]["uid"])]


def test_the_cluster_reads_back_at_v1beta1_through_cores_conversion_webhook(cluster_api, cluster_api_namespace):
    api = objects(cluster_api)
    api.create_namespaced_custom_object(INFRA, "v1beta2", cluster_api_namespace, "metal3clusters",
                                        metal3_cluster("m3"))
    created = api.create_namespaced_custom_object(CORE, "v1beta2", cluster_api_namespace, "clusters",
                                                  cluster("one", "m3"))
    old = api.get_namespaced_custom_object(CORE, "v1beta1", cluster_api_namespace, "clusters", "one")
    assert old["apiVersion"] == f"{CORE}/v1beta1"
    assert old["metadata"]["uid"] == created["metadata"]["uid"]
    # v1beta1's ObjectReference carries an apiVersion, which the webhook takes from the contract label of our CRD.
    assert old["spec"]["infrastructureRef"] == {"apiVersion": f"{INFRA}/v1beta2", "kind": "Metal3Cluster",
                                                "name": "m3", "namespace": cluster_api_namespace}


def test_cores_validating_webhook_refuses_what_upstream_refuses(cluster_api, cluster_api_namespace):
    deployment = {
        "apiVersion": f"{CORE}/v1beta2", "kind": "MachineDeployment", "metadata": {"name": "workers"},
        "spec": {"clusterName": "one", "replicas": 0, "selector": {"matchLabels": {}}, "template": {"spec": {
            "clusterName": "two", "bootstrap": {"dataSecretName": "bootstrap"},
            "infrastructureRef": {"apiGroup": INFRA, "kind": "Metal3MachineTemplate", "name": "workers"}}}},
    }
    with pytest.raises(ApiException) as refused:
        objects(cluster_api).create_namespaced_custom_object(CORE, "v1beta2", cluster_api_namespace,
                                                             "machinedeployments", deployment)
    assert refused.value.status == 422
    message = json.loads(refused.value.body)["message"]
    assert message.startswith('admission webhook "validation.machinedeployment.cluster.x-k8s.io" denied the request')
    assert ('spec.clusterName: Invalid value: "one": spec.clusterName and spec.template.spec.clusterName must be set '
            "to the same value") in message


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def processes_of(binaries_dir: Path, kubeconfig: Path) -> list[int]:
    """The processes running one of Cluster API's binaries against this kubeconfig."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (argv and argv[0].decode(errors="replace") in {str(binaries_dir / b) for b in BINARIES}
                and f"--kubeconfig={kubeconfig}".encode() in argv):
            found.append(int(entry.name))
    return found


def test_the_managers_stop_cleanly_and_leave_no_process(cluster_api):
    pids = cluster_api.pids
    assert len(pids) == 3
    binaries = cluster_api.binaries_dir
    assert sorted(processes_of(binaries, cluster_api.cluster.kubeconfig)) == sorted(pids)
    try:
        cluster_api.stop()
        assert [manager.process.returncode for manager in cluster_api.managers.values()] == [0, 0, 0]
        assert not [pid for pid in pids if running(pid)]
        assert processes_of(binaries, cluster_api.cluster.kubeconfig) == []
    finally:
        cluster_api.start()  # as it was, for the session's other tests
    assert all(manager.healthy() for manager in cluster_api.managers.values())
