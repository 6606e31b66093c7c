"""The operator under Cluster API's own controllers (issue 32): core's manager, not the collection's ``machines``
module, makes the Machines. A v1beta2 Cluster on the demo's Metal3Cluster and a MachineDeployment on its
workers' Metal3MachineTemplate (bootstrap data given as a Secret, as a user without a bootstrap provider writes
it): core clones the template into Metal3Machines, our operator claims and provisions hosts on the real Ironic
(fake-hardware) and answers Cluster API's infrastructure contract, and core reads the answer - the Cluster's
infrastructure provisioned and its endpoint copied, each Machine with the Metal3Machine's providerID and
addresses. The workload cluster is a second kube-apiserver, reached through the ``<cluster>-kubeconfig`` Secret
as Cluster API reaches it, and a node agent plays kubelet from the config drive Ironic holds: the operator gives
each Node its machine's providerID (found by the ``metal3.io/uuid`` label) and the host's labels under the
Metal3Cluster's sync prefixes, and core sets each Machine's nodeRef - Running. The MachineDeployment scales
3 -> 5 -> 2 and rolls to a new template with node reuse (maxSurge 0: each old machine's host freed first): the
hosts the old machines left, kept for the deployment, are reprovisioned with the new image, and no host or address
is ever held by two live machines. Scaling down and deleting the Cluster go through core's deletion (drain, the
infrastructure machine, the Node), which waits on our finalizers: each host deprovisioned and free, each address
released, the kept hosts let go. Core's MachineHealthCheck remediates a worker whose Node is NotReady through our
Metal3RemediationTemplate: the operator reboots its host, and gives the Machine up to core's MachineSet when the
Node stays NotReady."""
from __future__ import annotations

import contextlib
import copy
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.remediation import reconcile_remediation
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.store.kube import KubernetesStore
from tests.harness.cluster import KubeCluster
from tests.harness.cluster_api import ClusterAPI
from tests.harness.demo import demo_objects
from tests.harness.looping import Looping
from tests.harness.node_agent import NodeAgent
from tests.operator.conftest import eventually

pytestmark = pytest.mark.kubernetes

CORE = ("cluster.x-k8s.io", "v1beta2")
INFRA = ("infrastructure.cluster.x-k8s.io", "v1beta2")
BOOTSTRAP = ("bootstrap.cluster.x-k8s.io", "v1beta2")
BMH = ("metal3.io", "v1alpha1", "baremetalhosts")
METAL3 = ("metal3.io", "v1alpha1")
IPAM = ("ipam.metal3.io", "v1alpha1")
CLUSTER, WORKERS = "my-cluster", "my-cluster-workers"  # the demo's (playbooks/files/demo/cluster.yaml)


SYNCED = "example.metal3.io"  # the label prefix the Metal3Cluster syncs onto Nodes


@pytest.fixture
def workload(cluster_api: ClusterAPI, cluster_api_namespace: str, tmp_path: Path) -> Iterator[KubeCluster]:
    """The workload cluster, its kubeconfig Secret as Cluster API's control plane provider writes it, and its CA
    as ``<cluster>-ca`` (the kubeadm bootstrap provider hashes it into each worker's join configuration)."""
    with KubeCluster(tmp_path / "workload") as started:
        core_v1 = client.CoreV1Api(cluster_api.cluster.api_client())
        labels = {"cluster.x-k8s.io/cluster-name": CLUSTER}
        core_v1.create_namespaced_secret(cluster_api_namespace, {
            "metadata": {"name": f"{CLUSTER}-kubeconfig", "labels": labels},
            "type": "cluster.x-k8s.io/secret", "stringData": {"value": started.inline_kubeconfig()}})
        core_v1.create_namespaced_secret(cluster_api_namespace, {
            "metadata": {"name": f"{CLUSTER}-ca", "labels": labels}, "type": "cluster.x-k8s.io/secret",
            "stringData": {"tls.crt": started.ca_cert.read_text(), "tls.key": started.ca_key.read_text()}})
        yield started


def cluster(ns: str) -> dict[str, Any]:
    return {"apiVersion": "/".join(CORE), "kind": "Cluster", "metadata": {"name": CLUSTER, "namespace": ns},
            "spec": {"infrastructureRef": {"apiGroup": INFRA[0], "kind": "Metal3Cluster", "name": CLUSTER}}}


