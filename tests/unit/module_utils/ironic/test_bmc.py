"""BMC addresses map to Ironic drivers as baremetal-operator maps them, and credentials never show."""
from __future__ import annotations

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.bmc import HIDDEN, driver_for

# address, driver, boot interface, driver_info without credentials
CASES = [
    ("ipmi://192.168.1.10", "ipmi", "ipxe", {"ipmi_address": "192.168.1.10", "ipmi_port": 623}),
    ("192.168.1.10:6230", "ipmi", "ipxe", {"ipmi_address": "192.168.1.10", "ipmi_port": 6230}),
    ("ipmi://bmc.example.com?privilegelevel=OPERATOR", "ipmi", "ipxe",
     {"ipmi_address": "bmc.example.com", "ipmi_port": 623, "ipmi_priv_level": "OPERATOR"}),
    ("redfish://10.0.0.5/redfish/v1/Systems/1", "redfish", "ipxe",
     {"redfish_address": "https://10.0.0.5", "redfish_system_id": "/redfish/v1/Systems/1"}),
    ("redfish+http://10.0.0.5:8000/redfish/v1/Systems/abc", "redfish", "ipxe",
     {"redfish_address": "http://10.0.0.5:8000", "redfish_system_id": "/redfish/v1/Systems/abc"}),
    ("redfish://10.0.0.5/redfish/v1", "redfish", "ipxe", {"redfish_address": "https://10.0.0.5"}),
    ("redfish-virtualmedia+https://10.0.0.5/redfish/v1/Systems/1", "redfish", "redfish-virtual-media",
     {"redfish_address": "https://10.0.0.5", "redfish_system_id": "/redfish/v1/Systems/1"}),
    ("redfish-uefihttp://10.0.0.5/redfish/v1/Systems/1", "redfish", "redfish-https",
     {"redfish_address": "https://10.0.0.5", "redfish_system_id": "/redfish/v1/Systems/1"}),
    ("idrac-redfish://10.0.0.6/redfish/v1/Systems/System.Embedded.1", "idrac", "ipxe",
     {"redfish_address": "https://10.0.0.6", "redfish_system_id": "/redfish/v1/Systems/System.Embedded.1"}),
    ("idrac-virtualmedia://10.0.0.6/redfish/v1/Systems/System.Embedded.1", "idrac", "idrac-redfish-virtual-media",
     {"redfish_address": "https://10.0.0.6", "redfish_system_id": "/redfish/v1/Systems/System.Embedded.1"}),
    ("ilo5-redfish://10.0.0.7/redfish/v1/Systems/1", "redfish", "ipxe",
     {"redfish_address": "https://10.0.0.7", "redfish_system_id": "/redfish/v1/Systems/1"}),
    ("fake://node-0", "fake-hardware", "fake", {}),
]


@pytest.mark.parametrize(("address", "driver", "boot", "info"), CASES)
def test_addresses_map_to_drivers(address, driver, boot, info):
    mapped = driver_for(address, "admin", "s3cret")
    assert (mapped.driver, mapped.interfaces["boot_interface"]) == (driver, boot)
    shown = {k: v for k, v in mapped.shown().items() if v != HIDDEN}
    assert shown == info


@pytest.mark.parametrize(("address", "deploy"), [("fake://n", "fake"), ("fake://n?deploy_interface=direct", "direct")])
def test_fake_addresses_may_ask_for_the_direct_deploy_that_waits_for_an_agent(address, deploy):
    assert driver_for(address, "u", "p").interfaces["deploy_interface"] == deploy


def test_credentials_are_in_driver_info_and_hidden_when_shown():
    mapped = driver_for("redfish://10.0.0.5/redfish/v1/Systems/1", "admin", "s3cret")
    assert mapped.driver_info["redfish_password"] == "s3cret"
    assert "s3cret" not in repr(mapped.shown()) and "admin" not in repr(mapped.shown())


def test_certificate_verification_can_be_disabled():
    assert driver_for("redfish://h/redfish/v1/Systems/1", "u", "p", True).driver_info["redfish_verify_ca"] is False


@pytest.mark.parametrize(("address", "message"), [
    ("", r"spec\.bmc\.address: Required value"),
    ("wsman://10.0.0.1", r"Unsupported value: 'wsman'"),
    ("redfish+ftp://10.0.0.1", r"Unsupported value: 'redfish\+ftp'"),
    ("ipmi://10.0.0.1:notaport", r"not a valid port"),
    ("redfish://", r"no host"),
    ("ipmi://[::1", r"spec\.bmc\.address: Invalid value: 'ipmi://\[::1': not a URL"),
    ("[::1", r"spec\.bmc\.address: Invalid value: '\[::1': not a URL"),
    ("ipmi://bmc 1", r"spec\.bmc\.address: Invalid value: .* must not contain spaces"),
    (5, r"spec\.bmc\.address: Invalid value: 5: must be of type string"),
    ("fake://n?deploy_interface=ansible", r"spec\.bmc\.address: Unsupported value: 'ansible': supported "
                                          r"deploy_interface of fake:// addresses: fake, direct"),
])
def test_bad_addresses_are_refused_naming_the_field(address, message):
    with pytest.raises(Invalid, match=message):
        driver_for(address, "u", "p")
