"""The virtual-machine class's own rules: the args a claim may give, the MACs and NIC names its machine gets, the
image's checksum, the config drive (a real ISO, as genisoimage writes it) and the domain libvirt defines."""
from __future__ import annotations

import hashlib
import subprocess
from xml.etree import ElementTree

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import virtual_machine as vm

# spec.args -> the problems (field, the start of why)
ARGS = [
    (None, []),
    ({}, []),
    ({"cpus": "4", "memory": "8Gi", "disk": "40G", "nics": "2"}, []),
    ({"cpus": "0"}, [("spec.args.cpus", "'0' is not a whole number from 1 to 64")]),
    ({"cpus": "two"}, [("spec.args.cpus", "'two' is not a whole number")]),
    ({"nics": "9"}, [("spec.args.nics", "'9' is not a whole number from 1 to 8")]),
    ({"memory": "lots"}, [("spec.args.memory", "'lots' is not a quantity")]),
    ({"memory": "100Mi"}, [("spec.args.memory", "'100Mi' is less than 256Mi")]),
    ({"disk": "512Mi"}, [("spec.args.disk", "'512Mi' is less than 1024Mi")]),
    ({"gpus": "1"}, [("spec.args.gpus", "unknown for kind libvirt")]),
    (["cpus"], [("spec.args", "must be a mapping of strings")]),
]


@pytest.mark.parametrize(("args", "problems"), ARGS)
def test_args(args, problems):
    found = vm.args_problems(args)
    assert [(f, w[:len(want)]) for (f, w), (_field, want) in zip(found, problems, strict=True)] == problems


def test_machine_size_has_defaults_and_refuses_bad_args_naming_the_field():
    assert vm.machine_size(None) == vm.MachineSize(1, 2048, 10 * 1024 ** 3, 1)
    assert vm.machine_size({"memory": "1536Mi", "disk": "20G"}) == vm.MachineSize(1, 1536, 20 * 10 ** 9, 1)
    with pytest.raises(Invalid, match=r"spec\.args\.cpus"):
        vm.machine_size({"cpus": "-1"})


def test_macs_are_stable_per_claim_and_differ_between_claims():
    first = vm.mac_addresses("uid-a", 3)
    assert first == vm.mac_addresses("uid-a", 3)
    assert len(set(first)) == 3 and not set(first) & set(vm.mac_addresses("uid-b", 3))
    assert all(mac.startswith("52:54:00:") for mac in first)


def test_a_claim_names_its_kind_or_is_bare_metal():
    assert vm.claim_kind({"spec": {}}) == "baremetal"
    assert vm.claim_kind({"spec": {"kind": "libvirt"}}) == "libvirt"


# checksum, checksumType -> (algorithm, value) or the error's start
DIGEST = hashlib.sha256(b"image").hexdigest()
CHECKSUMS = [
    (DIGEST, "auto", ("sha256", DIGEST)),
    (DIGEST.upper(), "sha256", ("sha256", DIGEST)),
    (hashlib.md5(b"image").hexdigest(), "auto", ("md5", hashlib.md5(b"image").hexdigest())),  # noqa: S324
    ("abc", "auto", "spec.image.checksum: 'abc' is not a auto checksum"),
    (DIGEST, "md5", f"spec.image.checksum: '{DIGEST}' is not a md5 checksum"),
    ("", "auto", "spec.image.checksum: required"),
]


@pytest.mark.parametrize(("checksum", "kind", "expected"), CHECKSUMS)
def test_checksum(checksum, kind, expected):
    image = {"url": "http://x/debian.qcow2", "checksum": checksum, "checksumType": kind}
    if isinstance(expected, tuple):
        assert vm.checksum_of(image) == expected
    else:
        with pytest.raises(vm.MachineFailure, match="^" + expected.replace("(", r"\(").replace(")", r"\)")):
            vm.checksum_of(image)


def test_a_checksum_file_gives_the_line_naming_the_image(tmp_path):
    sums = tmp_path / "SHA256SUMS"
    sums.write_text(f"{'0' * 64}  other.qcow2\n{DIGEST} *debian.qcow2\n")
    image = {"url": "http://x/images/debian.qcow2", "checksum": f"file://{sums}", "checksumType": "sha256"}
    assert vm.checksum_of(image) == ("sha256", DIGEST)


