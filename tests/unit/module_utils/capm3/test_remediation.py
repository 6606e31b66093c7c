"""Metal3Remediation, strategy Reboot (capm3/remediation.py), as CAPM3's controller runs it: on a real SQLite store,
with a fake workload cluster's Nodes and a clock the test moves; the host powers off and on as baremetal-operator
would, by the test, when the remediation's annotation comes and goes."""
from __future__ import annotations

import copy
import datetime
import json

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import CAPI_API, INFRA_API
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.remediation import (
    DELETING_MACHINE,
    FAILED,
    NODE_ANNOTATIONS_BACKUP,
    NODE_LABELS_BACKUP,
    POWER_OFF_REQUEST,
    REMEDIATION_FINALIZER,
    RUNNING,
    WAITING,
    reconcile_remediation,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Unavailable
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

NS = "ns"
BMH_API = "metal3.io/v1alpha1"
REMEDIATION = Ref(INFRA_API, "Metal3Remediation", "m-0", NS)
HOST = Ref(BMH_API, "BareMetalHost", "host-0", NS)
CLAIM = Ref(BMH_API, "HostClaim", "hc-0", NS)
MACHINE = Ref(CAPI_API, "Machine", "m-0", NS)
START = datetime.datetime(2026, 11, 28, 12, 0, 0, tzinfo=datetime.UTC)
WAITING_FOR_HEALTH = "waiting for the Node to be healthy (the MachineHealthCheck then deletes this remediation)"


class Workload:
    """A workload cluster's Nodes, as the remediation reads, patches and deletes them."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict] = {}
        self.opened = 0

    def __enter__(self):
        self.opened += 1
        return self

    def __exit__(self, *exc):
        return False

    def get_if_exists(self, ref: Ref):
        assert (ref.api_version, ref.kind, ref.namespace) == ("v1", "Node", "")
        return copy.deepcopy(self.nodes.get(ref.name))

    def delete(self, ref: Ref, dry_run: bool = False):
        del self.nodes[ref.name]

    def patch(self, ref: Ref, patch: dict, dry_run: bool = False):
        node = self.nodes[ref.name]
        for field, values in (patch.get("metadata") or {}).items():
            node["metadata"].setdefault(field, {}).update(values)
        node.setdefault("spec", {}).update(patch.get("spec") or {})
        return copy.deepcopy(node)


class Lab:
    """One Machine of Cluster c, its Metal3Machine on host-0 (``claim``: on HostClaim hc-0, HostClaim mode) and
    its Node; a MachineHealthCheck's Metal3Remediation for it; the clock. The test powers the host (or the claim)
    off and on as what serves it would."""

    def __init__(self, store: LocalStore, strategy: dict | None, claim: bool = False) -> None:
        self.store, self.workload, self.now = store, Workload(), START
        self.target, self.named = (CLAIM, "HostClaim hc-0") if claim else (HOST, "host host-0")
        store.create({"apiVersion": BMH_API, "kind": self.target.kind,
                      "metadata": {"name": self.target.name, "namespace": NS},
                      "spec": {"poweredOn": True} if claim else {"online": True}})
        self.set_powered(True)
        annotation = "metal3.io/HostClaim" if claim else "metal3.io/BareMetalHost"
        store.create({"apiVersion": INFRA_API, "kind": "Metal3Machine",
                      "metadata": {"name": "m3m-0", "namespace": NS,
                                   "annotations": {annotation: f"{NS}/{self.target.name}"}}, "spec": {}})
        machine = store.create({"apiVersion": CAPI_API, "kind": "Machine", "metadata": {"name": "m-0", "namespace": NS},
                                "spec": {"clusterName": "c", "infrastructureRef": {"name": "m3m-0"},
                                         "providerID": "metal3://ns/host-0/m3m-0"}})
        store.update_status({**machine, "status": {"nodeRef": {"name": "node-0"}}})
        self.workload.nodes["node-0"] = {"metadata": {"name": "node-0", "labels": {"role": "worker", "zone": "a"},
                                                      "annotations": {"note": "kept"}}}
        store.create({"apiVersion": INFRA_API, "kind": "Metal3Remediation",
                      "metadata": {"name": "m-0", "namespace": NS, "ownerReferences": [
                          {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "name": "m-0",
                           "uid": machine["metadata"]["uid"]}]},
                      "spec": {"strategy": strategy} if strategy is not None else {}})

    def step(self):
        return reconcile_remediation(self.store, REMEDIATION, clock=lambda: self.now,
                                     workload=lambda store, ns, cluster, outbound: self.workload)

    def steps(self, n: int):
        return [self.step() for _step in range(n)]

    def remediation(self) -> dict:
        return self.store.get(REMEDIATION)

    def host(self) -> dict:
        return self.store.get(self.target)

    def power_off_requested(self) -> bool:
        annotations = self.host()["metadata"].get("annotations") or {}
        return any(key.startswith("reboot.metal3.io/metal3-remediation-") for key in annotations)

    def set_powered(self, on: bool) -> None:
        host = self.store.get(self.target)
        self.store.update_status({**host, "status": {**(host.get("status") or {}), "poweredOn": on}})

    def until_node_deleted(self) -> None:
        """Running: the finalizer, the power-off request, the host going off, the Node kept and deleted."""
        assert self.step().message == "finalizer added"
        assert self.step().message == f"{self.named} asked to power off"
        assert self.power_off_requested()
        assert self.step().message == f"waiting for {self.named} to power off"
        self.set_powered(False)
        assert self.step().message == "Node node-0's labels and annotations kept"
        assert self.step().message == "waiting for Node node-0 to go"
        assert "node-0" not in self.workload.nodes
        result = self.step()
        assert (result.phase, result.message) == (WAITING, "host powered off and its Node gone")


@pytest.fixture
def store(tmp_path):
    with LocalStore(str(tmp_path / "store.db")) as opened:
        yield opened


REBOOT = {"type": "Reboot", "retryLimit": 1, "timeoutSeconds": 300}


@pytest.mark.parametrize("claim", [False, True], ids=["host", "HostClaim mode"])
def test_a_reboot_that_brings_the_node_back_restores_what_it_lost_and_lets_go(store, claim):
    lab = Lab(store, REBOOT, claim)
    started = lab.step()
    assert (started.phase, started.requeue_after) == (RUNNING, 1.0)
    assert lab.remediation()["status"]["lastRemediated"] == "2026-11-28T12:00:00Z"
    lab.until_node_deleted()
    kept = lab.remediation()["metadata"]["annotations"]
    assert json.loads(kept[NODE_LABELS_BACKUP]) == {"role": "worker", "zone": "a"}
    assert json.loads(kept[NODE_ANNOTATIONS_BACKUP]) == {"note": "kept"}

    waiting = lab.step()  # the request taken off: the host powers on
    assert waiting.message == f"waiting for {lab.named} to power on" and not lab.power_off_requested()
    lab.set_powered(True)
    assert lab.step().message == WAITING_FOR_HEALTH
    # kubelet registers the Node again, with a label of its own that wins over the kept one.
    lab.workload.nodes["node-0"] = {"metadata": {"name": "node-0", "labels": {"zone": "b"}}}
    back = lab.step()
    assert (back.phase, back.message) == (WAITING, "Node node-0 is back")
    assert lab.workload.nodes["node-0"]["metadata"] == {
        "name": "node-0", "labels": {"zone": "b", "role": "worker"}, "annotations": {"note": "kept"}}
    # kubelet set no providerID (CAPM3's metal3.io/uuid workflow): the Node gets its Machine's again.
    assert lab.workload.nodes["node-0"]["spec"] == {"providerID": "metal3://ns/host-0/m3m-0"}
    remediation = lab.remediation()
    assert REMEDIATION_FINALIZER not in (remediation["metadata"].get("finalizers") or [])
    assert not set(remediation["metadata"].get("annotations") or {}) & {NODE_LABELS_BACKUP, NODE_ANNOTATIONS_BACKUP}
    assert "retryCount" not in remediation["status"]
    # The operators put their finalizer (the same) back on every reconcile: the Node is not restored again.
    store.patch(REMEDIATION, {"metadata": {"finalizers": [REMEDIATION_FINALIZER]}})
    again = lab.step()
    assert (again.phase, again.message, again.changed) == (WAITING, WAITING_FOR_HEALTH, False)


def test_a_node_with_more_annotations_than_a_remediation_can_keep_gets_its_labels_back(store):
    """A Node's annotations may fill the 256 KiB a remediation's annotations may hold: past 128 KiB they are not
    kept, and the remediation goes on (a backup that can never be written would hold the host off for good)."""
    lab = Lab(store, REBOOT)
    lab.workload.nodes["node-0"]["metadata"]["annotations"] = {"big": "x" * (200 * 1024)}
    lab.steps(3)
    lab.set_powered(False)
    assert lab.step().message == "Node node-0's labels (not its annotations: more than 128 KiB) kept"
    assert lab.step().message == "waiting for Node node-0 to go"
    lab.step()
    lab.step()
    lab.set_powered(True)
    lab.workload.nodes["node-0"] = {"metadata": {"name": "node-0", "labels": {}}}
    assert lab.step().message == "Node node-0 is back"
    assert lab.workload.nodes["node-0"]["metadata"] == {"name": "node-0", "labels": {"role": "worker", "zone": "a"}}


@pytest.mark.parametrize("claim", [False, True], ids=["host", "HostClaim mode"])
def test_a_node_that_stays_away_is_retried_then_its_machine_given_up_and_its_host_marked_unhealthy(store, claim):
    lab = Lab(store, REBOOT, claim)
    lab.step()
    lab.until_node_deleted()
    lab.steps(1)
    lab.set_powered(True)
    lab.now = START + datetime.timedelta(seconds=300)  # not yet past the timeout
    assert lab.step().message == WAITING_FOR_HEALTH
    lab.now = START + datetime.timedelta(seconds=301)
    retry = lab.step()
    assert (retry.phase, retry.message) == (RUNNING, "the Node did not come back: retry 1 of 1")
    assert lab.remediation()["status"]["retryCount"] == 1
    assert lab.remediation()["status"]["lastRemediated"] == "2026-11-28T12:05:01Z"
    # Again from Running: the finalizer is still there, the host asked to power off once more.
    assert lab.step().message == f"{lab.named} asked to power off"
    lab.set_powered(False)
    result = lab.step()
    assert (result.phase, result.message) == (WAITING, "host powered off and its Node gone")
    lab.step()
    lab.set_powered(True)
    lab.now += datetime.timedelta(seconds=301)
    given_up = lab.step()
    assert (given_up.phase, given_up.requeue_after) == (DELETING_MACHINE, None)
    assert lab.host()["metadata"]["annotations"] == {"capm3.metal3.io/unhealthy": "capm3/UnhealthyNode"}
    status = store.get(MACHINE)["status"]
    v1beta1 = next(c for c in status["conditions"] if c["type"] == "OwnerRemediated")
    v1beta2 = next(c for c in status["v1beta2"]["conditions"] if c["type"] == "OwnerRemediated")
    # As Cluster API's schemas have them: a v1beta1 condition's message is absent or not empty, a v1beta2 one's
    # is always there.
    assert {k: v for k, v in v1beta1.items() if k != "lastTransitionTime"} == {
        "type": "OwnerRemediated", "status": "False", "reason": "WaitingForRemediation", "severity": "Warning"}
    assert {k: v for k, v in v1beta2.items() if k != "lastTransitionTime"} == {
        "type": "OwnerRemediated", "status": "False", "reason": "WaitingForRemediation", "message": ""}
    assert lab.step().requeue_after is None and lab.step().changed is False  # nothing more to do


@pytest.mark.parametrize(("strategy", "phase", "message"), [
    ({"type": "Reboot", "retryLimit": 1}, RUNNING, "remediation started"),
    ({"retryLimit": 1}, "", "unsupported remediation strategy '': only Reboot is"),
    (None, "", "unsupported remediation strategy '': only Reboot is"),
])
def test_only_the_reboot_strategy_is_run(store, strategy, phase, message):
    result = Lab(store, strategy).step()
    assert (result.phase, result.message) == (phase, message)


def test_a_host_taken_offline_fails_the_remediation_whatever_its_phase(store):
    lab = Lab(store, REBOOT)
    lab.steps(3)
    host = store.get(HOST)
    store.update({**host, "spec": {**host["spec"], "online": False}})
    result = lab.step()
    assert (result.phase, result.requeue_after, result.message) == (
        FAILED, None, "host host-0 is offline (spec.online false)")


def test_a_remediation_deleted_once_its_node_is_back_gives_the_node_what_it_lost_first(store):
    """The MachineHealthCheck deletes it when the Node is healthy, maybe before a step saw the Node back."""
    lab = Lab(store, REBOOT)
    lab.step()
    lab.until_node_deleted()
    lab.step()
    lab.set_powered(True)
    lab.workload.nodes["node-0"] = {"metadata": {"name": "node-0", "labels": {}}}
    store.delete(REMEDIATION)
    assert lab.step().message == "deleted"
    assert lab.workload.nodes["node-0"]["metadata"]["labels"] == {"role": "worker", "zone": "a"}
    assert store.get_if_exists(REMEDIATION) is None


def test_deleting_a_remediation_powers_its_host_on_again_and_lets_it_go(store):
    lab = Lab(store, REBOOT)
    lab.steps(3)
    assert lab.power_off_requested()
    store.delete(REMEDIATION)  # held by its finalizer
    result = lab.step()
    assert result.message == "deleted" and not lab.power_off_requested()
    assert store.get_if_exists(REMEDIATION) is None


@pytest.mark.parametrize(("change", "message"), [
    (lambda store: store.patch(REMEDIATION, {"metadata": {"ownerReferences": [
        {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "name": "m-9", "uid": "u-9"}]}}),
     "owner Machine ns/m-9 not found"),
    # Its owner was deleted and another Machine of that name made before the garbage collector came by.
    (lambda store: store.patch(REMEDIATION, {"metadata": {"ownerReferences": [
        {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "name": "m-0", "uid": "u-gone"}]}}),
     "owner Machine ns/m-0 (uid u-gone) not found: Machine m-0 is another one"),
    (lambda store: store.patch(REMEDIATION, {"metadata": {"ownerReferences": None}}),
     "Metal3Remediation ns/m-0: no owner Machine (a MachineHealthCheck makes it owned by the Machine it remediates)"),
    (lambda store: store.delete(Ref(INFRA_API, "Metal3Machine", "m3m-0", NS)),
     "Metal3Machine ns/m3m-0 of Machine m-0 not found"),
    (lambda store: store.delete(HOST), "no host for unhealthy machine ns/m3m-0 (metal3.io/BareMetalHost: 'ns/host-0')"),
])
def test_a_remediation_without_its_machine_or_host_waits_and_writes_nothing(store, change, message):
    lab = Lab(store, REBOOT)
    change(store)
    before = lab.remediation()
    result = lab.step()
    assert (result.message, result.requeue_after, result.changed) == (message, 5.0, False)
    assert lab.remediation() == before


def test_a_hostclaim_taken_offline_fails_the_remediation(store):
    lab = Lab(store, REBOOT, claim=True)
    lab.steps(3)
    store.patch(CLAIM, {"spec": {"poweredOn": False}})
    result = lab.step()
    assert (result.phase, result.requeue_after, result.message) == (
        FAILED, None, "HostClaim hc-0 is offline (spec.poweredOn false)")


def test_a_hostclaim_mode_machine_without_its_claim_waits(store):
    lab = Lab(store, REBOOT, claim=True)
    store.delete(CLAIM)
    result = lab.step()
    assert (result.requeue_after, result.changed) == (5.0, False)
    assert result.message == "no HostClaim for unhealthy machine ns/m3m-0 (metal3.io/HostClaim: 'ns/hc-0')"


def test_a_machine_that_names_no_node_waits_with_the_host_off(store):
    lab = Lab(store, REBOOT)
    machine = store.get(MACHINE)
    store.update_status({**machine, "status": {}})
    lab.steps(3)
    lab.set_powered(False)
    result = lab.step()
    assert (result.phase, result.requeue_after) == (RUNNING, 5.0)
    assert result.message == "Machine m-0 names no Node (status.nodeRef)"


def test_a_workload_cluster_that_fails_is_said_to_and_the_host_stays_off(store):
    lab = Lab(store, REBOOT)
    lab.steps(3)
    lab.set_powered(False)

    def refused(ref):
        raise Unavailable("connection refused")

    lab.workload.get_if_exists = refused
    result = lab.step()
    assert (result.phase, result.requeue_after) == (RUNNING, 5.0)
    assert result.message == "the workload cluster: connection refused"
    assert lab.power_off_requested()


def test_the_power_off_request_is_baremetal_operators_hard_reboot(store):
    lab = Lab(store, REBOOT)
    lab.steps(3)
    uid = lab.remediation()["metadata"]["uid"]
    assert lab.host()["metadata"]["annotations"] == {f"reboot.metal3.io/metal3-remediation-{uid}": POWER_OFF_REQUEST}
