"""The operator under Cluster API's own controllers (issue 32): core's manager, not the collection's ``machines``
module, makes the Machines. A v1beta2 Cluster on the demo's Metal3Cluster and a MachineDeployment on its
workers' Metal3MachineTemplate (bootstrap data given as a Secret, as a user without a bootstrap provider writes
it): core clones the template into Metal3Machines, our operator claims and provisions hosts on the real Ironic
(fake-hardware) and answers Cluster API's infrastructure contract, and core reads the answer - the Cluster's
infrastructure provisioned and its endpoint copied, each Machine provisioned with the Metal3Machine's providerID
and addresses. Scaling down and deleting the Cluster go through core's deletion, which waits on our
finalizers: each host deprovisioned and free, each address released."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ansible_collections.metal3.baremetal.plugins.module_utils.store.kube import KubernetesStore
from tests.harness.cluster_api import ClusterAPI
from tests.harness.demo import demo_objects
from tests.harness.operator_process import Operator
from tests.operator.conftest import eventually

pytestmark = pytest.mark.kubernetes

CORE = ("cluster.x-k8s.io", "v1beta2")
INFRA = ("infrastructure.cluster.x-k8s.io", "v1beta2")
BMH = ("metal3.io", "v1alpha1", "baremetalhosts")
IPAM = ("ipam.metal3.io", "v1alpha1")
CLUSTER, WORKERS = "my-cluster", "my-cluster-workers"  # the demo's (playbooks/files/demo/cluster.yaml)


@pytest.fixture
def operator(cluster_api: ClusterAPI, cluster_api_namespace: str, ironic: Any, tmp_path: Path) -> Iterator[Operator]:
    started = Operator(cluster_api.cluster, tmp_path / "operator", cluster_api_namespace, env=ironic.env).start()
    yield started
    started.stop()
    print(f"--- {started.log.name}\n{started.tail(60)}")


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


def provisioned(machine: dict) -> bool:
    status = machine.get("status") or {}
    return (status.get("phase") == "Provisioned" and bool(machine["spec"].get("providerID"))
            and bool((status.get("initialization") or {}).get("infrastructureProvisioned")))


def hosts(api: client.CustomObjectsApi, ns: str) -> dict[str, dict]:
    return {h["metadata"]["name"]: h for h in api.list_namespaced_custom_object(*BMH[:2], ns, BMH[2])["items"]}


def consumers(api: client.CustomObjectsApi, ns: str) -> dict[str, str]:
    """Each claimed host's consumer (a Metal3Machine's name)."""
    return {name: h["spec"]["consumerRef"]["name"] for name, h in hosts(api, ns).items()
            if (h["spec"].get("consumerRef") or {}).get("name")}


def test_cores_machine_deployment_gets_provisioned_machines_then_scales_down_and_the_cluster_goes(
        cluster_api, cluster_api_namespace, operator):
    ns = cluster_api_namespace
    api = client.CustomObjectsApi(cluster_api.cluster.api_client())
    with KubernetesStore(kubeconfig=str(cluster_api.cluster.kubeconfig)) as store:
        for obj in demo_objects(ns, 3):
            store.create(obj)
    api.create_namespaced_custom_object(*CORE, ns, "clusters", cluster(ns))
    api.create_namespaced_custom_object(*CORE, ns, "machinedeployments", machine_deployment(ns, 2))

    # The Cluster: our Metal3Cluster provisioned, core copies its endpoint.
    def cluster_ready() -> dict | None:
        found = get(api, CORE, "clusters", ns, CLUSTER) or {}
        ready = ((found.get("status") or {}).get("initialization") or {}).get("infrastructureProvisioned")
        return found if ready else None

    found = eventually(cluster_ready, "the Cluster's infrastructure provisioned", timeout=180)
    assert found["spec"]["controlPlaneEndpoint"] == {"host": "192.168.11.5", "port": 6443}

    # Two Machines of core's, each on a Metal3Machine core cloned from the template, each on a host of its own.
    eventually(lambda: len(machines(api, ns)) == 2 and all(map(provisioned, machines(api, ns).values())),
               "two Machines provisioned", timeout=400)
    for name, machine in machines(api, ns).items():
        ref = machine["spec"]["infrastructureRef"]
        assert ref["kind"] == "Metal3Machine", ref
        m3m = get(api, INFRA, "metal3machines", ns, ref["name"])
        assert m3m is not None
        owners = {(o["kind"], o["name"]) for o in m3m["metadata"].get("ownerReferences") or []}
        assert ("Machine", name) in owners, m3m["metadata"]
        assert m3m["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"] == CLUSTER, m3m["metadata"]
        assert machine["spec"]["providerID"] == m3m["spec"]["providerID"]
        host = m3m["metadata"]["annotations"]["metal3.io/BareMetalHost"].split("/")[1]
        assert m3m["spec"]["providerID"] == f"metal3://{ns}/{host}/{ref['name']}"
        assert hosts(api, ns)[host]["status"]["provisioning"]["state"] == "provisioned"
        internal = {a["address"] for a in machine["status"].get("addresses") or [] if a["type"] == "InternalIP"}
        assert internal and internal <= {a["address"] for a in m3m["status"]["addresses"]}, name
    claimed = consumers(api, ns)
    assert sorted(claimed.values()) == sorted(m["spec"]["infrastructureRef"]["name"]
                                              for m in machines(api, ns).values())

    # Scale down: core deletes a Machine, which waits for our Metal3Machine's finalizer: its host is freed.
    api.patch_namespaced_custom_object(*CORE, ns, "machinedeployments", WORKERS, {"spec": {"replicas": 1}})
    eventually(lambda: len(machines(api, ns)) == 1 and len(consumers(api, ns)) == 1, "one Machine left",
               timeout=300)
    freed = set(claimed) - set(consumers(api, ns))
    eventually(lambda: all(hosts(api, ns)[h]["status"]["provisioning"]["state"] == "available" for h in freed),
               "the freed host available", timeout=300)

    # The Cluster deleted: core deletes its MachineDeployment, Machines and Metal3Cluster; every host is
    # available again and every address released.
    api.delete_namespaced_custom_object(*CORE, ns, "clusters", CLUSTER)
    eventually(lambda: get(api, CORE, "clusters", ns, CLUSTER) is None, "the Cluster gone", timeout=400)
    assert machines(api, ns) == {}
    assert listed(api, INFRA, "metal3machines", ns) == []
    assert get(api, INFRA, "metal3clusters", ns, CLUSTER) is None
    eventually(lambda: consumers(api, ns) == {} and {h["status"]["provisioning"]["state"]
                                                      for h in hosts(api, ns).values()} == {"available"},
               "every host available", timeout=300)
    assert listed(api, IPAM, "ipaddresses", ns) == []
    assert listed(api, IPAM, "ipclaims", ns) == []
