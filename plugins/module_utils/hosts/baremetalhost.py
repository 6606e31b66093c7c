# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The BareMetalHost lifecycle against Ironic, as baremetal-operator runs it: one level-based step.

``reconcile_host`` reads the host and its Ironic node, takes the next step of
upstream's state machine (registering → inspecting → preparing → available →
provisioning → provisioned → deprovisioning, and the deletion path), writes the
status once, and says when to come back. The module, the role and the operator
all call it; ``wait_for_host`` is the same function in a loop.

Ironic does the work asynchronously: a step starts an operation and returns
``requeue_after``; a later step sees where Ironic got to. A failure Ironic
reports (last_error) becomes errorType/errorMessage/errorCount; the next step
after the backoff tries again, so a host recovers once the cause is gone.
"""
from __future__ import annotations

import copy
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import (
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
    secret_values,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.bmc import driver_for
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import (
    VIRTUAL_MEDIA_BOOT,
    Ironic,
    IronicError,
    IronicOptions,
    Node,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import parse_yaml
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.writes import (
    ensure_finalizer,
    remove_finalizer,
    set_condition,
)

API = "metal3.io/v1alpha1"
KIND = "BareMetalHost"
FINALIZER = "baremetalhost.metal3.io"
PAUSED_ANNOTATION = "baremetalhost.metal3.io/paused"
DETACHED_ANNOTATION = "baremetalhost.metal3.io/detached"
REBOOT_ANNOTATION = "reboot.metal3.io"
INSPECT_ANNOTATION = "inspect.metal3.io"
HARDWARE_DETAILS_ANNOTATION = "inspect.metal3.io/hardwaredetails"
NODE_NAME_SEPARATOR = "~"  # Ironic node <namespace>~<name>, as upstream names them

# Provisioning states (status.provisioning.state), upstream's strings.
NONE, UNMANAGED, REGISTERING, INSPECTING, PREPARING = "", "unmanaged", "registering", "inspecting", "preparing"
AVAILABLE, READY, PROVISIONING, PROVISIONED = "available", "ready", "provisioning", "provisioned"
EXTERNALLY_PROVISIONED, DEPROVISIONING = "externally provisioned", "deprovisioning"
POWERING_OFF_BEFORE_DELETE, DELETING = "powering off before delete", "deleting"
STATES = (NONE, UNMANAGED, REGISTERING, "match profile", INSPECTING, PREPARING, AVAILABLE, READY, PROVISIONING,
          PROVISIONED, EXTERNALLY_PROVISIONED, DEPROVISIONING, POWERING_OFF_BEFORE_DELETE, DELETING)
# States a host rests in until someone changes it.
STABLE_STATES = (UNMANAGED, AVAILABLE, READY, PROVISIONED, EXTERNALLY_PROVISIONED)

# Error types (status.errorType), upstream's strings.
REGISTRATION_ERROR = "registration error"
PROVISIONED_REGISTRATION_ERROR = "provisioned registration error"
INSPECTION_ERROR = "inspection error"
PREPARATION_ERROR = "preparation error"
PROVISIONING_ERROR = "provisioning error"
POWER_MANAGEMENT_ERROR = "power management error"
DETACH_ERROR = "detach error"

POLL = 0.5  # seconds between looks at a node Ironic is working on
DELAYED = 5.0  # seconds before asking again for a provisioning slot
BACKOFF_BASE, BACKOFF_MAX = 5.0, 600.0
MAX_TRANSITIONS = 8  # a step takes at most this many transitions that need no waiting

ROOT_DEVICE_HINTS = {"deviceName": "name", "hctl": "hctl", "model": "model", "vendor": "vendor",
                     "serialNumber": "serial", "wwn": "wwn", "wwnWithExtension": "wwn_with_extension",
                     "wwnVendorExtension": "wwn_vendor_extension", "rotational": "rotational"}
BOOT_MODES = {"UEFI": "uefi", "UEFISecureBoot": "uefi", "legacy": "bios"}


@dataclass
class HostStep:
    """What one reconcile of a host came to."""

    host: Object | None
    state: str
    changed: bool = False
    requeue_after: float | None = None  # None: nothing to do until the host changes
    message: str = ""

    @property
    def error(self) -> str:
        status = (self.host or {}).get("status") or {}
        return f"{status['errorType']}: {status.get('errorMessage', '')}" if status.get("errorType") else ""

    def summary(self) -> dict[str, Any]:
        metadata = (self.host or {}).get("metadata") or {}
        status = (self.host or {}).get("status") or {}
        return {"name": metadata.get("name"), "namespace": metadata.get("namespace"), "state": self.state,
                "operational_status": status.get("operationalStatus", ""),
                "error_type": status.get("errorType", ""), "error_message": status.get("errorMessage", ""),
                "error_count": status.get("errorCount", 0), "powered_on": status.get("poweredOn", False),
                "node": (status.get("provisioning") or {}).get("ID", ""), "requeue_after": self.requeue_after,
                "message": self.message}


class HostFailure(Exception):
    """A step failed for a reason the host records (errorType, errorMessage)."""

    def __init__(self, error_type: str, message: str, retry: bool = True):
        super().__init__(message)
        self.error_type = error_type
        self.message = message
        self.retry = retry  # False: the same attempt cannot succeed; wait for the spec to change


def reconcile_host(store: Store, ironic: Ironic, ref: Ref, dry_run: bool = False,
                   provisioning_limit: int = 20) -> HostStep:
    """One step of the host named by ``ref``."""
    try:
        host = store.get(ref)
    except NotFound:
        return HostStep(None, NONE, message="not found")
    return _Reconcile(store, ironic, host, dry_run, provisioning_limit).run()


def wait_for_host(reconcile: Callable[[], HostStep], targets: tuple[str, ...], timeout: float,
                  sleep: Callable[[float], None] = time.sleep) -> tuple[HostStep, bool]:
    """Reconcile until the host reaches one of ``targets`` ('settled': any state with nothing to do).

    Returns the last step and whether a target was reached. Stops early on an error
    that cannot clear by itself (requeue_after None), or when the host is gone.
    """
    deadline = time.monotonic() + timeout
    changed = False
    while True:
        step = reconcile()
        changed = changed or step.changed
        step.changed = changed
        # A stable state counts once nothing is left to do in it (the power to apply, say).
        reached = (step.state in targets and (step.requeue_after is None or step.state not in STABLE_STATES)
                   or "settled" in targets and step.requeue_after is None)
        if step.host is None and "deleted" in targets:
            return step, True
        if reached and not step.error or step.requeue_after is None or step.host is None:
            return step, reached and not step.error
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return step, False
        sleep(min(step.requeue_after, remaining))


def reconcile_hosts(open_store: Callable[[], Store], ironic_options: IronicOptions, refs: list[Ref],
                    targets: tuple[str, ...] = (), timeout: float = 0, concurrency: int = 20,
                    dry_run: bool = False) -> list[tuple[HostStep, bool]]:
    """Each host one step, or until ``targets`` (see wait_for_host), ``concurrency`` hosts at a time.

    Each worker has its own store connection and Ironic session: SQLite connections are per thread.
    """
    def one(ref: Ref) -> tuple[HostStep, bool]:
        with open_store() as store:
            ironic = Ironic(ironic_options, dry_run=dry_run)

            def step() -> HostStep:
                return reconcile_host(store, ironic, ref, dry_run, ironic_options.provisioning_limit)

            if not targets or dry_run:  # check mode changes nothing, so there is nothing to wait for
                return step(), True
            return wait_for_host(step, targets, timeout)

    if len(refs) <= 1:
        return [one(ref) for ref in refs]
    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(refs)))) as pool:
        return list(pool.map(one, refs))


class _Reconcile:
    """One reconcile of one host: the handlers of the state machine share this state."""

    def __init__(self, store: Store, ironic: Ironic, host: Object, dry_run: bool, provisioning_limit: int):
        self.store, self.ironic, self.host, self.dry_run = store, ironic, host, dry_run
        self.limit = provisioning_limit
        self.ref = Ref.of(host)
        self.spec: dict[str, Any] = host.get("spec") or {}
        self.annotations: dict[str, str] = host["metadata"].get("annotations") or {}
        self.status: dict[str, Any] = copy.deepcopy(host.get("status") or {})
        self.status.setdefault("provisioning", {}).setdefault("state", NONE)
        self.status.setdefault("errorCount", 0)
        self.changed = False
        self.message = ""
        self.node_name = f"{self.ref.namespace}{NODE_NAME_SEPARATOR}{self.ref.name}"
        self._node: Node | None = None

    # -- the frame ------------------------------------------------------------------------------------
    @property
    def state(self) -> str:
        return self.status["provisioning"]["state"]

    def run(self) -> HostStep:
        if PAUSED_ANNOTATION in self.annotations:
            return HostStep(self.host, self.state, message="paused")
        metadata = self.host["metadata"]
        if metadata.get("deletionTimestamp") and FINALIZER not in (metadata.get("finalizers") or []):
            return HostStep(self.host, self.state, message="being deleted")
        requeue: float | None = 0.0
        # Transitions that need no waiting (registered → inspecting, inspected → preparing → available...)
        # are taken in one step, on the node read once: one status write, no extra Ironic round trips.
        for _transition in range(MAX_TRANSITIONS):
            try:
                requeue = self._handler()(self)
            except HostFailure as failure:
                requeue = self._fail(failure)
            except IronicError as e:
                if e.status_code == 409:  # the node is locked by an operation in progress: look again soon
                    requeue, self.message = POLL, str(e)
                else:  # Ironic refused a call we made: recorded against the current operation
                    requeue = self._fail(HostFailure(self._error_type(), str(e)))
            if requeue != 0.0 or self.host is None:
                break
        if self.host is None:  # deleted
            return HostStep(None, DELETING, True, None, self.message or "deleted")
        self._write_status()
        return HostStep(self.host, self.state, self.changed, requeue, self.message)

    def _handler(self) -> Callable[[_Reconcile], float | None]:
        if self.host["metadata"].get("deletionTimestamp"):
            return _Reconcile._delete
        if DETACHED_ANNOTATION in self.annotations:
            return _Reconcile._detach
        return self._HANDLERS[self.state]

    def _advance(self, state: str, message: str = "") -> float:
        """Move to ``state``: the operation before it succeeded, so its error is cleared."""
        self.status["provisioning"]["state"] = state
        self._healthy()
        self.message = message or f"moved to {state or 'none'}"
        return 0.0

    def _healthy(self) -> None:
        for key in ("errorType", "errorMessage"):
            self.status.pop(key, None)
        self.status["errorCount"] = 0
        if self.status.get("operationalStatus") in (None, "", "error", "delayed", "detached"):
            self.status["operationalStatus"] = "OK"

    def _fail(self, failure: HostFailure) -> float | None:
        same = (self.status.get("errorType") == failure.error_type
                and self.status.get("errorMessage") == failure.message)
        if same and not failure.retry:
            return None  # already recorded; nothing to try until the spec changes
        self.status.update(errorType=failure.error_type, errorMessage=failure.message, operationalStatus="error",
                           errorCount=self.status.get("errorCount", 0) + 1)
        self.message = f"{failure.error_type}: {failure.message}"
        if not failure.retry:
            return None
        return min(BACKOFF_BASE * 2 ** (self.status["errorCount"] - 1), BACKOFF_MAX)

    def _error_type(self) -> str:
        return {NONE: REGISTRATION_ERROR, REGISTERING: REGISTRATION_ERROR, INSPECTING: INSPECTION_ERROR,
                PREPARING: PREPARATION_ERROR, PROVISIONING: PROVISIONING_ERROR,
                DEPROVISIONING: PROVISIONING_ERROR, PROVISIONED: POWER_MANAGEMENT_ERROR,
                EXTERNALLY_PROVISIONED: POWER_MANAGEMENT_ERROR, AVAILABLE: POWER_MANAGEMENT_ERROR,
                READY: POWER_MANAGEMENT_ERROR}.get(self.state, REGISTRATION_ERROR)

    def _write_status(self) -> None:
        self._set_conditions()
        before = {k: v for k, v in (self.host.get("status") or {}).items() if k != "lastUpdated"}
        after = {k: v for k, v in self.status.items() if k != "lastUpdated"}
        if before == after:
            return
        self.status["lastUpdated"] = now()
        try:  # resourceVersion-checked: a host changed since it was read is reconciled again from scratch
            self.host = self.store.update_status({**self.host, "status": self.status}, dry_run=self.dry_run)
        except (Conflict, NotFound):
            self.message = f"{self.ref} changed while reconciling; will look again"
            return
        self.changed = True

    def _set_conditions(self) -> None:
        state, error = self.state, self.status.get("errorType")
        conditions = self.status.get("conditions")
        registered = state not in (NONE, UNMANAGED, REGISTERING)
        busy = state in (REGISTERING, INSPECTING, PREPARING, PROVISIONING, DEPROVISIONING,
                         POWERING_OFF_BEFORE_DELETE, DELETING)
        for type_, value, reason in (
            ("Manageable", registered, "Registered" if registered else "NotRegistered"),
            ("Provisioned", state in (PROVISIONED, EXTERNALLY_PROVISIONED), state or "None"),
            ("AvailableForProvisioning", state in (AVAILABLE, READY) and not self.spec.get("consumerRef"),
             state or "None"),
            ("Progressing", busy, state or "None"),
            ("Healthy", not error, "OK" if not error else error.title().replace(" ", "")),
            ("Ready", state in STABLE_STATES and not error, state or "None"),
        ):
            conditions = set_condition(conditions, type_, value, reason,
                                       self.status.get("errorMessage", "") if type_ == "Healthy" else "")
        self.status["conditions"] = conditions

    def _history(self, operation: str, edge: str, force: bool = False) -> None:
        entry = self.status.setdefault("operationHistory", {}).setdefault(operation, {})
        if force or not entry.get(edge):
            entry[edge] = now()
        if edge == "start" and force:
            entry.pop("end", None)

    # -- what the spec asks for --------------------------------------------------------------------------
    def _image(self) -> dict[str, Any]:
        return self.spec.get("image") or {}

    def _wants_image(self) -> bool:
        return bool(self._image().get("url") or (self.spec.get("customDeploy") or {}).get("method"))

    def _inspection_disabled(self) -> bool:
        return (self.spec.get("inspectionMode") == "disabled"
                or self.annotations.get(INSPECT_ANNOTATION) == "disabled")

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

    def _driver(self) -> tuple[Any, dict[str, Any]]:
        """The Ironic driver for spec.bmc, and the credentials it used (for goodCredentials)."""
        bmc = self.spec.get("bmc") or {}
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
        try:
            driver = driver_for(bmc.get("address", ""), values["username"], values["password"],
                                bool(bmc.get("disableCertificateVerification")))
        except Invalid as e:  # a BMC address that cannot be read stays so until the spec changes: no retries
            raise HostFailure(REGISTRATION_ERROR, str(e), retry=False) from None
        credentials = {"credentials": {"name": name, "namespace": self.ref.namespace},
                       "credentialsVersion": str(secret["metadata"].get("resourceVersion", ""))}
        return driver, credentials

    def _deploy_interface(self, driver: Any) -> str | None:
        if self._image().get("format") == "live-iso":
            return "ramdisk"
        if (self.spec.get("customDeploy") or {}).get("method"):
            return "custom-agent"
        return driver.interfaces.get("deploy_interface")

    # -- Ironic node ------------------------------------------------------------------------------------
    def _find_node(self) -> Node | None:
        """The host's node, read once per step: a handler that changes the node ends the step (requeue > 0)."""
        if self._node is None:
            node_id = self.status["provisioning"].get("ID")
            node = self.ironic.get_node(node_id) if node_id else None
            self._node = node or self.ironic.get_node(self.node_name)
        return self._node

    def _registered_node(self) -> Node | None:
        """The host's node, registered and verified; None while Ironic is still verifying it."""
        driver, credentials = self._driver()
        mac = (self.spec.get("bootMACAddress") or "").lower()
        node = self._find_node()
        if node is None:
            other = self.ironic.node_by_mac(mac) if mac else None
            if other is not None and other["name"] != self.node_name:
                raise HostFailure(REGISTRATION_ERROR, f"MAC address {mac} conflicts with existing node "
                                                      f"{other['name']} ({other['id']})")
            if other is not None:
                node = other
        if node is None:
            self._ensure_finalizer()  # before the node exists, so that deleting the host removes it
            interfaces = dict(driver.interfaces)
            deploy = self._deploy_interface(driver)
            if deploy:
                interfaces["deploy_interface"] = deploy
            properties: dict[str, Any] = {}
            if self.spec.get("bootMode") in BOOT_MODES:
                properties["capabilities"] = f"boot_mode:{BOOT_MODES[self.spec['bootMode']]}"
            if self.spec.get("architecture"):
                properties["cpu_arch"] = self.spec["architecture"]
            node = self.ironic.create_node(self.node_name, driver.driver, driver.driver_info, interfaces, properties,
                                           mac or None, self._automated_clean())
            self._history("register", "start", force=True)
            self.status["triedCredentials"] = credentials
            self.message = f"registered node {node['name']}"
        elif self._bmc_changed(node, driver, credentials):
            node = self.ironic.patch_node(node, {"driver": driver.driver, "driver_info": driver.driver_info})
            self._node = node
            self.status["triedCredentials"] = credentials
            self.message = f"updated the BMC of node {node['name']}"
        self.status["provisioning"]["ID"] = node["id"]
        if node["provision_state"] == "enroll":
            if not node["target_provision_state"]:
                self.ironic.set_provision_state(node, "manage")
                self.status["triedCredentials"] = credentials
                if node["last_error"]:  # the previous attempt failed; this one is the retry
                    raise HostFailure(self._registration_error(), node["last_error"])
            return None
        if node["provision_state"] == "verifying":
            return None
        if self.status.get("goodCredentials") != credentials:
            self.status["goodCredentials"] = credentials
        self._history("register", "end")
        return node

    def _ensure_finalizer(self) -> None:
        if FINALIZER not in (self.host["metadata"].get("finalizers") or []):
            self.host = ensure_finalizer(self.store, self.ref, FINALIZER, self.dry_run)
            self.changed = True

    def _registration_error(self) -> str:
        return PROVISIONED_REGISTRATION_ERROR if self.state in (PROVISIONED, EXTERNALLY_PROVISIONED) \
            else REGISTRATION_ERROR

    def _bmc_changed(self, node: Node, driver: Any, credentials: dict[str, Any]) -> bool:
        """A new BMC address or new credentials: Ironic shows no passwords, so the secret's version tells."""
        shown = {k: v for k, v in driver.shown().items() if v != "******"}
        current = {k: v for k, v in (node["driver_info"] or {}).items() if k in shown}
        tried = self.status.get("triedCredentials") or self.status.get("goodCredentials")
        return node["driver"] != driver.driver or current != shown or (tried is not None and tried != credentials)

    def _automated_clean(self) -> bool:
        return self.spec.get("automatedCleaningMode") != "disabled"

    def _sync_automated_clean(self, node: Node) -> None:
        """Ironic cleans on provide and undeploy as automatedCleaningMode says (metadata: yes, disabled: no)."""
        if node["automated_clean"] != self._automated_clean():
            self.ironic.patch_node(node, {"automated_clean": self._automated_clean()})

    def _has_capacity(self, node: Node) -> bool:
        if node["boot_interface"] in VIRTUAL_MEDIA_BOOT:
            return True
        granted, busy = self.ironic.take_provisioning_slot(self.limit)
        if granted:
            return True
        self.status["operationalStatus"] = "delayed"
        self.message = f"delayed: {busy} hosts are busy (provisioning limit {self.limit})"
        return False

    def _power(self, node: Node) -> float | None:
        """Power the node as spec.online and the reboot annotations ask; None once it is as asked."""
        self.status["poweredOn"] = node["power_state"] == "power on"
        if node["target_power_state"]:
            return POLL
        held_off = any(key.startswith(REBOOT_ANNOTATION + "/") for key in self.annotations)
        want_on = bool(self.spec.get("online")) and not held_off
        if REBOOT_ANNOTATION in self.annotations and want_on:
            mode = _annotation_args(self.annotations[REBOOT_ANNOTATION]).get("mode", "hard")
            self.ironic.set_power_state(node, "soft rebooting" if mode == "soft" else "rebooting")
            self._remove_annotation(REBOOT_ANNOTATION)
            self.message = "rebooting"
            return POLL
        if want_on and node["power_state"] != "power on":
            self.ironic.set_power_state(node, "power on")
            self.message = "powering on"
            return POLL
        if not want_on and node["power_state"] not in ("power off", None):
            self.ironic.set_power_state(node, "power off")
            self.message = "powering off"
            return POLL
        return None

    def _remove_annotation(self, key: str) -> None:
        self.host = self.store.patch(self.ref, {"metadata": {"annotations": {key: None}}}, dry_run=self.dry_run)
        self.annotations = self.host["metadata"].get("annotations") or {}
        self.changed = True

    # -- the states ----------------------------------------------------------------------------------------
    def _unmanaged(self) -> float | None:
        if not (self.spec.get("bmc") or {}).get("address"):
            if self.state != UNMANAGED:
                self._advance(UNMANAGED, "no BMC address: unmanaged")
            return None
        # Registering starts in this same step, so that nothing is written when Ironic cannot be reached.
        self.status["provisioning"]["state"] = REGISTERING
        return self._registering()

    def _registering(self) -> float | None:
        if self._registered_node() is None:
            return POLL
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

    def _inspecting(self) -> float | None:
        node = self._registered_node()
        if node is None:
            return POLL
        if self._inspection_disabled():
            return self._skip_inspection(node)
        state = node["provision_state"]
        if state in ("inspecting", "inspect wait"):
            return POLL
        history = (self.status.get("operationHistory") or {}).get("inspect") or {}
        # Ironic moves the node to inspecting before answering the request, so manageable after our
        # request (start recorded, no end yet) means the inspection is over.
        if state == "manageable" and history.get("start") and not history.get("end"):
            self.status["hardware"] = hardware_details(node, self.ironic.inventory(node))
            self._history("inspect", "end")
            return self._advance(PREPARING, "inspected")
        if state == "available":
            self.ironic.set_provision_state(node, "manage")
            return POLL
        if not self._has_capacity(node):
            return DELAYED
        self.ironic.set_provision_state(node, "inspect")
        self._history("inspect", "start", force=True)
        if state == "inspect failed":
            raise HostFailure(INSPECTION_ERROR, node["last_error"] or "inspection failed")
        self.message = "inspecting"
        return POLL

    def _skip_inspection(self, node: Node) -> float | None:
        """Inspection disabled on a host already inspecting (say after it failed): skipped, as upstream's
        actionInspecting does, and on to preparing with the inspection error cleared. The node is first taken
        back to manageable (an inspection still waiting is aborted), which the later states start from."""
        state = node["provision_state"]
        if state == "inspecting":
            return POLL
        if state == "inspect wait":
            self.ironic.set_provision_state(node, "abort")
            self.message = "inspection disabled: aborting the inspection"
            return POLL
        if state == "inspect failed":  # Ironic may leave target_provision_state set here: manage clears it
            self.ironic.set_provision_state(node, "manage")
            self.message = "inspection disabled: taking the node back to manageable"
            return POLL
        self._hardware_from_annotation()
        return self._advance(PREPARING, "inspection disabled: skipped")

    def _preparing(self) -> float | None:
        if self._registered_node() is None:
            return POLL
        provisioning = self.status["provisioning"]
        provisioning["rootDeviceHints"] = self.spec.get("rootDeviceHints") or {}
        if self.spec.get("bootMode"):
            provisioning["bootMode"] = self.spec["bootMode"]
        return self._advance(AVAILABLE, "prepared")

    def _available(self) -> float | None:
        node = self._registered_node()
        if node is None:
            return POLL
        if self.annotations.get(INSPECT_ANNOTATION) not in (None, "disabled"):
            self._remove_annotation(INSPECT_ANNOTATION)
            return self._advance(INSPECTING, "inspection requested")
        if self.spec.get("externallyProvisioned"):
            return self._advance(EXTERNALLY_PROVISIONED)
        if self._wants_image():
            if not self._has_capacity(node):
                return DELAYED
            self._history("provision", "start", force=True)
            return self._advance(PROVISIONING)
        requeue = self._power(node)
        if requeue is None:
            self._healthy()
        return requeue

    def _provisioning(self) -> float | None:
        node = self._registered_node()
        if node is None:
            return POLL
        if not self._wants_image():
            return self._advance(DEPROVISIONING, "image removed")
        state = node["provision_state"]
        if state == "manageable":
            self._sync_automated_clean(node)
            self.ironic.set_provision_state(node, "provide")
            self.message = "cleaning" if self._automated_clean() else "providing"
            return POLL
        if state in ("cleaning", "clean wait", "deploying", "wait call-back", "deleting", "verifying"):
            return POLL
        if state == "clean failed":
            self.ironic.set_provision_state(node, "manage")
            raise HostFailure(PROVISIONING_ERROR, node["last_error"] or "cleaning failed")
        image = self._attempted_image()
        if state == "deploy failed" and self.status.get("lastAttemptedImage") == image:
            raise HostFailure(PROVISIONING_ERROR, node["last_error"] or "deploy failed", retry=False)
        if state in ("available", "deploy failed"):
            self._deploy(node)
            self.status["lastAttemptedImage"] = image
            self.message = f"deploying {image.get('url') or image.get('method')}"
            return POLL
        if state == "active":
            self.status["provisioning"]["image"] = self._image()
            if (self.spec.get("customDeploy") or {}).get("method"):
                self.status["provisioning"]["customDeploy"] = self.spec["customDeploy"]
            self._history("provision", "end")
            return self._advance(PROVISIONED, "provisioned")
        raise HostFailure(PROVISIONING_ERROR, f"Ironic node {node['name']} is in state {state!r}, "
                                              "which provisioning cannot continue from", retry=False)

    def _attempted_image(self) -> dict[str, Any]:
        method = (self.spec.get("customDeploy") or {}).get("method")
        return {**self._image(), **({"method": method} if method else {})}

    def _deploy(self, node: Node) -> None:
        driver, _credentials = self._driver()
        changes: dict[str, Any] = {"instance_info": instance_info(self._image(), self.spec.get("bootMode"))}
        deploy = self._deploy_interface(driver)
        if deploy and deploy != node["deploy_interface"]:
            changes["deploy_interface"] = deploy
        hints = root_device_hints(self.spec.get("rootDeviceHints"))
        if hints:
            changes["properties"] = {**(node["properties"] or {}), "root_device": hints}
        self.ironic.patch_node(node, changes)
        kwargs: dict[str, Any] = {}
        if self._image().get("format") != "live-iso":
            kwargs["config_drive"] = self._config_drive()
        self.ironic.set_provision_state(node, "active", **kwargs)

    def _config_drive(self) -> dict[str, Any]:
        """{meta_data, user_data, network_data} from the secrets, with upstream's default meta_data keys."""
        uid = self.host["metadata"].get("uid") or self.node_name
        meta_data: dict[str, Any] = {"uuid": uid, "metal3-namespace": self.ref.namespace,
                                     "metal3-name": self.ref.name, "local-hostname": self.ref.name,
                                     "local_hostname": self.ref.name, "name": self.ref.name}
        drive: dict[str, Any] = {"meta_data": meta_data}
        for field, key in (("metaData", "meta_data"), ("userData", "user_data"), ("networkData", "network_data")):
            ref = self.spec.get(field) or {}
            if not ref.get("name"):
                continue
            if ref.get("namespace", self.ref.namespace) != self.ref.namespace:
                raise HostFailure(PROVISIONING_ERROR, f"spec.{field}.namespace: must be the host's namespace "
                                                      f"{self.ref.namespace!r}", retry=False)
            values = self._secret(ref["name"], f"spec.{field}")
            text = values.get(field, values.get("value"))
            if text is None:
                raise HostFailure(PROVISIONING_ERROR, f"spec.{field}: secret {self.ref.namespace}/{ref['name']} has "
                                                      f"no {field!r} or 'value' key", retry=False)
            if key == "user_data":
                drive[key] = text
                continue
            try:
                parsed = parse_yaml(text, f"spec.{field}: secret {self.ref.namespace}/{ref['name']}") or {}
            except BadRequest as e:
                raise HostFailure(PROVISIONING_ERROR, str(e), retry=False) from None
            if not isinstance(parsed, dict):
                raise HostFailure(PROVISIONING_ERROR, f"spec.{field}: secret {self.ref.namespace}/{ref['name']} must "
                                                      f"hold a mapping, not {type(parsed).__name__}", retry=False)
            if key == "meta_data":
                meta_data.update(parsed)
            else:
                drive[key] = parsed
        return drive

    def _provisioned(self) -> float | None:
        node = self._registered_node()
        if node is None:
            return POLL
        if not self._wants_image() and self.state == PROVISIONED:
            self._history("deprovision", "start", force=True)
            return self._advance(DEPROVISIONING, "image removed")
        adopting = self._adopt(node)
        if adopting is not None:
            return adopting
        requeue = self._power(node)
        if requeue is None:
            self._healthy()
        return requeue

    def _adopt(self, node: Node) -> float | None:
        """A node registered again under a provisioned host (after detach) is adopted, not deployed."""
        state = node["provision_state"]
        if state == "active":
            return None
        if state == "adopting":
            return POLL
        if state in ("manageable", "adopt failed"):
            self.ironic.patch_node(node, {"instance_info": instance_info(self._image(), self.spec.get("bootMode"))})
            self.ironic.set_provision_state(node, "adopt")
            if state == "adopt failed":
                raise HostFailure(PROVISIONED_REGISTRATION_ERROR, node["last_error"] or "adoption failed")
            self.message = "adopting"
            return POLL
        raise HostFailure(PROVISIONED_REGISTRATION_ERROR, f"Ironic node {node['name']} is in state {state!r}")

    def _deprovisioning(self) -> float | None:
        deleting = bool(self.host["metadata"].get("deletionTimestamp"))
        node = self._find_node() if deleting else self._registered_node()
        if node is None:
            return self._advance(POWERING_OFF_BEFORE_DELETE) if deleting else POLL
        state = node["provision_state"]
        if state in ("active", "deploy failed", "wait call-back", "adopt failed"):
            if not self._has_capacity(node):
                return DELAYED
            self._sync_automated_clean(node)
            self.ironic.set_provision_state(node, "deleted")
            self._history("deprovision", "start")
            self.message = "deprovisioning"
            return POLL
        if state in ("deleting", "cleaning", "clean wait", "deploying", "inspecting", "verifying"):
            return POLL
        if state == "clean failed":
            self.ironic.set_provision_state(node, "manage")
            raise HostFailure(PROVISIONING_ERROR, node["last_error"] or "cleaning failed")
        self._history("deprovision", "end")
        self.status["provisioning"]["image"] = {}
        self.status.pop("lastAttemptedImage", None)
        if deleting:
            return self._advance(POWERING_OFF_BEFORE_DELETE, "deprovisioned")
        return self._advance(PROVISIONING if self._wants_image() else AVAILABLE, "deprovisioned")

    def _delete(self) -> float | None:
        state = self.state
        if state in (PROVISIONING, PROVISIONED):
            self._history("deprovision", "start", force=True)
            return self._advance(DEPROVISIONING, "deleted: deprovisioning first")
        if state == DEPROVISIONING:
            return self._deprovisioning()
        if state not in (POWERING_OFF_BEFORE_DELETE, DELETING):
            return self._advance(POWERING_OFF_BEFORE_DELETE, "deleted: powering off")
        node = self._find_node()
        if state == POWERING_OFF_BEFORE_DELETE:
            if node is not None and node["power_state"] == "power on" and not self.spec.get("disablePowerOff"):
                if not node["target_power_state"]:
                    self.ironic.set_power_state(node, "power off")
                return POLL
            return self._advance(DELETING)
        if node is not None:
            if node["provision_state"] not in ("available", "manageable", "enroll", "adopt failed", "inspect failed",
                                               "clean failed") and not node["maintenance"]:
                self.ironic.set_maintenance(node, "BareMetalHost deleted")
            self.ironic.delete_node(node)
        remove_finalizer(self.store, self.ref, FINALIZER, self.dry_run)
        self.host = None
        self.message = "deleted" + (f": Ironic node {node['name']} removed" if node else "")
        return None

    def _detach(self) -> float | None:
        node = self._find_node()
        if node is not None:
            if not node["maintenance"] and node["provision_state"] not in ("available", "manageable", "enroll"):
                self.ironic.set_maintenance(node, "BareMetalHost detached")
            self.ironic.delete_node(node)
            self.message = f"detached: Ironic node {node['name']} removed"
        self.status["provisioning"].pop("ID", None)
        self.status["operationalStatus"] = "detached"
        return None

    _HANDLERS: dict[str, Callable[[_Reconcile], float | None]] = {
        NONE: _unmanaged, UNMANAGED: _unmanaged, REGISTERING: _registering, "match profile": _registering,
        INSPECTING: _inspecting, PREPARING: _preparing, AVAILABLE: _available, READY: _available,
        PROVISIONING: _provisioning, PROVISIONED: _provisioned, EXTERNALLY_PROVISIONED: _provisioned,
        DEPROVISIONING: _deprovisioning, POWERING_OFF_BEFORE_DELETE: _delete, DELETING: _delete,
    }


# -- Ironic's view of the spec: pure functions --------------------------------------------------------------

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
    return info


def root_device_hints(hints: dict[str, Any] | None) -> dict[str, Any]:
    result = {ROOT_DEVICE_HINTS[k]: v for k, v in (hints or {}).items() if k in ROOT_DEVICE_HINTS}
    if (hints or {}).get("minSizeGigabytes"):
        result["size"] = f">= {hints['minSizeGigabytes']}"  # type: ignore[index]
    return result


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


def _annotation_args(value: str) -> dict[str, Any]:
    try:
        args = json.loads(value) if value else {}
    except ValueError:
        return {}
    return args if isinstance(args, dict) else {}
