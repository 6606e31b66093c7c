"""The virtual-machine class's own rules: the args a claim may give, the MACs and NIC names its machine gets, the
image's checksum, the image itself (read by the real qemu-img: it refers to no other file), the config drive (a
real ISO, as genisoimage writes it), the files a machine gets (0600) and the domain libvirt defines."""
from __future__ import annotations

import hashlib
import json
import stat
import subprocess
import time
from xml.etree import ElementTree

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.compute import libvirt as vm
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from tests.harness.fixture_machines import VirshlessMachines
from tests.harness.http_files import ServedFiles

LOOPBACK = OutboundPolicy.of(["127.0.0.1"])  # the test's server is on loopback: allowed by name, as an operator would


@pytest.fixture
def served():
    files = ServedFiles()
    yield files
    files.close()


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
    # Absurd sizes: refused at once, whatever the operator's limits (which the reconcile enforces).
    ({"memory": "1e5000"}, [("spec.args.memory", "'1e5000' is not a quantity")]),
    ({"memory": "1e999999"}, [("spec.args.memory", "'1e999999' is not a quantity")]),
    ({"memory": "9223372036854775808"}, [("spec.args.memory", "'9223372036854775808' is more than 16Ti")]),
    ({"memory": "1Ei"}, [("spec.args.memory", "'1Ei' is more than 16Ti")]),
    ({"disk": "1Pi"}, [("spec.args.disk", "'1Pi' is more than 64Ti")]),
    ({"cpus": "1" * 5000}, [("spec.args.cpus", "'1111111111")]),
    ({"cpus": "\u00b2"}, [("spec.args.cpus", "'\u00b2' is not a whole number")]),
]


@pytest.mark.parametrize(("args", "problems"), ARGS)
def test_args(args, problems):
    started = time.process_time()
    found = vm.args_problems(args)
    assert [(f, w[:len(want)]) for (f, w), (_field, want) in zip(found, problems, strict=True)] == problems
    assert time.process_time() - started < 0.5
    assert all(len(why) < 400 for _field, why in found)  # a megabyte of a value is not repeated


# a machine's size, the operator's limits -> the problems (field, the start of why)
LIMITS = [
    (vm.MachineSize(16, 64 * 1024, 512 << 30, 1), vm.MachineLimits(), []),
    (vm.MachineSize(17, 1024, 1 << 30, 1), vm.MachineLimits(),
     [("spec.args.cpus", "17 is more than this controller serves (libvirt_max_cpus: 16)")]),
    (vm.MachineSize(1, 65 * 1024, 1 << 30, 1), vm.MachineLimits(),
     [("spec.args.memory", "65Gi is more than this controller serves (libvirt_max_memory: 64Gi)")]),
    (vm.MachineSize(1, 1024, 1 << 50, 1), vm.MachineLimits(disk=100 << 30),
     [("spec.args.disk", "1Pi is more than this controller serves (libvirt_max_disk: 100Gi)")]),
]


@pytest.mark.parametrize(("size", "limits", "problems"), LIMITS)
def test_the_operators_limits(size, limits, problems):
    assert vm.limit_problems(size, limits) == problems


# module parameters -> the options' limits, or the error naming the option
OPTIONS = [
    ({}, (vm.MachineLimits(16, 64 << 30, 512 << 30), 20 << 30, 1800)),
    ({"libvirt_max_cpus": 4, "libvirt_max_memory": "8Gi", "libvirt_max_disk": "100G", "libvirt_max_image_size": "1Gi",
      "libvirt_image_timeout": 60}, (vm.MachineLimits(4, 8 << 30, 100 * 10 ** 9), 1 << 30, 60)),
    ({"libvirt_max_memory": "lots"}, "libvirt_max_memory: 'lots' is not a positive quantity"),
    ({"libvirt_max_disk": "1e999999"}, "libvirt_max_disk: '1e999999' is not a positive quantity"),
    ({"libvirt_max_image_size": "0"}, "libvirt_max_image_size: '0' is not a positive quantity"),
    ({"libvirt_max_cpus": 0}, "libvirt_max_cpus: 0 is not a whole number of at least 1"),
    ({"libvirt_image_timeout": "soon"}, "libvirt_image_timeout: 'soon' is not a whole number"),
]


