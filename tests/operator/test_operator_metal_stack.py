"""The metal-stack provider through the operator, on the real kube-apiserver and a real Ironic (fake-hardware): the
seed's MetalStackCluster and MetalStackMachine (tests/fixtures/metal-stack), applied as written but in the test's
namespace, beside the world they need - Cluster API's Cluster and Machine, hosts registered and available in
partition vagrant, a machine type, the partition's super-network, a public network and the image catalogue. The
operator makes the cluster's node network and firewall, puts the firewall and the machine on the hosts their
providerIDs pin, provisions them, and, when both are deleted, frees everything.

The seed pins its firewall and its machine by metal-stack machine IDs (UUIDs). A machine ID is a host's Ironic node
UUID or its name; Ironic picks a node's UUID itself, and a BareMetalHost may not be named like a UUID (upstream's
webhook refuses it, and so does the engine's admission). So the test waits for the two hosts to be registered and
rewrites the seed's two providerIDs to metalstack://<that host's Ironic node UUID> - the seed's form, with the IDs
this Ironic gave - and applies the seeds otherwise as written."""
from __future__ import annotations

import copy
import json
import secrets
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.common import (
    CLUSTER_FINALIZER,
    FIREWALL_FINALIZER,
    MACHINE_FINALIZER,
)
from tests.harness.cluster import KubeCluster
from tests.harness.demo import mac
from tests.harness.operator_process import Operator
from tests.operator.conftest import condition, eventually

pytestmark = pytest.mark.kubernetes

REPO = Path(__file__).resolve().parents[2]
SEEDS = REPO / "tests" / "fixtures" / "metal-stack"
INFRA = "infrastructure.cluster.x-k8s.io"
CLUSTER = (INFRA, "v1alpha3", "metalstackclusters")
MACHINE = (INFRA, "v1alpha3", "metalstackmachines")
FIREWALL = (INFRA, "v1alpha4", "metalstackfirewalls")
BMH = ("metal3.io", "v1alpha1", "baremetalhosts")
IPAM = ("ipam.metal3.io", "v1alpha1")
CAPI = ("cluster.x-k8s.io", "v1beta1")
SEED_FIREWALL_ID = "2294c949-88f6-5390-8154-fa53d93a3313"  # the seed cluster's firewallSpec.providerID
SEED_MACHINE_ID = "e0ab02d2-27cd-5a5e-8efc-080ba80cf258"  # the seed machine's providerID
FIREWALL_HOST, MACHINE_HOST = "server-0", "server-1"  # the hosts the test pins them to, by their node UUIDs
TIMEOUT = 600  # each step of each object is an ansible-playbook run, and Ironic's fake deploys poll


def seed(name: str, namespace: str) -> dict[str, Any]:
    """A seed manifest as written, in ``namespace`` (the seed's are metal-stack and default)."""
    obj = yaml.safe_load((SEEDS / f"seed-{name}.yaml").read_text())
    obj["metadata"]["namespace"] = namespace
    return obj


def host(name: str) -> dict[str, Any]:
    """A fake-hardware host of partition vagrant, its hardware given (inspection disabled): two cores, 4 GiB, two
    NICs (the firewall's outside address goes on the second), MAC addresses of its own (Ironic is shared)."""
    nics = [{"name": "enp1s0", "mac": mac()}, {"name": "enp2s0", "mac": mac()}]
    details = {"nics": nics, "cpu": {"arch": "x86_64", "count": 2}, "ramMebibytes": 4096, "hostname": name}
    return {"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
            "metadata": {"name": name, "labels": {"infrastructure.cluster.x-k8s.io/failure-domain": "vagrant"},
                         "annotations": {"inspect.metal3.io/hardwaredetails": json.dumps(details)}},
            "spec": {"online": False, "bootMACAddress": nics[0]["mac"], "bootMode": "UEFI",
                     "inspectionMode": "disabled",
                     "bmc": {"address": f"fake://{name}", "credentialsName": "vagrant-bmc"}}}


def image(name: str) -> str:
    return yaml.safe_dump({"url": f"http://images.example/{name}.qcow2", "checksum": "0" * 64,
                           "checksumType": "sha256", "diskFormat": "qcow2"})


