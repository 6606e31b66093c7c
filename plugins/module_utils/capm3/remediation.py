# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Metal3Remediation: CAPM3's remediation controller, strategy Reboot.

A MachineHealthCheck whose remediation template is a Metal3RemediationTemplate makes, for an unhealthy Machine, a
Metal3Remediation of the Machine's name owned by it. Each step here moves it on as CAPM3's controller does:

- ``""`` -> ``Running``, ``status.lastRemediated`` now;
- ``Running``: the finalizer; the host powered off through the annotation
  ``reboot.metal3.io/metal3-remediation-<remediation UID>`` (baremetal-operator holds a host off while any
  ``reboot.metal3.io/...`` annotation is on it); once it is off, the workload cluster's Node - its labels and
  annotations kept first on the remediation - deleted; then ``Waiting``;
- ``Waiting``: the annotation removed, so the host powers on; once it is on and its Node is back, the Node
  gets back the labels and annotations it lost (those it has win), and the finalizer goes (the operators put
  theirs back: the remediation then waits for the MachineHealthCheck, which deletes it once the Node is
  healthy). The Node not back within ``spec.strategy.timeoutSeconds`` (600 by default) of ``lastRemediated``:
  again from ``Running``, up to ``retryLimit`` more times; then the Machine is told it cannot be remediated
  (condition ``OwnerRemediated`` False, reason ``WaitingForRemediation``), the host is marked
  ``capm3.metal3.io/unhealthy`` (no machine chooses it again), and the phase is ``Deleting machine``: Cluster
  API deletes the Machine, its host is deprovisioned and released;
- a host whose ``spec.online`` is false: ``Failed``, whatever the phase.

Where this differs from CAPM3, on purpose:

- CAPM3 writes ``OwnerRemediated`` only among the Machine's deprecated v1beta1 conditions, which Cluster API
  v1.14's MachineSet and KubeadmControlPlane no longer read when they pick machines to delete: here it is
  written in both lists (``status.conditions`` and ``status.v1beta2.conditions`` at v1beta1), so the machine
  is replaced.
- CAPM3 has no deletion path (a remediation deleted in ``Deleting machine`` or ``Failed`` keeps its finalizer
  for good, one deleted while ``Running`` leaves its host powered off): here a remediation being deleted takes
  its power-off annotation off the host and then lets itself go.
- CAPM3 marks "the Node is to be restored" with its finalizer, which the operators put back on every reconcile:
  here the kept labels mark it.
- Out-of-service taints (CAPM3 uses them on Kubernetes 1.28 and later, in place of deleting the Node) are not
  used: the Node is deleted.
- HostClaim mode (the seed: HostClaims are transparent for remediation): the Metal3Machine's HostClaim is
  annotated and checked as a host would be (``spec.poweredOn`` for ``spec.online``); the claim holds what serves
  it off while the annotation is there (compute/). The unhealthy mark stays on the claim: a tenant writes its
  claim's annotations, and must not mark hosts of the pool.
