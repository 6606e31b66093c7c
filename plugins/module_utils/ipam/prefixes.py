# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Prefix allocation: a pool of prefixes (IPPrefixPool), claims of one (IPPrefixClaim), the record of each (IPPrefix).

For a metal-stack-style cluster provider each cluster gets its own node network: a child prefix of one size
(``spec.prefixLength``) carved out of a pool's parent networks (``spec.prefixes``), unique across claims, given
back when the claim goes. The guarantees of address allocation (allocation.py), by the same means, kept simpler:

- The store is the only lock. A prefix is taken by creating the IPPrefix named after the pool and the prefix
  (``<pool>-10-8-4-0-24``): two claimers racing for one collide on AlreadyExists, and the loser tries another,
  at random among the next few free ones, so that a herd does not take turns losing every prefix in order.
- No index in the pool's status: the free prefixes are computed, lowest first, from the pool's IPPrefix objects
  (listed by label). The pool's status only counts them (allocated, free), for people and for waiting claims.
- A claim names the prefix it is about to take (PREFIX_ANNOTATION, with its finalizer) before the IPPrefix is
  created, in a resourceVersion-checked write; the status write that says it holds it is checked against that
  same version. A reconcile that dies at any point leaves a trail the next one follows (the annotation, else the
  claim-name label), never a second prefix nor one that no claim holds; two reconciles of one claim meet on the
  claim's resourceVersion, and the one whose prefix the annotation no longer names gives it back.
"""
from __future__ import annotations

import hashlib
import ipaddress
import itertools
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator, cast

from ansible_collections.metal3.baremetal.plugins.module_utils.api import admission
from ansible_collections.metal3.baremetal.plugins.module_utils.api.kinds import lookup
from ansible_collections.metal3.baremetal.plugins.module_utils.api.validation import validate
from ansible_collections.metal3.baremetal.plugins.module_utils.core import pause
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import (
    Conflict,
    Invalid,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import (
    Object,
    Ref,
    check_name,
    clone,
    now,
    owner_reference,
    owner_uids,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.reconcile import Result
from ansible_collections.metal3.baremetal.plugins.module_utils.core.retry import retry_on_conflict
from ansible_collections.metal3.baremetal.plugins.module_utils.core.selector import label_value
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import (
    CLAIM_LABEL,
    IPAM_API,
    POOL_EXHAUSTED,
    POOL_LABEL,
    WAITING_REQUEUE,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.pools import Network
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.reservation import (
    Claimer,
    Marking,
    Moved,
    Restart,
    State,
    mark_claim,
    reserve,
    restarting,
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
        IPPrefix,
        IPPrefixClaim,
        IPPrefixPool,
    )

PREFIX_API = IPAM_API  # "ipam.metal3.io/v1alpha1"
POOL_KIND, CLAIM_KIND, PREFIX_KIND = "IPPrefixPool", "IPPrefixClaim", "IPPrefix"
PREFIX_POOL_FINALIZER = "ipprefixpool.ipam.metal3.io"
PREFIX_CLAIM_FINALIZER = "ipprefixclaim.ipam.metal3.io"
# On each IPPrefix: only the very object a releaser read is let go (store/writes.py release_finalized).
PREFIX_FINALIZER = "ipprefix.ipam.metal3.io"
# On each IPPrefix, the names of its pool and its claim (shortened past 63 characters: allocation.label_value).
PREFIX_POOL_LABEL = POOL_LABEL  # "ipam.metal3.io/pool-name"
PREFIX_CLAIM_LABEL = CLAIM_LABEL  # "ipam.metal3.io/claim-name"
# On a claim: the prefix it holds or is taking, written before its IPPrefix is created.
PREFIX_ANNOTATION = "ipam.metal3.io/prefix"

# The claim's Ready condition: True with PREFIX_ALLOCATED; False with one of the others (the claim waits).
PREFIX_ALLOCATED = "PrefixAllocated"
PREFIX_POOL_EXHAUSTED = POOL_EXHAUSTED  # "PoolExhausted"
POOL_NOT_FOUND = "PoolNotFound"
POOL_DELETING = "PoolDeleting"

# After a lost create, the next prefix is picked at random among this many of the lowest free ones.
HERD_WINDOW = 4
# How many times one reconcile starts over when another reconcile of the same claim moved it meanwhile.
RESTARTS = 8
# The largest count the pool's status holds (an int64): a /32 of IPv6 holds 2**64 /96s.
MAX_COUNT = (1 << 63) - 1
MAX_NAME = 253


# -- pools -------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PrefixPool:
    """A parsed IPPrefixPool: its parent networks, lowest first (IPv4 before IPv6), and the children's length."""

    name: str
    namespace: str
    parents: tuple[Network, ...]
    length: int

    @property
    def size(self) -> int:
        """How many child prefixes the pool holds."""
        return sum(1 << (self.length - parent.prefixlen) for parent in self.parents)

    def holds(self, prefix: str) -> bool:
        """Whether ``prefix`` is one of the pool's child prefixes."""
        try:
            network = ipaddress.ip_network(prefix)
        except ValueError:
            return False
        return network.prefixlen == self.length and any(
            network.version == parent.version and network.subnet_of(parent)  # type: ignore[arg-type]
            for parent in self.parents)

    def free(self, taken: Iterable[str]) -> Iterator[str]:
        """The child prefixes not in ``taken``, lowest first: lazily, as a parent may hold billions."""
        held = {_canonical(prefix) for prefix in taken}
        for parent in self.parents:
            step = 1 << (parent.max_prefixlen - self.length)
            first = int(parent.network_address)
            for i in range(1 << (self.length - parent.prefixlen)):
                child = str(type(parent)((first + i * step, self.length)))
                if child not in held:
                    yield child


