# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""IP allocation as level-based reconcile functions, for IPClaim and Cluster API IPAddressClaim.

Each call reads the claim and the world, takes the next steps and says whether
to come back; the ip_claim module, the ipam role and the operator all call it.
The store is the only lock: an address is taken by creating the IPAddress named
after it (``<namePrefix>-<address>``), so two allocators racing for one address
collide on AlreadyExists and the loser moves on to the next free one.
"""
from __future__ import annotations

import contextlib
import copy
import hashlib
import ipaddress
import json
import random
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol, cast, overload

from ansible_collections.metal3.baremetal.plugins.module_utils.api import admission
from ansible_collections.metal3.baremetal.plugins.module_utils.core import pause
from ansible_collections.metal3.baremetal.plugins.module_utils.core.address import Address, address_record
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import (
    AlreadyExists,
    Conflict,
    Invalid,
    NotFound,
    StoreError,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref, now, owner_uids
from ansible_collections.metal3.baremetal.plugins.module_utils.core.reconcile import Result
from ansible_collections.metal3.baremetal.plugins.module_utils.core.retry import retry_on_conflict
from ansible_collections.metal3.baremetal.plugins.module_utils.core.selector import label_value
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.inuse import InUse
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.pools import Pool, check_update, parse_pool
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.followed import Followed
from ansible_collections.metal3.baremetal.plugins.module_utils.store.reservation import (
    Claimer,
    Marking,
    Moved,
    State,
    mark_claim,
    reserve,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.store.writes import (
    ensure_finalizer,
    release_finalized,
    remove_finalizer,
    set_condition,
    standing,
)

if TYPE_CHECKING:
    from ansible_collections.metal3.baremetal.plugins.module_utils.api.types import (
        IPAddress,
        IPAddressSpec,
        IPClaim,
        IPPool,
    )

IPAM_API = "ipam.metal3.io/v1alpha1"
CAPI_IPAM_API = "ipam.cluster.x-k8s.io/v1beta2"  # the Cluster API IPAM contract; v1beta1 reads the same
POOL_FINALIZER = "ippool.ipam.metal3.io"
CLAIM_FINALIZER = "ipclaim.ipam.metal3.io"
ADDRESS_FINALIZER = "ipaddress.ipam.metal3.io"
CAPI_CLAIM_FINALIZER = "ipam.metal3.io/ipaddressclaim"
CAPI_ADDRESS_FINALIZER = "ipam.metal3.io/ipaddress"
REQUESTED_ADDRESS_ANNOTATION = "ipAddress"
# The address a claim holds or is taking, written on it before its IPAddress is created.
ADDRESS_ANNOTATION = "ipam.metal3.io/ip-address"
POOL_LABEL = "ipam.metal3.io/pool-name"
CLAIM_LABEL = "ipam.metal3.io/claim-name"
# On an IPPool: the other namespaces whose claims it serves, comma-separated, or "*" for every namespace.
# A pool serves the claims of its own namespace only without it.
ALLOWED_NAMESPACES_ANNOTATION = "ipam.metal3.io/allowed-namespaces"

# Labels that choose a pool, as the ELF static-IP provider reads them from a requester.
POOL_NAME_LABEL = "cluster.x-k8s.io/ip-pool-name"
POOL_NAMESPACE_LABEL = "cluster.x-k8s.io/ip-pool-namespace"
POOL_GROUP_LABEL = "cluster.x-k8s.io/ip-pool-group"
NETWORK_NAME_LABEL = "cluster.x-k8s.io/network-name"
DEFAULT_POOL_LABEL = "ippool.cluster.x-k8s.io/is-default"
DEFAULT_POOL_NAMESPACE = "default"

# How long a claim or pool that waits (for a pool to appear, for its claims to go) waits before looking again.
WAITING_REQUEUE = 10.0

# Upstream's error strings, written to the claim's status.
EXHAUSTED = "Exhausted IP Pools"
PRE_ALLOCATED_OUT_OF_BOUNDS = "Pre-allocated IP out of bounds"
REQUESTED_NOT_AVAILABLE = "Requested IP not available"
CONFLICTING_REQUEST = "PreAllocation and requested ip address are conflicting"
# The Ready condition's reasons in the Cluster API IPAM contract (v1beta2 wants one on every condition).
READY_REASON, ALLOCATION_FAILED, POOL_EXHAUSTED, POOL_NOT_READY = "Ready", "AllocationFailed", "PoolExhausted", \
    "PoolNotReady"


def invalid_annotation(requested: str, why: str = "not a valid IP address") -> str:
    """Upstream's message for an ipAddress annotation that cannot be honoured (Go's %q quoting)."""
    return f"Invalid ipAddress annotation {json.dumps(requested, ensure_ascii=False)}: {why}"


@dataclass
class Allocation(Result):
    """What a reconcile of a claim came to (``obj``: the claim): the address, or why there is none yet. A claim
    that waits (for a pool, for other finalizers) asks to be looked at again after WAITING_REQUEUE."""

    address: Object | None = None
    error: str | None = None
    waiting: str | None = None
    released: bool = False

    def __post_init__(self) -> None:
        if self.waiting is not None and self.requeue_after is None:
            self.requeue_after = WAITING_REQUEUE
        self.message = self.message or self.error or self.waiting or ""

    def summary(self) -> dict[str, Any]:
        """The held address as the one record (core/address.py), its keys empty when none is held."""
        return address_record(Address.of(self.address) if self.address else None)


class StatusWriter(Protocol):
    """A claim kind's status write: the address it holds (or the error, or what it waits for); ``confirming``
    writes even an unchanged status, to learn whether the claim still stands (``_write_claim_status``)."""

    def __call__(self, address: Object | None, error: str | None, waiting: str | None,
                 confirming: bool = False) -> Object: ...


@dataclass
class _Claim:
    """What allocation needs of either claim kind."""

    obj: Object
    kind: str
    finalizer: str
    pool: Ref | None
    requested: str | None = None
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.obj["metadata"]["namespace"])

    @property
    def ref(self) -> Ref:
        return Ref.of(self.obj)


@overload
def _record(store: Store, pool_ref: Ref, changes: dict[str, str | None], dry_run: bool,
            also: dict[str, Any] | None = None, version: None = None) -> Object: ...


@overload
def _record(store: Store, pool_ref: Ref, changes: dict[str, str | None], dry_run: bool,
            also: dict[str, Any] | None = None, version: str | None = None) -> Object | None: ...


def _record(store: Store, pool_ref: Ref, changes: dict[str, str | None], dry_run: bool,
            also: dict[str, Any] | None = None, version: str | None = None) -> Object | None:
    """Write claims' addresses into (None: out of) the pool's allocations, the allocator's index.

    A merge patch of the claims' own keys, with no read before it. The index is a hint (the IPAddress named
    after an address is what makes it taken): a key two namespaces' claims share, or one a racing release
    drops, costs a later claimer one lost create, never a duplicate; the pool's reconcile rebuilds it from the
    IPAddresses. With ``version``, only onto the pool at that resourceVersion, else not at all (None): a
    claimer's hint is dropped when the pool is busy, rather than queue up its writers on the API server, which
    retries an unconditional patch of one object until it lands.
    """
    patch: Object = {"status": {"indexes": dict(changes), "allocations": dict(changes), "lastUpdated": now(),
                                **(also or {})}}
    if version is not None:
        patch["metadata"] = {"resourceVersion": version}
    try:
        return store.patch_status(pool_ref, patch, dry_run=dry_run)
    except Conflict:
        if version is None:
            raise
        return None


def _allocations(pool_obj: Object) -> dict[str, str]:
    """A pool's allocations (claim name: address): upstream's ``indexes``, which this collection's users also
    read as ``allocations``."""
    status = cast("IPPool", pool_obj).get("status") or {}
    return dict(status.get("indexes") or status.get("allocations") or {})


# -- pool selection -----------------------------------------------------------------------------

def serves(pool_obj: Object, namespace: str) -> bool:
    """Whether a pool may hand out addresses to the claims of ``namespace``: its own, or the ones its
    ALLOWED_NAMESPACES_ANNOTATION lists ("*" for all). Without this any namespace could drain any pool."""
    if pool_obj["metadata"]["namespace"] == namespace:
        return True
    listed = (pool_obj["metadata"].get("annotations") or {}).get(ALLOWED_NAMESPACES_ANNOTATION) or ""
    allowed = {n.strip() for n in listed.split(",")}
    return "*" in allowed or namespace in allowed


def _refusal(pool_obj: Object, namespace: str) -> str | None:
    if serves(pool_obj, namespace):
        return None
    metadata = pool_obj["metadata"]
    return (f"IPPool {metadata['namespace']}/{metadata['name']} does not serve namespace {namespace}: its "
            f"{ALLOWED_NAMESPACES_ANNOTATION} annotation must list {namespace} (or \"*\") to serve claims of it")


def select_pool(store: Store, namespace: str, labels: dict[str, str]) -> Ref | None:
    """The pool a requester's labels name, the way the ELF static-IP provider chooses it: in the namespace
    the labels name (the requester's by default), else in ``default``.

    A pool of another namespace that does not serve the requester's is passed over for one that does; when
    none does, the first found is returned, so the claim is refused with a message that names it.
    """
    refused: Ref | None = None
    for pool_obj in _pools_named_by(store, namespace, labels):
        if serves(pool_obj, namespace):
            return Ref.of(pool_obj)
        refused = refused or Ref.of(pool_obj)
    return refused


def _pools_named_by(store: Store, namespace: str, labels: dict[str, str]) -> Iterator[Object]:
    """The pools the labels name, namespace by namespace: lazily, as most claims stop at the first."""
    for pool_namespace in _selection_namespaces(namespace, labels):
        if labels.get(POOL_NAME_LABEL):
            pool_obj = store.get_if_exists(Ref(IPAM_API, "IPPool", labels[POOL_NAME_LABEL], pool_namespace))
            if pool_obj is not None:
                yield pool_obj
            continue
        wanted = {k: labels[k] for k in (POOL_GROUP_LABEL, NETWORK_NAME_LABEL) if labels.get(k)}
        selector = ",".join(f"{k}={v}" for k, v in sorted((wanted or {DEFAULT_POOL_LABEL: "true"}).items()))
        yield from store.list(IPAM_API, "IPPool", pool_namespace, selector)


def _selection_namespaces(namespace: str, labels: dict[str, str]) -> list[str]:
    """Where the pools a requester's labels name are looked for, in order."""
    return list(dict.fromkeys([labels.get(POOL_NAMESPACE_LABEL) or namespace, DEFAULT_POOL_NAMESPACE]))


def _describe_selection(labels: dict[str, str]) -> str:
    selection = (POOL_NAME_LABEL, POOL_NAMESPACE_LABEL, POOL_GROUP_LABEL, NETWORK_NAME_LABEL)
    chosen = {k: v for k, v in labels.items() if k in selection}
    if not chosen:
        return f"no IPPool labelled {DEFAULT_POOL_LABEL}=true"
    return "no IPPool matches " + ", ".join(f"{k}={v}" for k, v in sorted(chosen.items()))


# -- allocation -----------------------------------------------------------------------------------

def _owned_by(address: Object, claim: _Claim) -> bool:
    owner = cast("IPAddress", address)["spec"].get("claim") or {}
    return owner.get("name") == claim.name and owner.get("kind", claim.kind) == claim.kind \
        and (owner.get("namespace") or address["metadata"]["namespace"]) == claim.namespace


def _reserved_address(claim: _Claim) -> str | None:
    return (claim.obj["metadata"].get("annotations") or {}).get(ADDRESS_ANNOTATION)


def _may_own(claim: _Claim) -> bool:
    """Whether the claim may own an IPAddress: its annotation names one (an address is never created for a
    claim before that), or its status does (an annotation lost to a replace of the whole object). A new
    claim has neither, so its first reconcile costs no list."""
    status = claim.obj.get("status") or {}
    return _reserved_address(claim) is not None or bool(status.get("address") or status.get("addressRef"))


def _held_address(store: Store, claim: _Claim, pool: Pool, pool_namespace: str) -> Object | None:
    """The IPAddress the claim holds, found by the address its annotation reserves: a consistent GET, never a
    list (a list by label costs a scan, and on kube-apiserver up to 100 ms waiting for its watch cache)."""
    reserved = _reserved_address(claim)
    if not reserved:
        return None
    try:
        address = store.get(Ref(IPAM_API, "IPAddress", pool.address_name(reserved), pool_namespace))
    except NotFound:
        return None
    return address if _owned_by(address, claim) else None


def _address_object(pool_obj: Object, pool: Pool, claim: _Claim, address: str) -> Object:
    entry = pool.entry_of(address)
    metadata: dict[str, Any] = {
        "name": pool.address_name(address),
        "namespace": pool_obj["metadata"]["namespace"],
        "labels": {**claim.labels, POOL_LABEL: label_value(pool.name), CLAIM_LABEL: label_value(claim.name)},
        "finalizers": [ADDRESS_FINALIZER],
        "ownerReferences": [{"apiVersion": IPAM_API, "kind": "IPPool", "name": pool.name,
                             "uid": pool_obj["metadata"]["uid"]}],
    }
    if claim.namespace == pool_obj["metadata"]["namespace"] and claim.obj["metadata"].get("uid"):
        metadata["ownerReferences"].append({"apiVersion": claim.obj["apiVersion"], "kind": claim.kind,
                                            "name": claim.name, "uid": claim.obj["metadata"]["uid"]})
    spec: dict[str, Any] = {
        "address": address,
        "pool": {"apiVersion": IPAM_API, "kind": "IPPool", "name": pool.name,
                 "namespace": pool_obj["metadata"]["namespace"]},
        "claim": {"apiVersion": claim.obj["apiVersion"], "kind": claim.kind, "name": claim.name,
                  "namespace": claim.namespace},
        "prefix": entry.prefix if entry else None,
    }
    if entry and entry.gateway:
        spec["gateway"] = entry.gateway
    if entry and entry.dns_servers:
        spec["dnsServers"] = list(entry.dns_servers)
    spec = {k: v for k, v in spec.items() if v is not None}
    return {"apiVersion": IPAM_API, "kind": "IPAddress", "metadata": metadata, "spec": spec}


# The widest window of free addresses a claimer that keeps losing spreads over.
SPREAD_WINDOW = 64
# A claimer that follows a pool's addresses (see _followed_addresses): the window its last allocation from it
# ended with, so that one of a herd starts the next one spread out, and one alone narrows back to in order. Kept
# per view (one namespace's addresses of one pool name) with the uid of the pool it was learnt from: a pool of
# that name made again starts in order, as a pool of the same name in another namespace does.
_SPREAD: weakref.WeakKeyDictionary[Followed, tuple[str, int]] = weakref.WeakKeyDictionary()


def _followed_addresses(store: Store, pool_obj: Object) -> Followed | None:
    """The pool's IPAddresses as the backend keeps them live, on kube-apiserver listed once per process and
    watched, as upstream's controller sees them from its cache: there claimers see each other's addresses with
    no read and no write of the pool. None on a backend that offers no live view (the local store, where every
    write is serialised anyway): there they see each other through the pool's index, written before each create.
    """
    return store.follow(IPAM_API, "IPAddress", pool_obj["metadata"]["namespace"],
                        f"{POOL_LABEL}={label_value(pool_obj['metadata']['name'])}")


class _Candidates:
    """The addresses a claim may take, in the pool's order: the one it asks for, or the next free ones.

    Each claimer writes the address it goes for into the pool's index before it creates it, and one that lost
    an address reads the index again: the addresses its racers went for meanwhile are there. Claimers that read
    one index at one moment all want its first free address. One whose hint finds the pool written since its read
    (by another claimer: it is one of a herd) passes that address by and picks at random among the next
    SPREAD_WINDOW free ones, before any create; otherwise, once a claimer has lost twice, it spreads out over a
    window of the next free ones that doubles with each further loss, so that a herd of them does not take
    turns losing every address in order. A claimer alone never loses, and takes addresses in order; one that
    read an index which had not caught up with one address still takes the next.
    """

    def __init__(self, store: Store, pool_obj: Object, pool: Pool, claim: _Claim, view: Followed | None) -> None:
        self.store, self.pool_obj, self.pool, self.view = store, pool_obj, pool, view
        self.claim_name = claim.name
        self.version: str | None = pool_obj["metadata"].get("resourceVersion")  # of the index as last read
        self.seen = view.mark() if view is not None else 0  # the view's changes read so far
        self.in_use = InUse.of(pool.offsets_of(self._others(pool_obj)))
        self.pool_uid = str(pool_obj["metadata"].get("uid") or "")
        learnt = _SPREAD.get(view) if view is not None else None
        self.spread = learnt[1] if learnt is not None and learnt[0] == self.pool_uid else 1
        self.reserved_offsets = set(pool.reserved_offsets())
        self.start = random.randrange(pool.size) if pool.strategy == "random" and pool.size else 0
        self.losses = 0
        self.stale_losses = 0  # lost to an index behind the IPAddresses, with no other claimer writing it
        # Another claimer wrote the index since this one read it: it picks among the next SPREAD_WINDOW free
        # addresses at once, rather than after two losses.
        self.contended = False
        self.lost_addresses: set[str] = set()
        self.refreshed = False
        self.wanted: str | None = None
        self.error = self._refusal(pool.pre_allocations.get(claim.name), claim.requested)

    def _refusal(self, reserved: str | None, requested: str | None) -> str | None:
        """Why the claim cannot have the address it asks for (its preAllocation or its ipAddress annotation), in
        upstream's words; None when it asks for none, or may have it (then ``wanted`` is set)."""
        if requested:
            try:
                requested_ip = ipaddress.ip_address(requested)
            except ValueError:
                return invalid_annotation(requested)
            if reserved and ipaddress.ip_address(reserved) != requested_ip:
                return CONFLICTING_REQUEST
            withheld = self.pool.withheld(requested_ip)
            if withheld:  # ours: a gateway (or an IPv4 broadcast address) is never a claim's address
                return invalid_annotation(requested, f"{withheld}, which is never handed out")
        wanted = reserved or requested
        if not wanted:
            return None
        wanted_ip = ipaddress.ip_address(wanted)
        if self.pool.entry_of(wanted_ip) is None:
            return PRE_ALLOCATED_OUT_OF_BOUNDS if reserved else EXHAUSTED
        if not reserved and any(ipaddress.ip_address(a) == wanted_ip for a in self.pool.pre_allocations.values()):
            return REQUESTED_NOT_AVAILABLE  # another claim's preAllocation
        self.wanted = str(wanted_ip)
        return None

    def lost(self, address: str) -> None:
        """Another claim holds ``address``."""
        if self.wanted:
            self.error = REQUESTED_NOT_AVAILABLE
        offset = self.pool.offset_of(address)
        if offset is not None:
            self.in_use.add(offset)
            if self.pool.strategy == "random":
                # Sequential windows stay at the pool's lowest free addresses, so that the gaps a herd leaves
                # behind are the next claims' first picks.
                self.start = offset
        self.lost_addresses.add(address)
        if self.view is not None:  # the addresses taken meanwhile, as the watch has brought them (those only)
            self.losses += 1
            changed, self.seen = self.view.changed_since(self.seen)
            for taken in self.pool.offsets_of(self._of_pool(changed)):
                self.in_use.add(taken)
            return
        # The index as it is now: with the addresses the claimers racing this one have since written there.
        try:
            fresh = self.store.get(Ref.of(self.pool_obj))
        except NotFound:
            self.losses += 1
            return
        version = fresh["metadata"].get("resourceVersion")
        alone = version is not None and version == self.version
        self.version = version
        for taken in self.pool.offsets_of(self._others(fresh)):
            self.in_use.add(taken)
        if not alone or self.refreshed:
            self.losses += 1
            return
        # No other claimer wrote the index since this one last read (or wrote) it: the loss says the index had
        # not caught up with the pool's IPAddresses (made by a plain apply, or before the index), not that a
        # herd races for its addresses. The claimer goes on in the pool's order, as upstream's sequential
        # allocation does (spreading out here made the outcome a draw); from its second such loss on, with the
        # IPAddresses read once, rather than one create lost for each address the index does not know.
        self.stale_losses += 1
        if self.stale_losses < 2:
            return
        for obj in _pool_addresses(self.store, self.pool_obj):
            offset = self.pool.offset_of(cast("IPAddress", obj)["spec"]["address"])
            if offset is not None:
                self.in_use.add(offset)
        self.refreshed = True

    def _others(self, pool_obj: Object) -> list[str]:
        """The addresses other claims hold: the pool's IPAddresses as followed, else those the index gives them
        (the claim's own key is a pick of an earlier reconcile of it that died before taking it, free for it)."""
        if self.view is not None:
            return self._of_pool(self.view.objects())
        return [address for name, address in _allocations(pool_obj).items() if name != self.claim_name]

    def _of_pool(self, addresses: list[Object]) -> list[str]:
        """The addresses of these IPAddresses that are the pool's."""
        name = self.pool_obj["metadata"]["name"]
        return [a["spec"]["address"] for a in cast("list[IPAddress]", addresses)
                if ((a.get("spec") or cast("IPAddressSpec", {})).get("pool") or {}).get("name") == name
                and "address" in a["spec"]]

    def done(self) -> None:
        """Remember, for the claimer's next allocation from this pool, how spread out a herd made it."""
        if self.view is not None:
            spread = min(self.spread * 2, SPREAD_WINDOW) if self.losses else max(self.spread // 2, 1)
            _SPREAD[self.view] = (self.pool_uid, spread)

    def _free_offsets(self, excluding: set[int] | None = None) -> list[int]:
        """Up to a window of free offsets (1, 1, 2, 4, ... after each loss), the first at or after ``start``."""
        window = SPREAD_WINDOW if self.contended else min(self.spread << max(self.losses - 1, 0), SPREAD_WINDOW)
        found: list[int] = []
        start = self.start
        while len(found) < window:
            offset = self.in_use.first_free(self.pool.size, start, self.reserved_offsets.union(found, excluding or ()))
            if offset is None:
                break
            found.append(offset)
            start = offset + 1 if offset + 1 < self.pool.size else 0
        return found

    def spread_from(self, address: str) -> str:
        """Another of the next free addresses than ``address``, the first free one of an index a herd of claimers
        read at once (``address`` itself when it is the only one, or the claim asks for it)."""
        offset = self.pool.offset_of(address)
        if self.wanted or offset is None:
            return address
        free = self._free_offsets(excluding={offset})
        return str(self.pool.address_at(random.choice(free))[0]) if free else address

    def next(self) -> str | None:
        """The next address to try; None (with ``error`` set) when there is none."""
        if self.error or self.wanted:
            return None if self.error else self.wanted
        while True:
            free = self._free_offsets()
            if free:
                return str(self.pool.address_at(random.choice(free))[0])
            if self.refreshed:
                self.error = EXHAUSTED
                return None
            # The index may hold addresses released behind its back: rebuild it from the IPAddresses once.
            self.in_use = _in_use_from_addresses(self.store, self.pool_obj, self.pool)
            self.refreshed = True


def _reserve(store: Store, claim: _Claim, address: str, dry_run: bool) -> None:
    """Write on the claim (with its finalizer) the address it is about to take, before taking it: the protocol's
    MARK (store/reservation.py), resourceVersion-checked (Conflict)."""
    claim.obj = mark_claim(store, claim.obj, ADDRESS_ANNOTATION, address, claim.finalizer, dry_run)


def _pool_addresses(store: admission.Reader, pool_obj: Object) -> list[Object]:
    return store.list(IPAM_API, "IPAddress", pool_obj["metadata"]["namespace"],
                      f"{POOL_LABEL}={label_value(pool_obj['metadata']['name'])}")


def _in_use_from_addresses(store: Store, pool_obj: Object, pool: Pool) -> InUse:
    offsets = (pool.offset_of(a["spec"]["address"]) for a in cast("list[IPAddress]", _pool_addresses(store, pool_obj)))
    return InUse.of(o for o in offsets if o is not None)


def _owned_addresses(store: Store, claim: _Claim, pool_namespace: str) -> list[Object]:
    """Every IPAddress whose claim is this claim, found by the claim-name label (then checked: the label
    value of a long name is shortened, so two claims may share it)."""
    selector = f"{CLAIM_LABEL}={label_value(claim.name)}"
    return [a for a in store.list(IPAM_API, "IPAddress", pool_namespace, selector) if _owned_by(a, claim)]


def _releasable_addresses(store: Store, claim: _Claim, pool_namespace: str) -> list[Object]:
    """What a deleted claim owns: the list by label, and the addresses its status and its marker name when the
    list missed them. A list may come from a cache (the Ansible Operator's proxy answers lists of watched kinds
    from its informers) that has not seen an address taken a moment before the claim's deletion; a GET of a
    name the cache does not hold goes to the API server. Only what the list missed costs a read."""
    owned = _owned_addresses(store, claim, pool_namespace)
    listed = {a["metadata"]["name"] for a in owned}
    named = {((claim.obj.get("status") or {}).get("address") or {}).get("name")}
    reserved = _reserved_address(claim)
    if reserved and reserved not in {cast("IPAddress", a)["spec"]["address"] for a in owned} and claim.pool:
        pool_obj = store.get_if_exists(claim.pool)
        with contextlib.suppress(Invalid):  # a pool that cannot be parsed names no address
            named.add(parse_pool(pool_obj).address_name(reserved) if pool_obj else None)
    for name in sorted(n for n in named if n and n not in listed):
        address = store.get_if_exists(Ref(IPAM_API, "IPAddress", name, pool_namespace))
        if address is not None and _owned_by(address, claim):
            owned.append(address)
    return owned


def _pool_of(address: Object) -> Ref | None:
    pool = cast("IPAddress", address)["spec"].get("pool") or {}
    if not pool.get("name"):
        return None
    return Ref(IPAM_API, "IPPool", pool["name"], pool.get("namespace") or address["metadata"]["namespace"])


def _release_address(store: Store, claim_name: str, address: Object, dry_run: bool) -> bool:
    """Let one IPAddress go (only the very object given: store/writes.py ``release_finalized``), and forget it in
    its pool's status; whether it went."""
    ref = Ref(IPAM_API, "IPAddress", address["metadata"]["name"], address["metadata"]["namespace"])
    if not release_finalized(store, ref, address["metadata"].get("uid"), ADDRESS_FINALIZER, dry_run):
        return False
    pool_ref = _pool_of(address)
    if pool_ref is not None:
        with contextlib.suppress(NotFound):
            _record(store, pool_ref, {claim_name: None}, dry_run)
    return True


def _name_taken(store: Store, claim: _Claim, pool: Pool, pool_namespace: str, taken: Object, lost: set[str],
                dry_run: bool) -> Object | None:
    """Name in the claim's annotation the address just taken in place of the reserved one.

    Another reconcile of the same claim may meanwhile have named and taken another address: that one stays,
    and ``taken`` goes. So does ``taken`` when the claim went (released) while this reconcile ran: None.
    The claim as this reconcile last wrote it is tried first: its annotation names an address it lost, which
    needs no look (a conflict on the write says the claim moved, and it is read again).
    """
    known: list[Object] = [claim.obj]

    def write() -> Object:
        claim.obj = known.pop() if known else store.get(claim.ref)
        reserved = _reserved_address(claim)
        other = None if reserved in lost else _held_address(store, claim, pool, pool_namespace)
        if other is not None and other["metadata"]["name"] != taken["metadata"]["name"]:
            return other
        _reserve(store, claim, cast("IPAddress", taken)["spec"]["address"], dry_run)
        return taken

    try:
        kept: Object | None = retry_on_conflict(write)
    except NotFound:
        kept = None
    if kept is not taken:
        _release_address(store, claim.name, taken, dry_run)
    return kept


class _Addresses(Claimer[Object, str]):
    """A claim's address, as the reservation protocol (store/reservation.py) takes it: the claim names its first
    pick in ADDRESS_ANNOTATION (once: racing claimers lose many candidates, and each loss must stay cheap), the
    IPAddress named after an address is what takes it, and one taken in place of the one named is named after.
    A claim that moved under a mark is followed; an adopted address is marked onto the claim as read afresh.

    Around the steps, the pool's index (``_record``): each pick is written there before its create, so that the
    claimers that read the index next pass it by instead of racing for it (``_hint``).
    """

    marking = Marking.ONCE
    moved = Moved.FOLLOW

    def __init__(self, store: Store, claim: _Claim, pool_ref: Ref, pool_obj: Object, pool: Pool,
                 dry_run: bool, write_status: StatusWriter) -> None:
        self.store, self.claim, self.pool_ref, self.pool_obj, self.pool = store, claim, pool_ref, pool_obj, pool
        self.dry_run, self.write_status = dry_run, write_status
        self.refusal: str | None = None
        self.view: Followed | None = None
        self.candidates: _Candidates | None = None
        self.indexed: str | None = None  # what the pool's index says of the claim (PREPARE reads it)

    def marker(self) -> str | None:
        return _reserved_address(self.claim)

    def held(self) -> Object | None:
        return _held_address(self.store, self.claim, self.pool, self.pool_ref.namespace)

    def may_own(self) -> bool:
        return _may_own(self.claim)

    def owned(self) -> list[Object]:
        return _owned_addresses(self.store, self.claim, self.pool_ref.namespace)

    def keepable(self, obj: Object) -> bool:
        return _pool_of(obj) == self.pool_ref

    def reported(self, obj: Object) -> bool:
        named = ((self.claim.obj.get("status") or {}).get("address") or {}).get("name")
        return bool(obj["metadata"]["name"] == named)

    def release(self, obj: Object) -> bool:
        return _release_address(self.store, self.claim.name, obj, self.dry_run)

    def reread(self) -> bool:
        self.claim.obj = self.store.get(self.claim.ref)
        return not self.claim.obj["metadata"].get("deletionTimestamp")

    def confirm(self, taken: Object) -> bool:
        """The claim's status written to name ``taken``: a write, resourceVersion-checked against the claim as
        last read or written, even when the status names ``taken`` already (a no-op write then, which moves
        nothing). A read would not do: under the Ansible Operator its proxy answers a GET of a watched kind from
        its informer's cache, which may not show the claim's deletion yet; a write is checked by the API
        server against the claim as it is now (Conflict when it moved, NotFound when it went)."""
        self.claim.obj = self.write_status(taken, None, None, True)
        return not self.claim.obj["metadata"].get("deletionTimestamp")

    def mark(self, candidate: str) -> None:
        _reserve(self.store, self.claim, candidate, self.dry_run)

    def prepare(self) -> bool:
        """The pool serves the claim's namespace (checked before any write to the pool: what a claim already holds
        stays with it), and carries its finalizer."""
        self.refusal = _refusal(self.pool_obj, self.claim.namespace)
        if self.refusal:
            return False
        if POOL_FINALIZER not in (self.pool_obj["metadata"].get("finalizers") or []) \
                and not self.pool_obj["metadata"].get("deletionTimestamp"):
            self.pool_obj = ensure_finalizer(self.store, self.pool_ref, POOL_FINALIZER, self.dry_run)
        self.view = _followed_addresses(self.store, self.pool_obj)
        self.candidates = _Candidates(self.store, self.pool_obj, self.pool, self.claim, self.view)
        # The index as last read: a pick written there by another reconcile of the claim is taken up, not raced.
        self.indexed = _allocations(self.pool_obj).get(self.claim.name)
        return True

    def valid(self, candidate: str) -> bool:
        return self.pool.entry_of(candidate) is not None

    def next(self) -> str | None:
        candidates = self.picks()
        address = candidates.next()
        if address is None:
            if self.indexed is not None:  # a claim that holds no address has no key
                self._hint(None)
            return None
        if self.indexed != address and not self._hint(address) and candidates.losses == 0:
            address = self._picked_meanwhile() or candidates.spread_from(address)
        return address

    def _picked_meanwhile(self) -> str | None:
        """The address another reconcile of this same claim wrote into the index since this one read it (its
        hint lost to that write): taken up, not raced. Spreading away from it, as from a herd of other claims,
        could leave the claim a later address than its first free one when its own reconciles raced. None when
        the write was another claim's."""
        try:
            fresh = self.store.get(self.pool_ref)
        except NotFound:
            return None
        picked = _allocations(fresh).get(self.claim.name)
        if picked is None or picked == self.indexed or not self.valid(picked):
            return None
        self.indexed = picked
        return picked

    def picks(self) -> _Candidates:
        """The candidates PREPARE set up."""
        if self.candidates is None:
            raise RuntimeError("PICK before PREPARE")
        return self.candidates

    def _hint(self, address: str | None) -> bool:
        """Write the claim's pick into the index, onto the pool as last read; False when another claimer wrote
        it since (then this one is one of a herd that read the same index). Claimers that follow the pool's
        addresses need no index."""
        if self.view is not None:
            return True
        candidates = self.picks()
        written = _record(self.store, self.pool_ref, {self.claim.name: address}, self.dry_run,
                          version=candidates.version)
        if written is None:
            candidates.contended = True
            return False
        candidates.version = written["metadata"].get("resourceVersion")
        self.indexed = address
        return True

    def take(self, candidate: str) -> Object:
        return self.store.create(_address_object(self.pool_obj, self.pool, self.claim, candidate),
                                 dry_run=self.dry_run)

    def lookup(self, candidate: str) -> Object | None:
        return self.store.get_if_exists(Ref(IPAM_API, "IPAddress", self.pool.address_name(candidate),
                                            self.pool_obj["metadata"]["namespace"]))

    def owns(self, obj: Object) -> bool:
        return _owned_by(obj, self.claim)

    def lost(self, candidate: str) -> None:
        self.picks().lost(candidate)

    def value(self, obj: Object) -> str:
        return str(cast("IPAddress", obj)["spec"]["address"])

    def name(self, taken: Object) -> Object | None:
        return _name_taken(self.store, self.claim, self.pool, self.pool_ref.namespace, taken,
                           self.picks().lost_addresses, self.dry_run)


def _allocate(store: Store, claim: _Claim, dry_run: bool, write_status: StatusWriter) -> Allocation:
    """The shared steps of both claim kinds, up to an IPAddress held by the claim: its pool found, then the
    reservation protocol (store/reservation.py), which keeps one address per claim whatever point a process dies
    at (a claim with no annotation nor status owns nothing; one whose annotation leads to no address it owns is
    looked up by label before it may take a new one), then the claim's status."""
    if claim.obj["metadata"].get("deletionTimestamp"):
        return Allocation(claim.obj)
    if claim.pool is None:
        waiting = _describe_selection(claim.labels)
        return Allocation(write_status(None, None, waiting), waiting=waiting,
                          waits_on=[Ref(IPAM_API, "IPPool", "", namespace)
                                    for namespace in _selection_namespaces(claim.namespace, claim.labels)])
    try:
        pool_obj = store.get(claim.pool)
    except NotFound:
        waiting = f"IPPool {claim.pool.namespace}/{claim.pool.name} not found"
        return Allocation(write_status(None, None, waiting), waiting=waiting, waits_on=[claim.pool])
    addresses = _Addresses(store, claim, claim.pool, pool_obj, parse_pool(pool_obj), dry_run, write_status)
    outcome = reserve(addresses)
    if outcome.state is State.REFUSED:
        return Allocation(write_status(None, addresses.refusal, None), error=addresses.refusal)
    if outcome.state is State.GOING:
        return Allocation(claim.obj)
    if outcome.state is State.RELEASED:
        return Allocation(None, released=True, changed=True)
    if outcome.state is State.EXHAUSTED:
        error = addresses.picks().error
        # Only a change of the pool can free an address (or the one asked for): the claim waits on it.
        waits_on = [claim.pool] if error in (EXHAUSTED, REQUESTED_NOT_AVAILABLE) else []
        return Allocation(write_status(None, error, None), error=error, waits_on=waits_on)
    held = outcome.holding()
    address = cast("IPAddress", held)["spec"]["address"]
    if outcome.state is State.HELD:
        # A reconcile died before recording it (where claimers record their addresses in the index).
        if not store.follows and (outcome.adopted or _allocations(pool_obj).get(claim.name) != address):
            _record(store, claim.pool, {claim.name: address}, dry_run)
        return Allocation(write_status(held, None, None), address=held, changed=outcome.adopted)
    addresses.picks().done()
    view = addresses.view
    if view is not None and not dry_run:
        view.put(held)  # the claimer's next allocation must not wait for the watch to see this one
    if addresses.indexed != address and (view is None or not view.kept):
        # Whatever the pool's version: the index must catch up with what is taken, or the claimers that read
        # it next all lose this address before they find the next free one. A claimer that runs once (a
        # module's run, an operator's role) records its address there after taking it, for the pool's users;
        # one that follows the pool live leaves the index to the pool's reconcile, and no shared object is
        # written on its way.
        _record(store, claim.pool, {claim.name: address}, dry_run)
    return Allocation(write_status(held, None, None), address=held, changed=True)


def _release(store: Store, claim: _Claim, dry_run: bool) -> Allocation:
    """Upstream's release: the IPAddress goes, then the claim's finalizer, unless another finalizer holds it."""
    finalizers = claim.obj["metadata"].get("finalizers") or []
    others = [f for f in finalizers if f != claim.finalizer]
    if others:
        return Allocation(claim.obj, waiting=f"waiting for finalizers {', '.join(others)}")
    if claim.finalizer not in finalizers:
        return Allocation(claim.obj, released=True)
    pool_namespace = claim.pool.namespace if claim.pool else claim.namespace
    # Every address the claim owns, not only the one it names: a reconcile that died between taking an
    # address and recording it may have left one more. Deletion is rare; a list here is affordable.
    for address in _releasable_addresses(store, claim, pool_namespace):
        _release_address(store, claim.name, address, dry_run)
    remove_finalizer(store, claim.ref, claim.finalizer, dry_run)
    return Allocation(claim.obj, released=True, changed=True)


# -- IPClaim ---------------------------------------------------------------------------------------

def _ip_claim(store: Store, obj: Object) -> _Claim:
    pool = (cast("IPClaim", obj).get("spec") or {}).get("pool") or {}
    labels = obj["metadata"].get("labels") or {}
    namespace = obj["metadata"]["namespace"]
    pool_ref = Ref(IPAM_API, "IPPool", pool["name"], pool.get("namespace") or namespace) if pool.get("name") \
        else select_pool(store, namespace, labels)
    return _Claim(obj, "IPClaim", CLAIM_FINALIZER, pool_ref,
                  (obj["metadata"].get("annotations") or {}).get(REQUESTED_ADDRESS_ANNOTATION), labels)


def _read_claim(store: Store, ref: Ref, current: Object | None) -> Object | None:
    """The claim: ``current`` when the caller holds it as just read or written, else read."""
    if current is not None:
        return current
    try:
        return store.get(ref)
    except NotFound:
        return None


def reconcile_ip_claim(store: Store, ref: Ref, dry_run: bool = False, current: Object | None = None) -> Allocation:
    """Bring an IPClaim to its address (or release it when deleted). ``current``: the claim as the caller
    just read or wrote it, which spares a read."""
    obj = _read_claim(store, ref, current)
    if obj is None:
        return Allocation(None, released=True)
    if pause.paused(obj):
        return Allocation(obj, message="paused")
    claim = _ip_claim(store, obj)
    if obj["metadata"].get("deletionTimestamp"):
        return _release(store, claim, dry_run)

    def write_status(address: Object | None, error: str | None, waiting: str | None,
                     confirming: bool = False) -> Object:
        return _write_ip_claim_status(store, claim, address, error, waiting, dry_run, confirming)

    return _allocate(store, claim, dry_run, write_status)


def _ready(address: Object | None, error: str | None, waiting: str | None) -> tuple[str, str, str]:
    """The claim's Ready condition (status, reason, message), as CAPI's IPAM contract words it."""
    if address:
        return "True", READY_REASON, ""
    reason = POOL_EXHAUSTED if error == EXHAUSTED else (ALLOCATION_FAILED if error else POOL_NOT_READY)
    return "False", reason, error or waiting or ""


def _write_claim_status(store: Store, claim: _Claim, address: Object | None, error: str | None,
                        waiting: str | None, dry_run: bool, fields: Callable[[dict[str, Any]], None],
                        confirming: bool = False) -> Object:
    """Ready set and ``fields`` applied to the claim's status; whatever else is there (conditions of the
    operator that runs this reconcile, say) is kept. The claim as last read or written is tried first: it is
    re-read only when that write conflicts. ``confirming``: written even when unchanged, to learn whether the
    claim still stands (``store/writes.py`` ``standing``; ``_Addresses.confirm``)."""
    def with_status(obj: Object) -> Object:
        status = copy.deepcopy(obj.get("status") or {})
        status["conditions"] = set_condition(status.get("conditions"), "Ready", *_ready(address, error, waiting))
        fields(status)
        return {**obj, "status": status}

    if confirming:
        return standing(store, claim.obj, dry_run, change=with_status, status=True)
    known: list[Object] = [claim.obj]

    def write() -> Object:
        obj = known.pop() if known else store.get(claim.ref)
        wanted = with_status(obj)
        if wanted["status"] == obj.get("status"):
            return obj
        return store.update_status(wanted, dry_run=dry_run)

    return retry_on_conflict(write)


def _write_ip_claim_status(store: Store, claim: _Claim, address: Object | None, error: str | None,
                           waiting: str | None, dry_run: bool, confirming: bool = False) -> Object:
    def fields(status: dict[str, Any]) -> None:
        status.pop("address", None)
        status.pop("errorMessage", None)
        if address:
            status["address"] = {"name": address["metadata"]["name"], "namespace": address["metadata"]["namespace"]}
        if error or waiting:
            status["errorMessage"] = error or waiting

    return _write_claim_status(store, claim, address, error, waiting, dry_run, fields, confirming)


# -- Cluster API IPAddressClaim -------------------------------------------------------------------

def _capi_claim(obj: Object) -> _Claim:
    """A Cluster API IPAddressClaim, read at v1beta2 (a v1beta1 one reads the same: spec.poolRef and
    status.addressRef have one shape in both). A poolRef without apiGroup (v1beta1 allows it) is read as ours."""
    pool = (obj.get("spec") or {}).get("poolRef") or {}
    namespace = obj["metadata"]["namespace"]
    ours = pool.get("apiGroup") in ("ipam.metal3.io", None, "") and pool.get("kind", "IPPool") == "IPPool"
    pool_ref = Ref(IPAM_API, "IPPool", pool["name"], namespace) if ours and pool.get("name") else None
    return _Claim(obj, "IPAddressClaim", CAPI_CLAIM_FINALIZER, pool_ref,
                  (obj["metadata"].get("annotations") or {}).get(REQUESTED_ADDRESS_ANNOTATION),
                  obj["metadata"].get("labels") or {})


def reconcile_ip_address_claim(store: Store, ref: Ref, dry_run: bool = False,
                               current: Object | None = None) -> Allocation:
    """Answer a Cluster API IPAddressClaim with an ipam.cluster.x-k8s.io IPAddress named after the claim."""
    obj = _read_claim(store, ref, current)
    if obj is None:
        return Allocation(None, released=True)
    if pause.paused(obj):
        return Allocation(obj, message="paused")
    claim = _capi_claim(obj)
    if obj["metadata"].get("deletionTimestamp"):
        _delete_capi_address(store, claim, dry_run)
        return _release(store, claim, dry_run)

    def write_status(address: Object | None, error: str | None, waiting: str | None,
                     confirming: bool = False) -> Object:
        if address:
            taken = _ensure_capi_address(store, claim, address, dry_run)
            if taken:
                return _write_capi_claim_status(store, claim, None, taken, None, dry_run, confirming)
        return _write_capi_claim_status(store, claim, address, error, waiting, dry_run, confirming)

    return _allocate(store, claim, dry_run, write_status)


def _ensure_capi_address(store: Store, claim: _Claim, address: Object, dry_run: bool) -> str | None:
    """The contract's IPAddress: named after the claim, owned by it (controller) and by the pool, with the
    prefix v1beta2 requires (0 when the pool sets none, as upstream writes it). Says why not when an IPAddress
    of the claim's name that this claim's reconcile did not make is there: the claim is never pointed at it."""
    spec = cast("IPAddress", address)["spec"]
    pool_uid = next((r["uid"] for r in address["metadata"].get("ownerReferences") or [] if r.get("kind") == "IPPool"),
                    None)
    owners = [{"apiVersion": claim.obj["apiVersion"], "kind": "IPAddressClaim", "name": claim.name,
               "uid": claim.obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    if pool_uid and spec["pool"].get("namespace", claim.namespace) == claim.namespace:
        owners.append({"apiVersion": IPAM_API, "kind": "IPPool", "name": spec["pool"]["name"], "uid": pool_uid,
                       "controller": False, "blockOwnerDeletion": True})
    wanted: Object = {
        "apiVersion": CAPI_IPAM_API, "kind": "IPAddress",
        "metadata": {"name": claim.name, "namespace": claim.namespace, "finalizers": [CAPI_ADDRESS_FINALIZER],
                     "ownerReferences": owners},
        "spec": {"address": spec["address"], "prefix": spec.get("prefix") or 0, "gateway": spec.get("gateway"),
                 "poolRef": {"apiGroup": "ipam.metal3.io", "kind": "IPPool", "name": spec["pool"]["name"]},
                 "claimRef": {"name": claim.name}},
    }
    wanted["spec"] = {k: v for k, v in wanted["spec"].items() if v is not None}
    try:
        store.create(wanted, dry_run=dry_run)
    except AlreadyExists:
        existing = store.get_if_exists(Ref(CAPI_IPAM_API, "IPAddress", claim.name, claim.namespace))
        if existing is not None and claim.obj["metadata"]["uid"] not in owner_uids(existing):
            return f"IPAddress {claim.name} exists and was not made for this claim"
    return None


def _delete_capi_address(store: Store, claim: _Claim, dry_run: bool) -> None:
    ref = Ref(CAPI_IPAM_API, "IPAddress", claim.name, claim.namespace)
    address = store.get_if_exists(ref)
    if address is None or claim.obj["metadata"].get("uid") not in owner_uids(address):
        return  # an IPAddress of the claim's name that this claim's reconcile did not make is not ours to delete
    remove_finalizer(store, ref, CAPI_ADDRESS_FINALIZER, dry_run)
    with contextlib.suppress(NotFound):
        store.delete(ref, dry_run=dry_run)


def _write_capi_claim_status(store: Store, claim: _Claim, address: Object | None, error: str | None,
                             waiting: str | None, dry_run: bool, confirming: bool = False) -> Object:
    def fields(status: dict[str, Any]) -> None:
        if address:
            status["addressRef"] = {"name": claim.name}
        else:
            status.pop("addressRef", None)

    return _write_claim_status(store, claim, address, error, waiting, dry_run, fields, confirming)


# -- IPPool ---------------------------------------------------------------------------------------

@dataclass
class PoolState(Result):
    """What a reconcile of a pool came to (``obj``: the pool): its allocations, and whether it waits for them to
    go before it may be deleted."""

    allocations: dict[str, str] = field(default_factory=dict)
    waiting: str | None = None
    removed: bool = False
    released: int = 0  # claims (being deleted) and addresses (of claims that are gone) released
    warnings: tuple[str, ...] = ()  # what upstream accepts in the pool and we think risky (pools.py)

    def __post_init__(self) -> None:
        self.changed = self.changed or self.released > 0
        if self.waiting is not None and self.requeue_after is None:
            self.requeue_after = WAITING_REQUEUE
        self.message = self.message or self.waiting or ""


def reconcile_ip_pool(store: Store, ref: Ref, dry_run: bool = False) -> PoolState:
    """Release what the claims being deleted hold, rebuild the pool's index from its IPAddresses, and guard
    its deletion: the finalizer goes only once nothing is allocated
    from it."""
    try:
        pool_obj = store.get(ref)
    except NotFound:
        return PoolState(None, removed=True)
    if pause.paused(pool_obj):
        return PoolState(pool_obj, message="paused")
    # A pool that cannot work (stored before its rules, say) says why, naming the field; one upstream accepts and
    # we think risky says so on its status and in an Event.
    warnings = parse_pool(pool_obj).warnings
    pool_obj = _note_warnings(store, pool_obj, warnings, dry_run)
    released = _release_gone_claims(store, pool_obj, dry_run)
    if released:
        pool_obj = store.get(ref)
    # The index rebuilt from the IPAddresses, as a merge patch: claimers patch their own keys meanwhile.
    allocations = {a["spec"]["claim"]["name"]: a["spec"]["address"]
                   for a in cast("list[IPAddress]", _pool_addresses(store, pool_obj))}
    status = cast("IPPool", pool_obj).get("status") or {}
    recorded = [status.get("indexes") or {}, status.get("allocations") or {}]
    if any(index != allocations for index in recorded) or "inUse" in status:
        gone = {name: None for index in recorded for name in index if name not in allocations}
        # inUse: the bitmap index of earlier versions, which no one reads any more.
        pool_obj = _record(store, ref, {**gone, **allocations}, dry_run, {"inUse": None})
    if pool_obj["metadata"].get("deletionTimestamp"):
        if allocations:
            waiting = f"IPPool {ref.name} still has {len(allocations)} allocations; delete their claims first"
            return PoolState(pool_obj, allocations=allocations, waiting=waiting, released=released,
                             warnings=warnings)
        remove_finalizer(store, ref, POOL_FINALIZER, dry_run)
        return PoolState(pool_obj, removed=True, released=released, warnings=warnings)
    pool_obj = ensure_finalizer(store, ref, POOL_FINALIZER, dry_run)
    return PoolState(pool_obj, allocations=allocations, released=released, warnings=warnings)


# The pool's condition while upstream's webhook would accept it and we think it risky (pools.py's warnings), and
# the reason of that condition and of the Warning Event recorded when it is set or its message changes.
POOL_WARNING_CONDITION = "PoolWarning"
RISKY_POOL = "RiskyPool"
EVENT_COMPONENT = "metal3-ipam"


def _note_warnings(store: Store, pool_obj: Object, warnings: tuple[str, ...], dry_run: bool) -> Object:
    """Set (or clear) the pool's PoolWarning condition to its warnings; when it is set or changes, record a
    Warning Event on the pool. Onto the pool as read (a conflict leaves it to the next reconcile), so that the
    conditions others write meanwhile are not replaced."""
    conditions = list((pool_obj.get("status") or {}).get("conditions") or [])
    current = next((c for c in conditions if c.get("type") == POOL_WARNING_CONDITION), None)
    message = "; ".join(warnings)
    if not warnings:
        if current is None:
            return pool_obj
        updated = [c for c in conditions if c.get("type") != POOL_WARNING_CONDITION]
    elif current is not None and (current.get("status"), current.get("reason"), current.get("message")) == \
            ("True", RISKY_POOL, message):
        return pool_obj
    else:
        updated = set_condition(conditions, POOL_WARNING_CONDITION, True, RISKY_POOL, message)
    if dry_run:
        return pool_obj
    patch: Object = {"metadata": {"resourceVersion": pool_obj["metadata"].get("resourceVersion")},
                     "status": {"conditions": updated}}
    try:
        pool_obj = store.patch_status(Ref.of(pool_obj), patch)
    except Conflict:
        return pool_obj
    if warnings:
        _record_event(store, pool_obj, "Warning", RISKY_POOL, message)
    return pool_obj


def _record_event(store: Store, obj: Object, type_: str, reason: str, message: str) -> None:
    """A core/v1 Event on ``obj``, as a controller's event recorder writes one; named after the object and the
    message, so that one message is one Event. An Event that cannot be written (no right to, say) is let go: it
    never fails the reconcile."""
    metadata = obj["metadata"]
    digest = hashlib.sha256(f"{metadata.get('uid')}/{reason}/{message}".encode()).hexdigest()[:16]
    stamp = now()
    event = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{metadata['name'][:236]}.{digest}", "namespace": metadata["namespace"]},
        "involvedObject": {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": metadata["name"],
                           "namespace": metadata["namespace"], "uid": metadata.get("uid"),
                           "resourceVersion": metadata.get("resourceVersion")},
        "type": type_, "reason": reason, "message": message[:1024],
        "source": {"component": EVENT_COMPONENT}, "reportingComponent": EVENT_COMPONENT,
        "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
    }
    with contextlib.suppress(StoreError):
        store.create(event)


CLAIM_APIS = {"IPClaim": IPAM_API, "IPAddressClaim": CAPI_IPAM_API}


def _release_gone_claims(store: Store, pool_obj: Object, dry_run: bool) -> int:
    """Release, as upstream's pool reconcile does, the addresses of the pool's claims that are being deleted,
    and the claims' finalizers: a claim deleted with no reconcile of its own (a generic delete, no operator
    running) would otherwise hold both for ever. An address whose claim is gone altogether (a reconcile that
    took it died while the claim was released) goes too.

    The claims are listed once per namespace and kind that hold addresses here (and the pool's own, for
    deleting claims that hold nothing yet), not read one by one. Returns how many claims and addresses went.
    """
    pool_ref = Ref.of(pool_obj)
    released = 0
    held: dict[tuple[str, str], dict[str, list[Object]]] = {("IPClaim", pool_ref.namespace): {}}
    for address in _pool_addresses(store, pool_obj):
        owner = cast("IPAddress", address)["spec"].get("claim") or {}
        where = (owner.get("kind") or "IPClaim", owner.get("namespace") or pool_ref.namespace)
        held.setdefault(where, {}).setdefault(owner.get("name", ""), []).append(address)
    for (kind, namespace), by_claim in held.items():
        if kind not in CLAIM_APIS:
            continue
        claims = store.list(CLAIM_APIS[kind], kind, namespace)
        for obj in claims:
            if obj["metadata"].get("deletionTimestamp"):
                released += _release_deleting(store, obj, pool_ref, obj["metadata"]["name"] in by_claim, dry_run)
        present = {obj["metadata"]["name"] for obj in claims}
        for name, addresses in by_claim.items():
            if name not in present:
                for address in addresses:
                    _release_address(store, name, address, dry_run)
                    released += 1
    return released


def _release_deleting(store: Store, obj: Object, pool_ref: Ref, holds_here: bool, dry_run: bool) -> int:
    """A deleting claim's own release, for its addresses in this pool (1 when it went, else 0); a claim of
    another pool is left alone."""
    claim = _ip_claim(store, obj) if obj["kind"] == "IPClaim" else _capi_claim(obj)
    if not holds_here and claim.pool != pool_ref:
        return 0
    claim.pool = pool_ref
    if claim.kind == "IPAddressClaim":
        _delete_capi_address(store, claim, dry_run)
    return int(_release(store, claim, dry_run).changed)


def admit_ip_pool(store: admission.Reader, new: Object, old: Object | None) -> None:
    """Upstream's IPPool webhook rules, applied before a pool is written: Invalid names the field."""
    if old is None:
        parse_pool(new)
        return
    allocated = [a["spec"]["address"] for a in cast("list[IPAddress]", _pool_addresses(store, old))]
    check_update(old, new, allocated)


admission.register("ipam.metal3.io", "IPPool", admit_ip_pool)