def machine_deployment(ns: str, name: str, replicas: int, kubeadm: bool = False) -> dict[str, Any]:
    """A MachineDeployment of ``replicas`` on the Metal3MachineTemplate of its name; its bootstrap data from the
    kubeadm bootstrap provider (``kubeadm``: the KubeadmConfigTemplate of its name), else the demo's Secret."""
    bootstrap = ({"configRef": {"apiGroup": BOOTSTRAP[0], "kind": "KubeadmConfigTemplate", "name": name}}
                 if kubeadm else {"dataSecretName": "my-cluster-userdata"})
    labels = {"cluster.x-k8s.io/cluster-name": CLUSTER, "cluster.x-k8s.io/deployment-name": name}
    return {"apiVersion": "/".join(CORE), "kind": "MachineDeployment",
            "metadata": {"name": name, "namespace": ns, "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER}},
            "spec": {"clusterName": CLUSTER, "replicas": replicas, "selector": {"matchLabels": labels},
                     # One machine at a time, the old one first: with node reuse, its successor takes the host it frees.
                     "rollout": {"strategy": {"type": "RollingUpdate",
                                              "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "clusterName": CLUSTER, "version": "v1.34.4", "bootstrap": bootstrap,
                         "infrastructureRef": {"apiGroup": INFRA[0], "kind": "Metal3MachineTemplate",
                                               "name": name}}}}}


def kubeadm_config_template(ns: str, name: str) -> dict[str, Any]:
    """CAPM3's workers' KubeadmConfigTemplate (its clusterctl template's, at v1beta2), trimmed to the join: kubelet
    named from the meta_data, and labelled with the host's UID for the operator to find its Node."""
    return {"apiVersion": "/".join(BOOTSTRAP), "kind": "KubeadmConfigTemplate",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"template": {"spec": {"joinConfiguration": {"nodeRegistration": {
                "name": "{{ ds.meta_data.name }}",
                "kubeletExtraArgs": [{"name": "node-labels", "value": "metal3.io/uuid={{ ds.meta_data.uuid }}"}]}}}}}}


def control_plane_machine(api: client.CustomObjectsApi, ns: str) -> None:
    """A control plane of one Machine, as a user without a control plane provider writes it: the Machine
    labelled control-plane and its Metal3Machine from the demo's control plane template. (Core deletes a
    machine's Node, and marks the control plane initialized, only in a cluster that has control plane machines.)"""
    template = api.get_namespaced_custom_object(*INFRA, ns, "metal3machinetemplates", f"{CLUSTER}-controlplane")
    api.create_namespaced_custom_object(*INFRA, ns, "metal3machines", {
        "apiVersion": "/".join(INFRA), "kind": "Metal3Machine",
        "metadata": {"name": f"{CLUSTER}-cp-0", "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER}},
        "spec": template["spec"]["template"]["spec"]})
    api.create_namespaced_custom_object(*CORE, ns, "machines", {
        "apiVersion": "/".join(CORE), "kind": "Machine",
        "metadata": {"name": f"{CLUSTER}-cp-0", "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER,
                                                           "cluster.x-k8s.io/control-plane": ""}},
        "spec": {"clusterName": CLUSTER, "version": "v1.34.4", "bootstrap": {"dataSecretName": "my-cluster-userdata"},
                 "infrastructureRef": {"apiGroup": INFRA[0], "kind": "Metal3Machine", "name": f"{CLUSTER}-cp-0"}}})


def listed(api: client.CustomObjectsApi, group_version: tuple[str, str], plural: str, ns: str) -> list[dict]:
    return api.list_namespaced_custom_object(*group_version, ns, plural)["items"]


def machines(api: client.CustomObjectsApi, ns: str) -> dict[str, dict]:
    return {m["metadata"]["name"]: m for m in listed(api, CORE, "machines", ns)}


def get(api: client.CustomObjectsApi, group_version: tuple[str, str], plural: str, ns: str, name: str) -> dict | None:
    try:
        return api.get_namespaced_custom_object(*group_version, ns, plural, name)
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def condition(obj: dict | None, kind: str) -> str | None:
    return next((c["status"] for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c["type"] == kind),
                None)


def running(machine: dict) -> bool:
    status = machine.get("status") or {}
    return (status.get("phase") == "Running" and bool(machine["spec"].get("providerID"))
            and bool((status.get("initialization") or {}).get("infrastructureProvisioned"))
            and bool((status.get("nodeRef") or {}).get("name")))


def nodes(workload: KubeCluster) -> dict[str, Any]:
    return {n.metadata.name: n for n in client.CoreV1Api(workload.api_client()).list_node().items}


