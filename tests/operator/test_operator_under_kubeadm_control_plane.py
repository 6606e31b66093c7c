"""The operator under Cluster API's kubeadm control plane provider (issue 32): a v1beta2 Cluster whose control plane
is a KubeadmControlPlane of three replicas on the demo's control plane Metal3MachineTemplate, etcd external (KCP
cannot reach a managed etcd without real kubelets: it talks to etcd through ``pods/portforward``). KCP writes the
workload cluster's kubeconfig itself, from ``<cluster>-ca`` - the workload API server's CA - for the endpoint our
Metal3Cluster reports (the workload API on loopback); it makes one Machine at a time, each bootstrapped by the
kubeadm bootstrap provider (``kubeadm init`` for the first, a control plane join for the others), each on a
Metal3Machine cloned from the template, which our operator provisions on a host of its own on the real Ironic
(fake-hardware). The node agent plays each machine's kubelet and kubeadm: a control plane Node, the mirror Pods of
its static pods, and the ``kubeadm-config`` ConfigMap when the init node comes up; our operator gives each Node its
machine's providerID. KCP reads the control plane initialized and healthy, and says it is Available, and so does
the Cluster. Deleting the Cluster goes through KCP's and core's deletion, which waits on our finalizers: every host
deprovisioned and available, every address released.

Not covered, and why: KCP's remediation of an initialized control plane with external etcd never runs (Cluster API
v1.14.2's controlplane/kubeadm/reconcilers/kubeadmcontrolplane/remediation.go:275 requires etcd members, which only
the managed-etcd path fills in), and managed etcd itself (every etcd call of KCP's goes through a port-forward to
an etcd Pod, which only a real kubelet serves)."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator

import pytest
from kubernetes import client

from ansible_collections.metal3.baremetal.plugins.module_utils.store.kube import KubernetesStore
from tests.harness.cluster import KubeCluster
from tests.harness.cluster_api import ClusterAPI
from tests.harness.demo import demo_objects
from tests.harness.looping import Looping
from tests.harness.node_agent import CONTROL_PLANE, STATIC_PODS, NodeAgent
from tests.operator.conftest import eventually
from tests.operator.test_operator_under_cluster_api import (
    BOOTSTRAP,
    CLUSTER,
    CORE,
    INFRA,
    Ledger,
    cluster,
    cluster_goes,
    condition,
    consumers,
    explained,
    get,
    host_of,
    hosts,
    listed,
    machines,
    nodes,
    running,
)

pytestmark = pytest.mark.kubernetes

CONTROL_PLANE_API = ("controlplane.cluster.x-k8s.io", "v1beta2")
TEMPLATE = f"{CLUSTER}-controlplane"  # the demo's control plane Metal3MachineTemplate
REPLICAS = 3
# KCP dials each machine's kube-apiserver through pods/portforward to read its certificates' expiry unless the
# machine's KubeadmConfig already says it; no kubelet here serves a port-forward.
EXPIRY = "machine.cluster.x-k8s.io/certificates-expiry"
FAR_EXPIRY = {EXPIRY: "2099-01-01T00:00:00Z"}


@pytest.fixture
def workload(cluster_api: ClusterAPI, cluster_api_namespace: str, tmp_path: Path) -> Iterator[KubeCluster]:
    """The workload cluster and the certificates its control plane needs (``control_plane_certificates``)."""
    with KubeCluster(tmp_path / "workload") as started:
        control_plane_certificates(client.CoreV1Api(cluster_api.cluster.api_client()), cluster_api_namespace, started)
        yield started


def control_plane_certificates(core_v1: client.CoreV1Api, ns: str, workload: KubeCluster,
                               cluster: str = CLUSTER) -> None:
    """The certificates a control plane with external etcd needs before it starts, as Cluster API names them:
    ``<cluster>-ca`` (the workload API server's CA: KCP signs its kubeconfig's client certificate with it),
    ``<cluster>-etcd`` (the external etcd's CA, its certificate only) and ``<cluster>-apiserver-etcd-client`` (a
    key pair; nothing dials the external etcd here). No kubeconfig: KCP writes it."""
    ca, server = workload.ca_cert.read_text(), workload.workdir / "server"
    for name, data in {"ca": {"tls.crt": ca, "tls.key": workload.ca_key.read_text()},
                       "etcd": {"tls.crt": ca},
                       "apiserver-etcd-client": {"tls.crt": server.with_suffix(".crt").read_text(),
                                                 "tls.key": server.with_suffix(".key").read_text()}}.items():
        core_v1.create_namespaced_secret(ns, {
            "metadata": {"name": f"{cluster}-{name}", "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
            "type": "cluster.x-k8s.io/secret", "stringData": data})


# No CoreDNS or kube-proxy in the workload cluster for KCP to manage.
SKIP_ADDONS = {"controlplane.cluster.x-k8s.io/skip-coredns": "", "controlplane.cluster.x-k8s.io/skip-kube-proxy": ""}
# etcd external; kubelet named and labelled from the meta_data as CAPM3's templates do.
_NODE_REGISTRATION = {"name": "{{ ds.meta_data.name }}", "kubeletExtraArgs": [
    {"name": "node-labels", "value": "metal3.io/uuid={{ ds.meta_data.uuid }}"}]}
KUBEADM_CONFIG_SPEC = {
    "clusterConfiguration": {"etcd": {"external": {
        "endpoints": ["https://etcd.example:2379"],
        "caFile": "/etc/kubernetes/pki/etcd/ca.crt",
        "certFile": "/etc/kubernetes/pki/apiserver-etcd-client.crt",
        "keyFile": "/etc/kubernetes/pki/apiserver-etcd-client.key"}}},
    "initConfiguration": {"nodeRegistration": _NODE_REGISTRATION},
    "joinConfiguration": {"nodeRegistration": _NODE_REGISTRATION}}


def kubeadm_control_plane(ns: str) -> dict[str, Any]:
    """A KubeadmControlPlane of REPLICAS on the demo's control plane template (KUBEADM_CONFIG_SPEC), each machine's
    KubeadmConfig annotated with its certificates' expiry."""
    return {"apiVersion": "/".join(CONTROL_PLANE_API), "kind": "KubeadmControlPlane",
            "metadata": {"name": CLUSTER, "namespace": ns, "annotations": SKIP_ADDONS},
            "spec": {"replicas": REPLICAS, "version": "v1.34.4",
                     "machineTemplate": {
                         "metadata": {"annotations": FAR_EXPIRY},
                         "spec": {"infrastructureRef": {"apiGroup": INFRA[0], "kind": "Metal3MachineTemplate",
                                                        "name": TEMPLATE}}},
                     "kubeadmConfigSpec": KUBEADM_CONFIG_SPEC}}


