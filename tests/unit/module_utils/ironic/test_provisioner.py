"""The Ironic provisioner: what each operation asks of Ironic in each node state, and what it answers; and
Ironic's view of a BareMetalHost's spec and inspection data."""
from __future__ import annotations

import inspect
from typing import Any

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core import provisioner as seam
from ansible_collections.metal3.baremetal.plugins.module_utils.core.provisioner import POLL, BMCAccess, HostData
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic import provisioner as ironic
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import IronicOptions, IronicRefused

# image, boot mode → instance_info (upstream's mapping of BMH image fields)
INSTANCE_INFO = [
    ({"url": "http://i/os.qcow2", "checksum": "abc", "format": "qcow2"}, None,
     {"image_source": "http://i/os.qcow2", "image_disk_format": "qcow2", "image_checksum": "abc"}),
    ({"url": "http://i/os.img", "checksum": "f" * 64, "checksumType": "sha256"}, "UEFI",
     {"image_source": "http://i/os.img", "image_os_hash_algo": "sha256", "image_os_hash_value": "f" * 64,
      "capabilities": {"boot_mode": "uefi"}}),
    ({"url": "http://i/os.img", "checksum": "http://i/os.img.sha512sum", "checksumType": "sha512"}, "legacy",
     {"image_source": "http://i/os.img", "image_checksum": "http://i/os.img.sha512sum",
      "capabilities": {"boot_mode": "bios"}}),
    ({"url": "http://i/live.iso", "format": "live-iso"}, None, {"boot_iso": "http://i/live.iso"}),
    ({}, None, {}),
]


@pytest.mark.parametrize(("image", "boot_mode", "expected"), INSTANCE_INFO)
def test_instance_info(image, boot_mode, expected):
    assert ironic.instance_info(image, boot_mode) == expected


def test_root_device_hints_use_ironics_names_and_upstreams_operators():
    hints = {"deviceName": "/dev/sda", "serialNumber": "S1", "minSizeGigabytes": 200, "rotational": False,
             "wwnWithExtension": "0x5000"}
    assert ironic.device_hints(hints) == {"name": "s== /dev/sda", "serial": "s== S1", "size": ">= 200",
                                          "rotational": "false", "wwn_with_extension": "s== 0x5000"}
    assert ironic.device_hints({"deviceName": "/dev/disk/by-path/pci-0000:00:05.0"}) == {
        "by_path": "s== /dev/disk/by-path/pci-0000:00:05.0"}
    assert ironic.device_hints(None) == {}


def test_hardware_details_from_an_inventory_and_from_properties():
    inventory = {"inventory": {
        "cpu": {"architecture": "x86_64", "model_name": "Xeon", "frequency": "2400", "count": 16, "flags": ["vmx"]},
        "memory": {"physical_mb": 65536},
        "system_vendor": {"manufacturer": "Acme", "product_name": "R1", "serial_number": "SN"},
        "interfaces": [{"name": "eth0", "mac_address": "52:54:00:00:00:01", "ipv4_address": "10.0.0.5",
                        "speed_mbps": 25000, "pxe_enabled": True}],
        "disks": [{"name": "/dev/sda", "size": 480103981056, "rotational": False, "model": "SSD"}],
        "hostname": "h0"}}
    details = ironic.hardware_details({"properties": {}}, inventory)
    assert details["cpu"] == {"arch": "x86_64", "model": "Xeon", "clockMegahertz": 2400.0, "flags": ["vmx"],
                              "count": 16}
    assert details["ramMebibytes"] == 65536 and details["hostname"] == "h0"
    assert details["nics"][0]["speedGbps"] == 25 and details["nics"][0]["pxe"] is True
    assert details["storage"][0]["sizeBytes"] == 480103981056
    from_properties = ironic.hardware_details({"properties": {"cpus": 4, "memory_mb": 8192, "cpu_arch": "aarch64",
                                                              "local_gb": 10}}, None)
    assert from_properties["cpu"]["count"] == 4 and from_properties["cpu"]["arch"] == "aarch64"
    assert from_properties["storage"] == [{"name": "", "sizeBytes": 10 * 1024 ** 3}]


class RecordingIronic:
    """One node in a given state; every change asked of Ironic is recorded, none is made."""

    def __init__(self, node: dict[str, Any] | None, other: dict[str, Any] | None = None, busy: int = 0,
                 refuse: int | None = None):
        self.node, self.other, self.busy, self.refuse = node, other, busy, refuse
        self.calls: list[str] = []
        self.network_reads = 0

    def _record(self, call: str) -> None:
        if self.refuse is not None:
            raise IronicRefused("Ironic refused: node locked" if self.refuse == 409 else "Ironic refused", self.refuse)
        self.calls.append(call)

    def get_node(self, name_or_id):
        return self.node

    def node_by_mac(self, mac):
        return self.other

    options = IronicOptions()

    def create_node(self, name, driver, driver_info, interfaces, properties, mac, automated_clean,
                    network_data=None):
        self.calls.append(f"create {driver} {interfaces.get('deploy_interface')}")
        self.node = node(provision_state="enroll")
        return self.node

    def patch_node(self, node, changes):
        self._record("patch " + ",".join(sorted(changes)))
        return {**node, **changes}

    def set_provision_state(self, node, target, **kwargs):
        steps = [f"{step['interface']}.{step['step']} {step['args']}" for step in kwargs.get("clean_steps") or []]
        self._record(" ".join([target, *steps]) + (" with a config drive" if "config_drive" in kwargs else ""))

    def set_target_raid_config(self, node, logical_disks):
        self._record(f"target raid {logical_disks}")

    def service(self, node, steps):
        self._record(" ".join(["service", *(f"{step['interface']}.{step['step']} {step['args']}" for step in steps)]))

    def abort(self, node):
        self._record("abort")

    def clear_maintenance(self, node):
        self._record("maintenance off")

    def bios_settings(self, node):
        return node.get("bios") or []

    def firmware_components(self, node):
        return node.get("firmware") or []

    def set_power_state(self, node, target):
        self._record(target)

    def attach_vmedia(self, node, url):
        self._record(f"attach vmedia {url}")

    def detach_vmedia(self, node):
        self._record("detach vmedia")

    def vmedia(self, node):
        return node.get("vmedia") or []

    def history(self, node, limit=20):
        return node.get("history") or []

    def set_maintenance(self, node, reason):
        self._record("maintenance")

    def delete_node(self, node):
        self._record("delete")

    def inventory(self, node):
        return {"inventory": {"cpu": {"count": 8}}}

    def inspection_finished_at(self, node):
        return node.get("inspection_finished_at")

    def network_data(self, node):
        self.network_reads += 1
        return node.get("network_data") or {}

    def take_provisioning_slot(self, limit):
        return self.busy < limit, self.busy