def hosts(api: client.CustomObjectsApi, ns: str) -> dict[str, dict]:
    return {h["metadata"]["name"]: h for h in api.list_namespaced_custom_object(*BMH[:2], ns, BMH[2])["items"]}


def consumers(api: client.CustomObjectsApi, ns: str) -> dict[str, str]:
    """Each claimed host's consumer (a Metal3Machine's name)."""
    return {name: h["spec"]["consumerRef"]["name"] for name, h in hosts(api, ns).items()
            if (h["spec"].get("consumerRef") or {}).get("name")}


def test_cores_machine_deployment_runs_scales_and_rolls_with_node_reuse_then_the_cluster_goes(
        cluster_api, cluster_api_namespace, cluster_api_operator, workload, ironic):
    create_demo(cluster_api, cluster_api_namespace, 7)  # six for the most machines at once, and a spare
    run_cluster(cluster_api, cluster_api_namespace, workload, ironic, {WORKERS: 3}, cluster_runs, kubeadm=True)


def create_demo(cluster_api: ClusterAPI, ns: str, count: int, *extra: dict[str, Any]) -> None:
    """The demo's objects in ``ns`` with its first ``count`` hosts, and ``extra``: the Metal3Cluster syncs the
    labels under SYNCED onto the Nodes, each host has one such label and one under another prefix, and the workers'
    template asks for node reuse."""
    with KubernetesStore(kubeconfig=str(cluster_api.cluster.kubeconfig)) as store:
        for obj in [*demo_objects(ns, count), *extra]:
            if obj["kind"] == "Metal3Cluster":
                obj["metadata"].setdefault("annotations", {})["metal3.io/metal3-label-sync-prefixes"] = SYNCED
            if obj["kind"] == "BareMetalHost":
                obj["metadata"]["labels"][f"{SYNCED}/rack"] = "r1"
                obj["metadata"]["labels"]["other.example/rack"] = "r1"  # not a synced prefix
            if obj["kind"] == "Metal3MachineTemplate" and obj["metadata"]["name"] == WORKERS:
                obj["spec"]["nodeReuse"] = True
            store.create(obj)


def run_cluster(cluster_api: ClusterAPI, ns: str, workload: KubeCluster, ironic: Any, deployments: dict[str, int],
                scenario: Callable[[client.CustomObjectsApi, str, KubeCluster, NodeAgent], None],
                provider_id: bool | Callable[[dict[str, Any]], bool] = False, kubeadm: bool = False) -> None:
    """The Cluster, its control plane Machine and a MachineDeployment of each of ``deployments`` (name:
    replicas; ``kubeadm``: bootstrapped by the kubeadm bootstrap provider), then ``scenario`` with the node agent
    playing kubelet (giving the Nodes ``provider_id`` accepts their providerID); a failed assertion tells what
    the cluster's objects were."""
    api = client.CustomObjectsApi(cluster_api.cluster.api_client())
    api.create_namespaced_custom_object(*CORE, ns, "clusters", cluster(ns))
    control_plane_machine(api, ns)
    for name, replicas in deployments.items():
        if kubeadm:
            api.create_namespaced_custom_object(*BOOTSTRAP, ns, "kubeadmconfigtemplates",
                                                kubeadm_config_template(ns, name))
        api.create_namespaced_custom_object(*CORE, ns, "machinedeployments",
                                            machine_deployment(ns, name, replicas, kubeadm))
    kubeconfig = str(cluster_api.cluster.kubeconfig)
    with NodeAgent(ironic, workload, ns, provider_id=provider_id) as agent, Ledger(api, ns) as ledger, \
            explained(api, ns, workload, agent, kubeconfig):
        scenario(api, ns, workload, agent)
    assert agent.errors == []
    assert ledger.twice == [], ledger.twice
    assert ledger.looks > 10  # it watched


