# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Choosing and claiming a BareMetalHost for a consumer (a Metal3Machine), as CAPM3's chooseHost does.

The claim is a resourceVersion-checked update of the host read from the list: if
anyone changed the host since (another claimer took it), the update fails with
Conflict and the claimer lists again. So no host ever gets two consumers, whatever
the number of claimers and processes - the double picks and steals of CAPM3#1004,
#3189 and #3516 cannot happen. Every later write to a claimed host goes through
``update_claimed_host``, which refuses a host whose consumer is no longer ours.
"""
from __future__ import annotations

import contextlib
import copy
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, cast

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import (
    Conflict,
    NotFound,
    NotHeld,
    TooManyConflicts,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.core.retry import Backoff, retry_on_conflict
from ansible_collections.metal3.baremetal.plugins.module_utils.core.selector import selector_from_match
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (
    API,
    AVAILABLE,
    KIND,
    PAUSED_ANNOTATION,
    READY,
    host_state,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.reservation import (
    Claimer,
    Marking,
    State,
    reserve,
)

if TYPE_CHECKING:
    from ansible_collections.metal3.baremetal.plugins.module_utils.api.types import BareMetalHost, BareMetalHostSpec

FAILURE_DOMAIN_LABEL = "infrastructure.cluster.x-k8s.io/failure-domain"
NODE_REUSE_LABEL = "infrastructure.cluster.x-k8s.io/node-reuse"
CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"
UNHEALTHY_ANNOTATIONS = ("capm3.metal3.io/unhealthy", "capi.metal3.io/unhealthy")
# A released host is back when it is in one of these (upstream's non-provisioned states).
RELEASED_STATES = ("", "unmanaged", "registering", "inspecting", "preparing", AVAILABLE, READY)
# Each step lists again and picks at random among the hosts still free, so racing claimers spread out.
CLAIM_BACKOFF = Backoff(steps=10)

_random = random.SystemRandom()  # upstream picks with crypto/rand
# Ours, on a HostClaim: its identity as a consumer of hosts (see Consumer), given once and kept across moves.
CLAIM_ID_ANNOTATION = "metal3.baremetal/claim-id"


@dataclass(frozen=True)
class Consumer:
    """Who claims a host: upstream's consumerRef (kind Metal3Machine, HostClaim). ``uid``: an identity of the
    consumer that no other has, written as the consumerRef's uid - a HostClaim's CLAIM_ID_ANNOTATION, since claims
    in different stores (hosts in another cluster) may share a namespace and name; not its metadata.uid, which a
    move (a pivot) changes."""

    api_version: str
    kind: str
    name: str
    namespace: str
    uid: str = ""

    @classmethod
    def of(cls, obj: Object) -> Consumer:
        uid = (obj["metadata"].get("annotations") or {}).get(CLAIM_ID_ANNOTATION, "")
        return cls(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], obj["metadata"]["namespace"], uid)

    def ref(self) -> dict[str, str]:
        ref = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name, "namespace": self.namespace}
        return {**ref, "uid": self.uid} if self.uid else ref

    def holds(self, host: Object) -> bool:
        ref = (cast("BareMetalHost", host).get("spec") or cast("BareMetalHostSpec", {})).get("consumerRef") or {}
        theirs = (ref.get("kind"), ref.get("name"), ref.get("namespace", host["metadata"].get("namespace")),
                  (ref.get("apiVersion") or "").split("/")[0])
        if theirs != (self.kind, self.name, self.namespace, self.api_version.split("/")[0]):
            return False
        # A consumerRef written with an identity is that consumer's only; one written without (by a Metal3Machine,
        # or before claims had identities) is held by name.
        return not ref.get("uid") or ref["uid"] == self.uid


@dataclass
class Selection:
    """What choosing came to: a host, or why there is none (and whether to look again soon)."""

    host: Object | None
    reason: str = ""
    wait: bool = False  # a node-reuse host exists but is not available yet: wait for it, as upstream


def host_selector(selector: Mapping[str, Any] | None) -> str:
    """spec.hostSelector as a label selector; operators in any case, as upstream lowercases them."""
    selector = selector or {}
    # Kubernetes' spellings, and the ones of Go's selection.Operator that upstream's HostClaim webhook accepts.
    spelled = {"in": "In", "notin": "NotIn", "exists": "Exists", "doesnotexist": "DoesNotExist", "=": "In",
               "==": "In", "!=": "NotIn", "!": "DoesNotExist"}
    expressions = [{**e, "operator": spelled.get(str(e.get("operator", "")).lower(), e.get("operator"))}
                   for e in selector.get("matchExpressions") or []]
    return str(selector_from_match(selector.get("matchLabels"), expressions))


def exclusion(host: Object, reuse_name: str | None = None) -> str:
    """Why ``host`` cannot be chosen ('' when it can), as upstream's chooseHost filters."""
    view = cast("BareMetalHost", host)
    metadata, status = host["metadata"], view.get("status") or {}
    spec = view.get("spec") or cast("BareMetalHostSpec", {})
    labels, annotations = metadata.get("labels") or {}, metadata.get("annotations") or {}
    reuse = labels.get(NODE_REUSE_LABEL)
    if reuse is not None and reuse != reuse_name:
        return f"kept for node reuse by {reuse}"
    if reuse is None and spec.get("consumerRef"):
        return f"consumed by {spec['consumerRef'].get('kind')} {spec['consumerRef'].get('name')}"
    if metadata.get("deletionTimestamp"):
        return "being deleted"
    if status.get("errorMessage"):
        return f"in error: {status['errorMessage']}"
    if PAUSED_ANNOTATION in annotations:
        return "paused"
    if any(a in annotations for a in UNHEALTHY_ANNOTATIONS):
        return "unhealthy"
    return ""


