# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The host provisioner over Ironic: the only code that knows Ironic's provision states.

Each operation of ``core/provisioner.Provisioner`` reads the host's node (once per reconcile), takes the
step Ironic's state calls for and answers with a small result, as baremetal-operator's Ironic provisioner
does. What Ironic refuses becomes the result's error (a node locked by another operation, HTTP 409, is
"look again soon"); Ironic not answering raises IronicUnavailable, so that the host records nothing.
Decisions that must survive a lost status write are taken from Ironic's own state: an inspection is
started or over by the node's state and inspection_finished_at, a deploy of the image failed by the node's
state and instance_info.
"""
from __future__ import annotations

import dataclasses
import datetime
import functools
from typing import Any, Callable, Mapping, TypeVar

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid, IronicRejected
from ansible_collections.metal3.baremetal.plugins.module_utils.core.provisioner import (
    DELAYED,
    INITRD,
    ISO,
    POLL,
    Capacity,
    DataImageStatus,
    FirmwareComponents,
    FirmwareSettings,
    FirmwareUpdates,
    HostData,
    Inspection,
    Power,
    PreprovisioningImage,
    ProvisionerFactory,
    ProvisionResult,
    RAIDPreparation,
    Registration,
    known_component,
    settings_changes,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.bmc import (
    HIDDEN,
    ISO_BOOT,
    OUT_OF_BAND_INSPECTION,
    RAID_INTERFACES,
    Driver,
    driver_for,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import (
    VIRTUAL_MEDIA_BOOT,
    VMEDIA_DEVICE,
    Ironic,
    IronicOptions,
    Node,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.raid import (
    NO_RAID,
    RAIDError,
    device_hints,
    logical_disks,
    raid_clean_steps,
    raid_interface,
)

BOOT_MODES = {"UEFI": "uefi", "UEFISecureBoot": "uefi", "legacy": "bios"}
SECURE_BOOT = "UEFISecureBoot"

# Node states in which Ironic is working and a reconcile only looks again.
CLEANING_OR_DEPLOYING = ("cleaning", "clean wait", "deploying", "wait call-back", "deleting", "verifying")
UNDEPLOYING = ("deleting", "cleaning", "clean wait", "deploying", "inspecting", "verifying")
# Node states that run an image (or failed to), from which undeploy starts.
DEPLOYED = ("active", "deploy failed", "wait call-back", "adopt failed")
# Node states Ironic deletes a node from without maintenance mode.
DELETABLE = ("available", "manageable", "enroll", "adopt failed", "inspect failed", "clean failed")
DETACHABLE = ("available", "manageable", "enroll")
# Node states waiting on the agent, which a forced detach aborts (upstream's: deploy wait is wait call-back).
ABORTABLE = ("wait call-back", "inspect wait", "clean wait", "service wait")
# What a FirmwareSchema keeps of each of Ironic's BIOS registry entries (upstream's SettingSchema fields).
SCHEMA_FIELDS = ("attribute_type", "allowable_values", "lower_bound", "upper_bound", "min_length", "max_length",
                 "read_only", "unique")

R = TypeVar("R", bound=ProvisionResult)


def _answers(kind: type[R]) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """What Ironic refuses becomes the operation's result: a locked node is looked at again soon."""
    def wrap(operation: Callable[..., R]) -> Callable[..., R]:
        @functools.wraps(operation)
        def answered(*args: Any, **kwargs: Any) -> R:
            try:
                return operation(*args, **kwargs)
            except IronicRejected as e:
                if getattr(e, "status_code", None) == 409:  # the node is locked by an operation in progress
                    return kind(dirty=True, requeue_after=POLL, message=str(e))
                return kind(error=str(e))
        return answered
    return wrap


def _busy(message: str = "") -> ProvisionResult:
    return ProvisionResult(dirty=True, requeue_after=POLL, message=message)


