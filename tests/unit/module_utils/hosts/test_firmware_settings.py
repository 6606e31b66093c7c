"""HostFirmwareSettings and FirmwareSchema, as baremetal-operator's controller keeps them: a registered host's
settings and their schema read from its provisioner (a fixture here), the spec judged against them."""
from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.core.provisioner import FirmwareSettings
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import baremetalhost as bmh
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import firmware
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import firmware_settings as hfs
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.unit.module_utils.hosts.fixture_provisioner import Answers, FixtureProvisioner

SCHEMA = {
    "ProcTurboMode": {"attribute_type": "Enumeration", "allowable_values": ["Enabled", "Disabled"],
                      "read_only": False},
    "NumCores": {"attribute_type": "Integer", "lower_bound": 10, "upper_bound": 20, "read_only": True},
    "SerialNumber": {"attribute_type": "String", "min_length": 0, "max_length": 16, "read_only": False},
    "SysPassword": {"attribute_type": "Password", "read_only": False},
}
CURRENT = {"ProcTurboMode": "Enabled", "NumCores": "10", "SerialNumber": "QPX12345", "SysPassword": ""}
# What upstream's GetSchemaName gives for SCHEMA: its own Go code, run on this schema.
UPSTREAMS_NAME = "schema-a6620998"


@pytest.fixture
def store(tmp_path):
    with LocalStore(str(tmp_path / "store.db")) as opened:
        yield opened


def registered_host(store: LocalStore, name: str = "h", state: str = bmh.AVAILABLE,
                    annotations: dict[str, str] | None = None) -> Ref:
    """A host in ``state`` with its HostFirmwareSettings, as registration leaves them."""
    host = store.create({"apiVersion": bmh.API, "kind": bmh.KIND,
                         "metadata": {"name": name, "namespace": "ns", "annotations": annotations or {}},
                         "spec": {"online": False, "bmc": {"address": "redfish://bmc", "credentialsName": "bmc"}}})
    store.update_status({**host, "status": {"provisioning": {"state": state, "ID": f"node-{name}"},
                                            "hardware": {"systemVendor": {"manufacturer": "Emulated",
                                                                          "productName": "KVM"}}}})
    store.create(firmware.new_settings(host))
    return Ref(firmware.API, firmware.SETTINGS_KIND, name, "ns")


def reconcile(store: LocalStore, ref: Ref, settings: dict[str, str] | None = None) -> Any:
    provisioner = FixtureProvisioner(Answers(firmware_settings=FirmwareSettings(
        settings=CURRENT if settings is None else settings, schema=SCHEMA)))
    return hfs.reconcile_firmware_settings(store, provisioner, ref)


def ask(store: LocalStore, ref: Ref, settings: dict[str, Any]) -> None:
    store.patch(ref, {"spec": {"settings": settings}})


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c.get("message", "")) for c in obj["status"]["conditions"]}


def test_the_schema_is_named_as_upstream_names_it():
    assert hfs.schema_name(SCHEMA) == UPSTREAMS_NAME
    assert hfs.schema_name(dict(reversed(SCHEMA.items()))) == UPSTREAMS_NAME  # whatever the order


def test_a_hosts_settings_and_schema_are_read_passwords_left_out(store):
    ref = registered_host(store)
    result = reconcile(store, ref)
    settings = store.get(ref)
    assert settings["status"]["settings"] == {"ProcTurboMode": "Enabled", "NumCores": "10", "SerialNumber": "QPX12345"}
    assert settings["status"]["schema"] == {"name": UPSTREAMS_NAME, "namespace": "ns"}
    schema = store.get(Ref(firmware.API, firmware.SCHEMA_KIND, UPSTREAMS_NAME, "ns"))
    assert schema["spec"] == {"hardwareVendor": "Emulated", "hardwareModel": "KVM",
                              "schema": {k: v for k, v in SCHEMA.items() if k != "SysPassword"}}
    assert [o["uid"] for o in schema["metadata"]["ownerReferences"]] == [settings["metadata"]["uid"]]
    assert conditions(settings) == {"ChangeDetected": ("False", ""), "Valid": ("True", "")}
    assert result.changed and result.requeue_after == hfs.REQUEUE
    assert not reconcile(store, ref).changed  # read again: nothing new


