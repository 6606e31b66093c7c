# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""HostClaim: a workload on a BareMetalHost its tenant never sees, as baremetal-operator's HostClaim, completed.

Normal: finalizer → the claim's secrets checked (its own namespace only) → a host bound: one whose consumerRef
already names the claim, else a free one chosen among the namespaces whose HostDeployPolicies admit the claim's
namespace (hostSelector, failureDomain preferred), claimed by the resourceVersion-checked update every claimer
uses (hosts/claim.py) → the claim's secrets copied into the host's namespace (a host reads Secrets of its own
namespace only; the copies are the host's, named after it) → the host's spec: image, customDeploy, user data,
meta data, network data, ``online`` from ``poweredOn``, a ``reboot.metal3.io`` request → a HardwareData in the
claim's namespace with the host's hardware → the claim's status: the host, its state, power and addresses.
Delete: the host's spec cleared and powered off, the host deprovisioned (cleaned as the host's
automatedCleaningMode says: the infrastructure's decision, which no tenant can turn off), the copies deleted,
the host freed for the next claim of any tenant, the HardwareData deleted, the finalizer removed.

What serves a claim is fixed once it is bound: ``spec.kind`` cannot change then (admission refuses it; a claim
changed past admission - on a cluster, which serves no webhook for HostClaims - is reported, not served), and a
deleted claim releases whatever the world says serves it - a host whose consumerRef names it, a virtual machine
this claim made - whatever its spec.kind says now.

Upstream binds and unbinds only (its release is a TODO); what it names (kinds, fields, finalizer, conditions and
their reasons) is kept. Its status has no state or addresses: ``status.state`` and ``status.addresses`` are this
collection's additions.
"""
from __future__ import annotations

import contextlib
import copy
import hashlib
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from ansible_collections.metal3.baremetal.plugins.module_utils.core import pause
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import (
    Invalid,
    NotFound,
    NotHeld,
    Unavailable,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import (
    Object,
    Ref,
    controlled_by,
    now,
    secret_values,
    split_reference,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy, Refused
from ansible_collections.metal3.baremetal.plugins.module_utils.core.progress import report
from ansible_collections.metal3.baremetal.plugins.module_utils.core.reconcile import Result
from ansible_collections.metal3.baremetal.plugins.module_utils.core.retry import retry_on_conflict
from ansible_collections.metal3.baremetal.plugins.module_utils.core.waiting import wait_until
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (
    API,
    AVAILABLE,
    PROVISIONED,
    READY,
    REBOOT_ANNOTATION,
    STABLE_STATES,
    HostFailure,
    config_drive,
    host_state,
    reconcile_hosts,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (
    KIND as HOST_KIND,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.claim import (
    CLAIM_ID_ANNOTATION,
    FAILURE_DOMAIN_LABEL,
    Consumer,
    associate,
    host_selector,
    release_host,
    update_claimed_host,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.remote import (
    HostsUnreachable,
    RemoteRefused,
    identity_ref,
    open_remote_hosts,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.virtual_machine import (
    BAREMETAL,
    LIBVIRT,
    MachineFailure,
    MachineSize,
    VirtualMachine,
    VirtualMachines,
    claim_kind,
    domain_name,
    hardware,
    limit_problems,
    mac_addresses,
    machine_size,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import IronicOptions
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.writes import (
    ensure_finalizer,
    remove_finalizer,
    set_condition,
)

KIND = "HostClaim"
POLICY_KIND = "HostDeployPolicy"
HARDWARE_KIND = "HardwareData"
FINALIZER = "metal3.io/hostclaim"
# On a copy of a claim's Secret in the host's namespace: the claim (<namespace>/<name>) it was copied for.
COPY_ANNOTATION = "metal3.baremetal/hostclaim"
# On a claim's HardwareData: the host's spec.bootMACAddress (a data template's fromBootMAC reads it).
BOOT_MAC_ANNOTATION = "metal3.baremetal/boot-mac-address"
# The claim's data fields, and the suffix of their copies' names (<host>-<suffix>).
DATA_FIELDS = {"userData": "claim-user-data", "metaData": "claim-meta-data", "networkData": "claim-network-data"}
HOST_FIELDS = ("image", "customDeploy", "userData", "metaData", "networkData")

# Upstream's conditions and reasons (apis/metal3.io/v1alpha1/hostclaim_types.go), and the BareMetalHost's
# Provisioned and Ready condition types, which its HostClaim controller summarises.
ASSOCIATED, SYNCHRONIZED, PROVISIONED_CONDITION, READY_CONDITION = "Associated", "Synchronized", "Provisioned", \
    "Ready"
HOST_ASSOCIATED = "BareMetalHostAssociated"
MISSING_HOST = "MissingBareMetalHost"
NO_HOST = "NoBareMetalHost"
CLAIM_DELETING = "HostClaimDeleting"
CONFIGURATION_SYNCED = "ConfigurationSynced"
SECRET_SYNC_FAILURE = {"userData": "UserDataSecretSyncFailure", "metaData": "MetaDataSecretSyncFailure",
                       "networkData": "NetworkDataSecretSyncFailure"}
HOST_NOT_SYNCHRONIZED = "BareMetalHostNotSynchronized"
# Ours, on a claim of kind libvirt.
MACHINE_ASSOCIATED, MACHINE_FAILED = "VirtualMachineAssociated", "VirtualMachineFailed"

NO_HOST_WAIT = 10.0  # a pending claim looks again (upstream: 30 s)
# Ours, on a claim whose hosts are in another store (spec.identityRef): whether that store answers.
HOSTS_REACHABLE = "HostsReachable"
HOSTS_UNREACHABLE, REMOTE_REFUSED = "HostsUnreachable", "IdentityRefInvalid"
# Ours: spec.kind changed after the claim was bound (past admission).
KIND_CHANGED = "KindChanged"
UNREACHABLE_WAIT = 10.0
WAIT = 2.0  # while its host changes state


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
        metadata = (self.obj or {}).get("metadata") or {}
        status = (self.obj or {}).get("status") or {}
        return {"name": metadata.get("name"), "namespace": metadata.get("namespace"), "phase": self.phase,
                "host": self.host, "state": self.state, "powered_on": status.get("poweredOn", False),
                "addresses": status.get("addresses", []), "hardware_data": status.get("hardwareData"),
                "requeue_after": self.requeue_after, "waits_on": self.wait_targets(), "error": self.error,
                "message": self.message}


# -- policies ----------------------------------------------------------------------------------------------

def policy_refusal(policy: Object, namespace: str, labels: dict[str, str]) -> str:
    """Why ``policy`` does not admit claims of ``namespace`` (whose labels are ``labels``); '' when it does.

    As upstream: every constraint given must hold (names, nameMatches - a regular expression searched in the
    name, so 'prod' matches 'reproduce' - and each of hasLabels); a policy without hostClaimNamespaces admits
    nobody. A malformed pattern raises ValueError (admission refuses it on writes through the engine; a policy
    written past it is reported, not applied).
    """
    constraints = (policy.get("spec") or {}).get("hostClaimNamespaces")
    if constraints is None:
        return "has no spec.hostClaimNamespaces"
    names = constraints.get("names")
    if names is not None and namespace not in names:
        return f"does not list {namespace} in spec.hostClaimNamespaces.names"
    pattern = constraints.get("nameMatches") or ""
    if pattern:
        try:
            matched = re.search(pattern, namespace)
        except re.error as e:
            raise ValueError(f"spec.hostClaimNamespaces.nameMatches {pattern!r} is not a regular expression: "
                             f"{e}") from None
        if not matched:
            return f"spec.hostClaimNamespaces.nameMatches {pattern!r} does not match {namespace}"
    for pair in constraints.get("hasLabels") or []:
        name, value = pair.get("name"), pair.get("value") or ""
        if name not in labels:
            return f"namespace {namespace} has no label {name}"
        if value and labels[name] != value:
            return f"namespace {namespace}'s label {name} is not {value}"
    return ""


def admitting_namespaces(store: Store, claim: Object) -> tuple[list[str], list[str]]:
    """The namespaces whose HostDeployPolicies admit ``claim`` (only ``hostSelector.inNamespace`` when set), and
    the problems of the policies that could not be read (a malformed pattern)."""
    namespace = claim["metadata"]["namespace"]
    selector = (claim.get("spec") or {}).get("hostSelector") or {}
    in_namespace = selector.get("inNamespace") or None
    # Namespaces are cluster-scoped: the Ref's namespace is not used (the local store files them under its default).
    namespace_obj = store.get_if_exists(Ref("v1", "Namespace", namespace))
    labels = ((namespace_obj or {}).get("metadata") or {}).get("labels") or {}
    admitted: list[str] = []
    problems: list[str] = []
    for policy in store.list(API, POLICY_KIND, in_namespace):
        where = policy["metadata"]["namespace"]
        if where in admitted:
            continue
        try:
            if not policy_refusal(policy, namespace, labels):
                admitted.append(where)
        except ValueError as e:
            problems.append(f"HostDeployPolicy {where}/{policy['metadata']['name']}: {e}")
    return sorted(admitted), problems


# -- the claim's data ------------------------------------------------------------------------------------------

def copy_name(host_name: str, field: str) -> str:
    """The name of the copy of a claim's ``field`` Secret beside the host: ``<host>-claim-user-data``, the host's
    name shortened with a digest of it when the whole would pass 253 characters."""
    suffix = DATA_FIELDS[field]
    if len(host_name) + 1 + len(suffix) <= 253:
        return f"{host_name}-{suffix}"
    digest = hashlib.sha256(host_name.encode()).hexdigest()[:10]
    return f"{host_name[:253 - len(suffix) - 12].rstrip('-.')}-{digest}-{suffix}"


def _data_refusal(claim: Object, field: str) -> str:
    """Why the claim's ``field`` Secret cannot be used ('' when it can, or none is given)."""
    ref = (claim.get("spec") or {}).get(field)
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
                         outbound: OutboundPolicy | None = None) -> ClaimResult:
    """One step of the HostClaim named by ``ref``; ``machines``: the hypervisor that serves claims of kind
    libvirt (None: this controller serves none, and such a claim says so); ``outbound``: which of the
    controller's own hosts the server of a claim's identityRef may name (default: none)."""
    try:
        claim = store.get(ref)
    except NotFound:
        return ClaimResult(None, message="gone", phase="deleted")
    if pause.paused(claim):
        return ClaimResult(claim, message="paused", phase="paused")
    deleting = bool(claim["metadata"].get("deletionTimestamp"))
    if claim_kind(claim) == LIBVIRT or deleting:
        served = _MachineFlow(store, claim, dry_run, machines)
        try:
            if deleting:
                # Whatever serves the claim is released, whatever its spec.kind says now: its machine first, then
                # the host it holds (the host flow ends by forgetting the claim).
                if not _may_hold_host(claim):
                    return _step(served)
                served.delete_machine()
            else:
                switched = _switched_kind(claim)
                if switched:
                    return served.kind_changed(switched)
                return _step(served)
        except (MachineFailure, Invalid, HostFailure, Refused) as e:
            return served.failed(str(getattr(e, "message", "") or e))
        except Unavailable as e:
            return served.failed(str(e), UNREACHABLE_WAIT)
    else:
        switched = _switched_kind(claim)
        if switched:
            return _Flow(store, store, claim, dry_run).kind_changed(switched)
    if identity_ref(claim) is None:
        return _step(_Flow(store, store, claim, dry_run))
    try:
        hosts: Store = open_remote_hosts(store, claim, outbound or OutboundPolicy())
    except RemoteRefused as e:
        return _Flow(store, store, claim, dry_run).unreachable(REMOTE_REFUSED, str(e), None)
    except HostsUnreachable as e:
        return _Flow(store, store, claim, dry_run).unreachable(HOSTS_UNREACHABLE, str(e), UNREACHABLE_WAIT)
    with hosts:
        flow = _Flow(store, hosts, claim, dry_run)
        try:
            return _step(flow)
        except HostsUnreachable as e:  # the link went down midway: what the claim has stays, it looks again
            return flow.unreachable(HOSTS_UNREACHABLE, str(e), UNREACHABLE_WAIT)
        except RemoteRefused as e:
            return flow.unreachable(REMOTE_REFUSED, str(e), None)
        except (KeyError, TypeError, AttributeError, ValueError, IndexError) as e:
            # The hosts' cluster answered objects of a shape no Kubernetes API serves (the tenant chose it).
            return flow.unreachable(HOSTS_UNREACHABLE, f"spec.identityRef: the hosts' cluster at "
                                    f"{getattr(hosts, 'host', '?')} answered objects this controller cannot read "
                                    f"({type(e).__name__})", UNREACHABLE_WAIT)


