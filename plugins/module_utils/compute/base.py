# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The seam between a HostClaim and what serves it: one interface every class of compute implements.

Upstream's hybrid-cluster design (metal3-docs, hostclaim-multitenancy-and-hybrid-clusters) gives a HostClaim a
``kind`` - the technology that serves it, ``baremetal`` by default - and ``args`` that parameterise it, the way a
PersistentVolumeClaim names its storage class. The HostClaim flow (hostclaims/hostclaim.py) is the same for every
kind - finalizer, the claim's Secrets checked, its HardwareData, its status and conditions, kind changes refused,
release on delete - and asks the class its ``spec.kind`` names (compute/registry.py) for the rest:

- ``admit``: what of a claim's spec the class refuses (admission, and the reconcile's own check on a cluster);
- ``refusals``: what it will not serve now, which only the reconcile can tell (where a URL's host resolves to);
- ``session``: reach where its compute lives (another cluster's hosts), for one step;
- ``bind``: what serves the claim - the one it is bound to, or one bound (or made) now - or why nothing does yet;
- ``configure``: bring it to the claim's spec (image, data, power, reboot) and observe it, in a BareMetalHost's
  shape (the claim's status and HardwareData are read from that shape);
- ``failure``: what a failure of the class means for the claim (the claim says so), or None to raise it;
- ``may_hold`` and ``release``: on delete, every class releases what of it may serve the claim, whatever the
  claim's spec.kind says now;
- ``hosts_to_reconcile``: the BareMetalHosts whose own reconcile moves a claim on (a bastion, where no operator
  runs, steps them itself).

A class is made for one reconcile of one claim, from the claim (``ClaimState``) and what the controller gives
the classes (``Services``: the outbound policy, a driver by kind).
"""
from __future__ import annotations

import contextlib
import copy
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, ContextManager, Iterator, Literal, Mapping, cast

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid, NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref, now, secret_values
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy, Refused
from ansible_collections.metal3.baremetal.plugins.module_utils.core.retry import retry_on_conflict
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.admission import Problem
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import REBOOT_ANNOTATION
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store

if TYPE_CHECKING:
    from ansible_collections.metal3.baremetal.plugins.module_utils.api.types import HostClaim, HostClaimSpec

DEFAULT_KIND = "baremetal"  # a claim without spec.kind (upstream's default)
# The HostClaim's conditions a class may set through the flow: upstream's Ready, and ours on a claim whose hosts
# are in another store (spec.identityRef): whether that store answers.
READY_CONDITION = "Ready"
HOSTS_REACHABLE = "HostsReachable"
UNREACHABLE_WAIT = 10.0  # what serves the claim does not answer: it looks again then
# The claim's data: Secrets of its own namespace, which a class gives what serves the claim.
DataField = Literal["userData", "metaData", "networkData"]
DATA_FIELDS: tuple[DataField, ...] = ("userData", "metaData", "networkData")


def claim_kind(claim: dict[str, Any]) -> str:
    """The class of compute that serves the claim: ``spec.kind``, ``baremetal`` when none is given."""
    return str((claim.get("spec") or {}).get("kind") or DEFAULT_KIND)


def image_urls(image: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, URL) of what is fetched for a claim's image: its URL, and its checksum file's when the checksum is
    a URL. The controller fetches them (a virtual machine's image), or the Ironic it runs (a host's)."""
    urls = [("spec.image.url", str(image.get("url") or ""))]
    checksum = str(image.get("checksum") or "")
    if "://" in checksum:
        urls.append(("spec.image.checksum", checksum))
    return urls


def image_url_problems(image: Any) -> Iterator[Problem]:
    """A claim's image and checksum URLs http or https, for a class whose controller fetches them itself (a
    virtual machine's; admission: the hosts they name are the reconcile's to check, with the operator's policy)."""
    if not isinstance(image, dict):
        return
    for field_name, url in image_urls(image):
        if not url:
            continue
        try:
            OutboundPolicy().check_scheme(url, field_name)
        except Refused as e:
            yield field_name, str(e).removeprefix(f"{field_name}: ")


@dataclass(frozen=True)
class Services:
    """What the controller gives its classes of compute: which of its own hosts a URL a tenant wrote may name
    (``outbound``), and each class's driver by kind (libvirt: its hypervisor; a kind without one: absent)."""

    outbound: OutboundPolicy = field(default_factory=OutboundPolicy)
    drivers: Mapping[str, Any] = field(default_factory=dict)


class ClaimState:
    """One HostClaim as a reconcile holds it: its store (its Secrets, its HardwareData), the object as last read or
    written (``obj``: every write through here replaces it), and whether this reconcile changed anything."""

    def __init__(self, store: Store, obj: Object, dry_run: bool) -> None:
        self.store, self.obj, self.dry_run = store, obj, dry_run
        self.ref = Ref.of(obj)
        self.spec: HostClaimSpec = cast("HostClaim", obj).get("spec") or cast("HostClaimSpec", {})
        self.changed = False

    @property
    def claim_id(self) -> str:
        return f"{self.ref.namespace}/{self.ref.name}"

    @property
    def uid(self) -> str:
        return str(self.obj["metadata"].get("uid") or "")

    @property
    def deploying(self) -> bool:
        """Whether the claim asks for a workload to be deployed (an image or a custom deploy)."""
        return bool(self.spec.get("image") or self.spec.get("customDeploy"))

    def secret(self, name: str, field_name: str) -> dict[str, str]:
        """The values of the claim's Secret ``name`` (its own namespace only); Invalid naming ``field_name``."""
        try:
            return secret_values(self.store.get(Ref("v1", "Secret", name, self.ref.namespace)))
        except NotFound:
            raise Invalid(f"{field_name}: Secret {self.ref.namespace}/{name} not found") from None

    def update_status(self, change: Callable[[dict[str, Any]], None]) -> None:
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

        self.obj = retry_on_conflict(write)

    @property
    def power_holds(self) -> dict[str, str]:
        """The claim's ``reboot.metal3.io/<key>`` annotations: as on a BareMetalHost, each holds what serves the
        claim powered off until it is removed (CAPM3's remediation powers a machine off so)."""
        annotations = self.obj["metadata"].get("annotations") or {}
        return {key: str(value) for key, value in annotations.items() if key.startswith(REBOOT_ANNOTATION + "/")}

    def forget_reboot_request(self) -> None:
        """A reboot asked on the claim is done (or handed on to what serves it): the claim forgets it, so that one
        request is one reboot."""
        if REBOOT_ANNOTATION not in (self.obj["metadata"].get("annotations") or {}):
            return
        self.obj = self.store.patch(self.ref, {"metadata": {"annotations": {REBOOT_ANNOTATION: None}}},
                                    dry_run=self.dry_run)
        self.changed = True


@dataclass
class Bound:
    """What serves the claim: the object itself (a host), or the class's own record of it (``obj``: what the class
    needs to configure it)."""

    obj: Any


@dataclass
class Pending:
    """Nothing serves the claim yet: why (``why``; '' while the claim's data is refused), the reasons of its
    Associated and Ready conditions, when to look again, and what to watch meanwhile."""

    why: str
    reason: str
    ready_reason: str
    requeue: float | None
    waits_on: list[Ref] = field(default_factory=list)


@dataclass
class Observed:
    """What serves the claim after ``configure``, in a BareMetalHost's shape (name, labels, boot MAC, state, power,
    hardware); the claim's data fields refused (by field); what the claim's message says; whether it stays as it
    is (else the claim looks again soon); whether its hardware is shown (its HardwareData)."""

    host: Object
    refusals: dict[str, str]
    message: str
    settled: bool = True
    show_hardware: bool = True


@dataclass
class Waiting:
    """A release under way: why it is not done yet, and what serves the claim meanwhile (a host), if anything."""

    why: str
    host: Object | None = None


@dataclass
class Stuck:
    """The claim cannot go on: its ``condition`` False with ``reason`` and ``why``, the claim's ``phase``; with
    ``requeue`` it looks again then (what serves it does not answer), else ``why`` is an error until the claim
    (or the world) changes."""

    phase: str
    condition: str
    reason: str
    why: str
    requeue: float | None = None


class ComputeClass(ABC):
    """A class of compute: what serves the HostClaims whose ``spec.kind`` is ``kind``. Made for one reconcile of one
    claim (``claim``), with what the controller gives (``services``)."""

    kind: ClassVar[str]
    bound_field: ClassVar[str]  # the claim's status field that names what serves it, once bound
    noun: ClassVar[str]  # what serves a claim, in messages ("host", "virtual machine")
    associated_reason: ClassVar[str]  # the reason of the claim's Associated condition once bound

    def __init__(self, claim: ClaimState, services: Services) -> None:
        self.claim, self.services = claim, services

    # -- admission -----------------------------------------------------------------------------------------
    @classmethod
    @abstractmethod
    def admit(cls, spec: dict[str, Any]) -> Iterator[Problem]:
        """What of a claim's spec (its args, and fields the class cannot serve) this class refuses."""

    # -- serving -------------------------------------------------------------------------------------------
    def session(self) -> ContextManager[Any]:
        """Reach where the class's compute lives for one step (raise what ``failure`` reads if it cannot)."""
        return contextlib.nullcontext()

    @property
    def elsewhere(self) -> bool:
        """Whether what serves the claim lives in another store (the claim says whether that store answers)."""
        return False

    def refusals(self) -> dict[str, str]:
        """What of the claim's spec this class will not serve now, by field, beyond admission (the operator's
        outbound policy, say): the claim then binds nothing and changes nothing of what serves it, and says why."""
        return {}

    @abstractmethod
    def bind(self, refusals: dict[str, str]) -> Bound | Pending:
        """What serves the claim: what it is bound to, or something bound (or made) for it now unless its data are
        refused (``refusals``); else why nothing does yet. Invalid (or what ``failure`` reads) when the class
        cannot serve the claim's spec."""

    @abstractmethod
    def configure(self, bound: Bound, refusals: dict[str, str]) -> Observed:
        """Bring what serves the claim to its spec - the image and data, power as ``poweredOn`` asks, a reboot
        requested (which the claim then forgets) - and observe it."""

    def failure(self, error: Exception) -> Stuck | None:
        """What ``error``, raised while this class served or released the claim, means for the claim; None: it is
        not the claim's to show (raised on)."""
        return None

    # -- release -------------------------------------------------------------------------------------------
    @abstractmethod
    def may_hold(self) -> bool:
        """Whether anything of this class may serve the (deleted) claim, from the claim alone: its status names
        it, or the class has a way to find one it made."""

    @abstractmethod
    def release(self) -> Waiting | None:
        """Release what of this class serves the deleted claim, whatever the claim's spec.kind says now (only what
        it made or holds); None once nothing does."""

    # -- bastions ------------------------------------------------------------------------------------------
    @classmethod
    def hosts_to_reconcile(cls, claim: Object | None, served: str, namespace: str) -> list[Ref]:
        """The BareMetalHosts whose own reconcile moves on a claim served by ``served`` (``<namespace>/<name>``,
        ``namespace`` when it names none): what a bastion, where no operator runs, steps itself. None for compute
        that changes as it is asked."""
        return []
