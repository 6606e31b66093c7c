# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""HostClaim: a workload on compute its tenant never sees, as baremetal-operator's HostClaim, completed.

The flow is the same whatever serves the claim; what does is the class of compute its ``spec.kind`` names
(compute/registry.py: bare metal - a BareMetalHost - by default, or a libvirt virtual machine), which the flow
calls through one interface (compute/base.py).

Normal: finalizer → the claim's secrets checked (its own namespace only) → what serves the claim bound (its class:
a free host of a namespace whose HostDeployPolicies admit the claim's, claimed by the resourceVersion-checked
update every claimer uses; or a machine of its own) or why nothing does yet → brought to the claim's spec (image,
data, power as ``poweredOn`` asks, a ``reboot.metal3.io`` request) → a HardwareData in the claim's namespace with
its hardware → the claim's status: what serves it, its state, power and addresses.
Delete: every class releases what of it serves the claim (a host deprovisioned and freed, a machine it made
deleted), then the HardwareData is deleted and the finalizer removed.

What serves a claim is fixed once it is bound: ``spec.kind`` cannot change then (admission refuses it; a claim
changed past admission - on a cluster, which serves no webhook for HostClaims - is reported, not served; so is a
kind no class here serves), and a deleted claim releases whatever the world says serves it - a host whose
consumerRef names it, a virtual machine this claim made - whatever its spec.kind says now.

Upstream binds and unbinds only (its release is a TODO); what it names (kinds, fields, finalizer, conditions and
their reasons) is kept. Its status has no state or addresses: ``status.state`` and ``status.addresses`` are this
collection's additions.
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, cast

