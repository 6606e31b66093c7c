"""The metal-stack provider on both stores (SQLite, kube-apiserver): the seed's cluster gets its node network, its
firewall and (when its endpoint is empty) a public address; machines get a host of their type in their partition,
or the pinned one, an address of the node network and their Machine's bootstrap data; deletion frees everything in
upstream's order. Hosts change state by status writes."""
from __future__ import annotations

import ipaddress

import pytest
import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref, secret_values
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.cluster import reconcile_metalstack_cluster
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.firewall import (
    reconcile_metalstack_firewall,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.machine import reconcile_metalstack_machine
from tests.harness.nft import check_ruleset
from tests.integration.metal_stack_world import (
    BMH_API,
    IPAM_API,
    PINNED_FIREWALL,
    PINNED_MACHINE,
    capi_cluster,
    capi_machine,
    partition,
    seed,
    set_state,
)

INFRA = "infrastructure.cluster.x-k8s.io"
NS = ""  # this test's namespace (the fixture's), set by the autouse fixture below


@pytest.fixture(autouse=True)
def _namespace(namespace):
    global NS
    NS = namespace


def cluster_ref(name="metal-stack-cluster"):
    return Ref(f"{INFRA}/v1alpha3", "MetalStackCluster", name, NS)


def machine_ref(name):
    return Ref(f"{INFRA}/v1alpha3", "MetalStackMachine", name, NS)


def firewall_ref(name="metal-stack-cluster-firewall"):
    return Ref(f"{INFRA}/v1alpha4", "MetalStackFirewall", name, NS)


def provision(store, step):
    """The host a step holds, moved to provisioned as Ironic would."""
    namespace, name = step.host.split("/")
    set_state(store, Ref(BMH_API, "BareMetalHost", name, namespace), "provisioned")


def seeded(store):
    partition(store, NS)
    capi_cluster(store, "metal-stack-cluster", NS)
    store.create(seed("cluster", NS))
    return reconcile_metalstack_cluster(store, cluster_ref())


def test_the_seeds_cluster_gets_its_node_network_and_firewall_and_is_ready(store):
    step = seeded(store)
    assert step.ready and step.error == "", step.message
    cluster = store.get(cluster_ref())
    assert cluster["status"]["ready"] is True
    owners = [(o["kind"], o["name"]) for o in cluster["metadata"]["ownerReferences"]]
    assert owners == [("Cluster", "metal-stack-cluster")]
    assert cluster["status"]["nodeNetwork"] == "10.8.0.0/24"
    assert cluster["spec"]["nodeNetworkID"] == "metal-stack-cluster-node-network"  # upstream writes it back
    assert cluster["spec"]["controlPlaneEndpoint"] == {"host": "100.255.254.1", "port": 6443}  # given: kept
    pool = store.get(Ref(IPAM_API, "IPPool", "metal-stack-cluster-node-network", NS))
    assert pool["spec"]["pools"] == [{"subnet": "10.8.0.0/24", "gateway": "10.8.0.1"}]
    firewall = store.get(firewall_ref())
    assert firewall["spec"]["providerID"] == f"metalstack://{PINNED_FIREWALL}"
    assert reconcile_metalstack_cluster(store, cluster_ref()).changed is False


def test_the_firewall_lands_on_its_pinned_host_with_its_rule_set(store):
    seeded(store)
    step = reconcile_metalstack_firewall(store, firewall_ref())
    assert step.host == f"{NS}/server-0" and not step.ready, step.message
    provision(store, step)
    step = reconcile_metalstack_firewall(store, firewall_ref())
    assert step.ready, step.message
    firewall = store.get(firewall_ref())
    assert {a["type"]: a["address"] for a in firewall["status"]["addresses"]}["InternalIP"] == "10.8.0.1"
    assert "ExternalIP" in {a["type"] for a in firewall["status"]["addresses"]}
    host = store.get(Ref(BMH_API, "BareMetalHost", "server-0", NS))
    user_data = secret_values(store.get(Ref("v1", "Secret", host["spec"]["userData"]["name"], NS)))["value"]
    assert user_data.startswith("#cloud-config")
    ruleset = next(f["content"] for f in yaml.safe_load(user_data)["write_files"] if f["path"] == "/etc/nftables.conf")
    assert "policy drop" in ruleset and "10.8.0.0/24" in ruleset
    check_ruleset(ruleset)  # what the firewall will apply, as Debian's nft reads it


def test_an_empty_endpoint_gets_an_address_of_the_public_network(store):
    partition(store, NS)
    cluster = seed("cluster", NS)
    cluster["spec"]["controlPlaneEndpoint"] = {"host": ""}
    del cluster["spec"]["firewallSpec"]
    store.create(cluster)
    step = reconcile_metalstack_cluster(store, cluster_ref())
    assert step.ready, step.message
    endpoint = store.get(cluster_ref())["spec"]["controlPlaneEndpoint"]
    assert ipaddress.ip_address(endpoint["host"]) in ipaddress.ip_network("100.255.254.0/24")
    assert endpoint["port"] == 443  # upstream's default


def test_machines_get_hosts_of_their_type_the_pinned_one_and_node_addresses(store):
    seeded(store)
    capi_machine(store, "cp-0", NS, "metal-stack-cluster", "metal-stack-machine", "cp-0-bootstrap")
    store.create(seed("machine", NS))
    step = reconcile_metalstack_machine(store, machine_ref("metal-stack-machine"))
    assert step.host == f"{NS}/server-1", step.message  # the seed pins it
    provision(store, step)
    step = reconcile_metalstack_machine(store, machine_ref("metal-stack-machine"))
    assert step.ready, step.message
    machine = store.get(machine_ref("metal-stack-machine"))
    assert [(o["kind"], o["name"]) for o in machine["metadata"]["ownerReferences"]] == [("Machine", "cp-0")]
    assert machine["spec"]["userData"] == {"name": "cp-0-bootstrap", "namespace": NS}
    addresses = {a["type"]: a["address"] for a in machine["status"]["addresses"]}
    assert ipaddress.ip_address(addresses["InternalIP"]) in ipaddress.ip_network("10.8.0.0/24")
    assert addresses["InternalIP"] != "10.8.0.1"  # the gateway is the firewall's
    assert addresses["Hostname"] == addresses["InternalDNS"] == "metal-stack-machine"
    host = store.get(Ref(BMH_API, "BareMetalHost", "server-1", NS))
    assert host["spec"]["image"]["url"] == "http://images.example/ubuntu-cloud-init-20.04.qcow2"
    network = secret_values(store.get(Ref("v1", "Secret", host["spec"]["networkData"]["name"], NS)))["networkData"]
    assert addresses["InternalIP"] in network and "10.8.0.1" in network  # the default route via the firewall


def test_a_pinned_host_that_is_taken_or_missing_makes_the_machine_wait_saying_so(store):
    seeded(store)
    reconcile_metalstack_firewall(store, firewall_ref())  # takes the firewall's pinned server-0
    machine = seed("machine", NS)
    machine["metadata"]["labels"] = {"cluster.x-k8s.io/cluster-name": "metal-stack-cluster"}
    machine["spec"]["providerID"] = f"metalstack://{PINNED_FIREWALL}"
    store.create(machine)
    step = reconcile_metalstack_machine(store, machine_ref("metal-stack-machine"))
    assert step.host == "" and step.requeue_after, step.message
    assert "the pinned host server-0 is consumed by MetalStackFirewall" in step.message
    store.patch(machine_ref("metal-stack-machine"), {"spec": {"providerID": "metalstack://no-such-server"}})
    step = reconcile_metalstack_machine(store, machine_ref("metal-stack-machine"))
    assert "the pinned host no-such-server does not exist" in step.message
    condition = next(c for c in store.get(machine_ref("metal-stack-machine"))["status"]["conditions"]
                     if c["type"] == "MachineReady")
    assert condition["status"] == "False" and "no-such-server" in condition["message"]


def test_a_machine_type_no_host_matches_waits_with_the_reason(store):
    seeded(store)
    machine = seed("machine", NS)
    machine["metadata"]["labels"] = {"cluster.x-k8s.io/cluster-name": "metal-stack-cluster"}
    del machine["spec"]["providerID"]
    machine["spec"]["machineType"] = "c1-large-x86"
    store.create(machine)
    step = reconcile_metalstack_machine(store, machine_ref("metal-stack-machine"))
    assert step.host == "" and step.requeue_after
    assert "no available host in failure domain vagrant matches" in step.message
    assert "server-2 has 2 cores" in step.message, step.message


def test_deleting_the_cluster_frees_machines_firewall_address_and_network_in_that_order(store):
    partition(store, NS)
    cluster = seed("cluster", NS)
    cluster["spec"]["controlPlaneEndpoint"] = {}
    store.create(cluster)
    assert reconcile_metalstack_cluster(store, cluster_ref()).ready
    machine = seed("machine", NS)
    machine["metadata"]["labels"] = {"cluster.x-k8s.io/cluster-name": "metal-stack-cluster"}
    store.create(machine)
    for reconcile, ref in ((reconcile_metalstack_firewall, firewall_ref()),
                           (reconcile_metalstack_machine, machine_ref("metal-stack-machine"))):
        provision(store, reconcile(store, ref))
        assert reconcile(store, ref).ready
    store.delete(cluster_ref())
    seen = []

    def left():
        claims = {c["metadata"]["name"] for c in store.list(IPAM_API, "IPClaim", NS)}
        return {"machine": bool(store.get_if_exists(machine_ref("metal-stack-machine"))),
                "firewall": bool(store.get_if_exists(firewall_ref())),
                "address": "metal-stack-cluster-control-plane" in claims,
                "network": bool(store.list(IPAM_API, "IPPrefix", NS))}

    step = reconcile_metalstack_cluster(store, cluster_ref())
    assert step.message == "waiting for 1 MetalStackMachines to go" and all(left().values())
    store.delete(machine_ref("metal-stack-machine"))
    for _round in range(20):
        for reconcile, ref in ((reconcile_metalstack_machine, machine_ref("metal-stack-machine")),
                               (reconcile_metalstack_cluster, cluster_ref())):
            step = reconcile(store, ref)
            for host in store.list(BMH_API, "BareMetalHost", NS):  # Ironic deprovisions what is cleared
                if host["status"]["provisioning"]["state"] == "provisioned" and not host["spec"].get("image"):
                    set_state(store, Ref.of(host), "available")
            seen.append([k for k, v in left().items() if not v])
        if store.get_if_exists(cluster_ref()) is None:
            break
    assert store.get_if_exists(cluster_ref()) is None, step.message
    order = ["machine", "firewall", "address", "network"]
    # whenever looked at, what is gone is the head of upstream's order: nothing goes before what precedes it
    assert all(gone == order[:len(gone)] for gone in seen), seen
    assert seen[-1] == order


def test_unpinned_machines_leave_the_hosts_others_pin_alone(store):
    seeded(store)  # the firewall, not reconciled yet, pins server-0
    names = [f"m{i}" for i in range(6)]
    for name in names:
        machine = seed("machine", NS)
        machine["metadata"].update(name=name, labels={"cluster.x-k8s.io/cluster-name": "metal-stack-cluster"})
        del machine["spec"]["providerID"]
        store.create(machine)
    steps = [reconcile_metalstack_machine(store, machine_ref(name)) for name in names]
    hosts = [step.host for step in steps if step.host]
    assert len(hosts) == 5 and len(set(hosts)) == 5 and f"{NS}/server-0" not in hosts, hosts
    waiting = next(step for step in steps if not step.host)
    assert "server-0 is pinned by MetalStackFirewall metal-stack-cluster-firewall" in waiting.message, waiting.message
    assert reconcile_metalstack_firewall(store, firewall_ref()).host == f"{NS}/server-0"


def test_upstreams_spellings_size_metal_provider_ids_node_network_id_and_control_plane_ip(store):
    partition(store, NS)
    store.create({"apiVersion": IPAM_API, "kind": "IPPool", "metadata": {"name": "given-nodes", "namespace": NS},
                  "spec": {"namePrefix": "given-nodes", "prefix": 24,
                           "pools": [{"subnet": "10.99.0.0/24", "gateway": "10.99.0.1"}]}})
    cluster = seed("cluster", NS)
    cluster["spec"].update(controlPlaneEndpoint={}, controlPlaneIP="100.255.254.77", nodeNetworkID="given-nodes")
    del cluster["spec"]["firewallSpec"]
    store.create(cluster)
    step = reconcile_metalstack_cluster(store, cluster_ref())
    assert step.ready, step.message
    cluster = store.get(cluster_ref())
    assert cluster["spec"]["controlPlaneEndpoint"] == {"host": "100.255.254.77", "port": 443}
    assert cluster["status"]["nodeNetworkPool"] == "given-nodes" and cluster["status"]["nodeNetwork"] == "10.99.0.0/24"
    assert store.list(IPAM_API, "IPPrefixClaim", NS) == []  # the given network is used, none allocated
    machine = seed("machine", NS)
    machine["metadata"]["labels"] = {"cluster.x-k8s.io/cluster-name": "metal-stack-cluster"}
    machine["spec"] = {"image": "ubuntu-cloud-init-20.04", "size": "v1-small-x86",
                       "providerID": f"metal://vagrant/{PINNED_MACHINE}"}
    store.create(machine)
    step = reconcile_metalstack_machine(store, machine_ref("metal-stack-machine"))
    assert step.host == f"{NS}/server-1", step.message
    provision(store, step)
    step = reconcile_metalstack_machine(store, machine_ref("metal-stack-machine"))
    assert step.ready and step.obj["status"]["addresses"][0]["address"].startswith("10.99.0.")


def test_an_image_missing_from_the_catalogue_is_named_and_nothing_is_claimed(store):
    seeded(store)
    machine = seed("machine", NS)
    machine["metadata"]["labels"] = {"cluster.x-k8s.io/cluster-name": "metal-stack-cluster"}
    machine["spec"]["image"] = "no-such-image"
    store.create(machine)
    step = reconcile_metalstack_machine(store, machine_ref("metal-stack-machine"))
    assert step.error.startswith(f"spec.image: 'no-such-image' is not an image of ConfigMap {NS}/metal-stack-images")
    assert step.host == "" and store.get(machine_ref("metal-stack-machine"))["status"]["failureMessage"] == step.error
    assert not any(h["spec"].get("consumerRef") for h in store.list(BMH_API, "BareMetalHost", NS))
    assert store.list(IPAM_API, "IPClaim", NS) == []
