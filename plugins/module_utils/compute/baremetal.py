# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The bare-metal class of compute: what serves a HostClaim whose ``spec.kind`` is ``baremetal`` (the default), as
baremetal-operator's HostClaim controller, completed - a BareMetalHost its tenant never sees, provisioned by the
host's own reconcile (hosts/baremetalhost.py) through the Provisioner seam (core/provisioner.py, Ironic's in
ironic/provisioner.py).

Bind: the claim given its identity as a host's consumer, then a host - one whose consumerRef already names the
claim, else a free one chosen among the namespaces whose HostDeployPolicies admit the claim's namespace
(hostSelector, failureDomain preferred), claimed by the resourceVersion-checked update every claimer uses
(hosts/claim.py). Configure: the claim's secrets copied into the host's namespace (a host reads Secrets of its own
namespace only; the copies are the host's, named after it), then the host's spec: image, customDeploy, user data,
meta data, network data, ``online`` from ``poweredOn``, a ``reboot.metal3.io`` request. Release: the host's spec
cleared and powered off, the host deprovisioned (cleaned as the host's automatedCleaningMode says: the
infrastructure's decision, which no tenant can turn off), the copies deleted, the host freed for the next claim of
any tenant.

The hosts may be in another cluster (``spec.identityRef``, hosts/remote.py): each step reaches it through
``session``, and a store that does not answer (or answers what no Kubernetes API serves) is what the claim says.
"""
from __future__ import annotations

import contextlib
import copy
import hashlib
import re
import urllib.parse
import uuid
from typing import TYPE_CHECKING, Any, Iterator, cast

from ansible_collections.metal3.baremetal.plugins.module_utils.compute.base import (
    DATA_FIELDS,
    HOSTS_REACHABLE,
    UNREACHABLE_WAIT,
    Bound,
    ClaimState,
    ComputeClass,
    Observed,
    Pending,
    Services,
    Stuck,
    Waiting,
    image_urls,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import NotFound, NotHeld
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import (
    Object,
    Ref,
    controlled_by,
    now,
    split_reference,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import Refused
from ansible_collections.metal3.baremetal.plugins.module_utils.core.retry import retry_on_conflict
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.admission import Problem
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (
    API,
    PROVISIONED,
    REBOOT_ANNOTATION,
    STABLE_STATES,
    host_state,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (
    KIND as HOST_KIND,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.claim import (
    CLAIM_ID_ANNOTATION,
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
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store

if TYPE_CHECKING:
    from ansible_collections.metal3.baremetal.plugins.module_utils.api.types import (
        BareMetalHost,
        BareMetalHostSpec,
        HostClaim,
        HostClaimSpec,
    )

BAREMETAL = "baremetal"
POLICY_KIND = "HostDeployPolicy"
# On a copy of a claim's Secret in the host's namespace: the claim (<namespace>/<name>) it was copied for.
COPY_ANNOTATION = "metal3.baremetal/hostclaim"
# The suffix of the copies' names (<host>-<suffix>), by the claim's data field.
COPY_SUFFIXES = {"userData": "claim-user-data", "metaData": "claim-meta-data", "networkData": "claim-network-data"}
# Upstream's reasons (apis/metal3.io/v1alpha1/hostclaim_types.go).
HOST_ASSOCIATED = "BareMetalHostAssociated"
MISSING_HOST = "MissingBareMetalHost"
NO_HOST = "NoBareMetalHost"
# Ours, on a claim whose hosts are in another store (spec.identityRef).
HOSTS_UNREACHABLE, REMOTE_REFUSED = "HostsUnreachable", "IdentityRefInvalid"
NO_HOST_WAIT = 10.0  # a pending claim looks again (upstream: 30 s)


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
    selector = (cast("HostClaim", claim).get("spec") or cast("HostClaimSpec", {})).get("hostSelector") or {}
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


# -- the claim's data beside the host --------------------------------------------------------------------------

def copy_name(host_name: str, field: str) -> str:
    """The name of the copy of a claim's ``field`` Secret beside the host: ``<host>-claim-user-data``, the host's
    name shortened with a digest of it when the whole would pass 253 characters."""
    suffix = COPY_SUFFIXES[field]
    if len(host_name) + 1 + len(suffix) <= 253:
        return f"{host_name}-{suffix}"
    digest = hashlib.sha256(host_name.encode()).hexdigest()[:10]
    return f"{host_name[:253 - len(suffix) - 12].rstrip('-.')}-{digest}-{suffix}"


# -- the class -------------------------------------------------------------------------------------------------

# A claim's power holds (reboot.metal3.io/<key>) on its host: under keys of their own, so that the claim adds and
# removes its own only (an admin's hold on the host stays as it is). One claim holds a host at a time.
HOST_HOLD_PREFIX = REBOOT_ANNOTATION + "/hostclaim-"


def _host_hold(key: str) -> str:
    return HOST_HOLD_PREFIX + hashlib.sha256(key.encode()).hexdigest()[:16]


def _url_host(url: str) -> str:
    """The host ``url`` names; '' when it is no URL (admission says so) or names none."""
    try:
        return urllib.parse.urlsplit(url).hostname or ""
    except ValueError:
        return ""


def _without_holds(annotations: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in annotations.items() if not key.startswith(HOST_HOLD_PREFIX)}


class BareMetal(ComputeClass):
    """Claims served by BareMetalHosts: of the claim's store, or of the store its spec.identityRef names
    (``hosts``, reached for one step by ``session``)."""

    kind = BAREMETAL
    bound_field = "bareMetalHost"
    noun = "host"
    associated_reason = HOST_ASSOCIATED

    def __init__(self, claim: ClaimState, services: Services) -> None:
        super().__init__(claim, services)
        self.hosts: Store = claim.store  # the hosts' store, for the step under way (``session``)
        self.admitting: list[str] = []  # the namespaces whose hosts the claim may bind, once looked up

    @classmethod
    def admit(cls, spec: dict[str, Any]) -> Iterator[Problem]:
        if spec.get("args"):
            yield "spec.args", f"kind {BAREMETAL} takes no args"

    def refusals(self) -> dict[str, str]:
        """The hosts the image's URLs name, through the operator's outbound policy: the Ironic the controller runs
        checks and fetches them with the controller's network position, so they must not be the controller's own
        (loopback, link-local). Their schemes are upstream's webhook's to admit (ftp and oci among them)."""
        try:
            for field_name, url in image_urls(self.claim.spec.get("image") or {}):
                host = _url_host(url)
                if host:
                    self.services.outbound.check_host(url, host, field_name)
        except Refused as e:
            return {"image": str(e)}
        return {}

    # -- reaching the hosts ------------------------------------------------------------------------------------
    @property
    def elsewhere(self) -> bool:
        return identity_ref(self.claim.obj) is not None

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """The hosts' store for one step: the claim's own, or the cluster its identityRef names (closed after)."""
        if identity_ref(self.claim.obj) is None:
            yield
            return
        with open_remote_hosts(self.claim.store, self.claim.obj, self.services.outbound) as hosts:
            self.hosts = hosts
            yield

    def failure(self, error: Exception) -> Stuck | None:
        """The hosts' cluster cannot be reached (or the identityRef used), or it answered objects of a shape no
        Kubernetes API serves (the tenant chose it): what the claim has stays, and it says so."""
        if isinstance(error, HostsUnreachable):
            return Stuck("unreachable", HOSTS_REACHABLE, HOSTS_UNREACHABLE, str(error), UNREACHABLE_WAIT)
        if isinstance(error, RemoteRefused):
            return Stuck("unreachable", HOSTS_REACHABLE, REMOTE_REFUSED, str(error), None)
        unreadable = (KeyError, TypeError, AttributeError, ValueError, IndexError)
        if self.hosts is not self.claim.store and isinstance(error, unreadable):
            return Stuck("unreachable", HOSTS_REACHABLE, HOSTS_UNREACHABLE,
                         f"spec.identityRef: the hosts' cluster at {getattr(self.hosts, 'host', '?')} answered "
                         f"objects this controller cannot read ({type(error).__name__})", UNREACHABLE_WAIT)
        return None

    # -- bind ------------------------------------------------------------------------------------------------
    def bind(self, refusals: dict[str, str]) -> Bound | Pending:
        self._ensure_identity()
        host, waiting = self._bound_host()
        if host is None and not refusals:
            host, waiting = self._bind()
        if host is None:
            # A host freed, added or relabelled where the claim is admitted may serve it.
            return Pending(waiting, MISSING_HOST if waiting.startswith("host ") else NO_HOST, NO_HOST, NO_HOST_WAIT,
                           [Ref(API, HOST_KIND, "", namespace) for namespace in self.admitting])
        return Bound(host)

    @property
    def consumer(self) -> Consumer:
        return Consumer.of(self.claim.obj)

    def _ensure_identity(self) -> None:
        """Give the claim its identity as a consumer (CLAIM_ID_ANNOTATION), once and before any host is bound: two
        reconciles of one claim meet on the resourceVersion, and the one that loses takes the winner's."""
        known = [self.claim.obj]

        def write() -> Object:
            claim = known.pop() if known else self.claim.store.get(self.claim.ref)
            if CLAIM_ID_ANNOTATION in (claim["metadata"].get("annotations") or {}):
                return claim
            self.claim.changed = True
            return self.claim.store.patch(self.claim.ref, {"metadata": {
                "resourceVersion": claim["metadata"]["resourceVersion"],
                "annotations": {CLAIM_ID_ANNOTATION: str(uuid.uuid4())}}}, dry_run=self.claim.dry_run)

        self.claim.obj = retry_on_conflict(write)

    def _host_ref(self) -> Ref | None:
        bound = (self.claim.obj.get("status") or {}).get(self.bound_field) or {}
        return Ref(API, HOST_KIND, bound["name"], bound["namespace"]) if bound.get("name") else None

    def _bound_host(self) -> tuple[Object | None, str]:
        """The host the claim's status names, if it still holds it; else '' or why it lost it."""
        ref = self._host_ref()
        if ref is None:
            return None, ""
        host = self._bound_host_of(self.claim.obj)
        if host is not None:
            return host, ""
        return None, f"host {ref.namespace}/{ref.name} is gone or no longer held by this claim"

    def _bound_host_of(self, claim: Object) -> Object | None:
        bound = (claim.get("status") or {}).get(self.bound_field) or {}
        if not bound.get("name"):
            return None
        host = self.hosts.get_if_exists(Ref(API, HOST_KIND, bound["name"], bound["namespace"]))
        return host if host is not None and self.consumer.holds(host) else None

    def _bind(self) -> tuple[Object | None, str]:
        """A host for the claim: the one whose consumerRef already names it (a status write lost), else a free
        one of a namespace that admits it."""
        spec, ref = self.claim.spec, self.claim.ref
        namespaces, problems = admitting_namespaces(self.hosts, self.claim.obj)
        self.admitting = namespaces
        if not namespaces:
            where = (spec.get("hostSelector") or {}).get("inNamespace")
            why = f"no HostDeployPolicy{' in ' + where if where else ''} admits namespace {ref.namespace}"
            return None, "; ".join([why, *problems])
        selection = associate(self.hosts, namespaces, self.consumer, spec.get("hostSelector"),
                              spec.get("failureDomain") or None, dry_run=self.claim.dry_run)
        if selection.host is None:
            selector = host_selector(spec.get("hostSelector"))
            return None, (f"no available host matches{' ' + selector if selector else ''} in "
                          f"{', '.join(namespaces)}: {selection.reason}")
        host = selection.host
        self.claim.changed = True
        return self._record_binding(host), ""

    def _record_binding(self, host: Object) -> Object:
        """Write the bound host into the claim's status, onto the claim as this reconcile read it: a reconcile of
        the same claim running meanwhile (a bastion's and the operator's) may have bound another host, and then
        that one stays and this one is freed."""
        bound = {"namespace": host["metadata"]["namespace"], "name": host["metadata"]["name"]}
        known = [self.claim.obj]
        consumer = self.consumer

        def write() -> Object:
            claim = known.pop() if known else self.claim.store.get(self.claim.ref)
            other = self._bound_host_of(claim)
            if other is not None and Ref.of(other) != Ref.of(host):
                self.claim.obj = claim
                with contextlib.suppress(NotHeld, NotFound):
                    update_claimed_host(self.hosts, Ref.of(host), consumer,
                                        lambda target: target["spec"].pop("consumerRef", None), self.claim.dry_run)
                return other
            status = {**(claim.get("status") or {}), self.bound_field: bound, "lastUpdated": now()}
            self.claim.obj = self.claim.store.update_status({**claim, "status": status}, dry_run=self.claim.dry_run)
            return host

        return retry_on_conflict(write)

    # -- configure -------------------------------------------------------------------------------------------
    def configure(self, bound: Bound, refusals: dict[str, str]) -> Observed:
        """The claim's data copied beside the host, then the host's spec; a claim whose data are refused changes
        nothing of the host (and shows no hardware)."""
        host: Object = bound.obj
        copies, refusals = self._copy_data(host, refusals)
        if refusals:
            return Observed(host, refusals, next(iter(refusals.values())), show_hardware=False)
        host = self._set_host_spec(host, copies)
        self.claim.forget_reboot_request()  # the host's now: its own reconcile removes it from the host once done
        state = host_state(host)
        powered_on = (cast("BareMetalHost", host).get("status") or {}).get("poweredOn")
        settled = state in STABLE_STATES and (state == PROVISIONED or not self.claim.deploying) and \
            bool(powered_on) == (bool(self.claim.spec.get("poweredOn")) and not self.claim.power_holds)
        return Observed(host, {}, f"host {host['metadata']['namespace']}/{host['metadata']['name']} is "
                                  f"{state or 'new'}", settled)

    def _copy_data(self, host: Object, refusals: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
        """Copy each of the claim's data Secrets beside the host (made or brought up to date); the copies'
        names by field, and why a field could not be copied."""
        copies: dict[str, str] = {}
        refusals = dict(refusals)
        namespace, claim_id, spec = self.claim.ref.namespace, self.claim.claim_id, self.claim.spec
        host_namespace, host_name = host["metadata"]["namespace"], host["metadata"]["name"]
        host_spec = cast("BareMetalHost", host).get("spec") or cast("BareMetalHostSpec", {})
        for field in DATA_FIELDS:
            ref = spec.get(field)
            if not ref or field in refusals:
                continue
            name = copy_name(host_name, field)
            source = self.claim.store.get_if_exists(Ref("v1", "Secret", ref["name"], namespace))
            if source is None:
                if (host_spec.get(field) or {}).get("name") == name:
                    copies[field] = name  # copied when the host took it: what was deployed stays as it was
                else:
                    refusals[field] = f"spec.{field}: Secret {namespace}/{ref['name']} not found"
                continue
            wanted = {"apiVersion": "v1", "kind": "Secret", "type": source.get("type", "Opaque"),
                      "metadata": {"name": name, "namespace": host_namespace,
                                   "annotations": {COPY_ANNOTATION: claim_id},
                                   "ownerReferences": [{"apiVersion": API, "kind": HOST_KIND, "name": host_name,
                                                        "uid": host["metadata"]["uid"], "controller": True}]},
                      "data": dict(source.get("data") or {})}
            existing = self.hosts.get_if_exists(Ref("v1", "Secret", name, host_namespace))
            if existing is None:
                self.hosts.create(wanted, dry_run=self.claim.dry_run)
                self.claim.changed = True
            elif not controlled_by(existing, host):
                refusals[field] = (f"Secret {host_namespace}/{name} exists and was not made for a claim of host "
                                   f"{host_name}; it is left alone")
                continue
            elif (existing.get("data") or {}) != wanted["data"] or \
                    (existing["metadata"].get("annotations") or {}).get(COPY_ANNOTATION) != claim_id:
                updated = copy.deepcopy(existing)
                updated["data"] = wanted["data"]
                updated["metadata"]["annotations"] = {**(existing["metadata"].get("annotations") or {}),
                                                      COPY_ANNOTATION: claim_id}
                self.hosts.update(updated, dry_run=self.claim.dry_run)
                self.claim.changed = True
            copies[field] = name
        return copies, refusals

    def _set_host_spec(self, host: Object, copies: dict[str, str]) -> Object:
        spec = self.claim.spec
        annotations = self.claim.obj["metadata"].get("annotations") or {}

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
            current = target["metadata"].get("annotations") or {}
            wanted = _without_holds(current)
            wanted.update({_host_hold(key): value for key, value in self.claim.power_holds.items()})
            if REBOOT_ANNOTATION in annotations:
                wanted[REBOOT_ANNOTATION] = annotations[REBOOT_ANNOTATION]
            if wanted != current:
                target["metadata"]["annotations"] = wanted

        written = update_claimed_host(self.hosts, Ref.of(host), self.consumer, change, self.claim.dry_run)
        self.claim.changed = self.claim.changed or written != host
        return written

    # -- release ---------------------------------------------------------------------------------------------
    def may_hold(self) -> bool:
        """A host may hold the claim: its status names one, or it has an identity as a host's consumer (given
        before any host is bound, kept for good)."""
        return self._host_ref() is not None or \
            CLAIM_ID_ANNOTATION in (self.claim.obj["metadata"].get("annotations") or {})

    def release(self) -> Waiting | None:
        host_ref = self._host_ref() or self._holding_host()
        if host_ref is None:
            return None
        host = self.hosts.get_if_exists(host_ref)
        if host is None or not self.consumer.holds(host):
            return None
        waiting = self._release(host)
        return Waiting(waiting, self.hosts.get_if_exists(host_ref)) if waiting else None

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
                if controlled_by(existing, host) and ((existing or {})["metadata"].get("annotations") or {}) \
                        .get(COPY_ANNOTATION) == self.claim.claim_id:
                    with contextlib.suppress(NotFound):
                        self.hosts.delete(copy_ref, dry_run=self.claim.dry_run)

        if _without_holds(host["metadata"].get("annotations") or {}) != (host["metadata"].get("annotations") or {}):
            def drop_holds(target: Object) -> None:  # the claim's workload goes: nothing of it holds the host off
                target["metadata"]["annotations"] = _without_holds(target["metadata"].get("annotations") or {})

            host = update_claimed_host(self.hosts, Ref.of(host), self.consumer, drop_holds, self.claim.dry_run)
        waiting = release_host(self.hosts, Ref.of(host), self.consumer, dry_run=self.claim.dry_run,
                               before_free=delete_copies)
        if not waiting:
            self.claim.changed = True
        return waiting

    # -- bastions --------------------------------------------------------------------------------------------
    @classmethod
    def hosts_to_reconcile(cls, claim: Object | None, served: str, namespace: str) -> list[Ref]:
        """The host: its own reconcile provisions it (hosts in another cluster are that cluster's to reconcile)."""
        if not served or (claim is not None and identity_ref(claim) is not None):
            return []
        host_namespace, name = split_reference(served, namespace)
        return [Ref(API, HOST_KIND, name, host_namespace)]