def choose_host(hosts: list[Object], consumer: Consumer, failure_domain: str | None = None,
                strict_failure_domain: bool = False, reuse_name: str | None = None,
                pick: Callable[[list[Object]], Object] = _random.choice,
                fits: Callable[[Object], str] | None = None) -> Selection:
    """chooseHost + pickHost over listed hosts: this consumer's host if it has one, else a free one; ``fits``
    says why a host does not suit the consumer ('' when it does), as a machine's type or pinned host does."""
    for host in hosts:
        if consumer.holds(host):
            return Selection(host, "already associated")
    reusable, free = [], []
    unfit: list[str] = []
    for host in hosts:
        if exclusion(host, reuse_name):
            continue
        why = fits(host) if fits else ""
        if why:
            unfit.append(f"{host['metadata']['name']} {why}")
            continue
        state = host_state(host)
        if reuse_name and (host["metadata"].get("labels") or {}).get(NODE_REUSE_LABEL) == reuse_name:
            reusable.append((host, state))
        elif state in (AVAILABLE, READY):
            free.append(host)
    if reusable:  # node-reuse hosts first; one that is not ready yet is waited for, not passed over
        ready = [host for host, state in reusable if state in (AVAILABLE, READY)]
        if not ready:
            return Selection(None, f"waiting for node-reuse host {reusable[0][0]['metadata']['name']}", wait=True)
        free = ready
    if failure_domain:
        in_domain = [h for h in free if (h["metadata"].get("labels") or {}).get(FAILURE_DOMAIN_LABEL) == failure_domain]
        if in_domain or strict_failure_domain:
            free = in_domain  # soft by default, as upstream: no host in the domain falls back to any host
    if not free:
        where = f" in failure domain {failure_domain}" if failure_domain and strict_failure_domain else ""
        unsuited = f" ({'; '.join(sorted(unfit))})" if unfit else ""
        return Selection(None, f"no available host{where} matches{unsuited}")
    return Selection(pick(free), "chosen")


def online_after_release(host_spec: dict[str, Any], fast_track: bool = False) -> bool:
    """Whether a released host stays powered on, as upstream's fast-track matrix: disablePowerOff wins; with
    fast track (CAPM3_FAST_TRACK) a host that will be cleaned stays on; otherwise it is powered off."""
    if host_spec.get("disablePowerOff"):
        return True
    return fast_track and host_spec.get("automatedCleaningMode", "metadata") != "disabled"


class _Hosts(Claimer[Object, Object]):
    """A host, as the reservation protocol (store/reservation.py) takes it for a consumer.

    What a host differs in is behaviour: the claim is written onto the host itself (its consumerRef), and the one
    resourceVersion-checked update of the host as listed is both the mark and the take (Marking.NONE). So no run
    can die between naming a host and taking it, and there is nothing to adopt after a crash but the host FIND
    sees, by its consumerRef: a consumer that holds a host gets it back. A loss (Conflict: someone changed the host
    since it was listed) looks afresh (relook_after_loss): after a jittered pause (CLAIM_BACKOFF), the hosts are
    listed again and one is picked at random among those still free, so racing claimers spread out.
    """

    marking = Marking.NONE
    relook_after_loss = True

    def __init__(self, store: Store, namespaces: list[str], label_selector: str, consumer: Consumer,
                 choose: Callable[[list[Object]], Selection], labels: dict[str, str] | None, dry_run: bool) -> None:
        self.store, self.namespaces, self.label_selector, self.consumer = store, namespaces, label_selector, consumer
        self.choose, self.labels, self.dry_run = choose, labels, dry_run
        self.selection = Selection(None)
        self.delays = CLAIM_BACKOFF.delays()

    def held(self) -> Object | None:
        """The hosts listed and chosen among: this consumer's, if it holds one."""
        hosts = [h for namespace in self.namespaces
                 for h in self.store.list(API, KIND, namespace, self.label_selector or None)]
        self.selection = self.choose(hosts)
        host = self.selection.host
        return host if host is not None and self.consumer.holds(host) else None

    def next(self) -> Object | None:
        return self.selection.host

    def take(self, candidate: Object) -> Object:
        """The consumerRef and ``labels`` written onto the host as listed (the node-reuse label removed)."""
        host = copy.deepcopy(candidate)
        host["spec"]["consumerRef"] = self.consumer.ref()
        host_labels = {**(host["metadata"].get("labels") or {}), **(self.labels or {})}
        host_labels.pop(NODE_REUSE_LABEL, None)
        host["metadata"]["labels"] = host_labels
        try:
            return self.store.update(host, dry_run=self.dry_run)
        except NotFound:  # deleted since we listed it: as for a host someone else changed, list again
            raise Conflict(f"{Ref.of(host)} was deleted while being claimed") from None

    def lost(self, candidate: Object) -> None:
        delay = next(self.delays, None)
        if delay is None:
            raise TooManyConflicts(f"{Ref.of(candidate)}: still conflicting after {CLAIM_BACKOFF.steps} attempts")
        time.sleep(delay)