def _bound_to(claim: Object) -> tuple[str, str]:
    """What the claim's status says serves it: (kind of compute, <namespace>/<name>), or ('', '')."""
    status = claim.get("status") or {}
    for field, kind in (("bareMetalHost", BAREMETAL), ("virtualMachine", LIBVIRT)):
        bound = status.get(field)
        if isinstance(bound, dict) and bound.get("name"):
            return kind, f"{bound.get('namespace', '')}/{bound['name']}"
    return "", ""


def _switched_kind(claim: Object) -> str:
    """Why the claim cannot be served as its spec.kind says: it is bound to compute of another kind ('' when
    not)."""
    kind, name = _bound_to(claim)
    if not kind or kind == claim_kind(claim):
        return ""
    what = "host" if kind == BAREMETAL else "virtual machine"
    return (f"spec.kind: {claim_kind(claim)} - the claim is bound to {what} {name} of kind {kind}, and its kind "
            "cannot change once it is bound; set it back, or delete the claim (which releases the "
            f"{what}) and make a new one")


def _may_hold_host(claim: Object) -> bool:
    """Whether a host may hold the claim: its status names one, or it has an identity as a host's consumer
    (given before any host is bound, kept for good)."""
    return _bound_to(claim)[0] == BAREMETAL or \
        CLAIM_ID_ANNOTATION in (claim["metadata"].get("annotations") or {})


