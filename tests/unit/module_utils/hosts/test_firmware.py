"""What baremetal-operator's controllers check of HostFirmwareSettings and HostFirmwareComponents (hosts/firmware.py),
as tables: upstream's own cases by their names - TestValidateSetting
(apis/metal3.io/v1alpha1/hostfirmwaresettings_types_test.go), TestValidateHostFirmwareSettings
(internal/controller/metal3.io/hostfirmwaresettings_test.go), TestValidateHostFirmwareComponents
(apis/metal3.io/v1alpha1/hostfirmwarecomponents_types_test.go) - then ours. Each row passes, or names the setting
(or field) with upstream's text."""
from __future__ import annotations

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.firmware import (
    component_problems,
    schema_setting_problem,
    setting_problem,
    settings_problems,
)

# TestValidateSetting's schema.
SCHEMA = {
    "AssetTag": {"attribute_type": "String", "min_length": 1, "max_length": 16},
    "ProcVirtualization": {"attribute_type": "Enumeration", "allowable_values": ["Enabled", "Disabled"]},
    "NetworkBootRetryCount": {"attribute_type": "Integer", "lower_bound": 1, "upper_bound": 20},
    "SerialNumber": {"attribute_type": "String", "min_length": 1, "max_length": 16, "read_only": True},
    "QuietBoot": {"attribute_type": "Boolean"},
    "SriovEnable": {},  # fields intentionally excluded
}

# (case, setting, value, upstream's text or None when it passes)
SETTING_CASES = [
    # upstream's TestValidateSetting
    ("StringTypePass", "AssetTag", "NewServer", None),
    ("StringTypeFailUpper", "AssetTag", "NewServerPutInServiceIn2021",
     "Setting AssetTag is invalid, string NewServerPutInServiceIn2021 length is above maximum length 16"),
    ("StringTypeFailLower", "AssetTag", "", "Setting AssetTag is invalid, string  length is below minimum length 1"),
    ("EnumerationTypePass", "ProcVirtualization", "Disabled", None),
    ("EnumerationTypeFail", "ProcVirtualization", "Foo",
     "Setting ProcVirtualization is invalid, unknown enumeration value - Foo"),
    ("IntegerTypePassAsString", "NetworkBootRetryCount", "10", None),
    ("IntegerTypePassAsInt", "NetworkBootRetryCount", 10, None),
    ("IntegerTypeFailUpper", "NetworkBootRetryCount", "42",
     "Setting NetworkBootRetryCount is invalid, integer 42 is above maximum value 20"),
    ("IntegerTypeFailLower", "NetworkBootRetryCount", 0,
     "Setting NetworkBootRetryCount is invalid, integer 0 is below minimum value 1"),
    ("BooleanTypePass", "QuietBoot", "true", None),
    ("BooleanTypeFail", "QuietBoot", "Enabled", "Setting QuietBoot is invalid, Enabled is not a boolean"),
    ("ReadOnlyTypeFail", "SerialNumber", "42", "Setting SerialNumber is invalid, it is ReadOnly"),
    ("MissingEnumerationField", "SriovEnable", "Disabled", None),
    ("UnknownSettingFail", "IceCream", "Vanilla", "Setting IceCream is invalid, it is not in the associated schema"),
    # ours
    ("an integer as the text of an Enumeration", "ProcVirtualization", 1,
     "Setting ProcVirtualization is invalid, unknown enumeration value - 1"),
    ("an Integer at its bounds", "NetworkBootRetryCount", 20, None),
    ("an Integer with a sign, as Go's Atoi reads it", "NetworkBootRetryCount", "+7", None),
    ("an Integer with a space, which Atoi refuses", "NetworkBootRetryCount", " 7",
     "Setting NetworkBootRetryCount is invalid, String  7 entered while integer expected"),
    ("an Integer with an underscore, which Atoi refuses", "NetworkBootRetryCount", "1_0",
     "Setting NetworkBootRetryCount is invalid, String 1_0 entered while integer expected"),
    ("an Integer past int64, which Atoi refuses", "NetworkBootRetryCount", "9" * 20,
     f"Setting NetworkBootRetryCount is invalid, String {'9' * 20} entered while integer expected"),
    ("a String's length in bytes, as Go's len", "AssetTag", "é" * 9,
     f"Setting AssetTag is invalid, string {'é' * 9} length is above maximum length 16"),
    ("a Boolean given as an integer", "QuietBoot", 1, "Setting QuietBoot is invalid, 1 is not a boolean"),
]


