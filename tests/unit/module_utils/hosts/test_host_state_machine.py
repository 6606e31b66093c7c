"""The BareMetalHost state machine, table-driven as upstream's host_state_machine_test.go: a host in a state,
with a spec (or annotations, or a deletion), meets a provisioner answer; one reconcile later it is in the
expected state, asks to come back when expected, records the expected error, and called the provisioner's
operations in the expected order. No Ironic: a fixture provisioner answers (fixture_provisioner.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import ALLOWED_LOCAL_HOSTS_ENV
from ansible_collections.metal3.baremetal.plugins.module_utils.core.provisioner import (
    DELAYED,
    POLL,
    Capacity,
    DataImageStatus,
    FirmwareSettings,
    Inspection,
    Power,
    ProvisionResult,
    Registration,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import baremetalhost as bmh
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import dataimage
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import preprovisioning_image as ppi
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.unit.module_utils.hosts.fixture_provisioner import HARDWARE, PROVISIONER_ID, Answers, FixtureProvisioner

S = bmh  # the states, upstream's strings
BUSY = ProvisionResult(dirty=True, requeue_after=POLL)
FAILED = ProvisionResult(error="it broke")
FAILED_FOR_GOOD = ProvisionResult(error="it broke", retry=False)
NO_SLOT = ProvisionResult(dirty=True, requeue_after=DELAYED, delayed=True, message="delayed: 20 hosts are busy")
IMAGE = {"image": {"url": "http://i/os.img", "checksum": "abc"}}
ONLINE = {"online": True}
REGISTERED = ("register",)
SENT = Registration(dirty=True, requeue_after=POLL, provisioner_id=PROVISIONER_ID, credentials_sent=True)
BACKOFF = bmh.BACKOFF_BASE  # the first retry of a failure


@dataclass(frozen=True)
class Case:
    state: str  # where the host is
    then: str | None  # where one reconcile takes it (None: deleted)
    requeue: float | None  # when it asks to come back (None: only when something changes)
    error: str = ""  # the errorType it records
    calls: tuple[str, ...] | None = None  # the provisioner's operations, in order (None: not checked)
    answers: dict[str, Any] = field(default_factory=dict)  # Answers' fields that are not "done at once"
    spec: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    status: dict[str, Any] = field(default_factory=dict)
    deleting: bool = False
    retries: int = bmh.MAX_PROVISIONING_RETRIES  # the retry limit the reconcile is given
    check: Callable[[dict[str, Any]], bool] | None = None  # on the host as stored afterwards
    firmware: dict[str, Any] | None = None  # the host's HostFirmwareSettings: its spec and status (settings())
    policy: dict[str, Any] | None = None  # the spec of the host's HostUpdatePolicy
    components: dict[str, Any] | None = None  # the host's HostFirmwareComponents: its spec and status (components())
    check_components: Callable[[dict[str, Any]], bool] | None = None  # on its HostFirmwareComponents afterwards
    data_image: dict[str, Any] | None = None  # the host's DataImage: its spec, status, and whether it is deleted
    check_image: Callable[[dict[str, Any]], bool] | None = None  # on its DataImage afterwards
    image: dict[str, Any] | None = None  # the host's PreprovisioningImage: its spec, status and finalizers (image())
    check_ppi: Callable[[dict[str, Any] | None], bool] | None = None  # on its PreprovisioningImage afterwards


def settings(wanted: dict[str, Any], changed: bool = True, valid: bool = True, judged: bool = True) -> dict[str, Any]:
    """A HostFirmwareSettings asking for ``wanted``, as its reconcile left it: a change detected or not, valid or
    not, judged at its current generation (1) or an older one."""
    generation = 1 if judged else 0
    conditions = [{"type": "ChangeDetected", "status": str(changed), "observedGeneration": generation},
                  {"type": "Valid", "status": str(valid), "observedGeneration": generation}]
    return {"spec": {"settings": wanted},
            "status": {"settings": {"ProcTurboMode": "Enabled"}, "conditions": conditions}}


def components(updates: list[dict[str, str]], sent: list[dict[str, str]] | None = None, changed: bool = True,
               valid: bool = True, judged: bool = True) -> dict[str, Any]:
    """A HostFirmwareComponents asking for ``updates``, of which ``sent`` were sent (status.updates), as its
    reconcile left it (see settings())."""
    generation = 1 if judged else 0
    conditions = [{"type": "ChangeDetected", "status": str(changed), "observedGeneration": generation},
                  {"type": "Valid", "status": str(valid), "observedGeneration": generation}]
    return {"spec": {"updates": updates},
            "status": {"components": [{"component": "bios", "initialVersion": "1.0.0"}], "conditions": conditions,
                       **({"updates": sent} if sent is not None else {})}}


def sent(updates: list[dict[str, str]] | None) -> Callable[[dict[str, Any]], bool]:
    return lambda hfc: hfc["status"].get("updates") == updates


BIOS_UPDATE = {"component": "bios", "url": "http://fw/bios.bin"}
SENDS_BIOS = " update bios=http://fw/bios.bin"
STARTED = ProvisionResult(dirty=True, requeue_after=POLL, started=True)
UPDATES_ON_REBOOT = {"firmwareUpdates": "onReboot"}
TURBO_OFF = {"ProcTurboMode": "Disabled"}
SETTINGS_ON_REBOOT = {"firmwareSettings": "onReboot"}
REBOOTING = {"spec": {"online": True, "image": {"url": "http://i/os.img", "checksum": "abc"}},
             "annotations": {"reboot.metal3.io": ""}}
ON = {"poweredOn": True}
SERVICING = {"poweredOn": True, "operationalStatus": "servicing"}
SERVICING_FAILED = {"poweredOn": True, "errorType": "servicing error", "errorMessage": "it broke"}
# spec.raid, and status.provisioning.raid as the host records it (both lists, null where the spec has none)
HW_RAID = {"hardwareRAIDVolumes": [{"name": "root", "level": "1"}]}
HW_RECORDED = {"hardwareRAIDVolumes": [{"name": "root", "level": "1"}], "softwareRAIDVolumes": None}
SW_ROOT = {"softwareRAIDVolumes": [{"level": "1", "rootVolume": True}, {"level": "0"}]}
SW_RECORDED = {"hardwareRAIDVolumes": None, "softwareRAIDVolumes": [{"level": "1"}]}
DONE = ProvisionResult()


def raid_recorded(raid: dict[str, Any] | None) -> Callable[[dict[str, Any]], bool]:
    return lambda host: host["status"]["provisioning"].get("raid") == raid


CURRENT = {"firmware_settings": FirmwareSettings(settings={"ProcTurboMode": "Enabled"})}
APPLIED = {"firmware_settings": FirmwareSettings(settings=TURBO_OFF)}


ISO = "http://images.example/data.iso"
POWER_ON = {**ONLINE, **IMAGE}  # a provisioned host, powered off (its status says so) and to be on
POWERING_ON = Power(dirty=True, requeue_after=POLL, message="powering on")


def data_image(url: str = ISO, attached: str | None = None, deleted: bool = False,
               error: dict[str, Any] | None = None) -> dict[str, Any]:
    """A host's DataImage asking for ``url``, the host having last attached ``attached`` (None: never)."""
    status: dict[str, Any] = {}
    if attached is not None:
        status.update(attachedImage={"url": attached}, lastReconciled="2026-01-01T00:00:00Z")
    if error is not None:
        status["error"] = error
    return {"spec": {"url": url}, "status": status, "deleted": deleted}


INITRD_ONLY = {"preprovisioning_formats": ["initrd"]}  # the provisioner builds per-host images, initrd ones
ARM = {"architecture": "aarch64"}
ARM_INITRD = {"architecture": "aarch64", "acceptFormats": ["initrd"]}


def image(spec: dict[str, Any] | None = None, format_: str = "initrd", ready: bool = True, judged: bool = True,
          error: str = "", finalizers: tuple[str, ...] = (ppi.HOST_FINALIZER,)) -> dict[str, Any]:
    """A PreprovisioningImage as its reconcile left it: serving ``format_`` for its spec (ARM_INITRD), Ready or not
    at its current generation (1) or an older one, or in Error."""
    spec = ARM_INITRD if spec is None else spec
    conditions = [{"type": "Ready", "status": str(ready and not error), "observedGeneration": 1 if judged else 0},
                  {"type": "Error", "status": str(bool(error)), "message": error, "observedGeneration": 1}]
    return {"spec": spec, "finalizers": list(finalizers),
            "status": {"format": format_, "architecture": spec.get("architecture"), "networkData": {},
                       "imageUrl": "http://img/ipa.initramfs", "kernelUrl": "http://img/ipa.kernel",
                       "conditions": conditions}}


