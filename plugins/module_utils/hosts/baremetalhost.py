# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The BareMetalHost lifecycle, as baremetal-operator runs it: one level-based step of its state machine.

``reconcile_host`` reads the host, takes the next step of upstream's state machine (registering →
inspecting → preparing → available → provisioning → provisioned → deprovisioning, and the deletion path),
writes the status once, and says when to come back. The module, the role and the operator all call it;
``wait_for_host`` is the same function in a loop.

The state machine knows BareMetalHost states only. What the host's hardware does is asked of a
``Provisioner`` (core/provisioner.py): Ironic's in ironic/provisioner.py, a fixture in the table tests.
Each of its operations is level-based and answers done, under way (come back after requeue_after) or
failed; a failure becomes errorType/errorMessage/errorCount and is tried again after a backoff, so a host
recovers once the cause is gone.
"""
from __future__ import annotations

import copy
import dataclasses
import datetime
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, cast

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Invalid,
    NotFound,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import (
    Object,
    Ref,
    check_name,
    now,
    owner_reference,
    parse_time,
    secret_values,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.core.progress import report
from ansible_collections.metal3.baremetal.plugins.module_utils.core.provisioner import (
    DELAYED,
    POLL,
    BMCAccess,
    HostData,
    PreprovisioningImage,
    Provisioner,
    ProvisionerFactory,
    ProvisionResult,
    RAIDPreparation,
    settings_changes,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.reconcile import Result
from ansible_collections.metal3.baremetal.plugins.module_utils.core.waiting import wait_until
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import dataimage, firmware
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import preprovisioning_image as ppi
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import raid as host_raid
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import Ironic, IronicOptions
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.provisioner import ironic_provisioners
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import parse_yaml
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.writes import (
    ensure_finalizer,
    remove_finalizer,
    set_condition,
)

if TYPE_CHECKING:
    from ansible_collections.metal3.baremetal.plugins.module_utils.api.types import (
        BareMetalHost,
        BareMetalHostSpec,
        BareMetalHostSpecBmc,
        BareMetalHostSpecCustomDeploy,
    )

API = "metal3.io/v1alpha1"
KIND = "BareMetalHost"
FINALIZER = "baremetalhost.metal3.io"
PAUSED_ANNOTATION = "baremetalhost.metal3.io/paused"
# A host's status as JSON, written when it is moved (a pivot): a host that arrives without a status takes this one,
# instead of starting over from registration (and reprovisioning); then the annotation goes.
STATUS_ANNOTATION = "baremetalhost.metal3.io/status"
DETACHED_ANNOTATION = "baremetalhost.metal3.io/detached"
REBOOT_ANNOTATION = "reboot.metal3.io"
INSPECT_ANNOTATION = "inspect.metal3.io"
HARDWARE_DETAILS_ANNOTATION = "inspect.metal3.io/hardwaredetails"
NODE_NAME_SEPARATOR = "~"  # the provisioner's name for a host: <namespace>~<name>, as upstream names nodes

# Provisioning states (status.provisioning.state), upstream's strings.
NONE, UNMANAGED, REGISTERING, INSPECTING, PREPARING = "", "unmanaged", "registering", "inspecting", "preparing"
MATCH_PROFILE = "match profile"
AVAILABLE, READY, PROVISIONING, PROVISIONED = "available", "ready", "provisioning", "provisioned"
EXTERNALLY_PROVISIONED, DEPROVISIONING = "externally provisioned", "deprovisioning"
POWERING_OFF_BEFORE_DELETE, DELETING = "powering off before delete", "deleting"
STATES = (NONE, UNMANAGED, REGISTERING, MATCH_PROFILE, INSPECTING, PREPARING, AVAILABLE, READY, PROVISIONING,
          PROVISIONED, EXTERNALLY_PROVISIONED, DEPROVISIONING, POWERING_OFF_BEFORE_DELETE, DELETING)
# States a host rests in until someone changes it.
STABLE_STATES = (UNMANAGED, AVAILABLE, READY, PROVISIONED, EXTERNALLY_PROVISIONED)
# States a host is detached in; in the others only when the detached annotation forces it.
DETACHABLE_STATES = (PROVISIONED, EXTERNALLY_PROVISIONED, READY, AVAILABLE)

# Error types (status.errorType), upstream's strings.
REGISTRATION_ERROR = "registration error"
PROVISIONED_REGISTRATION_ERROR = "provisioned registration error"
INSPECTION_ERROR = "inspection error"
PREPARATION_ERROR = "preparation error"
PROVISIONING_ERROR = "provisioning error"
POWER_MANAGEMENT_ERROR = "power management error"
DETACH_ERROR = "detach error"
SERVICING_ERROR = "servicing error"

# The BMC's health (Provisioner.health) → the Healthy condition's status and reason, upstream's.
HEALTH = {"OK": ("True", "Healthy"), "Warning": ("False", "Warning"), "Critical": ("False", "CriticalError")}
UNKNOWN_HEALTH = ("Unknown", "Unknown")

BACKOFF_BASE, BACKOFF_MAX = 5.0, 600.0
FIRMWARE_SETTINGS_WAIT = 60.0  # upstream's subResourceNotReadyRetryDelay
FIRMWARE_SETTINGS_RECHECK = 600.0  # an available host with a HostFirmwareSettings looks at it again
# Failed deploys of one image before a host stops trying it (0: no limit), unless the caller says otherwise.
MAX_PROVISIONING_RETRIES = IronicOptions.max_provisioning_retries
MAX_TRANSITIONS = 8  # a step takes at most this many transitions that need no waiting
# A caller that comes back for each look (the operator: a run of the role, about a CPU-second each) looks at an
# operation under way after a quarter of the time the host has shown no change, from POLL up to
# baremetal-operator's longRetryDelay (10 s, for ramdisk-booting operations; 3 s for the others); a wait in the
# module's process keeps POLL (one Ironic GET a look).
PATIENT_POLL_MAX = 10.0


def patient_poll(last_updated: object, moment: datetime.datetime) -> float:
    """When to look again at a host whose status last changed at ``last_updated`` (POLL when it never did)."""
    try:
        quiet = (moment - parse_time(last_updated)).total_seconds()
    except ValueError:
        return POLL
    return min(PATIENT_POLL_MAX, max(POLL, quiet / 4))


def host_state(host: Object | None) -> str:
    """A BareMetalHost's provisioning state ('' before its first reconcile)."""
    return str(((cast("BareMetalHost", host or {}).get("status") or {}).get("provisioning") or {}).get("state") or "")


@dataclass
class HostStep(Result):
    """What one reconcile of a host came to: the shared Result, and the host's provisioning state."""

    state: str = NONE
    before: str | None = None  # the state the host was in before this step; None: not found
    resting: bool = False  # nothing is under way: requeue_after, if any, is only a look again after a while

    @property
    def settled(self) -> bool:
        """Nothing is left to do until something changes."""
        return self.requeue_after is None or self.resting

    @property
    def error(self) -> str:
        status = cast("BareMetalHost", self.obj or {}).get("status") or {}
        return f"{status['errorType']}: {status.get('errorMessage', '')}" if status.get("errorType") else ""

    def summary(self) -> dict[str, Any]:
        host = cast("BareMetalHost", self.obj or {})
        metadata = host.get("metadata") or {}
        status = host.get("status") or {}
        return {"name": metadata.get("name"), "namespace": metadata.get("namespace"), "state": self.state,
                "operational_status": status.get("operationalStatus", ""),
                "error_type": status.get("errorType", ""), "error_message": status.get("errorMessage", ""),
                "error_count": status.get("errorCount", 0), "powered_on": status.get("poweredOn", False),
                "node": (status.get("provisioning") or {}).get("ID", ""), "requeue_after": self.requeue_after,
                "message": self.message, "waits_on": self.wait_targets()}