"""
from __future__ import annotations

import contextlib
import datetime
import json
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import (
    CAPI_API,
    CLUSTER_NAME_LABEL,
    HOST_ANNOTATION,
    HOST_CLAIM_ANNOTATION,
    INFRA_API,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.workload import open_workload
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Metal3Error, NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref, parse_time, rfc3339
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.core.reconcile import Result
from ansible_collections.metal3.baremetal.plugins.module_utils.core.retry import retry_on_conflict
from ansible_collections.metal3.baremetal.plugins.module_utils.hostclaims.hostclaim import KIND as HOST_CLAIM_KIND
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import API as BMH_API
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.claim import UNHEALTHY_ANNOTATIONS
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.writes import (
    ensure_finalizer,
    remove_finalizer,
    set_condition,
)

KIND = "Metal3Remediation"
REMEDIATION_FINALIZER = "metal3remediation.infrastructure.cluster.x-k8s.io"
POWER_OFF_ANNOTATION_PREFIX = "reboot.metal3.io/metal3-remediation-"
POWER_OFF_REQUEST = '{"mode":"hard","force":false}'  # baremetal-operator's reboot arguments, as CAPM3 writes them
UNHEALTHY_ANNOTATION, UNHEALTHY_VALUE = UNHEALTHY_ANNOTATIONS[0], "capm3/UnhealthyNode"
NODE_ANNOTATIONS_BACKUP = "remediation.metal3.io/node-annotations-backup"
NODE_LABELS_BACKUP = "remediation.metal3.io/node-labels-backup"
# A Node's annotations may hold up to Kubernetes' 256 KiB, which is also all a remediation's annotations may hold:
# more than this of them is not kept (its labels are), rather than a backup that can never be written.
ANNOTATIONS_BACKUP_LIMIT = 128 * 1024
OWNER_REMEDIATED = "OwnerRemediated"
WAITING_FOR_REMEDIATION = "WaitingForRemediation"

RUNNING, WAITING, DELETING_MACHINE, FAILED = "Running", "Waiting", "Deleting machine", "Failed"
REBOOT = "Reboot"
DEFAULT_TIMEOUT = 600  # seconds, CAPM3's when spec.strategy.timeoutSeconds is not set
SOON, WAIT = 1.0, 5.0  # CAPM3's requeues: after a write it reads back, and while the host or the Node moves


@dataclass
class RemediationResult(Result):
    phase: str = ""


WorkloadOpener = Callable[[Store, str, str, "OutboundPolicy | None"], "Store | None"]


def reconcile_remediation(store: Store, ref: Ref, dry_run: bool = False, outbound: OutboundPolicy | None = None,
                          clock: Callable[[], datetime.datetime] | None = None,
                          workload: WorkloadOpener = open_workload) -> RemediationResult:
    """One step of the Metal3Remediation ``ref`` (module docstring). ``workload`` opens a Cluster's workload
    cluster (capm3/workload.py's, through its kubeconfig Secret)."""
    obj = store.get_if_exists(ref)
    if obj is None:
        return RemediationResult(None, message="gone")
    return _Remediation(store, ref, obj, dry_run, outbound,
                        clock or (lambda: datetime.datetime.now(datetime.UTC)), workload).step()


class _Remediation:
    def __init__(self, store: Store, ref: Ref, obj: Object, dry_run: bool, outbound: OutboundPolicy | None,
                 clock: Callable[[], datetime.datetime], workload: WorkloadOpener) -> None:
        self.store, self.ref, self.obj, self.dry_run, self.outbound, self.clock = \
            store, ref, obj, dry_run, outbound, clock
        self.open_workload = workload
        self.changed = False
        self.status: dict[str, Any] = dict(obj.get("status") or {})
        self.strategy: dict[str, Any] = (obj.get("spec") or {}).get("strategy") or {}

    @property
    def power_off_annotation(self) -> str:
        return POWER_OFF_ANNOTATION_PREFIX + str(self.obj["metadata"].get("uid", ""))

    def result(self, requeue_after: float | None, message: str = "") -> RemediationResult:
        return RemediationResult(self.obj, self.changed, requeue_after, message, phase=self.status.get("phase", ""))

    # -- the steps ------------------------------------------------------------------------------------------------
    def step(self) -> RemediationResult:
        try:
            machine = self._owner_machine()
            host = self._host(machine)
        except NotFound as e:
            if self.obj["metadata"].get("deletionTimestamp"):
                return self._let_go(None)
            return self.result(WAIT, str(e))
        if self.obj["metadata"].get("deletionTimestamp"):
            # The MachineHealthCheck deletes it once the Node is healthy again, maybe before a step saw the Node
            # back: what it lost is given back first, if the workload cluster answers.
            with contextlib.suppress(Metal3Error):
                self._restore_if_back(machine)
            return self._let_go(host)
        if not (host.get("spec") or {}).get(_POWER_FIELD[host["kind"]]):
            self._set_status(phase=FAILED)
            return self.result(None, f"{_named(host)} is offline (spec.{_POWER_FIELD[host['kind']]} false)")
        strategy = self.strategy.get("type", "")
        if strategy != REBOOT:
            return self.result(None, f"unsupported remediation strategy {strategy!r}: only {REBOOT} is")
        phase = self.status.get("phase", "")
        if phase == "":
            self._set_status(phase=RUNNING, lastRemediated=rfc3339(self.clock()))
            return self.result(SOON, "remediation started")
        if phase in (DELETING_MACHINE, FAILED):
            return self.result(None, phase)
        try:
            return self._running(machine, host) if phase == RUNNING else self._waiting(machine, host)
        except Metal3Error as e:  # the workload cluster's errors say so (_asked)
            return self.result(WAIT, str(e))

    def _running(self, machine: Object, host: Object) -> RemediationResult:
        if REMEDIATION_FINALIZER not in (self.obj["metadata"].get("finalizers") or []):
            self.obj = ensure_finalizer(self.store, self.ref, REMEDIATION_FINALIZER, self.dry_run)
            self.changed = True
            return self.result(SOON, "finalizer added")
        annotations = host["metadata"].get("annotations") or {}
        if self.power_off_annotation not in annotations:
            self._annotate_host(host, {self.power_off_annotation: POWER_OFF_REQUEST})
            return self.result(WAIT, f"{_named(host)} asked to power off")
        if (host.get("status") or {}).get("poweredOn"):
            return self.result(WAIT, f"waiting for {_named(host)} to power off")
        node_ref = self._node_ref(machine)
        with self._workload(machine) as workload:
            node = _asked(workload.get_if_exists, node_ref)
            if node is not None:
                kept = self._back_up(node)
                if kept:
                    return self.result(SOON, f"Node {node['metadata']['name']}'s {kept} kept")
                if not node["metadata"].get("deletionTimestamp"):
                    _asked(workload.delete, node_ref, dry_run=self.dry_run)
                    self.changed = True
                return self.result(WAIT, f"waiting for Node {node['metadata']['name']} to go")
        self._set_status(phase=WAITING)
        return self.result(WAIT, "host powered off and its Node gone")

    def _waiting(self, machine: Object, host: Object) -> RemediationResult:
        if self.power_off_annotation in (host["metadata"].get("annotations") or {}):
            host = self._annotate_host(host, {self.power_off_annotation: None})
        if not (host.get("status") or {}).get("poweredOn"):
            return self.result(WAIT, f"waiting for {_named(host)} to power on")
        back = self._restore_if_back(machine)
        if back:
            self._unfinalize()
            return self.result(WAIT, f"Node {back} is back")
        if not self._timed_out():
            return self.result(WAIT, "waiting for the Node to be healthy (the MachineHealthCheck then deletes "
                                     "this remediation)")
        retries, limit = int(self.status.get("retryCount") or 0), int(self.strategy.get("retryLimit") or 0)
        if limit > 0 and retries != limit:  # CAPM3's test: equal, not at least
            self._set_status(phase=RUNNING, lastRemediated=rfc3339(self.clock()), retryCount=retries + 1)
            return self.result(SOON, f"the Node did not come back: retry {retries + 1} of {limit}")
        try:
            self._owner_cannot_be_remediated(machine)
        except Metal3Error as e:
            return self.result(WAIT, f"Machine {machine['metadata']['name']}: OwnerRemediated not written: {e}")
        self._annotate_host(host, {UNHEALTHY_ANNOTATION: UNHEALTHY_VALUE})
        self._set_status(phase=DELETING_MACHINE)
        return self.result(None, f"the Node did not come back after {limit} retries: Cluster API replaces "
                                 f"Machine {machine['metadata']['name']}")

    def _let_go(self, host: Object | None) -> RemediationResult:
        """Being deleted: the host is not left powered off for a remediation that is gone."""
        if host is not None and self.power_off_annotation in (host["metadata"].get("annotations") or {}):
            self._annotate_host(host, {self.power_off_annotation: None})
        if REMEDIATION_FINALIZER in (self.obj["metadata"].get("finalizers") or []):
            self._unfinalize()
        return self.result(None, "deleted")

    # -- what it reads ----------------------------------------------------------------------------------------
    def _owner_machine(self) -> Object:
        owner = next((r for r in self.obj["metadata"].get("ownerReferences") or []
                      if r.get("kind") == "Machine" and str(r.get("apiVersion", "")).startswith("cluster.x-k8s.io/")),
                     None)
        if owner is None:
            raise NotFound(f"{KIND} {self.ref.namespace}/{self.ref.name}: no owner Machine (a MachineHealthCheck "
                           "makes it owned by the Machine it remediates)")
        machine = self.store.get_if_exists(Ref(CAPI_API, "Machine", owner["name"], self.ref.namespace))
        if machine is None:
            raise NotFound(f"owner Machine {self.ref.namespace}/{owner['name']} not found")
        if owner.get("uid") and owner["uid"] != machine["metadata"].get("uid"):
            # Its owner was deleted and a Machine of that name made since: the garbage collector deletes this one.
            raise NotFound(f"owner Machine {self.ref.namespace}/{owner['name']} (uid {owner['uid']}) not found: "
                           f"Machine {owner['name']} is another one")
        return machine

    def _host(self, machine: Object) -> Object:
        """The host of the Machine's Metal3Machine (its annotation's name, in its own namespace, as CAPM3)."""
        name = ((machine.get("spec") or {}).get("infrastructureRef") or {}).get("name", "")
        m3m = self.store.get_if_exists(Ref(INFRA_API, "Metal3Machine", name, self.ref.namespace)) if name else None
        if m3m is None:
            raise NotFound(f"Metal3Machine {self.ref.namespace}/{name} of Machine {machine['metadata']['name']} "
                           "not found")
        annotations = m3m["metadata"].get("annotations") or {}
        if HOST_CLAIM_ANNOTATION in annotations:
            # HostClaim mode: the claim is remediated as a host would be, and passes the power-off request and the
            # unhealthy mark on to what serves it (a host of this cluster or another, a virtual machine).
            reference = annotations[HOST_CLAIM_ANNOTATION]
            claim_name = reference.rpartition("/")[2]
            claim = self.store.get_if_exists(Ref(BMH_API, HOST_CLAIM_KIND, claim_name, self.ref.namespace)) \
                if claim_name else None
            if claim is None:
                raise NotFound(f"no HostClaim for unhealthy machine {self.ref.namespace}/{name} "
                               f"({HOST_CLAIM_ANNOTATION}: {reference!r})")
            return claim
        reference = annotations.get(HOST_ANNOTATION, "")
        host_name = reference.rpartition("/")[2]
        host = self.store.get_if_exists(Ref(BMH_API, "BareMetalHost", host_name, self.ref.namespace)) \
            if host_name else None
        if host is None:
            raise NotFound(f"no host for unhealthy machine {self.ref.namespace}/{name} "
                           f"({HOST_ANNOTATION}: {reference!r})")
        return host

    def _workload(self, machine: Object) -> Store:
        cluster = (machine.get("spec") or {}).get("clusterName") or \
            (machine["metadata"].get("labels") or {}).get(CLUSTER_NAME_LABEL, "")
        workload = _asked(self.open_workload, self.store, self.ref.namespace, cluster, self.outbound) \
            if cluster else None
        if workload is None:
            raise NotFound(f"no kubeconfig Secret for the workload cluster of Machine {machine['metadata']['name']}")
        return workload

    def _node_ref(self, machine: Object) -> Ref:
        name = (((machine.get("status") or {}).get("nodeRef")) or {}).get("name")
        if not name:
            raise NotFound(f"Machine {machine['metadata']['name']} names no Node (status.nodeRef)")
        return Ref("v1", "Node", name, "")

    def _restore_if_back(self, machine: Object) -> str:
        """The Node's name if it is back and got what it lost now; '' when there is nothing (more) to restore or
        it is not back. What the deleted Node had is kept until then (CAPM3 reads its own finalizer for that,
        which the operators put back on every reconcile)."""
        if NODE_LABELS_BACKUP not in (self.obj["metadata"].get("annotations") or {}):
            return ""
        node_ref = self._node_ref(machine)
        with self._workload(machine) as workload:
            node = _asked(workload.get_if_exists, node_ref)
            if node is None:
                return ""
            self._restore(workload, node, (machine.get("spec") or {}).get("providerID", ""))
        self._forget_backup()
        return str(node["metadata"]["name"])

    def _timed_out(self) -> bool:
        last = self.status.get("lastRemediated")
        if not last:
            return False
        timeout = int(self.strategy.get("timeoutSeconds") or DEFAULT_TIMEOUT)
        return parse_time(last) + datetime.timedelta(seconds=timeout) < self.clock()

    # -- what it writes ---------------------------------------------------------------------------------------
    def _set_status(self, **fields: Any) -> None:
        def write() -> Object:
            current = self.store.get(self.ref)
            status = {**(current.get("status") or {}), **fields}
            if status == current.get("status"):
                return current
            self.changed = True
            return self.store.update_status({**current, "status": status}, dry_run=self.dry_run)

        self.obj = retry_on_conflict(write)
        self.status = dict(self.obj.get("status") or {})

    def _annotate_host(self, host: Object, annotations: dict[str, str | None]) -> Object:
        self.changed = True
        return self.store.patch(Ref.of(host), {"metadata": {"annotations": annotations}}, dry_run=self.dry_run)

    def _back_up(self, node: Object) -> str:
        """The Node's labels and annotations on the remediation (annotations only up to
        ANNOTATIONS_BACKUP_LIMIT): what was kept, or '' when the remediation had it already."""
        annotations = _marshal(node["metadata"].get("annotations"))
        fits = len(annotations) <= ANNOTATIONS_BACKUP_LIMIT
        backup = {NODE_ANNOTATIONS_BACKUP: annotations if fits else "",
                  NODE_LABELS_BACKUP: _marshal(node["metadata"].get("labels"))}
        current = self.obj["metadata"].get("annotations") or {}
        if all(current.get(key) == value for key, value in backup.items()):
            return ""
        self.obj = self.store.patch(self.ref, {"metadata": {"annotations": backup}}, dry_run=self.dry_run)
        self.changed = True
        return "labels and annotations" if fits else \
            f"labels (not its annotations: more than {ANNOTATIONS_BACKUP_LIMIT // 1024} KiB)"

    def _restore(self, workload: Store, node: Object, provider_id: str) -> None:
        """The kept labels and annotations the recreated Node lacks (what it has wins, as CAPM3), and the
        Machine's providerID if kubelet set none (the metal3.io/uuid workflow: the Metal3Machine set it once, on
        the Node that was deleted)."""
        kept = self.obj["metadata"].get("annotations") or {}
        metadata: dict[str, dict[str, str]] = {}
        for field, key in (("annotations", NODE_ANNOTATIONS_BACKUP), ("labels", NODE_LABELS_BACKUP)):
            have = node["metadata"].get(field) or {}
            missing = {k: v for k, v in _unmarshal(kept.get(key, "")).items() if k not in have}
            if missing:
                metadata[field] = missing
        patch: dict[str, Any] = {"metadata": metadata} if metadata else {}
        if provider_id and not (node.get("spec") or {}).get("providerID"):
            patch["spec"] = {"providerID": provider_id}
        if patch:
            _asked(workload.patch, Ref("v1", "Node", node["metadata"]["name"], ""), patch, dry_run=self.dry_run)
            self.changed = True

    def _unfinalize(self) -> None:
        remove_finalizer(self.store, self.ref, REMEDIATION_FINALIZER, self.dry_run)
        self.obj = self.store.get_if_exists(self.ref) or self.obj
        self.changed = True

    def _forget_backup(self) -> None:
        kept = self.obj["metadata"].get("annotations") or {}
        if NODE_ANNOTATIONS_BACKUP in kept or NODE_LABELS_BACKUP in kept:
            self.obj = self.store.patch(self.ref, {"metadata": {"annotations": {
                NODE_ANNOTATIONS_BACKUP: None, NODE_LABELS_BACKUP: None}}}, dry_run=self.dry_run)
            self.changed = True

    def _owner_cannot_be_remediated(self, machine: Object) -> None:
        """OwnerRemediated False on the Machine, in its v1beta1 conditions and in its v1beta2 ones (those
        Cluster API's MachineSet and KubeadmControlPlane read to delete it)."""
        def write() -> Object:
            current = self.store.get(Ref.of(machine))
            status = dict(current.get("status") or {})
            v1beta1 = set_condition(status.get("conditions"), OWNER_REMEDIATED, False, WAITING_FOR_REMEDIATION)
            owner = next(c for c in v1beta1 if c["type"] == OWNER_REMEDIATED)
            owner["severity"] = "Warning"
            del owner["message"]  # a v1beta1 condition's message, when given, is not empty (CAPM3 gives none)
            status["conditions"] = v1beta1
            v1beta2 = dict(status.get("v1beta2") or {})
            v1beta2["conditions"] = set_condition(v1beta2.get("conditions"), OWNER_REMEDIATED, False,
                                                  WAITING_FOR_REMEDIATION)
            status["v1beta2"] = v1beta2
            if status == current.get("status"):
                return current
            self.changed = True
            return self.store.update_status({**current, "status": status}, dry_run=self.dry_run)

        retry_on_conflict(write)


_T = TypeVar("_T")
# What says a host or a HostClaim is to be on.
_POWER_FIELD = {"BareMetalHost": "online", HOST_CLAIM_KIND: "poweredOn"}


def _named(target: Object) -> str:
    return f"{'host' if target['kind'] == 'BareMetalHost' else target['kind']} {target['metadata']['name']}"


def _asked(call: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``call`` to the workload cluster (or to open it); its failure says it was the workload cluster's."""
    try:
        return call(*args, **kwargs)
    except Metal3Error as e:
        raise Metal3Error(f"the workload cluster: {e}") from e


def _marshal(values: dict[str, str] | None) -> str:
    """As CAPM3 keeps a Node's labels or annotations: JSON, or '' for none."""
    return json.dumps(values, sort_keys=True, separators=(",", ":")) if values else ""


def _unmarshal(text: str) -> dict[str, str]:
    """A kept set of labels or annotations; a backup that is not one (edited by hand) restores nothing."""
    try:
        values = json.loads(text) if text else {}
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in values.items()} if isinstance(values, dict) else {}