def _canonical(prefix: str) -> str:
    try:
        return str(ipaddress.ip_network(prefix))
    except ValueError:
        return prefix


def parse_prefix_pool(obj: Object) -> PrefixPool:
    """Parse and validate an IPPrefixPool; Invalid names the first bad field, in kube-apiserver's words."""
    metadata = obj.get("metadata") or {}
    name = metadata.get("name", "")
    checked: Object = {"apiVersion": PREFIX_API, "kind": POOL_KIND, "metadata": {"name": name}}
    if obj.get("spec") is not None:
        checked["spec"] = obj["spec"]
    validate(lookup(PREFIX_API, POOL_KIND), checked)  # the schema's rules first: no wrong type reaches the code
    try:
        return _parse_pool(name, metadata.get("namespace") or "default", obj["spec"])
    except Invalid as e:
        raise Invalid(f'{POOL_KIND}.ipam.metal3.io "{name}" is invalid: {e}') from None


def _parse_pool(name: str, namespace: str, spec: dict[str, Any]) -> PrefixPool:
    parents = [(f"spec.prefixes[{i}]", _network(value, f"spec.prefixes[{i}]"))
               for i, value in enumerate(spec["prefixes"])]
    for (low_field, low), (high_field, high) in itertools.combinations(parents, 2):
        if low.version == high.version and low.overlaps(high):
            raise Invalid(f"{high_field}: Invalid value: {str(high)!r}: overlaps {low_field} ({low})")
    length = spec["prefixLength"]
    for field, parent in parents:
        if length > parent.max_prefixlen:
            raise Invalid(f"spec.prefixLength: Invalid value: {length}: longer than an IPv{parent.version} address "
                          f"({parent.max_prefixlen} bits), which {field} ({parent}) is")
        if length < parent.prefixlen:
            raise Invalid(f"spec.prefixLength: Invalid value: {length}: shorter than {field} ({parent}): each "
                          "child prefix is carved out of a parent, so it is at least as long")
    ordered = sorted((parent for _field, parent in parents), key=lambda p: (p.version, int(p.network_address)))
    return PrefixPool(name, namespace, tuple(ordered), length)


def _network(value: Any, field: str) -> Network:
    text = str(value)
    if "/" not in text:
        raise Invalid(f"{field}: Invalid value: {value!r}: not a CIDR (an address and a length: 10.8.0.0/16)")
    try:
        return ipaddress.ip_network(text)
    except ValueError:
        pass
    try:
        loose = ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise Invalid(f"{field}: Invalid value: {value!r}: not a CIDR") from None
    raise Invalid(f"{field}: Invalid value: {value!r}: has host bits set: the network is {loose}")