class IronicProvisioner:
    """One host's node in Ironic, for one reconcile."""

    def __init__(self, ironic: Ironic, name: str, provisioner_id: str, limit: int = 20):
        self.ironic, self.name, self.provisioner_id, self.limit = ironic, name, provisioner_id, limit
        self._node: Node | None = None

    def _find(self) -> Node | None:
        """The host's node, by ID or name, read once per reconcile: a step that changes it ends the reconcile."""
        if self._node is None:
            node = self.ironic.get_node(self.provisioner_id) if self.provisioner_id else None
            self._node = node or self.ironic.get_node(self.name)
        return self._node

    def _registered(self) -> Node:
        node = self._find()
        if node is None:  # the state machine registers before any other operation
            raise IronicRejected(f"Ironic has no node {self.name}")
        return node

    # -- registration --------------------------------------------------------------------------------------
    @_answers(Registration)
    def register(self, host: HostData, credentials_changed: bool,
                 before_create: Callable[[], None]) -> Registration:
        try:
            driver = self._driver(host)
        except Invalid as e:  # a BMC address that cannot be read stays so until the spec changes: no retries
            return Registration(error=str(e), retry=False)
        gaps = network_data_gaps(host.preprovisioning_network_data)
        if gaps:
            return Registration(error=f"spec.preprovisioningNetworkDataName: its networkData {gaps}, which Ironic "
                                      "requires", retry=False)
        mac = host.boot_mac.lower()
        node = self._find()
        if node is None and mac:
            node = self.ironic.node_by_mac(mac)
            if node is not None and node["name"] != self.name:
                return Registration(error=f"MAC address {mac} conflicts with existing node {node['name']} "
                                          f"({node['id']})")
        sent, message = False, ""
        if node is None:
            before_create()
            interfaces = dict(driver.interfaces)
            deploy = _deploy_interface(host, driver)
            if deploy:
                interfaces["deploy_interface"] = deploy
            inspect = _inspect_interface(host, driver)
            if inspect:
                interfaces["inspect_interface"] = inspect
            properties: dict[str, Any] = {}
            if host.boot_mode in BOOT_MODES:
                properties["capabilities"] = capabilities(host.boot_mode)
            if host.architecture:
                properties["cpu_arch"] = host.architecture
            node = self.ironic.create_node(self.name, driver.driver, driver.driver_info, interfaces, properties,
                                           mac or None, host.automated_clean,
                                           network_data=host.preprovisioning_network_data or None)
            sent, message = True, f"registered node {node['name']}"
        elif _bmc_changed(node, driver, credentials_changed):
            node = self.ironic.patch_node(node, {"driver": driver.driver, "driver_info": driver.driver_info})
            sent, message = True, f"updated the BMC of node {node['name']}"
        elif node["provision_state"] in ("enroll", "manageable", "available") \
                and self.ironic.network_data(node) != host.preprovisioning_network_data:
            node = self.ironic.patch_node(node, {"network_data": host.preprovisioning_network_data})
        self._node = node
        if node["provision_state"] == "enroll":
            if not node["target_provision_state"]:
                self.ironic.set_provision_state(node, "manage")
                sent = True
                if node["last_error"]:  # the previous attempt failed; this one is the retry
                    return Registration(error=node["last_error"], provisioner_id=node["id"], credentials_sent=True)
            return Registration(dirty=True, requeue_after=POLL, provisioner_id=node["id"], credentials_sent=sent,
                                message=message)
        if node["provision_state"] == "verifying":
            return Registration(dirty=True, requeue_after=POLL, provisioner_id=node["id"], credentials_sent=sent,
                                message=message)
        return Registration(provisioner_id=node["id"], credentials_sent=sent, message=message)

    def _driver(self, host: HostData) -> Driver:
        """The host's driver, with the deploy ramdisk the Ironic options name in its driver_info."""
        driver = driver_for(host.bmc.address, host.bmc.username, host.bmc.password,
                            host.bmc.disable_certificate_verification)
        return dataclasses.replace(driver, driver_info={
            **driver.driver_info, **deploy_images(self.ironic.options, driver, host.preprovisioning_image)})

    def preprovisioning_image_formats(self, host: HostData) -> list[str] | None:
        """Upstream's PreprovisioningImageFormats: none unless the options build per-host images; else an ISO first
        for a BMC that boots from virtual media, and an initrd."""
        if not self.ironic.options.build_preprov_image:
            return None
        try:
            driver = driver_for(host.bmc.address, "", "", host.bmc.disable_certificate_verification)
        except Invalid:
            return None  # registering says why
        return [ISO, INITRD] if driver.interfaces.get("boot_interface") in VIRTUAL_MEDIA_BOOT else [INITRD]

    # -- inspection and preparation ------------------------------------------------------------------------
    @_answers(Inspection)
    def inspect(self, refresh: bool) -> Inspection:
        node = self._registered()
        state = node["provision_state"]
        if state in ("inspecting", "inspect wait"):
            return Inspection(dirty=True, requeue_after=POLL, started=True)
        # Over when Ironic says it finished one: not from the host's status, which a lost write can drop.
        if state == "manageable" and not refresh and self.ironic.inspection_finished_at(node):
            return Inspection(hardware=hardware_details(node, self.ironic.inventory(node)), message="inspected")
        if state == "available":
            self.ironic.set_provision_state(node, "manage")
            return Inspection(dirty=True, requeue_after=POLL)
        capacity = self.has_capacity()
        if not capacity.granted:
            return Inspection(dirty=True, requeue_after=DELAYED, delayed=True, message=capacity.message)
        self.ironic.set_provision_state(node, "inspect")
        if state == "inspect failed":
            return Inspection(error=node["last_error"] or "inspection failed", started=True)
        return Inspection(dirty=True, requeue_after=POLL, started=True, message="inspecting")

    @_answers(ProvisionResult)
    def prepare(self, firmware_settings: Mapping[str, int | str],
                firmware_updates: FirmwareUpdates = (), raid: RAIDPreparation | None = None) -> ProvisionResult:
        node = self._registered()
        state = node["provision_state"]
        if state in ("inspecting", "cleaning", "clean wait"):
            return _busy()
        if state == "inspect wait":
            self.ironic.abort(node)
            return _busy("aborting the inspection")
        if state == "inspect failed":  # Ironic may leave target_provision_state set here: manage clears it
            self.ironic.set_provision_state(node, "manage")
            return _busy("taking the node back to manageable")
        if state == "clean failed":
            # Ironic leaves a node whose step failed in maintenance, and manage refuses it there: both, so that the
            # next attempt starts from manageable; the failure is the host's to record.
            if node["maintenance"]:
                self.ironic.clear_maintenance(node)
            self.ironic.set_provision_state(node, "manage")
            return ProvisionResult(error=node["last_error"] or "manual cleaning failed")
        # What differs from the settings Ironic read from the BMC (at the end of the last cleaning, among others):
        # not from the HostFirmwareSettings' status, which is written later and may lag behind.
        changes = settings_changes(firmware_settings, self._current_settings(node)) if firmware_settings else {}
        try:
            interface, disks, raid_steps = _raid(node, raid)
        except RAIDError as e:  # stays so until the spec changes
            return ProvisionResult(error=str(e), retry=False)
        steps = raid_steps + firmware_steps(changes, firmware_updates)
        if state == "available" and steps:  # manual cleaning starts from manageable
            self.ironic.set_provision_state(node, "manage")
            return _busy("taking the node back to manageable")
        if state == "manageable":
            if disks:  # the RAID interface and the target RAID configuration first, as upstream sets them
                if interface != node.get("raid_interface"):
                    node = self._node = self.ironic.patch_node(node, {"raid_interface": interface})
                self.ironic.set_target_raid_config(node, disks)
            if steps:
                self.ironic.set_provision_state(node, "clean", clean_steps=steps)
                what = ["configuring RAID"] if raid_steps else []
                what += [_applying(changes, firmware_updates)] if changes or firmware_updates else []
                return ProvisionResult(dirty=True, requeue_after=POLL, started=True, message=" and ".join(what))
        return ProvisionResult()

    @_answers(ProvisionResult)
    def service(self, firmware_settings: Mapping[str, int | str], restart: bool,
                firmware_updates: FirmwareUpdates = (), updates_asked: bool = False) -> ProvisionResult:
        node = self._registered()
        state = node["provision_state"]
        asked = bool(firmware_settings) or bool(firmware_updates) or updates_asked
        if state == "servicing" or state == "service wait" and asked:
            return _busy()
        if state == "service failed" and asked and not restart:
            return ProvisionResult(error=node["last_error"] or "servicing failed")
        if state in ("service failed", "service wait") and node["maintenance"]:
            # Ironic leaves a node whose step failed in maintenance, and refuses to abort or service it there.
            self.ironic.clear_maintenance(node)
            return _busy("taking the node out of maintenance")
        if state == "service wait" or state == "service failed" and not asked:
            self.ironic.abort(node)  # back to active, as it was
            return _busy("aborting the servicing")
        if state not in ("active", "service failed"):
            return ProvisionResult(error=f"Ironic node {node['name']} is in state {state!r}, which servicing cannot "
                                         "start from")
        changes = settings_changes(firmware_settings, self._current_settings(node)) if firmware_settings else {}
        if changes or firmware_updates:
            self.ironic.service(node, firmware_steps(changes, firmware_updates))
            return ProvisionResult(dirty=True, requeue_after=POLL, started=True,
                                   message=f"servicing: {_applying(changes, firmware_updates)}")
        if state == "service failed":  # nothing is left to apply: back to active
            self.ironic.abort(node)
            return _busy("ending the servicing")
        return ProvisionResult(message="serviced")

    @_answers(FirmwareSettings)
    def firmware_settings(self) -> FirmwareSettings:
        settings, schema = bios_settings(self.ironic.bios_settings(self._registered()))
        return FirmwareSettings(settings=settings, schema=schema)

    @_answers(FirmwareComponents)
    def firmware_components(self) -> FirmwareComponents:
        return FirmwareComponents(components=firmware_components(self.ironic.firmware_components(self._registered())))

    def _current_settings(self, node: Node) -> dict[str, str]:
        return bios_settings(self.ironic.bios_settings(node))[0]

    # -- provisioning --------------------------------------------------------------------------------------
    @_answers(ProvisionResult)
    def provision(self, host: HostData, config_drive: Callable[[], dict[str, Any]]) -> ProvisionResult:
        node = self._registered()
        state = node["provision_state"]
        if state == "manageable":
            self._sync_automated_clean(node, host.automated_clean)
            self.ironic.set_provision_state(node, "provide")
            return _busy("cleaning" if host.automated_clean else "providing")
        if state in CLEANING_OR_DEPLOYING:
            return _busy()
        if state == "clean failed":
            self.ironic.set_provision_state(node, "manage")
            return ProvisionResult(error=node["last_error"] or "cleaning failed")
        # The image that failed is the one Ironic holds: not a status field a lost write could have dropped. The
        # state machine counts the failure and undeploys before it tries again.
        if state == "deploy failed" and _deployed(node, host):
            return ProvisionResult(error=node["last_error"] or "deploy failed")
        if state in ("available", "deploy failed"):
            self._deploy(node, host, config_drive)
            return _busy(f"deploying {host.image.get('url') or host.custom_deploy}")
        if state == "active":
            return ProvisionResult(message="provisioned")
        return ProvisionResult(error=f"Ironic node {node['name']} is in state {state!r}, which provisioning "
                                     "cannot continue from", retry=False)

    def _deploy(self, node: Node, host: HostData, config_drive: Callable[[], dict[str, Any]]) -> None:
        driver = self._driver(host)  # read by register() in this reconcile
        changes: dict[str, Any] = {"instance_info": instance_info(host.image, host.boot_mode)}
        deploy = _deploy_interface(host, driver)
        if deploy and deploy != node["deploy_interface"]:
            changes["deploy_interface"] = deploy
        hints = device_hints(host.root_device_hints)
        if hints:
            changes["properties"] = {**(node["properties"] or {}), "root_device": hints}
        kwargs: dict[str, Any] = {}
        if host.image.get("format") != "live-iso":
            kwargs["config_drive"] = config_drive()  # before any change: a config drive that fails changes nothing
        self.ironic.patch_node(node, changes)
        self.ironic.set_provision_state(node, "active", **kwargs)

    @_answers(ProvisionResult)
    def adopt(self, host: HostData) -> ProvisionResult:
        node = self._registered()
        state = node["provision_state"]
        if state == "active":
            return ProvisionResult()
        if state == "adopting":
            return _busy()
        if state in ("manageable", "adopt failed"):
            self.ironic.patch_node(node, {"instance_info": instance_info(host.image, host.boot_mode)})
            self.ironic.set_provision_state(node, "adopt")
            if state == "adopt failed":
                return ProvisionResult(error=node["last_error"] or "adoption failed")
            return _busy("adopting")
        return ProvisionResult(error=f"Ironic node {node['name']} is in state {state!r}")

    @_answers(ProvisionResult)
    def deprovision(self, automated_clean: bool) -> ProvisionResult:
        node = self._find()
        if node is None:
            return ProvisionResult(message="deprovisioned")
        state = node["provision_state"]
        if state in DEPLOYED:
            capacity = self.has_capacity()
            if not capacity.granted:
                return ProvisionResult(dirty=True, requeue_after=DELAYED, delayed=True, message=capacity.message)
            self._sync_automated_clean(node, automated_clean)
            self.ironic.set_provision_state(node, "deleted")
            return _busy("deprovisioning")
        if state in UNDEPLOYING:
            return _busy()
        if state == "clean failed":
            self.ironic.set_provision_state(node, "manage")
            return ProvisionResult(error=node["last_error"] or "cleaning failed")
        return ProvisionResult(message="deprovisioned")

    def _sync_automated_clean(self, node: Node, automated_clean: bool) -> None:
        """Ironic cleans on provide and undeploy as automatedCleaningMode says (metadata: yes, disabled: no)."""
        if node["automated_clean"] != automated_clean:
            self.ironic.patch_node(node, {"automated_clean": automated_clean})

    # -- power ---------------------------------------------------------------------------------------------
    @_answers(Power)
    def power(self, on: bool, reboot: str = "") -> Power:
        node = self._find()
        if node is None:
            return Power()
        # What Ironic last saw, whatever it answers to what is asked now (a locked node, say).
        return dataclasses.replace(self._power(node, on, reboot), powered_on=node["power_state"] == "power on")

    @_answers(Power)
    def _power(self, node: Node, on: bool, reboot: str) -> Power:
        powered_on = node["power_state"] == "power on"
        if node["target_power_state"]:
            return Power(dirty=True, requeue_after=POLL, powered_on=powered_on)
        if on and reboot:
            self.ironic.set_power_state(node, "soft rebooting" if reboot == "soft" else "rebooting")
            return Power(dirty=True, requeue_after=POLL, powered_on=powered_on, rebooted=True, message="rebooting")
        if on and not powered_on:
            self.ironic.set_power_state(node, "power on")
            return Power(dirty=True, requeue_after=POLL, powered_on=powered_on, message="powering on")
        if not on and node["power_state"] not in ("power off", None):
            self.ironic.set_power_state(node, "power off")
            return Power(dirty=True, requeue_after=POLL, powered_on=powered_on, message="powering off")
        return Power(powered_on=powered_on)

    # -- a DataImage: the virtual CD of a provisioned host -------------------------------------------------------
    @_answers(ProvisionResult)
    def attach_data_image(self, url: str) -> ProvisionResult:
        self.ironic.attach_vmedia(self._registered(), url)
        return ProvisionResult(message=f"attaching the data image {url}")

    @_answers(ProvisionResult)
    def detach_data_image(self) -> ProvisionResult:
        self.ironic.detach_vmedia(self._registered())
        return ProvisionResult(message="detaching the data image")

    @_answers(DataImageStatus)
    def data_image_status(self, since: str = "") -> DataImageStatus:
        """Upstream's GetDataImageStatus: a node that holds a lock is busy (an attach or detach under way, say:
        the drive is not yet as asked); otherwise whether any virtual media is inserted. Not upstream's: with none
        inserted, an attach asked for since ``since`` that failed is reported from the node's history - Ironic
        answers an attach at once and records its failure there only; upstream never sees it and attaches again
        and again."""
        node = self._registered()
        if node.get("reservation"):
            return DataImageStatus(dirty=True, requeue_after=POLL, message="Ironic is busy with the node")
        if any(entry.get("inserted") for entry in self.ironic.vmedia(node)):
            return DataImageStatus(attached=True)
        failure = attach_failure(self.ironic.history(node), since) if since else ""
        return DataImageStatus(attach_error=failure)

    # -- forgetting the host -------------------------------------------------------------------------------
    @_answers(ProvisionResult)
    def detach(self, force: bool) -> ProvisionResult:
        node = self._find()
        if node is None:
            return ProvisionResult()
        state = node["provision_state"]
        if state in ("verifying", "deploying", "cleaning", "inspecting", "servicing", "deleting"):
            return _busy(f"detaching once Ironic is done {state}")
        if state in ABORTABLE:
            if not force:
                return _busy(f"detaching once Ironic is out of {state}")
            self.ironic.abort(node)
            return _busy(f"aborting {state} to detach")
        if not node["maintenance"] and state not in DETACHABLE:
            self.ironic.set_maintenance(node, "BareMetalHost detached")
        self.ironic.delete_node(node)
        return ProvisionResult(message=f"Ironic node {node['name']} removed")

    @_answers(ProvisionResult)
    def delete(self) -> ProvisionResult:
        node = self._find()
        if node is None:
            return ProvisionResult()
        if node["provision_state"] not in DELETABLE and not node["maintenance"]:
            self.ironic.set_maintenance(node, "BareMetalHost deleted")
        self.ironic.delete_node(node)
        return ProvisionResult(message=f"Ironic node {node['name']} removed")

    def health(self) -> str:
        """The node's health as read in this reconcile (Ironic reads the BMC's System health as it syncs power); no
        request of its own."""
        return str((self._node or {}).get("health") or "")

    def has_capacity(self) -> Capacity:
        """Busy nodes booting from virtual media are not counted, and need no slot, as upstream's."""
        node = self._find()
        if node is not None and node["boot_interface"] in VIRTUAL_MEDIA_BOOT:
            return Capacity(True)
        granted, busy = self.ironic.take_provisioning_slot(self.limit)
        if granted:
            return Capacity(True)
        return Capacity(False, f"delayed: {busy} hosts are busy (provisioning limit {self.limit})")