class Pace(Looping):
    """Watches, while the scenario runs, how many control plane Machines were at once still without a Node: KCP
    makes one at a time, the next once the last one's Node is up and healthy."""

    def __init__(self, api: client.CustomObjectsApi, ns: str) -> None:
        super().__init__("pace")
        self.api, self.ns = api, ns
        self.most_pending = 0
        self.looks = 0

    def step(self) -> None:
        pending = [m for m in machines(self.api, self.ns).values()
                   if not ((m.get("status") or {}).get("nodeRef") or {}).get("name")]
        self.most_pending = max(self.most_pending, len(pending))
        self.looks += 1


@contextlib.contextmanager
def with_control_plane(api: client.CustomObjectsApi, ns: str, cluster: str = CLUSTER) -> Iterator[None]:
    """A failed assertion told with the KubeadmControlPlane's and the Cluster's status."""
    try:
        yield
    except AssertionError as e:
        kcp = next(iter(listed(api, CONTROL_PLANE_API, "kubeadmcontrolplanes", ns)), {})  # its name, or topology's
        found = get(api, CORE, "clusters", ns, cluster) or {}
        raise AssertionError(f"{e}\nkubeadmcontrolplane: {kcp.get('status')}\ncluster: {found.get('status')}") from None


@pytest.mark.usefixtures("cluster_api_operator")
def test_a_kubeadm_control_plane_of_three_runs_on_our_hosts_is_available_then_the_cluster_goes(
        cluster_api, cluster_api_namespace, workload, ironic):
    ns = cluster_api_namespace
    with KubernetesStore(kubeconfig=str(cluster_api.cluster.kubeconfig)) as store:
        for obj in demo_objects(ns, REPLICAS):
            if obj["kind"] == "Metal3Cluster":  # the workload API, where KCP's kubeconfig will point
                obj["spec"]["controlPlaneEndpoint"] = {"host": "127.0.0.1", "port": workload.port}
            store.create(obj)
    api = client.CustomObjectsApi(cluster_api.cluster.api_client())
    api.create_namespaced_custom_object(*CONTROL_PLANE_API, ns, "kubeadmcontrolplanes", kubeadm_control_plane(ns))
    owned = cluster(ns)
    owned["spec"]["controlPlaneRef"] = {"apiGroup": CONTROL_PLANE_API[0], "kind": "KubeadmControlPlane",
                                        "name": CLUSTER}
    api.create_namespaced_custom_object(*CORE, ns, "clusters", owned)
    with NodeAgent(ironic, workload, ns) as agent, Ledger(api, ns) as ledger, Pace(api, ns) as pace, \
            explained(api, ns, workload, agent, str(cluster_api.cluster.kubeconfig)), with_control_plane(api, ns):
        control_plane_runs(api, ns, workload, agent)
        assert pace.most_pending == 1 and pace.looks > 10, (pace.most_pending, pace.looks)
        cluster_goes(api, ns)
        assert listed(api, CONTROL_PLANE_API, "kubeadmcontrolplanes", ns) == []
    assert agent.errors == []
    assert ledger.twice == [], ledger.twice
    assert ledger.looks > 10  # it watched