def prefix_name(pool: str, prefix: str) -> str:
    """The IPPrefix of ``prefix`` in ``pool``: ``<pool>-10-8-4-0-24`` ('.', ':' and '/' made '-'); a name that would
    pass 253 characters keeps the prefix whole and shortens the pool's name, with a digest of the whole."""
    tail = prefix.replace(".", "-").replace(":", "-").replace("/", "-")
    name = f"{pool}-{tail}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    head = pool[:MAX_NAME - len(tail) - len(digest) - 2].rstrip("-.")
    return f"{head}-{digest}-{tail}"


def _pool_prefixes(store: admission.Reader, pool_obj: Object) -> list[Object]:
    """The pool's IPPrefix objects: by label, then by name (a long name's label value may be shared)."""
    name = pool_obj["metadata"]["name"]
    listed = store.list(PREFIX_API, PREFIX_KIND, pool_obj["metadata"].get("namespace") or "default",
                        f"{PREFIX_POOL_LABEL}={label_value(name)}")
    return [p for p in listed if ((p.get("spec") or {}).get("pool") or {}).get("name") == name]


def _counts(pool: PrefixPool, prefixes: list[Object]) -> tuple[int, int]:
    """(allocated, free), as the pool's status holds them."""
    allocated = len(prefixes)
    inside = sum(1 for p in cast("list[IPPrefix]", prefixes) if pool.holds(p["spec"].get("prefix", "")))
    return allocated, min(max(pool.size - inside, 0), MAX_COUNT)


def _write_counts(store: Store, pool_obj: Object, pool: PrefixPool, prefixes: list[Object], dry_run: bool) -> Object:
    """The pool's status counts, patched when they changed (a change of the pool wakes the claims that wait on it)."""
    allocated, free = _counts(pool, prefixes)
    status = cast("IPPrefixPool", pool_obj).get("status") or {}
    if status.get("allocated") == allocated and status.get("free") == free:
        return pool_obj
    patch = {"status": {"allocated": allocated, "free": free, "lastUpdated": now()}}
    return store.patch_status(Ref.of(pool_obj), patch, dry_run=dry_run)


def _recount(store: Store, pool_ref: Ref, dry_run: bool) -> None:
    """The counts of a pool a release gave a prefix back to (none when it is gone, or unreadable)."""
    pool_obj = store.get_if_exists(pool_ref)
    if pool_obj is None:
        return
    try:
        pool = parse_prefix_pool(pool_obj)
    except Invalid:
        return  # its own reconcile says why; a release never fails for it
    _write_counts(store, pool_obj, pool, _pool_prefixes(store, pool_obj), dry_run)


# -- claims ------------------------------------------------------------------------------------------------------

@dataclass
class PrefixAllocation(Result):
    """What a reconcile of an IPPrefixClaim came to (``obj``: the claim): the prefix it holds, or the reason it waits
    (PoolExhausted, PoolNotFound, PoolDeleting), when it comes back after WAITING_REQUEUE."""

    prefix: str | None = None
    reason: str = ""
    released: bool = False

    def __post_init__(self) -> None:
        if self.reason and self.requeue_after is None:
            self.requeue_after = WAITING_REQUEUE


def prefix_claim_object(name: str, namespace: str, pool: str, owner: Object | None = None) -> Object:
    """An IPPrefixClaim of ``pool`` (of its namespace), born with its finalizer, so that a prefix is never given to a
    claim that could vanish unreleased; ``owner`` (a Cluster, say) as its controller."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "finalizers": [PREFIX_CLAIM_FINALIZER]}
    if owner is not None:
        metadata["ownerReferences"] = [owner_reference(owner, controller=True)]
    return {"apiVersion": PREFIX_API, "kind": CLAIM_KIND, "metadata": metadata, "spec": {"pool": {"name": pool}}}


def _pool_ref(claim: Object) -> Ref:
    """The claim's pool, in its namespace; Invalid naming spec.pool.name when it names none."""
    metadata = claim["metadata"]
    name = ((claim.get("spec") or {}).get("pool") or {}).get("name")
    try:
        check_name(name, "spec.pool.name")
    except Invalid as e:
        raise Invalid(f'{CLAIM_KIND}.ipam.metal3.io "{metadata["name"]}" is invalid: {e}') from None
    return Ref(PREFIX_API, POOL_KIND, str(name), metadata["namespace"])


def _annotation(claim: Object) -> str | None:
    return (claim["metadata"].get("annotations") or {}).get(PREFIX_ANNOTATION)


def _status_prefix(claim: Object) -> str | None:
    return (cast("IPPrefixClaim", claim).get("status") or {}).get("prefix")


