"""Admission on every write path, on both backends (issue 13 §3).

Upstream's webhooks see every create and update of a BareMetalHost or an IPPool, whoever makes it. Here every
store ``open_store`` returns admits its writes: the resource module's, the engine's in every other module
(baremetal_host's finalizer, ip_pool's pool), and a caller's own. A refused write names the field and writes
nothing; status writes are not admitted, as upstream registers no webhook on status.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from tests.integration.playbook_runs import ansible_playbook

API = "metal3.io/v1alpha1"
IPAM = "ipam.metal3.io/v1alpha1"


def bmh(name: str, namespace: str, **spec) -> dict:
    return {"apiVersion": API, "kind": "BareMetalHost", "metadata": {"name": name, "namespace": namespace},
            "spec": {"online": True, "bootMACAddress": "52:54:00:aa:00:01",
                     "bmc": {"address": "fake://host", "credentialsName": "host-bmc"}, **spec}}


def test_a_store_open_store_returns_admits_creates_updates_and_patches(store_options, namespace):
    with open_store(store_options) as store:
        ref = Ref(API, "BareMetalHost", "host", namespace)
        with pytest.raises(Invalid, match=r'BareMetalHost.metal3.io "host" is invalid: '
                                          r"spec.rootDeviceHints.deviceName: device name of root device hint must "
                                          r'be a /dev/ path, not "sda"'):
            store.create(bmh("host", namespace, rootDeviceHints={"deviceName": "sda"}))
        with pytest.raises(Invalid, match="spec.userData: cross-namespace Secret references are not allowed"):
            store.create(bmh("host", namespace, userData={"name": "u", "namespace": "elsewhere"}), dry_run=True)
        assert store.get_if_exists(ref) is None

        created = store.create(bmh("host", namespace))
        with pytest.raises(Invalid, match="spec.image.checksum: checksum is required for normal images"):
            store.patch(ref, {"spec": {"image": {"url": "http://images.example/os.qcow2"}}})
        bad = {**created, "spec": {**created["spec"], "bootMACAddress": "52:54:00:aa:00:02"}}
        with pytest.raises(Invalid, match="spec.bootMACAddress: bootMACAddress can not be changed once it is set"):
            store.update(bad)
        assert store.get(ref)["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]

        patched = store.patch(ref, {"spec": {"image": {"url": "http://images.example/os.qcow2", "checksum": "abc"}}})
        assert patched["spec"]["image"]["checksum"] == "abc"
        # Status is the controller's: written as it is found, upstream's webhook is not on it.
        store.patch_status(ref, {"status": {"operationalStatus": "servicing"}})
        assert store.get(ref)["status"]["operationalStatus"] == "servicing"

        pool = {"apiVersion": IPAM, "kind": "IPPool", "metadata": {"name": "pool", "namespace": namespace},
                "spec": {"namePrefix": "pool", "pools": [{"start": "10.0.0.10", "end": "10.0.0.20"}], "prefix": 24}}
        store.create(pool)
        with pytest.raises(Invalid, match="spec.namePrefix"):
            store.patch(Ref(IPAM, "IPPool", "pool", namespace), {"spec": {"namePrefix": "renamed"}})


def test_the_engine_in_other_modules_writes_through_admission(store_options, store, namespace, ironic,
                                                              tmp_path: Path):
    store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "host-bmc", "namespace": namespace},
                  "stringData": {"username": "admin", "password": "password"}})
    # Stored around admission, as by a version of the collection before these rules, or by hand.
    stale = store.create(bmh("stale", namespace, image={"url": "http://images.example/os.qcow2"}))
    store.create({"apiVersion": IPAM, "kind": "IPPool", "metadata": {"name": "pool", "namespace": namespace},
                  "spec": {"namePrefix": "pool", "pools": [{"start": "10.0.0.10", "end": "10.0.0.20"}],
                           "prefix": 24}})
    results = tmp_path / "results.json"
    run = ansible_playbook("admission.yml", {"store": store_options, "ns": namespace,
                                             "ironic": {"ironic_cloud": ironic.cloud}, "host": "stale",
                                             "pool": "pool", "results": str(results)}, env=ironic.env)
    assert run.ok, run.output
    assert "Traceback" not in run.output
    outcome = json.loads(results.read_text())
    assert outcome["host_step"]["failed"]
    assert 'BareMetalHost.metal3.io "stale" is invalid: spec.image.checksum: checksum is required for normal ' \
           "images" in outcome["host_step"]["msg"]
    assert store.get(Ref.of(stale))["metadata"].get("finalizers") is None  # nothing written
    assert outcome["renamed"]["failed"] and "spec.namePrefix" in outcome["renamed"]["msg"]
    assert store.get(Ref(IPAM, "IPPool", "pool", namespace))["spec"]["namePrefix"] == "pool"
    assert outcome["bad_hint"]["failed"]
    assert 'spec.rootDeviceHints.deviceName: device name of root device hint must be a /dev/ path, not "sda"' in \
        outcome["bad_hint"]["msg"]
    assert store.get_if_exists(Ref(API, "BareMetalHost", "bad-hint", namespace)) is None


def day2(kind: str, namespace: str, **spec) -> dict:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": "node-0", "namespace": namespace}, "spec": spec}


def test_the_day2_hardware_kinds_are_stored_and_admitted_alike_on_both_backends(store_options, namespace):
    """Issue 33's kinds: upstream's objects stored, their status written, and the DataImage and
    HostFirmwareComponents webhooks' rules applied to every write."""
    with open_store(store_options) as store:
        settings = store.create(day2("HostFirmwareSettings", namespace,
                                     settings={"ProcVirtualization": "Disabled", "NetworkBootRetryCount": 20}))
        assert settings["spec"]["settings"]["NetworkBootRetryCount"] == 20  # an integer stays one
        store.patch_status(Ref.of(settings), {"status": {
            "settings": {"ProcVirtualization": "Enabled", "NetworkBootRetryCount": "10"},
            "schema": {"namespace": namespace, "name": "schema-0"},
            "conditions": [{"type": "Valid", "status": "True", "reason": "Success", "message": ""}]}})
        store.create(day2("FirmwareSchema", namespace, hardwareVendor="QEMU", schema={
            "ProcVirtualization": {"attribute_type": "Enumeration", "allowable_values": ["Enabled", "Disabled"]}}))
        store.create(day2("HostUpdatePolicy", namespace, firmwareSettings="onReboot"))
        with pytest.raises(Invalid, match="spec.firmwareUpdates"):
            store.create({**day2("HostUpdatePolicy", namespace, firmwareUpdates="always"),
                          "metadata": {"name": "node-1", "namespace": namespace}})
        store.create(day2("PreprovisioningImage", namespace, acceptFormats=["iso", "initrd"]))

        with pytest.raises(Invalid, match=r'DataImage.metal3.io "node-0" is invalid: spec.url: URL "abc" is invalid: '
                                          r'parse "abc": invalid URI for request'):
            store.create(day2("DataImage", namespace, url="abc"))
        image = store.create(day2("DataImage", namespace, url="http://images.example/data.iso"))
        with pytest.raises(Invalid, match='spec.url: URL "unix://images/data.iso" is invalid: invalid scheme'):
            store.patch(Ref.of(image), {"spec": {"url": "unix://images/data.iso"}})
        store.patch_status(Ref.of(image), {"status": {"attachedImage": {"url": "http://images.example/data.iso"},
                                                      "error": {"count": 0, "message": ""}}})

        components = store.create(day2("HostFirmwareComponents", namespace,
                                       updates=[{"component": "bmc", "url": "http://firmware.example/bmc.bin"}]))
        with pytest.raises(Invalid, match=r'spec.updates\[0\].url: invalid URL "" in FirmwareUpdate in component '
                                          r'"bios": parse "": empty url'):
            store.patch(Ref.of(components), {"spec": {"updates": [{"component": "bios", "url": ""}]}})
        store.patch_status(Ref.of(components), {"status": {"components": [
            {"component": "bios", "initialVersion": "1.0", "currentVersion": "1.0", "updatedAt": None}]}})
        assert store.get(Ref.of(components))["spec"]["updates"][0]["component"] == "bmc"
        assert store.get(Ref.of(image))["status"]["attachedImage"]["url"] == "http://images.example/data.iso"