def control_plane_runs(api: client.CustomObjectsApi, ns: str, workload: KubeCluster, agent: NodeAgent) -> None:
    # KCP's kubeconfig, for the endpoint our Metal3Cluster reports: the workload API.
    core_v1 = client.CoreV1Api(api.api_client)
    eventually(lambda: get(api, CORE, "clusters", ns, CLUSTER)["spec"].get("controlPlaneEndpoint")
               == {"host": "127.0.0.1", "port": workload.port}, "the Cluster's endpoint ours", timeout=180)
    secret = eventually(lambda: next((s for s in core_v1.list_namespaced_secret(ns).items
                                      if s.metadata.name == f"{CLUSTER}-kubeconfig"), None), "KCP's kubeconfig")
    assert any(o.kind == "KubeadmControlPlane" for o in secret.metadata.owner_references or []), secret.metadata

    # Three Machines of KCP's, one at a time (watched by Pace), each on a Metal3Machine cloned from the template,
    # on a host of its own, Running on its Node.
    eventually(lambda: len(machines(api, ns)) == REPLICAS and all(map(running, machines(api, ns).values())),
               f"{REPLICAS} control plane Machines running", timeout=1200)

    # KCP reads the control plane initialized, each machine's Node labelled and tainted and its static pods
    # healthy, each machine Ready and Available: the control plane is Available, and so is the Cluster.
    def available() -> dict | None:
        found = get(api, CONTROL_PLANE_API, "kubeadmcontrolplanes", ns, CLUSTER) or {}
        status = found.get("status") or {}
        replicas = {status.get(kind) for kind in ("readyReplicas", "availableReplicas", "upToDateReplicas")}
        return found if condition(found, "Available") == "True" and replicas == {REPLICAS} else None

    kcp = eventually(available, "the KubeadmControlPlane Available, its machines ready", timeout=300)
    assert kcp["status"]["initialization"]["controlPlaneInitialized"] is True, kcp["status"]
    eventually(lambda: condition(get(api, CORE, "clusters", ns, CLUSTER), "Available") == "True",
               "the Cluster Available", timeout=180)
    kinds: dict[str, int] = {}
    for name, machine in machines(api, ns).items():
        labels = machine["metadata"]["labels"]
        assert labels["cluster.x-k8s.io/control-plane-name"] == CLUSTER, labels
        bootstrap = get(api, BOOTSTRAP, "kubeadmconfigs", ns, machine["spec"]["bootstrap"]["configRef"]["name"])
        assert bootstrap is not None and bootstrap["metadata"]["annotations"][EXPIRY], machine["spec"]["bootstrap"]
        m3m = get(api, INFRA, "metal3machines", ns, machine["spec"]["infrastructureRef"]["name"])
        assert m3m is not None
        assert m3m["metadata"]["annotations"]["cluster.x-k8s.io/cloned-from-name"] == TEMPLATE
        host = host_of(api, ns, machine)
        assert hosts(api, ns)[host]["status"]["provisioning"]["state"] == "provisioned"
        assert m3m["spec"]["providerID"] == machine["spec"]["providerID"] == \
            f"metal3://{ns}/{host}/{m3m['metadata']['name']}"
        node = nodes(workload)[machine["status"]["nodeRef"]["name"]]
        assert node.spec.provider_id == machine["spec"]["providerID"]
        assert CONTROL_PLANE in node.metadata.labels
        user_data = agent.user_data[node.metadata.name]
        kind = "init" if "kubeadm init" in user_data else "join" if "kubeadm join" in user_data else user_data[:500]
        kinds[kind] = kinds.get(kind, 0) + 1
        for condition_type in ("APIServerPodHealthy", "ControllerManagerPodHealthy", "SchedulerPodHealthy",
                               "NodeKubeadmLabelsAndTaintsSet", "Ready"):
            assert condition(machine, condition_type) == "True", (name, condition_type)
    assert kinds == {"init": 1, "join": REPLICAS - 1}, kinds
    assert sorted(consumers(api, ns).values()) == sorted(m["spec"]["infrastructureRef"]["name"]
                                                         for m in machines(api, ns).values())
    pods = client.CoreV1Api(workload.api_client()).list_namespaced_pod("kube-system").items
    assert len([p for p in pods if p.metadata.labels.get("component") in STATIC_PODS]) == 3 * REPLICAS
