"""Node reuse (a Metal3MachineTemplate's ``nodeReuse``) as CAPM3 does it: a released host is labelled for the
group its machine belonged to - ``md-<MachineDeployment>`` for a worker, found through its MachineSet, and
``cp-<control plane>`` for a machine of a control plane provider - and held by the Cluster, so that the next
machine of the same group, even of a rollout's new MachineSet, takes it before any free host. Not while the
Cluster itself is being deleted; and, unlike CAPM3, the Metal3Cluster's deletion lets go of the hosts its Cluster
kept, where CAPM3 leaves them held by a Cluster that no longer exists."""
from __future__ import annotations

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.cluster import reconcile_metal3cluster
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import (
    CAPI_API,
    CLONED_FROM_NAME,
    CLUSTER_FINALIZER,
    CLUSTER_NAME_LABEL,
    HOST_ANNOTATION,
    INFRA_API,
    MACHINE_FINALIZER,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.machine import reconcile_metal3machine
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.core.selector import label_value, label_value_problems
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.claim import NODE_REUSE_LABEL
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

NS = "ns"
BMH_API = "metal3.io/v1alpha1"
CLUSTER = "c"
TEMPLATE = "workers-template"
IMAGE = {"url": "http://images.example/os.qcow2", "checksum": "0" * 64, "checksumType": "sha256",
         "diskFormat": "qcow2"}


@pytest.fixture
def store(tmp_path):
    with LocalStore(str(tmp_path / "store.db")) as opened:
        opened.create({"apiVersion": CAPI_API, "kind": "Cluster", "metadata": {"name": CLUSTER, "namespace": NS},
                       "spec": {}})
        opened.create({"apiVersion": INFRA_API, "kind": "Metal3MachineTemplate",
                       "metadata": {"name": TEMPLATE, "namespace": NS},
                       "spec": {"nodeReuse": True, "template": {"spec": {"image": IMAGE}}}})
        opened.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "userdata", "namespace": NS},
                       "stringData": {"value": "#cloud-config\n"}})
        yield opened


def owner(api_version: str, kind: str, name: str, controller: bool = True) -> dict:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{kind}-{name}",
            "controller": controller}


def machine_set(store, name: str, deployment: str | None) -> dict:
    owners = [owner(CAPI_API, "MachineDeployment", deployment)] if deployment else []
    store.create({"apiVersion": CAPI_API, "kind": "MachineSet",
                  "metadata": {"name": name, "namespace": NS, "ownerReferences": owners},
                  "spec": {"clusterName": CLUSTER, "template": {"spec": {"clusterName": CLUSTER, "infrastructureRef": {
                      "apiVersion": INFRA_API, "kind": "Metal3MachineTemplate", "name": TEMPLATE}}}}})
    return owner(CAPI_API, "MachineSet", name)


def control_plane(store, name: str) -> dict:
    """A v1beta2 KubeadmControlPlane of the template, as core's owner of its machines."""
    api_version = "controlplane.cluster.x-k8s.io/v1beta2"
    store.create({"apiVersion": api_version, "kind": "KubeadmControlPlane",
                  "metadata": {"name": name, "namespace": NS},
                  "spec": {"version": "v1.34.4", "machineTemplate": {"spec": {"infrastructureRef": {
                      "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "Metal3MachineTemplate",
                      "name": TEMPLATE}}}}})
    return owner(api_version, "KubeadmControlPlane", name)


def host(store, name: str, state: str = "available", consumer: str | None = None) -> Ref:
    spec: dict = {"online": False, "bmc": {"address": f"fake://{name}", "credentialsName": f"{name}-bmc"}}
    if consumer:
        spec.update(online=True, image={"url": IMAGE["url"], "checksum": IMAGE["checksum"]},
                    consumerRef={"apiVersion": INFRA_API, "kind": "Metal3Machine", "name": consumer, "namespace": NS})
    made = store.create({"apiVersion": BMH_API, "kind": "BareMetalHost", "metadata": {
        "name": name, "namespace": NS, "labels": {CLUSTER_NAME_LABEL: CLUSTER} if consumer else {}}, "spec": spec})
    store.update_status({**made, "status": {"provisioning": {"state": state}}})
    return Ref.of(made)


def machine(store, name: str, machine_owner: dict, on_host: str | None = None, annotated: bool = True) -> Ref:
    """A Machine owned by ``machine_owner`` and its Metal3Machine, cloned from the template (on ``on_host``;
    ``annotated`` with Cluster API's cloned-from annotation, which core's metadata sync may drop)."""
    store.create({"apiVersion": CAPI_API, "kind": "Machine", "metadata": {
        "name": name, "namespace": NS, "labels": {CLUSTER_NAME_LABEL: CLUSTER}, "ownerReferences": [machine_owner]},
        "spec": {"clusterName": CLUSTER, "bootstrap": {"dataSecretName": "userdata"}}})
    annotations = {CLONED_FROM_NAME: TEMPLATE} if annotated else {}
    if on_host:
        annotations[HOST_ANNOTATION] = f"{NS}/{on_host}"
    made = store.create({"apiVersion": INFRA_API, "kind": "Metal3Machine", "metadata": {
        "name": name, "namespace": NS, "labels": {CLUSTER_NAME_LABEL: CLUSTER}, "annotations": annotations,
        "finalizers": [MACHINE_FINALIZER] if on_host else [],
        "ownerReferences": [owner(CAPI_API, "Machine", name)]}, "spec": {"image": IMAGE}})
    return Ref.of(made)


