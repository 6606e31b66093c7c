# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The virtual-machine class of compute: what serves a HostClaim whose ``spec.kind`` is ``libvirt``.

A claim of kind ``libvirt`` (upstream's hybrid-cluster design, compute/base.py) gets a disposable virtual machine,
no Ironic involved: its size from ``spec.args`` (``cpus``, ``memory``, ``disk``, ``nics``), its disk a
copy-on-write layer over the claim's image (fetched once per checksum and verified), its cloud-init data on an
OpenStack config drive (ISO 9660, volume ``config-2``: ``openstack/latest/meta_data.json``, ``user_data``,
``network_data.json``, as Ironic writes one), powered as ``poweredOn`` asks; deleted, disk and drive with it, on
release. Where it is defined (the libvirt URI, the bridge its NICs join, the directory of its disks) is the
controller's configuration (``LibvirtOptions``), never the tenant's.

``Libvirt`` is the class the HostClaim flow calls (compute/base.py): bound at once to a machine of its own, named
after the claim, whose hardware (size from spec.args, NICs with MACs derived from the claim's uid) its
HardwareData shows before the machine exists; the machine made once the claim has an image, from the claim's own
Secrets (no copies: there is no host namespace), powered as poweredOn asks; on release, the machine with its disk
and config drive deleted - only one this claim made. It reaches the hypervisor through ``VirtualMachines`` (the
``libvirt`` driver in ``Services``), so that it is tested against a fixture; ``LibvirtMachines`` drives libvirt
with virsh and qemu-img.

The tenant writes the claim; the controller fetches and runs it with its own rights on its own file system. So:

- the image and checksum URLs are fetched through the operator's ``OutboundPolicy`` (core/outbound.py: http(s)
  only, never the controller's own hosts unless the operator allows them), bounded in size and time, and what they
  answered is never echoed into the claim's status (no checksum file's line, no computed digest);
- an image is read by ``qemu-img info`` with its declared format (never probed) before it enters the images cache
  and again before each use, and refused when it refers to any other file (a backing file, an external data file,
  a ``json:`` target) or is not of its declared format: the machine's disk is a layer over it, and qemu would
  otherwise open whatever file the tenant's header names;
- the machine's size is bounded twice: admission's fixed sanity bounds (``args_problems``), and the operator's
  limits (``MachineLimits``, the ``libvirt_max_*`` options) in the reconcile;
- the machine's files (its disk, config drive and serial log) and the cached images are the controller's: 0600.
"""
from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Protocol
from xml.etree import ElementTree
from xml.sax.saxutils import escape, quoteattr

from ansible_collections.metal3.baremetal.plugins.module_utils.compute.base import (
    READY_CONDITION,
    UNREACHABLE_WAIT,
    Bound,
    ClaimState,
    ComputeClass,
    Observed,
    Services,
    Stuck,
    Waiting,
    claim_kind,
    image_url_problems,
    image_urls,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import DomainError, Invalid, Unavailable
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import (
    Deadline,
    OutboundPolicy,
    Refused,
    describe,
    read_bounded,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.quantity import (
    RULE,
    format_bytes,
    parse_quantity,
    whole,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.admission import Problem
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (
    API,
    AVAILABLE,
    PROVISIONED,
    REBOOT_ANNOTATION,
    HostFailure,
    config_drive,
    host_state,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (
    KIND as HOST_KIND,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.claim import FAILURE_DOMAIN_LABEL

LIBVIRT = "libvirt"
# The claim's spec.args a libvirt machine reads, with their defaults.
DEFAULT_ARGS = {"cpus": "1", "memory": "2Gi", "disk": "10Gi", "nics": "1"}
MAX_NICS = 8
MAX_CPUS = 64
# Admission's fixed sanity bounds on a machine's memory and disk (what no host serves, whatever the operator's
# limits); the operator's own limits (MachineLimits) are enforced in the reconcile.
MAX_MEMORY = 16 << 40
MAX_DISK = 64 << 40
# Our element in a domain's <metadata>: the claim that made it (a domain without it, or another claim's, is left
# alone).
METADATA_NAMESPACE = "https://metal3.baremetal/hostclaim"
MIB = 1024 * 1024
GIB = 1024 * MIB
# A checksum file is small (a line per image); one larger is refused, not read.
MAX_CHECKSUM_FILE = 1 << 20
# Ours, on a claim of kind libvirt.
MACHINE_ASSOCIATED, MACHINE_FAILED = "VirtualMachineAssociated", "VirtualMachineFailed"


class MachineFailure(DomainError):
    """The machine cannot be made as the claim asks (its image cannot be fetched or does not match its checksum,
    its disk is smaller than the image): the claim says so until its spec changes."""


@dataclass(frozen=True)
class MachineSize:
    cpus: int
    memory_mib: int
    disk_bytes: int
    nics: int


@dataclass(frozen=True)
class MachineLimits:
    """The largest machine this controller makes (options libvirt_max_cpus, libvirt_max_memory, libvirt_max_disk):
    a claim asking for more fails naming its arg and the limit."""

    cpus: int = 16
    memory: int = 64 * GIB
    disk: int = 512 * GIB


def _shown(value: Any, limit: int = 60) -> str:
    """A tenant's value in a message, cut short: a megabyte of it is not repeated into the status."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def args_problems(args: Any) -> list[tuple[str, str]]:
    """What is wrong with a libvirt claim's spec.args, as (field, why)."""
    if args is None:
        return []
    if not isinstance(args, dict):
        return [("spec.args", "must be a mapping of strings")]
    problems: list[tuple[str, str]] = []
    for key in sorted(set(args) - set(DEFAULT_ARGS)):
        problems.append((f"spec.args.{key}", f"unknown for kind {LIBVIRT} (known: {', '.join(DEFAULT_ARGS)})"))
    for key in ("cpus", "nics"):
        if key in args:
            value = str(args[key])
            limit = MAX_NICS if key == "nics" else MAX_CPUS
            if not re.fullmatch(r"[0-9]{1,6}", value) or not 1 <= int(value) <= limit:
                problems.append((f"spec.args.{key}", f"{_shown(value)} is not a whole number from 1 to {limit}"))
    for key, least, most in (("memory", 256 * MIB, MAX_MEMORY), ("disk", 1024 * MIB, MAX_DISK)):
        if key in args:
            amount = parse_quantity(str(args[key]))
            if amount is None:
                problems.append((f"spec.args.{key}", f"{_shown(args[key])} is not a quantity ({RULE})"))
            elif whole(amount) < least:
                problems.append((f"spec.args.{key}", f"{_shown(args[key])} is less than {least // MIB}Mi"))
            elif whole(amount) > most:
                problems.append((f"spec.args.{key}", f"{_shown(args[key])} is more than {format_bytes(most)}"))
    return problems


def limit_problems(size: MachineSize, limits: MachineLimits) -> list[tuple[str, str]]:
    """What of a machine's size is more than this controller's limits allow, as (field, why)."""
    problems = []
    if size.cpus > limits.cpus:
        problems.append(("spec.args.cpus", f"{size.cpus} is more than this controller serves (libvirt_max_cpus: "
                                           f"{limits.cpus})"))
    for key, amount, limit in (("memory", size.memory_mib * MIB, limits.memory), ("disk", size.disk_bytes,
                                                                                  limits.disk)):
        if amount > limit:
            problems.append((f"spec.args.{key}", f"{format_bytes(amount)} is more than this controller serves "
                                                 f"(libvirt_max_{key}: {format_bytes(limit)})"))
    return problems


def machine_size(args: dict[str, Any] | None) -> MachineSize:
    """The machine a claim's spec.args ask for; Invalid naming the first bad field."""
    problems = args_problems(args)
    if problems:
        raise Invalid("; ".join(f"{field}: {why}" for field, why in problems))
    given = {**DEFAULT_ARGS, **{k: str(v) for k, v in (args or {}).items()}}
    memory, disk = parse_quantity(given["memory"]), parse_quantity(given["disk"])
    if memory is None or disk is None:  # checked above: for mypy
        raise Invalid("spec.args: memory and disk must be quantities")
    return MachineSize(int(given["cpus"]), whole(memory) // MIB, whole(disk), int(given["nics"]))


def domain_name(namespace: str, name: str) -> str:
    """The machine of claim ``namespace/name``: ``<namespace>.<name>`` (a namespace has no dot, so no two claims
    share one), which is also a valid object name for what reads the claim's host."""
    return f"{namespace}.{name}"


def mac_addresses(claim_uid: str, count: int) -> list[str]:
    """The machine's NICs' MAC addresses: locally administered, derived from the claim's uid, so that every
    reconcile (and the HardwareData a data template reads before the machine exists) agrees on them."""
    macs = []
    for index in range(count):
        digest = hashlib.sha256(f"{claim_uid}/{index}".encode()).digest()
        macs.append("52:54:00:" + ":".join(f"{b:02x}" for b in digest[:3]))
    return macs


def nic_name(index: int) -> str:
    """The name the guest's kernel gives NIC ``index``: each NIC has its own PCI Express bus (1, 2, ...; the
    domain pins them there), so systemd's predictable names are enp1s0, enp2s0, ..."""
    return f"enp{index + 1}s0"


def hardware(size: MachineSize, macs: list[str], hostname: str) -> dict[str, Any]:
    """The machine's hardware in BareMetalHost status.hardware's shape, known before it exists: what its
    HardwareData shows and a data template renders from (NICs by name and MAC)."""
    return {"cpu": {"arch": "x86_64", "count": size.cpus, "model": "QEMU Virtual CPU"},
            "ramMebibytes": size.memory_mib,
            "nics": [{"name": nic_name(i), "mac": mac, "model": "virtio", "pxe": i == 0}
                     for i, mac in enumerate(macs)],
            "storage": [{"name": "/dev/vda", "sizeBytes": size.disk_bytes, "rotational": False,
                         "type": "HDD", "model": "virtio"}],
            "hostname": hostname,
            "systemVendor": {"manufacturer": "QEMU", "productName": "libvirt virtual machine"}}


@dataclass
class VirtualMachine:
    """A machine as the hypervisor shows it: its name, the uid of the claim that made it ('' when none did), and
    whether it runs."""

    name: str
    owner: str
    running: bool


class VirtualMachines(Protocol):
    """The hypervisor, as the claim's flow sees it, and the largest machine it makes. Unavailable when it does
    not answer."""

    @property
    def limits(self) -> MachineLimits: ...

    def check_image(self, image: Mapping[str, Any]) -> None:
        """MachineFailure naming the field when the image's or its checksum file's URL is one this controller
        does not fetch; nothing is fetched and the hypervisor is not asked anything."""

    def get(self, name: str) -> VirtualMachine | None: ...

    def create(self, name: str, owner: str, size: MachineSize, macs: list[str], image: Mapping[str, Any],
               config_drive: dict[str, Any]) -> None: ...

    def power(self, name: str, on: bool) -> None: ...

    def reboot(self, name: str) -> None: ...

    def delete(self, name: str) -> None: ...


@dataclass(frozen=True)
class LibvirtOptions:
    """Where the class's machines live: libvirt's URI, the bridge every NIC joins, the directory of their disks,
    config drives and serial logs (and the images they start from), and the domain type (``kvm``, ``qemu``, or
    ``auto``: kvm where /dev/kvm can be used)."""

    uri: str = "qemu:///system"
    bridge: str = ""
    storage_dir: str = ""
    domain_type: str = "auto"
    emulator: str = "/usr/bin/qemu-system-x86_64"
    limits: MachineLimits = field(default_factory=MachineLimits)
    max_image_size: int = 20 * GIB  # bytes of one image (or checksum file) downloaded
    image_timeout: int = 1800  # seconds one image's download (its checksum file's included) may take

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> LibvirtOptions:
        """The options as a module (or the operator's role) gives them; Invalid naming the one that is wrong."""
        defaults = cls()
        return cls(uri=params.get("libvirt_uri") or "qemu:///system", bridge=params.get("libvirt_bridge") or "",
                   storage_dir=params.get("libvirt_storage_dir") or "",
                   domain_type=params.get("libvirt_domain_type") or "auto",
                   limits=MachineLimits(cpus=_count_option(params, "libvirt_max_cpus", defaults.limits.cpus),
                                        memory=_bytes_option(params, "libvirt_max_memory", defaults.limits.memory),
                                        disk=_bytes_option(params, "libvirt_max_disk", defaults.limits.disk)),
                   max_image_size=_bytes_option(params, "libvirt_max_image_size", defaults.max_image_size),
                   image_timeout=_count_option(params, "libvirt_image_timeout", defaults.image_timeout))


def _count_option(params: dict[str, Any], name: str, default: int) -> int:
    value = params.get(name)
    if value is None or value == "":
        return default
    if isinstance(value, bool) or not re.fullmatch(r"[0-9]{1,9}", str(value).strip()) or int(value) < 1:
        raise Invalid(f"{name}: {_shown(value)} is not a whole number of at least 1")
    return int(value)


def _bytes_option(params: dict[str, Any], name: str, default: int) -> int:
    value = params.get(name)
    if value is None or value == "":
        return default
    amount = parse_quantity(value if isinstance(value, int) else str(value))
    if amount is None or whole(amount) < 1:
        raise Invalid(f"{name}: {_shown(value)} is not a positive quantity of bytes ({RULE})")
    return whole(amount)


def libvirt_machines(params: dict[str, Any]) -> VirtualMachines | None:
    """The hypervisor the module's libvirt options describe, fetching what claims name through the operator's
    outbound policy (allowed_local_hosts); None when they give no bridge (claims of kind libvirt then say that this
    controller serves none). Invalid naming an option that is wrong, whether or not libvirt is served."""
    options = LibvirtOptions.from_params(params)
    policy = OutboundPolicy.from_params(params)
    return LibvirtMachines(options, policy) if options.bridge or options.storage_dir else None


class LibvirtMachines:
    """VirtualMachines on libvirt (virsh) with disks made by qemu-img and config drives by genisoimage; images
    and checksum files fetched through ``policy``."""

    def __init__(self, options: LibvirtOptions, policy: OutboundPolicy | None = None) -> None:
        if not options.bridge:
            raise Invalid("libvirt_bridge: required for HostClaims of kind libvirt (the bridge their NICs join)")
        if not options.storage_dir:
            raise Invalid("libvirt_storage_dir: required for HostClaims of kind libvirt (where their disks live)")
        self.options = options
        self.policy = policy if policy is not None else OutboundPolicy()
        # Absolute: libvirt wants it, and qemu-img reads ``word:`` before the first slash as a protocol.
        self.dir = Path(os.path.abspath(options.storage_dir))

    @property
    def limits(self) -> MachineLimits:
        return self.options.limits

    def check_image(self, image: Mapping[str, Any]) -> None:
        check_image_urls(image, self.policy)

    # -- virsh -----------------------------------------------------------------------------------------------
    def _virsh(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        try:
            done = subprocess.run(["virsh", "-q", "-c", self.options.uri, *argv], capture_output=True, text=True,
                                  check=False, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise Unavailable(f"libvirt at {self.options.uri}: {e}") from None
        if check and done.returncode != 0:
            why = (done.stderr or done.stdout).strip()
            if "failed to connect" in why.lower():
                raise Unavailable(f"libvirt at {self.options.uri}: {why}")
            raise MachineFailure(f"virsh {argv[0]} {argv[1] if len(argv) > 1 else ''}: {why}")
        return done

    def get(self, name: str) -> VirtualMachine | None:
        done = self._virsh("dumpxml", name, check=False)
        if done.returncode != 0:
            if "failed to get domain" in done.stderr.lower() or "domain not found" in done.stderr.lower():
                return None
            self._virsh("uri")  # Unavailable when libvirt does not answer at all
            raise MachineFailure(f"virsh dumpxml {name}: {done.stderr.strip()}")
        owner = ElementTree.fromstring(done.stdout).find(f".//{{{METADATA_NAMESPACE}}}claim")
        state = self._virsh("domstate", name).stdout.strip()
        return VirtualMachine(name, owner.get("uid", "") if owner is not None else "", state == "running")

    def power(self, name: str, on: bool) -> None:
        machine = self.get(name)
        if machine is None or machine.running == on:
            return
        self._virsh("start" if on else "destroy", name)

    def reboot(self, name: str) -> None:
        machine = self.get(name)
        if machine is not None and machine.running:
            self._virsh("reset", name)

    def delete(self, name: str) -> None:
        machine = self.get(name)
        if machine is not None:
            if machine.running:
                self._virsh("destroy", name)
            self._virsh("undefine", name)
        for path in self._files(name).values():
            path.unlink(missing_ok=True)

    def _files(self, name: str) -> dict[str, Path]:
        return {"disk": self.dir / f"{name}.qcow2", "config_drive": self.dir / f"{name}-config-2.iso",
                "serial_log": self.dir / f"{name}.log"}

    # -- create ----------------------------------------------------------------------------------------------
    def create(self, name: str, owner: str, size: MachineSize, macs: list[str], image: Mapping[str, Any],
               config_drive: dict[str, Any]) -> None:
        """The machine defined (not started): its disk over the image (checked: it refers to no other file), its
        config drive, its serial log, each 0600 from the start; a machine left half-made by an interrupted create
        is made again."""
        self.dir.mkdir(parents=True, exist_ok=True)
        files = self._files(name)
        base, image_format = self._image(image)
        for path in files.values():  # a half-made machine's files, perhaps of another mode: made anew
            path.unlink(missing_ok=True)
        # -F: the declared format, never probed (a raw image is always raw, whatever its bytes look like).
        self._run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", image_format, "-b", str(base),
                   str(files["disk"]), str(size.disk_bytes)], f"the disk of {name}")
        write_config_drive(files["config_drive"], config_drive)
        os.close(os.open(files["serial_log"], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        for path in files.values():
            os.chmod(path, 0o600)
        xml = domain_xml(name, owner, size, macs, files, self._domain_type(), self.options)
        with tempfile.NamedTemporaryFile("w", suffix=".xml", dir=self.dir, delete=False) as f:
            f.write(xml)
        try:
            self._virsh("define", f.name)
        finally:
            os.unlink(f.name)

    def _domain_type(self) -> str:
        if self.options.domain_type != "auto":
            return self.options.domain_type
        return "kvm" if os.access("/dev/kvm", os.R_OK | os.W_OK) else "qemu"

    @staticmethod
    def _run(argv: list[str], what: str) -> None:
        """``argv`` run with umask 077: what it creates is the controller's alone (0600) from its first byte."""
        try:
            done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600, umask=0o077)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise MachineFailure(f"{what}: {argv[0]}: {e}") from None
        if done.returncode != 0:
            raise MachineFailure(f"{what}: {done.stderr.strip() or done.stdout.strip()}")

    def _image(self, image: Mapping[str, Any]) -> tuple[Path, str]:
        """The claim's image in the images directory (0600), fetched once per checksum through the outbound
        policy, bounded (libvirt_max_image_size, libvirt_image_timeout), verified, and checked with qemu-img
        before it is cached and again before each use; its format."""
        url = str(image.get("url") or "")
        image_format = str(image.get("format") or "qcow2")
        if image_format not in ("qcow2", "raw"):
            raise MachineFailure(f"spec.image.format: {_shown(image_format)} is not one a virtual machine boots "
                                 "(qcow2, raw)")
        deadline = Deadline(self.options.image_timeout)
        check_image_urls(image, self.policy)  # both, before the checksum file is fetched
        try:
            algorithm, expected = checksum_of(image, self.policy, deadline, self.options.max_image_size)
        except Refused as e:
            raise MachineFailure(str(e)) from None
        images = self.dir / "images"
        images.mkdir(parents=True, exist_ok=True)
        path = images / f"{algorithm}-{expected}.{image_format}"
        if path.exists():
            try:
                inspect_image(path, image_format, url)  # a cache entry made before images were checked
            except MachineFailure:
                path.unlink(missing_ok=True)
                raise
            return path, image_format
        digest = hashlib.new(algorithm)
        descriptor, part = tempfile.mkstemp(dir=images, prefix=".part-")  # 0600
        try:
            with os.fdopen(descriptor, "wb") as out:
                for chunk in fetch(url, "spec.image.url", self.policy, deadline, self.options.max_image_size):
                    digest.update(chunk)
                    out.write(chunk)
            if digest.hexdigest() != expected:
                raise MachineFailure(f"spec.image.checksum: the image at {_shown(url, 200)} does not match its "
                                     f"{algorithm} checksum")
            inspect_image(Path(part), image_format, url)
            os.replace(part, path)
        except BaseException:
            Path(part).unlink(missing_ok=True)
            raise
        return path, image_format


def check_image_urls(image: Mapping[str, Any], policy: OutboundPolicy) -> None:
    """The image's URL and its checksum file's (when the checksum is a URL) through ``policy``: MachineFailure
    naming the field when either is one the controller does not fetch. On a cluster no webhook has checked them."""
    try:
        for field, url in image_urls(image):
            policy.check(url, field)
    except Refused as e:
        raise MachineFailure(str(e)) from None


def inspect_image(path: Path, image_format: str, url: str) -> None:
    """MachineFailure naming spec.image unless ``path`` read as ``image_format`` (given, never probed) is of that
    format and refers to no other file: no backing file, no external data file, no ``json:`` target anywhere.
    Nothing of the image is echoed."""
    why = f"spec.image: the image at {_shown(url, 200)}"
    try:
        done = subprocess.run(["qemu-img", "info", "--output=json", "--force-share", "-f", image_format, str(path)],
                              capture_output=True, text=True, check=False, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise MachineFailure(f"{why} cannot be checked: qemu-img: {e}") from None
    try:
        info = json.loads(done.stdout) if done.returncode == 0 else None
    except ValueError:
        info = None
    if not isinstance(info, dict) or info.get("format") != image_format:
        raise MachineFailure(f"{why} is not a {image_format} image (spec.image.format)")
    specific = info.get("format-specific") or {}
    data = specific.get("data") if isinstance(specific, dict) else None
    if "backing-filename" in info or "full-backing-filename" in info or "backing-filename-format" in info:
        raise MachineFailure(f"{why} names a backing file; this controller uses only images that refer to no "
                             "other file")
    if isinstance(data, dict) and ("data-file" in data or data.get("data-file-raw")):
        raise MachineFailure(f"{why} names an external data file; this controller uses only images that refer to "
                             "no other file")
    children = [c.get("name") for c in info.get("children") or [] if isinstance(c, dict)]
    if any(child != "file" for child in children) or any(text.startswith("json:") for text in _strings(info)):
        raise MachineFailure(f"{why} refers to other files; this controller uses only images that refer to no "
                             "other file")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def fetch(url: str, field: str, policy: OutboundPolicy, deadline: Deadline, limit: int) -> Iterator[bytes]:
    """The body at ``url`` in chunks, through ``policy`` (every redirect checked), at most ``limit`` bytes and
    before ``deadline``: MachineFailure naming ``field`` otherwise, with nothing of what the server sent."""
    try:
        with policy.open(url, field, timeout=min(60.0, deadline.left())) as answer:
            yield from read_bounded(answer, limit, deadline, field, url)
    except Refused as e:
        raise MachineFailure(str(e)) from None
    except (OSError, ValueError, http.client.HTTPException) as e:
        raise MachineFailure(f"{field}: {_shown(url, 200)} {describe(e)}") from None


HASH_LENGTHS = {32: "md5", 64: "sha256", 128: "sha512"}
HASH_SIZES = {"md5": 32, "sha256": 64, "sha512": 128}


def checksum_of(image: Mapping[str, Any], policy: OutboundPolicy | None = None, deadline: Deadline | None = None,
                limit: int = MAX_CHECKSUM_FILE) -> tuple[str, str]:
    """The image's checksum algorithm and value: spec.image.checksum is the value or the URL of a checksum
    file (fetched through ``policy``: its line naming the image, else its first), checksumType the algorithm or
    ``auto`` (by length). What the checksum file says is never echoed."""
    checksum = str(image.get("checksum") or "")
    kind = str(image.get("checksumType") or "auto")
    if not checksum:
        raise MachineFailure("spec.image.checksum: required for a virtual machine's image")
    if "://" not in checksum:
        found = _valid_checksum(checksum, kind)
        if found is None:
            raise MachineFailure(f"spec.image.checksum: {_shown(checksum.lower(), 140)} is not a {kind} checksum")
        return found
    body = b"".join(fetch(checksum, "spec.image.checksum", policy or OutboundPolicy(), deadline or Deadline(60),
                          min(limit, MAX_CHECKSUM_FILE)))
    image_name = Path(urllib.parse.urlsplit(str(image.get("url") or "")).path).name
    entries = [line.split() for line in body.decode(errors="replace").splitlines() if line.strip()]
    named = [e for e in entries if len(e) > 1 and e[-1].lstrip("*") == image_name]
    found = _valid_checksum((named or entries or [[""]])[0][0], kind)
    if found is None:
        kinds = "md5/sha256/sha512" if kind == "auto" else kind
        raise MachineFailure(f"spec.image.checksum: the checksum file at {_shown(checksum, 200)} names no {kinds} "
                             f"checksum for {_shown(image_name)}")
    return found


def _valid_checksum(checksum: str, kind: str) -> tuple[str, str] | None:
    checksum = checksum.lower()
    algorithm = HASH_LENGTHS.get(len(checksum), "") if kind == "auto" else kind
    if not algorithm or not re.fullmatch(r"[0-9a-f]+", checksum) or len(checksum) != HASH_SIZES.get(algorithm):
        return None
    return algorithm, checksum


def write_config_drive(path: Path, drive: dict[str, Any]) -> None:
    """An OpenStack config drive at ``path``: ISO 9660 (Rock Ridge, Joliet) of volume ``config-2`` with
    openstack/latest/meta_data.json, user_data (when given) and network_data.json (when given)."""
    with tempfile.TemporaryDirectory() as root:
        latest = Path(root, "openstack", "latest")
        latest.mkdir(parents=True)
        (latest / "meta_data.json").write_text(json.dumps(drive.get("meta_data") or {}))
        if drive.get("user_data") is not None:
            (latest / "user_data").write_text(str(drive["user_data"]))
        if drive.get("network_data") is not None:
            (latest / "network_data.json").write_text(json.dumps(drive["network_data"]))
        tool = next((t for t in ("genisoimage", "mkisofs", "xorrisofs") if shutil.which(t)), None)
        if tool is None:
            raise MachineFailure("config drive: none of genisoimage, mkisofs, xorrisofs is installed")
        LibvirtMachines._run([tool, "-quiet", "-o", str(path), "-V", "config-2", "-r", "-J", "-l", root],
                             f"the config drive {path.name}")


def domain_xml(name: str, owner: str, size: MachineSize, macs: list[str], files: dict[str, Path],
               domain_type: str, options: LibvirtOptions) -> str:
    """The domain: BIOS, q35; the disk, the config drive (a read-only CD-ROM), one virtio NIC per MAC on the
    bridge, each pinned to its own PCI Express bus (so the guest names them as ``nic_name`` says); a serial log;
    the QEMU guest agent's channel."""
    nics = "".join(
        f"""
    <interface type='bridge'>
      <mac address={quoteattr(mac)}/>
      <source bridge={quoteattr(options.bridge)}/>
      <model type='virtio'/>
      <address type='pci' domain='0x0000' bus='0x{index + 1:02x}' slot='0x00' function='0x0'/>
    </interface>""" for index, mac in enumerate(macs))
    # One root port per NIC, on bus 0, so that NIC i is alone on bus i + 1.
    ports = "".join(f"""
    <controller type='pci' index='{index + 1}' model='pcie-root-port'/>""" for index in range(len(macs)))
    cpu = """
  <cpu mode='host-passthrough' check='none' migratable='off'>
    <feature policy='disable' name='arch-capabilities'/>
  </cpu>""" if domain_type == "kvm" else ""
    return f"""<domain type={quoteattr(domain_type)}>
  <name>{escape(name)}</name>
  <metadata>
    <metal3:claim xmlns:metal3={quoteattr(METADATA_NAMESPACE)} uid={quoteattr(owner)}/>
  </metadata>
  <memory unit='MiB'>{size.memory_mib}</memory>
  <vcpu>{size.cpus}</vcpu>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
    <boot dev='hd'/>
  </os>
  <features><acpi/><apic/></features>{cpu}
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>{escape(options.emulator)}</emulator>{ports}
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2' discard='unmap'/>
      <source file={quoteattr(str(files['disk']))}/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <disk type='file' device='cdrom'>
      <driver name='qemu' type='raw'/>
      <source file={quoteattr(str(files['config_drive']))}/>
      <target dev='sda' bus='sata'/>
      <readonly/>
    </disk>{nics}
    <serial type='file'>
      <source path={quoteattr(str(files['serial_log']))} append='on'/>
      <target port='0'/>
    </serial>
    <console type='file'>
      <source path={quoteattr(str(files['serial_log']))} append='on'/>
      <target type='serial' port='0'/>
    </console>
    <channel type='unix'>
      <target type='virtio' name='org.qemu.guest_agent.0'/>
    </channel>
    <rng model='virtio'>
      <backend model='random'>/dev/urandom</backend>
    </rng>
  </devices>
</domain>
"""


# -- the class -------------------------------------------------------------------------------------------------

@dataclass
class _Served:
    """What serves a claim of kind libvirt, as ``bind`` found it: the machine's size and MACs, and the machine
    (None until it is made)."""

    size: MachineSize
    macs: list[str]
    machine: VirtualMachine | None


class Libvirt(ComputeClass):
    """Claims served by virtual machines of this controller's hypervisor (the ``libvirt`` driver: None when the
    controller serves no such claims, which then say so)."""

    kind = LIBVIRT
    bound_field = "virtualMachine"
    noun = "virtual machine"
    associated_reason = MACHINE_ASSOCIATED

    def __init__(self, claim: ClaimState, services: Services) -> None:
        super().__init__(claim, services)
        self.machines: VirtualMachines | None = services.drivers.get(LIBVIRT)
        self.machine_name = domain_name(claim.ref.namespace, claim.ref.name)

    @classmethod
    def admit(cls, spec: dict[str, Any]) -> Iterator[Problem]:
        """Its args (with their fixed sanity bounds), its image and checksum URLs http or https (the controller
        itself fetches them); no other cluster's hosts to reach and no custom deploy."""
        yield from args_problems(spec.get("args"))
        yield from image_url_problems(spec.get("image"))
        if spec.get("identityRef"):
            yield "spec.identityRef", f"a claim of kind {LIBVIRT} is served here, not by another cluster's hosts"
        if spec.get("customDeploy"):
            yield "spec.customDeploy", f"a claim of kind {LIBVIRT} boots spec.image"

    def failure(self, error: Exception) -> Stuck | None:
        """The machine cannot be made or changed (or the hypervisor does not answer: it looks again)."""
        if isinstance(error, (MachineFailure, Invalid, HostFailure, Refused)):
            return Stuck("failed", READY_CONDITION, MACHINE_FAILED, str(getattr(error, "message", "") or error))
        if isinstance(error, Unavailable):
            return Stuck("failed", READY_CONDITION, MACHINE_FAILED, str(error), UNREACHABLE_WAIT)
        return None

    def _hypervisor(self) -> VirtualMachines:
        if self.machines is None:
            raise Invalid(f"spec.kind: {LIBVIRT} - this controller serves no HostClaims of kind {LIBVIRT} (give it "
                          "libvirt_bridge and libvirt_storage_dir)")
        return self.machines

    def _machine(self) -> VirtualMachine | None:
        machine = self._hypervisor().get(self.machine_name)
        if machine is not None and machine.owner != self.claim.uid:
            raise MachineFailure(f"virtual machine {self.machine_name} exists and was not made by this claim; it is "
                                 "left alone")
        return machine

    # -- bind: its own machine, made or not ------------------------------------------------------------------
    def bind(self, refusals: dict[str, str]) -> Bound:
        spec = self.claim.spec
        size = machine_size(spec.get("args"))  # on a cluster, no webhook has checked them
        too_large = limit_problems(size, self.machines.limits) if self.machines is not None else []
        if too_large:
            raise Invalid("; ".join(f"{field}: {why}" for field, why in too_large))
        if spec.get("customDeploy"):
            raise Invalid(f"spec.customDeploy: a HostClaim of kind {LIBVIRT} boots spec.image")
        macs = mac_addresses(self.claim.uid, size.nics)
        if self.machines is not None and self.claim.deploying:  # what the tenant asks fetched, before anything
            self.machines.check_image(spec["image"])
        return Bound(_Served(size, macs, self._machine()))

    # -- configure: made once it has an image, powered, rebooted ---------------------------------------------
    def configure(self, bound: Bound, refusals: dict[str, str]) -> Observed:
        served: _Served = bound.obj
        machine, claim = served.machine, self.claim
        if machine is None and claim.deploying and not refusals:
            drive = config_drive(claim.ref, claim.uid, claim.spec, claim.secret)
            if not claim.dry_run:
                self._hypervisor().create(self.machine_name, claim.uid, served.size, served.macs,
                                          claim.spec["image"], drive)
            machine = VirtualMachine(self.machine_name, claim.uid, False)
            claim.changed = True
        if machine is not None:
            wanted = bool(claim.spec.get("poweredOn")) and not claim.power_holds
            if machine.running != wanted:
                if not claim.dry_run:
                    self._hypervisor().power(self.machine_name, wanted)
                machine.running = wanted
                claim.changed = True
            if REBOOT_ANNOTATION in (claim.obj["metadata"].get("annotations") or {}):
                if machine.running and not claim.dry_run:
                    self._hypervisor().reboot(self.machine_name)
                claim.forget_reboot_request()
        host = self._as_host(served.size, served.macs, machine)
        running = ", running" if machine is not None and machine.running else ""
        return Observed(host, refusals, f"virtual machine {self.machine_name} is {host_state(host)}{running}")

    def _as_host(self, size: MachineSize, macs: list[str], machine: VirtualMachine | None) -> dict[str, Any]:
        """The machine in a BareMetalHost's shape, for what the claim shows (state, power, hardware) and its
        HardwareData: provisioned once it exists, available until then; labelled with the claim's failure
        domain."""
        failure_domain = self.claim.spec.get("failureDomain")
        ref = self.claim.ref
        return {"apiVersion": API, "kind": HOST_KIND,
                "metadata": {"name": self.machine_name, "namespace": ref.namespace,
                             "labels": {FAILURE_DOMAIN_LABEL: failure_domain} if failure_domain else {}},
                "spec": {"bootMACAddress": macs[0]},
                "status": {"provisioning": {"state": PROVISIONED if machine is not None else AVAILABLE},
                           "poweredOn": bool(machine is not None and machine.running),
                           "hardware": hardware(size, macs, ref.name)}}

    # -- release ---------------------------------------------------------------------------------------------
    def _named(self) -> bool:
        return bool((self.claim.obj.get("status") or {}).get(self.bound_field))

    def may_hold(self) -> bool:
        """The claim's status names a machine, or this controller has a hypervisor to look in."""
        return self.machines is not None or self._named()

    def release(self) -> Waiting | None:
        """Delete the machine this claim made, if there is one - whatever the claim's spec.kind says now (it may
        have changed past admission): one its status names, or one this controller's hypervisor has under the
        claim's name with the claim's uid in its metadata. A machine of that name made by anyone else is left
        alone."""
        try:
            machine = self._hypervisor().get(self.machine_name)
        except Unavailable:
            if self._named() or claim_kind(self.claim.obj) == LIBVIRT:
                raise
            return None  # a bare-metal claim that never had a machine: a hypervisor down does not hold its release
        if machine is not None and machine.owner == self.claim.uid:
            if not self.claim.dry_run:
                self._hypervisor().delete(self.machine_name)
            self.claim.changed = True
        return None