@dataclass(frozen=True)
class Action:
    """What a state's handler came to: go on at once to the next state's handler, or stop and come back."""

    requeue_after: float | None = None  # None: nothing to do until the host changes
    go_on: bool = False
    resting: bool = False  # with requeue_after: nothing is under way, the host only looks again after a while


GO_ON = Action(0.0, go_on=True)  # a transition that needs no waiting: the next handler runs in this step
REST = Action()


class HostFailure(Exception):
    """A step failed for a reason the host records (errorType, errorMessage)."""

    def __init__(self, error_type: str, message: str, retry: bool = True):
        super().__init__(message)
        self.error_type = error_type
        self.message = message
        self.retry = retry  # False: the same attempt cannot succeed; wait for the spec to change


def reconcile_host(store: Store, provisioners: ProvisionerFactory, ref: Ref, dry_run: bool = False,
                   max_provisioning_retries: int = MAX_PROVISIONING_RETRIES,
                   outbound: OutboundPolicy | None = None, patient: bool = False) -> HostStep:
    """One step of the host named by ``ref``; ``provisioners`` gives each host its provisioner. A host whose deploys
    of one image failed ``max_provisioning_retries`` times stops trying it (0: it tries for ever). ``outbound``: the
    controller's own hosts a DataImage's URL may name (None: the environment's, which the modules' option defaults
    to). ``patient``: the caller comes back for each look at an operation under way (see patient_poll)."""
    try:
        host = store.get(ref)
    except NotFound:
        return HostStep(None, message="not found", state=NONE)
    step = _Reconcile(store, provisioners, host, dry_run, max_provisioning_retries,
                      outbound or OutboundPolicy.from_env(), patient).run()
    step.before = host_state(host)
    return step


def report_host(ref: Ref, step: HostStep) -> None:
    """A line for whoever watches the wait (core/progress.py) when the host's state changed in this step."""
    gone = step.obj is None
    if gone and step.before is None:  # never there
        return
    report(KIND, f"{ref.namespace}/{ref.name}", "deleted" if gone else step.state, step.before, step.changed)


def wait_for_host(reconcile: Callable[[], HostStep], targets: tuple[str, ...], timeout: float,
                  sleep: Callable[[float], None] = time.sleep) -> tuple[HostStep, bool]:
    """Reconcile until the host reaches one of ``targets`` ('settled': any state with nothing to do).

    Returns the last step and whether a target was reached. Stops early on an error
    that cannot clear by itself (requeue_after None), or when the host is gone.
    """
    changed = False

    def step() -> HostStep:
        nonlocal changed
        result = reconcile()
        changed = changed or result.changed
        result.changed = changed
        return result

    def verdict(step: HostStep) -> bool | None:
        # A stable state counts once nothing is left to do in it (the power to apply, say).
        reached = (step.state in targets and (step.settled or step.state not in STABLE_STATES)
                   or "settled" in targets and step.settled)
        if step.obj is None and "deleted" in targets:
            return True
        if reached and not step.error or step.settled or step.obj is None:
            return reached and not step.error
        return None

    return wait_until(step, verdict, timeout, lambda step: step.requeue_after or 0.0, sleep)


def reconcile_hosts(open_store: Callable[[], Store], ironic_options: IronicOptions, refs: list[Ref],
                    targets: tuple[str, ...] = (), timeout: float = 0, concurrency: int = 20,
                    dry_run: bool = False, outbound: OutboundPolicy | None = None,
                    images: ppi.ImageProvider | None = None) -> list[tuple[HostStep, bool]]:
    """Each host one step, or until ``targets`` (see wait_for_host), ``concurrency`` hosts at a time.

    Waiting, a host that waits for its PreprovisioningImage has it served by ``images`` (its reconcile, as the
    operator's image controller would): on a bastion nothing else would, and the wait would last its timeout.

    Each worker has its own store connection and Ironic session: SQLite connections are per thread.
    """
    outbound = outbound or OutboundPolicy.from_env()  # one policy for the hosts and the images they wait for

    def one(ref: Ref) -> tuple[HostStep, bool]:
        with open_store() as store:
            provisioners = ironic_provisioners(Ironic(ironic_options, dry_run=dry_run),
                                               ironic_options.provisioning_limit)

            def step() -> HostStep:
                result = reconcile_host(store, provisioners, ref, dry_run, ironic_options.max_provisioning_retries,
                                        outbound, patient=not targets)
                report_host(ref, result)
                if images is not None and _served_image(store, result, images, outbound, dry_run):
                    result.requeue_after, result.resting = 0, False  # the host goes on with its image at once
                return result

            if not targets or dry_run:  # check mode changes nothing, so there is nothing to wait for
                return step(), True
            return wait_for_host(step, targets, timeout)

    if len(refs) <= 1:
        return [one(ref) for ref in refs]
    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(refs)))) as pool:
        return list(pool.map(one, refs))


def _served_image(store: Store, step: HostStep, images: ppi.ImageProvider, outbound: OutboundPolicy,
                  dry_run: bool) -> bool:
    """The PreprovisioningImage ``step``'s host waits for, reconciled; whether that changed it."""
    changed = False
    for ref in step.waits_on:
        if ref.kind == ppi.KIND and ref.api_version == ppi.API:
            changed = ppi.reconcile_preprovisioning_image(store, ref, images, outbound, dry_run).changed or changed
    return changed