from ansible_collections.metal3.baremetal.plugins.module_utils.compute.base import (
    DATA_FIELDS,
    HOSTS_REACHABLE,
    READY_CONDITION,
    ClaimState,
    ComputeClass,
    DataField,
    Pending,
    Services,
    Stuck,
    Waiting,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.compute.libvirt import LIBVIRT, VirtualMachines
from ansible_collections.metal3.baremetal.plugins.module_utils.compute.registry import (
    CLASSES,
    claim_kind,
    class_for,
    served_kinds,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core import pause
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import (
    Object,
    Ref,
    controlled_by,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.core.progress import report
from ansible_collections.metal3.baremetal.plugins.module_utils.core.reconcile import Result
from ansible_collections.metal3.baremetal.plugins.module_utils.core.waiting import wait_until
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (
    API,
    AVAILABLE,
    PROVISIONED,
    READY,
    host_state,
    reconcile_hosts,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (
    KIND as HOST_KIND,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import IronicOptions
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
        HostClaim,
        HostClaimSpec,
    )

KIND = "HostClaim"
HARDWARE_KIND = "HardwareData"
FINALIZER = "metal3.io/hostclaim"
# On a claim's HardwareData: the host's spec.bootMACAddress (a data template's fromBootMAC reads it).
BOOT_MAC_ANNOTATION = "metal3.baremetal/boot-mac-address"

# Upstream's conditions and reasons (apis/metal3.io/v1alpha1/hostclaim_types.go), and the BareMetalHost's
# Provisioned and Ready condition types, which its HostClaim controller summarises (Ready: compute/base.py).
ASSOCIATED, SYNCHRONIZED, PROVISIONED_CONDITION = "Associated", "Synchronized", "Provisioned"
CLAIM_DELETING = "HostClaimDeleting"
CONFIGURATION_SYNCED = "ConfigurationSynced"
SECRET_SYNC_FAILURE = {"userData": "UserDataSecretSyncFailure", "metaData": "MetaDataSecretSyncFailure",
                       "networkData": "NetworkDataSecretSyncFailure"}
HOST_NOT_SYNCHRONIZED = "BareMetalHostNotSynchronized"
# Ours: spec.kind changed after the claim was bound (past admission), or names no class served here.
KIND_CHANGED, KIND_NOT_SERVED = "KindChanged", "KindNotServed"
WAIT = 2.0  # while what serves it changes state


@dataclass
class ClaimResult(Result):
    """What one reconcile of a HostClaim came to: its phase (pending, bound, provisioned, deleting, deleted), the
    host it holds (``<namespace>/<name>``), that host's state, and ``error`` for a claim that cannot go on until
    its spec (or a policy) changes."""

    phase: str = ""
    host: str = ""
    state: str = ""
    error: str = ""

    def summary(self) -> dict[str, Any]:
        claim = cast("HostClaim", self.obj or {})
        metadata = claim.get("metadata") or {}
        status = claim.get("status") or {}
        return {"name": metadata.get("name"), "namespace": metadata.get("namespace"), "phase": self.phase,
                "host": self.host, "state": self.state, "powered_on": status.get("poweredOn", False),
                "addresses": status.get("addresses", []), "hardware_data": status.get("hardwareData"),
                "requeue_after": self.requeue_after, "waits_on": self.wait_targets(), "error": self.error,
                "message": self.message}


# -- the claim's data ------------------------------------------------------------------------------------------

def _data_refusal(claim: Object, field: DataField) -> str:
    """Why the claim's ``field`` Secret cannot be used ('' when it can, or none is given)."""
    ref = (cast("HostClaim", claim).get("spec") or cast("HostClaimSpec", {})).get(field)
    if not ref:
        return ""
    namespace = claim["metadata"]["namespace"]
    if not ref.get("name"):
        return f"spec.{field}.name is required"
    if ref.get("namespace") and ref["namespace"] != namespace:
        return (f"spec.{field}.namespace: {ref['namespace']} is not the claim's namespace; a HostClaim reads Secrets "
                "of its own namespace only")
    return ""


# -- the reconcile ---------------------------------------------------------------------------------------------

def reconcile_host_claim(store: Store, ref: Ref, dry_run: bool = False,
                         machines: VirtualMachines | None = None,
                         outbound: OutboundPolicy | None = None,
                         drivers: Mapping[str, Any] | None = None) -> ClaimResult:
    """One step of the HostClaim named by ``ref``; ``machines``: the hypervisor that serves claims of kind
    libvirt (None: this controller serves none, and such a claim says so); ``outbound``: which of the
    controller's own hosts the server of a claim's identityRef may name (default: none); ``drivers``: the driver
    of any other class of compute, by kind (compute/registry.py)."""
    try:
        claim = store.get(ref)
    except NotFound:
        return ClaimResult(None, message="gone", phase="deleted")
    if pause.paused(claim):
        return ClaimResult(claim, message="paused", phase="paused")
    services = Services(outbound or OutboundPolicy(), {**(drivers or {}), LIBVIRT: machines})
    state = ClaimState(store, claim, dry_run)
    if claim["metadata"].get("deletionTimestamp"):
        return _release(state, services)
    compute_class = class_for(claim_kind(claim))
    if compute_class is None:
        return _Flow(state, None).not_served()
    flow = _Flow(state, compute_class(state, services))
    switched = _switched_kind(claim)
    if switched:
        return flow.kind_changed(switched)
    return flow.serve()


def _release(state: ClaimState, services: Services) -> ClaimResult:
    """A deleted claim releases whatever the world says serves it, whatever its spec.kind says now: every class
    that may hold something for it releases it (a virtual machine it made, a host whose consumerRef names it),
    each step; once none holds anything, the claim's own objects go."""
    waiting: tuple[_Flow, Waiting] | None = None
    for compute_class in CLASSES.values():
        compute = compute_class(state, services)
        if not compute.may_hold():
            continue
        flow = _Flow(state, compute)
        try:
            with compute.session():
                released = compute.release()
                if released is not None:
                    state.update_status(_deleting(released.why))
                    waiting = waiting or (flow, released)
                    flow.reachable()
        except Exception as e:  # pylint: disable=broad-exception-caught  # the class says which are the claim's
            stuck = compute.failure(e)
            if stuck is None:
                raise
            return flow.stuck(stuck)
    if waiting is not None:
        flow, released = waiting
        return flow.result("deleting", WAIT, released.why, released.host)
    return _forget(state)


def _deleting(why: str) -> Callable[[dict[str, Any]], None]:
    """The claim's Associated condition while what serves it is released."""
    def change(status: dict[str, Any]) -> None:
        status["conditions"] = set_condition(status.get("conditions"), ASSOCIATED, False, CLAIM_DELETING, why)

    return change


def _forget(state: ClaimState) -> ClaimResult:
    """The claim's own objects gone once nothing holds it: its HardwareData, then its finalizer."""
    ref = state.ref
    hardware = state.store.get_if_exists(Ref(API, HARDWARE_KIND, ref.name, ref.namespace))
    if controlled_by(hardware, state.obj):  # never a HardwareData someone else made
        state.store.delete(Ref(API, HARDWARE_KIND, ref.name, ref.namespace), dry_run=state.dry_run)
    remove_finalizer(state.store, ref, FINALIZER, state.dry_run)
    return ClaimResult(None, True, message="deleted", phase="deleted")


def _bound_to(claim: Object) -> tuple[str, str]:
    """What the claim's status says serves it: (kind of compute, <namespace>/<name>), or ('', '')."""
    status = claim.get("status") or {}
    for kind, compute_class in CLASSES.items():
        bound = status.get(compute_class.bound_field)
        if isinstance(bound, dict) and bound.get("name"):
            return kind, f"{bound.get('namespace', '')}/{bound['name']}"
    return "", ""


def _switched_kind(claim: Object) -> str:
    """Why the claim cannot be served as its spec.kind says: it is bound to compute of another kind ('' when
    not)."""
    kind, name = _bound_to(claim)
    if not kind or kind == claim_kind(claim):
        return ""
    what = CLASSES[kind].noun
    return (f"spec.kind: {claim_kind(claim)} - the claim is bound to {what} {name} of kind {kind}, and its kind "
            "cannot change once it is bound; set it back, or delete the claim (which releases the "
            f"{what}) and make a new one")


class _Flow:
    """One reconcile of a claim (``state``) served by ``compute`` (None: its kind is served by no class here)."""

    def __init__(self, state: ClaimState, compute: ComputeClass | None):
        self.state, self.compute = state, compute
        self.bound_field = compute.bound_field if compute is not None else ""

    @property
    def claim(self) -> Object:
        return self.state.obj

    @property
    def view(self) -> HostClaim:
        """The claim as its schema types it: mypy checks the fields read from it."""
        return cast("HostClaim", self.state.obj)

    def result(self, phase: str, requeue: float | None, message: str, host: Object | None = None,
               error: str = "", waits_on: list[Ref] | None = None) -> ClaimResult:
        name = f"{host['metadata']['namespace']}/{host['metadata']['name']}" if host else ""
        state = host_state(host)
        return ClaimResult(self.claim, self.state.changed, requeue, message, waits_on or [], phase=phase, host=name,
                           state=state, error=error)

    def serve(self) -> ClaimResult:
        """One step of a claim its class serves, in the class's session; a failure the class reads as the claim's
        is shown on the claim."""
        compute = self.compute
        if compute is None:
            raise AssertionError("serve() called on a claim no class serves")
        try:
            with compute.session():
                result = self.normal(compute)
                if result.obj is not None:
                    self.reachable()
                    result.obj = self.claim
                return result
        except Exception as e:  # pylint: disable=broad-exception-caught  # the class says which are the claim's
            stuck = compute.failure(e)
            if stuck is None:
                raise
            return self.stuck(stuck)

    # -- normal ----------------------------------------------------------------------------------------------
    def normal(self, compute: ComputeClass) -> ClaimResult:
        self._ensure_finalizer()
        refusals: dict[str, str] = {field: why for field in DATA_FIELDS if (why := _data_refusal(self.claim, field))}
        refusals.update(compute.refusals())
        bound = compute.bind(refusals)
        if isinstance(bound, Pending):
            return self._pending(bound, refusals)
        seen = compute.configure(bound, refusals)
        hardware_data, problem = self._hardware_data(seen.host) if seen.show_hardware else (None, "")
        self._write_status(seen.host, hardware_data=hardware_data, refusals=seen.refusals)
        if seen.refusals:
            why = next(iter(seen.refusals.values()))
            return self.result("bound", None, why, seen.host, error=why)
        phase = "provisioned" if host_state(seen.host) == PROVISIONED else "bound"
        return self.result(phase, None if seen.settled else WAIT, problem or seen.message, seen.host)

    def _ensure_finalizer(self) -> None:
        if FINALIZER not in (self.claim["metadata"].get("finalizers") or []):
            self.state.obj = ensure_finalizer(self.state.store, self.state.ref, FINALIZER, self.state.dry_run)
            self.state.changed = True

    def _pending(self, pending: Pending, refusals: dict[str, str]) -> ClaimResult:
        waiting = pending.why

        def change(status: dict[str, Any]) -> None:
            status.pop(self.bound_field, None)
            status.pop("state", None)
            status.pop("addresses", None)
            status["poweredOn"] = False
            status["conditions"] = set_condition(status.get("conditions"), ASSOCIATED, False, pending.reason,
                                                 waiting or "waiting for the claim's data")
            self._data_conditions(status, refusals)
            status["conditions"] = set_condition(status["conditions"], READY_CONDITION, False, pending.ready_reason,
                                                 waiting or next(iter(refusals.values()), ""))

        self.state.update_status(change)
        if refusals:
            why = next(iter(refusals.values()))
            return self.result("pending", None, why, error=why)
        return self.result("pending", pending.requeue, waiting, waits_on=pending.waits_on)

    def _data_conditions(self, status: dict[str, Any], refusals: dict[str, str]) -> None:
        if refusals:
            field, why = next(iter(refusals.items()))
            status["conditions"] = set_condition(status.get("conditions"), SYNCHRONIZED, False,
                                                 SECRET_SYNC_FAILURE.get(field, HOST_NOT_SYNCHRONIZED), why)
        else:
            status["conditions"] = set_condition(status.get("conditions"), SYNCHRONIZED, True, CONFIGURATION_SYNCED)

    def _hardware_data(self, host: Object) -> tuple[dict[str, str] | None, str]:
        """The HardwareData named after the claim in its namespace: the host's hardware (once inspected), its
        labels (its failure domain among them) and its boot MAC address - what a data template renders from; its
        reference, and a problem when a HardwareData of that name is not the claim's."""
        view = cast("BareMetalHost", host)  # a host, or what serves the claim shown as one
        hardware = copy.deepcopy((view.get("status") or {}).get("hardware"))
        if not hardware:
            return None, ""
        for nic in hardware.get("nics") or []:  # HardwareData's schema wants a MAC, where there is one, to be one
            if not nic.get("mac"):
                nic.pop("mac", None)
        boot_mac = (view.get("spec") or cast("BareMetalHostSpec", {})).get("bootMACAddress")
        wanted = {"labels": dict(host["metadata"].get("labels") or {}),
                  "annotations": {BOOT_MAC_ANNOTATION: boot_mac} if boot_mac else {},
                  "spec": {"hardware": hardware}}
        store, ref, dry_run = self.state.store, self.state.ref, self.state.dry_run
        hardware_ref = Ref(API, HARDWARE_KIND, ref.name, ref.namespace)
        existing = store.get_if_exists(hardware_ref)
        if existing is not None and not controlled_by(existing, self.claim):
            return None, f"HardwareData {self.state.claim_id} exists and was not made by this claim; it is left alone"
        if existing is None:
            store.create({"apiVersion": API, "kind": HARDWARE_KIND,
                          "metadata": {"name": ref.name, "namespace": ref.namespace,
                                       "labels": wanted["labels"], "annotations": wanted["annotations"],
                                       "ownerReferences": [{"apiVersion": API, "kind": KIND, "name": ref.name,
                                                            "uid": self.claim["metadata"]["uid"],
                                                            "controller": True}]},
                          "spec": wanted["spec"]}, dry_run=dry_run)
            self.state.changed = True
        elif (existing.get("spec") != wanted["spec"] or (existing["metadata"].get("labels") or {}) != wanted["labels"]
              or (existing["metadata"].get("annotations") or {}) != wanted["annotations"]):
            metadata = {**existing["metadata"], "labels": wanted["labels"], "annotations": wanted["annotations"]}
            store.update({**existing, "metadata": metadata, "spec": wanted["spec"]}, dry_run=dry_run)
            self.state.changed = True
        return {"namespace": ref.namespace, "name": ref.name}, ""

    def _write_status(self, host: Object, hardware_data: dict[str, str] | None = None,
                      refusals: dict[str, str] | None = None) -> None:
        host_status = cast("BareMetalHost", host).get("status") or {}
        state = host_state(host)
        associated_reason = self.compute.associated_reason if self.compute is not None else ""

        def change(status: dict[str, Any]) -> None:
            status[self.bound_field] = {"namespace": host["metadata"]["namespace"], "name": host["metadata"]["name"]}
            if hardware_data:
                status["hardwareData"] = hardware_data
            status["poweredOn"] = bool(host_status.get("poweredOn"))
            status["state"] = state
            status["addresses"] = _addresses(host, self.state.ref.name)
            conditions = set_condition(status.get("conditions"), ASSOCIATED, True, associated_reason)
            status["conditions"] = conditions
            self._data_conditions(status, refusals or {})
            provisioned = state == PROVISIONED
            status["conditions"] = set_condition(status["conditions"], PROVISIONED_CONDITION, provisioned,
                                                 state or "None")
            ready = not refusals and (provisioned or not self.state.deploying and state in (AVAILABLE, READY))
            status["conditions"] = set_condition(status["conditions"], READY_CONDITION, ready,
                                                 "Ready" if ready else state or "None")

        self.state.update_status(change)

    # -- what the claim cannot go on with --------------------------------------------------------------------
    def kind_changed(self, why: str) -> ClaimResult:
        """The claim's spec.kind was changed after it was bound (past admission): nothing is served or changed
        - what is bound stays bound, and is released when the claim is deleted - until it is set back."""
        return self.stuck(Stuck("failed", READY_CONDITION, KIND_CHANGED, why))

    def not_served(self) -> ClaimResult:
        """The claim's spec.kind names no class served here (admission refuses it; a claim written past it is
        reported, not served as another kind): nothing is served or changed until it names one."""
        kind = claim_kind(self.claim)
        return self.stuck(Stuck("failed", READY_CONDITION, KIND_NOT_SERVED,
                                f"spec.kind: {kind!r} is not a class of compute served here ({served_kinds()})"))

    def reachable(self) -> None:
        """HostsReachable True on a claim whose hosts are elsewhere; none on one whose hosts are its store's (one
        moved back home by a pivot has it from its time away)."""
        def change(status: dict[str, Any]) -> None:
            if elsewhere:
                status["conditions"] = set_condition(status.get("conditions"), HOSTS_REACHABLE, True, "Reachable")
            else:
                status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != HOSTS_REACHABLE]

        elsewhere = self.compute is not None and self.compute.elsewhere
        held = next((c for c in (self.view.get("status") or {}).get("conditions") or []
                     if c.get("type") == HOSTS_REACHABLE), None)
        if (held.get("status") if held else None) != ("True" if elsewhere else None):  # only a change costs a write
            self.state.update_status(change)

    def stuck(self, stuck: Stuck) -> ClaimResult:
        """Say on the claim why it cannot go on (its condition False), and change nothing else - what serves it,
        its state and addresses stay as last seen; with a requeue it looks again then, else ``why`` is an
        error."""
        self.state.update_status(lambda status: status.update(conditions=set_condition(
            status.get("conditions"), stuck.condition, False, stuck.reason, stuck.why)))
        bound = (self.claim.get("status") or {}).get(self.bound_field) or {} if self.bound_field else {}
        return ClaimResult(self.claim, self.state.changed, stuck.requeue, stuck.why, phase=stuck.phase,
                           host=f"{bound['namespace']}/{bound['name']}" if bound.get("name") else "",
                           state=(self.view.get("status") or {}).get("state", ""),
                           error=stuck.why if stuck.requeue is None else "")


def _addresses(host: Object, claim_name: str) -> list[dict[str, str]]:
    """The host's addresses as a Cluster API Machine's: InternalIP of each NIC that has one (from inspection),
    Hostname and InternalDNS."""
    hardware = (cast("BareMetalHost", host).get("status") or {}).get("hardware") or {}
    addresses = [{"type": "InternalIP", "address": nic["ip"]} for nic in hardware.get("nics") or [] if nic.get("ip")]
    hostname = hardware.get("hostname") or claim_name
    return [*addresses, {"type": "Hostname", "address": hostname}, {"type": "InternalDNS", "address": hostname}]


def host_view(store: Store, claim: Object | None) -> Object | None:
    """The claimed host as a BareMetalHost-shaped object built from what the claim shows its tenant - the host's
    name and state (the claim's status), its labels, boot MAC and hardware (the claim's HardwareData) - for
    what reads a host without seeing it (a Metal3Machine in HostClaim mode, its data templates); None until the
    claim is bound and its HardwareData made. It has no annotations: the host's stay with the host."""
    status = (claim or {}).get("status") or {}
    bound = next((status[c.bound_field] for c in CLASSES.values() if status.get(c.bound_field)), None) or {}
    hardware_ref = status.get("hardwareData") or {}
    if claim is None or not bound.get("name") or not hardware_ref.get("name"):
        return None
    hardware = store.get_if_exists(Ref(API, HARDWARE_KIND, hardware_ref["name"], claim["metadata"]["namespace"]))
    if hardware is None:
        return None
    boot_mac = (hardware["metadata"].get("annotations") or {}).get(BOOT_MAC_ANNOTATION)
    return {"apiVersion": API, "kind": HOST_KIND,
            "metadata": {"name": bound["name"], "namespace": claim["metadata"]["namespace"],
                         "labels": dict(hardware["metadata"].get("labels") or {})},
            "spec": {"bootMACAddress": boot_mac} if boot_mac else {},
            "status": {"hardware": (hardware.get("spec") or {}).get("hardware") or {},
                       "provisioning": {"state": status.get("state", "")},
                       "poweredOn": bool(status.get("poweredOn"))}}


# -- bastions: until bound, provisioned or deleted -----------------------------------------------------------

def converge_claims(store_factory: Callable[[], Store], ironic: IronicOptions, refs: list[Ref],
                    target: str | None = None, timeout: float = 0, dry_run: bool = False, concurrency: int = 20,
                    sleep: Callable[[float], None] = time.sleep,
                    machines: VirtualMachines | None = None,
                    outbound: OutboundPolicy | None = None) -> tuple[list[ClaimResult], bool]:
    """Step the claims named by ``refs`` and their hosts until every one reaches ``target`` (bound, provisioned,
    deleted), or time is up, or a claim cannot go on (its ``error``). No target: one step of each claim; its host
    has a reconcile of its own (the operator's). ``outbound``: as for reconcile_host_claim."""
    one_step = target is None or dry_run

    def step() -> list[ClaimResult]:
        with store_factory() as store:
            steps = [reconcile_host_claim(store, ref, dry_run, machines, outbound) for ref in refs]
        for ref, result in zip(refs, steps, strict=True):
            report(KIND, f"{ref.namespace}/{ref.name}", result.phase, changed=result.changed)
        if one_step:
            return steps
        # From a bastion nobody else reconciles the hosts, so this loop does (the claim's class says which).
        hosts = _hosts_to_reconcile((s.obj, s.host) for s in steps if s.host and s.obj is not None)
        if hosts:
            reconcile_hosts(store_factory, ironic, hosts, (), 0, concurrency)
        return steps

    def verdict(steps: list[ClaimResult]) -> bool | None:
        if target is None or dry_run or all(_reached(s, target) for s in steps):  # (spelled out for mypy)
            return True
        return False if any(s.error for s in steps) else None

    return wait_until(step, verdict, timeout, sleep=sleep)


def _hosts_to_reconcile(served: Iterable[tuple[Object, str]]) -> list[Ref]:
    """The BareMetalHosts whose own reconcile moves on the claims (``(claim, <namespace>/<name> serving it)``),
    as the claims' classes say, once each."""
    refs: dict[Ref, None] = {}
    for claim, host in sorted(served, key=lambda pair: pair[1]):
        compute_class = class_for(claim_kind(claim))
        if compute_class is not None:
            refs.update(dict.fromkeys(compute_class.hosts_to_reconcile(claim, host, "")))
    return list(refs)


def _reached(step: ClaimResult, target: str) -> bool:
    if target == "deleted":
        return step.obj is None
    if target == "bound":
        return bool(step.host) and not step.error
    return step.phase == "provisioned" and step.requeue_after is None and not step.error
