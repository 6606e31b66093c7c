"""The BareMetalHost state machine over the Ironic provisioner, against a scripted Ironic."""
from __future__ import annotations

import datetime
from typing import Any

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Conflict
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref, rfc3339
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import baremetalhost as bmh
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import IronicOptions
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.provisioner import ironic_provisioners
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore


class ScriptedIronic:
    """Ironic whose every operation completes at once; ``busy`` nodes count against the provisioning limit."""

    def __init__(self, busy: int = 0):
        self.nodes: dict[str, dict[str, Any]] = {}
        self.busy = busy
        self.calls: list[str] = []

    def get_node(self, name_or_id):
        return next((dict(n) for n in self.nodes.values() if name_or_id in (n["id"], n["name"])), None)

    def node_by_mac(self, mac):
        return next((dict(n) for n in self.nodes.values() if n["mac"] == mac), None)

    def firmware_components(self, node):
        return []

    options = IronicOptions()

    def create_node(self, name, driver, driver_info, interfaces, properties, mac, automated_clean,
                    network_data=None):
        node = {"id": f"uuid-{name}", "name": name, "provision_state": "enroll", "target_provision_state": None,
                "power_state": "power off", "target_power_state": None, "last_error": None, "maintenance": False,
                "instance_info": {}, "driver": driver, "driver_info": driver_info,
                "properties": properties, "deploy_interface": interfaces.get("deploy_interface"),
                "boot_interface": "ipxe", "automated_clean": automated_clean, "mac": mac,
                "inspection_finished_at": None, "network_data": network_data}
        self.nodes[node["id"]] = node
        return dict(node)

    def patch_node(self, node, changes):
        self.nodes[node["id"]].update(changes)
        return dict(self.nodes[node["id"]])

    TARGETS = {"manage": "manageable", "inspect": "manageable", "provide": "available", "active": "active",
               "deleted": "available", "adopt": "active"}

    def abort(self, node):
        self.set_provision_state(node, "abort")

    def set_provision_state(self, node, target, **kwargs):
        self.calls.append(target)
        self.nodes[node["id"]]["provision_state"] = self.TARGETS[target]
        if target == "inspect":
            self.nodes[node["id"]]["inspection_finished_at"] = "2026-01-01T00:00:00+00:00"

    def set_power_state(self, node, target):
        self.nodes[node["id"]]["power_state"] = "power off" if "off" in target else "power on"

    def set_maintenance(self, node, reason):
        self.nodes[node["id"]]["maintenance"] = True

    def delete_node(self, node):
        self.nodes.pop(node["id"], None)

    def inventory(self, node):
        return None

    def inspection_finished_at(self, node):
        return self.nodes[node["id"]]["inspection_finished_at"]

    def network_data(self, node):
        return self.nodes[node["id"]]["network_data"] or {}

    def take_provisioning_slot(self, limit):
        return self.busy < limit, self.busy


@pytest.fixture
def store(tmp_path):
    with LocalStore(str(tmp_path / "store.db")) as opened:
        yield opened


def host(store, name="h", **spec) -> Ref:
    store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bmc", "namespace": "ns"},
                  "stringData": {"username": "u", "password": "p"}})
    store.create({"apiVersion": bmh.API, "kind": bmh.KIND, "metadata": {"name": name, "namespace": "ns"},
                  "spec": {"online": False, "bmc": {"address": "fake://x", "credentialsName": "bmc"}, **spec}})
    return Ref(bmh.API, bmh.KIND, name, "ns")


def reconcile(store, ironic, ref, limit=20):
    return bmh.reconcile_host(store, ironic_provisioners(ironic, limit), ref)


def settle(store, ironic, ref, limit=20, steps=30):
    for _step in range(steps):
        last = reconcile(store, ironic, ref, limit)
        if last.requeue_after is None or last.requeue_after >= bmh.DELAYED:
            return last
    raise AssertionError(f"not settled: {last}")


def rest(store, ironic, ref, steps=60):
    """Steps until the host has nothing to do (through the back-offs settle() stops at)."""
    for _step in range(steps):
        last = reconcile(store, ironic, ref)
        if last.settled:
            return last
    raise AssertionError(f"not at rest: {last}")