@pytest.mark.parametrize(("params", "expected"), OPTIONS)
def test_the_limits_are_operator_options(params, expected):
    if isinstance(expected, str):
        with pytest.raises(Invalid, match="^" + expected):
            vm.libvirt_machines(params)  # whether or not this run serves libvirt
        return
    options = vm.LibvirtOptions.from_params(params)
    assert (options.limits, options.max_image_size, options.image_timeout) == expected


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
    ("file:///etc/passwd", "auto", "spec.image.checksum: 'file:///etc/passwd' is not an http or https URL"),
    ("http://127.0.0.1:1/SHA256SUMS", "auto", "spec.image.checksum: 'http://127.0.0.1:1/SHA256SUMS' names a loopback"),
    ("http://169.254.169.254/latest", "auto", "spec.image.checksum: 'http://169.254.169.254/latest' names a loopback"),
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


def test_a_checksum_file_gives_the_line_naming_the_image(served):
    served.files["/SHA256SUMS"] = f"{'0' * 64}  other.qcow2\n{DIGEST} *debian.qcow2\n".encode()
    image = {"url": "http://x/images/debian.qcow2", "checksum": served.url("/SHA256SUMS"), "checksumType": "sha256"}
    assert vm.checksum_of(image, LOOPBACK) == ("sha256", DIGEST)
    with pytest.raises(vm.MachineFailure, match="names a loopback or link-local host"):
        vm.checksum_of(image)  # the operator has not allowed loopback
    assert served.requests == ["/SHA256SUMS"]


JUNK = "root:x:0:0:root:/root:/bin/bash\nsecret-token-1234 debian.qcow2\n"


@pytest.mark.parametrize(("body", "kind"), [(JUNK, "auto"), (f"{DIGEST} debian.qcow2\n", "md5"), ("", "auto")])
def test_a_checksum_file_that_names_no_checksum_is_refused_and_never_echoed(served, body, kind):
    served.files["/SUMS"] = body.encode()
    image = {"url": "http://x/images/debian.qcow2", "checksum": served.url("/SUMS"), "checksumType": kind}
    with pytest.raises(vm.MachineFailure) as refused:
        vm.checksum_of(image, LOOPBACK)
    kinds = "md5/sha256/sha512" if kind == "auto" else kind
    assert str(refused.value) == (f"spec.image.checksum: the checksum file at '{served.url('/SUMS')}' names no "
                                  f"{kinds} checksum for 'debian.qcow2'")
    for word in ("root", "secret-token", DIGEST):
        assert word not in str(refused.value)


def test_a_checksum_file_that_is_not_there_says_so_without_the_servers_words(served):
    image = {"url": "http://x/images/debian.qcow2", "checksum": served.url("/gone")}
    with pytest.raises(vm.MachineFailure, match=r"^spec\.image\.checksum: '.*/gone' the server answered HTTP 404$"):
        vm.checksum_of(image, LOOPBACK)


def qemu_img(*argv):
    subprocess.run(["qemu-img", *argv], check=True, capture_output=True)


def qcow2(path, size="64M", *options):
    qemu_img("create", "-q", "-f", "qcow2", *options, str(path), size)
    return path.read_bytes()


def machines_on(tmp_path, **options):
    return VirshlessMachines(vm.LibvirtOptions(bridge="br0", storage_dir=str(tmp_path / "vms"), **options), LOOPBACK)


