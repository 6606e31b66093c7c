"""A host's spec.raid as Ironic takes it: the target RAID configuration's logical disks, the RAID interface and the
manual-cleaning steps. The cases are upstream's (pkg/provisioner/ironic/raid_test.go: TestBuildTargetRAIDCfg,
TestBuildRAIDCleanSteps, TestCheckRAIDConfigure), as data; a few of ours follow each table."""
from __future__ import annotations

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.ironic import raid

ROOT_HW, V1_HW = {"name": "root", "level": "1"}, {"name": "v1", "level": "1"}
SW1 = {"level": "1"}

# A software volume's disks, by every root device hint there is.
EVERY_HINT = [{"deviceName": "/dev/vda"},
              {"deviceName": "/dev/disk/by-path/pci-0000:00:05.0", "rotational": False, "model": "QEMU",
               "vendor": "0x1af4", "serialNumber": "S1", "hctl": "0:0:0:0", "wwn": "w", "wwnWithExtension": "we",
               "wwnVendorExtension": "wv"}]

# spec.raid → the logical disks of the target RAID configuration, or upstream's error
LOGICAL_DISKS = [
    pytest.param({"hardwareRAIDVolumes": [{"name": "volume1", "level": "1", "rotational": False,
                                           "physicalDisks": ["Disk-1", "Disk-2"]}]},
                 "'controller' must be specified if 'physicalDisks' are used",
                 id="hardware raid, physicalDisks without controller"),
    pytest.param({"hardwareRAIDVolumes": [{"name": "volume1", "level": "1", "rotational": True,
                                           "physicalDisks": ["Disk-1", "Disk-2"], "numberOfPhysicalDisks": 3,
                                           "controller": "Controller-1"}]},
                 "the numberOfPhysicalDisks[3] is not same as number of items in physicalDisks[2]",
                 id="hardware raid, len(physicalDisks) != numberOfPhysicalDisks"),
    pytest.param({"hardwareRAIDVolumes": [{"name": "root", "level": "1", "rotational": False},
                                          {"name": "v1", "level": "1", "rotational": True}],
                  "softwareRAIDVolumes": [SW1, SW1]},
                 [{"size_gb": "MAX", "raid_level": "1", "volume_name": "root", "disk_type": "ssd"},
                  {"size_gb": "MAX", "raid_level": "1", "volume_name": "v1", "disk_type": "hdd"}],
                 id="hardware raid"),
    pytest.param({"hardwareRAIDVolumes": [V1_HW, V1_HW]}, "the names(v1) of volume[1] and volume[0] are repeated",
                 id="hardware raid, same volume's name"),
    pytest.param({"hardwareRAIDVolumes": [{"name": "", "level": "1"}, {"name": "", "level": "1"}]},
                 [{"size_gb": "MAX", "raid_level": "1"}, {"size_gb": "MAX", "raid_level": "1"}],
                 id="hardware raid, volume's name is empty"),
    pytest.param({"softwareRAIDVolumes": [{"level": "1", "physicalDisks": [{"minSizeGigabytes": 100},
                                                                           {"minSizeGigabytes": 200}]}, SW1]},
                 [{"size_gb": "MAX", "raid_level": "1", "controller": "software", "is_root_volume": False,
                   "physical_disks": [{"size": ">= 100"}, {"size": ">= 200"}]},
                  {"size_gb": "MAX", "raid_level": "1", "controller": "software", "is_root_volume": False}],
                 id="software raid"),
    pytest.param({"softwareRAIDVolumes": [{"level": "1", "rootVolume": True}, SW1]},
                 [{"size_gb": "MAX", "raid_level": "1", "controller": "software", "is_root_volume": True},
                  {"size_gb": "MAX", "raid_level": "1", "controller": "software", "is_root_volume": False}],
                 id="software raid with root volume set, no root device hints"),
    pytest.param({"softwareRAIDVolumes": [{"level": "0"}, SW1]},
                 "the level in first volume of software raid must be RAID1",
                 id="software raid, the level in first volume isn't RAID1"),
    pytest.param(None, [], id="raid is nil"),
    pytest.param({"hardwareRAIDVolumes": None, "softwareRAIDVolumes": None}, [], id="volumes is nil"),
    pytest.param({"hardwareRAIDVolumes": [], "softwareRAIDVolumes": []}, [], id="volumes is empty"),
    # ours: sizes, the other hardware fields, and every hint of a software volume's disks
    pytest.param({"hardwareRAIDVolumes": [{"name": "data", "level": "5", "sizeGibibytes": 100, "controller": "RAID.1",
                                           "physicalDisks": ["d0", "d1", "d2"], "numberOfPhysicalDisks": 3}]},
                 [{"size_gb": 100, "raid_level": "5", "volume_name": "data", "number_of_physical_disks": 3,
                   "controller": "RAID.1", "physical_disks": ["d0", "d1", "d2"]}],
                 id="hardware raid, sized, on named disks"),
    pytest.param({"softwareRAIDVolumes": [{"level": "1", "sizeGibibytes": 0, "physicalDisks": EVERY_HINT}]},
                 [{"size_gb": 0, "raid_level": "1", "controller": "software", "is_root_volume": False,
                   "physical_disks": [{"name": "s== /dev/vda"},
                                      {"by_path": "s== /dev/disk/by-path/pci-0000:00:05.0", "rotational": "false",
                                       "model": "<in> QEMU", "vendor": "<in> 0x1af4", "serial": "s== S1",
                                       "hctl": "s== 0:0:0:0", "wwn": "s== w", "wwn_with_extension": "s== we",
                                       "wwn_vendor_extension": "s== wv"}]}],
                 id="software raid, sized, every hint"),
]