def image_is(**expected: Any) -> Callable[[dict[str, Any] | None], bool]:
    """The image's spec fields as ``expected`` (None for the image: there is none)."""
    if not expected:
        return lambda made: made is None
    return lambda made: made is not None and all(made["spec"].get(k) == v for k, v in expected.items())


def case(name: str, state: str, then: str | None, requeue: float | None, **kwargs: Any) -> Any:
    return pytest.param(Case(state, then, requeue, **kwargs), id=name)


def healthy(host: dict[str, Any]) -> tuple[str, str]:
    condition = next(c for c in host["status"]["conditions"] if c["type"] == "Healthy")
    return condition["status"], condition["reason"]


def status_of(**expected: Any) -> Callable[[dict[str, Any]], bool]:
    return lambda host: all(host["status"].get(key) == value for key, value in expected.items())


CASES = [
    # -- registration: none, unmanaged, registering ------------------------------------------------------
    case("none-without-bmc-is-unmanaged", S.NONE, S.UNMANAGED, None, spec={"bmc": None}, calls=()),
    case("unmanaged-stays-without-bmc", S.UNMANAGED, S.UNMANAGED, None, spec={"bmc": None}, calls=()),
    case("none-registers-and-waits", S.NONE, S.REGISTERING, POLL, answers={"register": SENT}, calls=REGISTERED,
         check=lambda h: h["status"]["triedCredentials"]["credentials"]["name"] == "bmc"),
    case("none-creating-adds-the-finalizer", S.NONE, S.REGISTERING, POLL,
         answers={"creates": True, "register": SENT},
         check=lambda h: h["metadata"]["finalizers"] == [bmh.FINALIZER]
         and h["status"]["operationHistory"]["register"]["start"]),
    case("unmanaged-given-a-bmc-registers", S.UNMANAGED, S.REGISTERING, POLL, answers={"register": SENT},
         calls=REGISTERED),
    case("registration-failure-backs-off", S.REGISTERING, S.REGISTERING, BACKOFF, error=S.REGISTRATION_ERROR,
         answers={"register": Registration(error="MAC address in use")}, check=status_of(errorCount=1)),
    case("registration-failure-for-good-rests", S.REGISTERING, S.REGISTERING, None, error=S.REGISTRATION_ERROR,
         answers={"register": Registration(error="bad address", retry=False)}),
    case("missing-credentials-secret-is-a-registration-error", S.REGISTERING, S.REGISTERING, BACKOFF,
         error=S.REGISTRATION_ERROR, spec={"bmc": {"address": "fake://x", "credentialsName": "gone"}}, calls=()),
    case("missing-credentials-stop-a-new-host-before-the-provisioner", S.NONE, S.REGISTERING, BACKOFF,
         error=S.REGISTRATION_ERROR, spec={"bmc": {"address": "fake://x", "credentialsName": "gone"}}, calls=(),
         check=lambda h: not h["metadata"].get("finalizers")),
    case("registered-moves-to-inspecting", S.REGISTERING, S.INSPECTING, POLL,
         answers={"inspect": Inspection(dirty=True, requeue_after=POLL, started=True)},
         calls=("register", "firmware_components", "register", "inspect"),
         check=lambda h: h["status"]["provisioning"]["ID"] == PROVISIONER_ID),
    case("match-profile-is-registering", S.MATCH_PROFILE, S.INSPECTING, POLL,
         answers={"inspect": Inspection(dirty=True, requeue_after=POLL, started=True)}),
    case("registered-externally-provisioned", S.REGISTERING, S.EXTERNALLY_PROVISIONED, None,
         spec={"externallyProvisioned": True},
         calls=("register", "firmware_components", "register", "adopt", "power off")),
    # Registered, a host has its HostFirmwareSettings, and once available it looks at them again now and then.
    case("registered-without-inspection-is-prepared", S.REGISTERING, S.AVAILABLE, bmh.FIRMWARE_SETTINGS_RECHECK,
         spec={"inspectionMode": "disabled"},
         calls=("register", "firmware_components", "register", "prepare", "register", "power off")),
    case("registered-without-inspection-takes-hardware-by-hand", S.REGISTERING, S.AVAILABLE,
         bmh.FIRMWARE_SETTINGS_RECHECK,
         spec={"inspectionMode": "disabled"},
         annotations={bmh.HARDWARE_DETAILS_ANNOTATION: '{"cpu": {"count": 2}}'},
         check=status_of(hardware={"cpu": {"count": 2}})),
    case("hardware-by-hand-that-is-no-json-is-an-error", S.REGISTERING, S.REGISTERING, None,
         error=S.REGISTRATION_ERROR, spec={"inspectionMode": "disabled"},
         annotations={bmh.HARDWARE_DETAILS_ANNOTATION: "{"}),
    case("new-credentials-are-sent", S.AVAILABLE, S.AVAILABLE, None,
         status={"goodCredentials": {"credentials": {"name": "bmc", "namespace": "ns"}, "credentialsVersion": "0"}},
         calls=("register (credentials changed)", "power off")),
    case("provisioned-host-registration-failure", S.PROVISIONED, S.PROVISIONED, BACKOFF,
         error=S.PROVISIONED_REGISTRATION_ERROR, spec=IMAGE, answers={"register": Registration(error="no BMC")}),
    case("registration-under-way-in-a-later-state-waits", S.PROVISIONED, S.PROVISIONED, POLL, spec=IMAGE,
         answers={"register": Registration(dirty=True, requeue_after=POLL)}, calls=REGISTERED),

    # -- inspecting ----------------------------------------------------------------------------------------
    case("inspection-under-way", S.INSPECTING, S.INSPECTING, POLL,
         answers={"inspect": Inspection(dirty=True, requeue_after=POLL, started=True)}, calls=("register", "inspect"),
         check=lambda h: h["status"]["operationHistory"]["inspect"]["start"]),
    case("inspection-waits-for-a-slot", S.INSPECTING, S.INSPECTING, DELAYED,
         answers={"inspect": Inspection(dirty=True, requeue_after=DELAYED, delayed=True, message="delayed")},
         check=status_of(operationalStatus="delayed")),
    case("inspection-failure-backs-off", S.INSPECTING, S.INSPECTING, BACKOFF, error=S.INSPECTION_ERROR,
         answers={"inspect": Inspection(error="no Processors", started=True)}),
    case("inspected-is-prepared-and-available", S.INSPECTING, S.AVAILABLE, None,
         calls=("register", "inspect", "register", "prepare", "register", "power off"),
         check=lambda h: h["status"]["hardware"] == HARDWARE and h["status"]["operationHistory"]["inspect"]["end"]),
    case("inspected-while-busy-preparing", S.INSPECTING, S.PREPARING, POLL, answers={"prepare": BUSY}),
    case("inspection-disabled-by-spec-is-skipped", S.INSPECTING, S.PREPARING, POLL,
         spec={"inspectionMode": "disabled"}, answers={"prepare": BUSY}, calls=("register", "register", "prepare")),
    case("inspection-disabled-by-annotation-is-skipped", S.INSPECTING, S.PREPARING, POLL,
         annotations={bmh.INSPECT_ANNOTATION: "disabled"}, answers={"prepare": BUSY}),
    case("skipping-a-failed-inspection-clears-its-error", S.INSPECTING, S.AVAILABLE, None,
         spec={"inspectionMode": "disabled"},
         status={"errorType": S.INSPECTION_ERROR, "errorMessage": "x", "errorCount": 3},
         check=status_of(errorCount=0, operationalStatus="OK")),
    case("reinspection-keeps-its-annotation-until-started", S.INSPECTING, S.INSPECTING, DELAYED,
         annotations={bmh.INSPECT_ANNOTATION: ""},
         answers={"inspect": Inspection(dirty=True, requeue_after=DELAYED, delayed=True)},
         calls=("register", "inspect (refresh)"),
         check=lambda h: bmh.INSPECT_ANNOTATION in h["metadata"]["annotations"]),
    case("reinspection-started-drops-its-annotation", S.INSPECTING, S.INSPECTING, POLL,
         annotations={bmh.INSPECT_ANNOTATION: ""},
         answers={"inspect": Inspection(dirty=True, requeue_after=POLL, started=True)},
         check=lambda h: bmh.INSPECT_ANNOTATION not in (h["metadata"].get("annotations") or {})),

    # -- preparing -----------------------------------------------------------------------------------------
    case("preparation-under-way", S.PREPARING, S.PREPARING, POLL, answers={"prepare": BUSY}),
    case("preparation-failure-backs-off", S.PREPARING, S.PREPARING, BACKOFF, error=S.PREPARATION_ERROR,
         answers={"prepare": FAILED}),
    case("prepared-records-hints-and-boot-mode", S.PREPARING, S.AVAILABLE, None,
         spec={"rootDeviceHints": {"deviceName": "/dev/sda"}, "bootMode": "UEFI"},
         check=lambda h: h["status"]["provisioning"]["rootDeviceHints"] == {"deviceName": "/dev/sda"}
         and h["status"]["provisioning"]["bootMode"] == "UEFI"),

    # -- available and ready ---------------------------------------------------------------------------------
    case("available-and-off-rests", S.AVAILABLE, S.AVAILABLE, None, calls=("register", "power off"),
         check=status_of(operationalStatus="OK", poweredOn=False)),
    case("available-powers-on", S.AVAILABLE, S.AVAILABLE, POLL, spec=ONLINE,
         answers={"power": Power(dirty=True, requeue_after=POLL, message="powering on")},
         calls=("register", "power on")),
    case("available-and-on-rests", S.AVAILABLE, S.AVAILABLE, None, spec=ONLINE,
         answers={"power": Power(powered_on=True)}, check=status_of(poweredOn=True)),
    case("power-failure-is-a-power-management-error", S.AVAILABLE, S.AVAILABLE, BACKOFF,
         error=S.POWER_MANAGEMENT_ERROR, answers={"power": Power(error="BMC timeout")}),
    case("power-back-to-normal-clears-the-error", S.AVAILABLE, S.AVAILABLE, None,
         status={"errorType": S.POWER_MANAGEMENT_ERROR, "errorMessage": "x", "errorCount": 2,
                 "operationalStatus": "error"}, check=status_of(errorCount=0, operationalStatus="OK")),
    case("ready-is-available", S.READY, S.READY, None, calls=("register", "power off")),
    case("hard-reboot-asked", S.AVAILABLE, S.AVAILABLE, POLL, spec=ONLINE, annotations={bmh.REBOOT_ANNOTATION: ""},
         answers={"power": Power(dirty=True, requeue_after=POLL, rebooted=True, powered_on=True)},
         calls=("register", "power on (hard reboot)"),
         check=lambda h: bmh.REBOOT_ANNOTATION not in (h["metadata"].get("annotations") or {})),
    case("soft-reboot-asked", S.PROVISIONED, S.PROVISIONED, POLL, spec={**ONLINE, **IMAGE},
         annotations={bmh.REBOOT_ANNOTATION: '{"mode": "soft"}'},
         answers={"power": Power(dirty=True, requeue_after=POLL, rebooted=True)},
         calls=("register", "adopt", "power on (soft reboot)")),
    case("reboot-not-started-keeps-its-annotation", S.AVAILABLE, S.AVAILABLE, POLL, spec=ONLINE,
         annotations={bmh.REBOOT_ANNOTATION: ""}, answers={"power": Power(dirty=True, requeue_after=POLL)},
         check=lambda h: bmh.REBOOT_ANNOTATION in h["metadata"]["annotations"]),
    case("reboot-of-an-offline-host-is-no-reboot", S.AVAILABLE, S.AVAILABLE, None,
         annotations={bmh.REBOOT_ANNOTATION: ""}, calls=("register", "power off")),
    case("power-held-off-by-a-reboot-annotation", S.AVAILABLE, S.AVAILABLE, None, spec=ONLINE,
         annotations={bmh.REBOOT_ANNOTATION + "/remediation": ""}, calls=("register", "power off")),
    case("image-given-with-a-slot-starts-provisioning", S.AVAILABLE, S.PROVISIONING, POLL, spec=IMAGE,
         answers={"provision": BUSY}, calls=("register", "has_capacity", "register", "provision http://i/os.img"),
         check=lambda h: h["status"]["operationHistory"]["provision"]["start"]),
    case("image-given-without-a-slot-waits", S.AVAILABLE, S.AVAILABLE, DELAYED, spec=IMAGE,
         answers={"capacity": Capacity(False, "delayed: 20 hosts are busy")}, calls=("register", "has_capacity"),
         check=status_of(operationalStatus="delayed")),
    case("inspection-asked-by-annotation", S.AVAILABLE, S.INSPECTING, POLL, annotations={bmh.INSPECT_ANNOTATION: ""},
         answers={"inspect": Inspection(dirty=True, requeue_after=POLL, started=True)},
         calls=("register", "register", "inspect (refresh)")),
    case("available-externally-provisioned", S.AVAILABLE, S.EXTERNALLY_PROVISIONED, None,
         spec={"externallyProvisioned": True}),

    # -- provisioning --------------------------------------------------------------------------------------
    case("deploy-under-way", S.PROVISIONING, S.PROVISIONING, POLL, spec=IMAGE, answers={"provision": BUSY},
         calls=("register", "provision http://i/os.img")),
    case("deploy-records-the-image-it-attempts", S.PROVISIONING, S.PROVISIONING, POLL, spec=IMAGE,
         answers={"provision": BUSY}, check=status_of(lastAttemptedImage=IMAGE["image"], provisioningFailCount=0)),
    case("deploy-failure-is-counted-and-deprovisions", S.PROVISIONING, S.DEPROVISIONING, BACKOFF,
         error=S.PROVISIONING_ERROR, spec=IMAGE, answers={"provision": FAILED},
         calls=("register", "provision http://i/os.img"),
         check=status_of(provisioningFailCount=1, lastAttemptedImage=IMAGE["image"], errorMessage="it broke")),
    case("deploy-failure-for-good-is-counted-too", S.PROVISIONING, S.DEPROVISIONING, BACKOFF,
         error=S.PROVISIONING_ERROR, spec=IMAGE, answers={"provision": FAILED_FOR_GOOD},
         status={"provisioningFailCount": 2, "lastAttemptedImage": IMAGE["image"]},
         check=status_of(provisioningFailCount=3)),
    case("deploy-failure-keeps-its-error-while-deprovisioning", S.DEPROVISIONING, S.DEPROVISIONING, POLL,
         error=S.PROVISIONING_ERROR, spec=IMAGE, answers={"deprovision": BUSY},
         status={"errorType": S.PROVISIONING_ERROR, "errorMessage": "it broke", "errorCount": 1,
                 "provisioningFailCount": 1, "lastAttemptedImage": IMAGE["image"]}),
    case("deprovisioned-after-a-failure-tries-again", S.DEPROVISIONING, S.PROVISIONING, POLL, spec=IMAGE,
         answers={"provision": BUSY},
         status={"errorType": S.PROVISIONING_ERROR, "errorMessage": "it broke", "errorCount": 1,
                 "provisioningFailCount": 4, "lastAttemptedImage": IMAGE["image"]},
         calls=("register", "deprovision", "register", "has_capacity", "register", "provision http://i/os.img"),
         check=status_of(provisioningFailCount=4, errorCount=0)),
    case("retry-limit-reached-stops-in-available", S.AVAILABLE, S.AVAILABLE, None, error=S.PROVISIONING_ERROR,
         spec=IMAGE, status={"provisioningFailCount": 5, "lastAttemptedImage": IMAGE["image"]}, calls=REGISTERED,
         check=status_of(provisioningFailCount=5, operationalStatus="error",
                         errorMessage="provisioning failed 5 times, retry limit (5) reached; change image or reset "
                                      "provisioningFailCount to retry")),
    case("retry-limit-as-given", S.AVAILABLE, S.AVAILABLE, None, error=S.PROVISIONING_ERROR, spec=IMAGE, retries=2,
         status={"provisioningFailCount": 2, "lastAttemptedImage": IMAGE["image"]},
         check=status_of(errorMessage="provisioning failed 2 times, retry limit (2) reached; change image or reset "
                                      "provisioningFailCount to retry")),
    case("retry-limit-0-is-no-limit", S.AVAILABLE, S.PROVISIONING, POLL, spec=IMAGE, retries=0,
         answers={"provision": BUSY}, status={"provisioningFailCount": 50, "lastAttemptedImage": IMAGE["image"]},
         check=status_of(provisioningFailCount=50)),
    case("retry-limit-below-is-tried-again", S.AVAILABLE, S.PROVISIONING, POLL, spec=IMAGE,
         answers={"provision": BUSY}, status={"provisioningFailCount": 4, "lastAttemptedImage": IMAGE["image"]}),
    case("retry-limit-reset-by-hand-tries-again", S.AVAILABLE, S.PROVISIONING, POLL, spec=IMAGE,
         answers={"provision": BUSY},
         status={"errorType": S.PROVISIONING_ERROR, "errorMessage": "provisioning failed 5 times, ...",
                 "errorCount": 1, "provisioningFailCount": 0, "lastAttemptedImage": IMAGE["image"]},
         check=status_of(errorCount=0, operationalStatus="OK")),
    case("new-image-resets-the-fail-count", S.AVAILABLE, S.PROVISIONING, POLL, spec=IMAGE,
         answers={"provision": BUSY},
         status={"errorType": S.PROVISIONING_ERROR, "errorMessage": "provisioning failed 5 times, ...",
                 "provisioningFailCount": 5, "lastAttemptedImage": {"url": "http://i/old.img"}},
         check=status_of(provisioningFailCount=0, lastAttemptedImage=IMAGE["image"])),
    case("available-without-image-resets-the-fail-count", S.AVAILABLE, S.AVAILABLE, None,
         status={"provisioningFailCount": 3, "lastAttemptedImage": IMAGE["image"]},
         check=lambda h: h["status"]["provisioningFailCount"] == 0 and "lastAttemptedImage" not in h["status"]),
    case("deployed-resets-the-fail-count", S.PROVISIONING, S.PROVISIONED, None, spec=IMAGE,
         status={"provisioningFailCount": 3, "lastAttemptedImage": IMAGE["image"]},
         check=status_of(provisioningFailCount=0, lastAttemptedImage=IMAGE["image"])),
    case("deployed-is-provisioned", S.PROVISIONING, S.PROVISIONED, None, spec=IMAGE,
         calls=("register", "provision http://i/os.img", "register", "adopt", "power off"),
         check=lambda h: h["status"]["provisioning"]["image"] == IMAGE["image"]
         and h["status"]["operationHistory"]["provision"]["end"]),
    case("custom-deploy-is-recorded", S.PROVISIONING, S.PROVISIONED, None, spec={"customDeploy": {"method": "m"}},
         calls=("register", "provision m", "register", "adopt", "power off"),
         check=lambda h: h["status"]["provisioning"]["customDeploy"] == {"method": "m"}),
    case("image-removed-while-provisioning", S.PROVISIONING, S.DEPROVISIONING, POLL,
         answers={"deprovision": BUSY}, calls=("register", "register", "deprovision")),
    case("config-drive-from-missing-user-data-is-an-error", S.PROVISIONING, S.PROVISIONING, BACKOFF,
         error=S.PROVISIONING_ERROR, spec={**IMAGE, "userData": {"name": "missing"}}, answers={"provision": BUSY},
         check=status_of(provisioningFailCount=0)),  # no deploy failed: as upstream, not counted
    case("config-drive-from-another-namespace-is-refused", S.PROVISIONING, S.PROVISIONING, None,
         error=S.PROVISIONING_ERROR, spec={**IMAGE, "userData": {"name": "u", "namespace": "other"}},
         answers={"provision": BUSY}),

    # -- provisioned -----------------------------------------------------------------------------------------
    case("provisioned-and-on-rests", S.PROVISIONED, S.PROVISIONED, None, spec={**IMAGE, **ONLINE},
         answers={"power": Power(powered_on=True)}, calls=("register", "adopt", "power on")),
    case("provisioned-being-adopted", S.PROVISIONED, S.PROVISIONED, POLL, spec=IMAGE, answers={"adopt": BUSY},
         calls=("register", "adopt")),
    case("adoption-failure", S.PROVISIONED, S.PROVISIONED, BACKOFF, error=S.PROVISIONED_REGISTRATION_ERROR,
         spec=IMAGE, answers={"adopt": FAILED}),
    case("image-removed-deprovisions", S.PROVISIONED, S.DEPROVISIONING, POLL, answers={"deprovision": BUSY},
         calls=("register", "register", "deprovision")),
    case("externally-provisioned-keeps-no-image", S.EXTERNALLY_PROVISIONED, S.EXTERNALLY_PROVISIONED, None,
         calls=("register", "adopt", "power off")),

    # -- deprovisioning --------------------------------------------------------------------------------------
    case("undeploy-under-way", S.DEPROVISIONING, S.DEPROVISIONING, POLL, answers={"deprovision": BUSY},
         check=lambda h: h["status"]["operationHistory"]["deprovision"]["start"]),
    case("undeploy-waits-for-a-slot", S.DEPROVISIONING, S.DEPROVISIONING, DELAYED, answers={"deprovision": NO_SLOT},
         check=status_of(operationalStatus="delayed")),
    case("undeploy-without-cleaning", S.DEPROVISIONING, S.DEPROVISIONING, POLL,
         spec={"automatedCleaningMode": "disabled"}, answers={"deprovision": BUSY},
         calls=("register", "deprovision (no cleaning)")),
    case("cleaning-failure", S.DEPROVISIONING, S.DEPROVISIONING, BACKOFF, error=S.PROVISIONING_ERROR,
         answers={"deprovision": FAILED}),
    case("deprovisioned-is-available", S.DEPROVISIONING, S.AVAILABLE, None,
         status={"provisioning": {"image": IMAGE["image"]}},
         check=lambda h: h["status"]["provisioning"]["image"] == {}),
    case("deprovisioned-with-a-new-image-provisions-it", S.DEPROVISIONING, S.PROVISIONING, POLL, spec=IMAGE,
         answers={"provision": BUSY}),

    # -- deletion ------------------------------------------------------------------------------------------
    case("deleted-available-host-powers-off", S.AVAILABLE, S.POWERING_OFF_BEFORE_DELETE, POLL, deleting=True,
         answers={"power": Power(dirty=True, requeue_after=POLL)}, calls=("power off",)),
    case("deleted-host-powered-off-is-removed", S.POWERING_OFF_BEFORE_DELETE, None, None, deleting=True,
         calls=("power off", "delete")),
    case("deleted-host-that-keeps-its-power", S.AVAILABLE, None, None, deleting=True,
         spec={"disablePowerOff": True}, calls=("delete",)),
    case("deleted-provisioned-host-deprovisions-first", S.PROVISIONED, S.DEPROVISIONING, POLL, deleting=True,
         spec=IMAGE, answers={"deprovision": BUSY}, calls=("deprovision",)),
    case("deleted-host-deprovisioned-is-removed", S.DEPROVISIONING, None, None, deleting=True,
         calls=("deprovision", "power off", "delete")),
    case("deleted-host-the-provisioner-cannot-forget", S.DELETING, S.DELETING, BACKOFF, deleting=True,
         error=S.REGISTRATION_ERROR, answers={"delete": FAILED}),
    case("deleted-unmanaged-host-is-removed", S.UNMANAGED, None, None, deleting=True, spec={"bmc": None}),

    # -- firmware settings (HostFirmwareSettings), applied while available -----------------------------------
    case("available-host-applies-valid-changed-settings", S.AVAILABLE, S.PREPARING, POLL,
         firmware=settings(TURBO_OFF), answers={**CURRENT, "prepare": BUSY},
         calls=("register", "firmware_settings", "register", "prepare {'ProcTurboMode': 'Disabled'}")),
    case("settings-applied-host-is-available-again", S.PREPARING, S.AVAILABLE, bmh.FIRMWARE_SETTINGS_RECHECK,
         firmware=settings(TURBO_OFF), answers=APPLIED,
         calls=("register", "prepare {'ProcTurboMode': 'Disabled'}", "register", "firmware_settings", "power off")),
    case("settings-not-yet-judged-are-waited-for", S.AVAILABLE, S.AVAILABLE, bmh.FIRMWARE_SETTINGS_WAIT,
         firmware=settings(TURBO_OFF, judged=False), calls=("register",)),
    case("invalid-settings-are-not-applied", S.AVAILABLE, S.AVAILABLE, bmh.FIRMWARE_SETTINGS_RECHECK,
         firmware=settings({"ProcTurboMode": "Sometimes"}, valid=False), calls=("register", "power off")),
    case("settings-as-asked-leave-the-host-watching-them", S.AVAILABLE, S.AVAILABLE, bmh.FIRMWARE_SETTINGS_RECHECK,
         firmware=settings({"ProcTurboMode": "Enabled"}, changed=False), calls=("register", "power off")),
    case("preparing-host-waits-for-settings-to-be-judged", S.PREPARING, S.PREPARING, bmh.FIRMWARE_SETTINGS_WAIT,
         firmware=settings(TURBO_OFF, judged=False), calls=("register",)),
    case("failed-settings-are-a-preparation-error", S.PREPARING, S.PREPARING, BACKOFF, error=S.PREPARATION_ERROR,
         firmware=settings(TURBO_OFF), answers={"prepare": FAILED}),

    # -- firmware updates (HostFirmwareComponents), sent while available: those not sent yet -------------------
    case("available-host-sends-valid-updates", S.AVAILABLE, S.PREPARING, POLL, components=components([BIOS_UPDATE]),
         answers={"prepare": STARTED}, calls=("register", "register", "prepare" + SENDS_BIOS),
         check_components=sent([BIOS_UPDATE])),
    case("updates-sent-are-not-sent-again", S.PREPARING, S.AVAILABLE, None,
         components=components([BIOS_UPDATE], sent=[BIOS_UPDATE]),
         calls=("register", "prepare", "register", "power off"),
         check_components=sent([BIOS_UPDATE])),
    case("an-update-of-another-url-is-sent", S.PREPARING, S.PREPARING, POLL,
         components=components([{"component": "bios", "url": "http://fw/bios-2.bin"}], sent=[BIOS_UPDATE]),
         answers={"prepare": STARTED}, calls=("register", "prepare update bios=http://fw/bios-2.bin"),
         check_components=sent([{"component": "bios", "url": "http://fw/bios-2.bin"}])),
    case("updates-not-yet-judged-are-waited-for", S.AVAILABLE, S.AVAILABLE, bmh.FIRMWARE_SETTINGS_WAIT,
         components=components([BIOS_UPDATE], judged=False), calls=("register",)),
    case("invalid-updates-are-not-sent", S.AVAILABLE, S.AVAILABLE, None,
         components=components([{"component": "cpld", "url": "http://fw/x"}], valid=False),
         calls=("register", "power off")),
    case("failed-update-is-a-preparation-error-and-is-sent-again-next-time", S.PREPARING, S.PREPARING, BACKOFF,
         error=S.PREPARATION_ERROR, components=components([BIOS_UPDATE], sent=[BIOS_UPDATE], changed=False),
         answers={"prepare": FAILED}, check_components=sent(None)),
    case("settings-and-updates-go-in-one-preparation", S.PREPARING, S.PREPARING, POLL,
         firmware=settings(TURBO_OFF), components=components([BIOS_UPDATE]), answers={"prepare": STARTED},
         calls=("register", "prepare {'ProcTurboMode': 'Disabled'}" + SENDS_BIOS)),

    # -- servicing: firmware settings applied to a provisioned host as it reboots, under its HostUpdatePolicy ----
    case("reboot-under-a-policy-starts-servicing", S.PROVISIONED, S.PROVISIONED, POLL, **REBOOTING, status=ON,
         firmware=settings(TURBO_OFF), policy=SETTINGS_ON_REBOOT, answers=CURRENT,
         calls=("register", "adopt", "firmware_settings"), check=status_of(operationalStatus="servicing")),
    case("servicing-under-way", S.PROVISIONED, S.PROVISIONED, POLL, **REBOOTING, status=SERVICING,
         firmware=settings(TURBO_OFF), policy=SETTINGS_ON_REBOOT, answers={"service": BUSY},
         calls=("register", "adopt", "service {'ProcTurboMode': 'Disabled'}"),
         check=status_of(operationalStatus="servicing")),
    case("serviced-host-is-ok-and-its-reboot-done", S.PROVISIONED, S.PROVISIONED, None, **REBOOTING,
         status=SERVICING, firmware=settings(TURBO_OFF), policy=SETTINGS_ON_REBOOT,
         answers={"power": Power(powered_on=True)},
         calls=("register", "adopt", "service {'ProcTurboMode': 'Disabled'}", "power on"),
         check=lambda h: h["status"]["operationalStatus"] == "OK"
         and bmh.REBOOT_ANNOTATION not in (h["metadata"].get("annotations") or {})),
    case("servicing-failure-is-a-servicing-error", S.PROVISIONED, S.PROVISIONED, BACKOFF, **REBOOTING,
         status=SERVICING, error=S.SERVICING_ERROR, firmware=settings(TURBO_OFF), policy=SETTINGS_ON_REBOOT,
         answers={"service": FAILED},
         check=status_of(operationalStatus="error")),
    case("servicing-error-is-tried-again", S.PROVISIONED, S.PROVISIONED, POLL, **REBOOTING, status=SERVICING_FAILED,
         firmware=settings(TURBO_OFF), policy=SETTINGS_ON_REBOOT, answers={"service": BUSY},
         calls=("register", "adopt", "service {'ProcTurboMode': 'Disabled'} (restart)")),
    case("servicing-reverted-when-its-policy-goes", S.PROVISIONED, S.PROVISIONED, POLL, **REBOOTING,
         status=SERVICING_FAILED,
         firmware=settings(TURBO_OFF), answers={"service": BUSY}, calls=("register", "adopt", "service (restart)")),
    case("reboot-without-a-policy-is-only-a-reboot", S.PROVISIONED, S.PROVISIONED, POLL, **REBOOTING, status=ON,
         firmware=settings(TURBO_OFF), answers={"power": Power(dirty=True, requeue_after=POLL, rebooted=True)},
         calls=("register", "adopt", "power on (hard reboot)")),
    case("a-policy-for-firmware-updates-does-not-allow-settings", S.PROVISIONED, S.PROVISIONED, POLL, **REBOOTING,
         status=ON, firmware=settings(TURBO_OFF), policy={"firmwareUpdates": "onReboot"},
         answers={"power": Power(dirty=True, requeue_after=POLL, rebooted=True)},
         calls=("register", "adopt", "power on (hard reboot)")),
    case("no-servicing-unless-it-reboots", S.PROVISIONED, S.PROVISIONED, None, spec={**ONLINE, **IMAGE},
         status={"poweredOn": True}, firmware=settings(TURBO_OFF), policy=SETTINGS_ON_REBOOT,
         answers={"power": Power(powered_on=True)}, calls=("register", "adopt", "power on")),

    case("reboot-under-a-policy-for-updates-starts-servicing", S.PROVISIONED, S.PROVISIONED, POLL, **REBOOTING,
         status=ON, components=components([BIOS_UPDATE]), policy=UPDATES_ON_REBOOT, calls=("register", "adopt"),
         check=status_of(operationalStatus="servicing")),
    case("servicing-sends-the-updates", S.PROVISIONED, S.PROVISIONED, POLL, **REBOOTING, status=SERVICING,
         components=components([BIOS_UPDATE]), policy=UPDATES_ON_REBOOT, answers={"service": STARTED},
         calls=("register", "adopt", "service" + SENDS_BIOS), check_components=sent([BIOS_UPDATE])),
    case("servicing-with-updates-sent-waits-for-them", S.PROVISIONED, S.PROVISIONED, POLL, **REBOOTING,
         status=SERVICING, components=components([BIOS_UPDATE], sent=[BIOS_UPDATE], changed=False),
         policy=UPDATES_ON_REBOOT, answers={"service": BUSY}, calls=("register", "adopt", "service")),
    case("failed-servicing-sends-the-updates-again", S.PROVISIONED, S.PROVISIONED, BACKOFF, **REBOOTING,
         status=SERVICING, error=S.SERVICING_ERROR, policy=UPDATES_ON_REBOOT,
         components=components([BIOS_UPDATE], sent=[BIOS_UPDATE], changed=False), answers={"service": FAILED},
         check_components=sent(None)),
    case("a-policy-for-settings-does-not-allow-updates", S.PROVISIONED, S.PROVISIONED, POLL, **REBOOTING,
         status=ON, components=components([BIOS_UPDATE]), policy=SETTINGS_ON_REBOOT,
         answers={"power": Power(dirty=True, requeue_after=POLL, rebooted=True)},
         calls=("register", "adopt", "power on (hard reboot)")),

    # -- DataImage: attached, or detached once deleted, as a provisioned host is powered on (upstream's flow) ---------
    case("powering-on-attaches-the-data-image", S.PROVISIONED, S.PROVISIONED, dataimage.CHECK_DELAY, spec=POWER_ON,
         data_image=data_image(), calls=("register", "adopt", "data_image_status", "attach_data_image " + ISO),
         check_image=lambda di: di["status"]["attachedImage"] == {"url": ISO} and di["status"]["lastReconciled"]),
    case("a-reboot-attaches-the-data-image", S.PROVISIONED, S.PROVISIONED, dataimage.CHECK_DELAY, **REBOOTING,
         status=ON, data_image=data_image(),
         calls=("register", "adopt", "data_image_status", "attach_data_image " + ISO),
         check=lambda h: bmh.REBOOT_ANNOTATION in h["metadata"]["annotations"]),  # the reboot waits for the image
    case("data-image-in-the-drive-lets-the-host-power-on", S.PROVISIONED, S.PROVISIONED, POLL, spec=POWER_ON,
         data_image=data_image(attached=ISO, error={"count": 2, "message": "x"}),
         answers={"data_image_status": DataImageStatus(attached=True), "power": POWERING_ON},
         calls=("register", "adopt", "data_image_status (since the last attach)", "power on"),
         check_image=lambda di: di["status"]["error"] == {"count": 0, "message": ""}),
    case("a-running-host-leaves-its-data-image-alone", S.PROVISIONED, S.PROVISIONED, None, spec=POWER_ON, status=ON,
         data_image=data_image(), answers={"power": Power(powered_on=True)}, calls=("register", "adopt", "power on"),
         check_image=lambda di: "attachedImage" not in di["status"]),
    case("an-offline-host-leaves-its-data-image-alone", S.PROVISIONED, S.PROVISIONED, None, spec=IMAGE,
         data_image=data_image(), calls=("register", "adopt", "power off")),
    case("a-failed-attach-is-counted-and-tried-again-later", S.PROVISIONED, S.PROVISIONED, dataimage.UPDATE_DELAY,
         spec=POWER_ON, data_image=data_image(attached=ISO),
         answers={"data_image_status": DataImageStatus(attach_error="Could not attach device cdrom to node x: 404")},
         calls=("register", "adopt", "data_image_status (since the last attach)"),
         check_image=lambda di: di["status"]["attachedImage"] == {"url": ""}
         and di["status"]["error"] == {"count": 1, "message": "Could not attach device cdrom to node x: 404"}),
    case("an-image-gone-from-the-drive-is-attached-again", S.PROVISIONED, S.PROVISIONED, 0.0, spec=POWER_ON,
         data_image=data_image(attached=ISO), calls=("register", "adopt", "data_image_status (since the last attach)"),
         check_image=lambda di: di["status"]["attachedImage"] == {"url": ""}),
    case("a-refused-attach-request-is-counted", S.PROVISIONED, S.PROVISIONED, dataimage.UPDATE_DELAY, spec=POWER_ON,
         data_image=data_image(), answers={"attach_data_image": FAILED},
         check_image=lambda di: di["status"]["error"] == {"count": 1, "message": "it broke"}
         and "attachedImage" not in di["status"]),
    case("a-busy-host-waits-to-look-at-its-drive", S.PROVISIONED, S.PROVISIONED, POLL, spec=POWER_ON,
         data_image=data_image(), answers={"data_image_status": DataImageStatus(dirty=True, requeue_after=POLL)},
         calls=("register", "adopt", "data_image_status")),
    case("an-unreadable-drive-is-counted", S.PROVISIONED, S.PROVISIONED, dataimage.UPDATE_DELAY, spec=POWER_ON,
         data_image=data_image(), answers={"data_image_status": DataImageStatus(error="Ironic refused")},
         check_image=lambda di: di["status"]["error"] == {"count": 1, "message": "Ironic refused"}),
    case("a-new-url-detaches-the-old-image-first", S.PROVISIONED, S.PROVISIONED, dataimage.CHECK_DELAY,
         spec=POWER_ON, data_image=data_image(url="http://images.example/other.iso", attached=ISO),
         answers={"data_image_status": DataImageStatus(attached=True)},
         calls=("register", "adopt", "data_image_status (since the last attach)", "detach_data_image")),
    case("a-deleted-data-image-is-detached-at-power-on", S.PROVISIONED, S.PROVISIONED, dataimage.CHECK_DELAY,
         spec=POWER_ON, data_image=data_image(attached=ISO, deleted=True),
         answers={"data_image_status": DataImageStatus(attached=True)},
         calls=("register", "adopt", "data_image_status (since the last attach)", "detach_data_image")),
    case("a-deleted-data-image-detached-lets-the-host-power-on", S.PROVISIONED, S.PROVISIONED, POLL,
         spec=POWER_ON, data_image=data_image(deleted=True), answers={"power": POWERING_ON},
         calls=("register", "adopt", "data_image_status", "power on")),
    case("a-loopback-url-is-refused-naming-it-and-the-host-powers-on", S.PROVISIONED, S.PROVISIONED, POLL,
         spec=POWER_ON, data_image=data_image(url="http://127.0.0.1:8080/data.iso"), answers={"power": POWERING_ON},
         calls=("register", "adopt", "data_image_status", "power on"),
         check_image=lambda di: di["status"]["error"]["count"] == 1
         and di["status"]["error"]["message"].startswith(
             "spec.url: 'http://127.0.0.1:8080/data.iso' names a loopback")),
    case("an-externally-provisioned-host-attaches-too", S.EXTERNALLY_PROVISIONED, S.EXTERNALLY_PROVISIONED,
         dataimage.CHECK_DELAY, spec={"online": True, "externallyProvisioned": True}, data_image=data_image(),
         calls=("register", "adopt", "data_image_status", "attach_data_image " + ISO)),

    # -- detached and paused -------------------------------------------------------------------------------
    case("detached-host-is-forgotten", S.PROVISIONED, S.PROVISIONED, None, spec=IMAGE,
         annotations={bmh.DETACHED_ANNOTATION: ""}, calls=("detach",),
         check=lambda h: h["status"]["operationalStatus"] == "detached" and "ID" not in h["status"]["provisioning"]),
    case("detach-under-way", S.AVAILABLE, S.AVAILABLE, POLL, annotations={bmh.DETACHED_ANNOTATION: ""},
         answers={"detach": BUSY}),
    case("detach-failure", S.AVAILABLE, S.AVAILABLE, BACKOFF, error=S.DETACH_ERROR,
         annotations={bmh.DETACHED_ANNOTATION: ""}, answers={"detach": FAILED}),
    # -- the Healthy condition: the BMC's own health, not the host's errors ------------------------------------
    case("bmc-health-ok-is-healthy", S.AVAILABLE, S.AVAILABLE, None, answers={"health": "OK"},
         check=lambda h: healthy(h) == ("True", "Healthy")),
    case("bmc-health-warning", S.AVAILABLE, S.AVAILABLE, None, answers={"health": "Warning"},
         check=lambda h: healthy(h) == ("False", "Warning")),
    case("bmc-health-critical", S.PROVISIONED, S.PROVISIONED, None, spec=IMAGE, answers={"health": "Critical"},
         check=lambda h: healthy(h) == ("False", "CriticalError")),
    case("bmc-health-unknown", S.AVAILABLE, S.AVAILABLE, None, check=lambda h: healthy(h) == ("Unknown", "Unknown")),
    case("bmc-health-unknown-keeps-the-last-known", S.AVAILABLE, S.AVAILABLE, None,
         status={"conditions": [{"type": "Healthy", "status": "False", "reason": "Warning", "message": ""}]},
         check=lambda h: healthy(h) == ("False", "Warning")),
    case("bmc-health-replaces-health-derived-from-errors", S.AVAILABLE, S.AVAILABLE, None,
         status={"conditions": [{"type": "Healthy", "status": "False", "reason": "RegistrationError"}]},
         check=lambda h: healthy(h) == ("Unknown", "Unknown")),
    case("errors-do-not-make-a-host-unhealthy", S.AVAILABLE, S.AVAILABLE, BACKOFF, error=S.POWER_MANAGEMENT_ERROR,
         answers={"power": Power(error="BMC timeout"), "health": "OK"},
         check=lambda h: healthy(h) == ("True", "Healthy")),
    case("detach-waits-for-the-operation-under-way", S.PROVISIONING, S.PROVISIONING, POLL, spec=IMAGE,
         annotations={bmh.DETACHED_ANNOTATION: ""}, answers={"provision": BUSY},
         calls=("register", "provision http://i/os.img")),
    case("forced-detach-under-way", S.PROVISIONING, S.PROVISIONING, None, spec=IMAGE,
         annotations={bmh.DETACHED_ANNOTATION: '{"force": true}'}, calls=("detach (forced)",),
         check=status_of(operationalStatus="detached")),
    case("detached-host-deletion-waits-to-be-attached-again", S.PROVISIONED, S.PROVISIONED, None, spec=IMAGE,
         deleting=True, status={"operationalStatus": "detached"}, calls=()),
    case("detached-host-deletion-delayed-as-asked", S.PROVISIONED, S.PROVISIONED, None, spec=IMAGE, deleting=True,
         annotations={bmh.DETACHED_ANNOTATION: '{"deleteAction": "delay"}'}, calls=()),
    case("detached-host-deleted-without-power-off-or-deprovisioning", S.PROVISIONED, None, None, spec=IMAGE,
         deleting=True, annotations={bmh.DETACHED_ANNOTATION: '{"deleteAction": "delete"}'}, calls=("delete",)),
    case("detached-annotation-value-not-json-is-ignored", S.PROVISIONED, None, None, spec=IMAGE, deleting=True,
         annotations={bmh.DETACHED_ANNOTATION: "yes please"}, calls=("delete",)),
    # -- RAID (spec.raid), applied while preparing, recorded in status.provisioning.raid ------------------------
    case("available-host-with-new-raid-prepares-it", S.AVAILABLE, S.PREPARING, POLL, spec={"raid": HW_RAID},
         answers={"prepare": STARTED}, calls=("register", "register", "prepare raid h[1] over unknown"),
         check=raid_recorded(HW_RECORDED)),
    case("raid-as-recorded-leaves-the-host-available", S.AVAILABLE, S.AVAILABLE, None, spec={"raid": HW_RAID},
         status={"provisioning": {"raid": HW_RECORDED}}, calls=("register", "power off")),
    case("raid-under-way-is-not-given-again", S.PREPARING, S.AVAILABLE, None, spec={"raid": HW_RAID},
         status={"provisioning": {"raid": HW_RECORDED}}, calls=("register", "prepare", "register", "power off")),
    case("raid-changed-is-applied-over-what-was", S.AVAILABLE, S.PREPARING, POLL,
         spec={"raid": {"hardwareRAIDVolumes": [{"name": "root", "level": "5"}]}},
         status={"provisioning": {"raid": HW_RECORDED}}, answers={"prepare": BUSY},
         calls=("register", "register", "prepare raid h[5] over h[1]"), check=raid_recorded(HW_RECORDED)),
    case("raid-with-nothing-to-do-is-recorded", S.PREPARING, S.AVAILABLE, None, spec={"raid": HW_RAID},
         calls=("register", "prepare raid h[1] over unknown", "register", "power off"),
         check=raid_recorded(HW_RECORDED)),
    case("raid-root-volume-clears-the-root-device-hints", S.PREPARING, S.AVAILABLE, None, spec={"raid": SW_ROOT},
         status={"provisioning": {"rootDeviceHints": {"deviceName": "/dev/sda"}}},
         calls=("register", "prepare raid s[1, 0] over unknown", "register", "power off"),
         check=lambda h: "rootDeviceHints" not in h["status"]["provisioning"]
         and h["status"]["provisioning"]["raid"]["softwareRAIDVolumes"] == SW_ROOT["softwareRAIDVolumes"]),
    case("raid-failure-is-a-preparation-error-that-forgets-software-volumes", S.PREPARING, S.PREPARING, BACKOFF,
         error=S.PREPARATION_ERROR, spec={"raid": {"softwareRAIDVolumes": [{"level": "1"}, {"level": "1"}]}},
         status={"provisioning": {"raid": SW_RECORDED}}, answers={"prepare": FAILED},
         calls=("register", "prepare raid s[1, 1] over s[1]"),
         check=raid_recorded({"hardwareRAIDVolumes": None, "softwareRAIDVolumes": None})),
    case("raid-failure-keeps-the-hardware-volumes", S.PREPARING, S.PREPARING, BACKOFF,
         error=S.PREPARATION_ERROR, spec={"raid": {"hardwareRAIDVolumes": [{"name": "root", "level": "0"}]}},
         status={"provisioning": {"raid": HW_RECORDED}}, answers={"prepare": FAILED}, check=raid_recorded(HW_RECORDED)),
    case("after-a-failure-raid-is-applied-again-over-unknown", S.PREPARING, S.PREPARING, POLL, spec={"raid": HW_RAID},
         status={"provisioning": {"raid": HW_RECORDED}, "errorType": S.PREPARATION_ERROR, "errorMessage": "it broke"},
         answers={"prepare": STARTED}, calls=("register", "prepare raid h[1] over unknown"),
         check=status_of(errorMessage=None)),
    case("raid-removed-keeps-hardware-and-removes-software", S.AVAILABLE, S.PREPARING, POLL,
         status={"provisioning": {"raid": HW_RECORDED}}, answers={"prepare": STARTED},
         calls=("register", "register", "prepare raid h[1] s[] over h[1]"),
         check=raid_recorded({**HW_RECORDED, "softwareRAIDVolumes": []})),
    # upstream's quirk: {} is recorded, then seen as "remove the software volumes" and recorded so, then it rests
    case("empty-raid-of-a-host-that-had-none-is-recorded-twice-as-upstream-does", S.AVAILABLE, S.AVAILABLE, None,
         spec={"raid": {}}, calls=("register", "register", "prepare raid none over unknown", "register", "register",
                                   "prepare raid s[] over none", "register", "power off"),
         check=raid_recorded({"hardwareRAIDVolumes": None, "softwareRAIDVolumes": []})),
    case("raid-given-to-clear-hardware-volumes", S.AVAILABLE, S.PREPARING, POLL,
         spec={"raid": {"hardwareRAIDVolumes": []}}, status={"provisioning": {"raid": HW_RECORDED}},
         answers={"prepare": STARTED}, calls=("register", "register", "prepare raid h[] over h[1]")),
    case("paused-host-is-left-alone", S.PROVISIONING, S.PROVISIONING, None, spec=IMAGE,
         annotations={bmh.PAUSED_ANNOTATION: ""}, calls=()),
    # -- its PreprovisioningImage (when the provisioner builds per-host images) ---------------------------------
    case("inspecting-host-makes-its-image-and-waits-for-it", S.INSPECTING, S.INSPECTING, ppi.HOST_RETRY, spec=ARM,
         answers=INITRD_ONLY, calls=("register",),
         check_ppi=lambda made: made is not None and made["spec"] == ARM_INITRD
         and made["metadata"]["finalizers"] == [ppi.HOST_FINALIZER]
         and made["metadata"]["ownerReferences"][0]["controller"] is True),
    case("image-asks-for-the-inspected-architecture", S.PREPARING, S.PREPARING, ppi.HOST_RETRY, answers=INITRD_ONLY,
         status={"hardware": {"cpu": {"arch": "ppc64le"}}}, check_ppi=image_is(architecture="ppc64le")),
    case("ready-image-is-booted", S.INSPECTING, S.INSPECTING, POLL, spec=ARM, image=image(),
         answers={**INITRD_ONLY, "inspect": BUSY},
         calls=("register with initrd image http://img/ipa.initramfs", "inspect")),
    case("image-of-an-older-generation-is-waited-for", S.PREPARING, S.PREPARING, ppi.HOST_RETRY, spec=ARM,
         image=image(judged=False), answers=INITRD_ONLY, calls=("register",)),
    case("image-of-a-format-not-accepted-is-waited-for", S.PREPARING, S.PREPARING, ppi.HOST_RETRY, spec=ARM,
         image=image(format_="iso"), answers=INITRD_ONLY, calls=("register",)),
    case("image-spec-follows-the-host", S.DEPROVISIONING, S.DEPROVISIONING, ppi.HOST_RETRY, spec=ARM,
         image=image({"architecture": "aarch64", "acceptFormats": ["iso", "initrd"]}), answers=INITRD_ONLY,
         check_ppi=image_is(acceptFormats=["initrd"])),
    case("image-build-error-is-a-registration-error", S.INSPECTING, S.INSPECTING, BACKOFF, spec=ARM,
         error=S.REGISTRATION_ERROR, image=image(error="no image for you"), answers=INITRD_ONLY, calls=(),
         check=lambda h: h["status"]["errorMessage"] == "no image for you"),
    case("no-acceptable-formats-is-a-registration-error", S.INSPECTING, S.INSPECTING, BACKOFF, spec=ARM,
         error=S.REGISTRATION_ERROR, answers={"preprovisioning_formats": []}, check_ppi=image_is()),
    case("available-host-makes-its-image-without-waiting", S.AVAILABLE, S.AVAILABLE, None, spec=ARM,
         answers=INITRD_ONLY, check_ppi=image_is(architecture="aarch64")),
    case("provisioned-host-asks-for-no-image", S.PROVISIONED, S.PROVISIONED, None, spec={**ARM, **IMAGE},
         answers=INITRD_ONLY, check_ppi=image_is()),
    case("fast-inspection-asks-for-no-image", S.INSPECTING, S.PREPARING, ppi.HOST_RETRY,
         spec={**ARM, "inspectionMode": "fast"}, answers=INITRD_ONLY, calls=("register", "inspect", "register")),
    case("deprovisioning-without-cleaning-asks-for-no-image", S.DEPROVISIONING, S.DEPROVISIONING, POLL,
         spec={**ARM, "automatedCleaningMode": "disabled"}, answers={**INITRD_ONLY, "deprovision": BUSY},
         calls=("register", "deprovision (no cleaning)"), check_ppi=image_is()),
    case("deleted-host-lets-its-image-go", S.DELETING, None, None, deleting=True, answers=INITRD_ONLY,
         image=image(finalizers=(ppi.HOST_FINALIZER, ppi.FINALIZER)),
         check_ppi=lambda made: made is not None and made["metadata"]["finalizers"] == [ppi.FINALIZER]),
]