def _step(flow: _Flow) -> ClaimResult:
    result = flow.delete() if flow.claim["metadata"].get("deletionTimestamp") else flow.normal()
    if result.obj is not None:
        flow.reachable()
        result.obj = flow.claim
    return result


class _Flow:
    """``store``: the claim's (its Secrets, its HardwareData); ``hosts``: the hosts' (their policies, the copies of
    the claim's Secrets) - the same store, or another cluster's (spec.identityRef)."""

    bound_field = "bareMetalHost"  # where the status names what serves the claim

    def __init__(self, store: Store, hosts: Store, claim: Object, dry_run: bool):
        self.store, self.hosts, self.claim, self.dry_run = store, hosts, claim, dry_run
        self.ref = Ref.of(claim)
        self.consumer = Consumer.of(claim)
        self.spec: dict[str, Any] = claim.get("spec") or {}
        self.changed = False
        self.admitting: list[str] = []  # the namespaces whose hosts the claim may bind, once looked up
        self.associated_reason = HOST_ASSOCIATED

    @property
    def deploying(self) -> bool:
        """Whether the claim asks for a workload to be deployed (an image or a custom deploy)."""
        return bool(self.spec.get("image") or self.spec.get("customDeploy"))

    @property
    def claim_id(self) -> str:
        return f"{self.ref.namespace}/{self.ref.name}"

    def _host_ref(self) -> Ref | None:
        bound = (self.claim.get("status") or {}).get("bareMetalHost") or {}
        return Ref(API, HOST_KIND, bound["name"], bound["namespace"]) if bound.get("name") else None

    def result(self, phase: str, requeue: float | None, message: str, host: Object | None = None,
               error: str = "", waits_on: list[Ref] | None = None) -> ClaimResult:
        name = f"{host['metadata']['namespace']}/{host['metadata']['name']}" if host else ""
        state = host_state(host)
        return ClaimResult(self.claim, self.changed, requeue, message, waits_on or [], phase=phase, host=name,
                           state=state, error=error)

    # -- normal ----------------------------------------------------------------------------------------------
    def normal(self) -> ClaimResult:
        self._ensure_finalizer()
        self._ensure_identity()
        refusals = {field: why for field in DATA_FIELDS if (why := _data_refusal(self.claim, field))}
        host, waiting = self._bound_host()
        if host is None and not refusals:
            host, waiting = self._bind()
        if host is None:
            return self._pending(waiting, refusals)
        copies, refusals = self._copy_data(host, refusals)
        if refusals:
            self._write_status(host, refusals=refusals)
            field, why = next(iter(refusals.items()))
            return self.result("bound", None, why, host, error=why)
        host = self._set_host_spec(host, copies)
        hardware_data, problem = self._hardware_data(host)
        self._write_status(host, hardware_data=hardware_data)
        self._forget_reboot_request()
        state = host_state(host)
        settled = state in STABLE_STATES and (state == PROVISIONED or not self.deploying) and self._power_settled(host)
        phase = "provisioned" if state == PROVISIONED else "bound"
        message = problem or f"host {host['metadata']['namespace']}/{host['metadata']['name']} is {state or 'new'}"
        return self.result(phase, None if settled else WAIT, message, host)

    def _ensure_finalizer(self) -> None:
        if FINALIZER not in (self.claim["metadata"].get("finalizers") or []):
            self.claim = ensure_finalizer(self.store, self.ref, FINALIZER, self.dry_run)
            self.changed = True

    def _ensure_identity(self) -> None:
        """Give the claim its identity as a consumer (CLAIM_ID_ANNOTATION), once and before any host is bound: two
        reconciles of one claim meet on the resourceVersion, and the one that loses takes the winner's."""
        known = [self.claim]

        def write() -> Object:
            claim = known.pop() if known else self.store.get(self.ref)
            if CLAIM_ID_ANNOTATION in (claim["metadata"].get("annotations") or {}):
                return claim
            self.changed = True
            return self.store.patch(self.ref, {"metadata": {
                "resourceVersion": claim["metadata"]["resourceVersion"],
                "annotations": {CLAIM_ID_ANNOTATION: str(uuid.uuid4())}}}, dry_run=self.dry_run)

        self.claim = retry_on_conflict(write)
        self.consumer = Consumer.of(self.claim)

    def _bound_host(self) -> tuple[Object | None, str]:
        """The host the claim's status names, if it still holds it; else '' or why it lost it."""
        ref = self._host_ref()
        if ref is None:
            return None, ""
        host = self._bound_host_of(self.claim)
        if host is not None:
            return host, ""
        return None, f"host {ref.namespace}/{ref.name} is gone or no longer held by this claim"

    def _bound_host_of(self, claim: Object) -> Object | None:
        bound = (claim.get("status") or {}).get("bareMetalHost") or {}
        if not bound.get("name"):
            return None
        host = self.hosts.get_if_exists(Ref(API, HOST_KIND, bound["name"], bound["namespace"]))
        return host if host is not None and self.consumer.holds(host) else None

    def _bind(self) -> tuple[Object | None, str]:
        """A host for the claim: the one whose consumerRef already names it (a status write lost), else a free
        one of a namespace that admits it."""
        namespaces, problems = admitting_namespaces(self.hosts, self.claim)
        self.admitting = namespaces
        if not namespaces:
            where = (self.spec.get("hostSelector") or {}).get("inNamespace")
            why = f"no HostDeployPolicy{' in ' + where if where else ''} admits namespace {self.ref.namespace}"
            return None, "; ".join([why, *problems])
        selection = associate(self.hosts, namespaces, self.consumer, self.spec.get("hostSelector"),
                              self.spec.get("failureDomain") or None, dry_run=self.dry_run)
        if selection.host is None:
            selector = host_selector(self.spec.get("hostSelector"))
            return None, (f"no available host matches{' ' + selector if selector else ''} in "
                          f"{', '.join(namespaces)}: {selection.reason}")
        host = selection.host
        self.changed = True
        return self._record_binding(host), ""

    def _record_binding(self, host: Object) -> Object:
        """Write the bound host into the claim's status, onto the claim as this reconcile read it: a reconcile of
        the same claim running meanwhile (a bastion's and the operator's) may have bound another host, and then
        that one stays and this one is freed."""
        bound = {"namespace": host["metadata"]["namespace"], "name": host["metadata"]["name"]}
        known = [self.claim]

        def write() -> Object:
            claim = known.pop() if known else self.store.get(self.ref)
            other = self._bound_host_of(claim)
            if other is not None and Ref.of(other) != Ref.of(host):
                self.claim = claim
                with contextlib.suppress(NotHeld, NotFound):
                    update_claimed_host(self.hosts, Ref.of(host), self.consumer,
                                        lambda target: target["spec"].pop("consumerRef", None), self.dry_run)
                return other
            status = {**(claim.get("status") or {}), "bareMetalHost": bound, "lastUpdated": now()}
            self.claim = self.store.update_status({**claim, "status": status}, dry_run=self.dry_run)
            return host

        return retry_on_conflict(write)

    def _pending(self, waiting: str, refusals: dict[str, str]) -> ClaimResult:
        def change(status: dict[str, Any]) -> None:
            status.pop("bareMetalHost", None)
            status.pop("state", None)
            status.pop("addresses", None)
            status["poweredOn"] = False
            reason = MISSING_HOST if waiting.startswith("host ") else NO_HOST
            status["conditions"] = set_condition(status.get("conditions"), ASSOCIATED, False, reason,
                                                 waiting or "waiting for the claim's data")
            self._data_conditions(status, refusals)
            status["conditions"] = set_condition(status["conditions"], READY_CONDITION, False, NO_HOST,
                                                 waiting or next(iter(refusals.values()), ""))

        self._update_status(change)
        if refusals:
            why = next(iter(refusals.values()))
            return self.result("pending", None, why, error=why)
        # A host freed, added or relabelled where the claim is admitted may serve it.
        return self.result("pending", NO_HOST_WAIT, waiting,
                           waits_on=[Ref(API, HOST_KIND, "", namespace) for namespace in self.admitting])

    def _data_conditions(self, status: dict[str, Any], refusals: dict[str, str]) -> None:
        if refusals:
            field, why = next(iter(refusals.items()))
            status["conditions"] = set_condition(status.get("conditions"), SYNCHRONIZED, False,
                                                 SECRET_SYNC_FAILURE.get(field, HOST_NOT_SYNCHRONIZED), why)
        else:
            status["conditions"] = set_condition(status.get("conditions"), SYNCHRONIZED, True, CONFIGURATION_SYNCED)

    def _copy_data(self, host: Object, refusals: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
        """Copy each of the claim's data Secrets beside the host (made or brought up to date); the copies'
        names by field, and why a field could not be copied."""
        copies: dict[str, str] = {}
        refusals = dict(refusals)
        host_namespace, host_name = host["metadata"]["namespace"], host["metadata"]["name"]
        for field in DATA_FIELDS:
            ref = self.spec.get(field)
            if not ref or field in refusals:
                continue
            name = copy_name(host_name, field)
            source = self.store.get_if_exists(Ref("v1", "Secret", ref["name"], self.ref.namespace))
            if source is None:
                if ((host.get("spec") or {}).get(field) or {}).get("name") == name:
                    copies[field] = name  # copied when the host took it: what was deployed stays as it was
                else:
                    refusals[field] = f"spec.{field}: Secret {self.ref.namespace}/{ref['name']} not found"
                continue
            wanted = {"apiVersion": "v1", "kind": "Secret", "type": source.get("type", "Opaque"),
                      "metadata": {"name": name, "namespace": host_namespace,
                                   "annotations": {COPY_ANNOTATION: self.claim_id},
                                   "ownerReferences": [{"apiVersion": API, "kind": HOST_KIND, "name": host_name,
                                                        "uid": host["metadata"]["uid"], "controller": True}]},
                      "data": dict(source.get("data") or {})}
            existing = self.hosts.get_if_exists(Ref("v1", "Secret", name, host_namespace))
            if existing is None:
                self.hosts.create(wanted, dry_run=self.dry_run)
                self.changed = True
            elif not controlled_by(existing, host):
                refusals[field] = (f"Secret {host_namespace}/{name} exists and was not made for a claim of host "
                                   f"{host_name}; it is left alone")
                continue
            elif (existing.get("data") or {}) != wanted["data"] or \
                    (existing["metadata"].get("annotations") or {}).get(COPY_ANNOTATION) != self.claim_id:
                updated = copy.deepcopy(existing)
                updated["data"] = wanted["data"]
                updated["metadata"]["annotations"] = {**(existing["metadata"].get("annotations") or {}),
                                                      COPY_ANNOTATION: self.claim_id}
                self.hosts.update(updated, dry_run=self.dry_run)
                self.changed = True
            copies[field] = name
        return copies, refusals

    def _set_host_spec(self, host: Object, copies: dict[str, str]) -> Object:
        spec = self.spec
        annotations = self.claim["metadata"].get("annotations") or {}

        def change(target: Object) -> None:
            host_spec = target["spec"]
            if not host_spec.get("image") and not host_spec.get("customDeploy"):  # never an in-place upgrade
                if spec.get("image"):
                    host_spec["image"] = copy.deepcopy(spec["image"])
                if spec.get("customDeploy"):
                    host_spec["customDeploy"] = copy.deepcopy(spec["customDeploy"])
            for field in DATA_FIELDS:
                if field in copies:
                    host_spec[field] = {"name": copies[field], "namespace": target["metadata"]["namespace"]}
            host_spec["online"] = bool(spec.get("poweredOn"))
            if REBOOT_ANNOTATION in annotations:
                target["metadata"]["annotations"] = {**(target["metadata"].get("annotations") or {}),
                                                     REBOOT_ANNOTATION: annotations[REBOOT_ANNOTATION]}

        written = update_claimed_host(self.hosts, Ref.of(host), self.consumer, change, self.dry_run)
        self.changed = self.changed or written != host
        return written

    def _forget_reboot_request(self) -> None:
        """A reboot asked on the claim is the host's once written there: the claim forgets it (the host's own
        reconcile removes it from the host once done), so that one request is one reboot."""
        if REBOOT_ANNOTATION not in (self.claim["metadata"].get("annotations") or {}):
            return
        self.claim = self.store.patch(self.ref, {"metadata": {"annotations": {REBOOT_ANNOTATION: None}}},
                                      dry_run=self.dry_run)
        self.changed = True

    def _hardware_data(self, host: Object) -> tuple[dict[str, str] | None, str]:
        """The HardwareData named after the claim in its namespace: the host's hardware (once inspected), its
        labels (its failure domain among them) and its boot MAC address - what a data template renders from; its
        reference, and a problem when a HardwareData of that name is not the claim's."""
        hardware = copy.deepcopy((host.get("status") or {}).get("hardware"))
        if not hardware:
            return None, ""
        for nic in hardware.get("nics") or []:  # HardwareData's schema wants a MAC, where there is one, to be one
            if not nic.get("mac"):
                nic.pop("mac", None)
        boot_mac = (host.get("spec") or {}).get("bootMACAddress")
        wanted = {"labels": dict(host["metadata"].get("labels") or {}),
                  "annotations": {BOOT_MAC_ANNOTATION: boot_mac} if boot_mac else {},
                  "spec": {"hardware": hardware}}
        ref = Ref(API, HARDWARE_KIND, self.ref.name, self.ref.namespace)
        existing = self.store.get_if_exists(ref)
        if existing is not None and not controlled_by(existing, self.claim):
            return None, f"HardwareData {self.claim_id} exists and was not made by this claim; it is left alone"
        if existing is None:
            self.store.create({"apiVersion": API, "kind": HARDWARE_KIND,
                               "metadata": {"name": self.ref.name, "namespace": self.ref.namespace,
                                            "labels": wanted["labels"], "annotations": wanted["annotations"],
                                            "ownerReferences": [{"apiVersion": API, "kind": KIND,
                                                                 "name": self.ref.name,
                                                                 "uid": self.claim["metadata"]["uid"],
                                                                 "controller": True}]},
                               "spec": wanted["spec"]}, dry_run=self.dry_run)
            self.changed = True
        elif (existing.get("spec") != wanted["spec"] or (existing["metadata"].get("labels") or {}) != wanted["labels"]
              or (existing["metadata"].get("annotations") or {}) != wanted["annotations"]):
            metadata = {**existing["metadata"], "labels": wanted["labels"], "annotations": wanted["annotations"]}
            self.store.update({**existing, "metadata": metadata, "spec": wanted["spec"]}, dry_run=self.dry_run)
            self.changed = True
        return {"namespace": self.ref.namespace, "name": self.ref.name}, ""

    def _power_settled(self, host: Object) -> bool:
        return bool((host.get("status") or {}).get("poweredOn")) == bool(self.spec.get("poweredOn"))

    def _write_status(self, host: Object, hardware_data: dict[str, str] | None = None,
                      refusals: dict[str, str] | None = None) -> None:
        host_status = host.get("status") or {}
        state = host_state(host)

        def change(status: dict[str, Any]) -> None:
            self._record_bound(status, host)
            if hardware_data:
                status["hardwareData"] = hardware_data
            status["poweredOn"] = bool(host_status.get("poweredOn"))
            status["state"] = state
            status["addresses"] = _addresses(host, self.ref.name)
            conditions = set_condition(status.get("conditions"), ASSOCIATED, True, self.associated_reason)
            status["conditions"] = conditions
            self._data_conditions(status, refusals or {})
            provisioned = state == PROVISIONED
            status["conditions"] = set_condition(status["conditions"], PROVISIONED_CONDITION, provisioned,
                                                 state or "None")
            ready = not refusals and (provisioned or not self.deploying and state in (AVAILABLE, READY))
            status["conditions"] = set_condition(status["conditions"], READY_CONDITION, ready,
                                                 "Ready" if ready else state or "None")

        self._update_status(change)

    def _record_bound(self, status: dict[str, Any], host: Object) -> None:
        status[self.bound_field] = {"namespace": host["metadata"]["namespace"], "name": host["metadata"]["name"]}

    def _update_status(self, change: Callable[[dict[str, Any]], None]) -> None:
        """Apply ``change`` to the claim's status and write it when it differs (lastUpdated moves with it)."""
        def write() -> Object:
            current = self.store.get(self.ref)
            status = copy.deepcopy(current.get("status") or {})
            before = copy.deepcopy(status)
            change(status)
            if status == before:
                return current
            status["lastUpdated"] = now()
            self.changed = True
            return self.store.update_status({**current, "status": status}, dry_run=self.dry_run)

        self.claim = retry_on_conflict(write)

    def kind_changed(self, why: str) -> ClaimResult:
        """The claim's spec.kind was changed after it was bound (past admission): nothing is served or changed
        - what is bound stays bound, and is released when the claim is deleted - until it is set back."""
        return self._stuck("failed", READY_CONDITION, KIND_CHANGED, why, None)

    # -- hosts elsewhere ---------------------------------------------------------------------------------------
    def unreachable(self, reason: str, why: str, requeue: float | None) -> ClaimResult:
        """The claim's hosts cannot be reached (or its identityRef used)."""
        return self._stuck("unreachable", HOSTS_REACHABLE, reason, why, requeue)

    def _stuck(self, phase: str, condition: str, reason: str, why: str, requeue: float | None) -> ClaimResult:
        """Say on the claim why it cannot go on (``condition`` False), and change nothing else - what serves it,
        its state and addresses stay as last seen; ``requeue``: it looks again then, else ``why`` is an error."""
        self._update_status(lambda status: status.update(conditions=set_condition(
            status.get("conditions"), condition, False, reason, why)))
        bound = (self.claim.get("status") or {}).get(self.bound_field) or {}
        return ClaimResult(self.claim, self.changed, requeue, why, phase=phase,
                           host=f"{bound['namespace']}/{bound['name']}" if bound.get("name") else "",
                           state=(self.claim.get("status") or {}).get("state", ""),
                           error=why if requeue is None else "")

    def reachable(self) -> None:
        """HostsReachable True on a claim whose hosts are elsewhere; none on one whose hosts are its store's (one
        moved back home by a pivot has it from its time away)."""
        def change(status: dict[str, Any]) -> None:
            if elsewhere:
                status["conditions"] = set_condition(status.get("conditions"), HOSTS_REACHABLE, True, "Reachable")
            else:
                status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != HOSTS_REACHABLE]

        elsewhere = identity_ref(self.claim) is not None
        held = next((c for c in (self.claim.get("status") or {}).get("conditions") or []
                     if c.get("type") == HOSTS_REACHABLE), None)
        if (held or {}).get("status") != ("True" if elsewhere else None):  # only a change costs a write
            self._update_status(change)

    # -- delete ----------------------------------------------------------------------------------------------
    def delete(self) -> ClaimResult:
        host_ref = self._host_ref() or self._holding_host()
        if host_ref is not None:
            host = self.hosts.get_if_exists(host_ref)
            if host is not None and self.consumer.holds(host):
                waiting = self._release(host)
                if waiting:
                    self._update_status(lambda status: status.update(
                        conditions=set_condition(status.get("conditions"), ASSOCIATED, False, CLAIM_DELETING,
                                                 waiting)))
                    return self.result("deleting", WAIT, waiting, self.hosts.get_if_exists(host_ref))
        return self._forget()

    def _forget(self) -> ClaimResult:
        """The claim's own objects gone once nothing holds it: its HardwareData, then its finalizer."""
        hardware = self.store.get_if_exists(Ref(API, HARDWARE_KIND, self.ref.name, self.ref.namespace))
        if controlled_by(hardware, self.claim):  # never a HardwareData someone else made
            self.store.delete(Ref(API, HARDWARE_KIND, self.ref.name, self.ref.namespace), dry_run=self.dry_run)
        remove_finalizer(self.store, self.ref, FINALIZER, self.dry_run)
        return ClaimResult(None, True, message="deleted", phase="deleted")

    def _holding_host(self) -> Ref | None:
        """The host whose consumerRef names the claim when its status does not (a status write lost), in any
        namespace: a policy may have changed since the claim was bound."""
        return next((Ref.of(h) for h in self.hosts.list(API, HOST_KIND) if self.consumer.holds(h)), None)

    def _release(self, host: Object) -> str:
        """Clear the host's spec and wait until it is deprovisioned; then delete the copies and free the host.
        '' once released."""
        def delete_copies(host: Object) -> None:
            host_ref = Ref.of(host)
            for field in DATA_FIELDS:
                copy_ref = Ref("v1", "Secret", copy_name(host_ref.name, field), host_ref.namespace)
                existing = self.hosts.get_if_exists(copy_ref)
                if controlled_by(existing, host) and \
                        ((existing or {})["metadata"].get("annotations") or {}).get(COPY_ANNOTATION) == self.claim_id:
                    with contextlib.suppress(NotFound):
                        self.hosts.delete(copy_ref, dry_run=self.dry_run)

        waiting = release_host(self.hosts, Ref.of(host), self.consumer, dry_run=self.dry_run,
                               before_free=delete_copies)
        if not waiting:
            self.changed = True
        return waiting