def test_hosts_of_one_model_share_their_schema(store):
    first, second = registered_host(store, "a"), registered_host(store, "b")
    reconcile(store, first)
    reconcile(store, second)
    schemas = store.list(firmware.API, firmware.SCHEMA_KIND, "ns")
    assert [s["metadata"]["name"] for s in schemas] == [UPSTREAMS_NAME]
    owners = {o["name"] for o in schemas[0]["metadata"]["ownerReferences"]}
    assert owners == {"a", "b"}


# spec.settings -> ChangeDetected, Valid (and what its message names), and what the host would apply
JUDGED = [
    pytest.param({"ProcTurboMode": "Disabled"}, "True", "True", "", {"ProcTurboMode": "Disabled"}, id="a-change"),
    pytest.param({"ProcTurboMode": "Enabled", "NumCores": 10}, "False", "True", "", {}, id="as-it-is"),
    pytest.param({"ProcTurboMode": "Sometimes"}, "True", "False",
                 "Invalid BIOS setting: Setting ProcTurboMode is invalid, unknown enumeration value - Sometimes", {},
                 id="a-value-not-allowed"),
    pytest.param({"NoSuchSetting": "On"}, "True", "False",
                 "Invalid BIOS setting: setting NoSuchSetting is not in the Status field", {},
                 id="a-setting-the-host-has-not"),
    pytest.param({"NumCores": 12}, "True", "False",
                 "Invalid BIOS setting: Setting NumCores is invalid, it is ReadOnly", {}, id="read-only"),
    pytest.param({"SerialNumber": "X" * 17}, "True", "False",
                 f"Invalid BIOS setting: Setting SerialNumber is invalid, string {'X' * 17} length is above maximum "
                 "length 16", {}, id="too-long"),
    pytest.param({"SysPassword": "secret"}, "True", "False", "Invalid BIOS setting: cannot set Password field", {},
                 id="a-password"),
]


@pytest.mark.parametrize("wanted, changed, valid, message, applied", JUDGED)
def test_the_spec_is_judged_against_the_settings_and_schema(store, wanted, changed, valid, message, applied):
    ref = registered_host(store)
    reconcile(store, ref)
    ask(store, ref, wanted)
    assert firmware.pending_settings(store.get(ref)) is None  # not judged yet at this generation
    result = reconcile(store, ref)
    settings = store.get(ref)
    when = "applied by the host while it is available" if applied else ""
    assert conditions(settings) == {"ChangeDetected": (changed, when), "Valid": (valid, message)}
    assert {c["observedGeneration"] for c in settings["status"]["conditions"]} == {2}
    assert result.requeue_after == (hfs.REQUEUE_CHANGE_DETECTED if changed == "True" else hfs.REQUEUE)
    assert firmware.pending_settings(settings) == applied


def test_once_applied_the_change_is_no_longer_pending(store):
    ref = registered_host(store)
    ask(store, ref, {"ProcTurboMode": "Disabled"})
    reconcile(store, ref)
    reconcile(store, ref, {**CURRENT, "ProcTurboMode": "Disabled"})
    assert conditions(store.get(ref))["ChangeDetected"] == ("False", "")
    assert firmware.pending_settings(store.get(ref)) == {}


def test_a_long_invalid_value_is_cut_in_the_message(store):
    ref = registered_host(store)
    ask(store, ref, {"SerialNumber": "x" * 5000})
    reconcile(store, ref)
    status, message = conditions(store.get(ref))["Valid"]
    assert status == "False" and len(message) == hfs.MAX_MESSAGE and message.endswith("...")


@pytest.mark.parametrize("state, annotations, why", [
    pytest.param(bmh.UNMANAGED, {}, "not registered", id="unmanaged"),
    pytest.param(bmh.AVAILABLE, {bmh.DETACHED_ANNOTATION: ""}, "detached", id="detached"),
    pytest.param(bmh.AVAILABLE, {bmh.PAUSED_ANNOTATION: ""}, "paused", id="paused"),
])
def test_settings_are_not_read_from_a_host_that_is_not_managed(store, state, annotations, why):
    ref = registered_host(store, state=state, annotations=annotations)
    result = reconcile(store, ref)
    assert result.message == f"not read: the host is {why}" and not result.changed
    assert result.waits_on == [Ref(bmh.API, bmh.KIND, "h", "ns")]
    assert "status" not in store.get(ref) or not store.get(ref)["status"].get("settings")


