"""BIOS settings (HostFirmwareSettings, FirmwareSchema) of hosts behind Redfish BMCs with a BIOS: sushy-tools' libvirt
driver on libvirt's test hypervisor (``redfish_hardware``), a real Ironic, the bastion's playbook and modules.

Two hosts are registered. The fleet playbook asks the first for an Enumeration and a String setting (the libvirt
driver's Boolean and Integer settings are never changed: Ironic's check of a Boolean never matches what sushy-tools
stores, and the step waits for its timeout). It asks the second for a value its schema does not allow and for a
setting it does not have. The first goes preparing and back, and Redfish then shows the new values. The second is
refused, naming both settings, and its BIOS is left as it was.
"""
from __future__ import annotations

import json
import re
from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import baremetalhost as bmh
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import firmware
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import firmware_settings as hfs
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import Ironic, IronicOptions
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.provisioner import ironic_provisioners
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.harness.ironic import REPO
from tests.integration.playbook_runs import ansible_playbook

NS = "fleet"


def register(store: LocalStore, ironic, emulator, index: int, state: str = "available", **spec: Any) -> Ref:
    name = f"{emulator.prefix}-{index}"
    store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{name}-bmc", "namespace": NS},
                  "stringData": {"username": emulator.username, "password": emulator.password}})
    host = store.create({"apiVersion": bmh.API, "kind": bmh.KIND, "metadata": {"name": name, "namespace": NS},
                         "spec": {"online": False, "bootMACAddress": emulator.mac(index), "inspectionMode": "disabled",
                                  "bmc": {"address": emulator.address(name), "credentialsName": f"{name}-bmc"},
                                  **spec}})
    ref = Ref.of(host)
    settle(store, ironic, ref, state)
    return ref


def settle(store: LocalStore, ironic, ref: Ref, state: str) -> bmh.HostStep:
    provisioners = ironic_provisioners(Ironic(IronicOptions(cloud=ironic.cloud)))
    last, reached = bmh.wait_for_host(lambda: bmh.reconcile_host(store, provisioners, ref), (state,), 240)
    assert reached, f"{ref}: {last.state} {last.error} {last.message}"
    return last


def rebooted(store: LocalStore, client: Ironic, ref: Ref) -> set[str]:
    """An externally provisioned host asked to reboot, stepped until it rests again; every operationalStatus of the
    host and provision state of its node seen meanwhile."""
    provisioners = ironic_provisioners(client)
    store.patch(ref, {"metadata": {"annotations": {bmh.REBOOT_ANNOTATION: ""}}})
    seen: set[str] = set()

    def step() -> bmh.HostStep:
        result = bmh.reconcile_host(store, provisioners, ref)
        seen.add(str((result.obj or {}).get("status", {}).get("operationalStatus")))
        seen.add(client.get_node(f"{ref.namespace}~{ref.name}")["provision_state"])
        return result

    last, reached = bmh.wait_for_host(step, ("externally provisioned",), 240)
    assert reached and not last.error, f"{last.state} {last.error} {last.message}"
    return seen


def bios(emulator, index: int) -> dict[str, str]:
    return emulator.system(f"{emulator.prefix}-{index}", "BIOS")["Attributes"]