def test_a_host_without_bmc_address_is_unmanaged(store):
    store.create({"apiVersion": bmh.API, "kind": bmh.KIND, "metadata": {"name": "u", "namespace": "ns"},
                  "spec": {"online": False}})
    last = settle(store, ScriptedIronic(), Ref(bmh.API, bmh.KIND, "u", "ns"))
    assert last.state == "unmanaged" and last.requeue_after is None


def test_provisioning_waits_for_a_slot_when_the_limit_is_reached(store):
    ironic = ScriptedIronic(busy=2)
    ref = host(store, inspectionMode="disabled", image={"url": "http://i/os.img"})
    last = settle(store, ironic, ref, limit=2)
    assert last.state == "available" and last.requeue_after == bmh.DELAYED
    assert store.get(ref)["status"]["operationalStatus"] == "delayed"
    ironic.busy = 1
    last = settle(store, ironic, ref, limit=2)
    assert last.state == "provisioned" and store.get(ref)["status"]["operationalStatus"] == "OK"


def test_registration_errors_back_off_and_clear_once_the_cause_is_gone(store):
    ironic = ScriptedIronic()
    ref = host(store)
    store.delete(Ref("v1", "Secret", "bmc", "ns"))
    delays = [reconcile(store, ironic, ref).requeue_after for _step in range(4)]
    assert delays == [5.0, 10.0, 20.0, 40.0]
    st = store.get(ref)["status"]
    assert st["errorType"] == "registration error" and st["errorCount"] == 4
    assert st["errorMessage"] == "spec.bmc.credentialsName: secret ns/bmc not found"
    store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bmc", "namespace": "ns"},
                  "stringData": {"username": "u", "password": "p"}})
    last = settle(store, ironic, ref)
    assert last.state == "available" and not last.error and last.obj["status"]["errorCount"] == 0


def test_wait_for_host_stops_at_the_target_at_a_lasting_error_or_at_the_timeout():
    def steps(*script):
        it = iter(script)
        return lambda: next(it)

    ok = bmh.HostStep({"status": {}}, state="provisioned", requeue_after=None)
    busy = bmh.HostStep({"status": {}}, state="provisioning", requeue_after=0.5)
    stuck = bmh.HostStep({"status": {"errorType": "provisioning error", "errorMessage": "x"}}, state="provisioning")
    slept: list[float] = []
    powering = bmh.HostStep({"status": {}}, state="provisioned", requeue_after=0.5)
    assert bmh.wait_for_host(steps(busy, busy, powering, ok), ("provisioned",), 10, slept.append) == (ok, True)
    assert slept == [0.5, 0.5, 0.5]
    assert bmh.wait_for_host(steps(busy, stuck), ("provisioned",), 10, slept.append)[1] is False
    assert bmh.wait_for_host(steps(*[busy] * 5), ("provisioned",), 0, slept.append)[1] is False
    gone = bmh.HostStep(None, state="deleting")
    assert bmh.wait_for_host(steps(busy, gone), ("deleted",), 10, slept.append) == (gone, True)


@pytest.mark.parametrize(("address", "message"), [
    ("ipmi://[::1", "spec.bmc.address: Invalid value: 'ipmi://[::1': not a URL"),
    ("wsman://10.0.0.1", "spec.bmc.address: Unsupported value: 'wsman'"),
])
def test_a_bmc_address_that_cannot_be_read_is_a_registration_error_until_the_spec_changes(store, address, message):
    ironic = ScriptedIronic()
    ref = host(store, bmc={"address": address, "credentialsName": "bmc"})
    first = reconcile(store, ironic, ref)
    assert first.requeue_after is None  # recorded, not retried: the same address cannot work next time
    status = store.get(ref)["status"]
    assert status["errorType"] == "registration error" and status["operationalStatus"] == "error"
    assert status["errorMessage"].startswith(message)
    again = reconcile(store, ironic, ref)
    assert again.requeue_after is None and not again.changed and store.get(ref)["status"]["errorCount"] == 1
    assert ironic.nodes == {}
    store.patch(ref, {"spec": {"bmc": {"address": "fake://x"}}})
    last = settle(store, ironic, ref)
    assert last.state == "available" and not last.error