# qemu-img comes with the lab's packages (virtual_lab_packages), as genisoimage: this group runs after the lab's tests.
@pytest.mark.xdist_group("virtual-lab")
def test_an_image_is_fetched_once_verified_and_kept_0600(tmp_path, served):
    body = qcow2(tmp_path / "debian.qcow2")
    served.files["/debian.qcow2"] = body
    digest = hashlib.sha256(body).hexdigest()
    url = served.url("/debian.qcow2")
    machines = machines_on(tmp_path)
    path, image_format = machines._image({"url": url, "checksum": digest, "format": "qcow2"})
    assert (path.read_bytes(), image_format) == (body, "qcow2")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    served.files["/debian.qcow2"] = b"changed"  # the cached copy serves the same checksum
    assert machines._image({"url": url, "checksum": digest})[0] == path
    assert served.requests == ["/debian.qcow2"]
    with pytest.raises(vm.MachineFailure) as mismatch:
        machines._image({"url": url, "checksum": "1" * 64})
    assert str(mismatch.value) == f"spec.image.checksum: the image at '{url}' does not match its sha256 checksum"
    assert hashlib.sha256(b"changed").hexdigest() not in str(mismatch.value)  # what the file hashes to: not told
    assert sorted(p.name for p in (tmp_path / "vms" / "images").iterdir()) == [path.name]  # no part left
    for bad, why in (("ftp://x/y", "'ftp://x/y' is not an http or https URL"),
                     (f"file://{tmp_path}/debian.qcow2", "is not an http or https URL"),
                     ("http://[::1]/x", "names a loopback or link-local host")):
        with pytest.raises(vm.MachineFailure, match=f"^spec.image.url: .*{why}"):
            vm.LibvirtMachines(machines.options)._image({"url": bad, "checksum": digest})


def test_an_image_larger_than_the_operator_allows_is_refused_and_nothing_kept(tmp_path, served):
    served.files["/big.img"] = b"x" * (3 << 20)
    machines = machines_on(tmp_path, max_image_size=1 << 20)
    with pytest.raises(vm.MachineFailure, match=r"^spec\.image\.url: .* is larger than this controller allows"):
        machines._image({"url": served.url("/big.img"), "checksum": "1" * 64, "format": "raw"})
    assert list((tmp_path / "vms" / "images").iterdir()) == []


# What an image's header may name besides itself: each would make the machine's disk read that other file.
def backing_file(tmp_path, secret):
    return qcow2(tmp_path / "evil.qcow2", "2G", "-b", str(secret), "-F", "raw")


def json_backing(tmp_path, secret):
    target = json.dumps({"file": {"driver": "file", "filename": str(secret)}})
    return qcow2(tmp_path / "evil.qcow2", "2G", "-b", f"json:{target}", "-F", "raw")


def data_file(tmp_path, secret):
    return qcow2(tmp_path / "evil.qcow2", "2G", "-o", f"data_file={tmp_path / 'data.raw'}")


def raw_bytes(tmp_path, secret):
    return b"\0" * (1 << 20)


EVIL = [
    (backing_file, "qcow2", "names a backing file"),
    (json_backing, "qcow2", "names a backing file"),
    (data_file, "qcow2", "names an external data file"),
    (raw_bytes, "qcow2", "is not a qcow2 image (spec.image.format)"),
]


@pytest.mark.xdist_group("virtual-lab")
@pytest.mark.parametrize(("make", "image_format", "why"), EVIL, ids=[e[0].__name__ for e in EVIL])
def test_an_image_that_refers_to_another_file_is_refused_before_any_layer(tmp_path, served, make, image_format,
                                                                          why):
    secret = tmp_path / "another-tenants-disk.qcow2"
    secret.write_bytes(b"SECRET" * 1000)
    body = make(tmp_path, secret)
    served.files["/evil.qcow2"] = body
    machines = machines_on(tmp_path)
    image = {"url": served.url("/evil.qcow2"), "checksum": hashlib.sha256(body).hexdigest(), "format": image_format}
    with pytest.raises(vm.MachineFailure) as refused:
        machines.create("t.vm", "uid", vm.MachineSize(1, 512, 1 << 30, 1), ["52:54:00:00:00:01"], image, {})
    assert str(refused.value).startswith(f"spec.image: the image at '{image['url']}' {why}")
    assert str(secret) not in str(refused.value) and "SECRET" not in str(refused.value)
    assert sorted(p.name for p in (tmp_path / "vms").iterdir()) == ["images"]  # no disk, no drive, no domain
    assert list((tmp_path / "vms" / "images").iterdir()) == []  # not cached
    assert machines.get("t.vm") is None


