"""HostClaims of kind libvirt on a real SQLite store, served by a fixture hypervisor: bound at once to a machine
of their own whose hardware the HardwareData shows before it exists; the machine made from the claim's image and
own Secrets once it has them, powered as poweredOn says, rebooted on request; deleted (only one the claim made)
on release. The status is a bare-metal claim's, with virtualMachine for bareMetalHost."""
from __future__ import annotations

import json

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import hostclaim as hc
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.virtual_machine import (
    MachineSize,
    hardware,
    mac_addresses,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.harness.fixture_machines import FixtureMachines, Made
from tests.unit.module_utils.hosts.test_hostclaim import IMAGE, TENANT, claim, condition, secret

API = "metal3.io/v1alpha1"
MACHINE = f"{TENANT}.vm-0"
NETWORK = {"links": [{"id": "nic0", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:01"}], "networks": [],
           "services": []}


@pytest.fixture
def store(tmp_path):
    with LocalStore(str(tmp_path / "store.db")) as opened:
        yield opened


@pytest.fixture
def machines():
    return FixtureMachines()


def step(store, ref, machines, times=1):
    for _time in range(times):
        result = hc.reconcile_host_claim(store, ref, machines=machines)
    return result


def vm_claim(store, name="vm-0", **spec):
    return claim(store, name, kind="libvirt", args={"cpus": "2", "memory": "1Gi", "disk": "4Gi", "nics": "2"},
                 **spec)


def test_a_claim_without_an_image_is_bound_to_its_machine_with_hardware_data_before_the_machine_exists(
        store, machines):
    ref = vm_claim(store, failureDomain="az-b")
    result = step(store, ref, machines)
    obj = store.get(ref)
    assert (result.phase, result.host, result.state, result.error) == ("bound", f"{TENANT}/{MACHINE}", "available", "")
    assert obj["status"]["virtualMachine"] == {"namespace": TENANT, "name": MACHINE}
    assert "bareMetalHost" not in obj["status"]
    assert condition(obj, "Associated")["reason"] == "VirtualMachineAssociated"
    assert condition(obj, "Ready")["status"] == "True"  # available, nothing to deploy: as a bare-metal claim
    macs = mac_addresses(obj["metadata"]["uid"], 2)
    hardware_data = store.get(Ref(API, "HardwareData", "vm-0", TENANT))
    assert hardware_data["spec"]["hardware"] == hardware(MachineSize(2, 1024, 4 * 1024 ** 3, 2), macs, "vm-0")
    assert hardware_data["metadata"]["labels"] == {"infrastructure.cluster.x-k8s.io/failure-domain": "az-b"}
    assert hardware_data["metadata"]["annotations"] == {hc.BOOT_MAC_ANNOTATION: macs[0]}
    assert machines.writes() == []
    # What reads a host through the claim (a Metal3Machine in HostClaim mode) sees the machine.
    view = hc.host_view(store, obj)
    assert view["metadata"]["name"] == MACHINE
    assert [nic["name"] for nic in view["status"]["hardware"]["nics"]] == ["enp1s0", "enp2s0"]


def test_an_image_makes_the_machine_from_the_claims_own_secrets_and_powers_it_on(store, machines):
    secret(store, "user-data", value="#cloud-config\n")
    secret(store, "network-data", networkData=json.dumps(NETWORK))
    secret(store, "meta-data", metaData="local-hostname: vm-zero\n")
    ref = vm_claim(store, image=IMAGE, userData={"name": "user-data"}, networkData={"name": "network-data"},
                   metaData={"name": "meta-data"})
    result = step(store, ref, machines)
    made = machines.machines[MACHINE]
    uid = store.get(ref)["metadata"]["uid"]
    wanted = (uid, MachineSize(2, 1024, 4 * 1024 ** 3, 2), IMAGE, True)
    assert (made.owner, made.size, made.image, made.running) == wanted
    assert made.macs == mac_addresses(uid, 2)
    assert made.config_drive["user_data"] == "#cloud-config\n"
    assert made.config_drive["network_data"] == NETWORK
    assert made.config_drive["meta_data"]["local-hostname"] == "vm-zero"
    assert made.config_drive["meta_data"]["uuid"] == uid
    assert (result.phase, result.state, result.requeue_after, result.error) == ("provisioned", "provisioned", None,
                                                                                "")
    status = store.get(ref)["status"]
    assert (status["state"], status["poweredOn"]) == ("provisioned", True)
    assert condition(store.get(ref), "Ready")["status"] == "True"
    # Level-based: a second step changes nothing.
    writes = list(machines.writes())
    again = step(store, ref, machines)
    assert (again.changed, machines.writes()) == (False, writes)


def test_power_follows_powered_on_and_a_reboot_request_is_one_reboot(store, machines):
    ref = vm_claim(store, image=IMAGE)
    step(store, ref, machines)
    store.patch(ref, {"spec": {"poweredOn": False}})
    step(store, ref, machines)
    assert machines.machines[MACHINE].running is False
    assert store.get(ref)["status"]["poweredOn"] is False
    store.patch(ref, {"spec": {"poweredOn": True}, "metadata": {"annotations": {"reboot.metal3.io": ""}}})
    step(store, ref, machines, times=2)
    assert [c for c in machines.writes() if c[0] == "reboot"] == [("reboot", MACHINE)]
    assert "reboot.metal3.io" not in (store.get(ref)["metadata"].get("annotations") or {})


def test_release_deletes_the_machine_and_the_hardware_data(store, machines):
    ref = vm_claim(store, image=IMAGE)
    step(store, ref, machines)
    store.delete(ref)
    result = step(store, ref, machines)
    assert result.phase == "deleted"
    assert machines.machines == {}
    assert store.get_if_exists(ref) is None
    assert store.get_if_exists(Ref(API, "HardwareData", "vm-0", TENANT)) is None


def test_a_machine_of_that_name_made_by_someone_else_is_left_alone(store, machines):
    machines.machines[MACHINE] = Made("another-uid", MachineSize(1, 512, 1 << 30, 1), [], {}, {}, running=True)
    ref = vm_claim(store, image=IMAGE)
    result = step(store, ref, machines)
    assert result.phase == "failed"
    assert "exists and was not made by this claim" in result.error
    store.delete(ref)
    step(store, ref, machines)
    assert machines.machines[MACHINE].owner == "another-uid"  # neither changed nor deleted
    assert machines.writes() == []


def test_a_secret_that_is_missing_stops_the_claim_naming_the_field(store, machines):
    ref = vm_claim(store, image=IMAGE, userData={"name": "nowhere"})
    result = step(store, ref, machines)
    assert result.error == f"spec.userData: Secret {TENANT}/nowhere not found"
    assert machines.machines == {}
    assert condition(store.get(ref), "Ready")["reason"] == "VirtualMachineFailed"


def test_a_controller_without_libvirt_says_it_serves_no_such_claims(store):
    ref = vm_claim(store)
    result = step(store, ref, None)
    assert result.phase == "failed"
    assert "this controller serves no HostClaims of kind libvirt" in result.error


def test_an_unreachable_hypervisor_is_waited_for_and_nothing_is_lost(store, machines):
    ref = vm_claim(store, image=IMAGE)
    step(store, ref, machines)
    machines.down = True
    result = step(store, ref, machines)
    assert (result.error, result.requeue_after) == ("", hc.UNREACHABLE_WAIT)
    assert "failed to connect" in result.message
    assert store.get(ref)["status"]["virtualMachine"]["name"] == MACHINE
    machines.down = False
    assert step(store, ref, machines).phase == "provisioned"


def test_dry_run_makes_nothing(store, machines):
    ref = vm_claim(store, image=IMAGE)
    result = hc.reconcile_host_claim(store, ref, dry_run=True, machines=machines)
    assert result.changed
    assert machines.writes() == []