class Ledger(Looping):
    """Watches, while the scenario runs, that no host and no address is ever held by two live machines: no two
    Metal3Machines not being deleted name one host, and no two report one InternalIP."""

    def __init__(self, api: client.CustomObjectsApi, ns: str) -> None:
        super().__init__("ledger")
        self.api, self.ns = api, ns
        self.twice: list[str] = []
        self.looks = 0

    def step(self) -> None:
        with contextlib.suppress(ApiException):  # an API blip is no finding; the next look counts
            self.look()

    def look(self) -> None:
        holders: dict[tuple[str, str], str] = {}
        for m3m in listed(self.api, INFRA, "metal3machines", self.ns):
            if m3m["metadata"].get("deletionTimestamp"):
                continue
            name = m3m["metadata"]["name"]
            host = (m3m["metadata"].get("annotations") or {}).get("metal3.io/BareMetalHost")
            held = [("host", host)] if host else []
            held += [("address", a["address"]) for a in (m3m.get("status") or {}).get("addresses") or []
                     if a.get("type") == "InternalIP"]
            for key in held:
                if key in holders and holders[key] != name:
                    self.twice.append(f"{key[0]} {key[1]} held by {holders[key]} and {name}")
                holders[key] = name
        self.looks += 1


@contextlib.contextmanager
def explained(api: client.CustomObjectsApi, ns: str, workload: KubeCluster, agent: NodeAgent,
              kubeconfig: str) -> Iterator[None]:
    """A failed assertion told with what the cluster's objects were."""
    try:
        yield
    except AssertionError as e:
        raise AssertionError(f"{e}\n{seen(api, ns, workload, agent, kubeconfig)}") from None


def seen(api: client.CustomObjectsApi, ns: str, workload: KubeCluster, agent: NodeAgent, kubeconfig: str) -> str:
    """What the Machines, Metal3Machines, remediations and Nodes were, for a failure's message."""
    def conditions(obj: dict) -> list[tuple]:
        return [(c["type"], c["status"], c.get("reason"), c.get("message"))
                for c in (obj.get("status") or {}).get("conditions") or []]

    lines = [f"machine {name}: phase={(m.get('status') or {}).get('phase')} providerID={m['spec'].get('providerID')}"
             f" nodeRef={(m.get('status') or {}).get('nodeRef')} conditions={conditions(m)}"
             for name, m in machines(api, ns).items()]
    lines += [f"metal3machine {m['metadata']['name']}: providerID={m['spec'].get('providerID')} "
              f"conditions={conditions(m)}" for m in listed(api, INFRA, "metal3machines", ns)]
    for r in listed(api, INFRA, "metal3remediations", ns):
        meta = r["metadata"]
        lines.append(f"metal3remediation {meta['name']}: phase={(r.get('status') or {}).get('phase')} "
                     f"retryCount={(r.get('status') or {}).get('retryCount')} finalizers={meta.get('finalizers')} "
                     f"deleting={meta.get('deletionTimestamp')} annotations={sorted(meta.get('annotations') or {})}")
        with KubernetesStore(kubeconfig=kubeconfig) as store:
            step = reconcile_remediation(store, Ref("/".join(INFRA), "Metal3Remediation", meta["name"], ns),
                                         dry_run=True, outbound=OutboundPolicy.of(["127.0.0.1"]))
        lines.append(f"  a step now (dry run): {step.message}")
    lines += [f"node {name}: providerID={n.spec.provider_id} labels={n.metadata.labels}"
              for name, n in nodes(workload).items()]
    lines += [f"agent: registered={agent.registered} errors={agent.errors[-3:]}"]
    return "\n".join(lines)


NEW_IMAGE = "http://images.example/ubuntu-24.04-v2.qcow2"  # the rollout's


def all_running(api: client.CustomObjectsApi, ns: str, count: int) -> None:
    eventually(lambda: len(machines(api, ns)) == count and all(map(running, machines(api, ns).values())),
               f"{count} Machines running", timeout=500)


def scale(api: client.CustomObjectsApi, ns: str, replicas: int) -> None:
    api.patch_namespaced_custom_object(*CORE, ns, "machinedeployments", WORKERS, {"spec": {"replicas": replicas}})


def host_of(api: client.CustomObjectsApi, ns: str, machine: dict) -> str:
    """The host a Machine's Metal3Machine holds: the one it names, or its HostClaim's (HostClaim mode)."""
    m3m = get(api, INFRA, "metal3machines", ns, machine["spec"]["infrastructureRef"]["name"]) or {"metadata": {}}
    annotations = m3m["metadata"].get("annotations") or {}
    if "metal3.io/BareMetalHost" in annotations:
        return annotations["metal3.io/BareMetalHost"].split("/")[1]
    claim = get(api, METAL3, "hostclaims", ns, annotations["metal3.io/HostClaim"].split("/")[1]) or {}
    return claim["status"]["bareMetalHost"]["name"]