class _Reconcile:
    """One reconcile of one host: the handlers of the state machine share this state."""

    def __init__(self, store: Store, provisioners: ProvisionerFactory, host: Object, dry_run: bool,
                 max_provisioning_retries: int, outbound: OutboundPolicy, patient: bool = False):
        self.store, self.provisioners, self.host, self.dry_run = store, provisioners, host, dry_run
        self.patient = patient
        self.max_provisioning_retries = max_provisioning_retries
        self.outbound = outbound
        self.ref = Ref.of(host)
        self.spec: BareMetalHostSpec = cast("BareMetalHost", host).get("spec") or cast("BareMetalHostSpec", {})
        self.annotations: dict[str, str] = host["metadata"].get("annotations") or {}
        self.status: dict[str, Any] = copy.deepcopy(host.get("status") or {})
        self.status.setdefault("provisioning", {}).setdefault("state", NONE)
        self.status.setdefault("errorCount", 0)
        self.status.setdefault("provisioningFailCount", 0)
        self.changed = False
        self.deleted = False  # the finalizer is gone: nothing is left to write
        self.message = ""
        self.node_name = f"{self.ref.namespace}{NODE_NAME_SEPARATOR}{self.ref.name}"
        self._provisioner: Provisioner | None = None
        self._data: tuple[HostData, dict[str, Any]] | None = None
        self._after_write: list[str] = []  # annotations to remove once the status write that needs it is made
        self.waits_on: list[Ref] = []  # what may let the host go on when it changes (its HostFirmwareSettings)
        self._firmware_read: dict[Ref, Object | None] = {}  # the host's firmware kinds, as this reconcile read them

    # -- the frame ------------------------------------------------------------------------------------
    @property
    def state(self) -> str:
        return str(self.status["provisioning"]["state"])

    @property
    def provisioner(self) -> Provisioner:
        """Made on first use: hosts that never reach the provisioner (paused, unmanaged) cost nothing."""
        if self._provisioner is None:
            self._provisioner = self.provisioners(self.node_name, self.status["provisioning"].get("ID") or "")
        return self._provisioner

    def run(self) -> HostStep:
        if PAUSED_ANNOTATION in self.annotations:
            return HostStep(self.host, message="paused", state=self.state)
        if STATUS_ANNOTATION in self.annotations:
            return self._status_from_annotation()
        metadata = self.host["metadata"]
        if metadata.get("deletionTimestamp") and FINALIZER not in (metadata.get("finalizers") or []):
            return HostStep(self.host, message="being deleted", state=self.state)
        action = GO_ON
        # Transitions that need no waiting (registered → inspecting, inspected → preparing → available...)
        # are taken in one step: one status write, no extra round trips to the provisioner.
        for _transition in range(MAX_TRANSITIONS):
            try:
                action = self._handler()(self)
            except HostFailure as failure:
                action = self._fail(failure)
            if not action.go_on or self.deleted:
                break
        if self.deleted:
            return HostStep(None, True, None, self.message or "deleted", state=DELETING)
        requeue_after = action.requeue_after
        if not self._write_status():
            # The step's decisions were not recorded: take them again soon, waiting on nothing they chose (what
            # the host would wait on may itself wait on the host's next write).
            requeue_after = POLL if requeue_after is None else min(requeue_after, POLL)
            self.waits_on.clear()
        elif self.patient and requeue_after == POLL and not action.resting:
            requeue_after = patient_poll(self.status.get("lastUpdated"), datetime.datetime.now(datetime.UTC))
        return HostStep(self.host, self.changed, requeue_after, self.message, self.waits_on, state=self.state,
                        resting=action.resting and requeue_after == action.requeue_after)

    def _status_from_annotation(self) -> HostStep:
        """A moved host: its status is the annotation's when it has none of its own (a host is never written a
        status without lastUpdated), then the annotation is removed; the next step goes on from that state."""
        text = self.annotations[STATUS_ANNOTATION]
        message = "status annotation removed"
        if text and not (cast("BareMetalHost", self.host).get("status") or {}).get("lastUpdated"):
            status = json.loads(text)  # admission refused an annotation that is not a status
            self.host = self.store.update_status({**self.host, "status": status}, dry_run=self.dry_run)
            self.status = copy.deepcopy(status)
            message = "status restored from the status annotation"
        self._remove_annotation(STATUS_ANNOTATION)
        return HostStep(self.host, True, 0, message, state=self.state)

    def _handler(self) -> Callable[[_Reconcile], Action]:
        if self.host["metadata"].get("deletionTimestamp"):
            return _Reconcile._delete
        # Detached at rest, or forced (the annotation's {"force": true}) in any state but deleting; otherwise the
        # operation under way goes on until the host rests, as upstream's.
        if DETACHED_ANNOTATION in self.annotations and self.state != DELETING and (
                self.state in DETACHABLE_STATES or self._detached_arguments().get("force") is True):
            return _Reconcile._detach
        return self._HANDLERS[self.state]

    def _detached_arguments(self) -> dict[str, Any]:
        """The detached annotation's JSON arguments (deleteAction, force); {} for an empty value, and for one that
        is not a JSON object, which upstream ignores too."""
        try:
            arguments = json.loads(self.annotations.get(DETACHED_ANNOTATION) or "{}")
        except ValueError:
            return {}
        return arguments if isinstance(arguments, dict) else {}

    def _advance(self, state: str, message: str = "") -> Action:
        """Move to ``state``: the operation before it succeeded, so its error is cleared."""
        self.status["provisioning"]["state"] = state
        self._healthy()
        self.message = message or f"moved to {state or 'none'}"
        return GO_ON

    def _healthy(self) -> None:
        for key in ("errorType", "errorMessage"):
            self.status.pop(key, None)
        self.status["errorCount"] = 0
        if self.status.get("operationalStatus") in (None, "", "error", "delayed", "detached"):
            self.status["operationalStatus"] = "OK"

    def _fail(self, failure: HostFailure) -> Action:
        same = (self.status.get("errorType") == failure.error_type
                and self.status.get("errorMessage") == failure.message)
        if same and not failure.retry:
            return REST  # already recorded; nothing to try until the spec changes
        self.status.update(errorType=failure.error_type, errorMessage=failure.message, operationalStatus="error",
                           errorCount=self.status.get("errorCount", 0) + 1)
        self.message = f"{failure.error_type}: {failure.message}"
        if not failure.retry:
            return REST
        return Action(min(BACKOFF_BASE * 2 ** (self.status["errorCount"] - 1), BACKOFF_MAX))

    def _error_type(self) -> str:
        return {NONE: REGISTRATION_ERROR, REGISTERING: REGISTRATION_ERROR, INSPECTING: INSPECTION_ERROR,
                PREPARING: PREPARATION_ERROR, PROVISIONING: PROVISIONING_ERROR,
                DEPROVISIONING: PROVISIONING_ERROR, PROVISIONED: POWER_MANAGEMENT_ERROR,
                EXTERNALLY_PROVISIONED: POWER_MANAGEMENT_ERROR, AVAILABLE: POWER_MANAGEMENT_ERROR,
                READY: POWER_MANAGEMENT_ERROR}.get(self.state, REGISTRATION_ERROR)

    def _check(self, result: ProvisionResult, error_type: str) -> Action | None:
        """None once the provisioner's operation is done; else come back (under way, or waiting for a slot)."""
        if result.message:
            self.message = result.message
        if result.error:
            raise HostFailure(error_type, result.error, result.retry)
        if result.delayed:
            self.status["operationalStatus"] = "delayed"
        if result.dirty:
            return Action(POLL if result.requeue_after is None else result.requeue_after)
        return None

    def _write_status(self) -> bool:
        """Write the status if it changed; False when the host changed meanwhile and nothing was written."""
        self._set_conditions()
        before = {k: v for k, v in (self.host.get("status") or {}).items() if k != "lastUpdated"}
        after = {k: v for k, v in self.status.items() if k != "lastUpdated"}
        if before != after:
            self.status["lastUpdated"] = now()
            try:  # resourceVersion-checked: a host changed since it was read is reconciled again from scratch
                self.host = self.store.update_status({**self.host, "status": self.status}, dry_run=self.dry_run)
            except (Conflict, NotFound):  # the annotations stay: the next step takes their decision again
                self.message = f"{self.ref} changed while reconciling; will look again"
                return False
            self.changed = True
        for key in self._after_write:
            self._remove_annotation(key)
        return True

    def _set_conditions(self) -> None:
        state, error = self.state, self.status.get("errorType")
        conditions = self.status.get("conditions")
        # Healthy is the BMC's own health, as upstream's: unknown to a reconcile that did not reach the provisioner,
        # or that the BMC does not tell, where the host has no Healthy condition yet; left as it was otherwise.
        # (A Healthy condition of another reason is the one derived from errors before: replaced.)
        health = HEALTH.get(self._provisioner.health() if self._provisioner is not None else "")
        reasons = {reason for _status, reason in (*HEALTH.values(), UNKNOWN_HEALTH)}
        if health is None and not any(c.get("type") == "Healthy" and c.get("reason") in reasons
                                      for c in conditions or []):
            health = UNKNOWN_HEALTH
        if health is not None:
            conditions = set_condition(conditions, "Healthy", *health)
        registered = state not in (NONE, UNMANAGED, REGISTERING)
        busy = state in (REGISTERING, INSPECTING, PREPARING, PROVISIONING, DEPROVISIONING,
                         POWERING_OFF_BEFORE_DELETE, DELETING)
        for type_, value, reason in (
            ("Manageable", registered, "Registered" if registered else "NotRegistered"),
            ("Provisioned", state in (PROVISIONED, EXTERNALLY_PROVISIONED), state or "None"),
            ("AvailableForProvisioning", state in (AVAILABLE, READY) and not self.spec.get("consumerRef"),
             state or "None"),
            ("Progressing", busy, state or "None"),
            ("Ready", state in STABLE_STATES and not error, state or "None"),
        ):
            conditions = set_condition(conditions, type_, value, reason)
        self.status["conditions"] = conditions

    def _history(self, operation: str, edge: str, force: bool = False) -> None:
        entry = self.status.setdefault("operationHistory", {}).setdefault(operation, {})
        if force or not entry.get(edge):
            entry[edge] = now()
        if edge == "start" and force:
            entry.pop("end", None)

    def _remove_annotation(self, key: str) -> None:
        self.host = self.store.patch(self.ref, {"metadata": {"annotations": {key: None}}}, dry_run=self.dry_run)
        self.annotations = self.host["metadata"].get("annotations") or {}
        self.changed = True

    def _ensure_finalizer(self) -> None:
        if FINALIZER not in (self.host["metadata"].get("finalizers") or []):
            self.host = ensure_finalizer(self.store, self.ref, FINALIZER, self.dry_run)
            self.changed = True

    # -- what the spec asks for --------------------------------------------------------------------------
    def _image(self) -> dict[str, Any]:
        return cast("dict[str, Any]", self.spec.get("image")) or {}  # as the provisioner takes it

    def _custom_deploy(self) -> str:
        return (self.spec.get("customDeploy") or cast("BareMetalHostSpecCustomDeploy", {})).get("method") or ""

    def _wants_image(self) -> bool:
        return bool(self._image().get("url") or self._custom_deploy())

    def _automated_clean(self) -> bool:
        return self.spec.get("automatedCleaningMode") != "disabled"

    def _inspection_disabled(self) -> bool:
        return (self.spec.get("inspectionMode") == "disabled"
                or self.annotations.get(INSPECT_ANNOTATION) == "disabled")

    def _inspection_requested(self) -> bool:
        return self.annotations.get(INSPECT_ANNOTATION) not in (None, "disabled")

    def _secret_ref(self, name: str, field: str) -> Ref:
        """The Secret a spec field names, in the host's namespace; a name that is no object name is refused
        here, naming the field, before it reaches the store (it would build a request path)."""
        try:
            return Ref("v1", "Secret", check_name(name, field), self.ref.namespace)
        except Invalid as e:
            raise HostFailure(self._error_type(), str(e), retry=False) from None

    def _secret(self, name: str, field: str) -> dict[str, str]:
        try:
            return secret_values(self.store.get(self._secret_ref(name, f"{field}.name")))
        except NotFound:
            raise HostFailure(self._error_type(), f"{field}: secret {self.ref.namespace}/{name} not found") from None

    def _host_data(self) -> tuple[HostData, dict[str, Any]]:
        """What the provisioner needs of the spec (BMC credentials read), and the credentials' reference and
        version (for triedCredentials/goodCredentials); read once per step."""
        if self._data is not None:
            return self._data
        bmc = self.spec.get("bmc") or cast("BareMetalHostSpecBmc", {})
        name = bmc.get("credentialsName")
        if not name:
            raise HostFailure(REGISTRATION_ERROR, "spec.bmc.credentialsName: Required value")
        secret_ref = self._secret_ref(name, "spec.bmc.credentialsName")
        try:
            secret = self.store.get(secret_ref)
        except NotFound:
            raise HostFailure(REGISTRATION_ERROR, f"spec.bmc.credentialsName: secret {secret_ref.namespace}/{name} "
                                                  "not found") from None
        values = secret_values(secret)
        for key in ("username", "password"):
            if not values.get(key):
                raise HostFailure(REGISTRATION_ERROR, f"spec.bmc.credentialsName: secret {secret_ref.namespace}/"
                                                      f"{name} has no {key!r}")
        access = BMCAccess(bmc.get("address") or "", values["username"], values["password"],
                           bool(bmc.get("disableCertificateVerification")))
        data = HostData(access, boot_mac=(self.spec.get("bootMACAddress") or "").lower(),
                        boot_mode=self.spec.get("bootMode") or "", architecture=self.spec.get("architecture") or "",
                        automated_clean=self._automated_clean(), image=self._image(),
                        custom_deploy=self._custom_deploy(),
                        root_device_hints=cast("dict[str, Any]", self.spec.get("rootDeviceHints")) or {},
                        inspection_mode=self.spec.get("inspectionMode") or "",
                        preprovisioning_network_data=self._preprovisioning_network_data())
        credentials = {"credentials": {"name": name, "namespace": self.ref.namespace},
                       "credentialsVersion": str(secret["metadata"].get("resourceVersion", ""))}
        self._data = data, credentials
        return self._data

    def _config_drive(self) -> dict[str, Any]:
        return config_drive(self.ref, self.host["metadata"].get("uid") or self.node_name, self.spec, self._secret)

    def _preprovisioning_network_data(self) -> dict[str, Any]:
        """The network the deploy ramdisk configures where there is no DHCP: the networkData key of the secret
        spec.preprovisioningNetworkDataName names, as upstream (Ironic puts it on the ramdisk's virtual media)."""
        name = self.spec.get("preprovisioningNetworkDataName")
        if not name:
            return {}
        field = "spec.preprovisioningNetworkDataName"
        try:
            values = secret_values(self.store.get(self._secret_ref(name, field)))
        except NotFound:
            raise HostFailure(REGISTRATION_ERROR, f"{field}: secret {self.ref.namespace}/{name} not found") from None
        if "networkData" not in values:
            raise HostFailure(REGISTRATION_ERROR, f"{field}: secret {self.ref.namespace}/{name} has no 'networkData' "
                                                  "key", retry=False)
        return _mapping(values["networkData"], f"{field}: secret {self.ref.namespace}/{name}", REGISTRATION_ERROR)

    # -- the provisioner's operations, as the states use them ---------------------------------------------
    def _register(self) -> Action | None:
        """Register (or verify) the host with its provisioner: None once it is, else when to come back."""
        data, credentials = self._host_data()
        asked, image = self._preprovisioning_image(data)
        if image is not None:
            data = dataclasses.replace(data, preprovisioning_image=image)
            self._data = data, credentials
        tried = self.status.get("triedCredentials") or self.status.get("goodCredentials")
        result = self.provisioner.register(data, tried is not None and tried != credentials, self._before_create)
        if result.provisioner_id:
            self.status["provisioning"]["ID"] = result.provisioner_id
        if result.credentials_sent:
            self.status["triedCredentials"] = credentials
        waiting = self._check(result, self._registration_error())
        if waiting is not None:
            return waiting
        if self.status.get("goodCredentials") != credentials:
            self.status["goodCredentials"] = credentials
        self._history("register", "end")
        if asked and image is None and self._agent_booted():
            self.message = f"waiting for {self._image_ref()} to be ready"
            self.waits_on.append(self._image_ref())
            return Action(ppi.HOST_RETRY)
        return None

    def _before_create(self) -> None:
        """Before the provisioner first creates the host: the finalizer, so that deleting the host removes it."""
        self._ensure_finalizer()
        self._history("register", "start", force=True)

    def _registration_error(self) -> str:
        return PROVISIONED_REGISTRATION_ERROR if self.state in (PROVISIONED, EXTERNALLY_PROVISIONED) \
            else REGISTRATION_ERROR

    def _power(self) -> Action:
        """Power as spec.online and the reboot annotations ask; at rest, and healthy, once it is as asked."""
        held_off = any(key.startswith(REBOOT_ANNOTATION + "/") for key in self.annotations)
        want_on = bool(self.spec.get("online")) and not held_off
        reboot = ""
        if REBOOT_ANNOTATION in self.annotations and want_on:
            reboot = _annotation_args(self.annotations[REBOOT_ANNOTATION]).get("mode") or "hard"
        result = self.provisioner.power(want_on, reboot)
        self.status["poweredOn"] = result.powered_on
        if result.rebooted:
            self._remove_annotation(REBOOT_ANNOTATION)
        waiting = self._check(result, self._error_type())
        if waiting is not None:
            return waiting
        self._healthy()
        return REST

    # -- the host's firmware kinds ------------------------------------------------------------------------------
    def _settings_ref(self) -> Ref:
        return Ref(firmware.API, firmware.SETTINGS_KIND, self.ref.name, self.ref.namespace)

    def _components_ref(self) -> Ref:
        return Ref(firmware.API, firmware.COMPONENTS_KIND, self.ref.name, self.ref.namespace)

    def _firmware_settings(self) -> Object | None:
        return self._firmware_kind(self._settings_ref())

    def _firmware_components(self) -> Object | None:
        return self._firmware_kind(self._components_ref())

    def _firmware_kind(self, ref: Ref, obj: Object | None = None, read: bool = True) -> Object | None:
        """The host's firmware kind ``ref``, read once per reconcile (the states ask for it several times); given
        ``obj`` (and read False), what this reconcile just wrote of it."""
        if not read:
            self._firmware_read[ref] = obj
        elif ref not in self._firmware_read:
            self._firmware_read[ref] = self.store.get_if_exists(ref)
        return self._firmware_read[ref]

    def _ensure_firmware_kinds(self) -> None:
        """A registered host has a HostFirmwareSettings of its name, and a HostFirmwareComponents when its BMC
        lists firmware components (upstream defers it otherwise), owned by it; one made before the host (by a user,
        as upstream allows) is adopted: the host becomes its owner too."""
        settings = self._ensure_owned(self._settings_ref(), lambda: firmware.new_settings(self.host))
        if settings is not None and (settings.get("status") or {}).get("settings") is None:
            # status.settings is required: an operator marking the object Running before its first read (the
            # Ansible Operator's status write, ours) would be refused without it, and the role never run.
            self._firmware_kind(self._settings_ref(), self.store.update_status(
                {**settings, "status": {**(settings.get("status") or {}), "settings": {}}}, dry_run=self.dry_run),
                read=False)
        if self._firmware_components() is not None or self.provisioner.firmware_components().components:
            self._ensure_owned(self._components_ref(), lambda: firmware.new_components(self.host))

    def _ensure_owned(self, ref: Ref, new: Callable[[], Object]) -> Object | None:
        """The object ``ref``, made by ``new`` when there is none, or adopted; None when another made it meanwhile
        (adopted at the next registration)."""
        obj = self._firmware_kind(ref)
        if obj is None:
            try:
                obj = self.store.create(new(), dry_run=self.dry_run)
            except AlreadyExists:
                self._firmware_read.pop(ref, None)  # read again when asked
                return None
        else:
            obj = self._own(ref, obj)
        return self._firmware_kind(ref, obj, read=False)

    def _own(self, ref: Ref, obj: Object) -> Object:
        """``obj`` with the host among its owners (garbage collected with it), as upstream adopts its firmware
        kinds."""
        owners = obj["metadata"].get("ownerReferences") or []
        if any(o.get("uid") == self.host["metadata"]["uid"] for o in owners):
            return obj
        return self.store.patch(ref, {"metadata": {"ownerReferences": [*owners, owner_reference(self.host)]}},
                                dry_run=self.dry_run)

    # -- the host's PreprovisioningImage ---------------------------------------------------------------------
    def _image_ref(self) -> Ref:
        return Ref(ppi.API, ppi.KIND, self.ref.name, self.ref.namespace)

    def _preprovisioning_image(self, data: HostData) -> tuple[bool, PreprovisioningImage | None]:
        """Upstream's getPreprovImage, as registering asks for it: whether the host asks for a PreprovisioningImage
        now, and the image once it is ready. The image of the host's name is made (or adopted) with the spec the
        host asks, its labels and finalizer; HostFailure (a registration error, as upstream) when it failed."""
        formats = self.provisioner.preprovisioning_image_formats(data)
        if formats is None or not self._image_asked():
            return False, None
        if not formats:
            raise HostFailure(REGISTRATION_ERROR, "no acceptable formats for preprovisioning image")
        spec = ppi.wanted_spec(self.host, formats)
        image = self._ensure_owned(self._image_ref(), lambda: ppi.new_image(self.host, spec))
        if image is None or image["metadata"].get("deletionTimestamp"):
            return True, None  # made meanwhile, or going: waited for
        wanted = ppi.image_changes(image, self.host, spec)
        if wanted is not None:
            try:
                self._firmware_kind(self._image_ref(), self.store.update(wanted, dry_run=self.dry_run), read=False)
            except Conflict:  # changed meanwhile: the next step looks again
                self._firmware_read.pop(self._image_ref(), None)
            return True, None
        name = spec.get("networkDataName")
        secret = self.store.get_if_exists(self._secret_ref(name, "spec.preprovisioningNetworkDataName")) \
            if name else None
        try:
            return True, ppi.image_for_host(image, str(secret["metadata"].get("resourceVersion")) if secret else None)
        except ppi.ImageBuildError as e:
            raise HostFailure(REGISTRATION_ERROR, str(e)) from None

    def _image_asked(self) -> bool:
        """Upstream's states that ask for no image: registering and deleting, provisioned unless servicing,
        deprovisioning without cleaning, inspecting out of band."""
        state = self.state
        if state in (REGISTERING, DELETING, POWERING_OFF_BEFORE_DELETE):
            return False
        if state in (PROVISIONED, EXTERNALLY_PROVISIONED):
            return self.status.get("operationalStatus") == "servicing"
        if state == DEPROVISIONING:
            return self._automated_clean()
        return not (state == INSPECTING and self.spec.get("inspectionMode") == "fast")

    def _agent_booted(self) -> bool:
        """Upstream's states that wait for the image (the deploy ramdisk boots in them): inspecting, preparing,
        deprovisioning, servicing - as far as they ask for it."""
        return self.state in (INSPECTING, PREPARING, DEPROVISIONING, PROVISIONED, EXTERNALLY_PROVISIONED)

    def _release_preprovisioning_image(self) -> None:
        """The host's finalizer off its image as the host goes, as upstream: the image may go then."""
        image = self.store.get_if_exists(self._image_ref())
        if image is not None and ppi.HOST_FINALIZER in (image["metadata"].get("finalizers") or []):
            remove_finalizer(self.store, self._image_ref(), ppi.HOST_FINALIZER, self.dry_run)

    def _wait_for_firmware(self, ref: Ref) -> Action:
        """Upstream's wait for a firmware kind whose reconcile has not judged its current spec yet."""
        self.message = f"waiting for {ref} to be read and validated"
        self.waits_on.append(ref)
        return Action(FIRMWARE_SETTINGS_WAIT)

    def _firmware_changes(self, settings_allowed: bool = True, updates_allowed: bool = True
                          ) -> tuple[dict[str, int | str], list[dict[str, str]]] | Action:
        """The firmware settings asked for and the firmware updates not sent yet (of the kinds allowed), or the
        wait for a firmware kind whose reconcile has not judged its current spec."""
        settings = firmware.pending_settings(self._firmware_settings()) if settings_allowed else {}
        if settings is None:
            return self._wait_for_firmware(self._settings_ref())
        updates = firmware.pending_updates(self._firmware_components()) if updates_allowed else []
        if updates is None:
            return self._wait_for_firmware(self._components_ref())
        return settings, updates

    def _updates_sent(self, result: ProvisionResult, updates: list[dict[str, str]]) -> None:
        """Upstream's bookkeeping of firmware updates in the HostFirmwareComponents' status.updates: its spec.updates
        once the provisioner started sending ``updates`` (they are not sent again), none after a failure (all are
        sent again on the next attempt)."""
        components = self._firmware_components()
        if components is None:
            return
        if result.error and (components.get("status") or {}).get("updates"):
            sent: list[dict[str, str]] | None = None
        elif result.started and updates:
            sent = (components.get("spec") or {}).get("updates") or []
        else:
            return
        self._firmware_kind(self._components_ref(), self.store.patch_status(
            self._components_ref(), {"status": {"updates": sent}}, dry_run=self.dry_run), read=False)

    # -- the host's RAID --------------------------------------------------------------------------------------
    def _spec_raid(self) -> dict[str, Any] | None:
        return cast("dict[str, Any] | None", self.spec.get("raid"))

    def _raid_target(self) -> dict[str, Any] | None:
        """What status.provisioning.raid is to be (upstream's saveHostProvisioningSettings)."""
        return host_raid.target(self._spec_raid(), self.status["provisioning"].get("raid"))

    def _raid_preparation(self) -> RAIDPreparation | None:
        """The RAID preparing applies: while it differs from what the host recorded, and after a failed preparation
        (the RAID applied before is not known then, as upstream's); None when there is nothing to apply."""
        target, recorded = self._raid_target(), self.status["provisioning"].get("raid")
        failed = self.status.get("errorType") == PREPARATION_ERROR
        if target is None or target == recorded and not failed:
            return None
        return RAIDPreparation(target, None if failed else recorded, bool(self.spec.get("rootDeviceHints")))

    def _raid_sent(self, result: ProvisionResult, raid: RAIDPreparation | None) -> None:
        """Upstream's bookkeeping of the RAID sent: recorded in status.provisioning.raid once its cleaning started (or
        there was nothing to do), the preparation error then cleared; after a failure, the hardware volumes kept."""
        if raid is None:
            return
        provisioning = self.status["provisioning"]
        if result.error:
            provisioning["raid"] = host_raid.after_failure(provisioning.get("raid"))
            provisioning.pop("rootDeviceHints", None)
        elif result.started or result.done:
            provisioning["raid"] = raid.target
            if result.started:
                self.status.pop("errorType", None)
                self.status.pop("errorMessage", None)
        if provisioning.get("raid") is None:
            provisioning.pop("raid", None)

    # -- the states ----------------------------------------------------------------------------------------
    def _unmanaged(self) -> Action:
        if not (self.spec.get("bmc") or cast("BareMetalHostSpecBmc", {})).get("address"):
            if self.state != UNMANAGED:
                self._advance(UNMANAGED, "no BMC address: unmanaged")
            return REST
        # Registering starts in this same step, so that nothing is written when the provisioner cannot be reached.
        self.status["provisioning"]["state"] = REGISTERING
        return self._registering()

    def _registering(self) -> Action:
        waiting = self._register()
        if waiting is not None:
            return waiting
        self._ensure_firmware_kinds()
        if self.spec.get("externallyProvisioned"):
            return self._advance(EXTERNALLY_PROVISIONED)
        if self._inspection_disabled():
            self._hardware_from_annotation()
            return self._advance(PREPARING)
        return self._advance(INSPECTING)

    def _hardware_from_annotation(self) -> None:
        """inspect.metal3.io/hardwaredetails: hardware details given by hand, when inspection is disabled."""
        text = self.annotations.get(HARDWARE_DETAILS_ANNOTATION)
        if not text:
            return
        try:
            details = json.loads(text)
        except ValueError as e:
            raise HostFailure(REGISTRATION_ERROR, f"metadata.annotations[{HARDWARE_DETAILS_ANNOTATION}]: not JSON: "
                                                  f"{e}", retry=False) from None
        if not isinstance(details, dict):
            raise HostFailure(REGISTRATION_ERROR, f"metadata.annotations[{HARDWARE_DETAILS_ANNOTATION}]: must be a "
                                                  "JSON object", retry=False)
        self.status["hardware"] = details

    def _inspecting(self) -> Action:
        waiting = self._register()
        if waiting is not None:
            return waiting
        if self._inspection_disabled():
            # Skipped, as upstream's actionInspecting does: preparing stops an inspection still under way.
            self._hardware_from_annotation()
            return self._advance(PREPARING, "inspection disabled: skipped")
        # Whether an inspection already started, or is over, is the provisioner's to say (Ironic's state),
        # not the host's status; a re-inspection asked for by annotation keeps the annotation until the
        # status write that records the inspection's start.
        refresh = self._inspection_requested()
        result = self.provisioner.inspect(refresh)
        if result.started:
            history = (self.status.get("operationHistory") or {}).get("inspect") or {}
            self._history("inspect", "start", force=bool(history.get("end")))
            if refresh:
                self._after_write.append(INSPECT_ANNOTATION)
        waiting = self._check(result, INSPECTION_ERROR)
        if waiting is not None:
            return waiting
        self.status["hardware"] = result.hardware or {}
        self._history("inspect", "end")
        return self._advance(PREPARING, "inspected")

    def _preparing(self) -> Action:
        waiting = self._register()
        if waiting is not None:
            return waiting
        changes = self._firmware_changes()
        if isinstance(changes, Action):
            return changes
        settings, updates = changes
        raid = self._raid_preparation()
        result = self.provisioner.prepare(settings, updates, raid=raid)
        self._updates_sent(result, updates)
        self._raid_sent(result, raid)
        waiting = self._check(result, PREPARATION_ERROR)
        if waiting is not None:
            return waiting
        provisioning = self.status["provisioning"]
        provisioning["rootDeviceHints"] = self.spec.get("rootDeviceHints") or {}
        if host_raid.has_root_volume(self._spec_raid()):  # the root device is the RAID root volume
            del provisioning["rootDeviceHints"]
        if self.spec.get("bootMode"):
            provisioning["bootMode"] = self.spec["bootMode"]
        return self._advance(AVAILABLE, "prepared")

    def _available(self) -> Action:
        waiting = self._register()
        if waiting is not None:
            return waiting
        if self._inspection_requested():
            return self._advance(INSPECTING, "inspection requested")
        if self.spec.get("externallyProvisioned"):
            return self._advance(EXTERNALLY_PROVISIONED)
        changes = self._firmware_changes()
        if isinstance(changes, Action):
            return changes
        settings, updates = changes
        # Against the host's settings as the provisioner has them now: the HostFirmwareSettings' status may not
        # show the change a cleaning just applied yet.
        if settings and settings_changes(settings, self.provisioner.firmware_settings().settings):
            return self._advance(PREPARING, "firmware settings to apply")
        if updates:
            return self._advance(PREPARING, "firmware updates to apply")
        if self._raid_target() != self.status["provisioning"].get("raid"):
            return self._advance(PREPARING, "RAID settings to apply")
        self._check_retry_limit()
        if self._wants_image():
            capacity = self.provisioner.has_capacity()
            if not capacity.granted:
                self.status["operationalStatus"] = "delayed"
                self.message = capacity.message
                return Action(DELAYED)
            self._history("provision", "start", force=True)
            return self._advance(PROVISIONING)
        action = self._power()
        if action == REST and self._firmware_settings() is not None:
            # A change of its settings or firmware is applied while the host is available: it is woken when they
            # change (the collection's operator by this wait, the Ansible Operator by its watch of what a role
            # made), and looks again after a while in any case, as upstream's available hosts do every minute.
            self.waits_on.append(self._settings_ref())
            if self._firmware_components() is not None:
                self.waits_on.append(self._components_ref())
            return Action(FIRMWARE_SETTINGS_RECHECK, resting=True)
        return action

    def _provisioning(self) -> Action:
        waiting = self._register()
        if waiting is not None:
            return waiting
        if not self._wants_image():
            return self._advance(DEPROVISIONING, "image removed")
        if self.spec.get("image"):
            self.status["lastAttemptedImage"] = copy.deepcopy(self._image())
        result = self.provisioner.provision(self._host_data()[0], self._config_drive)
        if result.error:
            return self._provisioning_failed(result.error)
        waiting = self._check(result, PROVISIONING_ERROR)
        if waiting is not None:
            return waiting
        self.status["provisioningFailCount"] = 0
        self.status["provisioning"]["image"] = self._image()
        if self._custom_deploy():
            self.status["provisioning"]["customDeploy"] = self.spec["customDeploy"]
        self._history("provision", "end")
        return self._advance(PROVISIONED, "provisioned")

    def _provisioning_failed(self, message: str) -> Action:
        """A deploy failed: counted in provisioningFailCount, then the host deprovisions and, back in available,
        tries again until the retry limit (upstream's loop). The error stays on the host while it deprovisions.

        The count and the move to deprovisioning are one status write. When that write is lost, the host is
        still provisioning at the next step, and the provisioner reports the same failure again: Ironic keeps
        the failed deploy (its state and image) until the host is undeployed, so the failure is counted then,
        once. Once the write is made, provision() is not called again before the undeploy: no failure is
        counted twice."""
        action = self._fail(HostFailure(PROVISIONING_ERROR, message))
        self.status["provisioningFailCount"] = self.status.get("provisioningFailCount", 0) + 1
        self.status["provisioning"]["state"] = DEPROVISIONING
        self._history("deprovision", "start", force=True)
        self.message = f"{self.message}; deprovisioning (failed {self.status['provisioningFailCount']} times)"
        return action

    def _check_retry_limit(self) -> None:
        """In available: the fail count starts again for a new image (or with none), and a host whose deploys
        of its image failed max_provisioning_retries times stops, until the image or the count is changed."""
        if not self._wants_image():
            if self.status.get("provisioningFailCount"):
                self.status["provisioningFailCount"] = 0
                self.status.pop("lastAttemptedImage", None)
            return
        if (self.spec.get("image") or None) != (self.status.get("lastAttemptedImage") or None):
            self.status["provisioningFailCount"] = 0
        count, limit = self.status.get("provisioningFailCount", 0), self.max_provisioning_retries
        if limit and count >= limit:
            raise HostFailure(PROVISIONING_ERROR, f"provisioning failed {count} times, retry limit ({limit}) reached; "
                                                  "change image or reset provisioningFailCount to retry", retry=False)

    def _provisioned(self) -> Action:
        waiting = self._register()
        if waiting is not None:
            return waiting
        if not self._wants_image() and self.state == PROVISIONED:
            self._history("deprovision", "start", force=True)
            return self._advance(DEPROVISIONING, "image removed")
        # A host registered again under a provisioned host (after detach) is adopted, not deployed.
        waiting = self._check(self.provisioner.adopt(self._host_data()[0]), PROVISIONED_REGISTRATION_ERROR)
        if waiting is not None:
            return waiting
        servicing = self._service()
        if servicing is not None:
            return servicing
        data_image = self._data_image()
        if data_image is not None:
            return data_image
        return self._power()

    def _data_image(self) -> Action | None:
        """Upstream's DataImage handling: a provisioned host about to be powered on (a reboot annotation, or off and
        to be on) first has its DataImage's image put in its virtual CD drive - or taken out once the DataImage is
        deleted - and powers on once the drive is as asked (hosts/dataimage.py). None: power on."""
        held_off = any(key.startswith(REBOOT_ANNOTATION + "/") for key in self.annotations)
        powering_on = REBOOT_ANNOTATION in self.annotations or not self.status.get("poweredOn")
        if not self.spec.get("online") or held_off or not powering_on:
            return None
        waiting = dataimage.at_power_on(self.store, self.provisioner, self.ref, self.outbound,
                                        self.dry_run)
        if waiting is None:
            return None
        self.message = waiting.message
        self.waits_on.append(dataimage.ref_of(self.ref))
        return Action(waiting.requeue_after)

    def _service(self) -> Action | None:
        """Firmware settings applied to a provisioned host without reprovisioning it (Ironic's servicing), as
        upstream: only when a HostUpdatePolicy of the host's name allows it (firmwareSettings: onReboot), and only
        as the host reboots (a reboot annotation, or powered off and to be on) - the servicing is that reboot. None
        when there is nothing to service: the power is managed then."""
        under_way = (self.status.get("operationalStatus") == "servicing"
                     or self.status.get("errorType") == SERVICING_ERROR)
        rebooting = bool(self.spec.get("online")) and (REBOOT_ANNOTATION in self.annotations
                                                       or not self.status.get("poweredOn"))
        if not under_way and not rebooting:
            return None
        policy = (self._update_policy().get("spec") or {})
        updates_allowed = policy.get("firmwareUpdates") == firmware.ON_REBOOT
        changes = self._firmware_changes(policy.get("firmwareSettings") == firmware.ON_REBOOT, updates_allowed)
        if isinstance(changes, Action):
            return changes
        settings, updates = changes
        if not under_way:
            if not updates and (not settings
                                or not settings_changes(settings, self.provisioner.firmware_settings().settings)):
                return None
            # Recorded before Ironic is asked, so that a servicing under way is never mistaken for none.
            self.status["operationalStatus"] = "servicing"
            self.message = "servicing: firmware " + ("updates" if updates else "settings") + " to apply"
            return Action(POLL)
        components = self._firmware_components() if updates_allowed else None
        result = self.provisioner.service(settings, restart=self.status.get("errorType") == SERVICING_ERROR,
                                          firmware_updates=updates,
                                          updates_asked=bool(((components or {}).get("spec") or {}).get("updates")))
        self._updates_sent(result, updates)
        waiting = self._check(result, SERVICING_ERROR)
        if waiting is not None:
            self._healthy()
            self.status["operationalStatus"] = "servicing"
            return waiting
        self._healthy()
        self.status["operationalStatus"] = "OK"
        self.message = result.message or "serviced"
        if REBOOT_ANNOTATION in self.annotations:  # the servicing rebooted the host
            self._remove_annotation(REBOOT_ANNOTATION)
        return None

    def _update_policy(self) -> Object:
        """The HostUpdatePolicy of the host's name ({} when there is none), owned by the host as upstream makes it."""
        ref = Ref(firmware.API, firmware.UPDATE_POLICY_KIND, self.ref.name, self.ref.namespace)
        policy = self.store.get_if_exists(ref)
        if policy is not None:
            self._own(ref, policy)
        return policy or {}

    def _deprovisioning(self) -> Action:
        deleting = bool(self.host["metadata"].get("deletionTimestamp"))
        if not deleting:  # a host being deleted is deprovisioned with what the provisioner has of it
            waiting = self._register()
            if waiting is not None:
                return waiting
        result = self.provisioner.deprovision(self._automated_clean())
        if result.dirty and not result.delayed:
            self._history("deprovision", "start")
        waiting = self._check(result, PROVISIONING_ERROR)
        if waiting is not None:
            return waiting
        self._history("deprovision", "end")
        self.status["provisioning"]["image"] = {}
        if deleting:
            return self._advance(POWERING_OFF_BEFORE_DELETE, "deprovisioned")
        # Available first, as upstream: a host with an image provisions from there, within its retry limit.
        return self._advance(AVAILABLE, "deprovisioned")

    def _delete(self) -> Action:
        state = self.state
        detached = self.status.get("operationalStatus") == "detached" or DETACHED_ANNOTATION in self.annotations
        if detached and state != DELETING:
            # A detached host is deleted without powering it off or deprovisioning it: its provisioner no longer
            # has it. Its deletion waits while the annotation says deleteAction "delay" - or, without the
            # annotation, while the host is detached: it may be attached again.
            arguments = self._detached_arguments()
            if DETACHED_ANNOTATION not in self.annotations or arguments.get("deleteAction") == "delay":
                self.message = "deletion delayed: the host is detached"
                return REST
            return self._advance(DELETING, "deleted while detached: no power off, no deprovisioning")
        if state in (PROVISIONING, PROVISIONED):
            self._history("deprovision", "start", force=True)
            return self._advance(DEPROVISIONING, "deleted: deprovisioning first")
        if state == DEPROVISIONING:
            return self._deprovisioning()
        if state not in (POWERING_OFF_BEFORE_DELETE, DELETING):
            return self._advance(POWERING_OFF_BEFORE_DELETE, "deleted: powering off")
        if state == POWERING_OFF_BEFORE_DELETE:
            if not self.spec.get("disablePowerOff"):
                waiting = self._check(self.provisioner.power(False), self._error_type())
                if waiting is not None:
                    return waiting
            return self._advance(DELETING)
        result = self.provisioner.delete()
        waiting = self._check(result, self._error_type())
        if waiting is not None:
            return waiting
        self._release_preprovisioning_image()
        remove_finalizer(self.store, self.ref, FINALIZER, self.dry_run)
        self.deleted = True
        self.message = "deleted" + (f": {result.message}" if result.message else "")
        return REST

    def _detach(self) -> Action:
        result = self.provisioner.detach(self.state not in DETACHABLE_STATES)
        waiting = self._check(result, DETACH_ERROR)
        if waiting is not None:
            return waiting
        if result.message:
            self.message = f"detached: {result.message}"
        self.status["provisioning"].pop("ID", None)
        self.status["operationalStatus"] = "detached"
        return REST

    _HANDLERS: dict[str, Callable[[_Reconcile], Action]] = {
        NONE: _unmanaged, UNMANAGED: _unmanaged, REGISTERING: _registering, MATCH_PROFILE: _registering,
        INSPECTING: _inspecting, PREPARING: _preparing, AVAILABLE: _available, READY: _available,
        PROVISIONING: _provisioning, PROVISIONED: _provisioned, EXTERNALLY_PROVISIONED: _provisioned,
        DEPROVISIONING: _deprovisioning, POWERING_OFF_BEFORE_DELETE: _delete, DELETING: _delete,
    }