@pytest.mark.xdist_group("virtual-lab")
def test_a_cached_image_is_checked_again_before_each_use(tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(b"SECRET")
    body = backing_file(tmp_path, secret)
    digest = hashlib.sha256(body).hexdigest()
    images = tmp_path / "vms" / "images"
    images.mkdir(parents=True)
    (images / f"sha256-{digest}.qcow2").write_bytes(body)  # cached before images were checked
    machines = machines_on(tmp_path)
    with pytest.raises(vm.MachineFailure, match="names a backing file"):
        machines._image({"url": "http://images.example/evil.qcow2", "checksum": digest, "format": "qcow2"})
    assert list(images.iterdir()) == []


@pytest.mark.xdist_group("virtual-lab")
def test_a_raw_image_is_layered_as_raw_whatever_its_bytes_say(tmp_path, served):
    secret = tmp_path / "secret"
    secret.write_bytes(b"SECRET")
    body = backing_file(tmp_path, secret)  # a qcow2 header naming a backing file, declared raw: read as raw bytes
    served.files["/disk.img"] = body
    machines = machines_on(tmp_path)
    image = {"url": served.url("/disk.img"), "checksum": hashlib.sha256(body).hexdigest(), "format": "raw"}
    machines.create("t.vm", "uid", vm.MachineSize(1, 512, 2 << 30, 1), ["52:54:00:00:00:01"], image,
                    {"meta_data": {"uuid": "uid"}})
    disk = tmp_path / "vms" / "t.vm.qcow2"
    info = json.loads(subprocess.run(["qemu-img", "info", "--output=json", "-U", "-f", "qcow2", str(disk)],
                                     capture_output=True, text=True, check=True).stdout)
    assert info["backing-filename-format"] == "raw"
    assert info["backing-filename"].endswith(".raw")


@pytest.mark.xdist_group("virtual-lab")
def test_a_machines_files_are_the_controllers_alone(tmp_path, served):
    body = qcow2(tmp_path / "debian.qcow2")
    served.files["/debian.qcow2"] = body
    machines = machines_on(tmp_path)
    stale = tmp_path / "vms" / "t.vm.log"  # left world-readable by a half-made machine before
    stale.parent.mkdir(parents=True)
    stale.write_text("old")
    stale.chmod(0o644)
    image = {"url": served.url("/debian.qcow2"), "checksum": hashlib.sha256(body).hexdigest(), "format": "qcow2"}
    machines.create("t.vm", "uid", vm.MachineSize(1, 512, 2 << 30, 1), ["52:54:00:00:00:01"], image,
                    {"meta_data": {"uuid": "uid"}, "user_data": "#cloud-config\n"})
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "vms").rglob("*") if p.is_file()}
    assert modes == {"t.vm.qcow2": 0o600, "t.vm-config-2.iso": 0o600, "t.vm.log": 0o600,
                     f"sha256-{hashlib.sha256(body).hexdigest()}.qcow2": 0o600}
    assert stale.read_text() == ""
    assert "t.vm" in machines.defined


def test_options_without_a_bridge_or_a_directory_are_refused_naming_the_option():
    with pytest.raises(Invalid, match="libvirt_bridge: required"):
        vm.LibvirtMachines(vm.LibvirtOptions(storage_dir="/x"))
    with pytest.raises(Invalid, match="libvirt_storage_dir: required"):
        vm.LibvirtMachines(vm.LibvirtOptions(bridge="br0"))
    assert vm.libvirt_machines({"libvirt_uri": "qemu:///system"}) is None
    machines = vm.libvirt_machines({"libvirt_bridge": "br0", "libvirt_storage_dir": "vms",
                                    "allowed_local_hosts": ["127.0.0.1"]})
    assert machines.policy == LOOPBACK and machines.dir.is_absolute()


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
