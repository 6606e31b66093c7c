# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The seam between the BareMetalHost state machine and what provisions hosts, as baremetal-operator draws it.

The state machine (``hosts/baremetalhost.py``) knows BareMetalHost states only; a ``Provisioner`` knows its
back end's (Ironic's provision states live in ``ironic/provisioner.py`` and nowhere else; a fixture answers
in the table tests). Every operation is level-based: called again and again, it starts what is not started,
reports what is under way, and says when it is done. It lives here, at the bottom, so that both the state
machine and the Ironic implementation stand on it without importing each other.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

POLL = 0.5  # seconds between looks at an operation under way
DELAYED = 5.0  # seconds before asking again for a provisioning slot


@dataclass(frozen=True)
class ProvisionResult:
    """What one provisioner call came to: done (neither dirty nor error), under way, or failed."""

    dirty: bool = False  # an operation is under way (or was just started): look again after requeue_after
    requeue_after: float | None = None
    error: str = ""  # the operation failed; the host records this message
    retry: bool = True  # with error: False when the same attempt cannot succeed until the spec changes
    delayed: bool = False  # with dirty: waiting for a provisioning slot, nothing started
    message: str = ""  # what was done, for people
    # the operation this call asked for was started (an inspection, or cleaning or servicing with the firmware
    # updates it was given: those are on their way, and are not to be given again)
    started: bool = False

    @property
    def done(self) -> bool:
        return not self.dirty and not self.error


@dataclass(frozen=True)
class Registration(ProvisionResult):
    provisioner_id: str = ""  # the back end's name for the host once it knows it (Ironic's node UUID)
    credentials_sent: bool = False  # the BMC credentials went to the back end (status.triedCredentials)


@dataclass(frozen=True)
class Inspection(ProvisionResult):
    # started: an inspection is running that this call started or found running
    hardware: dict[str, Any] | None = None  # status.hardware, once done


@dataclass(frozen=True)
class Power(ProvisionResult):
    powered_on: bool = False  # as the back end last saw the host
    rebooted: bool = False  # the reboot asked for was started


