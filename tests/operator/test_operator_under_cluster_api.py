"""The operator under Cluster API's own controllers (issue 32): core's manager, not the collection's ``machines``
module, makes the Machines. A v1beta2 Cluster on the demo's Metal3Cluster and a MachineDeployment on its
workers' Metal3MachineTemplate (bootstrap data given as a Secret, as a user without a bootstrap provider writes
it): core clones the template into Metal3Machines, our operator claims and provisions hosts on the real Ironic
(fake-hardware) and answers Cluster API's infrastructure contract, and core reads the answer - the Cluster's
infrastructure provisioned and its endpoint copied, each Machine with the Metal3Machine's providerID and
addresses. The workload cluster is a second kube-apiserver, reached through the ``<cluster>-kubeconfig`` Secret
as Cluster API reaches it, and a node agent plays kubelet from the config drive Ironic holds: the operator gives
each Node its machine's providerID (found by the ``metal3.io/uuid`` label) and the host's labels under the
Metal3Cluster's sync prefixes, and core sets each Machine's nodeRef - Running. Scaling down and deleting the
Cluster go through core's deletion (drain, the infrastructure machine, the Node), which waits on our finalizers:
each host deprovisioned and free, each address released. Core's MachineHealthCheck remediates a worker whose
Node is NotReady through our Metal3RemediationTemplate: the operator reboots its host, and gives the Machine up
to core's MachineSet when the Node stays NotReady."""
from __future__ import annotations

import contextlib
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
from tests.harness.node_agent import NodeAgent
from tests.harness.operator_process import Operator
from tests.operator.conftest import eventually

pytestmark = pytest.mark.kubernetes

CORE = ("cluster.x-k8s.io", "v1beta2")
INFRA = ("infrastructure.cluster.x-k8s.io", "v1beta2")
BMH = ("metal3.io", "v1alpha1", "baremetalhosts")
IPAM = ("ipam.metal3.io", "v1alpha1")
CLUSTER, WORKERS = "my-cluster", "my-cluster-workers"  # the demo's (playbooks/files/demo/cluster.yaml)


SYNCED = "example.metal3.io"  # the label prefix the Metal3Cluster syncs onto Nodes


@pytest.fixture
def operator(cluster_api: ClusterAPI, cluster_api_namespace: str, ironic: Any, tmp_path: Path) -> Iterator[Operator]:
    # The workload cluster's API is on loopback here: the operator is told it may connect there.
    env = {**ironic.env, "METAL3_ALLOWED_LOCAL_HOSTS": "127.0.0.1"}
    started = Operator(cluster_api.cluster, tmp_path / "operator", cluster_api_namespace, env=env).start()
    yield started
    started.stop()
    print(f"--- {started.log.name}\n{started.tail(60)}")


@pytest.fixture
def workload(cluster_api: ClusterAPI, cluster_api_namespace: str, tmp_path: Path) -> Iterator[KubeCluster]:
    """The workload cluster, and its kubeconfig Secret as Cluster API's control plane provider writes it."""
    with KubeCluster(tmp_path / "workload") as started:
        client.CoreV1Api(cluster_api.cluster.api_client()).create_namespaced_secret(cluster_api_namespace, {
            "metadata": {"name": f"{CLUSTER}-kubeconfig", "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER}},
            "type": "cluster.x-k8s.io/secret", "stringData": {"value": started.inline_kubeconfig()}})
        yield started


def cluster(ns: str) -> dict[str, Any]:
    return {"apiVersion": "/".join(CORE), "kind": "Cluster", "metadata": {"name": CLUSTER, "namespace": ns},
            "spec": {"infrastructureRef": {"apiGroup": INFRA[0], "kind": "Metal3Cluster", "name": CLUSTER}}}


def machine_deployment(ns: str, replicas: int) -> dict[str, Any]:
    labels = {"cluster.x-k8s.io/cluster-name": CLUSTER, "cluster.x-k8s.io/deployment-name": WORKERS}
    return {"apiVersion": "/".join(CORE), "kind": "MachineDeployment",
            "metadata": {"name": WORKERS, "namespace": ns, "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER}},
            "spec": {"clusterName": CLUSTER, "replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "clusterName": CLUSTER, "version": "v1.34.4",
                         "bootstrap": {"dataSecretName": "my-cluster-userdata"},
                         "infrastructureRef": {"apiGroup": INFRA[0], "kind": "Metal3MachineTemplate",
                                               "name": WORKERS}}}}}


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


def test_cores_machine_deployment_gets_running_machines_with_nodes_then_scales_down_and_the_cluster_goes(
        cluster_api, cluster_api_namespace, operator, workload, ironic):
    ns = cluster_api_namespace
    with KubernetesStore(kubeconfig=str(cluster_api.cluster.kubeconfig)) as store:
        for obj in demo_objects(ns, 3):
            if obj["kind"] == "Metal3Cluster":
                obj["metadata"].setdefault("annotations", {})["metal3.io/metal3-label-sync-prefixes"] = SYNCED
            if obj["kind"] == "BareMetalHost":
                obj["metadata"]["labels"][f"{SYNCED}/rack"] = "r1"
                obj["metadata"]["labels"]["other.example/rack"] = "r1"  # not a synced prefix
            store.create(obj)
    run_cluster(cluster_api, ns, workload, ironic, 2, cluster_runs)


