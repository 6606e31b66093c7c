"""The address record: one serialisation from the IPAM engine, through the ip_claim module, to the filters."""
from __future__ import annotations

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.address import Address, address_record
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import Allocation
from ansible_collections.metal3.baremetal.plugins.module_utils.templating.render import (
    render_meta_data,
    render_network_data,
)

IP_ADDRESS = {"apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPAddress",
              "metadata": {"name": "mgmt-10-0-0-5", "namespace": "ns"},
              "spec": {"address": "10.0.0.5", "prefix": 24, "gateway": "10.0.0.1",
                       "dnsServers": ["10.0.0.53", "10.0.0.54"], "pool": {"name": "mgmt"}}}
RECORD = {"address": "10.0.0.5", "prefix": 24, "gateway": "10.0.0.1", "dns_servers": ["10.0.0.53", "10.0.0.54"]}
DNS = [{"type": "dns", "address": "10.0.0.53"}, {"type": "dns", "address": "10.0.0.54"}]
NETWORK_DATA = {"links": {"ethernets": [{"type": "phy", "id": "eth0", "name": "eth0"}]},
                "networks": {"ipv4": [{"id": "n", "link": "eth0", "ipAddressFromIPPool": "mgmt"}]},
                "services": {"dnsFromIPPool": "mgmt"}}


def test_an_ip_address_object_serialises_as_the_record():
    assert Address.of(IP_ADDRESS).to_dict() == RECORD
    assert Address.parse(RECORD, "a") == Address.of(IP_ADDRESS)


def test_a_cluster_api_ip_address_has_no_dns_servers():
    capi = {"spec": {"address": "10.0.0.5", "prefix": 24, "gateway": ""}}
    assert Address.of(capi) == Address("10.0.0.5", 24)


def test_a_claim_without_an_address_has_the_same_keys_empty():
    assert address_record(None) == {"address": None, "prefix": None, "gateway": None, "dns_servers": []}
    assert Allocation(None).summary() == address_record(None)
    assert Allocation(None, address=IP_ADDRESS).summary() == RECORD


def test_an_ip_claim_result_renders_its_dns_servers():
    """The documented path: {pool: <registered ip_claim result>} - its other keys are no address fields."""
    result = {"changed": True, "allocated": True, "claim": {}, "ip_address": IP_ADDRESS, "pool": {"name": "mgmt"},
              **Allocation(None, address=IP_ADDRESS).summary()}
    rendered = render_network_data(NETWORK_DATA, {"mgmt": result})
    assert rendered["services"] == DNS
    assert rendered["networks"][0]["ip_address"] == "10.0.0.5"
    meta = render_meta_data({"dnsServersFromIPPool": [{"key": "dns", "name": "mgmt"}]}, 0, {}, {"mgmt": result}, "ns")
    assert meta == {"dns": "10.0.0.53,10.0.0.54"}


@pytest.mark.parametrize("addresses", [
    {"mgmt": Address.of(IP_ADDRESS)},  # as the CAPM3 engine hands them over
    {"mgmt": RECORD},
    {"mgmt": {**IP_ADDRESS["spec"]}},  # the IPAddress spec's spelling, dnsServers
    {"mgmt": {**RECORD, "dnsServers": RECORD["dns_servers"]}},  # both, alike
])
def test_every_form_of_an_address_renders_alike(addresses):
    assert render_network_data(NETWORK_DATA, addresses)["services"] == DNS


# a bad address record -> the field the error names
BAD = [
    ("10.0.0.5", "addresses[mgmt]: must be a mapping"),
    ({"address": 5}, "addresses[mgmt].address: required, a string"),
    ({**RECORD, "prefix": "wide"}, "addresses[mgmt].prefix: must be an integer, not 'wide'"),
    ({**RECORD, "prefix": True}, "addresses[mgmt].prefix: must be an integer, not True"),
    ({**RECORD, "gateway": ["10.0.0.1"]}, "addresses[mgmt].gateway: must be a string"),
    ({**RECORD, "dns_servers": "10.0.0.53"}, "addresses[mgmt].dns_servers: must be a list of addresses"),
    ({**RECORD, "dns_servers": [None]}, "addresses[mgmt].dns_servers: must be a list of addresses"),
    ({**RECORD, "dnsServers": ["10.0.0.9"]}, "addresses[mgmt].dnsServers: set beside dns_servers, differently"),
]


@pytest.mark.parametrize(("value", "message"), BAD)
def test_a_bad_address_names_the_field(value, message):
    with pytest.raises(Invalid) as raised:
        Address.parse(value, "addresses[mgmt]")
    assert str(raised.value).startswith(message)


def test_a_prefix_given_as_text_by_jinja_is_a_number():
    assert Address.parse({**RECORD, "prefix": "24"}, "a").prefix == 24