@dataclass(frozen=True)
class FirmwareSettings(ProvisionResult):
    """The host's firmware (BIOS) settings as its BMC last reported them, and what each one allows."""

    settings: dict[str, str] = field(default_factory=dict)  # name -> current value
    # name -> its FirmwareSchema entry (attribute_type, allowable_values, lower_bound, upper_bound, min_length,
    # max_length, read_only, unique), upstream's field names
    schema: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class FirmwareComponents(ProvisionResult):
    """The host's firmware components (bios, bmc, nic:<id>) and their versions, as its BMC last reported them: a
    HostFirmwareComponents' status.components, upstream's field names (component, initialVersion, currentVersion,
    lastVersionFlashed, updatedAt)."""

    components: list[dict[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class DataImageStatus(ProvisionResult):
    """Whether an image is in the host's virtual CD drive, as its BMC last reported it (a DataImage's). ``error``:
    the state could not be read; ``dirty``: the host is busy (an attach under way, say), look again later
    (upstream's ErrNodeIsBusy: not an error)."""

    attached: bool = False
    attach_error: str = ""  # none is in: the attach asked for since the time given failed, as the back end said


# A firmware update as a HostFirmwareComponents' spec.updates lists it: {"component": C, "url": U}.
FirmwareUpdates = Sequence[Mapping[str, str]]
# The firmware components upstream reports and lets an update name: these, and "nic:<id>".
FIRMWARE_COMPONENTS = ("bmc", "bios")
NIC_COMPONENT_PREFIX = "nic:"


def known_component(name: str) -> bool:
    return name in FIRMWARE_COMPONENTS or name.startswith(NIC_COMPONENT_PREFIX)


def settings_changes(desired: Mapping[str, int | str], current: Mapping[str, str]) -> dict[str, int | str]:
    """The firmware settings of ``desired`` whose value is not the current one, compared as text, as upstream
    compares them."""
    return {name: value for name, value in desired.items() if current.get(name) != str(value)}


@dataclass(frozen=True)
class RAIDPreparation:
    """A host's RAID as preparing applies it (upstream's PrepareData): its RAID configuration to be
    (status.provisioning.raid as the host is about to record it) and the one applied before (None: not known, as
    after a failed preparation), both upstream's RAIDConfig; and whether the host has root device hints (without them
    and without a root volume, the first volume is the root volume)."""

    target: dict[str, Any] | None
    actual: dict[str, Any] | None
    root_device_hints: bool = True


@dataclass(frozen=True)
class Capacity:
    granted: bool
    message: str = ""  # why not, for people


@dataclass(frozen=True)
class BMCAccess:
    address: str
    username: str = field(repr=False)  # never in a log line or a traceback's locals
    password: str = field(repr=False)
    disable_certificate_verification: bool = False


# The formats of a deploy ramdisk image a PreprovisioningImage may be asked for (its spec.acceptFormats), upstream's.
ISO, INITRD = "iso", "initrd"


@dataclass(frozen=True)
class PreprovisioningImage:
    """The deploy ramdisk a host's PreprovisioningImage serves, once it is ready for the host's current ask: its
    status.format, imageUrl (the ISO, or the initramfs), kernelUrl and extraKernelParams."""

    format: str
    image_url: str
    kernel_url: str = ""
    extra_kernel_params: str = ""


@dataclass(frozen=True)
class HostData:
    """What a provisioner needs of a host's spec, its secrets already read by the state machine."""

    bmc: BMCAccess
    boot_mac: str = ""
    boot_mode: str = ""
    architecture: str = ""
    automated_clean: bool = True
    image: dict[str, Any] = field(default_factory=dict)  # spec.image, field names as upstream spells them
    custom_deploy: str = ""  # spec.customDeploy.method
    root_device_hints: dict[str, Any] = field(default_factory=dict)
    inspection_mode: str = ""  # spec.inspectionMode: agent (or empty), fast (out of band) or disabled
    # The network the deploy ramdisk boots into when there is no DHCP (spec.preprovisioningNetworkDataName).
    preprovisioning_network_data: dict[str, Any] = field(default_factory=dict)
    # The host's own deploy ramdisk (its PreprovisioningImage), when one is ready: it replaces the provisioner's.
    preprovisioning_image: PreprovisioningImage | None = None


class Provisioner(Protocol):
    """One host's provisioner for one reconcile (it may keep what it read for the reconcile's length)."""

    def register(self, host: HostData, credentials_changed: bool,
                 before_create: Callable[[], None]) -> Registration:
        """Make the back end know and manage the host; ``before_create`` runs before it first creates it."""

    def inspect(self, refresh: bool) -> Inspection:
        """Inspect the hardware once (again when ``refresh``); done with the details once inspected."""

    def prepare(self, firmware_settings: Mapping[str, int | str],
                firmware_updates: FirmwareUpdates = (), raid: RAIDPreparation | None = None) -> ProvisionResult:
        """Bring the host to where provisioning starts from (an inspection no longer wanted is stopped), with
        ``firmware_settings`` (a HostFirmwareSettings' spec.settings) applied: those that differ from the host's
        current ones, which the provisioner reads itself; ``firmware_updates`` flashed, all of them (the host
        gives only those not yet sent: ``started`` says when they are on their way); and ``raid`` applied (the host
        gives it only while its RAID differs from what it recorded: ``started`` says when it is on its way too)."""

    def service(self, firmware_settings: Mapping[str, int | str], restart: bool,
                firmware_updates: FirmwareUpdates = (), updates_asked: bool = False) -> ProvisionResult:
        """Apply ``firmware_settings`` (those that differ from the host's current ones) and ``firmware_updates``
        (as prepare) to a provisioned host without reprovisioning it (servicing); done once applied. A servicing
        that failed is reported, or started again when ``restart``; with nothing asked for any more (no settings,
        and not ``updates_asked``: the host's spec names no firmware update), it is aborted: the host goes back as
        it was."""

    def firmware_settings(self) -> FirmwareSettings:
        """The host's current firmware settings and their schema (none before it is registered)."""

    def firmware_components(self) -> FirmwareComponents:
        """The host's firmware components and their versions (none before it is registered, or when its BMC lists
        none)."""

    def attach_data_image(self, url: str) -> ProvisionResult:
        """Insert the image at ``url`` in the host's virtual CD drive (a DataImage); the back end may do it after
        answering: ``data_image_status`` tells whether it is in."""

    def detach_data_image(self) -> ProvisionResult:
        """Eject whatever is in the host's virtual CD drive."""

    def data_image_status(self, since: str = "") -> DataImageStatus:
        """Whether an image is in the host's virtual CD drive; when none is, an attach asked for at or after
        ``since`` (RFC 3339; "" for none) that the back end recorded as failed is this result's error."""

    def provision(self, host: HostData, config_drive: Callable[[], dict[str, Any]]) -> ProvisionResult:
        """Deploy ``host.image`` (or its custom deploy); a deploy of it that failed is reported as failed (not
        started again) until the host is deprovisioned."""

    def adopt(self, host: HostData) -> ProvisionResult:
        """Take over a host that already runs its image (registered again after a detach, or external)."""

    def deprovision(self, automated_clean: bool) -> ProvisionResult:
        """Remove the image (and clean, unless disabled)."""

    def power(self, on: bool, reboot: str = "") -> Power:
        """Power on or off; ``reboot`` ('hard' or 'soft') reboots a host that is to be on."""

    def detach(self, force: bool) -> ProvisionResult:
        """Forget the host, leaving it as it is; an operation under way is waited for, or aborted when ``force``."""

    def delete(self) -> ProvisionResult:
        """Forget the host for good (it is being deleted)."""

    def has_capacity(self) -> Capacity:
        """Whether one more host may start a long operation (inspect, clean, deploy) now."""

    def preprovisioning_image_formats(self, host: HostData) -> list[str] | None:
        """The formats (iso, initrd) of a PreprovisioningImage the host should be asked to have, best first; None
        when the provisioner builds no per-host image (it boots the deploy ramdisk its options name)."""

    def health(self) -> str:
        """The BMC's own health, as the back end last read it in this reconcile: OK, Warning, Critical, or ''
        (not known)."""


# (name of the host for the provisioner, its provisioner ID or "") -> the host's provisioner
ProvisionerFactory = Callable[[str, str], Provisioner]