def run_cluster(cluster_api: ClusterAPI, ns: str, workload: KubeCluster, ironic: Any, workers: int,
                scenario: Callable[[client.CustomObjectsApi, str, KubeCluster, NodeAgent], None]) -> None:
    """The Cluster, its control plane Machine and a MachineDeployment of ``workers``, then ``scenario`` with the
    node agent playing kubelet; a failed assertion tells what the cluster's objects were."""
    api = client.CustomObjectsApi(cluster_api.cluster.api_client())
    api.create_namespaced_custom_object(*CORE, ns, "clusters", cluster(ns))
    control_plane_machine(api, ns)
    api.create_namespaced_custom_object(*CORE, ns, "machinedeployments", machine_deployment(ns, workers))
    kubeconfig = str(cluster_api.cluster.kubeconfig)
    with NodeAgent(ironic, workload, ns) as agent, explained(api, ns, workload, agent, kubeconfig):
        scenario(api, ns, workload, agent)
    assert agent.errors == []


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


def cluster_runs(api: client.CustomObjectsApi, ns: str, workload: KubeCluster, agent: NodeAgent) -> None:

    # The Cluster: our Metal3Cluster provisioned, core copies its endpoint.
    def cluster_ready() -> dict | None:
        found = get(api, CORE, "clusters", ns, CLUSTER) or {}
        ready = ((found.get("status") or {}).get("initialization") or {}).get("infrastructureProvisioned")
        return found if ready else None

    found = eventually(cluster_ready, "the Cluster's infrastructure provisioned", timeout=180)
    assert found["spec"]["controlPlaneEndpoint"] == {"host": "192.168.11.5", "port": 6443}

    # The control plane's Machine and two Machines of core's, each of those on a Metal3Machine core cloned from
    # the template; each on a host of its own, each Running on its Node; the control plane initialized.
    eventually(lambda: len(machines(api, ns)) == 3 and all(map(running, machines(api, ns).values())),
               "three Machines running", timeout=400)
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
        host = m3m["metadata"]["annotations"]["metal3.io/BareMetalHost"].split("/")[1]
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
    claimed = consumers(api, ns)
    assert sorted(claimed.values()) == sorted(m["spec"]["infrastructureRef"]["name"]
                                              for m in machines(api, ns).values())

    # A host's synced label removed and one added: its Node follows (the operator looks again every minute).
    synced_host = sorted(claimed)[0]
    api.patch_namespaced_custom_object(*BMH[:2], ns, BMH[2], synced_host, {"metadata": {"labels": {
        f"{SYNCED}/rack": None, f"{SYNCED}/row": "a"}}})
    node_of = {m["spec"]["providerID"]: m["status"]["nodeRef"]["name"] for m in machines(api, ns).values()}
    synced_node = next(node for provider_id, node in node_of.items() if f"/{synced_host}/" in provider_id)
    eventually(lambda: {k: v for k, v in nodes(workload)[synced_node].metadata.labels.items()
                        if k.startswith(SYNCED)} == {f"{SYNCED}/row": "a"},
               "the Node's synced labels the host's", timeout=150)

    # Scale down: core deletes a Machine, which waits for our Metal3Machine's finalizer: its host is freed.
    api.patch_namespaced_custom_object(*CORE, ns, "machinedeployments", WORKERS, {"spec": {"replicas": 1}})
    eventually(lambda: len(machines(api, ns)) == 2 and len(consumers(api, ns)) == 2, "one worker left",
               timeout=300)
    freed = set(claimed) - set(consumers(api, ns))
    eventually(lambda: all(hosts(api, ns)[h]["status"]["provisioning"]["state"] == "available" for h in freed),
               "the freed host available", timeout=300)
    eventually(lambda: len(nodes(workload)) == 2, "core deleted the freed machine's Node")

    # The Cluster deleted: core deletes its MachineDeployment, Machines and Metal3Cluster; every host is
    # available again and every address released.
    api.delete_namespaced_custom_object(*CORE, ns, "clusters", CLUSTER)
    eventually(lambda: get(api, CORE, "clusters", ns, CLUSTER) is None, "the Cluster gone", timeout=400)
    assert machines(api, ns) == {}
    assert listed(api, INFRA, "metal3machines", ns) == []
    assert get(api, INFRA, "metal3clusters", ns, CLUSTER) is None

    def all_available() -> bool:
        states = {h["status"]["provisioning"]["state"] for h in hosts(api, ns).values()}
        return consumers(api, ns) == {} and states == {"available"}

    eventually(all_available, "every host available", timeout=300)
    assert listed(api, IPAM, "ipaddresses", ns) == []
    assert listed(api, IPAM, "ipclaims", ns) == []