@pytest.mark.parametrize(("name", "value", "wanted"), [c[1:] for c in SETTING_CASES],
                         ids=[c[0] for c in SETTING_CASES])
def test_a_setting_against_the_schema(name, value, wanted):
    problem = schema_setting_problem(name, value, SCHEMA)
    assert problem == (None if wanted is None else (name, wanted))


# (case, what describes the setting, its name, value, upstream's text)
SCHEMA_ENTRY_CASES = [
    ("a Password type", {"attribute_type": "Password"}, "AdminPwd", "x",
     "Setting AdminPwd is invalid, passwords are immutable"),
    ("a name holding Password", {"attribute_type": "String"}, "SysPassword", "x",
     "Setting SysPassword is invalid, Password fields can't be set"),
    ("read-only before anything else", {"attribute_type": "Password", "read_only": True}, "SysPassword", "x",
     "Setting SysPassword is invalid, it is ReadOnly"),
    ("a type upstream does not know", {"attribute_type": "Float"}, "Ratio", "0.5",
     "Setting Ratio is invalid, unexpected attribute type Float"),
    ("an Integer without bounds", {"attribute_type": "Integer"}, "Count", "-12", None),
    ("a String without lengths", {"attribute_type": "String"}, "Banner", "", None),
    ("an Enumeration without values", {"attribute_type": "Enumeration"}, "Mode", "On",
     "Setting Mode is invalid, unknown enumeration value - On"),
]


@pytest.mark.parametrize(("entry", "name", "value", "wanted"), [c[1:] for c in SCHEMA_ENTRY_CASES],
                         ids=[c[0] for c in SCHEMA_ENTRY_CASES])
def test_what_describes_one_setting(entry, name, value, wanted):
    assert setting_problem(name, value, entry) == (None if wanted is None else (name, wanted))


# TestValidateHostFirmwareSettings' host: the status it reads (getHFS) and the schema (getCurrentSchemaSettings).
CURRENT = {"CustomPostMessage": "All tests passed", "L2Cache": "10x256 KB", "NetworkBootRetryCount": "10",
           "ProcVirtualization": "Enabled", "SecureBoot": "Enabled", "AssetTag": "X45672917"}
HOST_SCHEMA = {
    "AssetTag": {"attribute_type": "String", "min_length": 0, "max_length": 20, "unique": True},
    "CustomPostMessage": {"attribute_type": "String", "min_length": 0, "max_length": 20, "unique": False,
                          "read_only": False},
    "L2Cache": {"attribute_type": "String", "min_length": 0, "max_length": 20, "read_only": True},
    "NetworkBootRetryCount": {"attribute_type": "Integer", "lower_bound": 0, "upper_bound": 20, "read_only": False},
    "ProcVirtualization": {"attribute_type": "Enumeration", "allowable_values": ["Enabled", "Disabled"],
                           "read_only": False},
    "SecureBoot": {"attribute_type": "Enumeration", "allowable_values": ["Enabled", "Disabled"], "read_only": True},
}
VALID = {"CustomPostMessage": "All tests passed", "ProcVirtualization": "Disabled", "NetworkBootRetryCount": 20}