IMAGE = {"url": "http://i/os.img", "checksum": "abc"}
HOST = HostData(BMCAccess("fake://x", "u", "p"), image=IMAGE)
HOST_WITH_MAC = HostData(BMCAccess("fake://x", "u", "p"), boot_mac="52:54:00:00:00:01")
DEPLOYED = {"image_source": IMAGE["url"], "image_checksum": "abc"}
FINISHED = {"inspection_finished_at": "2026-01-01T00:00:00+00:00"}
EMPTY_NETWORK = {"links": [], "networks": [], "services": []}
ONE_LINK = {**EMPTY_NETWORK, "links": [{"id": "eth0", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:01"}]}


# Ironic's BIOS settings with their registry entries (API 1.74's detail), as sushy-tools' libvirt driver has them.
BIOS = [{"name": "ProcTurboMode", "value": "Enabled", "attribute_type": "Enumeration",
         "allowable_values": ["Enabled", "Disabled"], "read_only": False, "lower_bound": None},
        {"name": "NumCores", "value": "10", "attribute_type": "Integer", "lower_bound": 10, "upper_bound": 20,
         "read_only": True},
        {"name": "SysPassword", "value": "", "attribute_type": "Password", "read_only": False}]


TURBO_OFF = {"ProcTurboMode": "Disabled"}
BIOS_UPDATE = {"component": "bios", "url": "http://fw/bios.bin"}
# RAID as the host gives it to prepare: both lists, null where the spec has none
HW_ROOT = {"hardwareRAIDVolumes": [{"name": "root", "level": "1"}], "softwareRAIDVolumes": None}
SW_MIRROR = {"hardwareRAIDVolumes": None, "softwareRAIDVolumes": [{"level": "1"}]}
SW_NONE = {"hardwareRAIDVolumes": None, "softwareRAIDVolumes": []}
HW_KEPT = {"hardwareRAIDVolumes": [{"name": "root", "level": "1"}], "softwareRAIDVolumes": []}
REDFISH = {"driver": "redfish", "raid_interface": "redfish"}


def with_raid(target, actual=None, hints=True, settings=None):
    return lambda p: p.prepare(settings or {}, raid=seam.RAIDPreparation(target, actual, hints))


# Ironic's firmware components (API 1.86), as sushy-tools' libvirt driver has them after a bios update, and what a
# HostFirmwareComponents' status.components keeps of each: bios, bmc and nic:<id> only, empty fields left out.
FIRMWARE = [
    ({"component": "bios", "initial_version": "1.0.0", "current_version": "1.1.0", "last_version_flashed": "1.1.0",
      "updated_at": "2025-06-01T10:00:00+00:00"},
     {"component": "bios", "initialVersion": "1.0.0", "currentVersion": "1.1.0", "lastVersionFlashed": "1.1.0",
      "updatedAt": "2025-06-01T10:00:00+00:00"}),
    ({"component": "bmc", "initial_version": "1.00", "current_version": "1.00", "last_version_flashed": None,
      "updated_at": None},
     {"component": "bmc", "initialVersion": "1.00", "currentVersion": "1.00"}),
    ({"component": "nic:NIC.Slot.1", "initial_version": "22.0", "current_version": "22.0"},
     {"component": "nic:NIC.Slot.1", "initialVersion": "22.0", "currentVersion": "22.0"}),
    ({"component": "cpld", "initial_version": "3", "current_version": "3"}, None),
]


def test_firmware_components_are_bios_bmc_and_nics_in_upstreams_fields():
    entries = [ironic_entry for ironic_entry, ours in FIRMWARE]
    read = ironic.IronicProvisioner(RecordingIronic(node(firmware=entries)), "ns~h", "uuid-1").firmware_components()
    assert read.components == [ours for ironic_entry, ours in FIRMWARE if ours is not None]


def test_firmware_update_step_is_upstreams():
    assert ironic.firmware_update_step([BIOS_UPDATE, {"component": "nic:1", "url": "https://fw/nic.bin"}]) == {
        "interface": "firmware", "step": "update",
        "args": {"settings": [{"component": "bios", "url": "http://fw/bios.bin"},
                              {"component": "nic:1", "url": "https://fw/nic.bin"}]}}


def test_firmware_settings_and_their_schema_from_ironics_bios_settings():
    read = ironic.IronicProvisioner(RecordingIronic(node(bios=BIOS)), "ns~h", "uuid-1").firmware_settings()
    assert read.settings == {"ProcTurboMode": "Enabled", "NumCores": "10", "SysPassword": ""}
    assert read.schema == {
        "ProcTurboMode": {"attribute_type": "Enumeration", "allowable_values": ["Enabled", "Disabled"],
                          "read_only": False},
        "NumCores": {"attribute_type": "Integer", "lower_bound": 10, "upper_bound": 20, "read_only": True},
        "SysPassword": {"attribute_type": "Password", "read_only": False}}


ISO = "http://images.example/data.iso"
# GET /v1/nodes/<id>/vmedia (API 1.93) of a node whose CD holds Ironic's copy of the image.
CD_INSERTED = {"media_types": ["CD", "DVD"], "inserted": True, "image": "http://ironic:6180/redfish/cdrom-uuid-1.iso"}
CD_EMPTY = {"media_types": ["CD", "DVD"], "inserted": False, "image": ""}
ATTACH_FAILED = "Could not attach device cdrom to node uuid-1: HTTP 404 for http://images.example/data.iso"
# The node's history, newest first, as Ironic lists it (its times carry no zone).
HISTORY = [{"created_at": "2026-01-01T10:00:05.123456", "severity": "ERROR", "event": ATTACH_FAILED},
           {"created_at": "2026-01-01T09:00:00", "severity": "ERROR",
            "event": "Could not attach device cdrom to node uuid-1: an older failure"}]


# (the drive, the history, since when an attach is looked for) → attached, the attach's failure
DRIVES = [
    pytest.param([CD_INSERTED], HISTORY, "2026-01-01T10:00:00Z", True, "", id="inserted"),
    pytest.param([CD_EMPTY], HISTORY, "2026-01-01T10:00:00Z", False, ATTACH_FAILED, id="attach-failed-since"),
    pytest.param([CD_EMPTY], HISTORY, "2026-01-01T10:00:06Z", False, "", id="failures-before-the-attach-are-old"),
    pytest.param([CD_EMPTY], HISTORY, "", False, "", id="no-attach-asked"),
    pytest.param([CD_EMPTY], [{"created_at": "2026-01-01T10:00:05", "event": "Node power failure"}],
                 "2026-01-01T10:00:00Z", False, "", id="other-events-are-not-an-attach"),
    pytest.param([], [], "", False, "", id="no-virtual-media"),
]


@pytest.mark.parametrize(("drive", "history", "since", "attached", "attach_error"), DRIVES)
def test_data_image_status_from_the_drive_and_the_nodes_history(drive, history, since, attached, attach_error):
    client = RecordingIronic(node(provision_state="active", vmedia=drive, history=history))
    status = ironic.IronicProvisioner(client, "ns~h", "uuid-1").data_image_status(since)
    assert (status.attached, status.attach_error, status.error, client.calls) == (attached, attach_error, "", [])


def node(**fields: Any) -> dict[str, Any]:
    return {"id": "uuid-1", "name": "ns~h", "provision_state": "manageable", "target_provision_state": None,
            "power_state": "power off", "target_power_state": None, "last_error": None, "maintenance": False,
            "instance_info": {}, "driver": "fake-hardware", "driver_info": {}, "properties": {},
            "deploy_interface": "fake", "boot_interface": "fake", "automated_clean": True, "network_data": None,
            "reservation": None,
            **fields}


def register(provisioner):
    return provisioner.register(HOST_WITH_MAC, False, lambda: None)


def answer(result: seam.ProvisionResult) -> str:
    """done, busy, delayed, failed or failed for good; with what the result adds."""
    word = ("failed" + ("" if result.retry else " for good") if result.error else "delayed" if result.delayed
            else "busy" if result.dirty else "done")
    extras = [name for name in ("started", "rebooted", "credentials_sent") if getattr(result, name, False)]
    if getattr(result, "hardware", None):
        extras.append("hardware")
    return " ".join([word, *extras])


# operation, the node (None: no node), how Ironic answers → what is asked of Ironic, the answer
OPERATIONS = [
    # register
    pytest.param(register, None, {}, ["create fake-hardware fake", "manage"], "busy credentials_sent", id="reg-new"),
    pytest.param(register, None, {"other": node(name="ns~other")}, [], "failed", id="reg-mac-of-another-node"),
    pytest.param(lambda p: p.register(HostData(BMCAccess("wsman://x", "u", "p")), False, lambda: None), None, {},
                 [], "failed for good", id="reg-unreadable-address"),
    pytest.param(register, node(provision_state="enroll", target_provision_state="manageable"), {}, [], "busy",
                 id="reg-enroll-under-way"),
    pytest.param(register, node(provision_state="enroll", last_error="bad credentials"), {}, ["manage"],
                 "failed credentials_sent", id="reg-enroll-failed-is-retried"),
    pytest.param(register, node(provision_state="verifying"), {}, [], "busy", id="reg-verifying"),
    pytest.param(register, node(), {}, [], "done", id="reg-manageable"),
    pytest.param(lambda p: p.register(HOST_WITH_MAC, True, lambda: None), node(), {}, ["patch driver,driver_info"],
                 "done credentials_sent", id="reg-new-credentials"),
    pytest.param(register, node(driver="ipmi"), {}, ["patch driver,driver_info"], "done credentials_sent",
                 id="reg-new-driver"),
    # inspect
    pytest.param(lambda p: p.inspect(False), node(), {}, ["inspect"], "busy started", id="insp-start"),
    pytest.param(lambda p: p.inspect(False), node(provision_state="inspect wait"), {}, [], "busy started",
                 id="insp-waiting"),
    pytest.param(lambda p: p.inspect(False), node(provision_state="inspecting"), {}, [], "busy started",
                 id="insp-running"),
    pytest.param(lambda p: p.inspect(False), node(**FINISHED), {}, [], "done hardware", id="insp-finished"),
    pytest.param(lambda p: p.inspect(True), node(**FINISHED), {}, ["inspect"], "busy started", id="insp-again"),
    pytest.param(lambda p: p.inspect(False), node(provision_state="available"), {}, ["manage"], "busy",
                 id="insp-from-available"),
    pytest.param(lambda p: p.inspect(False), node(provision_state="inspect failed", last_error="x"), {},
                 ["inspect"], "failed started", id="insp-failed-is-retried"),
    pytest.param(lambda p: p.inspect(False), node(boot_interface="ipxe"), {"busy": 20}, [], "delayed",
                 id="insp-no-slot"),
    pytest.param(lambda p: p.inspect(False), node(boot_interface="redfish-virtual-media"), {"busy": 20},
                 ["inspect"], "busy started", id="insp-virtual-media-needs-no-slot"),
    # prepare
    pytest.param(lambda p: p.prepare({}), node(), {}, [], "done", id="prep-manageable"),
    pytest.param(lambda p: p.prepare({}), node(provision_state="inspect wait"), {}, ["abort"], "busy",
                 id="prep-aborts-inspection"),
    pytest.param(lambda p: p.prepare({}), node(provision_state="inspect failed"), {}, ["manage"], "busy",
                 id="prep-after-failed-inspection"),
    pytest.param(lambda p: p.prepare({}), node(provision_state="inspecting"), {}, [], "busy", id="prep-inspecting"),
    pytest.param(lambda p: p.prepare({"ProcTurboMode": "Disabled", "NumCores": 12}), node(bios=BIOS), {},
                 ["clean bios.apply_configuration {'settings': [{'name': 'NumCores', 'value': 12}, "
                  "{'name': 'ProcTurboMode', 'value': 'Disabled'}]}"], "busy started", id="prep-applies-what-differs"),
    pytest.param(lambda p: p.prepare({"ProcTurboMode": "Disabled"}, [BIOS_UPDATE]), node(bios=BIOS), {},
                 ["clean bios.apply_configuration {'settings': [{'name': 'ProcTurboMode', 'value': 'Disabled'}]} "
                  "firmware.update {'settings': [{'component': 'bios', 'url': 'http://fw/bios.bin'}]}"],
                 "busy started", id="prep-settings-then-firmware"),
    pytest.param(lambda p: p.prepare({}, [BIOS_UPDATE]), node(), {},
                 ["clean firmware.update {'settings': [{'component': 'bios', 'url': 'http://fw/bios.bin'}]}"],
                 "busy started", id="prep-firmware-only"),
    pytest.param(lambda p: p.prepare({}, [BIOS_UPDATE]), node(provision_state="clean wait"), {}, [], "busy",
                 id="prep-firmware-under-way"),
    pytest.param(lambda p: p.prepare({"ProcTurboMode": "Enabled", "NumCores": "10"}), node(bios=BIOS), {}, [],
                 "done", id="prep-settings-already-so"),
    pytest.param(lambda p: p.prepare({"ProcTurboMode": "Disabled"}), node(provision_state="clean wait", bios=BIOS),
                 {}, [], "busy", id="prep-cleaning"),
    pytest.param(lambda p: p.prepare({"ProcTurboMode": "Disabled"}),
                 node(provision_state="clean failed", maintenance=True, last_error="invalid value", bios=BIOS), {},
                 ["maintenance off", "manage"], "failed", id="prep-clean-failed-back-to-manageable"),
    # prepare with RAID: the interface, the target RAID configuration, then the clean steps in upstream's order
    pytest.param(with_raid(HW_ROOT), node(**REDFISH), {},
                 ["target raid [{'size_gb': 'MAX', 'raid_level': '1', 'volume_name': 'root'}]",
                  "clean raid.delete_configuration {} raid.create_configuration {}"], "busy started",
                 id="prep-hardware-raid"),
    pytest.param(with_raid(SW_MIRROR, hints=False), node(raid_interface="fake"), {},
                 ["patch raid_interface",
                  "target raid [{'size_gb': 'MAX', 'raid_level': '1', 'controller': 'software', "
                  "'is_root_volume': True}]",
                  "clean raid.delete_configuration {} deploy.erase_devices_metadata {} raid.create_configuration {}"],
                 "busy started", id="prep-software-raid-on-the-agent"),
    pytest.param(with_raid(HW_ROOT, settings=TURBO_OFF), node(bios=BIOS, **REDFISH), {},
                 ["target raid [{'size_gb': 'MAX', 'raid_level': '1', 'volume_name': 'root'}]",
                  "clean raid.delete_configuration {} raid.create_configuration {} bios.apply_configuration "
                  "{'settings': [{'name': 'ProcTurboMode', 'value': 'Disabled'}]}"], "busy started",
                 id="prep-raid-then-bios-in-one-cleaning"),
    pytest.param(with_raid(HW_ROOT), node(provision_state="available", **REDFISH), {}, ["manage"], "busy",
                 id="prep-raid-from-available"),
    pytest.param(with_raid(HW_ROOT), node(provision_state="clean wait", **REDFISH), {}, [], "busy",
                 id="prep-raid-under-way"),
    pytest.param(with_raid(SW_NONE, SW_MIRROR), node(raid_interface="agent"), {},
                 ["clean raid.delete_configuration {} deploy.erase_devices_metadata {}"], "busy started",
                 id="prep-software-raid-removed"),
    pytest.param(with_raid(HW_KEPT), node(**REDFISH), {},
                 ["target raid [{'size_gb': 'MAX', 'raid_level': '1', 'volume_name': 'root'}]"], "done",
                 id="prep-hardware-raid-kept-nothing-to-clean"),
    pytest.param(with_raid(HW_ROOT), node(driver="ipmi", raid_interface="no-raid"), {}, [], "failed for good",
                 id="prep-raid-on-a-driver-without-raid"),
    pytest.param(with_raid({"hardwareRAIDVolumes": [{"name": "a", "level": "1"}, {"name": "a", "level": "0"}]}),
                 node(**REDFISH), {}, [], "failed for good", id="prep-raid-refused-changes-nothing"),
    # service (a provisioned host's firmware settings)
    pytest.param(lambda p: p.service(TURBO_OFF, False), node(provision_state="active", bios=BIOS), {},
                 ["service bios.apply_configuration {'settings': [{'name': 'ProcTurboMode', 'value': 'Disabled'}]}"],
                 "busy started", id="serv-starts"),
    pytest.param(lambda p: p.service({}, False, [BIOS_UPDATE], True), node(provision_state="active"), {},
                 ["service firmware.update {'settings': [{'component': 'bios', 'url': 'http://fw/bios.bin'}]}"],
                 "busy started", id="serv-starts-an-update"),
    pytest.param(lambda p: p.service({}, False, [], True), node(provision_state="service wait"), {}, [], "busy",
                 id="serv-update-sent-waits"),
    pytest.param(lambda p: p.service({}, False, [], True), node(provision_state="active"), {}, [], "done",
                 id="serv-update-sent-is-done"),
    pytest.param(lambda p: p.service(TURBO_OFF, False), node(provision_state="servicing", bios=BIOS), {}, [], "busy",
                 id="serv-under-way"),
    pytest.param(lambda p: p.service(TURBO_OFF, False), node(provision_state="service wait", bios=BIOS), {}, [],
                 "busy", id="serv-waiting"),
    pytest.param(lambda p: p.service({"ProcTurboMode": "Enabled"}, False), node(provision_state="active", bios=BIOS),
                 {}, [], "done", id="serv-nothing-to-apply"),
    pytest.param(lambda p: p.service(TURBO_OFF, False),
                 node(provision_state="service failed", maintenance=True, last_error="x", bios=BIOS), {}, [],
                 "failed", id="serv-failed-is-reported"),
    pytest.param(lambda p: p.service(TURBO_OFF, True),
                 node(provision_state="service failed", maintenance=True, last_error="x", bios=BIOS), {},
                 ["maintenance off"], "busy", id="serv-restart-leaves-maintenance-first"),
    pytest.param(lambda p: p.service(TURBO_OFF, True), node(provision_state="service failed", bios=BIOS), {},
                 ["service bios.apply_configuration {'settings': [{'name': 'ProcTurboMode', 'value': 'Disabled'}]}"],
                 "busy started", id="serv-restarts"),
    pytest.param(lambda p: p.service({}, True), node(provision_state="service failed", bios=BIOS), {}, ["abort"],
                 "busy", id="serv-reverted-by-aborting"),
    pytest.param(lambda p: p.service({}, False), node(provision_state="service wait", bios=BIOS), {}, ["abort"],
                 "busy", id="serv-nothing-asked-any-more-aborts"),
    pytest.param(lambda p: p.service(TURBO_OFF, False), node(provision_state="deploying", bios=BIOS), {}, [],
                 "failed", id="serv-not-from-deploying"),
    # provision
    pytest.param(lambda p: p.provision(HOST, dict), node(), {}, ["provide"], "busy", id="prov-provide"),
    pytest.param(lambda p: p.provision(HOST, dict), node(automated_clean=False), {},
                 ["patch automated_clean", "provide"], "busy", id="prov-provide-cleaning-as-asked"),
    pytest.param(lambda p: p.provision(HOST, dict), node(provision_state="clean wait"), {}, [], "busy",
                 id="prov-cleaning"),
    pytest.param(lambda p: p.provision(HOST, dict), node(provision_state="clean failed", last_error="x"), {},
                 ["manage"], "failed", id="prov-clean-failed"),
    pytest.param(lambda p: p.provision(HOST, dict), node(provision_state="available"), {},
                 ["patch instance_info", "active with a config drive"], "busy", id="prov-deploy"),
    pytest.param(lambda p: p.provision(HOST, dict), node(provision_state="deploy failed", instance_info=DEPLOYED),
                 {}, [], "failed", id="prov-same-image-failed"),
    pytest.param(lambda p: p.provision(HOST, dict),
                 node(provision_state="deploy failed", instance_info={"image_source": "http://i/old.img"}), {},
                 ["patch instance_info", "active with a config drive"], "busy", id="prov-other-image-failed"),
    pytest.param(lambda p: p.provision(HOST, dict), node(provision_state="wait call-back"), {}, [], "busy",
                 id="prov-deploying"),
    pytest.param(lambda p: p.provision(HOST, dict), node(provision_state="active"), {}, [], "done",
                 id="prov-active"),
    pytest.param(lambda p: p.provision(HOST, dict), node(provision_state="rescue"), {}, [], "failed for good",
                 id="prov-unknown-state"),
    # adopt
    pytest.param(lambda p: p.adopt(HOST), node(provision_state="active"), {}, [], "done", id="adopt-active"),
    pytest.param(lambda p: p.adopt(HOST), node(), {}, ["patch instance_info", "adopt"], "busy", id="adopt-start"),
    pytest.param(lambda p: p.adopt(HOST), node(provision_state="adopt failed"), {},
                 ["patch instance_info", "adopt"], "failed", id="adopt-failed-is-retried"),
    pytest.param(lambda p: p.adopt(HOST), node(provision_state="adopting"), {}, [], "busy", id="adopt-running"),
    # deprovision
    pytest.param(lambda p: p.deprovision(True), node(provision_state="active", boot_interface="ipxe"), {},
                 ["deleted"], "busy", id="deprov-start"),
    pytest.param(lambda p: p.deprovision(True), node(provision_state="active", boot_interface="ipxe"),
                 {"busy": 20}, [], "delayed", id="deprov-no-slot"),
    pytest.param(lambda p: p.deprovision(False), node(provision_state="deploy failed"), {},
                 ["patch automated_clean", "deleted"], "busy", id="deprov-without-cleaning"),
    pytest.param(lambda p: p.deprovision(True), node(provision_state="cleaning"), {}, [], "busy",
                 id="deprov-cleaning"),
    pytest.param(lambda p: p.deprovision(True), node(provision_state="clean failed"), {}, ["manage"], "failed",
                 id="deprov-clean-failed"),
    pytest.param(lambda p: p.deprovision(True), node(provision_state="available"), {}, [], "done",
                 id="deprov-done"),
    pytest.param(lambda p: p.deprovision(True), None, {}, [], "done", id="deprov-no-node"),
    # power
    pytest.param(lambda p: p.power(True), node(), {}, ["power on"], "busy", id="power-on"),
    pytest.param(lambda p: p.power(False), node(power_state="power on"), {}, ["power off"], "busy",
                 id="power-off"),
    pytest.param(lambda p: p.power(True), node(power_state="power on"), {}, [], "done", id="power-as-asked"),
    pytest.param(lambda p: p.power(True), node(target_power_state="power on"), {}, [], "busy",
                 id="power-under-way"),
    pytest.param(lambda p: p.power(True, "hard"), node(power_state="power on"), {}, ["rebooting"],
                 "busy rebooted", id="power-reboot"),
    pytest.param(lambda p: p.power(True, "soft"), node(power_state="power on"), {}, ["soft rebooting"],
                 "busy rebooted", id="power-soft-reboot"),
    pytest.param(lambda p: p.power(False), None, {}, [], "done", id="power-no-node"),
    # detach, delete
    pytest.param(lambda p: p.detach(False), node(provision_state="active"), {}, ["maintenance", "delete"], "done",
                 id="detach-active"),
    pytest.param(lambda p: p.detach(False), node(), {}, ["delete"], "done", id="detach-manageable"),
    pytest.param(lambda p: p.detach(False), node(provision_state="wait call-back"), {}, [], "busy",
                 id="detach-waits-for-the-agent"),
    pytest.param(lambda p: p.detach(True), node(provision_state="wait call-back"), {}, ["abort"], "busy",
                 id="forced-detach-aborts"),
    pytest.param(lambda p: p.detach(True), node(provision_state="deploying"), {}, [], "busy",
                 id="detach-waits-while-deploying"),
    pytest.param(lambda p: p.delete(), node(provision_state="active"), {}, ["maintenance", "delete"], "done",
                 id="delete-active"),
    pytest.param(lambda p: p.delete(), node(provision_state="clean failed"), {}, ["delete"], "done",
                 id="delete-clean-failed"),
    pytest.param(lambda p: p.delete(), None, {}, [], "done", id="delete-no-node"),
    # a DataImage in the virtual CD drive
    pytest.param(lambda p: p.attach_data_image(ISO), node(provision_state="active"), {}, [f"attach vmedia {ISO}"],
                 "done", id="data-image-attach"),
    pytest.param(lambda p: p.attach_data_image(ISO), node(provision_state="active"), {"refuse": 409}, [], "busy",
                 id="data-image-attach-to-a-locked-node"),
    pytest.param(lambda p: p.attach_data_image(ISO), node(provision_state="active"), {"refuse": 400}, [], "failed",
                 id="data-image-attach-refused"),
    pytest.param(lambda p: p.detach_data_image(), node(provision_state="active"), {}, ["detach vmedia"], "done",
                 id="data-image-detach"),
    pytest.param(lambda p: p.data_image_status(), node(reservation="conductor-1"), {}, [], "busy",
                 id="data-image-status-of-a-busy-node"),
    pytest.param(lambda p: p.data_image_status(), node(vmedia=[CD_INSERTED]), {}, [], "done",
                 id="data-image-status"),
    # what Ironic refuses
    pytest.param(lambda p: p.power(True), node(), {"refuse": 409}, [], "busy", id="locked-node"),
    pytest.param(lambda p: p.power(True), node(), {"refuse": 400}, [], "failed", id="refused"),
]


@pytest.mark.parametrize(("operation", "found", "ironic_answers", "asked", "expected"), OPERATIONS)
def test_ironic_provisioner(operation, found, ironic_answers, asked, expected):
    client = RecordingIronic(found, **ironic_answers)
    result = operation(ironic.IronicProvisioner(client, "ns~h", "uuid-1" if found else "", limit=20))
    assert (client.calls, answer(result)) == (asked, expected)


def test_a_lock_is_looked_at_again_soon_and_the_power_state_still_read():
    result = ironic.IronicProvisioner(RecordingIronic(node(power_state="power on"), refuse=409), "ns~h",
                                      "uuid-1").power(False)
    assert result.requeue_after == POLL and "locked" in result.message and result.powered_on


@pytest.mark.parametrize(("health", "expected"), [("OK", "OK"), ("Critical", "Critical"), (None, "")])
def test_health_is_the_nodes_as_read_in_the_reconcile(health, expected):
    client = RecordingIronic(node(health=health))
    provisioner = ironic.IronicProvisioner(client, "ns~h", "uuid-1")
    assert provisioner.health() == ""  # nothing read yet: no request of its own
    provisioner.power(False)
    assert (provisioner.health(), client.calls) == (expected, [])


def test_the_ironic_provisioner_has_every_operation_of_the_protocol():
    operations = [name for name in vars(seam.Provisioner) if not name.startswith("_")]
    assert len(operations) == 18
    for name in operations:
        assert inspect.signature(getattr(ironic.IronicProvisioner, name)).parameters.keys() \
            == inspect.signature(getattr(seam.Provisioner, name)).parameters.keys(), name


# BMC address, inspectionMode → the node's inspect interface (None: the driver's own, fake-hardware's)
INSPECT_INTERFACES = [
    ("redfish://bmc/redfish/v1/Systems/1", "", "agent"),
    ("redfish-virtualmedia://bmc/redfish/v1/Systems/1", "agent", "agent"),
    ("redfish-virtualmedia://bmc/redfish/v1/Systems/1", "fast", "redfish"),
    ("idrac-virtualmedia://bmc/redfish/v1/Systems/1", "fast", "idrac-redfish"),
    ("ipmi://bmc:6230", "", "agent"),
    ("fake://x", "", None),
]


@pytest.mark.parametrize(("address", "mode", "expected"), INSPECT_INTERFACES)
def test_the_agent_inspects_unless_inspection_is_fast(address, mode, expected):
    host = HostData(BMCAccess(address, "u", "p"), inspection_mode=mode)
    assert ironic._inspect_interface(host, ironic.driver_for(address, "u", "p")) == expected


KERNEL = {"deploy_kernel": "http://h/ipa.kernel", "deploy_ramdisk": "http://h/ipa.initramfs"}
# BMC address, the Ironic options' deploy images → driver_info's, as upstream's setDeployImage
DEPLOY_IMAGES = [
    ("redfish-virtualmedia://bmc/x", {**KERNEL, "deploy_iso": "http://h/ipa.iso"}, {"deploy_iso": "http://h/ipa.iso"}),
    ("redfish-virtualmedia://bmc/x", KERNEL, KERNEL),
    ("redfish://bmc/x", {**KERNEL, "deploy_iso": "http://h/ipa.iso"}, KERNEL),
    ("ipmi://bmc", {**KERNEL, "deploy_iso": "http://h/ipa.iso"}, KERNEL),
    ("ipmi://bmc", {"deploy_kernel": "http://h/ipa.kernel"}, {}),  # a kernel without its ramdisk boots nothing
    ("ipmi://bmc", {"deploy_iso": "http://h/ipa.iso"}, {}),
    ("fake://x", KERNEL, {}),
]


@pytest.mark.parametrize(("address", "images", "expected"), DEPLOY_IMAGES)
def test_deploy_images_in_driver_info(address, images, expected):
    assert ironic.deploy_images(IronicOptions(**images), ironic.driver_for(address, "u", "p")) == expected


def test_a_new_node_gets_the_deploy_ramdisk_agent_inspection_secure_boot_and_the_preprovisioning_network():
    created = {}

    class Creating(RecordingIronic):
        options = IronicOptions(**KERNEL)

        def create_node(self, name, driver, driver_info, interfaces, properties, mac, automated_clean,
                        network_data=None):
            created.update(driver_info=driver_info, interfaces=interfaces, properties=properties,
                           network_data=network_data)
            return super().create_node(name, driver, driver_info, interfaces, properties, mac, automated_clean)

    network = ONE_LINK
    host = HostData(BMCAccess("redfish-virtualmedia://bmc/redfish/v1/Systems/1", "u", "p"),
                    boot_mode="UEFISecureBoot", preprovisioning_network_data=network)
    ironic.IronicProvisioner(Creating(None), "ns~h", "").register(host, False, lambda: None)
    assert {k: created["driver_info"][k] for k in KERNEL} == KERNEL
    assert created["interfaces"]["inspect_interface"] == "agent"
    assert created["interfaces"]["boot_interface"] == "redfish-virtual-media"
    assert created["properties"]["capabilities"] == "boot_mode:uefi,secure_boot:true"
    assert created["network_data"] == network


def test_secure_boot_is_asked_of_the_deploy_too():
    assert ironic.instance_info(IMAGE, "UEFISecureBoot")["capabilities"] == {"boot_mode": "uefi",
                                                                             "secure_boot": "true"}


def test_a_changed_preprovisioning_network_is_patched_onto_a_registered_node():
    recording = RecordingIronic(node(network_data=EMPTY_NETWORK))
    host = HostData(BMCAccess("fake://x", "u", "p"), preprovisioning_network_data=ONE_LINK)
    ironic.IronicProvisioner(recording, "ns~h", "uuid-1").register(host, False, lambda: None)
    assert recording.calls == ["patch network_data"]


@pytest.mark.parametrize(("state", "on_node", "wanted", "reads", "calls"), [
    ("manageable", EMPTY_NETWORK, EMPTY_NETWORK, 1, []),
    ("available", None, {}, 1, []),
    ("enroll", EMPTY_NETWORK, {}, 1, ["patch network_data", "manage"]),
    ("active", EMPTY_NETWORK, ONE_LINK, 0, []),  # in use: the ramdisk's network is not read
    ("deploying", None, EMPTY_NETWORK, 0, []),
])
def test_the_preprovisioning_network_is_read_and_patched_only_while_the_node_waits(
        state, on_node, wanted, reads, calls):
    recording = RecordingIronic(node(provision_state=state, network_data=on_node))
    host = HostData(BMCAccess("fake://x", "u", "p"), preprovisioning_network_data=wanted)
    ironic.IronicProvisioner(recording, "ns~h", "uuid-1").register(host, False, lambda: None)
    assert (recording.network_reads, recording.calls) == (reads, calls)


PHY = {"id": "nic0", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:01"}
NETWORK = {"id": "prov", "type": "ipv4", "link": "nic0", "network_id": "prov", "ip_address": "172.22.0.200",
           "netmask": "255.255.255.0"}


@pytest.mark.parametrize(("network_data", "gaps"), [
    ({}, ""),
    ({"links": [PHY], "networks": [NETWORK], "services": []}, ""),
    ({"links": [PHY], "networks": [NETWORK]}, "has no 'services'"),
    ({"links": [PHY], "networks": [{k: v for k, v in NETWORK.items() if k != "network_id"}], "services": []},
     "networks[0] has no 'network_id'"),
    ({"links": [{"id": "nic0", "type": "phy"}], "networks": [], "services": []},
     "links[0] has no 'ethernet_mac_address'"),
    ({"links": [PHY, {"id": "v", "type": "vlan", "vlan_link": "nic0"}], "networks": [], "services": []},
     "links[1] has no 'vlan_mac_address'; links[1] has no 'vlan_id'"),
    ({"links": [{"id": "x"}], "networks": [], "services": []}, "links[0] has no 'type'"),
    ({"links": [{"id": "b", "type": "bridge"}], "networks": [], "services": []}, ""),  # not one Ironic checks
])
def test_network_data_gaps_name_what_ironics_schema_requires(network_data, gaps):
    assert ironic.network_data_gaps(network_data) == gaps


def test_preprovisioning_network_data_with_a_gap_is_a_registration_error_before_anything_is_created():
    recording = RecordingIronic(None)
    host = HostData(BMCAccess("redfish-virtualmedia://bmc/redfish/v1/Systems/1", "u", "p"),
                    preprovisioning_network_data={"links": [PHY], "services": [],
                                                  "networks": [{"id": "prov", "type": "ipv4", "link": "nic0"}]})
    result = ironic.IronicProvisioner(recording, "ns~h", "").register(host, False, lambda: None)
    assert result.error == ("spec.preprovisioningNetworkDataName: its networkData networks[0] has no 'network_id', "
                            "which Ironic requires")
    assert not result.retry and recording.calls == []


ISO_IMAGE = seam.PreprovisioningImage(seam.ISO, "http://img/host.iso")
INITRD_IMAGE = seam.PreprovisioningImage(seam.INITRD, "http://img/host.initramfs", "http://img/host.kernel",
                                         "console=ttyS0")
BUILDER = {"build_preprov_image": True}
# BMC address, the Ironic options, the host's PreprovisioningImage → driver_info's deploy ramdisk, as upstream's
# setDeployImage: the host's own image first; none of the options' while they build per-host images.
HOST_DEPLOY_IMAGES = [
    ("redfish-virtualmedia://bmc/x", BUILDER, ISO_IMAGE, {"deploy_iso": "http://img/host.iso"}),
    ("redfish-uefihttp://bmc/x", BUILDER, ISO_IMAGE, {"deploy_iso": "http://img/host.iso"}),
    ("ipmi://bmc", BUILDER, ISO_IMAGE, {}),  # an ISO that the BMC cannot boot
    ("redfish-virtualmedia://bmc/x", BUILDER, INITRD_IMAGE,
     {"deploy_kernel": "http://img/host.kernel", "deploy_ramdisk": "http://img/host.initramfs",
      "kernel_append_params": "%default% console=ttyS0"}),
    ("ipmi://bmc", {**BUILDER, **KERNEL}, seam.PreprovisioningImage(seam.INITRD, "http://img/host.initramfs"),
     {"deploy_kernel": "http://h/ipa.kernel", "deploy_ramdisk": "http://img/host.initramfs"}),
    ("ipmi://bmc", BUILDER, seam.PreprovisioningImage(seam.INITRD, "http://img/host.initramfs"), {}),
    ("ipmi://bmc", {**BUILDER, **KERNEL}, None, {}),  # waiting for its image
    ("fake://x", BUILDER, INITRD_IMAGE,
     {"deploy_kernel": "http://img/host.kernel", "deploy_ramdisk": "http://img/host.initramfs",
      "kernel_append_params": "%default% console=ttyS0"}),
]


@pytest.mark.parametrize(("address", "options", "image", "expected"), HOST_DEPLOY_IMAGES)
def test_the_hosts_preprovisioning_image_in_driver_info(address, options, image, expected):
    assert ironic.deploy_images(IronicOptions(**options), ironic.driver_for(address, "u", "p"), image) == expected


# BMC address, whether the options build per-host images → the formats a host's PreprovisioningImage accepts
IMAGE_FORMATS = [
    ("redfish-virtualmedia://bmc/x", True, ["iso", "initrd"]),
    ("idrac-virtualmedia://bmc/x", True, ["iso", "initrd"]),
    ("redfish-uefihttp://bmc/x", True, ["iso", "initrd"]),
    ("redfish://bmc/x", True, ["initrd"]),
    ("ipmi://bmc", True, ["initrd"]),
    ("fake://x", True, ["initrd"]),
    ("redfish-virtualmedia://bmc/x", False, None),
    ("nonsense://bmc", True, None),  # registering says what is wrong with it
]


@pytest.mark.parametrize(("address", "build", "expected"), IMAGE_FORMATS)
def test_preprovisioning_image_formats_follow_the_boot_method(address, build, expected):
    class Building(RecordingIronic):
        options = IronicOptions(build_preprov_image=build)

    provisioner = ironic.IronicProvisioner(Building(node()), "ns~h", "uuid-1")
    assert provisioner.preprovisioning_image_formats(HostData(BMCAccess(address, "u", "p"))) == expected


# The node's driver_info, the host's image → what registering patches (the deploy ramdisk's keys replaced together)
REGISTER_WITH_IMAGE = [
    ({}, INITRD_IMAGE, ["patch driver,driver_info"]),
    ({"deploy_kernel": "http://img/host.kernel", "deploy_ramdisk": "http://img/host.initramfs",
      "kernel_append_params": "%default% console=ttyS0"}, INITRD_IMAGE, []),
    ({"deploy_kernel": "http://img/host.kernel", "deploy_ramdisk": "http://img/old.initramfs"}, INITRD_IMAGE,
     ["patch driver,driver_info"]),
    ({"deploy_kernel": "http://img/host.kernel", "deploy_ramdisk": "http://img/host.initramfs",
      "kernel_append_params": "%default% console=ttyS0", "deploy_iso": "http://img/old.iso"}, INITRD_IMAGE,
     ["patch driver,driver_info"]),
    ({"deploy_kernel": "http://img/host.kernel"}, None, []),  # no image ready: the node's are left
]


@pytest.mark.parametrize(("driver_info", "image", "calls"), REGISTER_WITH_IMAGE)
def test_registering_sets_the_hosts_image_in_driver_info(driver_info, image, calls):
    class Building(RecordingIronic):
        options = IronicOptions(build_preprov_image=True)

    recording = Building(node(driver_info=driver_info))
    host = HostData(BMCAccess("fake://x", "u", "p"), preprovisioning_image=image)
    result = ironic.IronicProvisioner(recording, "ns~h", "uuid-1").register(host, False, lambda: None)
    assert result.done and recording.calls == calls