@pytest.fixture
def store(tmp_path):
    with LocalStore(str(tmp_path / "store.db")) as opened:
        yield opened


def make_host(store: LocalStore, case: Case) -> Ref:
    store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bmc", "namespace": "ns"},
                  "stringData": {"username": "u", "password": "p"}})
    spec = {"online": False, "bmc": {"address": "fake://x", "credentialsName": "bmc"}, **case.spec}
    spec = {key: value for key, value in spec.items() if value is not None}  # None: the field is left out
    metadata: dict[str, Any] = {"name": "h", "namespace": "ns", "annotations": dict(case.annotations)}
    if case.state not in (bmh.NONE, bmh.UNMANAGED) or case.deleting:
        metadata["finalizers"] = [bmh.FINALIZER]
    host = store.create({"apiVersion": bmh.API, "kind": bmh.KIND, "metadata": metadata, "spec": spec})
    provisioning = {"state": case.state, **({"ID": PROVISIONER_ID} if case.state else {}),
                    **case.status.get("provisioning", {})}
    status = {"errorCount": 0, **case.status, "provisioning": provisioning}
    store.update_status({**host, "status": status})
    ref = Ref.of(host)
    if case.firmware is not None:
        made = store.create({"apiVersion": bmh.API, "kind": "HostFirmwareSettings",
                             "metadata": {"name": "h", "namespace": "ns"}, "spec": case.firmware["spec"]})
        store.update_status({**made, "status": case.firmware["status"]})
    if case.components is not None:
        made = store.create({"apiVersion": bmh.API, "kind": "HostFirmwareComponents",
                             "metadata": {"name": "h", "namespace": "ns"}, "spec": case.components["spec"]})
        store.update_status({**made, "status": case.components["status"]})
    if case.image is not None:
        made = store.create({"apiVersion": bmh.API, "kind": ppi.KIND,
                             "metadata": {"name": "h", "namespace": "ns", "finalizers": case.image["finalizers"]},
                             "spec": case.image["spec"]})
        store.update_status({**made, "status": case.image["status"]})
    if case.policy is not None:
        store.create({"apiVersion": bmh.API, "kind": "HostUpdatePolicy", "metadata": {"name": "h", "namespace": "ns"},
                      "spec": case.policy})
    if case.data_image is not None:
        made = store.create({"apiVersion": bmh.API, "kind": "DataImage",
                             "metadata": {"name": "h", "namespace": "ns", "finalizers": [dataimage.FINALIZER]},
                             "spec": case.data_image["spec"]})
        store.update_status({**made, "status": case.data_image["status"]})
        if case.data_image["deleted"]:
            store.delete(Ref.of(made))
    if case.deleting:
        store.delete(ref)
    return ref


