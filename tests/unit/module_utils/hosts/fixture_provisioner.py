"""A fixture provisioner, as baremetal-operator's pkg/provisioner/fixture: each operation gives the answer it is
told to (done, by default) and is recorded, so that state-machine tests need no Ironic and take milliseconds."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ansible_collections.metal3.baremetal.plugins.module_utils.core.provisioner import (
    Capacity,
    DataImageStatus,
    FirmwareComponents,
    FirmwareSettings,
    FirmwareUpdates,
    HostData,
    Inspection,
    Power,
    ProvisionResult,
    RAIDPreparation,
    Registration,
)

HARDWARE = {"cpu": {"arch": "x86_64", "count": 4}, "ramMebibytes": 8192}
PROVISIONER_ID = "fixture-id"


@dataclass
class Answers:
    """What each operation answers; ``creates`` makes register() create the host (before_create runs), and a
    provision() that is under way reads the config drive, as a deploy that starts does."""

    register: Registration = field(default_factory=lambda: Registration(provisioner_id=PROVISIONER_ID))
    creates: bool = False
    inspect: Inspection = field(default_factory=lambda: Inspection(hardware=HARDWARE))
    prepare: ProvisionResult = field(default_factory=ProvisionResult)
    firmware_settings: FirmwareSettings = field(default_factory=FirmwareSettings)
    firmware_components: FirmwareComponents = field(default_factory=FirmwareComponents)
    service: ProvisionResult = field(default_factory=ProvisionResult)
    provision: ProvisionResult = field(default_factory=ProvisionResult)
    adopt: ProvisionResult = field(default_factory=ProvisionResult)
    deprovision: ProvisionResult = field(default_factory=ProvisionResult)
    power: Power = field(default_factory=Power)
    detach: ProvisionResult = field(default_factory=ProvisionResult)
    delete: ProvisionResult = field(default_factory=ProvisionResult)
    capacity: Capacity = field(default_factory=lambda: Capacity(True))
    health: str = ""  # the BMC's: OK, Warning, Critical or '' (not known)
    attach_data_image: ProvisionResult = field(default_factory=ProvisionResult)
    detach_data_image: ProvisionResult = field(default_factory=ProvisionResult)
    data_image_status: DataImageStatus = field(default_factory=DataImageStatus)
    preprovisioning_formats: list[str] | None = None  # None: no per-host deploy ramdisk image is built


@dataclass
class FixtureProvisioner:
    answers: Answers
    calls: list[str] = field(default_factory=list)
    made_for: list[tuple[str, str]] = field(default_factory=list)  # (name, provisioner ID) per reconcile
    config_drives: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, name: str, provisioner_id: str) -> FixtureProvisioner:
        """The factory the state machine takes: the same fixture for every host."""
        self.made_for.append((name, provisioner_id))
        return self

    def register(self, host: HostData, credentials_changed: bool,
                 before_create: Callable[[], None]) -> Registration:
        image = host.preprovisioning_image
        self.calls.append("register" + (" (credentials changed)" if credentials_changed else "")
                          + (f" with {image.format} image {image.image_url}" if image else ""))
        if self.answers.creates:
            before_create()
        return self.answers.register

    def inspect(self, refresh: bool) -> Inspection:
        self.calls.append("inspect" + (" (refresh)" if refresh else ""))
        return self.answers.inspect

    def prepare(self, firmware_settings: Mapping[str, int | str],
                firmware_updates: FirmwareUpdates = (), raid: RAIDPreparation | None = None) -> ProvisionResult:
        self.calls.append("prepare" + (f" {dict(sorted(firmware_settings.items()))}" if firmware_settings else "")
                          + _updates(firmware_updates) + _raid(raid))
        return self.answers.prepare

    def service(self, firmware_settings: Mapping[str, int | str], restart: bool,
                firmware_updates: FirmwareUpdates = (), updates_asked: bool = False) -> ProvisionResult:
        self.calls.append("service" + (f" {dict(sorted(firmware_settings.items()))}" if firmware_settings else "")
                          + _updates(firmware_updates) + (" (restart)" if restart else ""))
        return self.answers.service

    def firmware_settings(self) -> FirmwareSettings:
        self.calls.append("firmware_settings")
        return self.answers.firmware_settings

    def firmware_components(self) -> FirmwareComponents:
        self.calls.append("firmware_components")
        return self.answers.firmware_components

    def provision(self, host: HostData, config_drive: Callable[[], dict[str, Any]]) -> ProvisionResult:
        self.calls.append(f"provision {host.image.get('url') or host.custom_deploy}")
        if self.answers.provision.dirty:
            self.config_drives.append(config_drive())
        return self.answers.provision

    def adopt(self, host: HostData) -> ProvisionResult:
        self.calls.append("adopt")
        return self.answers.adopt

    def deprovision(self, automated_clean: bool) -> ProvisionResult:
        self.calls.append("deprovision" + ("" if automated_clean else " (no cleaning)"))
        return self.answers.deprovision

    def power(self, on: bool, reboot: str = "") -> Power:
        self.calls.append(f"power {'on' if on else 'off'}" + (f" ({reboot} reboot)" if reboot else ""))
        return self.answers.power

    def attach_data_image(self, url: str) -> ProvisionResult:
        self.calls.append(f"attach_data_image {url}")
        return self.answers.attach_data_image

    def detach_data_image(self) -> ProvisionResult:
        self.calls.append("detach_data_image")
        return self.answers.detach_data_image

    def data_image_status(self, since: str = "") -> DataImageStatus:
        self.calls.append("data_image_status" + (" (since the last attach)" if since else ""))
        return self.answers.data_image_status

    def detach(self, force: bool) -> ProvisionResult:
        self.calls.append("detach" + (" (forced)" if force else ""))
        return self.answers.detach

    def delete(self) -> ProvisionResult:
        self.calls.append("delete")
        return self.answers.delete

    def health(self) -> str:
        return self.answers.health

    def preprovisioning_image_formats(self, host: HostData) -> list[str] | None:
        return self.answers.preprovisioning_formats

    def has_capacity(self) -> Capacity:
        self.calls.append("has_capacity")
        return self.answers.capacity


def _updates(updates: FirmwareUpdates) -> str:
    """The updates in a call's record: " update bios=<url>, ..." ("" for none)."""
    return (" update " + ", ".join(f"{u['component']}={u['url']}" for u in updates)) if updates else ""


def _raid(raid: RAIDPreparation | None) -> str:
    """The RAID in a call's record: " raid <target> over <actual>", each the levels of its volumes per kind
    (h[...]: hardware, s[...]: software; a kind whose list is null left out), unknown for None; " with hints" when
    the host has root device hints."""
    if raid is None:
        return ""

    def levels(config: Mapping[str, Any] | None) -> str:
        if config is None:
            return "unknown"
        kinds = [f"{kind[0]}{[v['level'] for v in config[name]]}" for kind, name in
                 (("h", "hardwareRAIDVolumes"), ("s", "softwareRAIDVolumes")) if config.get(name) is not None]
        return " ".join(kinds).replace("'", "") or "none"

    return f" raid {levels(raid.target)} over {levels(raid.actual)}" + (" with hints" if raid.root_device_hints else "")
