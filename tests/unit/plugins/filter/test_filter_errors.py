"""The filters refuse arguments of the wrong shape with a message naming the argument or field, never a Python error
('str' object has no attribute 'get', invalid literal for int())."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.metal3.baremetal.plugins.filter.ip_claims import ip_claims
from ansible_collections.metal3.baremetal.plugins.filter.meta_data import meta_data
from ansible_collections.metal3.baremetal.plugins.filter.network_data import network_data

ADDRESSES = {"mgmt": {"address": "10.0.0.5", "prefix": 24, "gateway": "10.0.0.1", "dns_servers": []}}
STATIC = {"links": {"ethernets": [{"id": "eth0", "type": "phy", "name": "eth0"}]},
          "networks": {"ipv4": [{"id": "n", "link": "eth0", "ipAddressFromIPPool": "mgmt"}]}}
FROM_NIC = {"links": {"ethernets": [{"id": "e", "type": "phy", "macAddress": {"fromHostInterface": "eth0"}}]}}
NAME = {"objectNames": [{"key": "name", "object": "machine"}]}
LABEL = {"fromLabels": [{"key": "rack", "object": "machine", "label": "rack"}]}

# (filter, arguments, the start of the message)
CASES = [
    (network_data, ("abc", {}), "networkData: must be a mapping"),
    (network_data, (["a"], {}), "networkData: must be a mapping"),
    (network_data, ({}, "x"), "addresses: must be a mapping"),
    (network_data, ({}, ["x"]), "addresses: must be a mapping"),
    (network_data, (STATIC, {"mgmt": "10.0.0.5"}), "addresses[mgmt]: must be a mapping"),
    (network_data, (STATIC, {"mgmt": {**ADDRESSES["mgmt"], "prefix": "wide"}}),
     "addresses[mgmt].prefix: must be an integer, not 'wide'"),
    (network_data, (STATIC, {"mgmt": {**ADDRESSES["mgmt"], "dns_servers": "10.0.0.53"}}),
     "addresses[mgmt].dns_servers: must be a list of addresses"),
    (network_data, ({}, {}, "host-0"), "host: must be a mapping"),
    (network_data, ({}, {}, {"metadata": []}), "host.metadata: must be a mapping"),
    (network_data, (FROM_NIC, {}, {"status": "ready"}), "host.status: must be a mapping"),
    (network_data, (FROM_NIC, {}, {"status": {"hardware": {"nics": "eth0"}}}),
     "host.status.hardware.nics: must be a list"),
    (meta_data, ("abc", 0, {}, {}, "ns"), "metaData: must be a mapping"),
    (meta_data, (["a"], 0, {}, {}, "ns"), "metaData: must be a mapping"),
    (meta_data, ({}, "abc", {}, {}, "ns"), "index: must be an integer"),
    (meta_data, ({}, None, {}, {}, "ns"), "index: required"),
    (meta_data, ({}, 1.5, {}, {}, "ns"), "index: must be an integer"),
    (meta_data, ({}, -1, {}, {}, "ns"), "index: must be an integer of at least 0"),
    (meta_data, ({}, 0, "x", {}, "ns"), "objects: must be a mapping"),
    (meta_data, ({}, 0, ["x"], {}, "ns"), "objects: must be a mapping"),
    (meta_data, (NAME, 0, {"machine": "m-0"}, {}, "ns"), "objects.machine: must be a mapping"),
    (meta_data, (NAME, 0, {"machine": {"metadata": "m-0"}}, {}, "ns"), "objects.machine.metadata: must be a mapping"),
    (meta_data, (LABEL, 0, {"machine": {"metadata": {"labels": ["r1"]}}}, {}, "ns"),
     "objects.machine.metadata.labels: must be a mapping"),
    (meta_data, ({}, 0, {"metal3machine": "x", "baremetalhost": "y"}, {}, "ns"), "objects.metal3machine: must be"),
    (meta_data, ({}, 0, {}, "x", "ns"), "addresses: must be a mapping"),
    (meta_data, ({}, 0, {}, {}, 5), "namespace: must be a non-empty string"),
    (ip_claims, ("x",), "ipam_requesters: must be a list of mappings"),
    (ip_claims, (["x"],), "ipam_requesters[0]: must be a mapping"),
    (ip_claims, ([{"name": "a", "devices": "x"}],), "ipam_requesters[0].devices: must be a list"),
    (ip_claims, ([{"name": "a", "labels": "x"}],), "ipam_requesters[0].labels: must be a mapping"),
    (ip_claims, ([{"name": "a", "devices": [{"labels": ["x"]}]}],), "ipam_requesters[0].devices[0].labels: must be"),
    (ip_claims, ([], 5), "namespace: must be a non-empty string"),
    (ip_claims, ([], "default", 5), "names: must be a list or a comma-separated string"),
    (ip_claims, ([], "default", ["a"], 5), "networks: must be a list or a comma-separated string"),
    (ip_claims, ([], "default", ["a"], None, ["p"]), "pool: must be a string"),
]


@pytest.mark.parametrize(("plugin", "args", "message"), CASES)
def test_bad_arguments_name_what_is_wrong(plugin, args, message):
    with pytest.raises(AnsibleFilterError) as raised:
        plugin(*args)
    assert str(raised.value).startswith(message)


def test_good_arguments_still_render():
    assert network_data(STATIC, ADDRESSES)["networks"][0]["ip_address"] == "10.0.0.5"
    assert network_data(None, None) is None  # no networkData: no document, as CAPM3 (test_network_data_filter.py)
    assert network_data({}, None) == {"links": [], "networks": [], "services": []}
    assert meta_data({"indexes": [{"key": "i", "prefix": "n-"}]}, "2", None, None, "ns") == {"i": "n-2"}
    assert [c["name"] for c in ip_claims([{"name": "a"}], "ns", "b,c")] == ["a-0", "b-0", "c-0"]