class _MachineFlow(_Flow):
    """A claim of kind libvirt (hosts/virtual_machine.py): bound at once to a machine of its own, named after it,
    whose hardware (size from spec.args, NICs with MACs derived from the claim's uid) its HardwareData shows
    before the machine exists; the machine made once the claim has an image, from the claim's own Secrets (no
    copies: there is no host namespace), powered as poweredOn asks; on delete, the machine with its disk and config
    drive deleted - only one this claim made."""

    bound_field = "virtualMachine"

    def __init__(self, store: Store, claim: Object, dry_run: bool, machines: VirtualMachines | None):
        super().__init__(store, store, claim, dry_run)
        self.machines = machines
        self.machine_name = domain_name(self.ref.namespace, self.ref.name)
        self.uid = str(claim["metadata"].get("uid") or "")
        self.associated_reason = MACHINE_ASSOCIATED

    def _hypervisor(self) -> VirtualMachines:
        if self.machines is None:
            raise Invalid(f"spec.kind: {LIBVIRT} - this controller serves no HostClaims of kind {LIBVIRT} (give it "
                          "libvirt_bridge and libvirt_storage_dir)")
        return self.machines

    def _machine(self) -> VirtualMachine | None:
        machine = self._hypervisor().get(self.machine_name)
        if machine is not None and machine.owner != self.uid:
            raise MachineFailure(f"virtual machine {self.machine_name} exists and was not made by this claim; it is "
                                 "left alone")
        return machine

    def normal(self) -> ClaimResult:
        self._ensure_finalizer()
        size = machine_size(self.spec.get("args"))  # on a cluster, no webhook has checked them
        too_large = limit_problems(size, self.machines.limits) if self.machines is not None else []
        if too_large:
            raise Invalid("; ".join(f"{field}: {why}" for field, why in too_large))
        if self.spec.get("customDeploy"):
            raise Invalid(f"spec.customDeploy: a HostClaim of kind {LIBVIRT} boots spec.image")
        refusals = {field: why for field in DATA_FIELDS if (why := _data_refusal(self.claim, field))}
        macs = mac_addresses(self.uid, size.nics)
        if self.machines is not None and self.deploying:  # what the tenant asks fetched, before anything is done
            self.machines.check_image(self.spec["image"])
        machine = self._machine()
        if machine is None and self.deploying and not refusals:
            drive = config_drive(self.ref, self.uid, self.spec, self._secret)
            if not self.dry_run:
                self._hypervisor().create(self.machine_name, self.uid, size, macs, self.spec["image"], drive)
            machine = VirtualMachine(self.machine_name, self.uid, False)
            self.changed = True
        if machine is not None:
            wanted = bool(self.spec.get("poweredOn"))
            if machine.running != wanted:
                if not self.dry_run:
                    self._hypervisor().power(self.machine_name, wanted)
                machine.running = wanted
                self.changed = True
            if REBOOT_ANNOTATION in (self.claim["metadata"].get("annotations") or {}):
                if machine.running and not self.dry_run:
                    self._hypervisor().reboot(self.machine_name)
                self._forget_reboot_request()
        host = self._as_host(size, macs, machine)
        hardware_data, problem = self._hardware_data(host)
        self._write_status(host, hardware_data=hardware_data, refusals=refusals)
        if refusals:
            why = next(iter(refusals.values()))
            return self.result("bound", None, why, host, error=why)
        phase = "provisioned" if machine is not None else "bound"
        return self.result(phase, None, problem or f"virtual machine {self.machine_name} is "
                           f"{host_state(host)}{', running' if machine is not None and machine.running else ''}",
                           host)

    def _secret(self, name: str, field: str) -> dict[str, str]:
        try:
            return secret_values(self.store.get(Ref("v1", "Secret", name, self.ref.namespace)))
        except NotFound:
            raise Invalid(f"{field}: Secret {self.ref.namespace}/{name} not found") from None

    def _as_host(self, size: MachineSize, macs: list[str], machine: VirtualMachine | None) -> Object:
        """The machine in a BareMetalHost's shape, for what the claim shows (state, power, hardware) and its
        HardwareData: provisioned once it exists, available until then; labelled with the claim's failure
        domain."""
        failure_domain = self.spec.get("failureDomain")
        return {"apiVersion": API, "kind": HOST_KIND,
                "metadata": {"name": self.machine_name, "namespace": self.ref.namespace,
                             "labels": {FAILURE_DOMAIN_LABEL: failure_domain} if failure_domain else {}},
                "spec": {"bootMACAddress": macs[0]},
                "status": {"provisioning": {"state": PROVISIONED if machine is not None else AVAILABLE},
                           "poweredOn": bool(machine is not None and machine.running),
                           "hardware": hardware(size, macs, self.ref.name)}}

    def failed(self, why: str, requeue: float | None = None) -> ClaimResult:
        """The machine cannot be made or changed (or, with ``requeue``, the hypervisor does not answer)."""
        return self._stuck("failed", READY_CONDITION, MACHINE_FAILED, why, requeue)

    def delete(self) -> ClaimResult:
        self.delete_machine()
        return self._forget()

    def delete_machine(self) -> None:
        """Delete the machine this claim made, if there is one - whatever the claim's spec.kind says now (it may
        have changed past admission): one its status names, or one this controller's hypervisor has under the
        claim's name with the claim's uid in its metadata. A machine of that name made by anyone else is left
        alone."""
        named = bool((self.claim.get("status") or {}).get("virtualMachine"))
        if self.machines is None and not named:
            return
        try:
            machine = self._hypervisor().get(self.machine_name)
        except Unavailable:
            if named or claim_kind(self.claim) == LIBVIRT:
                raise
            return  # a bare-metal claim that never had a machine: a hypervisor down does not hold its release
        if machine is not None and machine.owner == self.uid:
            if not self.dry_run:
                self._hypervisor().delete(self.machine_name)
            self.changed = True