REMEDIATION = "my-cluster-workers-remediation"
REMEDIATION_TIMEOUT = 60  # seconds for a rebooted worker's Node to be back (v1beta1's timeout has no minimum)


def machine_health_check(ns: str) -> dict[str, Any]:
    """Core's MachineHealthCheck of the workers: a Node NotReady for 5 s is remediated by a Metal3Remediation."""
    return {"apiVersion": "/".join(CORE), "kind": "MachineHealthCheck",
            "metadata": {"name": WORKERS, "namespace": ns},
            "spec": {"clusterName": CLUSTER,
                     "selector": {"matchLabels": {"cluster.x-k8s.io/deployment-name": WORKERS}},
                     "checks": {"nodeStartupTimeoutSeconds": 600, "unhealthyNodeConditions": [
                         {"type": "Ready", "status": "False", "timeoutSeconds": 5}]},
                     "remediation": {"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                                     "kind": "Metal3RemediationTemplate", "name": REMEDIATION}}}}


def test_a_health_check_reboots_an_unhealthy_worker_and_replaces_one_that_stays_unhealthy(
        cluster_api, cluster_api_namespace, operator, workload, ironic):
    """Core's MachineHealthCheck makes a Metal3Remediation from our template for a worker whose Node is NotReady:
    the operator powers its host off, deletes the Node, powers the host on; the Node comes back Ready, gets back
    a label it had, and the health check deletes the remediation. A worker whose Node stays NotReady is rebooted
    once more (retryLimit 1), then given up: core's MachineSet deletes the Machine, its host is marked unhealthy
    and freed, and the replacement Machine runs on another host."""
    ns = cluster_api_namespace
    with KubernetesStore(kubeconfig=str(cluster_api.cluster.kubeconfig)) as store:
        for obj in demo_objects(ns, 3):
            store.create(obj)
        store.create({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "Metal3RemediationTemplate",
                      "metadata": {"name": REMEDIATION, "namespace": ns},
                      "spec": {"template": {"spec": {"strategy": {
                          "type": "Reboot", "retryLimit": 1, "timeout": f"{REMEDIATION_TIMEOUT}s"}}}}})
    run_cluster(cluster_api, ns, workload, ironic, 1, remediated)


def remediated(api: client.CustomObjectsApi, ns: str, workload: KubeCluster, agent: NodeAgent) -> None:
    eventually(lambda: len(machines(api, ns)) == 2 and all(map(running, machines(api, ns).values())),
               "two Machines running", timeout=400)
    api.create_namespaced_custom_object(*CORE, ns, "machinehealthchecks", machine_health_check(ns))
    worker = next(m for name, m in machines(api, ns).items() if name.startswith(f"{WORKERS}-"))
    name, node = worker["metadata"]["name"], worker["status"]["nodeRef"]["name"]
    m3m = get(api, INFRA, "metal3machines", ns, worker["spec"]["infrastructureRef"]["name"])
    host = m3m["metadata"]["annotations"]["metal3.io/BareMetalHost"].split("/")[1]
    core_v1 = client.CoreV1Api(workload.api_client())
    core_v1.patch_node(node, {"metadata": {"labels": {"example.test/team": "blue"}}})

    # Its kubelet fails: the health check's remediation powers the host off and deletes the Node.
    agent.broken.add(node)
    eventually(lambda: (get(api, INFRA, "metal3remediations", ns, name) or {}).get("status", {}).get("phase")
               == "Waiting", "the remediation waiting for the rebooted host", timeout=180)
    # The host powers on again, kubelet with it, healthy this time: the Node is back with its label, and the
    # health check deletes the remediation.
    agent.broken.clear()
    eventually(lambda: get(api, INFRA, "metal3remediations", ns, name) is None, "the remediation done and gone",
               timeout=180)
    assert nodes(workload)[node].metadata.labels.get("example.test/team") == "blue"
    assert running(machines(api, ns)[name])
    assert "capm3.metal3.io/unhealthy" not in (hosts(api, ns)[host]["metadata"].get("annotations") or {})
    assert not [key for key in hosts(api, ns)[host]["metadata"].get("annotations") or {}
                if key.startswith("reboot.metal3.io/")]

    # It fails for good: rebooted, and once more (retryLimit 1), then given up - core deletes the Machine, the
    # host is marked unhealthy and freed, and the MachineSet's new Machine runs on the third host.
    agent.broken.add(node)

    def replaced() -> bool:
        current = machines(api, ns)
        return name not in current and len(current) == 2 and all(map(running, current.values()))

    eventually(replaced, "the worker replaced", timeout=600)
    freed = hosts(api, ns)[host]
    assert freed["metadata"]["annotations"]["capm3.metal3.io/unhealthy"] == "capm3/UnhealthyNode"
    eventually(lambda: hosts(api, ns)[host]["status"]["provisioning"]["state"] == "available"
               and host not in consumers(api, ns), "the unhealthy host freed", timeout=300)
    assert len(consumers(api, ns)) == 2
