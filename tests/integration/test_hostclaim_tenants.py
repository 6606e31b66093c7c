"""HostClaims end to end against a real Ironic (fake-hardware), on both backends: the demo's six hosts in an
infrastructure namespace whose HostDeployPolicies admit tenant-a (by name) and tenant-b (by label); the tenants'
claims bind, provision with their image and data, show their host's state, power, addresses and hardware; a
tenant-c claim stays pending with the policy's reason; a deleted claim's host is deprovisioned and bound by the
next pending claim. Ten claims racing from ten ansible-playbook processes for the six hosts. And a tenant's
cluster whose Metal3Machines run in HostClaim mode."""
from __future__ import annotations

import base64
import json
import secrets
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.machines import (
    MachineSet,
    converge,
    ensure_machines,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.compute.baremetal import copy_name
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref, secret_values
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.hostclaims import hostclaim as hc
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import IronicOptions
from tests.harness.demo import demo_objects
from tests.harness.fixture_machines import FixtureMachines
from tests.integration.hostclaim_world import policy, seed_infrastructure
from tests.integration.playbook_runs import REPO
from tests.integration.test_cloud_init_reads_network_data import AZ_A, AZ_B, read, seed_machine

API = "metal3.io/v1alpha1"
TENANT_LABEL = "metal3.baremetal/tenant"
IMAGE = {"url": "http://images.example/debian.qcow2", "checksum": "0" * 64, "checksumType": "sha256"}
USER_DATA = "#cloud-config\nhostname: from-the-claim\n"


@pytest.fixture
def world(backend: str, store_options: dict[str, Any], ironic: Any, monkeypatch: pytest.MonkeyPatch,
          request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """Namespaces infra (the demo's six hosts, registered and available; a policy admitting tenant-a by name and
    one admitting namespaces with this test's tenant label), tenant-a, tenant-b (so labelled) and tenant-c."""
    for key, value in ironic.env.items():
        monkeypatch.setenv(key, value)
    roles = ("infra", "tenant-a", "tenant-b", "tenant-c")
    # The label's value is this test's own: a policy of another test on the same cluster must not admit tenant-b.
    label = secrets.token_hex(4)
    if backend == "kubernetes":
        from kubernetes import client

        cluster = request.getfixturevalue("kube_cluster")
        ns = {role: cluster.new_namespace(role) for role in roles}
        client.CoreV1Api(cluster.api_client()).patch_namespace(ns["tenant-b"],
                                                               {"metadata": {"labels": {TENANT_LABEL: label}}})
    else:
        suffix = secrets.token_hex(3)
        ns = {role: f"{role}-{suffix}" for role in roles}
    with open_store(store_options) as store:
        if backend == "local":
            store.create({"apiVersion": "v1", "kind": "Namespace",
                          "metadata": {"name": ns["tenant-b"], "labels": {TENANT_LABEL: label}}})
        for role in ("tenant-a", "tenant-b", "tenant-c"):
            store.create({"apiVersion": "v1", "kind": "Secret",
                          "metadata": {"name": "cloud-init", "namespace": ns[role]},
                          "data": {"userData": base64.b64encode(USER_DATA.encode()).decode()}})
    options = IronicOptions(cloud=ironic.cloud)
    seed_infrastructure(store_options, options, ns["infra"], [
        policy("tenant-a", ns["infra"], names=[ns["tenant-a"]]),
        policy("labelled-b", ns["infra"], hasLabels=[{"name": TENANT_LABEL, "value": label}])])
    yield {"ns": ns, "options": options, "open": lambda: open_store(store_options)}


def make_claim(world: dict[str, Any], tenant: str, name: str) -> Ref:
    namespace = world["ns"][tenant]
    with world["open"]() as store:
        store.create({"apiVersion": API, "kind": "HostClaim", "metadata": {"name": name, "namespace": namespace},
                      "spec": {"poweredOn": True, "image": IMAGE, "userData": {"name": "cloud-init"},
                               "hostSelector": {"matchLabels": {"metal3.baremetal/demo": "true"}}}})
    return Ref(API, "HostClaim", name, namespace)


def test_tenants_an_infrastructure_policy_admits_get_hosts_and_others_wait(world):
    ns = world["ns"]
    admitted = [make_claim(world, tenant, f"{tenant}-{i}") for tenant in ("tenant-a", "tenant-b") for i in range(2)]
    refused = make_claim(world, "tenant-c", "tenant-c-0")

    steps, reached = hc.converge_claims(world["open"], world["options"], admitted, "provisioned", 240)
    assert reached, [s.summary() for s in steps]
    assert len({s.host for s in steps}) == 4 and all(s.host.startswith(ns["infra"] + "/") for s in steps)
    with world["open"]() as store:
        for step in steps:
            claim = store.get(Ref.of(step.obj))
            host = store.get(Ref(API, "BareMetalHost", step.host.split("/")[1], ns["infra"]))
            assert claim["status"]["state"] == "provisioned" and claim["status"]["poweredOn"] is True
            assert claim["status"]["bareMetalHost"] == {"namespace": ns["infra"], "name": host["metadata"]["name"]}
            assert {"type": "Hostname", "address": host["metadata"]["name"]} in claim["status"]["addresses"]
            hardware = store.get(Ref(API, "HardwareData", claim["metadata"]["name"], claim["metadata"]["namespace"]))
            assert hardware["spec"]["hardware"]["nics"] == host["status"]["hardware"]["nics"]
            copy_ref = host["spec"]["userData"]
            assert copy_ref["namespace"] == ns["infra"]
            copied = store.get(Ref("v1", "Secret", copy_ref["name"], ns["infra"]))
            assert base64.b64decode(copied["data"]["userData"]).decode() == USER_DATA
            assert host["spec"]["image"] == IMAGE and host["spec"]["online"] is True

    pending = hc.converge_claims(world["open"], world["options"], [refused])[0][0]
    assert pending.phase == "pending" and pending.message == f"no HostDeployPolicy admits namespace {ns['tenant-c']}"

    again = hc.converge_claims(world["open"], world["options"], [*admitted, refused])[0]
    assert not [s.summary() for s in again if s.changed]  # a second run changes nothing

    # A deleted claim's host is deprovisioned, freed, and taken by the next pending claim of another tenant.
    late = make_claim(world, "tenant-b", "tenant-b-late")
    extra = [make_claim(world, "tenant-a", f"tenant-a-extra-{i}") for i in range(2)]
    assert all(s.host for s in hc.converge_claims(world["open"], world["options"], extra)[0])  # six hosts held
    assert hc.converge_claims(world["open"], world["options"], [late])[0][0].phase == "pending"
    freed = steps[0].host
    with world["open"]() as store:
        store.delete(admitted[0])
    gone, deleted = hc.converge_claims(world["open"], world["options"], [admitted[0]], "deleted", 240)
    assert deleted, [s.summary() for s in gone]
    with world["open"]() as store:
        host = store.get(Ref(API, "BareMetalHost", freed.split("/")[1], ns["infra"]))
        assert host["status"]["provisioning"]["state"] == "available" and "consumerRef" not in host["spec"]
        assert "image" not in host["spec"] and host["spec"]["online"] is False
        assert store.get_if_exists(Ref(API, "HardwareData", admitted[0].name, admitted[0].namespace)) is None
        assert store.get_if_exists(Ref("v1", "Secret", copy_name(freed.split("/")[1], "userData"),
                                       ns["infra"])) is None
    assert hc.converge_claims(world["open"], world["options"], [late])[0][0].host == freed


def test_ten_claims_from_ten_processes_race_for_six_hosts(world, store_options, tmp_path: Path):
    claims = [make_claim(world, "tenant-a" if i % 2 else "tenant-b", f"racer-{i}") for i in range(10)]
    playbook = tmp_path / "claim.yml"
    playbook.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - metal3.baremetal.hostclaim:\n"
        "        name: '{{ claim }}'\n        namespace: '{{ claim_namespace }}'\n"
        "      module_defaults:\n        group/metal3.baremetal.all: '{{ store }}'\n")
    env = {"ANSIBLE_COLLECTIONS_PATH": str(REPO / "build" / "collections"), "ANSIBLE_PYTHON_INTERPRETER":
           sys.executable, "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
           "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"}
    store = {k: v for k, v in store_options.items() if k in ("backend", "store_path", "kubeconfig")}
    runs = [subprocess.Popen([str(Path(sys.executable).parent / "ansible-playbook"), str(playbook), "-e",
                              json.dumps({"claim": ref.name, "claim_namespace": ref.namespace, "store": store})],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for ref in claims]
    for run in runs:
        output = run.communicate(timeout=600)[0]
        assert run.returncode == 0, output
    with world["open"]() as reader:
        hosts = reader.list(API, "BareMetalHost", world["ns"]["infra"])
        bound = {c.name: (reader.get(c).get("status") or {}).get("bareMetalHost") for c in claims}
    consumers = [h["spec"]["consumerRef"]["name"] for h in hosts if h["spec"].get("consumerRef")]
    assert len(consumers) == 6 and not [c for c, n in Counter(consumers).items() if n > 1]
    holders = {name: host for name, host in bound.items() if host}
    assert len(holders) == 6 and len({h["name"] for h in holders.values()}) == 6
    assert sorted(holders) == sorted(consumers)  # each claim's record agrees with its host's


def test_a_tenant_cluster_in_host_claim_mode_runs_on_infrastructure_hosts(world):
    """The demo's cluster (per-failure-domain data templates, bond + VLANs) in tenant-a, its Metal3Machines in
    HostClaim mode: provisioned on infra's hosts, their network_data rendered from the claimed hosts."""
    ns, tenant = world["ns"], world["ns"]["tenant-a"]
    with world["open"]() as store:
        for obj in demo_objects(tenant, 0, ("cluster.yaml",)):
            store.create(obj)
        ensure_machines(store, MachineSet("cp", tenant, "my-cluster", "my-cluster-controlplane", 3, True,
                                          "my-cluster-userdata"))
        ensure_machines(store, MachineSet("wk", tenant, "my-cluster", "my-cluster-workers", 2, False,
                                          "my-cluster-userdata"))
    steps, ready = converge(world["open"], world["options"], tenant, None, ("ready",), 300, host_claim_mode=True)
    assert ready, [s.summary() for s in steps]
    machines = {s.summary()["name"]: s.summary() for s in steps}
    assert len({m["host"] for m in machines.values()}) == 5
    with world["open"]() as store:
        for name, machine in machines.items():
            host_ns, _slash, host_name = machine["host"].partition("/")
            assert host_ns == ns["infra"]
            host = store.get(Ref(API, "BareMetalHost", host_name, host_ns))
            assert host["status"]["provisioning"]["state"] == "provisioned"
            claim = store.get(Ref(API, "HostClaim", name, tenant))
            assert host["spec"]["consumerRef"] == {"apiVersion": API, "kind": "HostClaim", "name": name,
                                                   "namespace": tenant,
                                                   "uid": claim["metadata"]["annotations"]["metal3.baremetal/claim-id"]}
            assert claim["status"]["bareMetalHost"] == {"namespace": host_ns, "name": host_name}
            assert machine["provider_id"] == f"metal3://{tenant}/{host_name}/{name}"
            domain = host["metadata"]["labels"]["infrastructure.cluster.x-k8s.io/failure-domain"]
            network = secret_values(store.get(Ref("v1", "Secret", f"{name}-networkdata", tenant)))["networkData"]
            octet = "11" if domain == "az-a" else "21"  # the template of the host's own failure domain
            assert f"vlan_link: bond1\n  vlan_id: {octet}" in network and "bond_miimon: 100" in network
            ips = [a["address"] for a in machine["addresses"] if a["type"] == "InternalIP"]
            assert ips[0].startswith(f"192.168.{octet}.") and ips[1].startswith(f"192.168.{int(octet) + 1}.")
            # and cloud-init's own code reads it as it reads a direct host's: the bond of the claimed host's NICs
            nics = {nic["mac"]: nic["name"] for nic in host["status"]["hardware"]["nics"]}
            macs = tuple(sorted(nics, key=nics.__getitem__))
            assert read(yaml.safe_load(network), nics) == seed_machine(AZ_A if domain == "az-a" else AZ_B, macs,
                                                                       f"{ips[0]}/24", f"{ips[1]}/24")
            copied = host["spec"]["networkData"]
            assert copied["namespace"] == host_ns
            assert secret_values(store.get(Ref("v1", "Secret", copied["name"], host_ns)))["networkData"] == network

    again, ready = converge(world["open"], world["options"], tenant, None, ("ready",), 60, host_claim_mode=True)
    assert ready and not [s.summary() for s in again if s.changed]

    with world["open"]() as store:
        ensure_machines(store, MachineSet("cp", tenant, "my-cluster", "my-cluster-controlplane", 0, True))
        ensure_machines(store, MachineSet("wk", tenant, "my-cluster", "my-cluster-workers", 0))
    steps, gone = converge(world["open"], world["options"], tenant, None, ("deleted",), 300, host_claim_mode=True)
    assert gone, [s.summary() for s in steps]
    with world["open"]() as store:
        assert store.list(API, "HostClaim", tenant) == []
        for host in store.list(API, "BareMetalHost", ns["infra"]):
            assert "consumerRef" not in host["spec"] and "image" not in host["spec"]
            assert host["status"]["provisioning"]["state"] == "available"


def test_a_hybrid_cluster_has_its_control_plane_on_hosts_and_its_workers_on_virtual_machines(world):
    """The demo's cluster in tenant-a with its workers' template of kind libvirt (upstream's hybrid-cluster
    design): the control plane's HostClaims bind infra's hosts (provisioned by Ironic), the workers' are served by
    virtual machines (a fixture hypervisor here; the lab boots real ones, test_lab_provisioning.py); each worker's
    network_data is rendered from its machine's hardware by the template of its failure domain, and cloud-init's
    own code reads the bond of the machine's two NICs from it. Scaled to nothing, the machines are deleted."""
    ns, tenant = world["ns"], world["ns"]["tenant-a"]
    machines = FixtureMachines()
    objects = demo_objects(tenant, 0, ("cluster.yaml",))
    # The demo's data templates name its hosts' NICs (eno1, eno2); a virtual machine's are enp1s0, enp2s0: the
    # workers' templates are the same but for those names (the lab's servers and machines share theirs, and one
    # set of templates: test_lab_provisioning.py).
    for template in [o for o in objects if o["kind"] == "Metal3DataTemplate"]:
        text = json.dumps(template).replace('"eno1"', '"enp1s0"').replace('"eno2"', '"enp2s0"')
        objects.append(json.loads(text.replace('"cp-net-', '"vm-net-')))
    with world["open"]() as store:
        for obj in objects:
            if obj["kind"] == "Metal3MachineTemplate" and obj["metadata"]["name"] == "my-cluster-workers":
                obj = json.loads(json.dumps(obj).replace('"cp-net-', '"vm-net-'))
            elif obj["kind"] == "Metal3MachineTemplate":  # a template may name its class too
                obj["spec"]["template"]["spec"]["kind"] = "baremetal"
            store.create(obj)
        ensure_machines(store, MachineSet("cp", tenant, "my-cluster", "my-cluster-controlplane", 2, True,
                                          "my-cluster-userdata"))
        # The class chosen per machine set, over its template's.
        ensure_machines(store, MachineSet("wk", tenant, "my-cluster", "my-cluster-workers", 2, False,
                                          "my-cluster-userdata", "libvirt", {"nics": "2", "memory": "1Gi"}))
    steps, ready = converge(world["open"], world["options"], tenant, None, ("ready",), 300, machines=machines)
    assert ready, [(s.summary()["name"], s.phase, s.message) for s in steps if not s.ready]
    summaries = {s.summary()["name"]: s.summary() for s in steps}
    assert Counter(m["host_class"] for m in summaries.values()) == {"baremetal": 2, "libvirt": 2}
    with world["open"]() as store:
        for name, machine in summaries.items():
            claim = store.get(Ref(API, "HostClaim", name, tenant))
            domain = machine["failure_domain"]
            if machine["host_class"] == "baremetal":
                assert claim["status"]["bareMetalHost"]["namespace"] == ns["infra"]
                continue
            vm_name = f"{tenant}.{name}"
            assert claim["spec"]["kind"] == "libvirt" and claim["status"]["virtualMachine"]["name"] == vm_name
            assert machine["host"] == f"{tenant}/{vm_name}"
            made = machines.machines[vm_name]
            assert made.running and made.size.nics == 2 and made.size.memory_mib == 1024
            network = secret_values(store.get(Ref("v1", "Secret", f"{name}-networkdata", tenant)))["networkData"]
            assert made.config_drive["network_data"] == yaml.safe_load(network)  # what the machine boots with
            octet = "11" if domain == "az-a" else "21"
            ips = [a["address"] for a in machine["addresses"] if a["type"] == "InternalIP"]
            assert ips[0].startswith(f"192.168.{octet}.") and ips[1].startswith(f"192.168.{int(octet) + 1}.")
            nics = {mac: f"enp{i + 1}s0" for i, mac in enumerate(made.macs)}
            seed = seed_machine(AZ_A if domain == "az-a" else AZ_B, (made.macs[0], made.macs[1]), f"{ips[0]}/24",
                                f"{ips[1]}/24")
            assert read(yaml.safe_load(network), nics) == {
                fact.replace("eno1", "enp1s0").replace("eno2", "enp2s0") for fact in seed}
    assert {m["failure_domain"] for m in summaries.values() if m["host_class"] == "libvirt"} == {"az-a", "az-b"}

    with world["open"]() as store:
        ensure_machines(store, MachineSet("cp", tenant, "my-cluster", "my-cluster-controlplane", 0, True))
        ensure_machines(store, MachineSet("wk", tenant, "my-cluster", "my-cluster-workers", 0))
    steps, gone = converge(world["open"], world["options"], tenant, None, ("deleted",), 300, machines=machines)
    assert gone, [s.summary() for s in steps]
    assert machines.machines == {}
    with world["open"]() as store:
        assert store.list(API, "HostClaim", tenant) == []