def ironic_provisioners(ironic: Ironic, limit: int = 20) -> ProvisionerFactory:
    """The factory the state machine takes: each host's provisioner over one Ironic client."""
    return functools.partial(IronicProvisioner, ironic, limit=limit)


# -- Ironic's view of the spec: pure functions ------------------------------------------------------------

def _deploy_interface(host: HostData, driver: Driver) -> str | None:
    if host.image.get("format") == "live-iso":
        return "ramdisk"
    if host.custom_deploy:
        return "custom-agent"
    return driver.interfaces.get("deploy_interface")


def _inspect_interface(host: HostData, driver: Driver) -> str | None:
    """The agent inspects, as upstream's default; out of band only where inspectionMode is fast."""
    if driver.driver == "fake-hardware":
        return None  # its own fake interface
    if host.inspection_mode == "fast":
        return OUT_OF_BAND_INSPECTION.get(driver.driver, "agent")
    return "agent"


# The driver_info keys of the deploy ramdisk: a node's are replaced together.
DEPLOY_KEYS = ("deploy_kernel", "deploy_ramdisk", "deploy_iso", "kernel_append_params")


def deploy_images(options: IronicOptions, driver: Driver,
                  image: PreprovisioningImage | None = None) -> dict[str, str]:
    """The deploy ramdisk as upstream sets it in driver_info (setDeployImage): the host's own PreprovisioningImage
    when it has one ready - its ISO (for a virtual-media boot), or its kernel (else the options') and initramfs with
    its extra kernel parameters after Ironic's own (%default%); else, unless the options build per-host images,
    the options' ISO for a virtual-media boot when there is one, else their kernel and ramdisk (from which Ironic
    builds the ISO a virtual-media boot needs). {}: the node's are left as they are."""
    if image is not None:
        if image.format == ISO and driver.interfaces.get("boot_interface") in VIRTUAL_MEDIA_BOOT:
            return {"deploy_iso": image.image_url}
        kernel = image.kernel_url or options.deploy_kernel
        if image.format == INITRD and kernel:
            info = {"deploy_kernel": kernel, "deploy_ramdisk": image.image_url}
            if image.extra_kernel_params:
                info["kernel_append_params"] = f"%default% {image.extra_kernel_params}"
            return info
    if options.build_preprov_image or driver.driver == "fake-hardware":
        return {}
    if options.deploy_iso and driver.interfaces.get("boot_interface") in ISO_BOOT:
        return {"deploy_iso": options.deploy_iso}
    if options.deploy_kernel and options.deploy_ramdisk:
        return {"deploy_kernel": options.deploy_kernel, "deploy_ramdisk": options.deploy_ramdisk}
    return {}