@pytest.mark.parametrize(("spec_raid", "expected"), LOGICAL_DISKS)
def test_logical_disks(spec_raid, expected):
    if isinstance(expected, str):
        with pytest.raises(raid.RAIDError) as error:
            raid.logical_disks(spec_raid)
        assert str(error.value) == expected
    else:
        assert raid.logical_disks(spec_raid) == expected


# upstream's rule in setTargetRAIDCfg: no root device hints and no root volume → the first volume is the root volume
ROOT_VOLUME = [
    pytest.param({"softwareRAIDVolumes": [SW1, SW1]}, False, [True, False], id="software, no hints: the first"),
    pytest.param({"softwareRAIDVolumes": [SW1, SW1]}, True, [False, False], id="software, hints: none"),
    pytest.param({"softwareRAIDVolumes": [SW1, {"level": "1", "rootVolume": True}]}, False, [False, True],
                 id="software, a root volume: that one"),
    pytest.param({"hardwareRAIDVolumes": [ROOT_HW, V1_HW]}, False, [True, None], id="hardware, no hints: the first"),
    pytest.param({"hardwareRAIDVolumes": [ROOT_HW, V1_HW]}, True, [None, None], id="hardware, hints: not said"),
]


@pytest.mark.parametrize(("spec_raid", "hints", "roots"), ROOT_VOLUME)
def test_the_root_volume(spec_raid, hints, roots):
    assert [disk.get("is_root_volume") for disk in raid.logical_disks(spec_raid, hints)] == roots


DELETE, ERASE, CREATE = "raid.delete_configuration", "deploy.erase_devices_metadata", "raid.create_configuration"