class FailingInspection(ScriptedIronic):
    """Ironic whose inspection never succeeds (sushy-tools' systems under redfish inspection): it fails, or
    hangs waiting for an agent that never calls back."""

    def __init__(self, inspection_ends_in: str):
        super().__init__()
        self.inspection_ends_in = inspection_ends_in

    def set_provision_state(self, node, target, **kwargs):
        stored = self.nodes[node["id"]]
        if target == "inspect":
            self.calls.append(target)
            stored.update(provision_state=self.inspection_ends_in, inspection_finished_at=None)
            if self.inspection_ends_in == "inspect failed":
                stored.update(last_error="Failed to inspect hardware: no Processors",
                              target_provision_state="manageable")
            return
        if target == "abort":
            self.calls.append(target)
            stored.update(provision_state="inspect failed", last_error="Inspection was aborted by request.")
            return
        stored["target_provision_state"] = None
        super().set_provision_state(node, target, **kwargs)


HARDWARE = {"cpu": {"arch": "x86_64", "count": 2}, "ramMebibytes": 2048}

# inspection fails (or hangs) → disabled by spec or annotation → the host moves on, as upstream's
SKIPPED_INSPECTION = [
    pytest.param("inspect failed", {"spec": {"inspectionMode": "disabled"}}, {}, "available", id="failed-spec"),
    pytest.param("inspect failed", {"metadata": {"annotations": {bmh.INSPECT_ANNOTATION: "disabled"}}}, {},
                 "available", id="failed-annotation"),
    pytest.param("inspect failed", {"spec": {"inspectionMode": "disabled", "image": {"url": "http://i/os.img"}}}, {},
                 "provisioned", id="failed-then-provisioned"),
    pytest.param("inspect failed", {"spec": {"inspectionMode": "disabled"}, "metadata": {"annotations": {
        bmh.HARDWARE_DETAILS_ANNOTATION: '{"cpu": {"arch": "x86_64", "count": 2}, "ramMebibytes": 2048}'}}},
        HARDWARE, "available", id="failed-hardware-by-hand"),
    pytest.param("inspect wait", {"spec": {"inspectionMode": "disabled"}}, {}, "available", id="hanging-aborted"),
]


@pytest.mark.parametrize(("inspection_ends_in", "patch", "hardware", "expected"), SKIPPED_INSPECTION)
def test_a_host_whose_inspection_failed_moves_on_once_inspection_is_disabled(store, inspection_ends_in, patch,
                                                                             hardware, expected):
    ironic = FailingInspection(inspection_ends_in)
    ref = host(store)
    steps = [reconcile(store, ironic, ref) for _step in range(4)]
    assert steps[-1].state == "inspecting" and "inspect" in ironic.calls
    if inspection_ends_in == "inspect failed":
        assert steps[-1].requeue_after >= bmh.BACKOFF_BASE  # backing off, inspecting again and again
        assert store.get(ref)["status"]["errorType"] == "inspection error"
    store.patch(ref, patch)
    inspections = ironic.calls.count("inspect")
    last = settle(store, ironic, ref)
    assert last.state == expected and not last.error
    status = store.get(ref)["status"]
    assert status["errorCount"] == 0 and status["operationalStatus"] == "OK"
    assert "errorMessage" not in status
    if hardware:
        assert status["hardware"] == hardware
    node = ironic.get_node("ns~h")
    assert node["provision_state"] == ("active" if expected == "provisioned" else "manageable")
    assert ironic.calls.count("inspect") == inspections  # never inspected again


class FailingDeploy(ScriptedIronic):
    """Ironic whose deploys fail (every one, or those of the image ``failing``), keeping the instance_info it was
    given, as Ironic does."""

    def __init__(self, failing: str = ""):
        super().__init__()
        self.failing = failing

    def set_provision_state(self, node, target, **kwargs):
        super().set_provision_state(node, target, **kwargs)
        image = self.nodes[node["id"]]["instance_info"].get("image_source")
        if target == "active" and (not self.failing or image == self.failing):
            self.nodes[node["id"]].update(provision_state="deploy failed", last_error="Image download failed")