def kept(api: client.CustomObjectsApi, ns: str) -> set[str]:
    """The hosts kept for the workers' deployment (CAPM3's node-reuse label), held by the Cluster."""
    return {name for name, h in hosts(api, ns).items()
            if h["metadata"].get("labels", {}).get("infrastructure.cluster.x-k8s.io/node-reuse") == f"md-{WORKERS}"
            and (h["spec"].get("consumerRef") or {}).get("kind") == "Cluster"}


def cluster_runs(api: client.CustomObjectsApi, ns: str, workload: KubeCluster, agent: NodeAgent) -> None:
    claimed = cluster_up(api, ns, workload, agent, 3)

    # A host's synced label removed and one added: its Node follows (the operator looks again every minute).
    synced_host = sorted(claimed)[0]
    api.patch_namespaced_custom_object(*BMH[:2], ns, BMH[2], synced_host, {"metadata": {"labels": {
        f"{SYNCED}/rack": None, f"{SYNCED}/row": "a"}}})
    node_of = {m["spec"]["providerID"]: m["status"]["nodeRef"]["name"] for m in machines(api, ns).values()}
    synced_node = next(node for provider_id, node in node_of.items() if f"/{synced_host}/" in provider_id)
    eventually(lambda: {k: v for k, v in nodes(workload)[synced_node].metadata.labels.items()
                        if k.startswith(SYNCED)} == {f"{SYNCED}/row": "a"},
               "the Node's synced labels the host's", timeout=150)

    # Scale up to five workers: six hosts taken, one spare.
    scale(api, ns, 5)
    all_running(api, ns, 6)
    assert len(consumers(api, ns)) == 6
    control_plane_host = host_of(api, ns, machines(api, ns)[f"{CLUSTER}-cp-0"])
    (spare,) = set(hosts(api, ns)) - set(consumers(api, ns))

    # Down to two: three hosts freed, each kept for the deployment.
    scaled_down(api, ns, workload, 2, freed=3)

    # A rollout to a template with another image: core's new MachineSet replaces each worker, one at a time; each
    # new machine takes a host the deployment kept (never the spare, free all along), reprovisioned with the new
    # image.
    template = get(api, INFRA, "metal3machinetemplates", ns, WORKERS)
    image = {**template["spec"]["template"]["spec"]["image"], "url": NEW_IMAGE}
    api.create_namespaced_custom_object(*INFRA, ns, "metal3machinetemplates", {
        "apiVersion": "/".join(INFRA), "kind": "Metal3MachineTemplate",
        "metadata": {"name": f"{WORKERS}-v2", "labels": template["metadata"].get("labels") or {}},
        "spec": {**template["spec"], "template": {"spec": {**template["spec"]["template"]["spec"], "image": image}}}})
    before = {name for name in machines(api, ns) if name.startswith(f"{WORKERS}-")}
    api.patch_namespaced_custom_object(*CORE, ns, "machinedeployments", WORKERS, {"spec": {"template": {"spec": {
        "infrastructureRef": {"apiGroup": INFRA[0], "kind": "Metal3MachineTemplate", "name": f"{WORKERS}-v2"}}}}})

    def rolled() -> bool:
        current = machines(api, ns)
        return len(current) == 3 and not before & set(current) and all(map(running, current.values()))

    eventually(rolled, "the workers rolled to the new template", timeout=600)
    for name, machine in machines(api, ns).items():
        host = host_of(api, ns, machine)
        if name == f"{CLUSTER}-cp-0":
            assert host == control_plane_host
            continue
        assert host != spare, (name, host)
        assert hosts(api, ns)[host]["spec"]["image"]["url"] == NEW_IMAGE
        assert "infrastructure.cluster.x-k8s.io/node-reuse" not in hosts(api, ns)[host]["metadata"]["labels"]
    eventually(lambda: len(kept(api, ns)) == 3, "the old workers' hosts kept", timeout=300)

    cluster_goes(api, ns)


