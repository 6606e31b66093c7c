"""Firmware components (HostFirmwareComponents) of hosts behind Redfish BMCs: sushy-tools' libvirt driver on
libvirt's test hypervisor (``redfish_hardware``), a real Ironic.

What sushy-tools can emulate: its BMCs list a ``bios`` component (the system's BiosVersion, 1.0.0) and a ``bmc``
(the manager's FirmwareVersion, a constant 1.00); an update downloads nothing and bumps the BIOS version's minor,
whatever the component. A firmware.update clean step needs the agent ramdisk, which no VM here boots: an update
while preparing is covered by the unit tests only (tests/unit/module_utils/hosts/test_host_state_machine.py). A
service step needs none: an update by servicing a provisioned host is run here, on an externally provisioned one
(sushy-tools without a VM cannot deploy).
"""
from __future__ import annotations

import re
from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import baremetalhost as bmh
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import firmware
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import firmware_components as hfc
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import Ironic, IronicOptions
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.provisioner import ironic_provisioners
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.harness.ironic import REPO
from tests.integration.playbook_runs import ansible_playbook
from tests.integration.test_host_firmware_settings import NS, rebooted, register

# Not the controller's own host, and never fetched (sushy-tools downloads nothing): TEST-NET-1.
BIOS_IMAGE = "http://192.0.2.10/firmware/bios-1.1.0.bin"


def versions(components: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["component"]: (c["initialVersion"], c.get("currentVersion", ""))
            for c in components["status"]["components"]}


def valid(components: dict[str, Any]) -> tuple[str, str]:
    condition = next(c for c in components["status"]["conditions"] if c["type"] == "Valid")
    return condition["status"], condition.get("message", "")


def test_a_hosts_components_are_listed_and_bad_updates_refused_naming_the_field(
        tmp_path, ironic, redfish_hardware, monkeypatch):
    for key, value in ironic.env.items():
        monkeypatch.setenv(key, value)
    provisioners = ironic_provisioners(Ironic(IronicOptions(cloud=ironic.cloud)))
    store_path = tmp_path / "store.db"
    with LocalStore(str(store_path)) as store:
        ref = register(store, ironic, redfish_hardware, 4)
        components_ref = Ref(firmware.API, firmware.COMPONENTS_KIND, ref.name, NS)
        made = store.get(components_ref)  # registered: the BMC lists components, so the host has them, owns them
        assert [o["name"] for o in made["metadata"]["ownerReferences"]] == [ref.name]
        hfc.reconcile_firmware_components(store, provisioners, components_ref)
        assert versions(store.get(components_ref)) == {"bios": ("1.0.0", "1.0.0"), "bmc": ("1.00", "1.00")}

        hfc.ask_updates(store, components_ref, [{"component": "cpld", "url": BIOS_IMAGE}])
        hfc.reconcile_firmware_components(store, provisioners, components_ref)
        status, message = valid(store.get(components_ref))
        assert status == "False" and "spec.updates[0].component: component cpld is invalid" in message

        hfc.ask_updates(store, components_ref, [{"component": "bios", "url": "http://127.0.0.1:8080/bios.bin"}])
        hfc.reconcile_firmware_components(store, provisioners, components_ref)
        status, message = valid(store.get(components_ref))
        assert status == "False" and "spec.updates[0].url: 'http://127.0.0.1:8080/bios.bin' names a loopback" in \
            message

        # Neither is sent: the available host stays so, its BIOS as it was.
        last = bmh.reconcile_host(store, provisioners, ref)
        assert last.state == bmh.AVAILABLE and not last.error, last.message
        assert store.get(components_ref)["status"].get("updates") is None
    assert redfish_hardware.system(ref.name)["BiosVersion"] == "1.0.0"

    # The fleet playbook: an update asked of an unknown component is refused at the play's end, naming the field;
    # the firmware table lists the host's components.
    run = ansible_playbook(REPO / "playbooks" / "firmware.yml",
                           {"firmware_namespace": NS, "firmware_wait_timeout": 120,
                            "firmware_updates": {ref.name: [{"component": "cpld", "url": BIOS_IMAGE}]}},
                           env={**ironic.env, "METAL3_STORE_PATH": str(store_path)}, timeout=600)
    assert "Traceback" not in run.output
    assert not run.ok and f"{ref.name}: Invalid Firmware Components: spec.updates[0].component: component cpld " \
        "is invalid" in run.output, run.output
    assert re.search(rf"^{ref.name} +bios +1\.0\.0 +1\.0\.0 +- *$", run.output, re.M), run.output
    assert re.search(rf"^{ref.name} +bmc +1\.00 +1\.00 +- *$", run.output, re.M), run.output


def test_a_provisioned_host_is_updated_by_servicing_under_its_policy(tmp_path, ironic, redfish_hardware, monkeypatch):
    for key, value in ironic.env.items():
        monkeypatch.setenv(key, value)
    client = Ironic(IronicOptions(cloud=ironic.cloud))
    provisioners = ironic_provisioners(client)
    with LocalStore(str(tmp_path / "store.db")) as store:
        ref = register(store, ironic, redfish_hardware, 5, "externally provisioned", online=True,
                       externallyProvisioned=True)
        name = ref.name
        components_ref = Ref(firmware.API, firmware.COMPONENTS_KIND, name, NS)
        store.create({"apiVersion": firmware.API, "kind": firmware.UPDATE_POLICY_KIND,
                      "metadata": {"name": name, "namespace": NS}, "spec": {"firmwareUpdates": "onReboot"}})
        hfc.ask_updates(store, components_ref, [{"component": "bios", "url": BIOS_IMAGE}])
        hfc.reconcile_firmware_components(store, provisioners, components_ref)
        assert valid(store.get(components_ref)) == ("True", "")
        seen = rebooted(store, client, ref)
        host = store.get(ref)
        hfc.reconcile_firmware_components(store, provisioners, components_ref)
        components = store.get(components_ref)
    assert "servicing" in seen and not seen & {"deploying", "wait call-back", "deleting", "cleaning"}, seen
    assert host["status"]["operationalStatus"] == "OK"
    assert bmh.REBOOT_ANNOTATION not in (host["metadata"].get("annotations") or {})
    # The new version, as Ironic read it back from the BMC; the update recorded as sent, nothing pending.
    assert versions(components)["bios"] == ("1.0.0", "1.1.0")
    assert components["status"]["updates"] == [{"component": "bios", "url": BIOS_IMAGE}]
    assert {c["type"]: c["status"] for c in components["status"]["conditions"]} == \
        {"ChangeDetected": "False", "Valid": "True"}
    assert redfish_hardware.system(name)["BiosVersion"] == "1.1.0"
