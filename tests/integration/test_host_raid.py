"""spec.raid of a host on Ironic's fake hardware (a ``fake://`` BMC), a real Ironic, the engine as the bastion's
modules and the operator call it, on each store backend (the RAID recorded in the host's status, null lists and all).

Ironic's fake RAID interface takes a node's target RAID configuration but has no RAID clean steps, and fake hardware
has no agent for the agent's RAID interface, so that what this can show is what the host sends, and what it does
when the cleaning cannot run:

- Ironic holds the target RAID configuration upstream would send for the volumes (read back from the node), and
  software volumes switch the node to the agent's RAID interface;
- the host stops preparing with a preparation error in Ironic's own words: the node does not support the clean step;
- the spec's RAID removed, the host goes back to available (hardware volumes recorded are kept, as upstream's
  controller keeps them, and no cleaning is asked for).

Software RAID applied for real, on a guest with two disks, is the KVM lab's (docs/hosts.md, RAID).
"""
from __future__ import annotations

import uuid
from typing import Any

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.core.waiting import wait_until
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import baremetalhost as bmh
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import Ironic, IronicOptions
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.provisioner import ironic_provisioners
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store

VOLUMES = [{"name": "root", "level": "1", "sizeGibibytes": 100, "rotational": False},
           {"name": "data", "level": "5", "numberOfPhysicalDisks": 3}]
# What upstream sends Ironic for VOLUMES: sizes in GiB or "MAX", disk types from rotational; the first volume is not
# marked the root volume, the host having root device hints.
TARGET = {"logical_disks": [
    {"size_gb": 100, "raid_level": "1", "volume_name": "root", "disk_type": "ssd"},
    {"size_gb": "MAX", "raid_level": "5", "volume_name": "data", "number_of_physical_disks": 3}]}


@pytest.fixture
def client(ironic, monkeypatch) -> Ironic:
    for key, value in ironic.env.items():
        monkeypatch.setenv(key, value)
    return Ironic(IronicOptions(cloud=ironic.cloud))


def make_host(store: Store, namespace: str, name: str, **spec: Any) -> Ref:
    store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{name}-bmc", "namespace": namespace},
                  "stringData": {"username": "admin", "password": "Bmc-pa55word"}})
    mac = "52:54:00:" + ":".join(f"{b:02x}" for b in uuid.uuid4().bytes[:3])
    store.create({"apiVersion": bmh.API, "kind": bmh.KIND, "metadata": {"name": name, "namespace": namespace},
                  "spec": {"online": False, "bootMACAddress": mac, "inspectionMode": "disabled",
                           "bmc": {"address": f"fake://{name}", "credentialsName": f"{name}-bmc"}, **spec}})
    return Ref(bmh.API, bmh.KIND, name, namespace)


def until(store: Store, client: Ironic, ref: Ref, reached: Any, timeout: float = 120) -> bmh.HostStep:
    """Reconcile the host until ``reached`` of its step (and the host as stored) holds."""
    provisioners = ironic_provisioners(client)

    def verdict(step: bmh.HostStep) -> bool | None:
        return True if reached(step, store.get(ref)) else None

    # Not the backoff of a failure: this test looks again soon, as a change of the spec makes the operator do.
    last, ok = wait_until(lambda: bmh.reconcile_host(store, provisioners, ref), verdict, timeout, lambda _: 1.0)
    assert ok, f"{ref}: {last.state} {last.error} {last.message}"
    return last


