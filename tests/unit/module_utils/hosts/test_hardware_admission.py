"""baremetal-operator's day-2 hardware kinds (issue 33): their schemas, and the admission of DataImages and
HostFirmwareComponents (hosts/hardware_admission.py) as tables - upstream's own cases by their names,
TestDataImageValidateCreate (internal/webhooks/metal3.io/v1alpha1/dataimage_validation_test.go) and
TestHostFirmwareComponentsValidateCreate (hostfirmwarecomponents_validation_test.go), then ours. Each row is
admitted, or refused naming its field with upstream's text."""
from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils import engine
from ansible_collections.metal3.baremetal.plugins.module_utils.api.admission import RULED_KINDS, admit, rule_for
from ansible_collections.metal3.baremetal.plugins.module_utils.api.kinds import lookup
from ansible_collections.metal3.baremetal.plugins.module_utils.api.validation import validate
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest, Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import hardware_admission
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.hardware_admission import (
    admit_data_image,
    admit_firmware_components,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.store.admitted import admitted
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

API = "metal3.io/v1alpha1"
NS = "test-namespace"
DAY2_KINDS = ("HostFirmwareSettings", "FirmwareSchema", "HostFirmwareComponents", "HostUpdatePolicy", "DataImage",
              "PreprovisioningImage")


def obj(kind: str, spec: dict[str, Any], status: dict[str, Any] | None = None, name: str = "test") -> dict[str, Any]:
    made: dict[str, Any] = {"apiVersion": API, "kind": kind, "metadata": {"name": name, "namespace": NS},
                            "spec": spec}
    if status is not None:
        made["status"] = status
    return made


def data_image(url: str) -> dict[str, Any]:
    return obj("DataImage", {"url": url})


def components(*updates: tuple[str, str]) -> dict[str, Any]:
    return obj("HostFirmwareComponents", {"updates": [{"component": c, "url": u} for c, u in updates]})


# (case, the DataImage's URL, (field, upstream's text) or None when it is admitted)
DATA_IMAGE_CASES = [
    # upstream's TestDataImageValidateCreate
    ("validURL", "http://localhost/abc/abc.php", None),
    ("invalidURL", "abc", ("spec.url", 'URL "abc" is invalid: parse "abc": invalid URI for request')),
    ("invalidURLScheme", "unix://localhost/abc/abc.php",
     ("spec.url", 'URL "unix://localhost/abc/abc.php" is invalid: invalid scheme in URL, "unix" not allowed')),
    ("invalidURLempty", "", ("spec.url", 'URL "" is invalid: parse "": empty url')),
    # ours: the other schemes upstream allows, its case-insensitive schemes, and a path without one
    ("https with a port", "https://images.example.com:8443/data.iso", None),
    ("oci", "oci://registry.example.com/data:latest", None),
    ("ftp", "ftp://images/data.iso", None),
    ("an upper-case scheme", "HTTP://images/data.iso", None),
    ("a path alone", "/data.iso", ("spec.url", 'URL "/data.iso" is invalid: invalid scheme in URL, "" not allowed')),
    ("file", "file:///etc/passwd",
     ("spec.url", 'URL "file:///etc/passwd" is invalid: invalid scheme in URL, "file" not allowed')),
    ("a bad port", "http://images:http/data.iso",
     ("spec.url", 'URL "http://images:http/data.iso" is invalid: parse "http://images:http/data.iso": invalid port '
                  '":http" after host')),
]

# (case, the updates, (field, upstream's text) or None when it is admitted)
COMPONENTS_CASES = [
    # upstream's TestHostFirmwareComponentsValidateCreate (its valid case names no component)
    ("validURL", components(("", "http://example.com")), None),
    ("invalidURL", components(("test1", "abc")),
     ("spec.updates[0].url", 'invalid URL "abc" in FirmwareUpdate in component "test1": parse "abc": invalid URI for '
                             "request")),
    ("invalidURLScheme", components(("test1", "unix://example.com")),
     ("spec.updates[0].url", 'invalid URL "unix://example.com" in FirmwareUpdate in component "test1": invalid '
                             'scheme in URL, "unix" not allowed')),
    ("invalidURLempty", components(("test1", "")),
     ("spec.updates[0].url", 'invalid URL "" in FirmwareUpdate in component "test1": parse "": empty url')),
    # ours: the field names the update; no updates at all; component names are the controller's (hosts/firmware.py)
    ("the second update", components(("bmc", "https://firmware/bmc.bin"), ("bios", "gopher//firmware/bios.bin")),
     ("spec.updates[1].url", 'invalid URL "gopher//firmware/bios.bin" in FirmwareUpdate in component "bios": parse '
                             '"gopher//firmware/bios.bin": invalid URI for request')),
    ("no updates", components(), None),
    ("a component name only the controller refuses", components(("raid", "https://firmware/raid.bin")), None),
]


def refusal(rule: Any, new: dict[str, Any]) -> str | None:
    try:
        rule(None, new, None)  # these rules read no store
    except Invalid as e:
        return str(e)
    return None


@pytest.mark.parametrize(("url", "wanted"), [c[1:] for c in DATA_IMAGE_CASES], ids=[c[0] for c in DATA_IMAGE_CASES])
def test_data_images(url, wanted):
    refused = refusal(admit_data_image, data_image(url))
    if wanted is None:
        assert refused is None
    else:
        assert refused == f'DataImage.metal3.io "test" is invalid: {wanted[0]}: {wanted[1]}'


@pytest.mark.parametrize(("new", "wanted"), [c[1:] for c in COMPONENTS_CASES], ids=[c[0] for c in COMPONENTS_CASES])
def test_host_firmware_components(new, wanted):
    refused = refusal(admit_firmware_components, new)
    if wanted is None:
        assert refused is None
    else:
        assert refused == f'HostFirmwareComponents.metal3.io "test" is invalid: {wanted[0]}: {wanted[1]}'


def test_every_bad_url_is_named_at_once():
    refused = refusal(admit_firmware_components, components(("bmc", "abc"), ("bios", "http://ok"), ("nic:1", "")))
    assert refused is not None and refused.count("; ") == 1
    assert "spec.updates[0].url: " in refused and "spec.updates[2].url: " in refused


def test_the_tables_hold_valid_and_invalid_rows():
    for cases in (DATA_IMAGE_CASES, COMPONENTS_CASES):
        assert {c[-1] is None for c in cases} == {True, False}


def test_the_rules_are_registered_by_the_engine():
    assert hardware_admission in engine.DOMAINS
    assert {("metal3.io", "DataImage"), ("metal3.io", "HostFirmwareComponents")} <= RULED_KINDS
    assert rule_for(API, "DataImage") is admit_data_image
    assert rule_for(API, "HostFirmwareComponents") is admit_firmware_components
    # Upstream has no webhook for these: their schemas alone admit them.
    for kind in ("HostFirmwareSettings", "FirmwareSchema", "HostUpdatePolicy", "PreprovisioningImage"):
        assert rule_for(API, kind) is None


def test_the_schema_is_held_before_the_rules():
    with pytest.raises(Invalid, match=r"spec\.url: Required value"):
        admit(None, obj("DataImage", {}), None)  # type: ignore[arg-type]
    with pytest.raises(Invalid, match=r"spec\.updates\[0\]\.component: Required value"):
        admit(None, obj("HostFirmwareComponents", {"updates": [{"url": "http://x"}]}), None)  # type: ignore[arg-type]
    with pytest.raises(BadRequest, match='unknown field "spec.updates\\[0\\].version"'):
        admit(None, obj("HostFirmwareComponents", {"updates": [{"component": "bmc", "url": "http://x",  # type: ignore
                                                                "version": "2"}]}), None)


def test_every_write_is_admitted_and_no_status_write(tmp_path):
    with admitted(LocalStore(str(tmp_path / "store.db"))) as store:
        with pytest.raises(Invalid, match='spec.url: URL "abc" is invalid'):
            store.create(data_image("abc"))
        stored = store.create(data_image("http://images/data.iso"))
        ref = Ref.of(stored)
        with pytest.raises(Invalid, match='spec.url: URL "file:///etc/passwd" is invalid'):
            store.patch(ref, {"spec": {"url": "file:///etc/passwd"}})
        current = store.get(ref)
        current["spec"]["url"] = "unix://images/data.iso"
        with pytest.raises(Invalid, match=r'spec.url: URL "unix://images/data.iso" is invalid'):
            store.update(current)
        # Status is the controller's, written as it finds it, as upstream registers no webhook on it.
        store.patch_status(ref, {"status": {"attachedImage": {"url": "abc"}, "error": {"count": 1, "message": "x"}}})
        assert store.get(ref)["spec"]["url"] == "http://images/data.iso"
        assert store.get(ref)["status"]["attachedImage"] == {"url": "abc"}
        hfc = store.create(components(("bmc", "https://firmware/bmc.bin")))
        with pytest.raises(Invalid, match=r"spec.updates\[1\].url: invalid URL"):
            store.patch(Ref.of(hfc), {"spec": {"updates": [{"component": "bmc", "url": "https://firmware/bmc.bin"},
                                                           {"component": "bios", "url": "bios.bin"}]}})


# -- the kinds, from their CRDs ---------------------------------------------------------------------------------

# kind: (plural, a status subresource?), as upstream's CRDs have them.
UPSTREAM_KINDS = {
    "HostFirmwareSettings": ("hostfirmwaresettings", True),
    "FirmwareSchema": ("firmwareschemas", False),
    "HostFirmwareComponents": ("hostfirmwarecomponents", True),
    "HostUpdatePolicy": ("hostupdatepolicies", False),
    "DataImage": ("dataimages", True),
    "PreprovisioningImage": ("preprovisioningimages", True),
}


@pytest.mark.parametrize("kind", DAY2_KINDS)
def test_the_kinds_come_from_their_crds(kind):
    info = lookup(API, kind)
    assert (info.plural, info.status_subresource) == UPSTREAM_KINDS[kind]
    assert info.namespaced and info.versions == ("v1alpha1",)


# Objects of each kind as upstream's controllers and users write them: each valid against its schema.
VALID = [
    obj("HostFirmwareSettings", {"settings": {"ProcVirtualization": "Disabled", "NetworkBootRetryCount": 20}},
        {"settings": {"ProcVirtualization": "Enabled", "NetworkBootRetryCount": "10"},
         "schema": {"namespace": NS, "name": "schema-4bcc035f"}, "lastUpdated": "2026-01-02T03:04:05Z",
         "conditions": [{"type": "Valid", "status": "True", "reason": "Success", "message": "",
                         "lastTransitionTime": "2026-01-02T03:04:05Z", "observedGeneration": 1}]}),
    obj("FirmwareSchema", {"hardwareVendor": "Dell Inc.", "hardwareModel": "PowerEdge R640", "schema": {
        "AssetTag": {"attribute_type": "String", "min_length": 0, "max_length": 20, "unique": True},
        "NetworkBootRetryCount": {"attribute_type": "Integer", "lower_bound": 0, "upper_bound": 20,
                                  "read_only": False},
        "ProcVirtualization": {"attribute_type": "Enumeration", "allowable_values": ["Enabled", "Disabled"]},
        "SriovEnable": {}}}),
    obj("HostFirmwareComponents", {"updates": [{"component": "bmc", "url": "https://firmware/bmc.bin"}]},
        {"updates": [{"component": "bmc", "url": "https://firmware/bmc.bin"}],
         "components": [{"component": "bios", "initialVersion": "1.0", "currentVersion": "1.0",
                         "updatedAt": None},  # what upstream's Go writes for a component never updated
                        {"component": "bmc", "initialVersion": "1.0", "currentVersion": "2.0",
                         "lastVersionFlashed": "2.0", "updatedAt": "2026-01-02T03:04:05Z"}],
         "conditions": [{"type": "ChangeDetected", "status": "True"}]}),
    obj("HostUpdatePolicy", {"firmwareSettings": "onReboot", "firmwareUpdates": "onPreparing"}, {}),
    obj("DataImage", {"url": "http://images/data.iso"},
        {"lastReconciled": "2026-01-02T03:04:05Z", "attachedImage": {"url": ""}, "error": {"count": 0, "message": ""}}),
    obj("PreprovisioningImage", {"networkDataName": "node-0-network-data", "architecture": "x86_64",
                                 "acceptFormats": ["iso", "initrd"]},
        {"imageUrl": "http://images/ipa.iso", "format": "iso", "architecture": "x86_64",
         "networkData": {"name": "node-0-network-data", "version": "1234"},
         "conditions": [{"type": "Ready", "status": "True", "reason": "ImageSuccess", "message": "Generated image"}]}),
]


@pytest.mark.parametrize("valid", VALID, ids=[v["kind"] for v in VALID])
def test_valid_objects_of_each_kind(valid):
    validate(lookup(API, valid["kind"]), valid)


# (case, the object, what the refusal names)
SCHEMA_CASES = [
    ("HostFirmwareSettings without settings", obj("HostFirmwareSettings", {}), "spec.settings: Required value"),
    ("a setting neither a string nor an integer", obj("HostFirmwareSettings", {"settings": {"QuietBoot": True}}),
     "spec.settings.QuietBoot: Invalid value: True"),
    ("a status setting not a string", obj("HostFirmwareSettings", {"settings": {}}, {"settings": {"Count": 1}}),
     "status.settings.Count: Invalid value: 1: must be of type string"),
    ("a status schema naming no object", obj("HostFirmwareSettings", {"settings": {}}, {
        "settings": {}, "schema": {"namespace": NS, "name": "../../x"}}), "status.schema.name: Invalid value"),
    ("FirmwareSchema without schema", obj("FirmwareSchema", {"hardwareVendor": "Dell Inc."}),
     "spec.schema: Required value"),
    ("an attribute_type upstream does not know", obj("FirmwareSchema", {"schema": {"X": {"attribute_type": "Float"}}}),
     'spec.schema.X.attribute_type: Unsupported value: \'Float\': supported values: "Enumeration", "String", '
     '"Integer", "Boolean", "Password"'),
    ("HostFirmwareComponents without updates", obj("HostFirmwareComponents", {}), "spec.updates: Required value"),
    ("a HostUpdatePolicy not in the enum", obj("HostUpdatePolicy", {"firmwareSettings": "always"}),
     'spec.firmwareSettings: Unsupported value: \'always\': supported values: "onPreparing", "onReboot"'),
    ("DataImage without url", obj("DataImage", {}), "spec.url: Required value"),
    ("an image format not in the enum", obj("PreprovisioningImage", {"acceptFormats": ["qcow2"]}),
     "spec.acceptFormats[0]: Unsupported value: 'qcow2'"),
    ("a networkDataName naming no object", obj("PreprovisioningImage", {"networkDataName": "../../other/x"}),
     "spec.networkDataName: Invalid value: '../../other/x': must match the pattern"),
]


@pytest.mark.parametrize(("invalid", "wanted"), [c[1:] for c in SCHEMA_CASES], ids=[c[0] for c in SCHEMA_CASES])
def test_what_the_schemas_refuse(invalid, wanted):
    with pytest.raises(Invalid) as refused:
        validate(lookup(API, invalid["kind"]), invalid)
    assert wanted in str(refused.value)