def associate(store: Store, namespaces: list[str], consumer: Consumer, selector: Mapping[str, Any] | None = None,
              failure_domain: str | None = None, strict_failure_domain: bool = False,
              reuse_name: str | None = None, labels: dict[str, str] | None = None,
              dry_run: bool = False, pick: Callable[[list[Object]], Object] = _random.choice,
              fits: Callable[[Object], str] | None = None) -> Selection:
    """Choose a host among those of ``namespaces`` and claim it for ``consumer`` (consumerRef, ``labels``, the
    node-reuse label removed), by the reservation protocol (``_Hosts``).

    Idempotent: a consumer that holds a host gets it back. Losing a race (Conflict) means listing again,
    after a jittered pause.
    """
    def choose(hosts: list[Object]) -> Selection:
        return choose_host(hosts, consumer, failure_domain, strict_failure_domain, reuse_name, pick, fits)

    hosts = _Hosts(store, namespaces, host_selector(selector), consumer, choose, labels, dry_run)
    try:
        outcome = reserve(hosts)
    except TooManyConflicts:
        return Selection(None, f"could not claim a host in {CLAIM_BACKOFF.steps} attempts: others keep "
                               "taking the chosen ones", wait=True)
    if outcome.state is State.TAKEN:
        return Selection(outcome.holding(), "claimed")
    return hosts.selection  # HELD: "already associated"; EXHAUSTED: why there is none


def update_claimed_host(store: Store, ref: Ref, consumer: Consumer, change: Callable[[Object], None],
                        dry_run: bool = False) -> Object:
    """Apply ``change`` to a host ``consumer`` holds, resourceVersion-checked; NotHeld if it is not ours."""
    def write() -> Object:
        host = store.get(ref)
        if not consumer.holds(host):
            raise NotHeld(f"{ref} is not held by {consumer.kind} {consumer.namespace}/{consumer.name}")
        changed = copy.deepcopy(host)
        change(changed)
        if changed == host:
            return host
        return store.update(changed, dry_run=dry_run)

    return retry_on_conflict(write)


def release_host(store: Store, ref: Ref, consumer: Consumer, fast_track: bool = False, dry_run: bool = False,
                 keep: Callable[[Object], None] | None = None,
                 before_free: Callable[[Object], None] | None = None) -> str:
    """Clear the workload from a host ``consumer`` holds, wait until it is deprovisioned, then let it go (its
    consumerRef and cluster label removed, or what ``keep`` does instead); ``before_free`` runs on the
    deprovisioned host first (a crash after it comes back here). '' once released or no longer ours; else what
    it waits for."""
    def clear(host: Object) -> None:
        for key in ("image", "customDeploy", "userData", "metaData", "networkData"):
            host["spec"].pop(key, None)
        host["spec"]["online"] = online_after_release(host["spec"], fast_track)

    try:
        host = update_claimed_host(store, ref, consumer, clear, dry_run)
    except NotHeld:
        return ""
    state = host_state(host)
    if state not in RELEASED_STATES:
        return f"waiting for host {ref.namespace}/{ref.name} to deprovision (it is {state})"
    if before_free is not None:
        before_free(host)

    def release(host: Object) -> None:
        labels = host["metadata"].get("labels") or {}
        labels.pop(CLUSTER_NAME_LABEL, None)
        host["metadata"]["labels"] = labels
        host["spec"].pop("consumerRef", None)
        if keep is not None:
            keep(host)

    with contextlib.suppress(NotHeld):
        update_claimed_host(store, ref, consumer, release, dry_run)
    return ""


def release_kept_hosts(store: Store, namespace: str, cluster: Consumer, dry_run: bool = False) -> list[str]:
    """Let go of the hosts of ``namespace`` that ``cluster`` (a Cluster API Cluster as a consumer) keeps for node
    reuse; the names of those let go. CAPM3 leaves them held by a Cluster that no longer exists."""
    def release(host: Object) -> None:
        host["metadata"]["labels"].pop(NODE_REUSE_LABEL, None)
        host["spec"].pop("consumerRef", None)

    released = []
    for host in store.list(API, KIND, namespace):
        if cluster.holds(host) and NODE_REUSE_LABEL in (host["metadata"].get("labels") or {}):
            with contextlib.suppress(NotHeld):
                update_claimed_host(store, Ref.of(host), cluster, release, dry_run)
                released.append(host["metadata"]["name"])
    return released