def test_hardware_raid_reaches_ironic_and_a_cleaning_fake_hardware_cannot_run_is_a_preparation_error(
        store, namespace, client):
    ref = make_host(store, namespace, "raid-0", raid={"hardwareRAIDVolumes": VOLUMES},
                    rootDeviceHints={"deviceName": "/dev/sda"})
    node_name = f"{namespace}~raid-0"

    failed = until(store, client, ref, lambda step, host: host["status"].get("errorType") == "preparation error")
    status = store.get(ref)["status"]
    node = client.get_node(node_name)
    assert node is not None
    assert client.target_raid_config(node) == TARGET
    assert node["raid_interface"] == "fake"  # hardware RAID keeps the driver's own interface
    # The cleaning started (the RAID is recorded: the hardware volumes are kept after the failure) and failed in
    # Ironic's words, which the host shows as upstream's does: its fake RAID interface has neither step.
    assert failed.state == "preparing" and status["operationalStatus"] == "error"
    assert status["errorMessage"] == (
        f"Cannot clean node {node['id']}: "
        "node does not support this clean step: {'interface': 'raid', 'step': 'delete_configuration', 'args': {}}; "
        "node does not support this clean step: {'interface': 'raid', 'step': 'create_configuration', 'args': {}}")
    assert status["provisioning"]["raid"] == {"hardwareRAIDVolumes": VOLUMES, "softwareRAIDVolumes": None}

    # The RAID removed from the spec: the hardware volumes are kept (upstream's controller keeps them: the target
    # is sent again, no cleaning is asked for), the software ones are to be none, and the host is available again.
    store.patch(ref, {"spec": {"raid": None}})
    until(store, client, ref, lambda step, host: step.state == "available" and not host["status"].get("errorType"))
    status = store.get(ref)["status"]
    assert status["provisioning"]["raid"] == {"hardwareRAIDVolumes": VOLUMES, "softwareRAIDVolumes": []}
    assert status["operationalStatus"] == "OK"
    node = client.get_node(node_name)
    assert (node["provision_state"], client.target_raid_config(node)) == ("manageable", TARGET)


def test_software_raid_switches_the_node_to_the_agents_raid_interface_with_a_root_volume(store, namespace, client):
    ref = make_host(store, namespace, "raid-1", raid={"softwareRAIDVolumes": [
        {"level": "1", "rootVolume": True, "sizeGibibytes": 10,
         "physicalDisks": [{"deviceName": "/dev/vda"}, {"deviceName": "/dev/vdb"}]},
        {"level": "0"}]})
    node_name = f"{namespace}~raid-1"

    until(store, client, ref, lambda step, host: host["status"].get("errorType") == "preparation error", timeout=60)
    status = store.get(ref)["status"]
    node = client.get_node(node_name)
    assert node is not None
    assert node["raid_interface"] == "agent"  # software volumes are the agent's
    # The root volume is marked; the disks go as upstream's hints.
    assert client.target_raid_config(node) == {"logical_disks": [
        {"size_gb": 10, "raid_level": "1", "controller": "software", "is_root_volume": True,
         "physical_disks": [{"name": "s== /dev/vda"}, {"name": "s== /dev/vdb"}]},
        {"size_gb": "MAX", "raid_level": "0", "controller": "software", "is_root_volume": False}]}
    # Fake hardware has no agent: none of upstream's three steps can run.
    assert status["errorMessage"] == (
        f"Cannot clean node {node['id']}: "
        "node does not support this clean step: {'interface': 'raid', 'step': 'delete_configuration', 'args': {}}; "
        "node does not support this clean step: {'interface': 'deploy', 'step': 'erase_devices_metadata', "
        "'args': {}}; "
        "node does not support this clean step: {'interface': 'raid', 'step': 'create_configuration', 'args': {}}")

    # Removed: the software volumes are to be none; after the failure nothing is known to be there to remove, so
    # nothing is cleaned (upstream's rule), and the host is available again.
    store.patch(ref, {"spec": {"raid": None}})
    until(store, client, ref, lambda step, host: step.state == "available" and not host["status"].get("errorType"))
    status = store.get(ref)["status"]
    assert status["provisioning"]["raid"] == {"hardwareRAIDVolumes": None, "softwareRAIDVolumes": []}
    assert status["provisioning"]["rootDeviceHints"] == {}  # no root volume any more: the hints (none) again