def _owned(prefix: Object, claim: Object) -> bool:
    """Whether the IPPrefix is this claim's: its claim's name, and this claim (not an earlier one of that name)."""
    uid = claim["metadata"].get("uid")
    spec = prefix.get("spec") or {}
    return (spec.get("claim") or {}).get("name") == claim["metadata"]["name"] and uid in owner_uids(prefix)


def _prefix_ref(pool_ref: Ref, prefix: str) -> Ref:
    return Ref(PREFIX_API, PREFIX_KIND, prefix_name(pool_ref.name, prefix), pool_ref.namespace)


def _held(store: Store, claim: Object, pool_ref: Ref) -> Object | None:
    """The IPPrefix the claim holds, found by the prefix its annotation names (its status, for a claim replaced
    without its annotation): a consistent GET, never a list."""
    named = _annotation(claim) or _status_prefix(claim)
    if not named:
        return None
    found = store.get_if_exists(_prefix_ref(pool_ref, named))
    return found if found is not None and _owned(found, claim) \
        and cast("IPPrefix", found)["spec"].get("prefix") == named else None


def _claim_prefixes(store: Store, claim: Object) -> list[Object]:
    """Every IPPrefix this claim owns, of any pool: by label, then checked (label values of long names are shared)."""
    metadata = claim["metadata"]
    listed = store.list(PREFIX_API, PREFIX_KIND, metadata["namespace"],
                        f"{PREFIX_CLAIM_LABEL}={label_value(metadata['name'])}")
    return [p for p in listed if _owned(p, claim)]


def _release(store: Store, prefix: Object, dry_run: bool) -> bool:
    metadata = prefix["metadata"]
    ref = Ref(PREFIX_API, PREFIX_KIND, metadata["name"], metadata["namespace"])
    return release_finalized(store, ref, metadata.get("uid"), PREFIX_FINALIZER, dry_run)


def _claims(store: Store, namespace: str) -> dict[str, Object]:
    return {c["metadata"]["name"]: c for c in store.list(PREFIX_API, CLAIM_KIND, namespace)}


def _release_gone(store: Store, prefixes: list[Object], claims: dict[str, Object], dry_run: bool) -> int:
    """Give back the IPPrefixes whose claim is gone (or is another claim of that name now); how many went.
    ``claims`` must be listed after ``prefixes``: a claim is made before any prefix of it, so a prefix listed
    first whose claim is not among them has none."""
    released = 0
    for prefix in prefixes:
        owner = claims.get(cast("IPPrefix", prefix)["spec"]["claim"]["name"])
        if owner is None or owner["metadata"].get("uid") not in owner_uids(prefix):
            released += int(_release(store, prefix, dry_run))
    return released


def _prefix_object(pool: PrefixPool, claim: Object, prefix: str) -> Object:
    claim_name = claim["metadata"]["name"]
    return {
        "apiVersion": PREFIX_API, "kind": PREFIX_KIND,
        "metadata": {"name": prefix_name(pool.name, prefix), "namespace": pool.namespace,
                     "labels": {PREFIX_POOL_LABEL: label_value(pool.name), PREFIX_CLAIM_LABEL: label_value(claim_name)},
                     "finalizers": [PREFIX_FINALIZER],
                     "ownerReferences": [owner_reference(claim, controller=True)]},
        "spec": {"pool": {"name": pool.name}, "claim": {"name": claim_name}, "prefix": prefix},
    }