@pytest.mark.parametrize("case", CASES)
def test_host_state_machine(store, case: Case, monkeypatch):
    monkeypatch.delenv(ALLOWED_LOCAL_HOSTS_ENV, raising=False)  # the outbound policy a host's reconcile applies
    ref = make_host(store, case)
    fixture = FixtureProvisioner(Answers(**case.answers))
    step = bmh.reconcile_host(store, fixture, ref, max_provisioning_retries=case.retries)
    if case.then is None:
        assert step.obj is None and store.get_if_exists(ref) is None, step
    else:
        host = store.get(ref)
        status = host["status"]
        outcome = (step.state, step.requeue_after, status.get("errorType", ""))
        assert outcome == (case.then, case.requeue, case.error), step.message
        assert status["provisioning"]["state"] == case.then
    if case.calls is not None:
        assert fixture.calls == list(case.calls)
    if case.check is not None:
        assert case.check(store.get(ref)), store.get(ref)
    if case.check_image is not None:
        made = store.get(dataimage.ref_of(ref))
        assert case.check_image(made), made
    if case.check_components is not None:
        made = store.get(Ref(bmh.API, "HostFirmwareComponents", "h", "ns"))
        assert case.check_components(made), made
    if case.check_ppi is not None:
        made = store.get_if_exists(Ref(bmh.API, ppi.KIND, "h", "ns"))
        assert case.check_ppi(made), made