def cluster_up(api: client.CustomObjectsApi, ns: str, workload: KubeCluster, agent: NodeAgent,
               workers: int) -> dict[str, str]:
    """The Cluster provisioned, the control plane machine and ``workers`` Machines of the workers' deployment
    Running, each on a host of its own and a Node of its own with the machine's providerID and the host's synced
    labels, the workers joined by the kubeadm bootstrap provider; the claimed hosts' consumers."""

    # The Cluster: our Metal3Cluster provisioned, core copies its endpoint.
    def cluster_ready() -> dict | None:
        found = get(api, CORE, "clusters", ns, CLUSTER) or {}
        ready = ((found.get("status") or {}).get("initialization") or {}).get("infrastructureProvisioned")
        return found if ready else None

    found = eventually(cluster_ready, "the Cluster's infrastructure provisioned", timeout=180)
    assert found["spec"]["controlPlaneEndpoint"] == {"host": "192.168.11.5", "port": 6443}

    # The control plane's Machine and the workers' Machines of core's, each of those on a Metal3Machine core
    # cloned from the template; each on a host of its own, each Running on its Node; the control plane initialized.
    all_running(api, ns, workers + 1)
    eventually(lambda: condition(get(api, CORE, "clusters", ns, CLUSTER), "ControlPlaneInitialized") == "True",
               "the control plane initialized")
    for name, machine in machines(api, ns).items():
        ref = machine["spec"]["infrastructureRef"]
        assert ref["kind"] == "Metal3Machine", ref
        m3m = get(api, INFRA, "metal3machines", ns, ref["name"])
        assert m3m is not None
        owners = {(o["kind"], o["name"]) for o in m3m["metadata"].get("ownerReferences") or []}
        assert ("Machine", name) in owners, m3m["metadata"]
        assert m3m["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"] == CLUSTER, m3m["metadata"]
        assert name.startswith(f"{WORKERS}-") or name == f"{CLUSTER}-cp-0"
        assert machine["spec"]["providerID"] == m3m["spec"]["providerID"]
        host = host_of(api, ns, machine)
        assert m3m["spec"]["providerID"] == f"metal3://{ns}/{host}/{ref['name']}"
        assert hosts(api, ns)[host]["status"]["provisioning"]["state"] == "provisioned"
        internal = {a["address"] for a in machine["status"].get("addresses") or [] if a["type"] == "InternalIP"}
        assert internal and internal <= {a["address"] for a in m3m["status"]["addresses"]}, name
        # The Node kubelet registered without a providerID: the operator gave it the machine's, and the host's
        # labels under the synced prefix only. (A kubelet given CAPM3's provider-id would have set the same.)
        node = nodes(workload)[machine["status"]["nodeRef"]["name"]]
        assert f"metal3://{agent.meta_data[node.metadata.name]['providerid']}" == m3m["spec"]["providerID"]
        assert node.spec.provider_id == machine["spec"]["providerID"]
        assert node.metadata.labels["metal3.io/uuid"] == hosts(api, ns)[host]["metadata"]["uid"]
        assert node.metadata.labels[f"{SYNCED}/rack"] == "r1" and "other.example/rack" not in node.metadata.labels
    # The workers' bootstrap data is the kubeadm bootstrap provider's: a join with a token it made in the
    # workload cluster, deployed in each worker's config drive.
    tokens = client.CoreV1Api(workload.api_client()).list_namespaced_secret(
        "kube-system", field_selector="type=bootstrap.kubernetes.io/token").items
    assert tokens
    for name, machine in machines(api, ns).items():
        if name.startswith(f"{WORKERS}-"):
            data = machine["spec"]["bootstrap"]["dataSecretName"]
            assert get(api, BOOTSTRAP, "kubeadmconfigs", ns, data) is not None, machine["spec"]["bootstrap"]
            user_data = agent.user_data[machine["status"]["nodeRef"]["name"]]
            ids = [token.metadata.name.removeprefix("bootstrap-token-") for token in tokens]
            assert "kubeadm join" in user_data and any(i in user_data for i in ids), user_data[:2000]
    claimed = consumers(api, ns)
    assert sorted(claimed.values()) == sorted(m["spec"]["infrastructureRef"]["name"]
                                              for m in machines(api, ns).values())
    return claimed


def scaled_down(api: client.CustomObjectsApi, ns: str, workload: KubeCluster, replicas: int, freed: int) -> None:
    """The workers' deployment scaled down to ``replicas``, which frees ``freed`` hosts: core deletes that many
    Machines, each of which waits for our Metal3Machine's finalizer - its host deprovisioned, then kept for the
    deployment (the template asks for node reuse): CAPM3's label, the Cluster its consumer. Core deletes their
    Nodes."""
    scale(api, ns, replicas)
    eventually(lambda: len(machines(api, ns)) == replicas + 1 and len(kept(api, ns)) == freed,
               f"{freed} hosts kept", timeout=400)
    eventually(lambda: all(hosts(api, ns)[h]["status"]["provisioning"]["state"] == "available"
                           for h in kept(api, ns)), "the kept hosts deprovisioned", timeout=300)
    eventually(lambda: len(nodes(workload)) == replicas + 1, "core deleted the freed machines' Nodes")