# What Ironic's network_data schema requires of each item (its own error for a gap quotes a regular expression).
_NETWORK_DATA_REQUIRED: dict[str, dict[str, tuple[str, ...]]] = {
    "links": {"phy": ("id", "ethernet_mac_address"), "bond": ("id", "ethernet_mac_address", "bond_mode",
                                                              "bond_links"),
              "vlan": ("id", "vlan_mac_address", "vlan_link", "vlan_id")},
    "networks": {"": ("id", "link", "network_id")},
}


def bios_settings(entries: list[dict[str, Any]]) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """Ironic's BIOS settings (with their registry entries) as a HostFirmwareSettings' settings, name to value, and
    a FirmwareSchema's entries, name to what it allows."""
    settings: dict[str, str] = {}
    schema: dict[str, dict[str, Any]] = {}
    for entry in entries:
        value = entry.get("value")
        settings[entry["name"]] = "" if value is None else str(value)
        schema[entry["name"]] = {field: entry[field] for field in SCHEMA_FIELDS if entry.get(field) is not None}
    return settings, schema


def bios_step(changes: Mapping[str, int | str]) -> dict[str, Any]:
    """The step that applies firmware settings, as upstream sends it: an int stays an int, anything else is text."""
    return {"interface": "bios", "step": "apply_configuration",
            "args": {"settings": [{"name": name, "value": value if isinstance(value, int) else str(value)}
                                  for name, value in sorted(changes.items())]}}