class _Prefixes(Claimer[Object, str]):
    """A claim's prefix, as the reservation protocol (store/reservation.py) takes it: the claim names each prefix in
    PREFIX_ANNOTATION before its IPPrefix is created (and again, a no-op, on every run that finds it held), and a
    run whose mark meets another run's starts over from the claim as it now is. Its status is written by
    ``_settle``, checked against the claim as last marked."""

    marking = Marking.EACH
    moved = Moved.RESTART

    def __init__(self, store: Store, claim: Object, pool_ref: Ref, pool_obj: Object | None, pool: PrefixPool | None,
                 dry_run: bool) -> None:
        self.store, self.claim, self.pool_ref, self.pool_obj, self.pool = store, claim, pool_ref, pool_obj, pool
        self.dry_run = dry_run
        self.waiting: tuple[str, str] = ("", "")  # why PREPARE refused: (reason, message)
        self.taken: set[str] = set()  # the candidates lost to other claims
        self.swept = False

    def marker(self) -> str | None:
        return _annotation(self.claim)

    def held(self) -> Object | None:
        return _held(self.store, self.claim, self.pool_ref)

    def may_own(self) -> bool:
        return bool(_annotation(self.claim) or _status_prefix(self.claim))

    def owned(self) -> list[Object]:
        return sorted(_claim_prefixes(self.store, self.claim), key=lambda p: p["metadata"]["name"])

    def keepable(self, obj: Object) -> bool:
        return bool(cast("IPPrefix", obj)["spec"]["pool"]["name"] == self.pool_ref.name)

    def reported(self, obj: Object) -> bool:
        return bool(cast("IPPrefix", obj)["spec"]["prefix"] == _status_prefix(self.claim))

    def release(self, obj: Object) -> bool:
        return _release(self.store, obj, self.dry_run)

    def released(self, objs: list[Object]) -> None:
        for pool_name in {p["spec"]["pool"]["name"] for p in cast("list[IPPrefix]", objs)}:
            _recount(self.store, Ref(PREFIX_API, POOL_KIND, pool_name, self.pool_ref.namespace), self.dry_run)

    def reread(self) -> bool:
        self.claim = self.store.get(Ref.of(self.claim))
        return not self.claim["metadata"].get("deletionTimestamp")

    def confirm(self, taken: Object) -> bool:
        """The claim as the API server holds it (a no-op write: a read may be a cache's, behind its deletion)."""
        self.claim = standing(self.store, self.claim, self.dry_run)
        return not self.claim["metadata"].get("deletionTimestamp")

    def mark(self, candidate: str) -> None:
        self.claim = mark_claim(self.store, self.claim, PREFIX_ANNOTATION, candidate, PREFIX_CLAIM_FINALIZER,
                                self.dry_run)

    def prepare(self) -> bool:
        """The pool is there and not being deleted (else the claim waits on it), and carries its finalizer."""
        where = f"{POOL_KIND} {self.pool_ref.namespace}/{self.pool_ref.name}"
        if self.pool_obj is None or self.pool is None:
            self.waiting = (POOL_NOT_FOUND, f"{where} not found")
            return False
        if self.pool_obj["metadata"].get("deletionTimestamp"):
            self.waiting = (POOL_DELETING, f"{where} is being deleted")
            return False
        if PREFIX_POOL_FINALIZER not in (self.pool_obj["metadata"].get("finalizers") or []):
            self.pool_obj = ensure_finalizer(self.store, self.pool_ref, PREFIX_POOL_FINALIZER, self.dry_run)
        return True

    def valid(self, candidate: str) -> bool:
        return self.pool is not None and self.pool.holds(candidate)

    def next(self) -> str | None:
        """The lowest free prefix; after a loss, one at random among the next HERD_WINDOW free ones."""
        if self.pool_obj is None or self.pool is None:
            return None
        while True:
            listed = _pool_prefixes(self.store, self.pool_obj)
            taken = itertools.chain((p["spec"].get("prefix", "") for p in cast("list[IPPrefix]", listed)), self.taken)
            free = list(itertools.islice(self.pool.free(taken), HERD_WINDOW))
            if not free and not self.swept:
                # Before saying the pool is exhausted, once: the prefixes of claims gone with no reconcile of their
                # own (a finalizer stripped) go back, which would otherwise wait for the pool's own reconcile.
                self.swept = True
                if _release_gone(self.store, listed, _claims(self.store, self.pool_obj["metadata"]["namespace"]),
                                 self.dry_run):
                    continue
            if not free:
                return None
            return random.choice(free) if self.taken else free[0]

    def take(self, candidate: str) -> Object:
        if self.pool is None:
            raise RuntimeError("TAKE before PREPARE")
        return self.store.create(_prefix_object(self.pool, self.claim, candidate), dry_run=self.dry_run)

    def lookup(self, candidate: str) -> Object | None:
        return self.store.get_if_exists(_prefix_ref(self.pool_ref, candidate))

    def owns(self, obj: Object) -> bool:
        return _owned(obj, self.claim)

    def lost(self, candidate: str) -> None:
        self.taken.add(candidate)

    def value(self, obj: Object) -> str:
        return str(cast("IPPrefix", obj)["spec"]["prefix"])