def cluster_goes(api: client.CustomObjectsApi, ns: str, cluster: str = CLUSTER) -> None:
    """The Cluster deleted: core (and a control plane provider) delete its MachineDeployments, Machines and
    Metal3Cluster; every host is available again and every address released."""
    api.delete_namespaced_custom_object(*CORE, ns, "clusters", cluster)
    eventually(lambda: get(api, CORE, "clusters", ns, cluster) is None, "the Cluster gone", timeout=600)
    assert machines(api, ns) == {}
    assert listed(api, INFRA, "metal3machines", ns) == []
    assert listed(api, INFRA, "metal3clusters", ns) == []

    def all_available() -> bool:
        states = {h["status"]["provisioning"]["state"] for h in hosts(api, ns).values()}
        return consumers(api, ns) == {} and states == {"available"}

    eventually(all_available, "every host available", timeout=300)
    assert kept(api, ns) == set()  # let go when the Metal3Cluster went (CAPM3 leaves them held)
    assert listed(api, IPAM, "ipaddresses", ns) == []
    assert listed(api, IPAM, "ipclaims", ns) == []


REMEDIATION = "my-cluster-workers-remediation"
REMEDIATION_TIMEOUT = 60  # seconds for a rebooted worker's Node to be back (v1beta1's timeout has no minimum)
CLAIMED = "my-cluster-claimed"  # workers in HostClaim mode: their template's machines name a kind of compute