def test_a_fleets_bios_settings_are_read_checked_applied_and_read_back(tmp_path, ironic, redfish_hardware,
                                                                       monkeypatch):
    for key, value in ironic.env.items():
        monkeypatch.setenv(key, value)
    store_path = tmp_path / "store.db"
    with LocalStore(str(store_path)) as store:
        refs = [register(store, ironic, redfish_hardware, index) for index in (0, 1)]
        for ref in refs:  # registered: each host has its HostFirmwareSettings, owned by it
            settings = store.get(Ref(firmware.API, firmware.SETTINGS_KIND, ref.name, NS))
            assert settings["metadata"]["ownerReferences"][0]["name"] == ref.name
    before = [bios(redfish_hardware, index) for index in (0, 1)]
    assert before[0]["ProcTurboMode"] == "Enabled" and before[1]["ProcTurboMode"] == "Enabled"

    first, second = (f"{redfish_hardware.prefix}-{index}" for index in (0, 1))
    env = {**ironic.env, "METAL3_STORE_PATH": str(store_path)}
    asked = {first: {"ProcTurboMode": "Disabled", "SerialNumber": "QPX00042"},
             second: {"ProcTurboMode": "Sometimes", "NoSuchSetting": "On"}}
    run = ansible_playbook(REPO / "playbooks" / "firmware.yml",
                           {"firmware_namespace": NS, "firmware_settings": asked, "firmware_wait_timeout": 300},
                           env=env, timeout=900)
    assert "Traceback" not in run.output
    # The refused ask fails the play at its end, naming each setting and why.
    assert not run.ok and re.search(
        rf"{second}: Invalid BIOS setting: setting NoSuchSetting is not in the Status field; Setting ProcTurboMode "
        r"is invalid, unknown enumeration value - Sometimes", run.output), run.output
    # The table: the first host's new values; the second's refused ask beside its value.
    assert re.search(rf"^{first} +ProcTurboMode +Disabled +- +schema-[0-9a-f]{{8}}$", run.output, re.M), run.output
    assert re.search(rf"^{first} +SerialNumber +QPX00042 +- ", run.output, re.M), run.output
    assert re.search(rf"^{second} +ProcTurboMode +Enabled +Sometimes ", run.output, re.M), run.output

    # Through Redfish: the first host's BIOS has the new values (and only those changed); the second's is as it was.
    after = [bios(redfish_hardware, index) for index in (0, 1)]
    assert after[0] == {**before[0], "ProcTurboMode": "Disabled", "SerialNumber": "QPX00042"}
    assert after[1] == before[1]
    with LocalStore(str(store_path)) as store:
        hosts = {ref.name: store.get(ref) for ref in refs}
        schemas = store.list(firmware.API, firmware.SCHEMA_KIND, NS)
        settings = store.get(Ref(firmware.API, firmware.SETTINGS_KIND, first, NS))
    assert {name: bmh.host_state(host) for name, host in hosts.items()} == {first: "available", second: "available"}
    assert not any(host["status"].get("errorType") for host in hosts.values())
    # One model, one schema, owned by both hosts' settings; its registry as sushy-tools describes it.
    assert len(schemas) == 1 and len(schemas[0]["metadata"]["ownerReferences"]) == 2
    assert schemas[0]["spec"]["schema"]["ProcTurboMode"]["allowable_values"] == ["Enabled", "Disabled"]
    assert "SysPassword" not in schemas[0]["spec"]["schema"] and "SysPassword" not in settings["status"]["settings"]
    conditions = {c["type"]: c["status"] for c in settings["status"]["conditions"]}
    assert conditions == {"ChangeDetected": "False", "Valid": "True"}

    # Check mode: the diff of an ask, and nothing written.
    check = ansible_playbook(REPO / "tests" / "integration" / "playbooks" / "firmware_ask.yml",
                             {"ns": NS, "name": first, "settings": {"ProcTurboMode": "Enabled"}}, "--check", "--diff",
                             env=env)
    assert check.ok, check.output
    assert re.search(r'^-\s+"ProcTurboMode": "Disabled"', check.output, re.M), check.output
    assert re.search(r'^\+\s+"ProcTurboMode": "Enabled"', check.output, re.M), check.output
    with LocalStore(str(store_path)) as store:
        unchanged = store.get(Ref(firmware.API, firmware.SETTINGS_KIND, first, NS))
    assert unchanged["spec"] == settings["spec"]

    # Bad input: a value that is neither text nor an integer names the setting, and nothing is written.
    bad = ansible_playbook(REPO / "tests" / "integration" / "playbooks" / "firmware_ask.yml",
                           {"ns": NS, "name": first, "settings": {"QuietBoot": True}}, env=env)
    assert not bad.ok and "settings.QuietBoot: must be a string or an integer, not bool" in bad.output, bad.output
    assert "Traceback" not in bad.output
    with LocalStore(str(store_path)) as store:
        assert json.dumps(store.get(Ref(firmware.API, firmware.SETTINGS_KIND, first, NS))["spec"]) == \
            json.dumps(settings["spec"])