def world(core: client.CoreV1Api, custom: client.CustomObjectsApi, ns: str) -> None:
    """What the seed's objects need in ``ns``, but Cluster API's Cluster and Machine."""
    core.create_namespaced_secret(ns, {"metadata": {"name": "vagrant-bmc"},
                                       "stringData": {"username": "admin", "password": "vagrant"}})
    core.create_namespaced_config_map(ns, {"metadata": {"name": "metal-stack-images"}, "data": {
        name: image(name) for name in ("firewall-ubuntu-2.0", "ubuntu-cloud-init-20.04")}})
    custom.create_namespaced_custom_object("metal3.io", "v1alpha1", ns, "machinetypes", {
        "apiVersion": "metal3.io/v1alpha1", "kind": "MachineType", "metadata": {"name": "v1-small-x86"},
        "spec": {"constraints": [{"type": "cores", "min": 2, "max": 2},
                                 {"type": "memory", "min": "2Gi", "max": "64Gi"}]}})
    custom.create_namespaced_custom_object(*IPAM, ns, "ipprefixpools", {
        "apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPPrefixPool", "metadata": {"name": "vagrant-super"},
        "spec": {"prefixes": ["10.8.0.0/22"], "prefixLength": 24, "partition": "vagrant"}})
    # The seed's publicNetworkID; its endpoint 100.255.254.1 is given, so the pool starts after it.
    custom.create_namespaced_custom_object(*IPAM, ns, "ippools", {
        "apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPPool", "metadata": {"name": "internet-vagrant-lab"},
        "spec": {"namePrefix": "internet-vagrant-lab", "prefix": 24, "gateway": "100.255.254.254",
                 "pools": [{"start": "100.255.254.2", "end": "100.255.254.200"}]}})
    for name in (FIREWALL_HOST, MACHINE_HOST):
        custom.create_namespaced_custom_object(*BMH[:2], ns, BMH[2], host(name))


def capi(core: client.CoreV1Api, custom: client.CustomObjectsApi, ns: str) -> None:
    """Cluster API's Cluster and Machine whose infrastructureRefs name the seed's objects (stored at v1beta1, as
    given), and the Machine's bootstrap data."""
    infra_ref = {"apiVersion": f"{INFRA}/v1alpha3"}
    custom.create_namespaced_custom_object(*CAPI, ns, "clusters", {
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "metadata": {"name": "metal-stack-cluster"},
        "spec": {"infrastructureRef": {**infra_ref, "kind": "MetalStackCluster", "name": "metal-stack-cluster"}}})
    core.create_namespaced_secret(ns, {"metadata": {"name": "cp-0-bootstrap"},
                                       "stringData": {"value": "#cloud-config\nhostname: metal-stack-machine\n"}})
    custom.create_namespaced_custom_object(*CAPI, ns, "machines", {
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
        "metadata": {"name": "cp-0", "labels": {"cluster.x-k8s.io/cluster-name": "metal-stack-cluster"}},
        "spec": {"clusterName": "metal-stack-cluster", "bootstrap": {"dataSecretName": "cp-0-bootstrap"},
                 "infrastructureRef": {**infra_ref, "kind": "MetalStackMachine", "name": "metal-stack-machine"}}})


def get(custom: client.CustomObjectsApi, what: tuple[str, str, str], ns: str, name: str) -> dict[str, Any] | None:
    try:
        return custom.get_namespaced_custom_object(*what[:2], ns, what[2], name)
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def items(custom: client.CustomObjectsApi, what: tuple[str, str, str], ns: str) -> list[dict[str, Any]]:
    return custom.list_namespaced_custom_object(*what[:2], ns, what[2])["items"]


def ready(custom: client.CustomObjectsApi, what: tuple[str, str, str], ns: str, name: str) -> Any:
    obj = get(custom, what, ns, name)
    return obj if obj and (obj.get("status") or {}).get("ready") is True else None


@pytest.fixture
def deployed_operator(kube_cluster: KubeCluster, kube_namespace: str, ironic: Any,
                      tmp_path: Path) -> Iterator[Any]:
    """Starts the operator, on Ironic, with a kubeconfig holding a token of a ServiceAccount bound to the shipped
    ClusterRole; stopped (its log shown) and the grant removed after the test."""
    api = kube_cluster.api_client()
    role = [d for d in yaml.safe_load_all((REPO / "operator/config/rbac/role.yaml").read_text())
            if d and d["kind"] == "ClusterRole"][0]
    name = f"metal3-operator-metal-stack-{secrets.token_hex(3)}"
    role["metadata"] = {"name": name}
    rbac, core = client.RbacAuthorizationV1Api(api), client.CoreV1Api(api)
    rbac.create_cluster_role(role)
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
    operator = Operator(SimpleNamespace(kubeconfig=kubeconfig), tmp_path / "operator", kube_namespace,
                        env=ironic.env)
    yield operator.start
    operator.stop()
    print(f"--- {operator.log.name}\n{operator.tail(100)}")
    rbac.delete_cluster_role_binding(name)
    rbac.delete_cluster_role(name)