def _annotation_args(value: str) -> dict[str, Any]:
    try:
        args = json.loads(value) if value else {}
    except ValueError:
        return {}
    return args if isinstance(args, dict) else {}


def config_drive(ref: Ref, uid: str, spec: Mapping[str, Any],
                 secret: Callable[[str, str], dict[str, str]]) -> dict[str, Any]:
    """{meta_data, user_data, network_data} for the workload of ``ref`` (a host, or a claim served by a virtual
    machine) from the Secrets of ``spec``'s userData, metaData and networkData (of ``ref``'s namespace, read by
    ``secret(name, field)``), with upstream's default meta_data keys. HostFailure naming the field when a Secret
    cannot be used."""
    meta_data: dict[str, Any] = {"uuid": uid, "metal3-namespace": ref.namespace, "metal3-name": ref.name,
                                 "local-hostname": ref.name, "local_hostname": ref.name, "name": ref.name}
    drive: dict[str, Any] = {"meta_data": meta_data}
    for field, key in (("metaData", "meta_data"), ("userData", "user_data"), ("networkData", "network_data")):
        secret_ref = spec.get(field) or {}
        if not secret_ref.get("name"):
            continue
        if secret_ref.get("namespace", ref.namespace) != ref.namespace:
            raise HostFailure(PROVISIONING_ERROR, f"spec.{field}.namespace: must be the namespace {ref.namespace!r}",
                              retry=False)
        values = secret(secret_ref["name"], f"spec.{field}")
        text = values.get(field, values.get("value"))
        if text is None:
            raise HostFailure(PROVISIONING_ERROR, f"spec.{field}: secret {ref.namespace}/{secret_ref['name']} has "
                                                  f"no {field!r} or 'value' key", retry=False)
        if key == "user_data":
            drive[key] = text
            continue
        parsed = _mapping(text, f"spec.{field}: secret {ref.namespace}/{secret_ref['name']}", PROVISIONING_ERROR)
        if key == "meta_data":
            meta_data.update(parsed)
        else:
            drive[key] = parsed
    return drive


def _mapping(text: str, what: str, error_type: str) -> dict[str, Any]:
    """A secret's YAML (or JSON) mapping; a HostFailure naming ``what`` when it is not one."""
    try:
        parsed = parse_yaml(text, what) or {}
    except BadRequest as e:
        raise HostFailure(error_type, str(e), retry=False) from None
    if not isinstance(parsed, dict):
        raise HostFailure(error_type, f"{what} must hold a mapping, not {type(parsed).__name__}", retry=False)
    return parsed