# the driver's RAID interface, target, actual → the clean steps, or an error (upstream's TestBuildRAIDCleanSteps)
CLEAN_STEPS = [
    pytest.param("redfish", None, None, [], id="keep hardware RAID on nil"),
    pytest.param("redfish", {}, None, [], id="keep hardware RAID on empty config"),
    pytest.param("redfish", {"hardwareRAIDVolumes": [ROOT_HW]}, None, [DELETE, CREATE], id="configure hardware RAID"),
    pytest.param("redfish", {"hardwareRAIDVolumes": [ROOT_HW]}, {"hardwareRAIDVolumes": [ROOT_HW]}, [],
                 id="have same hardware RAID"),
    pytest.param("redfish", {"hardwareRAIDVolumes": []}, {"hardwareRAIDVolumes": [ROOT_HW]}, [DELETE],
                 id="clear hardware RAID"),
    pytest.param("agent", {"softwareRAIDVolumes": [SW1]}, None, [DELETE, ERASE, CREATE], id="configure software RAID"),
    pytest.param("agent", {"softwareRAIDVolumes": [SW1]}, {"softwareRAIDVolumes": [SW1]}, [],
                 id="have same software RAID"),
    pytest.param("agent", {"softwareRAIDVolumes": []}, None, [], id="keep missing software RAID"),
    pytest.param("agent", {"softwareRAIDVolumes": []}, {}, [], id="keep empty software RAID"),
    pytest.param("agent", {"softwareRAIDVolumes": []}, {"softwareRAIDVolumes": [SW1]}, [DELETE, ERASE],
                 id="clear software RAID"),
    # ours: what the host sends - both lists, null where absent - and the driver refusing
    pytest.param("redfish", {"hardwareRAIDVolumes": [ROOT_HW], "softwareRAIDVolumes": None},
                 {"hardwareRAIDVolumes": [ROOT_HW], "softwareRAIDVolumes": []}, [],
                 id="the same hardware RAID, whatever the software list"),
    pytest.param("redfish", {"hardwareRAIDVolumes": [ROOT_HW], "softwareRAIDVolumes": []}, None, [],
                 id="an empty software list takes over: the hardware RAID is kept"),
    pytest.param("fake", {"hardwareRAIDVolumes": [V1_HW]}, {"hardwareRAIDVolumes": [ROOT_HW]}, [DELETE, CREATE],
                 id="other hardware RAID"),
    pytest.param("no-raid", {"hardwareRAIDVolumes": [ROOT_HW]}, None,
                 "RAID settings are defined, but the node's driver no-raid does not support RAID",
                 id="a driver without RAID"),
    pytest.param("no-raid", {"hardwareRAIDVolumes": []}, None, [], id="a driver without RAID, nothing to clear"),
]


@pytest.mark.parametrize(("interface", "target", "actual", "expected"), CLEAN_STEPS)
def test_raid_clean_steps(interface, target, actual, expected):
    if isinstance(expected, str):
        with pytest.raises(raid.RAIDError) as error:
            raid.raid_clean_steps(interface, target, actual)
        assert str(error.value) == expected
    else:
        steps = raid.raid_clean_steps(interface, target, actual)
        assert [f"{step['interface']}.{step['step']}" for step in steps] == expected
        assert all(step["args"] == {} for step in steps)


# the driver's RAID interface, target, actual → the interface the node needs, or None for an error
# (upstream's TestCheckRAIDConfigure)
INTERFACES = [
    pytest.param("no-raid", None, None, "no-raid", id="no-raid with nil config"),
    pytest.param("no-raid", {}, None, "no-raid", id="no-raid with empty config"),
    pytest.param("no-raid", {"hardwareRAIDVolumes": [ROOT_HW]}, None, None, id="no-raid with hardware RAID"),
    pytest.param("no-raid", {"softwareRAIDVolumes": [SW1]}, None, "agent", id="no-raid with software RAID"),
    pytest.param("agent", None, None, "agent", id="agent with nil config"),
    pytest.param("agent", {}, None, "agent", id="agent with empty config"),
    pytest.param("agent", {"hardwareRAIDVolumes": [ROOT_HW]}, None, None, id="agent with hardware RAID"),
    pytest.param("agent", {"softwareRAIDVolumes": [SW1]}, None, "agent", id="agent with software RAID"),
    pytest.param("hardware", None, None, "hardware", id="hardware with nil config"),
    pytest.param("hardware", {}, None, "hardware", id="hardware with empty config"),
    pytest.param("hardware", {"hardwareRAIDVolumes": [ROOT_HW]}, None, "hardware", id="hardware with hardware RAID"),
    pytest.param("hardware", {"softwareRAIDVolumes": [SW1]}, None, "agent", id="hardware with software RAID"),
    pytest.param("hardware", {"softwareRAIDVolumes": []}, {"softwareRAIDVolumes": [SW1]}, "agent",
                 id="hardware with empty software RAID clearing current"),
]


@pytest.mark.parametrize(("interface", "target", "actual", "expected"), INTERFACES)
def test_raid_interface(interface, target, actual, expected):
    if expected is None:
        with pytest.raises(raid.RAIDError):
            raid.raid_interface(interface, target, actual)
    else:
        assert raid.raid_interface(interface, target, actual) == expected
