"""HostClaims of kind libvirt on a real SQLite store, served by a fixture hypervisor: bound at once to a machine
of their own whose hardware the HardwareData shows before it exists; the machine made from the claim's image and
own Secrets once it has them, powered as poweredOn says, rebooted on request; deleted (only one the claim made)
on release. The status is a bare-metal claim's, with virtualMachine for bareMetalHost."""
from __future__ import annotations

import hashlib
import json
import subprocess
import time

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.compute.base import UNREACHABLE_WAIT
from ansible_collections.metal3.baremetal.plugins.module_utils.compute.libvirt import (
    LibvirtOptions,
    MachineLimits,
    MachineSize,
    hardware,
    mac_addresses,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.hostclaims import hostclaim as hc
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.harness.fixture_machines import FixtureMachines, Made, VirshlessMachines
from tests.harness.http_files import ServedFiles
from tests.unit.module_utils.hostclaims.test_hostclaim import IMAGE, TENANT, claim, condition, secret

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


def test_a_power_hold_keeps_the_machine_off_until_it_is_removed(store, machines):
    """reboot.metal3.io/<key> on the claim, as CAPM3's remediation writes it: the machine is off while it is there."""
    ref = vm_claim(store, image=IMAGE)
    step(store, ref, machines)
    hold = "reboot.metal3.io/metal3-remediation-7d9a"
    store.patch(ref, {"metadata": {"annotations": {hold: '{"mode":"hard","force":false}'}}})
    step(store, ref, machines)
    assert machines.machines[MACHINE].running is False
    assert store.get(ref)["status"]["poweredOn"] is False
    store.patch(ref, {"metadata": {"annotations": {hold: None}}})
    step(store, ref, machines)
    assert machines.machines[MACHINE].running is True


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
    assert (result.error, result.requeue_after) == ("", UNREACHABLE_WAIT)
    assert "failed to connect" in result.message
    assert store.get(ref)["status"]["virtualMachine"]["name"] == MACHINE
    machines.down = False
    assert step(store, ref, machines).phase == "provisioned"


def test_dry_run_makes_nothing(store, machines):
    ref = vm_claim(store, image=IMAGE)
    result = hc.reconcile_host_claim(store, ref, dry_run=True, machines=machines)
    assert result.changed
    assert machines.writes() == []


# -- what a tenant may not make the controller do (issue 30) ---------------------------------------------------
# Written straight to the raw store, as on a cluster, where no webhook admits HostClaims: the reconcile holds.


@pytest.fixture
def served():
    files = ServedFiles()
    yield files
    files.close()


def real_machines(tmp_path, allowed=("127.0.0.1",), **options):
    """The real LibvirtMachines (fetch, checks, qemu-img), virsh answered from a dict."""
    return VirshlessMachines(LibvirtOptions(bridge="br0", storage_dir=str(tmp_path / "vms"), **options),
                             OutboundPolicy.of(list(allowed)))


def failed_naming(store, ref, result, field):
    assert result.phase == "failed"
    assert result.error.startswith(f"{field}: ") or f"; {field}: " in result.error, result.error
    ready = condition(store.get(ref), "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "VirtualMachineFailed")
    assert ready["message"] == result.error
    return json.dumps(store.get(ref))


@pytest.mark.xdist_group("virtual-lab")
@pytest.mark.parametrize("header", ["backing file", "data file"])
def test_an_image_naming_another_file_fails_the_claim_and_no_layer_is_made(store, tmp_path, served, header):
    """Issue 30, item 1: the real qemu-img makes the tenant's image; over it the machine's disk would be that file."""
    victim = tmp_path / "vms" / f"{TENANT}.other.qcow2"  # another tenant's disk, beside this claim's
    victim.parent.mkdir(parents=True)
    victim.write_bytes(b"ANOTHER TENANT'S DATA" * 100)
    evil = tmp_path / "evil.qcow2"
    options = ["-b", str(victim), "-F", "raw"] if header == "backing file" else \
        ["-o", f"data_file={tmp_path / 'data.raw'}"]
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", *options, str(evil), "2G"], check=True)
    served.files["/evil.qcow2"] = evil.read_bytes()
    image = {"url": served.url("/evil.qcow2"), "checksum": hashlib.sha256(evil.read_bytes()).hexdigest(),
             "checksumType": "sha256", "format": "qcow2"}
    ref = vm_claim(store, image=image)
    machines = real_machines(tmp_path)
    result = step(store, ref, machines)
    shown = failed_naming(store, ref, result, "spec.image")
    assert str(victim) not in shown and "ANOTHER TENANT" not in shown
    assert not (tmp_path / "vms" / f"{MACHINE}.qcow2").exists()
    assert list((tmp_path / "vms" / "images").iterdir()) == []
    assert machines.get(MACHINE) is None


@pytest.mark.parametrize(("image", "field", "why"), [
    ({"url": "http://images.example/debian.qcow2", "checksum": "file:///etc/passwd"}, "spec.image.checksum",
     "'file:///etc/passwd' is not an http or https URL"),
    ({"url": "file:///etc/passwd", "checksum": "0" * 64}, "spec.image.url",
     "'file:///etc/passwd' is not an http or https URL"),
    ({"url": "http://images.example/debian.qcow2", "checksum": "http://127.0.0.1:9/SHA256SUMS"},
     "spec.image.checksum", "names a loopback or link-local host"),
    ({"url": "http://169.254.169.254/latest/user-data", "checksum": "0" * 64}, "spec.image.url",
     "names a loopback or link-local host"),
])
def test_a_url_the_controller_must_not_fetch_fails_the_claim_naming_the_field(store, tmp_path, image, field, why):
    """Issue 30, item 2: on the raw store (no admission); no option allows loopback here."""
    ref = vm_claim(store, image={**image, "format": "qcow2"})
    result = step(store, ref, real_machines(tmp_path, allowed=()))
    shown = failed_naming(store, ref, result, field)
    assert why in result.error
    assert "root:" not in shown
    assert not (tmp_path / "vms" / f"{MACHINE}.qcow2").exists()


def test_a_url_the_controller_must_not_fetch_is_refused_before_the_hypervisor_is_asked_anything(store, machines):
    """On a cluster no webhook checks a claim's URLs, and the operator may run where libvirt is down or absent:
    the claim names the field whatever the hypervisor would answer."""
    ref = vm_claim(store, image={"url": "http://images.example/debian.qcow2", "checksum": "file:///etc/passwd",
                                 "format": "qcow2"})
    machines.down = True
    result = step(store, ref, machines)
    failed_naming(store, ref, result, "spec.image.checksum")
    assert "not an http or https URL" in result.error
    assert machines.calls == []


def test_a_checksum_file_with_junk_is_never_echoed_into_the_status(store, tmp_path, served):
    served.files["/SHA256SUMS"] = b"root:x:0:0:root:/root:/bin/bash\ntoken=s3cr3t debian.qcow2\n"
    ref = vm_claim(store, image={"url": "http://images.example/debian.qcow2", "checksum": served.url("/SHA256SUMS"),
                                 "format": "qcow2"})
    result = step(store, ref, real_machines(tmp_path))
    shown = failed_naming(store, ref, result, "spec.image.checksum")
    assert "names no md5/sha256/sha512 checksum for 'debian.qcow2'" in result.error
    assert "root:" not in shown and "s3cr3t" not in shown


def test_an_image_that_does_not_match_its_checksum_does_not_tell_what_it_hashes_to(store, tmp_path, served):
    served.files["/debian.qcow2"] = b"the contents of some file"
    ref = vm_claim(store, image={"url": served.url("/debian.qcow2"), "checksum": "1" * 64, "format": "qcow2"})
    result = step(store, ref, real_machines(tmp_path))
    shown = failed_naming(store, ref, result, "spec.image.checksum")
    assert hashlib.sha256(b"the contents of some file").hexdigest() not in shown


ABSURD = [("memory", "1e5000"), ("memory", "1e999999"), ("memory", "1Ei"), ("disk", "1Pi"), ("cpus", "1" * 5000)]


@pytest.mark.parametrize(("key", "value"), ABSURD)
def test_an_absurd_size_fails_the_claim_naming_the_arg_fast(store, machines, key, value):
    """Issue 30, item 4: no traceback, no CPU burnt, nothing made."""
    ref = vm_claim(store)
    store.patch(ref, {"spec": {"args": {key: value}}})
    started = time.process_time()
    result = step(store, ref, machines)
    assert time.process_time() - started < 2
    failed_naming(store, ref, result, f"spec.args.{key}")
    assert machines.writes() == []


@pytest.mark.parametrize(("args", "field", "why"), [
    ({"cpus": "32"}, "spec.args.cpus", "32 is more than this controller serves (libvirt_max_cpus: 16)"),
    ({"memory": "128Gi"}, "spec.args.memory", "128Gi is more than this controller serves (libvirt_max_memory: 64Gi)"),
    ({"disk": "1Ti"}, "spec.args.disk", "1Ti is more than this controller serves (libvirt_max_disk: 512Gi)"),
])
def test_a_machine_larger_than_the_operator_allows_fails_naming_the_arg_and_the_limit(store, machines, args, field,
                                                                                      why):
    ref = claim(store, "vm-0", kind="libvirt", args=args, image=IMAGE)
    result = step(store, ref, machines)
    failed_naming(store, ref, result, field)
    assert result.error == f"{field}: {why}"
    assert machines.writes() == []
    machines.limits = MachineLimits(cpus=64, memory=1 << 40, disk=2 << 40)  # the operator allows more
    assert step(store, ref, machines).phase == "provisioned"
