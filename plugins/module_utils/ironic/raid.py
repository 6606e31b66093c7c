# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""A BareMetalHost's ``spec.raid`` as Ironic takes it, as baremetal-operator builds it
(pkg/provisioner/ironic/raid.go): pure functions over upstream's RAIDConfig (``hardwareRAIDVolumes``,
``softwareRAIDVolumes``; a list absent or null is not the same as an empty one).

- ``logical_disks``: the node's target RAID configuration (``PUT /v1/nodes/{n}/states/raid``);
- ``raid_interface``: the RAID interface the node needs for it (software RAID is the agent's);
- ``raid_clean_steps``: the manual-cleaning steps that apply it, against what was applied before.

Each raises ``RAIDError`` with upstream's text where upstream refuses the configuration.
"""
from __future__ import annotations

from typing import Any, Mapping

HARDWARE, SOFTWARE = "hardwareRAIDVolumes", "softwareRAIDVolumes"
NO_RAID, AGENT = "no-raid", "agent"
RAID_API_VERSION = "1.12"  # PUT /v1/nodes/{n}/states/raid

RAIDConfig = Mapping[str, Any]


class RAIDError(ValueError):
    """A RAID configuration Ironic cannot be given; upstream's words."""


def volumes(raid: RAIDConfig | None, kind: str) -> list[dict[str, Any]] | None:
    """The ``kind`` volumes of ``raid``: None when the list is absent or null, as Go's nil slice."""
    if raid is None or raid.get(kind) is None:
        return None
    return list(raid[kind])


def root_volume_count(raid: RAIDConfig | None) -> int:
    """How many software volumes are the root volume (upstream's GetRootVolumeCount)."""
    return sum(1 for volume in volumes(raid, SOFTWARE) or [] if volume.get("rootVolume"))


def device_hints(hints: Mapping[str, Any] | None) -> dict[str, str]:
    """Root device hints (upstream's RootDeviceHints fields) as Ironic's hint map with upstream's operators
    (MakeHintMap): the node's root device, and the disks of a software RAID volume."""
    hints = hints or {}
    result: dict[str, str] = {}
    name = str(hints.get("deviceName") or "")
    if name:
        result["by_path" if name.startswith("/dev/disk/by-path/") else "name"] = f"s== {name}"
    for ours, theirs, operator in (("hctl", "hctl", "s=="), ("model", "model", "<in>"), ("vendor", "vendor", "<in>"),
                                   ("serialNumber", "serial", "s=="), ("wwn", "wwn", "s=="),
                                   ("wwnWithExtension", "wwn_with_extension", "s=="),
                                   ("wwnVendorExtension", "wwn_vendor_extension", "s==")):
        if hints.get(ours):
            result[theirs] = f"{operator} {hints[ours]}"
    if hints.get("minSizeGigabytes"):
        result["size"] = f">= {int(hints['minSizeGigabytes'])}"
    if hints.get("rotational") is not None:
        result["rotational"] = "true" if hints["rotational"] else "false"
    return result


def _size(volume: Mapping[str, Any]) -> int | str:
    """size_gb: the volume's sizeGibibytes, or all the space there is ("MAX") when it has none."""
    size = volume.get("sizeGibibytes")
    return "MAX" if size is None else int(size)


def _hardware_disk(index: int, volume: Mapping[str, Any], names: dict[str, int]) -> dict[str, Any]:
    name = str(volume.get("name") or "")
    if name:
        if name in names:
            raise RAIDError(f"the names({name}) of volume[{index}] and volume[{names[name]}] are repeated")
        names[name] = index
    physical = [str(disk) for disk in volume.get("physicalDisks") or []]
    controller = str(volume.get("controller") or "")
    if physical and not controller:
        raise RAIDError("'controller' must be specified if 'physicalDisks' are used")
    count = volume.get("numberOfPhysicalDisks")
    if count is not None and physical and count != len(physical):
        raise RAIDError(f"the numberOfPhysicalDisks[{count}] is not same as number of items in "
                        f"physicalDisks[{len(physical)}]")
    disk: dict[str, Any] = {"size_gb": _size(volume), "raid_level": str(volume["level"])}
    if name:
        disk["volume_name"] = name
    if volume.get("rotational") is not None:
        disk["disk_type"] = "hdd" if volume["rotational"] else "ssd"
    if count:
        disk["number_of_physical_disks"] = int(count)
    if controller:
        disk["controller"] = controller
    if physical:
        disk["physical_disks"] = physical
    return disk


def _software_disk(volume: Mapping[str, Any]) -> dict[str, Any]:
    disk: dict[str, Any] = {"size_gb": _size(volume), "raid_level": str(volume["level"]), "controller": "software",
                            "is_root_volume": bool(volume.get("rootVolume"))}
    physical = [device_hints(hints) for hints in volume.get("physicalDisks") or []]
    if physical:
        disk["physical_disks"] = physical
    return disk


def logical_disks(raid: RAIDConfig | None, root_device_hints: bool = True) -> list[dict[str, Any]]:
    """The node's target RAID configuration's logical disks: the hardware volumes when there are any (software
    volumes are then ignored), else the software ones; [] when there are none (nothing is sent to Ironic then).
    Without root device hints and without a root volume, the first volume is the root volume, as upstream's."""
    hardware, software = volumes(raid, HARDWARE) or [], volumes(raid, SOFTWARE) or []
    if hardware:
        names: dict[str, int] = {}
        disks = [_hardware_disk(index, volume, names) for index, volume in enumerate(hardware)]
    elif software:
        if str(software[0].get("level")) != "1":
            raise RAIDError("the level in first volume of software raid must be RAID1")
        disks = [_software_disk(volume) for volume in software]
    else:
        return []
    if not root_device_hints and root_volume_count(raid) == 0:
        disks[0]["is_root_volume"] = True
    return disks


def raid_interface(driver_interface: str, target: RAIDConfig | None, actual: RAIDConfig | None) -> str:
    """The RAID interface the node needs for ``target`` (upstream's CheckRAIDInterface): the driver's own
    (``driver_interface``), or the agent's while software RAID is asked for or still to be removed."""
    if target is None:
        return driver_interface
    if volumes(target, HARDWARE):
        if driver_interface == NO_RAID:
            raise RAIDError(f"RAID settings are defined, but the node's driver {driver_interface} does not support "
                            "RAID")
        if driver_interface == AGENT:
            raise RAIDError(f"hardware RAID settings are defined, but the node's driver {driver_interface} only "
                            "supports software RAID")
    if volumes(target, SOFTWARE) or volumes(actual, SOFTWARE):
        return AGENT
    return driver_interface


def _step(interface: str, step: str) -> dict[str, Any]:
    return {"interface": interface, "step": step, "args": {}}


def raid_clean_steps(driver_interface: str, target: RAIDConfig | None,
                     actual: RAIDConfig | None) -> list[dict[str, Any]]:
    """The manual-cleaning steps that take the node from ``actual`` (None: not known) to ``target`` (None: keep
    what is there), in upstream's order: software RAID is removed, the disks' metadata erased and the new
    volumes created; hardware RAID is removed and created. An empty list removes; a list that is absent keeps."""
    raid_interface(driver_interface, target, actual)
    if target is None:
        return []
    software = volumes(target, SOFTWARE)
    if software is not None:
        if actual is not None and software == volumes(actual, SOFTWARE):
            return []
        if not software and not volumes(actual, SOFTWARE):
            return []
        steps = [_step("raid", "delete_configuration"), _step("deploy", "erase_devices_metadata")]
        return steps + [_step("raid", "create_configuration")] if software else steps
    hardware = volumes(target, HARDWARE)
    if driver_interface == NO_RAID or hardware is None:
        return []
    if actual is not None and hardware == volumes(actual, HARDWARE):
        return []
    steps = [_step("raid", "delete_configuration")]
    return steps + [_step("raid", "create_configuration")] if hardware else steps
