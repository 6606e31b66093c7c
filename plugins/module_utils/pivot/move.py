# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Move one cluster's objects from one store to another, as ``clusterctl move`` does (a pivot).

What moves is the cluster's object graph in its namespace: the objects of the workload kinds that carry the
``cluster.x-k8s.io/cluster-name`` label, the Cluster itself, whatever an object in the set owns (ownerReferences,
transitively) and whatever one names (a Metal3Machine's data template and user data Secret, a data template's
pools, a Cluster's infrastructure reference). BareMetalHosts, their BMC Secrets and Ironic stay, unless
``include_hosts``: then the hosts the machines consume move too, each with its status in the
``baremetalhost.metal3.io/status`` annotation, so that the target adopts it instead of provisioning it again.

A move carries one cluster, not a namespace, so it meets what ``clusterctl move`` (which moves every cluster of a
namespace at once) never splits: objects the cluster shares with the rest of the namespace. The rule, per kind:

* An object that belongs to another cluster - its ``cluster.x-k8s.io/cluster-name`` label, or an IP pool's
  ``spec.clusterName`` (ip-address-manager labels a pool from it and makes that Cluster its owner, which puts the
  pool in that cluster's graph for clusterctl) - never moves, and nothing is followed through it.
* An object that something outside the move uses - an ownerReference to it, a reference by name, an object it is
  owned by that does not move, a host (other than those the cluster's machines consume) naming it - does not move:
  - a Secret or ConfigMap stays behind in the source, untouched (neither paused nor deleted, its finalizers kept),
    and the result lists it with why (``stayed``): these are data without state of their own, so a copy the user
    makes in the target serves the moved objects that name them, and clusterctl itself leaves a Secret that is not
    the cluster's (owned in its graph, or named ``<cluster>-*``) behind. Two exceptions are refused, since staying
    would not leave it intact: a Secret owned by an object that moves (deleting the owner from the source lets
    Kubernetes' garbage collector delete it) and the BMC credentials of a host that moves (the host could not be
    managed in the target);
  - any other kind refuses the move, naming the object and its users, before anything is written. An IPPool or
    IPPrefixPool is the record of which addresses it has given out: moved, the cluster that stays would lose it;
    left behind while the moved cluster's claims and addresses go, each store would give out the other's
    addresses (clusterctl, which follows ownerReferences only, does leave a pool of no cluster behind while the
    addresses it gave out move: that split is what is refused here). A template, a data
    template (whose index allocation is the same kind of record), a claim or an address shared with another
    cluster is the same: either side would be left half.
* An object of another cluster that the moved cluster needs (names, or is owned by) refuses the move the same way,
  unless it is a Secret or ConfigMap (it stays, listed).

Hosts are the exception by design: a host stays (unless ``include_hosts``) while the machine that consumes it moves.

The procedure is resumable after a crash between any two writes (the next run finishes it), and nothing is
reconciled on both sides:

1. pause in the source: the Cluster's spec.paused, the pause annotation on every object (a host's own pause
   annotation on hosts); each object remembers (MOVING_ANNOTATION) that it is part of this move, and whether its
   user had paused it already (PAUSED_BY_USER_ANNOTATION);
2. create each in the target, owners first, naming the source object's uid (SOURCE_UID_ANNOTATION), so that a
   run after a crash recognises what it made; ownerReferences point at the target's uids; then the status;
3. delete each from the source, dependents first, its finalizers removed before (no reconcile acts on it);
4. unpause in the target what the move paused.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterator

from ansible_collections.metal3.baremetal.plugins.module_utils.api.kinds import KindInfo, known_kinds
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import CLONED_FROM_NAME
from ansible_collections.metal3.baremetal.plugins.module_utils.core import pause
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import DomainError, NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import (
    SERVER_METADATA,
    Object,
    Ref,
    check_name,
    check_namespace,
    clone,
    split_api_version,
    split_reference,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.reconcile import Result
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import baremetalhost as bmh
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store

# Ours: on every object a move carries, the name of the cluster being moved (removed when the move is done).
MOVING_ANNOTATION = "pivot.metal3.io/moving"
# Ours: "true" on an object its user had paused before the move (the move leaves it paused).
PAUSED_BY_USER_ANNOTATION = "pivot.metal3.io/paused-by-user"
# Ours: on an object the move created in the target, the uid of the object it was made from.
SOURCE_UID_ANNOTATION = "pivot.metal3.io/source-uid"
# The value CAPM3 gives the host pause annotation when a move pauses a host.
HOST_PAUSE_VALUE = "metal3.io/capm3"
HOST_ANNOTATION = "metal3.io/BareMetalHost"
HOST_CLAIM_ANNOTATION = "metal3.io/HostClaim"
# Cluster API's record of the kind of template a machine was cloned from ("Kind.group"; beside its name).
CLONED_FROM_GROUPKIND = "cluster.x-k8s.io/cloned-from-groupkind"
# The kinds a cluster is named by: Cluster API's Cluster where there is one, else its infrastructure cluster (a
# bastion's cluster made without Cluster API objects, as the demo's).
CLUSTER_KINDS = (("cluster.x-k8s.io", "Cluster"), ("infrastructure.cluster.x-k8s.io", "Metal3Cluster"),
                 ("infrastructure.cluster.x-k8s.io", "MetalStackCluster"))

# The kinds a move carries (group, kind), owners' kinds first: the order among objects no ownerReference orders.
WORKLOAD_KINDS = (
    ("cluster.x-k8s.io", "Cluster"),
    ("infrastructure.cluster.x-k8s.io", "Metal3Cluster"),
    ("infrastructure.cluster.x-k8s.io", "MetalStackCluster"),
    ("controlplane.cluster.x-k8s.io", "KubeadmControlPlane"),
    ("cluster.x-k8s.io", "MachineDeployment"),
    ("cluster.x-k8s.io", "MachineSet"),
    ("cluster.x-k8s.io", "MachineHealthCheck"),
    ("bootstrap.cluster.x-k8s.io", "KubeadmConfigTemplate"),
    ("infrastructure.cluster.x-k8s.io", "Metal3MachineTemplate"),
    ("infrastructure.cluster.x-k8s.io", "Metal3RemediationTemplate"),
    ("infrastructure.cluster.x-k8s.io", "Metal3DataTemplate"),
    ("ipam.metal3.io", "IPPool"),
    ("ipam.metal3.io", "IPPrefixPool"),
    ("cluster.x-k8s.io", "Machine"),
    ("bootstrap.cluster.x-k8s.io", "KubeadmConfig"),
    ("infrastructure.cluster.x-k8s.io", "Metal3Machine"),
    ("infrastructure.cluster.x-k8s.io", "MetalStackMachine"),
    ("infrastructure.cluster.x-k8s.io", "MetalStackFirewall"),
    ("infrastructure.cluster.x-k8s.io", "Metal3Remediation"),
    ("metal3.io", "HostClaim"),
    ("infrastructure.cluster.x-k8s.io", "Metal3DataClaim"),
    ("infrastructure.cluster.x-k8s.io", "Metal3Data"),
    ("ipam.metal3.io", "IPClaim"),
    ("ipam.metal3.io", "IPAddress"),
    ("ipam.metal3.io", "IPPrefixClaim"),
    ("ipam.metal3.io", "IPPrefix"),
    ("ipam.cluster.x-k8s.io", "IPAddressClaim"),
    ("ipam.cluster.x-k8s.io", "IPAddress"),
    ("metal3.io", "HardwareData"),
    ("", "ConfigMap"),
    ("", "Secret"),
)
HOST_KIND = (split_api_version(bmh.API)[0], bmh.KIND)
# The kinds that stay behind when something outside the move uses them (see the module's docstring); the others
# refuse the move.
SHAREABLE_KINDS = frozenset({("", "Secret"), ("", "ConfigMap")})
POOL_KINDS = frozenset({("ipam.metal3.io", "IPPool"), ("ipam.metal3.io", "IPPrefixPool")})
STEADY_HOST_STATES = frozenset(bmh.STABLE_STATES)


class MoveRefused(DomainError):
    """The move cannot be made as asked; the message names the object and why. Nothing was written."""


@dataclass
class MoveResult(Result):
    """What a move came to: the objects it carries (kind, namespace, name, in creation order), and those of its
    graph that stay in the source (kind, namespace, name, reason)."""

    moved: list[dict[str, str]] = field(default_factory=list)
    stayed: list[dict[str, str]] = field(default_factory=list)


Key = tuple[str, str, str]  # (group, kind, name) in the move's namespace


def _key(obj: Object) -> Key:
    return split_api_version(obj["apiVersion"])[0], obj["kind"], obj["metadata"]["name"]


def _kinds(include_hosts: bool) -> list[KindInfo]:
    """The moved kinds the store knows, in WORKLOAD_KINDS' order (hosts first, when they move)."""
    known = {(info.group, info.kind): info for info in known_kinds()}
    wanted = ([HOST_KIND] if include_hosts else []) + list(WORKLOAD_KINDS)
    return [known[k] for k in wanted if k in known]


def _api_version(info: KindInfo) -> str:
    version = info.storage or info.versions[-1]
    return f"{info.group}/{version}" if info.group else version


def _annotations(obj: Object) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


class _Graph:
    """The objects of one namespace of a store, and the cluster's graph among them."""

    def __init__(self, store: Store, namespace: str, include_hosts: bool,
                 only: tuple[tuple[str, str], ...] | None = None, source: bool = False) -> None:
        self.infos = {(info.group, info.kind): info for info in _kinds(include_hosts)
                      if only is None or (info.group, info.kind) in only}
        self.objects: dict[Key, Object] = {}
        for (group, kind), info in self.infos.items():
            for obj in store.list(_api_version(info), kind, namespace):
                self.objects[(group, kind, obj["metadata"]["name"])] = obj
        # What does not move but may use what moves, in the source: the hosts, when they stay.
        self.others: dict[Key, Object] = {}
        if source and not include_hosts:
            for obj in store.list(bmh.API, bmh.KIND, namespace):
                self.others[(*HOST_KIND, obj["metadata"]["name"])] = obj
        self.by_uid = {o["metadata"].get("uid"): k for k, o in {**self.others, **self.objects}.items()}
        self.include_hosts = include_hosts
        self.namespace = namespace

    def discover(self, cluster: str) -> tuple[list[Key], dict[Key, str]]:
        """The cluster's objects, owners before dependents, and those of its graph that stay, with why; refused
        (MoveRefused) when the graph cannot be cut from the rest of the namespace (see the module's docstring)."""
        stays: dict[Key, str] = {}
        while True:
            found, foreign = self._reach(cluster, stays)
            users = self._users(found)
            more = {key: f"used outside the move by {self._list(users[key])} too" for key in found
                    if users.get(key) and self._may_stay(key, found)}
            if not more:
                break
            stays.update(more)
        problems = [self._why_refused(key, users[key], cluster, found) for key in self._ordered(found)
                    if users.get(key)]
        for key, (needed_by, owner) in sorted(foreign.items()):
            if key[:2] in SHAREABLE_KINDS and not self._owned_by(key, found):
                stays[key] = (f"belongs to cluster {owner}, not to {cluster} (named by {self._list(needed_by)}: "
                              "give the target a copy if they need it)")
            else:
                problems.append(f"{self._name(key)}: belongs to cluster {owner}, and is needed by "
                                f"{self._list(needed_by)} of cluster {cluster}")
        if problems:
            raise MoveRefused(f"the move of cluster {self.namespace}/{cluster} is refused, nothing was written: "
                              + "; ".join(problems))
        return self._ordered(found), stays

    def owner(self, obj: Object) -> str:
        """The cluster ``obj`` belongs to: its cluster-name label, or a pool's spec.clusterName; '' for none."""
        named = pause.cluster_name(obj)
        if not named and (split_api_version(obj["apiVersion"])[0], obj["kind"]) in POOL_KINDS:
            named = str((obj.get("spec") or {}).get("clusterName") or "")
        return named

    def _reach(self, cluster: str, stays: dict[Key, str]) -> tuple[set[Key], dict[Key, tuple[set[Key], str]]]:
        """The cluster's graph, not through ``stays``; and the other clusters' objects it reaches (by whom, whose)."""
        found: set[Key] = set()
        for key, obj in self.objects.items():
            if key in stays:
                continue
            if key[2] == cluster and key[:2] in CLUSTER_KINDS or \
                    self.owner(obj) == cluster and key[:2] not in (HOST_KIND, ("", "Secret")) or \
                    _annotations(obj).get(MOVING_ANNOTATION) == cluster:
                found.add(key)
        # Secrets with the label are the cluster's (its kubeconfig, its CA); a labelled host moves only as consumed.
        found |= {k for k, o in self.objects.items()
                  if k[1] == "Secret" and pause.cluster_name(o) == cluster and k not in stays}
        foreign: dict[Key, tuple[set[Key], str]] = {}

        def take(key: Key, by: Key | None) -> bool:
            """Whether ``key``, owned or named by ``by`` (None: owned), joins the set; another cluster's object
            does not (named, it is noted; owned, it uses its owner, which _users finds)."""
            owner = self.owner(self.objects[key])
            if owner and owner != cluster:
                if by is not None:
                    foreign.setdefault(key, (set(), owner))[0].add(by)
                return False
            return key not in stays

        grown = True
        while grown:
            grown = False
            uids = {self.objects[k]["metadata"].get("uid") for k in found}
            for key, obj in self.objects.items():
                if key in found:
                    continue
                owned = any(r.get("uid") in uids for r in obj["metadata"].get("ownerReferences") or [])
                if (owned or self._consumer(obj, found) is not None) and take(key, None):
                    found.add(key)
                    grown = True
            for key in list(found):
                for named in self._named(self.objects[key]):
                    if named in self.objects and named not in found and take(named, key):
                        found.add(named)
                        grown = True
        return found, foreign

    def _consumer(self, obj: Object, found: set[Key]) -> Key | None:
        """For a host, its consumer (consumerRef) when that is an object of the set."""
        if (split_api_version(obj["apiVersion"])[0], obj["kind"]) != HOST_KIND:
            return None
        consumer = (obj.get("spec") or {}).get("consumerRef") or {}
        group = split_api_version(consumer.get("apiVersion", ""))[0]
        key = (group, consumer.get("kind", ""), consumer.get("name", ""))
        return key if key in found else None

    def _uses(self, obj: Object) -> Iterator[Key]:
        """What ``obj`` depends on: its owners, and the objects it names."""
        for ref in obj["metadata"].get("ownerReferences") or []:
            if ref.get("uid") in self.by_uid:
                yield self.by_uid[ref["uid"]]
        yield from self._named(obj)

    def _users(self, found: set[Key]) -> dict[Key, set[Key]]:
        """For each object of ``found``, what outside it uses it: names it or is owned by it, or owns it (an owner
        that does not move: the object is its). The hosts the set consumes do not count (they stay by design)."""
        users: dict[Key, set[Key]] = {}
        for key, obj in {**self.others, **self.objects}.items():
            if key in found or self._consumer(obj, found) is not None:
                continue
            for used in self._uses(obj):
                if used in found:
                    users.setdefault(used, set()).add(key)
        for key in found:
            for ref in self.objects[key]["metadata"].get("ownerReferences") or []:
                owner = self.by_uid.get(ref.get("uid"))
                if owner is not None and owner not in found and owner[:2] != HOST_KIND:
                    users.setdefault(key, set()).add(owner)
        return users

    def _owned_by(self, key: Key, found: set[Key]) -> list[Key]:
        owners = (self.by_uid.get(r.get("uid")) for r in self.objects[key]["metadata"].get("ownerReferences") or [])
        return [k for k in owners if k in found]

    def _may_stay(self, key: Key, found: set[Key]) -> bool:
        """Whether ``key``, used outside the move, stays in the source rather than refusing the move."""
        if key[:2] not in SHAREABLE_KINDS or self._owned_by(key, found):
            return False
        return not any(k[:2] == HOST_KIND and
                       ((self.objects[k].get("spec") or {}).get("bmc") or {}).get("credentialsName") == key[2]
                       for k in found)

    def _why_refused(self, key: Key, users: set[Key], cluster: str, found: set[Key]) -> str:
        why = f"{self._name(key)}: used outside the move of cluster {cluster} by {self._list(users)}"
        owners = self._owned_by(key, found)
        if key[:2] in POOL_KINDS:
            return why + (": a pool is the record of the addresses it gave out, and split between two stores "
                          "each would give out the other's; give the cluster a pool of its own")
        if key[:2] in SHAREABLE_KINDS:
            if owners:
                return why + (f", and it is owned by {self._list(set(owners))}, which moves (deleted from the "
                              "source, its owner would take it along)")
            return why + ", and it holds the BMC credentials of a host that moves"
        return why + ": it cannot be in both stores, and moving it alone would leave either side half"

    def _name(self, key: Key) -> str:
        return f"{key[1]} {self.namespace}/{key[2]}"

    def _list(self, keys: set[Key]) -> str:
        return ", ".join(self._name(k) for k in sorted(keys, key=lambda k: (k[1], k[2])))

    def _named(self, obj: Object) -> Iterator[Key]:
        """The objects ``obj`` names (in its namespace): references in its spec, a machine's host annotations."""
        namespace = obj["metadata"].get("namespace")
        for annotation, kind in ((HOST_ANNOTATION, HOST_KIND), (HOST_CLAIM_ANNOTATION, ("metal3.io", "HostClaim"))):
            value = _annotations(obj).get(annotation)
            if value:
                ns, name = split_reference(value, namespace or "")
                if ns == namespace:
                    yield (*kind, name)
        cloned_from = _annotations(obj).get(CLONED_FROM_NAME)
        if cloned_from:  # without its kind (the collection's machine sets write the name only): <Kind>Template
            own = f"{obj['kind']}Template.{split_api_version(obj['apiVersion'])[0]}"
            kind_group = (_annotations(obj).get(CLONED_FROM_GROUPKIND) or own).split(".", 1)
            if len(kind_group) == 2:
                yield (kind_group[1], kind_group[0], cloned_from)
        if obj["kind"] == "HostClaim":
            yield ("metal3.io", "HardwareData", obj["metadata"]["name"])
        if obj["kind"] == bmh.KIND:
            yield ("metal3.io", "HardwareData", obj["metadata"]["name"])
        group = split_api_version(obj["apiVersion"])[0]
        if group == "ipam.metal3.io" and obj["kind"] in ("IPClaim", "IPAddress", "IPPrefixClaim", "IPPrefix"):
            # their pool and claim: {name} references without a kind (the kind is the referring one's)
            stem = "IPPrefix" if obj["kind"].startswith("IPPrefix") else "IP"
            for field_name, ref_kind in (("pool", f"{stem}Pool"), ("claim", f"{stem}Claim")):
                ref = (obj.get("spec") or {}).get(field_name) or {}
                if isinstance(ref, dict) and ref.get("name") and (ref.get("namespace") or namespace) == namespace:
                    yield (group, ref_kind, str(ref["name"]))
        yield from _references(obj.get("spec"), namespace or "", "")

    def _ordered(self, found: set[Key]) -> list[Key]:
        """Owners before dependents (Kahn's algorithm); ties in WORKLOAD_KINDS' order, then by name."""
        rank = {kind: i for i, kind in enumerate(self.infos)}
        owners: dict[Key, set[Key]] = {}
        for key in found:
            refs = self.objects[key]["metadata"].get("ownerReferences") or []
            owners[key] = {self.by_uid[r["uid"]] for r in refs if self.by_uid.get(r.get("uid")) in found} - {key}
        ordered: list[Key] = []
        placed: set[Key] = set()
        while len(ordered) < len(found):
            ready = sorted((k for k in found if k not in placed and owners[k] <= placed),
                           key=lambda k: (rank[k[:2]], k[2]))
            if not ready:  # an ownership cycle: the rest in kind order
                ready = sorted((k for k in found if k not in placed), key=lambda k: (rank[k[:2]], k[2]))
            ordered.append(ready[0])
            placed.add(ready[0])
        return ordered


def _references(value: Any, namespace: str, key: str) -> Iterator[Key]:
    """Objects a spec names: {kind, name} references, pool names (``...FromIPPool``, ``fromPoolRef``,
    ``...FromPool``), data templates, Secrets (user data, a Machine's bootstrap dataSecretName, BMC credentials,
    an identityRef)."""
    lowered = key.lower()
    if isinstance(value, str) and value:
        if lowered.endswith("fromippool") or lowered == "ipaddressesfromippool":
            yield ("ipam.metal3.io", "IPPool", value)
        elif lowered in ("credentialsname", "preprovisioningnetworkdataname", "datasecretname"):
            yield ("", "Secret", value)
        return
    if isinstance(value, list):
        for item in value:
            yield from _references(item, namespace, key)
        return
    if not isinstance(value, dict):
        return
    name = value.get("name")
    if isinstance(name, str) and name and (value.get("namespace") or namespace) == namespace:
        kind = value.get("kind")
        if isinstance(kind, str) and kind:
            group = value.get("apiGroup") or split_api_version(value.get("apiVersion") or "")[0]
            if not group and kind in ("IPPool", "IPPrefixPool"):
                group = "ipam.metal3.io"
            yield (group, kind, name)
        elif lowered == "datatemplate":
            yield ("infrastructure.cluster.x-k8s.io", "Metal3DataTemplate", name)
        elif lowered.endswith("frompool") or lowered == "frompoolref":
            yield ("ipam.metal3.io", "IPPool", name)
        elif lowered == "identityref" or lowered in ("userdata", "metadata", "networkdata", "secretref") and \
                set(value) <= {"name", "namespace"}:
            yield ("", "Secret", name)
    for child_key, child in value.items():
        if child_key != "name":
            yield from _references(child, namespace, child_key)


def _describe(key: Key, namespace: str) -> dict[str, str]:
    return {"kind": key[1], "namespace": namespace, "name": key[2]}


def _ref(obj: Object) -> Ref:
    return Ref.of(obj)


def _is_host(obj: Object) -> bool:
    return bool(obj["kind"] == bmh.KIND)


def _pause_patch(obj: Object, cluster: str) -> Object | None:
    """The one write that pauses ``obj`` for the move and records it; None when it is paused for it already."""
    annotations = _annotations(obj)
    if annotations.get(MOVING_ANNOTATION) == cluster:
        return None
    own = bmh.PAUSED_ANNOTATION if _is_host(obj) else pause.PAUSED_ANNOTATION
    by_user = own in annotations or bool((obj.get("spec") or {}).get("paused") and obj["kind"] == "Cluster")
    patch_annotations: dict[str, Any] = {MOVING_ANNOTATION: cluster}
    if by_user:
        patch_annotations[PAUSED_BY_USER_ANNOTATION] = "true"
    else:
        patch_annotations[own] = HOST_PAUSE_VALUE if _is_host(obj) else "true"
    if _is_host(obj):
        patch_annotations[bmh.STATUS_ANNOTATION] = json.dumps(obj.get("status") or {}, sort_keys=True)
    patch: Object = {"metadata": {"annotations": patch_annotations}}
    if obj["kind"] == "Cluster" and not by_user:
        patch["spec"] = {"paused": True}
    return patch


def _unpause_patch(obj: Object) -> Object | None:
    """The one write that ends the move for a target object: unpaused, unless its user had paused it."""
    annotations = _annotations(obj)
    if MOVING_ANNOTATION not in annotations:
        return None
    patch_annotations: dict[str, Any] = {MOVING_ANNOTATION: None, PAUSED_BY_USER_ANNOTATION: None}
    patch: Object = {"metadata": {"annotations": patch_annotations}}
    if PAUSED_BY_USER_ANNOTATION not in annotations:
        patch_annotations[bmh.PAUSED_ANNOTATION if _is_host(obj) else pause.PAUSED_ANNOTATION] = None
        if obj["kind"] == "Cluster":
            patch["spec"] = {"paused": None}
    return patch


def _target_object(obj: Object, uids: dict[str, str], status_subresource: bool,
                   identity: dict[str, str] | None | bool = False) -> Object:
    """``obj`` as it is created in the target: no server fields, owners at the target's uids; its status only for
    a kind without a status subresource (the others' is written after, through it); a HostClaim's identityRef
    as ``identity`` says (False: as it is; None: none, its hosts are the target's)."""
    new: Object = clone(obj)
    if identity is None:
        new["spec"].pop("identityRef", None)
    elif identity:
        new["spec"]["identityRef"] = identity
    if status_subresource:
        new.pop("status", None)
    metadata = new["metadata"]
    for name in SERVER_METADATA:
        metadata.pop(name, None)
    metadata["annotations"] = {**(metadata.get("annotations") or {}), SOURCE_UID_ANNOTATION: obj["metadata"]["uid"]}
    owners = []
    for ref in metadata.get("ownerReferences") or []:
        if ref.get("uid") in uids:  # an owner that does not move would be missing: the target would collect it
            owners.append({**ref, "uid": uids[ref["uid"]]})
    if owners:
        metadata["ownerReferences"] = owners
    else:
        metadata.pop("ownerReferences", None)
    return new


def _has_status(graph: _Graph, obj: Object) -> bool:
    return bool(graph.infos[_key(obj)[:2]].status_subresource)


def _identities(target: Store, graph: _Graph, target_graph: _Graph, keys: list[Key], namespace: str,
                claims_identity_ref: str | None) -> dict[Key, dict[str, str] | None]:
    """How each bound HostClaim reaches its host once moved (its hosts stay where they are): the host is the
    target's (None: no identityRef), else through the Secret ``claims_identity_ref`` names in the target, else
    through the identityRef it has; refused when there is none of these."""
    identities: dict[Key, dict[str, str] | None] = {}
    for key in keys:
        obj = graph.objects[key]
        bound = (obj.get("status") or {}).get("bareMetalHost") or {}
        if obj["kind"] != "HostClaim" or not bound.get("name") or \
                (*HOST_KIND, bound["name"]) in keys and bound.get("namespace") == namespace:
            continue
        if target.get_if_exists(Ref(bmh.API, bmh.KIND, bound["name"], bound["namespace"])) is not None:
            identities[key] = None  # back with its hosts
        elif claims_identity_ref:
            if ("", "Secret", claims_identity_ref) not in target_graph.objects:
                raise MoveRefused(f"claims_identity_ref: Secret {namespace}/{claims_identity_ref} not found in the "
                                  "target; it holds the kubeconfig by which moved HostClaims reach their hosts")
            identities[key] = {"name": claims_identity_ref}
        elif not (obj.get("spec") or {}).get("identityRef"):
            raise MoveRefused(f"{_ref(obj)}: bound to host {bound['namespace']}/{bound['name']}, which stays in "
                              "the source: give claims_identity_ref (a Secret of the target's namespace whose "
                              "kubeconfig reaches the hosts' cluster), so that the claim keeps its host")
    return identities


def _check(graph: _Graph, target_graph: _Graph, keys: list[Key], namespace: str, cluster: str) -> None:
    """Refuse, before anything is written, a move that cannot be made."""
    for key in keys:
        obj = graph.objects[key]
        if _is_host(obj) and MOVING_ANNOTATION not in _annotations(obj):
            state = bmh.host_state(obj)
            if state not in STEADY_HOST_STATES or obj["metadata"].get("deletionTimestamp"):
                raise MoveRefused(f"{_ref(obj)}: is {state or 'not registered'}, not in a steady state "
                                  f"({', '.join(sorted(STEADY_HOST_STATES))}); move the cluster once it is")
        there = target_graph.objects.get(key)
        if there is not None and _annotations(there).get(SOURCE_UID_ANNOTATION) != obj["metadata"]["uid"]:
            raise MoveRefused(f"{_ref(obj)}: exists in the target and was not moved there from this source "
                              f"object (uid {obj['metadata']['uid']}); it is left alone, and nothing was moved")
    moved = [o for k, o in target_graph.objects.items() if k[:2] in CLUSTER_KINDS and k[2] == cluster]
    if not keys and not any(SOURCE_UID_ANNOTATION in _annotations(o) for o in moved):
        raise MoveRefused(f"Cluster {namespace}/{cluster}: not found in the source (nor moved to the target)")


def _moving(target_graph: _Graph, cluster: str) -> list[Object]:
    """The target's objects of the cluster's move (still paused for it), in the order a list of the target gives
    them: WORKLOAD_KINDS' order, then by name."""
    rank = {kind: i for i, kind in enumerate(target_graph.infos)}
    return [target_graph.objects[k] for k in sorted(target_graph.objects, key=lambda k: (rank[k[:2]], k[2]))
            if _annotations(target_graph.objects[k]).get(MOVING_ANNOTATION) == cluster]


def move_cluster(source: Store, target: Store, cluster: str, namespace: str, include_hosts: bool = False,
                 dry_run: bool = False, claims_identity_ref: str | None = None) -> MoveResult:
    """Move the cluster's objects from ``source`` to ``target`` (see the module's docstring); ``dry_run``: only
    say what would move. ``claims_identity_ref``: the Secret (in the target's namespace) through which moved
    HostClaims reach the hosts that stay behind."""
    check_name(cluster, "cluster")
    check_namespace(namespace, "namespace")
    graph = _Graph(source, namespace, include_hosts, source=True)
    has_cluster = any((*kind, cluster) in graph.objects for kind in CLUSTER_KINDS)
    keys, stays = graph.discover(cluster) if has_cluster or any(
        _annotations(o).get(MOVING_ANNOTATION) == cluster for o in graph.objects.values()) else ([], {})
    stayed = [{**_describe(k, namespace), "reason": why} for k, why in sorted(stays.items(), key=lambda i: i[0][1:])]
    if claims_identity_ref:
        check_name(claims_identity_ref, "claims_identity_ref")
    # The target's side of the move, listed once: kept up to date below with what this run writes there.
    target_graph = _Graph(target, namespace, include_hosts)
    _check(graph, target_graph, keys, namespace, cluster)
    identities = _identities(target, graph, target_graph, keys, namespace, claims_identity_ref)
    moved = [_describe(k, namespace) for k in keys]
    objects = [graph.objects[k] for k in keys]
    if dry_run:
        return MoveResult(None, bool(objects or _moving(target_graph, cluster)), None,
                          (f"would move {len(objects)} objects" if objects else "nothing to move") + _staying(stayed),
                          moved=moved, stayed=stayed)
    changed = False
    # 1. pause in the source
    for i, obj in enumerate(objects):
        patch = _pause_patch(obj, cluster)
        if patch is not None:
            objects[i] = source.patch(_ref(obj), patch)
            changed = True
    # 2. create in the target, owners first, then the status
    uids: dict[str, str] = {}
    for obj in objects:
        there = target_graph.objects.get(_key(obj))
        if there is None:
            there = target.create(_target_object(obj, uids, _has_status(graph, obj),
                                                 identities.get(_key(obj), False)))
            changed = True
        uids[obj["metadata"]["uid"]] = there["metadata"]["uid"]
        if _has_status(graph, obj) and obj.get("status") and there.get("status") != obj["status"]:
            there = target.update_status({**there, "status": clone(obj["status"])})
            changed = True
        target_graph.objects[_key(obj)] = there
    # 3. delete from the source, dependents first, without finalizers: no reconcile acts on the deletion
    for obj in reversed(objects):
        try:
            if obj["metadata"].get("finalizers"):
                source.patch(_ref(obj), {"metadata": {"finalizers": None}})
            source.delete(_ref(obj))
        except NotFound:
            pass
        changed = True
    # 4. unpause in the target what the move paused: all the target holds of the move (the graph as step 2 left
    # it), not only what this run found in the source: a run after a crash may have deleted some sources already
    for obj in _moving(target_graph, cluster):
        patch = _unpause_patch(obj)
        if patch is not None:
            target.patch(_ref(obj), patch)
            changed = True
    if not objects and not changed:
        return MoveResult(None, False, None, f"Cluster {namespace}/{cluster} was moved already" + _staying(stayed),
                          stayed=stayed)
    return MoveResult(None, changed, None,
                      (f"moved {len(objects)} objects" if objects else "finished the move") + _staying(stayed),
                      moved=moved, stayed=stayed)


def _staying(stayed: list[dict[str, str]]) -> str:
    return f"; {len(stayed)} of its graph stay in the source (see stayed)" if stayed else ""