def test_the_seeds_cluster_and_machine_become_ready_and_are_freed_when_deleted(deployed_operator, custom, kube_cluster,
                                                                               kube_namespace):
    ns = kube_namespace
    core = client.CoreV1Api(kube_cluster.api_client())
    world(core, custom, ns)
    capi(core, custom, ns)
    deployed_operator()

    def registered(name: str) -> str:
        obj = get(custom, BMH, ns, name) or {}
        provisioning = (obj.get("status") or {}).get("provisioning") or {}
        return provisioning.get("ID", "") if provisioning.get("state") == "available" else ""

    node = {name: eventually(lambda name=name: registered(name), f"{name} registered and available",
                             timeout=TIMEOUT) for name in (FIREWALL_HOST, MACHINE_HOST)}
    cluster_seed, machine_seed = seed("cluster", ns), seed("machine", ns)
    assert cluster_seed["spec"]["firewallSpec"]["providerID"] == f"metalstack://{SEED_FIREWALL_ID}"
    assert machine_seed["spec"]["providerID"] == f"metalstack://{SEED_MACHINE_ID}"
    cluster_seed["spec"]["firewallSpec"]["providerID"] = f"metalstack://{node[FIREWALL_HOST]}"
    machine_seed["spec"]["providerID"] = f"metalstack://{node[MACHINE_HOST]}"
    custom.create_namespaced_custom_object(*CLUSTER[:2], ns, CLUSTER[2], copy.deepcopy(cluster_seed))
    custom.create_namespaced_custom_object(*MACHINE[:2], ns, MACHINE[2], copy.deepcopy(machine_seed))
    try:
        # The cluster: its node network (a /24 of the super-network), the endpoint as given, owned by its Cluster.
        cluster = eventually(lambda: ready(custom, CLUSTER, ns, "metal-stack-cluster"), "the cluster ready",
                             timeout=TIMEOUT)
        capi_cluster = custom.get_namespaced_custom_object(*CAPI, ns, "clusters", "metal-stack-cluster")
        assert [(o["kind"], o["name"], o["uid"]) for o in cluster["metadata"]["ownerReferences"]] == [
            ("Cluster", "metal-stack-cluster", capi_cluster["metadata"]["uid"])]
        assert CLUSTER_FINALIZER in cluster["metadata"]["finalizers"]
        assert cluster["status"]["nodeNetwork"] == "10.8.0.0/24"
        assert cluster["spec"]["controlPlaneEndpoint"] == cluster_seed["spec"]["controlPlaneEndpoint"]
        assert cluster["status"]["firewall"] == "metal-stack-cluster-firewall"

        # The firewall: made of the cluster's firewallSpec, on the host it pins, provisioned.
        firewall = eventually(lambda: ready(custom, FIREWALL, ns, "metal-stack-cluster-firewall"),
                              "the firewall ready", timeout=TIMEOUT)
        assert [(o["kind"], o["name"], o.get("controller")) for o in firewall["metadata"]["ownerReferences"]] == [
            ("MetalStackCluster", "metal-stack-cluster", True)]
        assert FIREWALL_FINALIZER in firewall["metadata"]["finalizers"]
        assert firewall["spec"] == cluster_seed["spec"]["firewallSpec"]
        assert firewall["metadata"]["annotations"]["metal3.io/BareMetalHost"] == f"{ns}/{FIREWALL_HOST}"
        addresses = {a["type"]: a["address"] for a in firewall["status"]["addresses"]}
        assert addresses["InternalIP"] == "10.8.0.1"  # the node network's gateway

        # The machine: on the host it pins, in the node network, with its Machine's bootstrap data.
        machine = eventually(lambda: ready(custom, MACHINE, ns, "metal-stack-machine"), "the machine ready",
                             timeout=TIMEOUT)
        capi_machine = custom.get_namespaced_custom_object(*CAPI, ns, "machines", "cp-0")
        assert [(o["kind"], o["name"], o["uid"]) for o in machine["metadata"]["ownerReferences"]] == [
            ("Machine", "cp-0", capi_machine["metadata"]["uid"])]
        assert MACHINE_FINALIZER in machine["metadata"]["finalizers"]
        assert machine["spec"]["providerID"] == machine_seed["spec"]["providerID"]  # pinned: kept as written
        assert machine["spec"]["userData"] == {"name": "cp-0-bootstrap", "namespace": ns}
        assert [a["type"] for a in machine["status"]["addresses"]] == ["InternalIP", "Hostname", "InternalDNS"]
        addresses = {a["type"]: a["address"] for a in machine["status"]["addresses"]}
        assert addresses["InternalIP"].startswith("10.8.0.") and addresses["InternalIP"] != "10.8.0.1"
        assert addresses["Hostname"] == addresses["InternalDNS"] == "metal-stack-machine"
        assert condition(machine, "MachineReady")["status"] == "True"
        held = custom.get_namespaced_custom_object(*BMH[:2], ns, BMH[2], MACHINE_HOST)
        assert held["status"]["provisioning"]["state"] == "provisioned"
        assert held["spec"]["consumerRef"]["name"] == "metal-stack-machine"
        assert held["spec"]["image"]["url"] == "http://images.example/ubuntu-cloud-init-20.04.qcow2"
        for what, name in ((CLUSTER, "metal-stack-cluster"), (MACHINE, "metal-stack-machine"),
                           (FIREWALL, "metal-stack-cluster-firewall")):
            eventually(lambda what=what, name=name: condition(get(custom, what, ns, name) or {}, "Successful")
                       .get("status") == "True", f"a successful reconcile of {name}")

        # Deleted, the machine and the cluster give everything back: hosts deprovisioned and free, addresses,
        # prefixes, the node network, the firewall, the Secrets they made.
        custom.delete_namespaced_custom_object(*MACHINE[:2], ns, MACHINE[2], "metal-stack-machine")
        custom.delete_namespaced_custom_object(*CLUSTER[:2], ns, CLUSTER[2], "metal-stack-cluster")
        # Upstream's order: the cluster waits for its machine (which it knows through its Machine's clusterName)
        # before it deletes its firewall.
        early = []

        def gone() -> bool:
            left = {name: get(custom, what, ns, name) is not None for what, name in (
                (MACHINE, "metal-stack-machine"), (FIREWALL, "metal-stack-cluster-firewall"),
                (CLUSTER, "metal-stack-cluster"))}
            if left["metal-stack-machine"] and not left["metal-stack-cluster-firewall"]:
                early.append(left)
            return not any(left.values())

        eventually(gone, "the machine, the firewall and the cluster gone", timeout=TIMEOUT, interval=0.2)
        assert not early, "the firewall went before the machine"

        def freed() -> bool:
            return all(h["status"]["provisioning"]["state"] == "available" and "consumerRef" not in h["spec"]
                       and "image" not in h["spec"] for h in items(custom, BMH, ns))

        eventually(freed, "both hosts deprovisioned and free", timeout=TIMEOUT)
        assert items(custom, (*IPAM, "ipclaims"), ns) == []
        assert items(custom, (*IPAM, "ipaddresses"), ns) == []
        assert items(custom, (*IPAM, "ipprefixes"), ns) == []
        assert items(custom, (*IPAM, "ipprefixclaims"), ns) == []
        assert [p["metadata"]["name"] for p in items(custom, (*IPAM, "ippools"), ns)] == ["internet-vagrant-lab"]
        eventually(lambda: (custom.get_namespaced_custom_object(*IPAM, ns, "ipprefixpools", "vagrant-super")
                            .get("status") or {}).get("allocated") == 0, "no prefix of the super-network allocated")
        secrets = {s.metadata.name for s in core.list_namespaced_secret(ns).items}
        assert secrets == {"vagrant-bmc", "cp-0-bootstrap"}, secrets
    finally:
        for what, name in ((CLUSTER, "metal-stack-cluster"), (FIREWALL, "metal-stack-cluster-firewall"),
                           (MACHINE, "metal-stack-machine")):  # what a failure needs to be understood
            print(name, json.dumps((get(custom, what, ns, name) or {}).get("status"), indent=1))