def losing_the_status_write_of(ironic, target, store, monkeypatch):
    """The first status write once Ironic was asked for ``target`` is lost (the host changed meanwhile)."""
    asked = ironic.set_provision_state

    def set_provision_state(node, wanted, **kwargs):
        asked(node, wanted, **kwargs)
        if wanted == target and ironic.calls.count(target) == 1:
            written = store.update_status

            def lost(obj, dry_run=False):
                monkeypatch.setattr(store, "update_status", written)
                raise Conflict(f"{Ref.of(obj)}: the object has been modified")
            monkeypatch.setattr(store, "update_status", lost)
    monkeypatch.setattr(ironic, "set_provision_state", set_provision_state)


# decision → the Ironic call whose status write is lost → how often Ironic is asked, where the host ends
LOST_WRITES = [
    pytest.param(ScriptedIronic, {}, "inspect", 1, "available", "", id="inspection-already-started"),
    # every deploy fails: one deploy per attempt up to the retry limit, the failure whose write was lost counted once
    pytest.param(FailingDeploy, {"image": {"url": "http://i/os.img", "checksum": "abc"}}, "active",
                 bmh.MAX_PROVISIONING_RETRIES, "available", "provisioning error", id="deploy-already-failed"),
]


@pytest.mark.parametrize(("ironic_kind", "spec", "target", "asked", "state", "error"), LOST_WRITES)
def test_decisions_survive_a_lost_status_write(store, monkeypatch, ironic_kind, spec, target, asked, state, error):
    ironic = ironic_kind()
    ref = host(store, **spec)
    losing_the_status_write_of(ironic, target, store, monkeypatch)
    last = rest(store, ironic, ref)
    assert ironic.calls.count(target) == asked  # not asked again: Ironic's state told the step it was done
    assert (last.state, store.get(ref)["status"].get("errorType", "")) == (state, error)
    assert store.get(ref)["status"]["provisioningFailCount"] == (asked if error else 0)


def test_a_step_whose_status_write_is_lost_waits_on_nothing_and_looks_again_soon(store, monkeypatch):
    """What it would wait on (its HostFirmwareSettings, which waits on the host) may change only after the host's
    next write: a host that waits on it with that write lost would wait for ever."""
    ironic = ScriptedIronic()
    ref = host(store)
    reconcile(store, ironic, ref)  # registering
    reconcile(store, ironic, ref)  # inspecting
    written = store.update_status

    def lost(obj, dry_run=False):
        monkeypatch.setattr(store, "update_status", written)
        raise Conflict(f"{Ref.of(obj)}: the object has been modified")
    monkeypatch.setattr(store, "update_status", lost)
    step = reconcile(store, ironic, ref)
    assert (step.changed, step.waits_on, step.requeue_after) == (False, [], bmh.POLL)
    assert store.get(ref)["status"]["provisioning"]["state"] == "inspecting"
    step = reconcile(store, ironic, ref)  # taken again, and recorded
    assert (step.state, step.waits_on) == ("available", [Ref(bmh.API, "HostFirmwareSettings", "h", "ns")])


MOMENT = datetime.datetime(2026, 11, 30, 12, 0, 0, tzinfo=datetime.UTC)


@pytest.mark.parametrize(("last_updated", "after"), [
    (None, bmh.POLL),  # never written
    ("not a time", bmh.POLL),
    ("2026-11-30T12:00:00Z", bmh.POLL),  # changed this moment
    ("2026-11-30T11:59:58Z", bmh.POLL),  # a quarter of 2 s is under POLL
    ("2026-11-30T11:59:52Z", 2.0),  # a quarter of the time it has shown no change
    ("2026-11-30T11:59:20Z", 10.0),
    ("2026-11-30T10:00:00Z", bmh.PATIENT_POLL_MAX),  # never less often than baremetal-operator's longRetryDelay
])
def test_a_patient_caller_looks_again_after_a_quarter_of_the_time_the_host_showed_no_change(last_updated, after):
    assert bmh.patient_poll(last_updated, MOMENT) == after


