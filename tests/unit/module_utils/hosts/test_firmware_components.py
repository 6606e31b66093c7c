"""HostFirmwareComponents, as baremetal-operator's controller keeps it: a registered host's firmware components read
from its provisioner (a fixture here), its spec.updates judged, and made at registration only for a host whose BMC
lists components."""
from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.core.provisioner import FirmwareComponents
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import baremetalhost as bmh
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import firmware
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import firmware_components as hfc
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import firmware_settings as hfs
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.unit.module_utils.hosts.fixture_provisioner import Answers, FixtureProvisioner

COMPONENTS = [{"component": "bios", "initialVersion": "1.0.0", "currentVersion": "1.0.0"},
              {"component": "bmc", "initialVersion": "1.00", "currentVersion": "1.00"}]
BIOS_UPDATE = {"component": "bios", "url": "http://fw.example.com/bios.bin"}


@pytest.fixture
def store(tmp_path):
    with LocalStore(str(tmp_path / "store.db")) as opened:
        yield opened


def registered_host(store: LocalStore, state: str = bmh.AVAILABLE, annotations: dict[str, str] | None = None) -> Ref:
    """A host in ``state`` with its HostFirmwareComponents, as registration leaves them."""
    host = store.create({"apiVersion": bmh.API, "kind": bmh.KIND,
                         "metadata": {"name": "h", "namespace": "ns", "annotations": annotations or {}},
                         "spec": {"online": False, "bmc": {"address": "redfish://bmc", "credentialsName": "bmc"}}})
    store.update_status({**host, "status": {"provisioning": {"state": state, "ID": "node-h"}}})
    store.create(firmware.new_components(host))
    return Ref(firmware.API, firmware.COMPONENTS_KIND, "h", "ns")


def reconcile(store: LocalStore, ref: Ref, outbound: OutboundPolicy | None = None) -> Any:
    provisioner = FixtureProvisioner(Answers(firmware_components=FirmwareComponents(components=COMPONENTS)))
    return hfc.reconcile_firmware_components(store, provisioner, ref, outbound=outbound)


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c.get("message", "")) for c in obj["status"]["conditions"]}


def test_a_hosts_components_are_read(store):
    ref = registered_host(store)
    result = reconcile(store, ref)
    components = store.get(ref)
    assert components["status"]["components"] == COMPONENTS
    assert conditions(components) == {"ChangeDetected": ("False", "OK", ""), "Valid": ("True", "OK", "")}
    assert all(c["observedGeneration"] == components["metadata"]["generation"]
               for c in components["status"]["conditions"])
    assert result.changed and result.requeue_after == hfs.REQUEUE
    assert not reconcile(store, ref).changed  # read again: nothing new


INVALID = "Invalid Firmware Components: "
LOOPBACK = ("names a loopback or link-local host, which this controller does not connect to on a claim's say (the "
            "operator allows named ones with allowed_local_hosts)")
# spec.updates, status.updates (what the host sent) -> ChangeDetected, Valid, its message
JUDGED = [
    pytest.param([], None, "False", "True", "", id="nothing-asked"),
    pytest.param([BIOS_UPDATE], None, "True", "True", "", id="an-update-asked"),
    pytest.param([BIOS_UPDATE], [BIOS_UPDATE], "False", "True", "", id="an-update-sent"),
    pytest.param([{**BIOS_UPDATE, "url": "http://fw.example.com/bios-2.bin"}], [BIOS_UPDATE], "True", "True", "",
                 id="another-url-asked"),
    pytest.param([{"component": "nic:NIC.Slot.1", "url": "https://fw.example.com/nic.bin"}], None, "True", "True", "",
                 id="a-nic"),
    pytest.param([{"component": "cpld", "url": "http://fw.example.com/cpld.bin"}], None, "True", "False",
                 INVALID + "spec.updates[0].component: component cpld is invalid, only 'bmc', 'bios', or names "
                 "starting with 'nic:' are allowed as update names", id="an-unknown-component"),
    pytest.param([BIOS_UPDATE, {"component": "bmc", "url": "http://127.0.0.1:8080/bmc.bin"}], None, "True", "False",
                 INVALID + "spec.updates[1].url: 'http://127.0.0.1:8080/bmc.bin' " + LOOPBACK, id="a-loopback-url"),
    pytest.param([{"component": "bios", "url": "http://169.254.169.254/latest"}], None, "True", "False",
                 INVALID + "spec.updates[0].url: 'http://169.254.169.254/latest' " + LOOPBACK,
                 id="a-link-local-url"),
]


@pytest.mark.parametrize("wanted, sent, changed, valid, message", JUDGED)
def test_the_updates_are_judged(store, wanted, sent, changed, valid, message):
    ref = registered_host(store)
    store.patch(ref, {"spec": {"updates": wanted}})
    if sent is not None:
        store.patch_status(ref, {"status": {"updates": sent}})
    result = reconcile(store, ref)
    judged = conditions(store.get(ref))
    reason = "OK" if valid == "True" else "InvalidComponent"
    assert judged == {"ChangeDetected": (changed, "OK", ""), "Valid": (valid, reason, message)}
    assert result.requeue_after == (hfs.REQUEUE_CHANGE_DETECTED if changed == "True" else hfs.REQUEUE)
    assert store.get(ref)["status"].get("updates") == sent  # the host's to write