def firmware_update_step(updates: FirmwareUpdates) -> dict[str, Any]:
    """The step that flashes firmware, as upstream sends it: each update's component and URL, in the spec's order."""
    return {"interface": "firmware", "step": "update",
            "args": {"settings": [{"component": str(update["component"]), "url": str(update["url"])}
                                  for update in updates]}}


def firmware_steps(changes: Mapping[str, int | str], updates: FirmwareUpdates) -> list[dict[str, Any]]:
    """The clean or service steps of a firmware change, in upstream's order: the BIOS settings, then the updates."""
    return [*([bios_step(changes)] if changes else []), *([firmware_update_step(updates)] if updates else [])]


def _raid(node: Node, raid: RAIDPreparation | None) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """What preparing sends Ironic of ``raid``: the RAID interface the node needs, the logical disks of its target
    RAID configuration (none: nothing is sent) and the clean steps, as upstream's; RAIDError where it refuses."""
    if raid is None:
        return "", [], []
    own = RAID_INTERFACES.get(node["driver"]) or node.get("raid_interface") or NO_RAID  # the driver's, not the node's
    return (raid_interface(own, raid.target, raid.actual), logical_disks(raid.target, raid.root_device_hints),
            raid_clean_steps(own, raid.target, raid.actual))


def _applying(changes: Mapping[str, int | str], updates: FirmwareUpdates) -> str:
    what = [f"applying the firmware settings {', '.join(sorted(changes))}"] if changes else []
    if updates:
        what.append(f"updating the firmware of {', '.join(str(update['component']) for update in updates)}")
    return " and ".join(what)