class SlowInspection(ScriptedIronic):
    """Ironic whose inspections stay under way."""

    def set_provision_state(self, node, target, **kwargs):
        super().set_provision_state(node, target, **kwargs)
        if target == "inspect":
            self.nodes[node["id"]].update(provision_state="inspect wait", inspection_finished_at=None)


def test_under_the_operator_an_operation_under_way_is_looked_at_less_often_the_longer_it_lasts(store):
    """Each look under the operator is a run of the role; in the module's own wait, a GET: that one keeps POLL."""
    ironic = SlowInspection()
    ref = host(store)
    reconcile(store, ironic, ref)  # registering
    started = bmh.reconcile_host(store, ironic_provisioners(ironic, 20), ref, patient=True)
    assert (started.state, started.requeue_after) == ("inspecting", bmh.POLL)  # it changed just now
    quiet = store.get(ref)
    quiet["status"]["lastUpdated"] = rfc3339(datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=60))
    store.update_status(quiet)
    patient = bmh.reconcile_host(store, ironic_provisioners(ironic, 20), ref, patient=True)
    assert (patient.state, patient.changed, patient.requeue_after) == ("inspecting", False, bmh.PATIENT_POLL_MAX)
    assert reconcile(store, ironic, ref).requeue_after == bmh.POLL


def test_a_failing_image_is_tried_up_to_the_retry_limit_and_a_new_image_is_deployed(store):
    ironic = FailingDeploy(failing="http://i/os.img")
    ref = host(store, image={"url": "http://i/os.img"})
    assert settle(store, ironic, ref).error.startswith("provisioning error: Image download failed")
    last = rest(store, ironic, ref)
    status = store.get(ref)["status"]
    assert (last.state, status["provisioningFailCount"], ironic.calls.count("active")) == ("available", 5, 5)
    assert last.error == ("provisioning error: provisioning failed 5 times, retry limit (5) reached; change image "
                          "or reset provisioningFailCount to retry")
    assert ironic.calls.count("deleted") == 5  # each failed deploy undeployed before the next
    store.patch(ref, {"spec": {"image": {"url": "http://i/fixed.img"}}})
    last = rest(store, ironic, ref)
    status = store.get(ref)["status"]
    assert (last.state, last.error, status["provisioningFailCount"]) == ("provisioned", "", 0)
    assert ironic.calls.count("active") == 6


# preprovisioningNetworkDataName's secret → the registration's outcome (the node's network_data, or the error)
PREPROVISIONING_NETWORK = [
    ({"networkData": '{"links": [{"id": "eth0", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:01"}], '
                     '"networks": [], "services": []}'},
     {"links": [{"id": "eth0", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:01"}], "networks": [],
      "services": []}, None),
    ({"networkData": "{links: [], networks: [], services: []}"}, {"links": [], "networks": [], "services": []}, None),
    ({"networkData": "links: []"}, None, "spec.preprovisioningNetworkDataName: its networkData has no 'networks'; "
                                         "has no 'services', which Ironic requires"),
    ({"other": "x"}, None, "spec.preprovisioningNetworkDataName: secret ns/pre has no 'networkData' key"),
    ({"networkData": "- a list"}, None, "spec.preprovisioningNetworkDataName: secret ns/pre must hold a mapping, "
                                        "not list"),
    (None, None, "spec.preprovisioningNetworkDataName: secret ns/pre not found"),
]


@pytest.mark.parametrize(("data", "network", "error"), PREPROVISIONING_NETWORK)
def test_the_preprovisioning_network_reaches_the_node(store, data, network, error):
    if data is not None:
        store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pre", "namespace": "ns"},
                      "stringData": data})
    ironic = ScriptedIronic()
    ref = host(store, inspectionMode="disabled", preprovisioningNetworkDataName="pre")
    last = reconcile(store, ironic, ref)
    if error:
        assert store.get(ref)["status"]["errorMessage"] == error and not ironic.nodes
        assert last.obj["status"]["errorType"] == "registration error"
    else:
        assert next(iter(ironic.nodes.values()))["network_data"] == network