def _settle(store: Store, claim: Object, held: Object, changed: bool, dry_run: bool) -> PrefixAllocation:
    """Ready, with the prefix, in the claim's status: written onto the claim as this reconcile last read or wrote it.
    A Conflict whose claim no longer names the prefix means another reconcile moved it meanwhile: the prefix goes
    back and the reconcile starts over."""
    prefix = cast("IPPrefix", held)["spec"]["prefix"]
    ref = Ref.of(claim)
    wrote = False

    def write() -> Object:
        nonlocal claim, wrote
        status = clone(claim.get("status") or {})
        status["conditions"] = set_condition(status.get("conditions"), "Ready", True, PREFIX_ALLOCATED,
                                             f"holds {prefix}")
        status["prefix"] = prefix
        status.pop("errorMessage", None)
        if status == claim.get("status"):
            return claim
        try:
            written = store.update_status({**claim, "status": status}, dry_run=dry_run)
            wrote = True
            return written
        except Conflict:
            current = store.get_if_exists(ref)
            if current is None or current["metadata"].get("deletionTimestamp") or _annotation(current) != prefix:
                _release(store, held, dry_run)
                raise Restart() from None
            claim = current
            raise

    written = retry_on_conflict(write)
    return PrefixAllocation(written, changed=changed or wrote, prefix=prefix)


def _wait(store: Store, claim: Object, reason: str, message: str, waits_on: list[Ref],
          dry_run: bool) -> PrefixAllocation:
    """Ready False with ``reason`` in the claim's status; the claim comes back when ``waits_on`` changes."""
    known = [claim]

    def write() -> Object:
        obj = known.pop() if known else store.get(Ref.of(claim))
        status = clone(obj.get("status") or {})
        status["conditions"] = set_condition(status.get("conditions"), "Ready", False, reason, message)
        status["errorMessage"] = message
        status.pop("prefix", None)
        if status == obj.get("status"):
            return obj
        return store.update_status({**obj, "status": status}, dry_run=dry_run)

    return PrefixAllocation(retry_on_conflict(write), reason=reason, message=message, waits_on=waits_on)


def _release_claim(store: Store, claim: Object, dry_run: bool) -> PrefixAllocation:
    """A deleted claim gives back every prefix it owns, then its finalizer goes."""
    released = [p for p in _claim_prefixes(store, claim) if _release(store, p, dry_run)]
    for pool_name in {p["spec"]["pool"]["name"] for p in cast("list[IPPrefix]", released)}:
        _recount(store, Ref(PREFIX_API, POOL_KIND, pool_name, claim["metadata"]["namespace"]), dry_run)
    finalized = PREFIX_CLAIM_FINALIZER in (claim["metadata"].get("finalizers") or [])
    if finalized:
        remove_finalizer(store, Ref.of(claim), PREFIX_CLAIM_FINALIZER, dry_run)
    return PrefixAllocation(None, released=True, changed=bool(released) or finalized)


def _step(store: Store, claim: Object, pool_ref: Ref, dry_run: bool) -> PrefixAllocation:
    pool_obj = store.get_if_exists(pool_ref)
    pool = parse_prefix_pool(pool_obj) if pool_obj is not None else None  # bad input says so before any write
    prefixes = _Prefixes(store, claim, pool_ref, pool_obj, pool, dry_run)
    outcome = reserve(prefixes)
    if outcome.state is State.REFUSED:
        reason, message = prefixes.waiting
        return _wait(store, prefixes.claim, reason, message, [pool_ref], dry_run)
    if outcome.state is State.EXHAUSTED and pool is not None:
        message = (f"{POOL_KIND} {pool_ref.namespace}/{pool_ref.name} has no free /{pool.length} left: all "
                   f"{pool.size} are taken")
        return _wait(store, prefixes.claim, PREFIX_POOL_EXHAUSTED, message, [pool_ref], dry_run)
    if outcome.state is State.RELEASED:  # the claim was deleted while its prefix was taken: given back
        return PrefixAllocation(None, released=True, changed=True)
    changed = outcome.state is State.TAKEN or outcome.adopted
    return _settle(store, prefixes.claim, outcome.holding(), changed, dry_run)