def test_there_are_enough_scenarios_to_specify_the_machine():
    assert len(CASES) >= 60


# Ironic's provision states that are not also BareMetalHost states.
IRONIC_STATES = ("enroll", "verifying", "manageable", "inspect wait", "inspect failed", "cleaning", "clean wait",
                 "clean failed", "deploying", "wait call-back", "deploy failed", "active", "adopting", "adopt failed")


def test_the_state_machine_knows_no_ironic_state():
    source = Path(bmh.__file__).read_text()
    assert [state for state in IRONIC_STATES if f'"{state}"' in source] == []


def test_raid_asked_of_an_available_host_is_prepared_recorded_and_its_root_device_follows_it(store):
    """available → preparing (the cleaning started, the RAID recorded) → available (the root device hints gone: the
    root volume is the root device)."""
    ref = make_host(store, Case(S.AVAILABLE, S.AVAILABLE, None, spec={"raid": SW_ROOT},
                                status={"provisioning": {"rootDeviceHints": {"deviceName": "/dev/sda"}}}))
    fixture = FixtureProvisioner(Answers(prepare=STARTED))
    assert bmh.reconcile_host(store, fixture, ref).state == S.PREPARING
    assert fixture.calls[-1] == "prepare raid s[1, 0] over unknown"
    assert store.get(ref)["status"]["provisioning"]["raid"] == {"hardwareRAIDVolumes": None, **SW_ROOT}
    fixture.answers.prepare, fixture.calls[:] = DONE, []
    step = bmh.reconcile_host(store, fixture, ref)
    provisioning = store.get(ref)["status"]["provisioning"]
    assert (step.state, fixture.calls[:2]) == (S.AVAILABLE, ["register", "prepare"])  # not given again
    assert "rootDeviceHints" not in provisioning and provisioning["raid"]["softwareRAIDVolumes"][0]["rootVolume"]