def released(store, machine_owner: dict, annotated: bool = True) -> dict:
    """The host a deleted machine of ``machine_owner`` held, once released."""
    host(store, "h-0", consumer="old")
    ref = machine(store, "old", machine_owner, on_host="h-0", annotated=annotated)
    store.delete(ref)
    assert reconcile_metal3machine(store, ref).phase == "deleted"
    return store.get(Ref(BMH_API, "BareMetalHost", "h-0", NS))


# Cluster API's longest MachineDeployment name (it is a label value too): "md-" makes it too long for one.
LONGEST = "w" * 63

OWNERS = [
    pytest.param(lambda store: machine_set(store, "workers-abc12", "workers"), "md-workers",
                 id="worker-of-a-machine-deployment"),
    pytest.param(lambda store: machine_set(store, "long-abc12", LONGEST), label_value(f"md-{LONGEST}"),
                 id="worker-of-a-deployment-too-long-named-for-a-label"),
    pytest.param(lambda store: control_plane(store, "cp"), "cp-cp", id="machine-of-a-control-plane"),
    pytest.param(lambda store: machine_set(store, "bare-set", None), TEMPLATE, id="machine-set-of-no-deployment"),
    pytest.param(lambda store: owner(CAPI_API, "MachineSet", "gone"), TEMPLATE,
                 id="machine-set-gone"),
]


# A machine of a MachineSet or of a control plane finds its template through them, as CAPM3 does, so also once
# core's metadata sync dropped its cloned-from annotation; one of neither has only the annotation.
OWNED = [pytest.param(*case.values, False, id=f"{case.id}-annotation-dropped") for case in OWNERS
         if case.values[1] != TEMPLATE]


@pytest.mark.parametrize(("machine_owner", "label", "annotated"),
                         [pytest.param(*case.values, True, id=case.id) for case in OWNERS] + OWNED)
def test_a_released_host_is_labelled_for_its_machines_group_and_held_by_the_cluster(store, machine_owner, label,
                                                                                    annotated):
    freed = released(store, machine_owner(store), annotated)
    assert freed["metadata"]["labels"][NODE_REUSE_LABEL] == label and label_value_problems(label) == []
    assert freed["spec"]["consumerRef"] == {"apiVersion": CAPI_API, "kind": "Cluster", "name": CLUSTER,
                                            "namespace": NS}
    assert "image" not in freed["spec"] and CLUSTER_NAME_LABEL not in freed["metadata"]["labels"]


def test_a_rollouts_new_machine_set_takes_the_host_its_old_one_left_before_a_free_one(store):
    released(store, machine_set(store, "workers-old", "workers"))
    host(store, "h-free")
    new = machine(store, "new", machine_set(store, "workers-new", "workers"))
    step = reconcile_metal3machine(store, new)
    assert step.host == f"{NS}/h-0", step.message
    taken = store.get(Ref(BMH_API, "BareMetalHost", "h-0", NS))
    assert taken["spec"]["consumerRef"]["name"] == "new"
    assert NODE_REUSE_LABEL not in taken["metadata"]["labels"]


def test_a_host_kept_for_one_deployment_is_not_taken_by_another(store):
    released(store, machine_set(store, "workers-old", "workers"))
    host(store, "h-free")
    other = machine(store, "other", machine_set(store, "others-1", "others"))
    assert reconcile_metal3machine(store, other).host == f"{NS}/h-free"
    assert store.get(Ref(BMH_API, "BareMetalHost", "h-0", NS))["metadata"]["labels"][NODE_REUSE_LABEL] == "md-workers"


def test_a_host_released_while_its_cluster_is_deleted_is_simply_free(store):
    cluster = store.get(Ref(CAPI_API, "Cluster", CLUSTER, NS))
    store.update({**cluster, "metadata": {**cluster["metadata"], "finalizers": ["cluster.cluster.x-k8s.io"]}})
    store.delete(Ref(CAPI_API, "Cluster", CLUSTER, NS))
    freed = released(store, machine_set(store, "workers-old", "workers"))
    assert NODE_REUSE_LABEL not in freed["metadata"]["labels"]
    assert "consumerRef" not in freed["spec"]


def test_the_metal3clusters_deletion_lets_go_of_the_hosts_its_cluster_kept(store):
    released(store, machine_set(store, "workers-old", "workers"))
    host(store, "h-other")
    kept_elsewhere = store.get(Ref(BMH_API, "BareMetalHost", "h-other", NS))
    kept_elsewhere["metadata"]["labels"][NODE_REUSE_LABEL] = "md-workers"  # by another cluster of the namespace
    kept_elsewhere["spec"]["consumerRef"] = {"apiVersion": CAPI_API, "kind": "Cluster", "name": "other",
                                             "namespace": NS}
    store.update(kept_elsewhere)
    ref = Ref.of(store.create({"apiVersion": INFRA_API, "kind": "Metal3Cluster", "metadata": {
        "name": "infra", "namespace": NS, "finalizers": [CLUSTER_FINALIZER],
        "ownerReferences": [owner(CAPI_API, "Cluster", CLUSTER)]}, "spec": {}}))
    store.delete(ref)
    assert reconcile_metal3cluster(store, ref).message == "deleted"
    freed = store.get(Ref(BMH_API, "BareMetalHost", "h-0", NS))
    assert NODE_REUSE_LABEL not in freed["metadata"]["labels"] and "consumerRef" not in freed["spec"]
    assert store.get(Ref(BMH_API, "BareMetalHost", "h-other", NS))["spec"]["consumerRef"]["name"] == "other"