def reconcile_prefix_claim(store: Store, ref: Ref, dry_run: bool = False) -> PrefixAllocation:
    """Bring an IPPrefixClaim to its prefix (the one it holds, else the lowest free one of its pool), or wait with
    the reason in its Ready condition; deleted, give its prefix back. Invalid, naming the field, for a claim whose
    pool name is none or a pool that cannot work, before anything is written."""
    def attempt() -> PrefixAllocation:
        claim = store.get_if_exists(ref)
        if claim is None:
            return PrefixAllocation(None, released=True)
        if pause.paused(claim):
            return PrefixAllocation(claim, message="paused")
        if claim["metadata"].get("deletionTimestamp"):
            return _release_claim(store, claim, dry_run)
        return _step(store, claim, _pool_ref(claim), dry_run)

    return restarting(attempt, RESTARTS, str(ref))


# -- pool reconcile and admission --------------------------------------------------------------------------------

@dataclass
class PrefixPoolState(Result):
    """What a reconcile of an IPPrefixPool came to (``obj``: the pool): its counts, how many IPPrefixes of gone or
    deleted claims it gave back, and whether it waits for its allocations to go before it may be deleted."""

    allocated: int = 0
    free: int = 0
    released: int = 0
    removed: bool = False
    waiting: str | None = None

    def __post_init__(self) -> None:
        self.changed = self.changed or self.released > 0
        if self.waiting is not None and self.requeue_after is None:
            self.requeue_after = WAITING_REQUEUE
        self.message = self.message or self.waiting or ""


def reconcile_prefix_pool(store: Store, ref: Ref, dry_run: bool = False) -> PrefixPoolState:
    """Give back the prefixes of claims that are gone (or being deleted with no reconcile of their own), write the
    counts into the pool's status, and guard its deletion: its finalizer goes once no prefix is allocated from it."""
    pool_obj = store.get_if_exists(ref)
    if pool_obj is None:
        return PrefixPoolState(None, removed=True)
    if pause.paused(pool_obj):
        return PrefixPoolState(pool_obj, message="paused")
    pool = parse_prefix_pool(pool_obj)
    prefixes = _pool_prefixes(store, pool_obj)
    claims = _claims(store, ref.namespace)
    released = 0
    for claim in claims.values():
        if claim["metadata"].get("deletionTimestamp") \
                and ((claim.get("spec") or {}).get("pool") or {}).get("name") == ref.name:
            released += int(_release_claim(store, claim, dry_run).changed)
    released += _release_gone(store, prefixes, claims, dry_run)
    if released:
        pool_obj, prefixes = store.get(ref), _pool_prefixes(store, pool_obj)
    pool_obj = _write_counts(store, pool_obj, pool, prefixes, dry_run)
    allocated, free = _counts(pool, prefixes)
    if pool_obj["metadata"].get("deletionTimestamp"):
        if prefixes:
            waiting = f"{POOL_KIND} {ref.name} still has {allocated} prefixes allocated; delete their claims first"
            return PrefixPoolState(pool_obj, allocated=allocated, free=free, released=released, waiting=waiting)
        remove_finalizer(store, ref, PREFIX_POOL_FINALIZER, dry_run)
        return PrefixPoolState(pool_obj, removed=True, released=released)
    pool_obj = ensure_finalizer(store, ref, PREFIX_POOL_FINALIZER, dry_run)
    return PrefixPoolState(pool_obj, allocated=allocated, free=free, released=released)


def admit_prefix_pool(store: admission.Reader, new: Object, old: Object | None) -> None:
    """An IPPrefixPool's rules, applied before it is written: its CIDRs parse, its prefixLength fits every parent,
    and its prefixes and prefixLength do not change while prefixes are allocated from it."""
    parse_prefix_pool(new)
    if old is None:
        return
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    changed = [field for field in ("prefixes", "prefixLength") if old_spec.get(field) != new_spec.get(field)]
    allocated = _pool_prefixes(store, old) if changed else []
    if allocated:
        shown = sorted(p["spec"]["prefix"] for p in cast("list[IPPrefix]", allocated))
        listed = ", ".join(shown[:5]) + (", ..." if len(shown) > 5 else "")
        raise Invalid(f'{POOL_KIND}.ipam.metal3.io "{new["metadata"]["name"]}" is invalid: spec.{changed[0]}: '
                      f"Forbidden: field is immutable while prefixes are allocated from the pool "
                      f"({len(allocated)}: {listed})")


admission.register("ipam.metal3.io", POOL_KIND, admit_prefix_pool)