def test_a_loopback_url_the_operator_allows_is_valid(store):
    ref = registered_host(store)
    store.patch(ref, {"spec": {"updates": [{"component": "bios", "url": "http://127.0.0.1:8080/bios.bin"}]}})
    reconcile(store, ref, OutboundPolicy.of("127.0.0.1"))
    assert conditions(store.get(ref))["Valid"] == ("True", "OK", "")


def test_the_host_sends_only_valid_updates_judged_at_the_current_generation(store):
    ref = registered_host(store)
    assert firmware.pending_updates(store.get(ref)) == []  # not judged at all: nothing asked
    store.patch(ref, {"spec": {"updates": [BIOS_UPDATE]}})
    reconcile(store, ref)
    assert firmware.pending_updates(store.get(ref)) == [BIOS_UPDATE]
    store.patch(ref, {"spec": {"updates": [BIOS_UPDATE, {"component": "bmc", "url": "http://fw.example.com/b"}]}})
    assert firmware.pending_updates(store.get(ref)) is None  # a newer spec: wait for its judgement
    reconcile(store, ref)
    store.patch_status(ref, {"status": {"updates": [BIOS_UPDATE]}})  # the host sent the first
    assert firmware.pending_updates(store.get(ref)) == [{"component": "bmc", "url": "http://fw.example.com/b"}]
    store.patch(ref, {"spec": {"updates": [{"component": "cpld", "url": "http://fw.example.com/c"}]}})
    reconcile(store, ref)
    assert firmware.pending_updates(store.get(ref)) == []  # invalid: nothing sent


@pytest.mark.parametrize("state, annotations, why", [
    pytest.param(bmh.REGISTERING, None, "not registered", id="registering"),
    pytest.param(bmh.AVAILABLE, {bmh.DETACHED_ANNOTATION: ""}, "detached", id="detached"),
    pytest.param(bmh.AVAILABLE, {bmh.PAUSED_ANNOTATION: ""}, "paused", id="paused"),
])
def test_components_are_not_read_from_a_host_that_is_not_managed(store, state, annotations, why):
    ref = registered_host(store, bmh.NONE if state == bmh.REGISTERING else state, annotations)
    result = reconcile(store, ref)
    assert result.requeue_after == hfs.RETRY and why in result.message and "status" not in store.get(ref)


def test_a_provisioner_that_cannot_read_is_asked_again(store):
    ref = registered_host(store)
    provisioner = FixtureProvisioner(Answers(firmware_components=FirmwareComponents(error="BMC not answering")))
    result = hfc.reconcile_firmware_components(store, provisioner, ref)
    assert result.requeue_after == hfs.RETRY and "BMC not answering" in result.message and not result.changed


@pytest.mark.parametrize("listed, premade, made", [
    pytest.param(COMPONENTS, False, True, id="components-listed"),
    pytest.param([], False, False, id="none-listed-deferred"),
    pytest.param([], True, True, id="made-before-the-host-adopted"),
])
def test_registration_gives_a_host_its_components_only_when_its_bmc_lists_them(store, listed, premade, made):
    if premade:
        store.create({"apiVersion": firmware.API, "kind": firmware.COMPONENTS_KIND,
                      "metadata": {"name": "h", "namespace": "ns"}, "spec": {"updates": [BIOS_UPDATE]}})
    store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bmc", "namespace": "ns"},
                  "stringData": {"username": "u", "password": "p"}})
    host = store.create({"apiVersion": bmh.API, "kind": bmh.KIND, "metadata": {"name": "h", "namespace": "ns"},
                         "spec": {"online": False, "bmc": {"address": "fake://x", "credentialsName": "bmc"},
                                  "inspectionMode": "disabled"}})
    answers = Answers(firmware_components=FirmwareComponents(components=listed))
    bmh.reconcile_host(store, FixtureProvisioner(answers), Ref.of(host))
    components = store.get_if_exists(Ref(firmware.API, firmware.COMPONENTS_KIND, "h", "ns"))
    assert (components is not None) == made
    if made:
        assert [o["uid"] for o in components["metadata"]["ownerReferences"]] == [host["metadata"]["uid"]]
        assert components["spec"] == {"updates": [BIOS_UPDATE] if premade else []}  # a premade one kept as it was


@pytest.mark.parametrize("updates, error", [
    pytest.param([{"component": "bios"}], "updates[0].url: must be a string of 1 to 2048 characters", id="no-url"),
    pytest.param([{**BIOS_UPDATE, "wait": 5}], "updates[0]: must be a mapping of component and url only",
                 id="another-key"),
    pytest.param(["bios"], "updates[0]: must be a mapping of component and url only", id="not-a-mapping"),
    pytest.param([BIOS_UPDATE, {"component": 1, "url": "http://x"}],
                 "updates[1].component: must be a string of 1 to 256 characters", id="a-number"),
])
def test_bad_updates_are_refused_naming_them_and_nothing_is_written(store, updates, error):
    ref = registered_host(store)
    before = store.get(ref)
    with pytest.raises(BadRequest, match=error.replace("[", r"\[").replace("]", r"\]")):
        hfc.ask_updates(store, ref, updates)
    assert store.get(ref) == before


def test_asked_updates_replace_the_spec(store):
    ref = registered_host(store)
    store.patch(ref, {"spec": {"updates": [BIOS_UPDATE]}})
    nic = {"component": "nic:1", "url": "http://fw.example.com/nic.bin"}
    after, changed = hfc.ask_updates(store, ref, [nic])
    assert changed and after["spec"]["updates"] == [nic]
    assert hfc.ask_updates(store, ref, [nic]) == (store.get(ref), False)