def test_a_provisioner_that_cannot_read_is_asked_again(store):
    ref = registered_host(store)
    provisioner = FixtureProvisioner(Answers(firmware_settings=FirmwareSettings(error="BMC not answering")))
    result = hfs.reconcile_firmware_settings(store, provisioner, ref)
    assert result.requeue_after == hfs.RETRY and "BMC not answering" in result.message and not result.changed


def test_registration_gives_a_host_its_settings_and_adopts_settings_made_before_it(store):
    premade = store.create({"apiVersion": firmware.API, "kind": firmware.SETTINGS_KIND,
                            "metadata": {"name": "early", "namespace": "ns"},
                            "spec": {"settings": {"ProcTurboMode": "Disabled"}}})
    store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bmc", "namespace": "ns"},
                  "stringData": {"username": "u", "password": "p"}})
    for name in ("h", "early"):
        host = store.create({"apiVersion": bmh.API, "kind": bmh.KIND, "metadata": {"name": name, "namespace": "ns"},
                             "spec": {"online": False, "bmc": {"address": "fake://x", "credentialsName": "bmc"},
                                      "inspectionMode": "disabled"}})
        bmh.reconcile_host(store, FixtureProvisioner(Answers()), Ref.of(host))
        settings = store.get(Ref(firmware.API, firmware.SETTINGS_KIND, name, "ns"))
        assert [o["uid"] for o in settings["metadata"]["ownerReferences"]] == [host["metadata"]["uid"]]
        # An empty status.settings (which the kind requires) before the first read: an operator may mark it Running.
        assert settings["status"] == {"settings": {}}
    assert store.get(Ref.of(premade))["spec"]["settings"] == {"ProcTurboMode": "Disabled"}  # kept as it was


@pytest.mark.parametrize("policy, when", [
    pytest.param(None, "the host is provisioned: not applied until it is available again, or until a "
                       "HostUpdatePolicy h with firmwareSettings onReboot allows servicing it when it reboots",
                 id="no-policy"),
    pytest.param({"firmwareUpdates": "onReboot"}, "the host is provisioned: not applied until it is available again, "
                 "or until a HostUpdatePolicy h with firmwareSettings onReboot allows servicing it when it reboots",
                 id="a-policy-for-other-changes"),
    pytest.param({"firmwareSettings": "onReboot"}, "the host is provisioned: applied by servicing when it next "
                 "reboots (its HostUpdatePolicy allows it)", id="a-policy-that-allows-it"),
])
def test_a_provisioned_hosts_pending_change_says_when_it_is_applied(store, policy, when):
    ref = registered_host(store, state=bmh.PROVISIONED)
    if policy is not None:
        store.create({"apiVersion": firmware.API, "kind": firmware.UPDATE_POLICY_KIND,
                      "metadata": {"name": "h", "namespace": "ns"}, "spec": policy})
    ask(store, ref, {"ProcTurboMode": "Disabled"})
    reconcile(store, ref)
    assert conditions(store.get(ref))["ChangeDetected"] == ("True", when)


def test_a_reconcile_reads_each_of_the_hosts_firmware_kinds_once(store):
    """An available host asks for its settings in several places of one step; the store is asked once."""
    from tests.harness.counting_store import CountingStore

    store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bmc", "namespace": "ns"},
                  "stringData": {"username": "u", "password": "p"}})
    host = store.create({"apiVersion": bmh.API, "kind": bmh.KIND, "metadata": {"name": "h", "namespace": "ns"},
                         "spec": {"online": False, "bmc": {"address": "fake://x", "credentialsName": "bmc"},
                                  "inspectionMode": "disabled"}})
    bmh.reconcile_host(store, FixtureProvisioner(Answers()), Ref.of(host))  # registered: available, its settings made
    counting = CountingStore(store)
    step = bmh.reconcile_host(counting, FixtureProvisioner(Answers()), Ref.of(host))
    assert step.state == bmh.AVAILABLE and step.resting
    assert counting.counts[("get", firmware.SETTINGS_KIND)] == 1
