"""The operator under Cluster API's topology controller (issue 32): a Cluster made from a ClusterClass - upstream's
own, CAPM3's e2e ``clusterclass-metal3`` and its topology Cluster at v1beta2, as tests/fixtures/upstream-templates
keeps them (a Metal3ClusterTemplate, a KubeadmControlPlaneTemplate, Metal3MachineTemplates, a KubeadmConfigTemplate,
the variables controlPlaneEndpoint, image and controlPlaneDataTemplate and their JSON patches; the Cluster's IPPools
and Metal3DataTemplate). Core's topology controller makes the Metal3Cluster from its template (the endpoint patched
in from the Cluster's variable, the template's v1beta2 metadata carried over), a KubeadmControlPlane of three and a
MachineDeployment of one, each on its own clone of a template with the variables patched in; our operator
provisions every machine on a host of its own on the real Ironic (fake-hardware), and the node agent plays their
kubelets (given the providerID, as the templates' kubelet arguments ask). The control plane and the Cluster are
Available with the topology reconciled. A new image in the Cluster's variable rotates the control plane's
template: KCP rolls its machines onto hosts reprovisioned with it, one at a time, and the workers stay. Deleting
the Cluster tears it all down: every host available, every address released, the topology's clones gone.

What the test changes in upstream's file, and why: the namespace (the e2e framework's too); the images' host (a
private address of upstream's lab; nothing is fetched on fake hardware, and the lab rule keeps tests off private
addresses); the KubeadmControlPlaneTemplate's etcd external, its machines' certificate expiry given and no CoreDNS
or kube-proxy to manage (no real kubelets: see test_operator_under_kubeadm_control_plane.py); a Metal3DataTemplate
of the name the workers' template gives, which upstream's file lacks (a copy of the Cluster's); the label-sync
annotation on the Metal3ClusterTemplate's metadata; the hosts' NICs named as the data template names them."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Iterator

import pytest
from kubernetes import client

from ansible_collections.metal3.baremetal.plugins.module_utils.resources import load_definitions
from ansible_collections.metal3.baremetal.plugins.module_utils.store.kube import KubernetesStore
from tests.harness.cluster import KubeCluster
from tests.harness.cluster_api import ClusterAPI
from tests.harness.demo import demo_objects
from tests.harness.node_agent import NodeAgent
from tests.harness.operator_process import REPO
from tests.operator.conftest import eventually
from tests.operator.test_operator_under_cluster_api import (
    CORE,
    INFRA,
    NEW_IMAGE,
    SYNCED,
    Ledger,
    cluster_goes,
    condition,
    explained,
    get,
    host_of,
    hosts,
    listed,
    machines,
    nodes,
    running,
)
from tests.operator.test_operator_under_kubeadm_control_plane import (
    CONTROL_PLANE_API,
    FAR_EXPIRY,
    KUBEADM_CONFIG_SPEC,
    SKIP_ADDONS,
    control_plane_certificates,
    with_control_plane,
)

pytestmark = pytest.mark.kubernetes

UPSTREAM = REPO / "tests" / "fixtures" / "upstream-templates" / "e2e-capm3-v1beta2-clusterclass.yaml"
CLUSTER = "test1"  # upstream's names
CONTROL_PLANE_TEMPLATE, WORKERS_TEMPLATE = "metal3-control-plane", "metal3-default-worker-machinetemplate"
WORKERS_DATA_TEMPLATE, CLUSTER_DATA_TEMPLATE = "metal3-controlplane-template", "test1-controlplane-template"
CONTROL_PLANE_REPLICAS, WORKER_REPLICAS = 3, 1
HOSTS = CONTROL_PLANE_REPLICAS + WORKER_REPLICAS + 1  # one more: KCP's rollout makes a machine before it deletes one
IMAGES = ("http://172.22.0.1/images/", "http://images.example/")


@pytest.fixture
def workload(cluster_api: ClusterAPI, cluster_api_namespace: str, tmp_path: Path) -> Iterator[KubeCluster]:
    with KubeCluster(tmp_path / "workload") as started:
        control_plane_certificates(client.CoreV1Api(cluster_api.cluster.api_client()), cluster_api_namespace, started,
                                   CLUSTER)
        yield started


def upstream_objects(ns: str, endpoint: dict[str, Any]) -> list[dict[str, Any]]:
    """Upstream's class, templates, pools and Cluster, with the changes the module's docstring lists, in ``ns``."""
    text = UPSTREAM.read_text().replace(*IMAGES)
    objects = [obj for obj in load_definitions(src=None, definition=text) if obj["kind"] != "Namespace"]
    for obj in objects:
        obj["metadata"]["namespace"] = ns
        kind, spec = obj["kind"], obj["spec"]
        if kind == "KubeadmControlPlaneTemplate":
            template = spec["template"]
            template["metadata"] = {"annotations": SKIP_ADDONS}
            template["spec"]["machineTemplate"] = {"metadata": {"annotations": FAR_EXPIRY}}
            template["spec"]["kubeadmConfigSpec"]["clusterConfiguration"] = KUBEADM_CONFIG_SPEC["clusterConfiguration"]
        if kind == "Metal3ClusterTemplate":
            spec["template"]["metadata"] = {"annotations": {"metal3.io/metal3-label-sync-prefixes": SYNCED}}
        if kind == "Cluster":
            for variable in spec["topology"]["variables"]:
                if variable["name"] == "controlPlaneEndpoint":
                    variable["value"] = endpoint
    data = next(obj for obj in objects if obj["metadata"]["name"] == CLUSTER_DATA_TEMPLATE)
    workers_data = copy.deepcopy(data)
    workers_data["metadata"]["name"] = WORKERS_DATA_TEMPLATE
    return objects + [workers_data]


def upstream_hosts(ns: str) -> list[dict[str, Any]]:
    """The demo's hosts (and their BMC Secret), their NICs named as upstream's data template names them."""
    objects = demo_objects(ns, HOSTS, manifests=("hosts.yaml",))
    for obj in objects:
        if obj["kind"] == "BareMetalHost":
            annotations = obj["metadata"]["annotations"]
            details = json.loads(annotations["inspect.metal3.io/hardwaredetails"])
            for nic, name in zip(details["nics"], ("enp1s0", "enp2s0"), strict=True):
                nic["name"] = name
            annotations["inspect.metal3.io/hardwaredetails"] = json.dumps(details)
            obj["metadata"]["labels"][f"{SYNCED}/rack"] = "r1"
    return objects


@pytest.mark.usefixtures("cluster_api_operator")
def test_upstreams_cluster_class_makes_a_topology_managed_cluster_that_runs_rolls_and_goes(
        cluster_api, cluster_api_namespace, workload, ironic):
    ns = cluster_api_namespace
    endpoint = {"host": "127.0.0.1", "port": workload.port}
    objects = upstream_objects(ns, endpoint)
    api = client.CustomObjectsApi(cluster_api.cluster.api_client())
    with KubernetesStore(kubeconfig=str(cluster_api.cluster.kubeconfig)) as store:
        for obj in upstream_hosts(ns) + [obj for obj in objects if obj["kind"] != "Cluster"]:
            store.create(obj)
    # Core's webhook checks a Cluster's variables against its class's, once the class is reconciled.
    eventually(lambda: condition(get(api, CORE, "clusterclasses", ns, "metal3"), "VariablesReady") == "True",
               "the ClusterClass's variables ready", timeout=120)
    cluster = next(obj for obj in objects if obj["kind"] == "Cluster")
    api.create_namespaced_custom_object(*CORE, ns, "clusters", cluster)
    image = next(v["value"] for v in cluster["spec"]["topology"]["variables"] if v["name"] == "image")
    with NodeAgent(ironic, workload, ns, provider_id=True) as agent, Ledger(api, ns) as ledger, \
            explained(api, ns, workload, agent, str(cluster_api.cluster.kubeconfig)), \
            with_control_plane(api, ns, CLUSTER):
        topology_runs(api, ns, workload, image, endpoint)
        control_plane_rolls(api, ns, image)
        cluster_goes(api, ns, CLUSTER)
        assert listed(api, CONTROL_PLANE_API, "kubeadmcontrolplanes", ns) == []
        eventually(lambda: owned(api, INFRA, "metal3machinetemplates", ns) == [], "the topology's template clones gone")
    assert agent.errors == []
    assert ledger.twice == [], ledger.twice
    assert ledger.looks > 10  # it watched


def owned(api: client.CustomObjectsApi, group_version: tuple[str, str], plural: str, ns: str) -> list[dict]:
    """The objects of a kind the topology controller made."""
    return [obj for obj in listed(api, group_version, plural, ns)
            if "topology.cluster.x-k8s.io/owned" in (obj["metadata"].get("labels") or {})]


def control_plane(api: client.CustomObjectsApi, ns: str) -> dict[str, dict]:
    return {name: m for name, m in machines(api, ns).items()
            if "cluster.x-k8s.io/control-plane" in m["metadata"]["labels"]}


def topology_runs(api: client.CustomObjectsApi, ns: str, workload: KubeCluster, image: dict[str, Any],
                  endpoint: dict[str, Any]) -> None:
    # The Metal3Cluster, from its template: the endpoint the Cluster's variable gave, the annotation of the
    # template's metadata.
    found = eventually(lambda: owned(api, INFRA, "metal3clusters", ns), "the topology's Metal3Cluster", timeout=120)
    assert len(found) == 1, found
    metal3_cluster = found[0]
    assert metal3_cluster["spec"]["controlPlaneEndpoint"] == endpoint
    assert metal3_cluster["metadata"]["annotations"]["metal3.io/metal3-label-sync-prefixes"] == SYNCED

    # Three control plane machines and a worker, each Running on its Node, with its host's synced label.
    count = CONTROL_PLANE_REPLICAS + WORKER_REPLICAS
    eventually(lambda: len(machines(api, ns)) == count and all(map(running, machines(api, ns).values())),
               f"{count} Machines running", timeout=1200)
    assert len(control_plane(api, ns)) == CONTROL_PLANE_REPLICAS

    # The KubeadmControlPlane and the MachineDeployment on the topology's clones of the class's templates, the
    # control plane's with the variables' image and data template patched in; each machine as its template says.
    kcp = owned(api, CONTROL_PLANE_API, "kubeadmcontrolplanes", ns)[0]
    deployment = owned(api, CORE, "machinedeployments", ns)[0]
    expected = {CONTROL_PLANE_TEMPLATE: (image, CLUSTER_DATA_TEMPLATE), WORKERS_TEMPLATE: (None, WORKERS_DATA_TEMPLATE)}
    made_from = {}
    for clone_name in (kcp["spec"]["machineTemplate"]["spec"]["infrastructureRef"]["name"],
                       deployment["spec"]["template"]["spec"]["infrastructureRef"]["name"]):
        clone = get(api, INFRA, "metal3machinetemplates", ns, clone_name)
        assert clone is not None and "topology.cluster.x-k8s.io/owned" in clone["metadata"]["labels"], clone_name
        source = clone["metadata"]["annotations"]["cluster.x-k8s.io/cloned-from-name"]
        spec = clone["spec"]["template"]["spec"]
        assert spec["image"] == (expected[source][0] or spec["image"]) and \
            spec["dataTemplate"]["name"] == expected[source][1], (source, spec)
        made_from[source] = spec
    assert set(made_from) == set(expected)
    for name, machine in machines(api, ns).items():
        m3m = get(api, INFRA, "metal3machines", ns, machine["spec"]["infrastructureRef"]["name"])
        assert m3m is not None
        source = CONTROL_PLANE_TEMPLATE if name in control_plane(api, ns) else WORKERS_TEMPLATE
        assert (m3m["spec"]["image"], m3m["spec"]["dataTemplate"]) == (made_from[source]["image"],
                                                                       made_from[source]["dataTemplate"]), name
        host = host_of(api, ns, machine)
        assert hosts(api, ns)[host]["status"]["provisioning"]["state"] == "provisioned"
        node = nodes(workload)[machine["status"]["nodeRef"]["name"]]
        assert node.spec.provider_id == machine["spec"]["providerID"] == m3m["spec"]["providerID"]
        assert node.metadata.labels[f"{SYNCED}/rack"] == "r1", node.metadata.labels

    # The control plane Available, its machines ready; the topology reconciled, and the Cluster Available.
    def available() -> dict | None:
        kcps = owned(api, CONTROL_PLANE_API, "kubeadmcontrolplanes", ns)
        status = (kcps[0].get("status") or {}) if kcps else {}
        replicas = {status.get(kind) for kind in ("readyReplicas", "availableReplicas", "upToDateReplicas")}
        ready = kcps and condition(kcps[0], "Available") == "True" and replicas == {CONTROL_PLANE_REPLICAS}
        return kcps[0] if ready else None

    def cluster_available() -> dict | None:
        found = get(api, CORE, "clusters", ns, CLUSTER)
        return found if condition(found, "Available") == "True" else None

    eventually(available, "the KubeadmControlPlane Available", timeout=300)
    cluster = eventually(cluster_available, "the Cluster Available", timeout=180)
    assert condition(cluster, "TopologyReconciled") == "True"
    assert cluster["spec"]["infrastructureRef"]["name"] == metal3_cluster["metadata"]["name"]


def control_plane_rolls(api: client.CustomObjectsApi, ns: str, image: dict[str, Any]) -> None:
    # A new image in the Cluster's variable: the topology rotates the control plane's template to a new clone,
    # and KCP rolls its machines (one more first, then an old one deleted), each new one on a host reprovisioned
    # with the new image. The worker stays.
    worker = set(machines(api, ns)) - set(control_plane(api, ns))
    before = set(control_plane(api, ns))
    cluster = get(api, CORE, "clusters", ns, CLUSTER)
    variables = [{**v, "value": {**image, "url": NEW_IMAGE}} if v["name"] == "image" else v
                 for v in cluster["spec"]["topology"]["variables"]]
    api.patch_namespaced_custom_object(*CORE, ns, "clusters", CLUSTER, {"spec": {"topology": {
        "variables": variables}}})

    def rolled() -> bool:
        now = control_plane(api, ns)
        return (len(now) == CONTROL_PLANE_REPLICAS and not before & set(now) and all(map(running, now.values()))
                and len(machines(api, ns)) == CONTROL_PLANE_REPLICAS + WORKER_REPLICAS)

    eventually(rolled, "the control plane rolled to the new image", timeout=900)
    assert set(machines(api, ns)) - set(control_plane(api, ns)) == worker
    for machine in control_plane(api, ns).values():
        assert hosts(api, ns)[host_of(api, ns, machine)]["spec"]["image"]["url"] == NEW_IMAGE