def _addresses(host: Object, claim_name: str) -> list[dict[str, str]]:
    """The host's addresses as a Cluster API Machine's: InternalIP of each NIC that has one (from inspection),
    Hostname and InternalDNS."""
    hardware = (host.get("status") or {}).get("hardware") or {}
    addresses = [{"type": "InternalIP", "address": nic["ip"]} for nic in hardware.get("nics") or [] if nic.get("ip")]
    hostname = hardware.get("hostname") or claim_name
    return [*addresses, {"type": "Hostname", "address": hostname}, {"type": "InternalDNS", "address": hostname}]


def host_view(store: Store, claim: Object | None) -> Object | None:
    """The claimed host as a BareMetalHost-shaped object built from what the claim shows its tenant - the host's
    name and state (the claim's status), its labels, boot MAC and hardware (the claim's HardwareData) - for
    what reads a host without seeing it (a Metal3Machine in HostClaim mode, its data templates); None until the
    claim is bound and its HardwareData made. It has no annotations: the host's stay with the host."""
    status = (claim or {}).get("status") or {}
    bound = status.get("bareMetalHost") or status.get("virtualMachine") or {}
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
        # From a bastion nobody else reconciles the hosts, so this loop does; hosts in another cluster
        # (spec.identityRef) are that cluster's to reconcile.
        hosts = sorted({s.host for s in steps if s.host and s.obj is not None and identity_ref(s.obj) is None
                        and claim_kind(s.obj) == BAREMETAL})
        if hosts:
            reconcile_hosts(store_factory, ironic,
                            [Ref(API, HOST_KIND, name, namespace)
                             for namespace, name in (split_reference(h, "") for h in hosts)],
                            (), 0, concurrency)
        return steps

    def verdict(steps: list[ClaimResult]) -> bool | None:
        if target is None or dry_run or all(_reached(s, target) for s in steps):  # (spelled out for mypy)
            return True
        return False if any(s.error for s in steps) else None

    return wait_until(step, verdict, timeout, sleep=sleep)


def _reached(step: ClaimResult, target: str) -> bool:
    if target == "deleted":
        return step.obj is None
    if target == "bound":
        return bool(step.host) and not step.error
    return step.phase == "provisioned" and step.requeue_after is None and not step.error