def test_an_image_is_fetched_once_and_verified(tmp_path):
    source = tmp_path / "debian.qcow2"
    source.write_bytes(b"image")
    machines = vm.LibvirtMachines(vm.LibvirtOptions(bridge="br0", storage_dir=str(tmp_path / "vms")))
    path, image_format = machines._image({"url": f"file://{source}", "checksum": DIGEST, "format": "qcow2"})
    assert (path.read_bytes(), image_format) == (b"image", "qcow2")
    source.write_bytes(b"changed")  # the cached copy serves the same checksum
    assert machines._image({"url": f"file://{source}", "checksum": DIGEST})[0] == path
    with pytest.raises(vm.MachineFailure, match="spec.image.checksum: .* has sha256 "):
        machines._image({"url": f"file://{source}", "checksum": "1" * 64})
    assert sorted(p.name for p in (tmp_path / "vms" / "images").iterdir()) == [path.name]  # no part left
    with pytest.raises(vm.MachineFailure, match="spec.image.url: 'ftp://x/y' is not an http, https or file URL"):
        machines._image({"url": "ftp://x/y", "checksum": DIGEST})


def test_options_without_a_bridge_or_a_directory_are_refused_naming_the_option():
    with pytest.raises(Invalid, match="libvirt_bridge: required"):
        vm.LibvirtMachines(vm.LibvirtOptions(storage_dir="/x"))
    with pytest.raises(Invalid, match="libvirt_storage_dir: required"):
        vm.LibvirtMachines(vm.LibvirtOptions(bridge="br0"))
    assert vm.libvirt_machines({"libvirt_uri": "qemu:///system"}) is None


# genisoimage (and its isoinfo) is a package the lab's role installs (virtual_lab_packages): on a fresh machine it
# is there once the lab's tests, which run first in this group on one worker, have started a lab.
@pytest.mark.xdist_group("virtual-lab")
def test_the_config_drive_is_an_iso_labelled_config_2_with_openstacks_layout(tmp_path):
    path = tmp_path / "drive.iso"
    vm.write_config_drive(path, {"meta_data": {"uuid": "u"}, "user_data": "#cloud-config\n",
                                 "network_data": {"links": []}})
    data = path.read_bytes()
    assert data[32808:32808 + 32].decode().strip() == "config-2"  # the primary volume descriptor's volume id
    # isoinfo comes with genisoimage, which writes the drive: the layout is always read back.
    listed = subprocess.run(["isoinfo", "-R", "-f", "-i", str(path)], capture_output=True, text=True, check=True)
    assert {"/openstack/latest/meta_data.json", "/openstack/latest/user_data",
            "/openstack/latest/network_data.json"} <= set(listed.stdout.split())


def test_the_domain_pins_each_nic_to_its_own_bus_and_records_its_claim(tmp_path):
    files = {"disk": tmp_path / "d.qcow2", "config_drive": tmp_path / "c.iso", "serial_log": tmp_path / "s.log"}
    macs = vm.mac_addresses("uid", 2)
    xml = vm.domain_xml("ns.vm", "uid", vm.MachineSize(2, 1024, 1 << 30, 2), macs, files, "qemu",
                        vm.LibvirtOptions(bridge="br<0>", storage_dir=str(tmp_path)))
    domain = ElementTree.fromstring(xml)
    assert domain.get("type") == "qemu" and domain.findtext("name") == "ns.vm"
    assert domain.find(f".//{{{vm.METADATA_NAMESPACE}}}claim").get("uid") == "uid"
    interfaces = domain.findall("./devices/interface")
    assert [i.find("mac").get("address") for i in interfaces] == macs
    assert [i.find("address").get("bus") for i in interfaces] == ["0x01", "0x02"]
    assert {i.find("source").get("bridge") for i in interfaces} == {"br<0>"}  # escaped, read back whole
    assert [c.get("index") for c in domain.findall("./devices/controller[@model='pcie-root-port']")] == ["1", "2"]
    assert domain.find("./devices/disk[@device='cdrom']/source").get("file") == str(files["config_drive"])