# Ironic's firmware component fields -> a HostFirmwareComponents' status.components fields.
COMPONENT_FIELDS = {"component": "component", "initial_version": "initialVersion",
                    "current_version": "currentVersion", "last_version_flashed": "lastVersionFlashed",
                    "updated_at": "updatedAt"}


def firmware_components(entries: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Ironic's firmware components as a HostFirmwareComponents' status.components, as upstream keeps them: bios,
    bmc and nic:<id> only (others are left out), each field empty in Ironic left out (initialVersion always
    there)."""
    components = []
    for entry in entries:
        name = str(entry.get("component") or "")
        if not known_component(name):
            continue
        component = {ours: str(entry[theirs]) for theirs, ours in COMPONENT_FIELDS.items() if entry.get(theirs)}
        component.setdefault("initialVersion", "")
        components.append(component)
    return components


# How Ironic's conductor words a virtual media attach that failed (do_attach_virtual_media), in the node's history.
ATTACH_FAILED = f"Could not attach device {VMEDIA_DEVICE} "
MAX_EVENT = 512  # an event as a DataImage's status.error.message keeps it


def attach_failure(events: list[dict[str, Any]], since: str) -> str:
    """The newest of a node's history ``events`` that says an attach of its virtual CD failed at or after
    ``since`` (RFC 3339), as Ironic words it; "" when none did."""
    start = _moment(since)
    for event in events:
        text, at = str(event.get("event") or ""), _moment(str(event.get("created_at") or ""))
        if text.startswith(ATTACH_FAILED) and start is not None and at is not None and at >= start:
            return text if len(text) <= MAX_EVENT else text[:MAX_EVENT - 3] + "..."
    return ""


def _moment(text: str) -> datetime.datetime | None:
    """An RFC 3339 or ISO 8601 time (Ironic's carry no zone: UTC), None when it is none."""
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


def network_data_gaps(network_data: dict[str, Any]) -> str:
    """What a node's network_data lacks that Ironic's schema requires ("" when nothing, or when there is none)."""
    if not network_data:
        return ""
    gaps = [f"has no {key!r}" for key in ("links", "networks", "services") if key not in network_data]
    for section, by_type in _NETWORK_DATA_REQUIRED.items():
        for i, item in enumerate(network_data.get(section) or []):
            if not isinstance(item, dict) or "type" not in item:
                gaps.append(f"{section}[{i}] has no 'type'")
                continue
            required = by_type.get(item["type"], by_type.get("", ()))
            gaps += [f"{section}[{i}] has no {key!r}" for key in required if key not in item]
    return "; ".join(gaps)


def capabilities(boot_mode: str) -> str:
    """A node's properties.capabilities for a bootMode, as upstream writes them."""
    text = f"boot_mode:{BOOT_MODES[boot_mode]}"
    return f"{text},secure_boot:true" if boot_mode == SECURE_BOOT else text


def _deployed(node: Node, host: HostData) -> bool:
    """Whether the node holds this host's image (or custom deploy) already: its last deploy was of it."""
    wanted = instance_info(host.image, host.boot_mode)
    held = node["instance_info"] or {}
    same_image = all(held.get(key) == value for key, value in wanted.items() if key != "capabilities")
    if host.custom_deploy:
        return same_image and node["deploy_interface"] == "custom-agent"
    return same_image and bool(host.image.get("url"))


def _bmc_changed(node: Node, driver: Driver, credentials_changed: bool) -> bool:
    """A new BMC address or new credentials: Ironic shows no passwords, so the secret's version tells."""
    shown = {k: v for k, v in driver.shown().items() if v != HIDDEN}
    current = {k: v for k, v in (node["driver_info"] or {}).items() if k in shown}
    if any(key in driver.driver_info for key in DEPLOY_KEYS):  # a deploy ramdisk replaces the node's whole
        current.update({key: (node["driver_info"] or {}).get(key) for key in DEPLOY_KEYS})
        shown.update({key: driver.driver_info.get(key) for key in DEPLOY_KEYS})
    return node["driver"] != driver.driver or current != shown or credentials_changed


def instance_info(image: dict[str, Any], boot_mode: str | None = None) -> dict[str, Any]:
    """instance_info for an image, as upstream fills it (a live ISO boots as boot_iso, ramdisk deploy)."""
    info: dict[str, Any] = {}
    if image.get("format") == "live-iso":
        info["boot_iso"] = image.get("url")
    elif image.get("url"):
        info["image_source"] = image["url"]
        if image.get("format"):
            info["image_disk_format"] = image["format"]
        checksum, kind = image.get("checksum"), image.get("checksumType") or "auto"
        if checksum and (kind in ("md5", "auto") or checksum.startswith(("http://", "https://", "file://"))):
            info["image_checksum"] = checksum
        elif checksum:
            info.update(image_os_hash_algo=kind, image_os_hash_value=checksum)
    if boot_mode in BOOT_MODES:
        info["capabilities"] = {"boot_mode": BOOT_MODES[boot_mode]}
        if boot_mode == SECURE_BOOT:
            info["capabilities"]["secure_boot"] = "true"
    return info


def hardware_details(node: Node, inventory: dict[str, Any] | None) -> dict[str, Any]:
    """status.hardware from what Ironic inspection stored (its inventory), else the node's properties."""
    inv = (inventory or {}).get("inventory") or {}
    props = node.get("properties") or {}
    cpu, vendor, memory = inv.get("cpu") or {}, inv.get("system_vendor") or {}, inv.get("memory") or {}
    bios = (vendor.get("firmware") or {}) if isinstance(vendor.get("firmware"), dict) else {}
    details: dict[str, Any] = {
        "systemVendor": {"manufacturer": vendor.get("manufacturer", ""), "productName": vendor.get("product_name", ""),
                         "serialNumber": vendor.get("serial_number", "")},
        "firmware": {"bios": {"vendor": bios.get("vendor", ""), "version": bios.get("version", ""),
                              "date": bios.get("build_date", "")}},
        "ramMebibytes": int(memory.get("physical_mb") or props.get("memory_mb") or 0),
        "cpu": {"arch": cpu.get("architecture") or props.get("cpu_arch", ""), "model": cpu.get("model_name", ""),
                "clockMegahertz": float(cpu.get("frequency") or 0), "flags": cpu.get("flags") or [],
                "count": int(cpu.get("count") or props.get("cpus") or 0)},
        "nics": [{"name": nic.get("name", ""), "mac": nic.get("mac_address", ""),
                  "ip": nic.get("ipv4_address") or nic.get("ipv6_address") or "",
                  "speedGbps": int((nic.get("speed_mbps") or 0) // 1000), "pxe": bool(nic.get("pxe_enabled")),
                  "model": " ".join(filter(None, (nic.get("vendor"), nic.get("product"))))}
                 for nic in inv.get("interfaces") or []],
        "storage": [{"name": disk.get("name", ""), "sizeBytes": int(disk.get("size") or 0),
                     "rotational": bool(disk.get("rotational")), "model": disk.get("model") or "",
                     "serialNumber": disk.get("serial") or "", "vendor": disk.get("vendor") or "",
                     "wwn": disk.get("wwn") or "", "hctl": disk.get("hctl") or ""}
                    for disk in inv.get("disks") or []],
        "hostname": inv.get("hostname", ""),
    }
    if not details["storage"] and props.get("local_gb"):
        details["storage"] = [{"name": "", "sizeBytes": int(props["local_gb"]) * 1024 ** 3}]
    return details