# (case, spec.settings, [(setting, upstream's text)])
SETTINGS_CASES = [
    # upstream's TestValidateHostFirmwareSettings
    ("valid spec changes with schema", VALID, []),
    ("invalid string", {**VALID, "CustomPostMessage": "A really long POST message"},
     [("CustomPostMessage", "Setting CustomPostMessage is invalid, string A really long POST message length is "
                            "above maximum length 20")]),
    ("invalid int", {**VALID, "NetworkBootRetryCount": 2000},
     [("NetworkBootRetryCount", "Setting NetworkBootRetryCount is invalid, integer 2000 is above maximum value 20")]),
    ("invalid enum", {**VALID, "ProcVirtualization": "Not enabled", "NetworkBootRetryCount": "20"},
     [("ProcVirtualization", "Setting ProcVirtualization is invalid, unknown enumeration value - Not enabled")]),
    ("invalid name", {"SomeNewSetting": "foo"},
     [("SomeNewSetting", "setting SomeNewSetting is not in the Status field")]),
    ("invalid password in spec", {**VALID, "NetworkBootRetryCount": "20", "SysPassword": "Pa%$word"},
     [("SysPassword", "cannot set Password field")]),
    ("string instead of int", {**VALID, "NetworkBootRetryCount": "foo"},
     [("NetworkBootRetryCount", "Setting NetworkBootRetryCount is invalid, String foo entered while integer "
                                "expected")]),
    # ours
    ("a read-only setting the host has", {"SecureBoot": "Disabled"},
     [("SecureBoot", "Setting SecureBoot is invalid, it is ReadOnly")]),
    ("every problem, by the settings' names", {"Zeta": "1", "SecureBoot": "Disabled", "AdminPassword": "x"},
     [("AdminPassword", "cannot set Password field"), ("SecureBoot", "Setting SecureBoot is invalid, it is ReadOnly"),
      ("Zeta", "setting Zeta is not in the Status field")]),
    ("nothing desired", {}, []),
]


@pytest.mark.parametrize(("desired", "wanted"), [c[1:] for c in SETTINGS_CASES], ids=[c[0] for c in SETTINGS_CASES])
def test_host_firmware_settings(desired, wanted):
    assert settings_problems(desired, CURRENT, HOST_SCHEMA) == wanted


def test_without_a_schema_yet_only_the_names_are_checked():
    assert settings_problems({"NetworkBootRetryCount": 2000}, CURRENT, None) == []
    assert settings_problems({"Unknown": "x", "SysPassword": "x"}, None, None) == [
        ("SysPassword", "cannot set Password field"), ("Unknown", "setting Unknown is not in the Status field")]


def test_a_setting_the_host_has_but_the_schema_lacks():
    assert settings_problems({"Extra": "x"}, {"Extra": "y"}, HOST_SCHEMA) == [
        ("Extra", "Setting Extra is invalid, it is not in the associated schema")]


NAMES = "only 'bmc', 'bios', or names starting with 'nic:' are allowed as update names"

# (case, spec.updates, [(field, upstream's text)])
COMPONENT_CASES = [
    # upstream's TestValidateHostFirmwareComponents
    ("ValidHostFirmwareComponents", [{"component": "bmc", "url": "https://example.com/bmcupdate"}], []),
    ("InvalidHostFirmwareComponents", [{"component": "something", "url": "https://example.com/bmcupdate"}],
     [("spec.updates[0].component", f"component something is invalid, {NAMES}")]),
    ("ValidNicPrefixComponent", [{"component": "nic:NIC.1", "url": "https://example.com/nicupdate"},
                                 {"component": "nic:AD007", "url": "https://example.com/nic2update"}], []),
    # ours
    ("bios", [{"component": "bios", "url": "http://firmware/bios.bin"}], []),
    ("names are case-sensitive, as upstream's", [{"component": "BMC", "url": "http://firmware/bmc.bin"}],
     [("spec.updates[0].component", f"component BMC is invalid, {NAMES}")]),
    ("every bad update", [{"component": "bios", "url": "u"}, {"component": "", "url": "u"},
                          {"component": "nic", "url": "u"}],
     [("spec.updates[1].component", f"component  is invalid, {NAMES}"),
      ("spec.updates[2].component", f"component nic is invalid, {NAMES}")]),
    ("no updates", [], []),
]


@pytest.mark.parametrize(("updates", "wanted"), [c[1:] for c in COMPONENT_CASES],
                         ids=[c[0] for c in COMPONENT_CASES])
def test_host_firmware_components(updates, wanted):
    assert list(component_problems(updates)) == wanted


def test_the_tables_hold_valid_and_invalid_rows():
    assert {c[-1] is None for c in SETTING_CASES} == {True, False}
    assert {c[-1] == [] for c in SETTINGS_CASES} == {True, False}
    assert {c[-1] == [] for c in COMPONENT_CASES} == {True, False}