def machine_health_check(ns: str) -> dict[str, Any]:
    """Core's MachineHealthCheck of the workers: a Node NotReady for 5 s is remediated by a Metal3Remediation."""
    return {"apiVersion": "/".join(CORE), "kind": "MachineHealthCheck",
            "metadata": {"name": WORKERS, "namespace": ns},
            "spec": {"clusterName": CLUSTER,
                     "selector": {"matchExpressions": [{"key": "cluster.x-k8s.io/deployment-name",
                                                        "operator": "Exists"}]},
                     "checks": {"nodeStartupTimeoutSeconds": 600, "unhealthyNodeConditions": [
                         {"type": "Ready", "status": "False", "timeoutSeconds": 5}]},
                     "remediation": {"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                                     "kind": "Metal3RemediationTemplate", "name": REMEDIATION}}}}


def remediation_template(ns: str) -> dict[str, Any]:
    """Our Metal3RemediationTemplate of the workers: reboot, once more if the Node is not back, then give up."""
    return {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "Metal3RemediationTemplate",
            "metadata": {"name": REMEDIATION, "namespace": ns},
            "spec": {"template": {"spec": {"strategy": {
                "type": "Reboot", "retryLimit": 1, "timeout": f"{REMEDIATION_TIMEOUT}s"}}}}}


def test_a_health_check_reboots_unhealthy_workers_and_replaces_those_that_stay_unhealthy_in_both_modes(
        cluster_api, cluster_api_namespace, cluster_api_operator, workload, ironic):
    """Core's MachineHealthCheck makes a Metal3Remediation from our template for each worker whose Node is
    NotReady - one of a MachineDeployment that claims hosts, one of a MachineDeployment in HostClaim mode, both
    at once: the operator powers each host off (the claim's through its HostClaim), deletes the Node, powers the
    host on; the Node comes back Ready, gets back a label it had, and the health check deletes the remediation.
    Workers whose Nodes stay NotReady are rebooted once more (retryLimit 1), then given up: core's MachineSets
    delete the Machines and run new ones; the bare-metal worker's host is marked unhealthy and freed, the
    HostClaim's is freed with its claim unmarked (a tenant's mark never reaches a host)."""
    ns = cluster_api_namespace
    with KubernetesStore(kubeconfig=str(cluster_api.cluster.kubeconfig)) as store:
        for obj in demo_objects(ns, 5):
            store.create(obj)
            if obj["kind"] == "Metal3MachineTemplate" and obj["metadata"]["name"] == WORKERS:
                claimed = copy.deepcopy(obj)
                claimed["metadata"]["name"] = CLAIMED
                claimed["spec"]["template"]["spec"]["kind"] = "baremetal"
                store.create(claimed)
        store.create({"apiVersion": "/".join(METAL3), "kind": "HostDeployPolicy",
                      "metadata": {"name": "own-namespace", "namespace": ns},
                      "spec": {"hostClaimNamespaces": {"names": [ns]}}})
        store.create(remediation_template(ns))
    # A claim's tenant cannot see the host's UID: the HostClaim-mode workers' kubelet is given its providerID.
    run_cluster(cluster_api, ns, workload, ironic, {WORKERS: 1, CLAIMED: 1}, remediated,
                provider_id=lambda meta: meta.get("providerid", "").split("/")[-1].startswith(f"{CLAIMED}-"))


def reboot_holds(obj: dict) -> list[str]:
    return [key for key in obj["metadata"].get("annotations") or {} if key.startswith("reboot.metal3.io/")]


def remediated(api: client.CustomObjectsApi, ns: str, workload: KubeCluster, agent: NodeAgent) -> None:
    all_running(api, ns, 3)
    worker = next(m for name, m in machines(api, ns).items() if name.startswith(f"{CLAIMED}-"))
    claim = get(api, METAL3, "hostclaims", ns, worker["spec"]["infrastructureRef"]["name"])
    assert claim is not None and claim["spec"]["kind"] == "baremetal"
    name, node, host = rebooted(api, ns, workload, agent, (WORKERS, CLAIMED))
    assert reboot_holds(get(api, METAL3, "hostclaims", ns, claim["metadata"]["name"])) == []

    # They fail for good: rebooted, and once more (retryLimit 1), then given up - core deletes the Machines, and
    # the MachineSets' new Machines run.
    agent.broken |= set(node.values())

    def replaced() -> bool:
        current = machines(api, ns)
        return not set(name.values()) & set(current) and len(current) == 3 and all(map(running, current.values()))

    eventually(replaced, "the workers replaced", timeout=600)
    given_up = hosts(api, ns)[host[WORKERS]]
    assert given_up["metadata"]["annotations"]["capm3.metal3.io/unhealthy"] == "capm3/UnhealthyNode"
    assert get(api, METAL3, "hostclaims", ns, claim["metadata"]["name"]) is None
    assert "capm3.metal3.io/unhealthy" not in (hosts(api, ns)[host[CLAIMED]]["metadata"].get("annotations") or {})
    eventually(lambda: hosts(api, ns)[host[WORKERS]]["status"]["provisioning"]["state"] == "available"
               and host[WORKERS] not in consumers(api, ns), "the unhealthy host freed", timeout=300)
    assert host[WORKERS] not in {host_of(api, ns, m) for m in machines(api, ns).values()}


def rebooted(api: client.CustomObjectsApi, ns: str, workload: KubeCluster, agent: NodeAgent,
             deployments: tuple[str, ...]) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """Core's health check of the workers made, and a worker of each of ``deployments`` whose kubelet fails for a
    while rebooted by its remediation and back; its Machine's, Node's and host's names by deployment."""
    api.create_namespaced_custom_object(*CORE, ns, "machinehealthchecks", machine_health_check(ns))
    workers = {md: next(m for name, m in machines(api, ns).items() if name.startswith(f"{md}-"))
               for md in deployments}
    name = {md: m["metadata"]["name"] for md, m in workers.items()}
    node = {md: m["status"]["nodeRef"]["name"] for md, m in workers.items()}
    host = {md: host_of(api, ns, m) for md, m in workers.items()}
    core_v1 = client.CoreV1Api(workload.api_client())
    for each in node.values():
        core_v1.patch_node(each, {"metadata": {"labels": {"example.test/team": "blue"}}})

    def phase(md: str) -> str | None:
        return ((get(api, INFRA, "metal3remediations", ns, name[md]) or {}).get("status") or {}).get("phase")

    # Their kubelets fail: the health check's remediations power the hosts off and delete the Nodes.
    agent.broken |= set(node.values())
    eventually(lambda: all(phase(md) == "Waiting" for md in deployments), "the remediations waiting for the "
               "rebooted hosts", timeout=180)
    # The hosts power on again, kubelet with them, healthy this time: the Nodes are back with their label, and
    # the health check deletes the remediations.
    agent.broken.clear()
    eventually(lambda: all(get(api, INFRA, "metal3remediations", ns, each) is None for each in name.values()),
               "the remediations done and gone", timeout=180)
    for md in deployments:
        assert nodes(workload)[node[md]].metadata.labels.get("example.test/team") == "blue", md
        assert running(machines(api, ns)[name[md]]), md
        assert "capm3.metal3.io/unhealthy" not in (hosts(api, ns)[host[md]]["metadata"].get("annotations") or {})
        assert reboot_holds(hosts(api, ns)[host[md]]) == [], md
    return name, node, host