def test_a_provisioned_host_is_serviced_on_a_reboot_only_under_its_update_policy(tmp_path, ironic, redfish_hardware,
                                                                                 monkeypatch):
    """Servicing: a BIOS setting of a provisioned host (here externally provisioned: sushy-tools without a VM cannot
    deploy) applied as it reboots, without reprovisioning, once a HostUpdatePolicy allows it."""
    for key, value in ironic.env.items():
        monkeypatch.setenv(key, value)
    client = Ironic(IronicOptions(cloud=ironic.cloud))
    provisioners = ironic_provisioners(client)
    index = 6
    with LocalStore(str(tmp_path / "store.db")) as store:
        ref = register(store, ironic, redfish_hardware, index, "externally provisioned", online=True,
                       externallyProvisioned=True)
        name = ref.name
        settings_ref = Ref(firmware.API, firmware.SETTINGS_KIND, name, NS)
        store.patch(settings_ref, {"spec": {"settings": {"ProcTurboMode": "Disabled"}}})
        hfs.reconcile_firmware_settings(store, provisioners, settings_ref)
        changed = {c["type"]: c for c in store.get(settings_ref)["status"]["conditions"]}["ChangeDetected"]
        assert changed["status"] == "True" and f"until a HostUpdatePolicy {name} with firmwareSettings onReboot" in \
            changed["message"]

        # Without a policy, a reboot is only a reboot: the setting waits.
        store.patch(ref, {"metadata": {"annotations": {bmh.REBOOT_ANNOTATION: ""}}})
        settle(store, ironic, ref, "externally provisioned")
        assert bmh.REBOOT_ANNOTATION not in (store.get(ref)["metadata"].get("annotations") or {})
        assert bios(redfish_hardware, index)["ProcTurboMode"] == "Enabled"

        # Under a policy that allows it, the next reboot services the host.
        store.create({"apiVersion": firmware.API, "kind": firmware.UPDATE_POLICY_KIND,
                      "metadata": {"name": name, "namespace": NS}, "spec": {"firmwareSettings": "onReboot"}})
        hfs.reconcile_firmware_settings(store, provisioners, settings_ref)
        changed = {c["type"]: c for c in store.get(settings_ref)["status"]["conditions"]}["ChangeDetected"]
        assert "applied by servicing when it next reboots" in changed["message"]
        seen = rebooted(store, client, ref)
        host = store.get(ref)
        policy = store.get(Ref(firmware.API, firmware.UPDATE_POLICY_KIND, name, NS))
        hfs.reconcile_firmware_settings(store, provisioners, settings_ref)
        settings = store.get(settings_ref)
    assert bios(redfish_hardware, index)["ProcTurboMode"] == "Disabled"
    assert "servicing" in seen and seen & {"servicing", "service wait"}, seen  # Ironic serviced the node
    assert not seen & {"deploying", "wait call-back", "deleting", "cleaning"}, seen  # never reprovisioned
    assert host["status"]["operationalStatus"] == "OK" and host["status"]["provisioning"]["state"] == \
        "externally provisioned"
    assert bmh.REBOOT_ANNOTATION not in (host["metadata"].get("annotations") or {})
    assert [o["name"] for o in policy["metadata"]["ownerReferences"]] == [name]  # the host owns its policy
    assert settings["status"]["settings"]["ProcTurboMode"] == "Disabled"
    assert {c["type"]: c["status"] for c in settings["status"]["conditions"]}["ChangeDetected"] == "False"
