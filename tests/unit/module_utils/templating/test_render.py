"""Metal3DataTemplate rendering: meta_data and network_data.json, upstream's spelling and the seed's."""
from __future__ import annotations

import pytest
import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.templating import render as r

# As ip_claim returns them (dns_servers); v6 in the IPAddress spec's spelling (dnsServers), which is read too.
ADDRESSES = {
    "mgmt": {"address": "192.168.11.10", "prefix": 24, "gateway": "192.168.11.1",
             "dns_servers": ["192.168.11.2", "192.168.11.3"]},
    "storage": {"address": "192.168.12.10", "prefix": 24, "gateway": None, "dns_servers": []},
    "v6": {"address": "fd00::10", "prefix": 64, "gateway": "fd00::1", "dnsServers": ["fd00::53"]},
}
HOST = {"metadata": {"name": "host-0", "labels": {"rack": "r1"}, "annotations": {"pool": "mgmt",
                                                                                 "mac": "52:54:00:00:00:09"}},
        "spec": {"bootMACAddress": "52:54:00:00:00:01"},
        "status": {"hardware": {"nics": [{"name": "eno1", "mac": "52:54:00:00:00:01"},
                                         {"name": "eno2", "mac": "52:54:00:00:00:02"}]}}}
OBJECTS = {"machine": {"metadata": {"name": "machine-0", "labels": {}, "annotations": {}}},
           "metal3machine": {"metadata": {"name": "m3m-0", "labels": {"role": "cp"}, "annotations": {}}},
           "baremetalhost": HOST}

# metaData spec → the keys it renders (besides providerid)
META = [
    ({"strings": [{"key": "role", "value": "worker"}]}, {"role": "worker"}),
    ({"objectNames": [{"key": "name", "object": "machine"}, {"key": "bmh", "object": "baremetalhost"}]},
     {"name": "machine-0", "bmh": "host-0"}),
    ({"indexes": [{"key": "i", "offset": 10, "step": 2, "prefix": "node-", "suffix": "-x"}, {"key": "plain"}]},
     {"i": "node-16-x", "plain": "3"}),
    ({"namespaces": [{"key": "ns"}]}, {"ns": "metal3"}),
    ({"ipAddressesFromIPPool": [{"key": "ip", "name": "mgmt"}], "prefixesFromIPPool": [{"key": "p", "name": "mgmt"}],
      "gatewaysFromIPPool": [{"key": "gw", "name": "mgmt"}]}, {"ip": "192.168.11.10", "p": "24", "gw": "192.168.11.1"}),
    ({"dnsServersFromIPPool": [{"key": "dns", "name": "mgmt"}]}, {"dns": "192.168.11.2,192.168.11.3"}),  # CAPM3#3363
    ({"ipAddressesFromPool": [{"key": "ip", "name": "v6"}]}, {"ip": "fd00::10"}),  # the v1beta2 name
    ({"fromHostInterfaces": [{"key": "m2", "interface": "eno2"}, {"key": "boot", "fromBootMAC": True}]},
     {"m2": "52:54:00:00:00:02", "boot": "52:54:00:00:00:01"}),
    ({"fromLabels": [{"key": "rack", "object": "baremetalhost", "label": "rack"},
                     {"key": "none", "object": "machine", "label": "missing"}]}, {"rack": "r1", "none": ""}),
    ({"fromAnnotations": [{"key": "a", "object": "baremetalhost", "annotation": "pool"}]}, {"a": "mgmt"}),
    ({"namespaces": [{"key": "k"}], "strings": [{"key": "k", "value": "strings win"}]}, {"k": "strings win"}),
]


@pytest.mark.parametrize(("spec", "expected"), META)
def test_meta_data(spec, expected):
    assert r.render_meta_data(spec, 3, OBJECTS, ADDRESSES, "metal3") == {**expected,
                                                                         "providerid": "metal3/host-0/m3m-0"}


# networkData spec → network_data.json
NETWORK = [
    ({"links": {"ethernets": [{"type": "phy", "id": "eth0", "macAddress": {"fromHostInterface": "eno1"}},
                              {"type": "phy", "id": "eth1", "mtu": 9000, "name": "data0",
                               "macAddress": {"string": "52:54:00:00:00:05"}},
                              {"type": "phy", "id": "eth2", "macAddress": {"fromAnnotation": {
                                  "object": "baremetalhost", "annotation": "mac"}}}]}},
     {"links": [{"type": "phy", "id": "eth0", "mtu": 1500, "ethernet_mac_address": "52:54:00:00:00:01"},
                {"type": "phy", "id": "eth1", "mtu": 9000, "ethernet_mac_address": "52:54:00:00:00:05",
                 "name": "data0"},
                {"type": "phy", "id": "eth2", "mtu": 1500, "ethernet_mac_address": "52:54:00:00:00:09"}],
      "networks": [], "services": []}),
    ({"links": {"bonds": [{"id": "bond0", "bondMode": "active-backup", "bondLinks": ["eth0", "eth1"],
                           "parameters": [{"name": "primary", "value": "eth0"}]}],
                "ethernets": [{"type": "phy", "id": "eth0", "name": "eth0"},
                              {"type": "phy", "id": "eth1", "name": "eth1"}],
                "vlans": [{"id": "vlan5", "vlanID": 5, "vlanLink": "bond0",
                           "macAddress": {"string": "52:54:00:00:00:07"}}]}},
     {"links": [{"type": "bond", "id": "bond0", "mtu": 1500, "bond_mode": "active-backup",
                 "bond_links": ["eth0", "eth1"], "bond_primary": "eth0"},
                {"type": "phy", "id": "eth0", "mtu": 1500, "name": "eth0"},
                {"type": "phy", "id": "eth1", "mtu": 1500, "name": "eth1"},
                {"type": "vlan", "id": "vlan5", "mtu": 1500, "vlan_link": "bond0", "vlan_id": 5,
                 "vlan_mac_address": "52:54:00:00:00:07"}], "networks": [], "services": []}),
    ({"links": {"ethernets": [{"type": "phy", "id": "eth0", "macAddress": {"fromHostInterface": "eno1"}},
                              {"type": "phy", "id": "eth1", "macAddress": {"fromHostInterface": "eno2"}}]},
      "networks": {
        "ipv4": [{"id": "mgmt", "link": "eth0", "ipAddressFromIPPool": "mgmt", "routes": [
            {"network": "10.0.0.0", "prefix": 8, "gateway": {"fromIPPool": "mgmt"},
             "services": {"dns": ["8.8.8.8"], "dnsFromIPPool": "mgmt"}}]}],
        "ipv6": [{"id": "v6", "link": "eth0", "fromPoolRef": {"name": "v6"},
                  "routes": [{"network": "::", "prefix": 0, "gateway": {"string": "fd00::1"}}]}],
        "ipv4DHCP": [{"id": "d4", "link": "eth1"}], "ipv6DHCP": [{"id": "d6", "link": "eth1"}],
        "ipv6SLAAC": [{"id": "s6", "link": "eth1"}]},
      "services": {"dns": ["1.1.1.1"], "dnsFromIPPool": "v6"}},
     {"links": [{"type": "phy", "id": "eth0", "mtu": 1500, "ethernet_mac_address": "52:54:00:00:00:01"},
                {"type": "phy", "id": "eth1", "mtu": 1500, "ethernet_mac_address": "52:54:00:00:00:02"}],
      "networks": [
         {"type": "ipv4", "id": "mgmt", "link": "eth0", "ip_address": "192.168.11.10", "netmask": "255.255.255.0",
          "routes": [{"network": "10.0.0.0", "netmask": "255.0.0.0", "gateway": "192.168.11.1",
                      "services": [{"type": "dns", "address": "8.8.8.8"}, {"type": "dns", "address": "192.168.11.2"},
                                   {"type": "dns", "address": "192.168.11.3"}]}]},
         {"type": "ipv6", "id": "v6", "link": "eth0", "ip_address": "fd00::10", "netmask": "ffff:ffff:ffff:ffff::",
          "routes": [{"network": "::", "netmask": "::", "gateway": "fd00::1", "services": []}]},
         {"type": "ipv4_dhcp", "id": "d4", "link": "eth1", "routes": []},
         {"type": "ipv6_dhcp", "id": "d6", "link": "eth1", "routes": []},
         {"type": "ipv6_slaac", "id": "s6", "link": "eth1", "routes": []}],
      "services": [{"type": "dns", "address": "1.1.1.1"}, {"type": "dns", "address": "fd00::53"}]}),
    ({"links": {"ethernets": [{"type": "phy", "id": "eth0", "name": "eth0"}]},
      "networks": {"ipv4": [{"id": "a", "link": "eth0",
                             "fromPoolAnnotation": {"object": "baremetalhost", "annotation": "pool"}}]}},
     {"links": [{"type": "phy", "id": "eth0", "mtu": 1500, "name": "eth0"}], "services": [],
      "networks": [{"type": "ipv4", "id": "a", "link": "eth0", "ip_address": "192.168.11.10",
                    "netmask": "255.255.255.0", "routes": []}]}),
]


@pytest.mark.parametrize(("spec", "expected"), NETWORK)
def test_network_data(spec, expected):
    assert r.render_network_data(spec, ADDRESSES, HOST, OBJECTS) == expected


# The seed's az-a template (feature request CAPM3#2716), as written.
SEED = yaml.safe_load("""
spec:
  template:
    networkData:
      links:
        ethernets:
        - id: nic0
          type: phy
          macAddress: { fromHostInterface: eno1 }
        - id: nic1
          type: phy
          macAddress: { fromHostInterface: eno2 }
        bonds:
        - id: bond1
          type: bond
          interfaces: ["nic0","nic1"]
          bondMode: "802.3ad"
          bondMiimon: 100
          bondLACPRate: "fast"
          bondXmitHashPolicy: "layer3+4"
        vlans:
        - id: bond1.11
          type: vlan
          link: bond1
          vlanID: 11
          mtu: 9000
        - id: bond1.12
          type: vlan
          link: bond1
          vlanID: 12
      networks:
        ipv4:
        - id: mgmt-a
          link: bond1.11
          ipAddressFromIPPool: mgmt-az-a-pool
          routes:
          - to: 0.0.0.0/0
            via: 192.168.11.1
        - id: storage-a
          link: bond1.12
          ipAddressFromIPPool: storage-az-a-pool
""")["spec"]

UPSTREAM = {"networkData": {
    "links": {
        "ethernets": [{"id": "nic0", "type": "phy", "macAddress": {"fromHostInterface": "eno1"}},
                      {"id": "nic1", "type": "phy", "macAddress": {"fromHostInterface": "eno2"}}],
        "bonds": [{"id": "bond1", "bondLinks": ["nic0", "nic1"], "bondMode": "802.3ad",
                   "bondXmitHashPolicy": "layer3+4",
                   "parameters": [{"name": "miimon", "value": 100}, {"name": "lacp_rate", "value": "fast"}]}],
        "vlans": [{"id": "bond1.11", "vlanLink": "bond1", "vlanID": 11, "mtu": 9000},
                  {"id": "bond1.12", "vlanLink": "bond1", "vlanID": 12}]},
    "networks": {"ipv4": [
        {"id": "mgmt-a", "link": "bond1.11", "ipAddressFromIPPool": "mgmt-az-a-pool",
         "routes": [{"network": "0.0.0.0", "prefix": 0, "gateway": {"string": "192.168.11.1"}}]},
        {"id": "storage-a", "link": "bond1.12", "ipAddressFromIPPool": "storage-az-a-pool"}]}}}
SEED_ADDRESSES = {"mgmt-az-a-pool": {**ADDRESSES["mgmt"]}, "storage-az-a-pool": {**ADDRESSES["storage"]}}


def test_the_seed_template_works_as_written_and_renders_as_upstreams_spelling():
    seed = r.normalize_template_spec(SEED)["networkData"]
    rendered = r.render_network_data(seed, SEED_ADDRESSES, HOST)
    assert rendered == r.render_network_data(UPSTREAM["networkData"], SEED_ADDRESSES, HOST)
    assert [link["id"] for link in rendered["links"]] == ["bond1", "nic0", "nic1", "bond1.11", "bond1.12"]
    bond = rendered["links"][0]
    assert bond == {"type": "bond", "id": "bond1", "mtu": 1500, "bond_mode": "802.3ad", "bond_links": ["nic0", "nic1"],
                    "bond_xmit_hash_policy": "layer3+4", "bond_miimon": 100, "bond_lacp_rate": "fast"}
    # no macAddress on the seed's VLANs: the bond's, which is its first member's (nic0, from eno1)
    assert rendered["links"][3] == {"type": "vlan", "id": "bond1.11", "mtu": 9000, "vlan_link": "bond1", "vlan_id": 11,
                                    "vlan_mac_address": "52:54:00:00:00:01"}
    assert rendered["networks"][0]["routes"] == [{"network": "0.0.0.0", "netmask": "0.0.0.0",
                                                  "gateway": "192.168.11.1", "services": []}]
    assert r.pool_names(SEED) == ["mgmt-az-a-pool", "storage-az-a-pool"]
    assert r.referenced_pools(UPSTREAM) == ["mgmt-az-a-pool", "storage-az-a-pool"]


def test_both_template_shapes_normalize_alike():
    upstream_shape = {"networkData": SEED["template"]["networkData"]}
    assert r.normalize_template_spec(SEED) == r.normalize_template_spec(upstream_shape)
    # a part not set is None, not {}: CAPM3 renders no document for it (an empty one for a part set to {})
    assert r.normalize_template_spec({}) == {"metaData": None, "networkData": None}
    assert r.normalize_template_spec({"template": {"networkData": {}}}) == {"metaData": None, "networkData": {}}


# networkData or metaData → the field the error names
ERRORS = [
    ({"networks": {"ipv4": [{"id": "a", "link": "l", "ipAddressFromIPPool": "nowhere"}]}},
     "networkData.networks.ipv4[0].ipAddressFromIPPool: no address from pool 'nowhere'"),
    ({"links": {"ethernets": [{"id": "e", "type": "phy", "macAddress": {"fromHostInterface": "eno9"}}]}},
     "networkData.links.ethernets[0].macAddress.fromHostInterface: the host has no interface 'eno9'"),
    ({"links": {"ethernets": [{"id": "e", "type": "phy", "macAddress": {"string": "not-a-mac"}}]}},
     "networkData.links.ethernets[0].macAddress: 'not-a-mac' is not a MAC address"),
    ({"links": {"bonds": [{"id": "b", "bondMode": "fastest", "bondLinks": ["e"]}]}},
     "networkData.links.bonds[0].bondMode: must be one of"),
    ({"links": {"vlans": [{"id": "v", "vlanID": 5000, "vlanLink": "b"}]}},
     "networkData.links.vlans[0].vlanID: must be an integer from 0 to 4096"),
    ({"links": {"bonds": [{"id": "b", "bondMood": "802.3ad"}]}}, "networkData.links.bonds[0].bondMood: unknown field"),
    ({"links": {"bonds": [{"id": "b", "bondMode": "802.3ad", "bondLinks": ["e"],
                           "parameters": [{"name": "mode", "value": "x"}]}]}},
     "networkData.links.bonds[0].parameters[0].name: illegal params: bond_mode is already set"),
    ({"links": {"ethernets": [{"id": "e", "type": "phy", "mtu": 100}]}},
     "networkData.links.ethernets[0].mtu: must be an integer from 1280 to 9000"),
    ({"networks": {"ipv4": [{"id": "a", "link": "l", "ipAddressFromIPPool": "mgmt", "routes": [{"to": "nonsense"}]}]}},
     "networkData.networks.ipv4[0].routes[0].to: 'nonsense' is not a network in CIDR form"),
]


@pytest.mark.parametrize(("spec", "message"), ERRORS)
def test_errors_name_the_field(spec, message):
    with pytest.raises(Invalid) as error:
        r.render_network_data(spec, ADDRESSES, HOST, OBJECTS)
    assert str(error.value).startswith(message)


def test_meta_data_errors_name_the_field():
    with pytest.raises(Invalid, match=r"metaData\.ipAddressesFromIPPool\[0\]: no address from pool 'gone'"):
        r.render_meta_data({"ipAddressesFromIPPool": [{"key": "ip", "name": "gone"}]}, 0, OBJECTS, ADDRESSES, "ns")
    with pytest.raises(Invalid, match=r"metaData\.objectNames\[0\]\.object: must be one of"):
        r.render_meta_data({"objectNames": [{"key": "x", "object": "cluster"}]}, 0, OBJECTS, ADDRESSES, "ns")
    with pytest.raises(Invalid, match=r"metaData\.colours: unknown field"):
        r.render_meta_data({"colours": []}, 0, OBJECTS, ADDRESSES, "ns")


GATEWAY_ROUTES = {
    "links": {"ethernets": [{"type": "phy", "id": "eth0", "name": "eth0"}]},
    "networks": {"ipv4DHCP": [{"id": "d", "link": "eth0", "routes": [
        {"network": "10.0.0.0", "prefix": 8, "gateway": {"fromPoolRef": {"name": "mgmt", "kind": "IPPool"}}},
        {"network": "10.1.0.0", "prefix": 16,
         "gateway": {"fromPoolAnnotation": {"object": "baremetalhost", "annotation": "pool"},
                     "fromIPPool": "storage"}}]}]}}  # the annotation wins over fromIPPool


def test_route_gateways_from_a_pool_ref_and_a_pool_annotation():
    spec = GATEWAY_ROUTES
    rendered = r.render_network_data(spec, ADDRESSES, HOST, OBJECTS)["networks"][0]["routes"]
    assert rendered == [{"network": "10.0.0.0", "netmask": "255.0.0.0", "gateway": "192.168.11.1", "services": []},
                        {"network": "10.1.0.0", "netmask": "255.255.0.0", "gateway": "192.168.11.1", "services": []}]
    assert r.referenced_pools({"networkData": spec}) == ["mgmt"]
    assert r.pool_names({"networkData": spec}, OBJECTS) == ["mgmt"]


def test_pool_names_read_pool_annotations_and_name_the_missing_one():
    spec = {"metaData": {"dnsServersFromPool": [{"key": "dns", "name": "dns-pool"}]},
            "networkData": {"networks": {"ipv6": [{"id": "a", "link": "l", "ipAddressFromIPPool": "ignored",
                                                   "fromPoolAnnotation": {"object": "BareMetalHost",
                                                                          "annotation": "pool"}}]}}}
    assert r.referenced_pools(spec) == ["dns-pool"]
    assert r.pool_names(spec, OBJECTS) == ["dns-pool", "mgmt"]
    with pytest.raises(Invalid, match=r"^networkData\.networks\.ipv6\[0\]\.fromPoolAnnotation: the baremetalhost "
                                      r"has no annotation 'pool'"):
        r.pool_names(spec, {"baremetalhost": {"metadata": {"name": "bare"}}})


V1BETA1_BOND_PARAMETERS = {"links": {
    "bonds": [{"id": "b", "bondMode": "balance-rr", "bondLinks": ["e"], "parameters": {"miimon": 100}}],
    "ethernets": [{"type": "phy", "id": "e", "name": "eth0"}]}}


def test_bond_parameters_may_be_upstreams_v1beta1_mapping():
    assert r.render_network_data(V1BETA1_BOND_PARAMETERS, ADDRESSES)["links"][0]["bond_miimon"] == 100


# more networkData → the field the error names: the seed's spelling beside upstream's, address families
MORE_ERRORS = [
    ({"links": {"bonds": [{"id": "b", "bondMode": "802.3ad", "bondLinks": ["e"], "interfaces": ["e"]}]}},
     "networkData.links.bonds[0].interfaces: set beside bondLinks"),
    ({"links": {"bonds": [{"id": "b", "bondMode": "802.3ad", "bondLinks": ["e"], "bondMiimon": 100,
                           "parameters": [{"name": "miimon", "value": 200}]}]}},
     "networkData.links.bonds[0].parameters[0].name: illegal params: bond_miimon is already set"),
    ({"links": {"vlans": [{"id": "v", "type": "bond", "vlanID": 5, "link": "b"}]}},
     "networkData.links.vlans[0].type: must be 'vlan'"),
    ({"networks": {"ipv4": [{"id": "a", "link": "l", "ipAddressFromIPPool": "v6"}]}},
     "networkData.networks.ipv4[0].ipAddressFromIPPool: pool 'v6' gave 'fd00::10', not an IPv4 address"),
    ({"networks": {"ipv4DHCP": [{"id": "a", "link": "l", "routes": [{"to": "::/0", "via": "fd00::1"}]}]}},
     "networkData.networks.ipv4DHCP[0].routes[0].to: '::/0' is not an IPv4 network"),
    ({"networks": {"ipv4DHCP": [{"id": "a", "link": "l", "routes": [{"to": "0.0.0.0/0",
                                                                     "gateway": {"fromIPPool": "storage"}}]}]}},
     "networkData.networks.ipv4DHCP[0].routes[0].gateway.fromIPPool: pool 'storage' has no gateway"),
    ({"networks": {"ipv4DHCP": [{"id": "a", "link": "l", "routes": [{"to": "0.0.0.0/0",
                                                                     "gateway": {"fromPool": "mgmt"}}]}]}},
     "networkData.networks.ipv4DHCP[0].routes[0].gateway.fromPool: unknown field"),
    ({"links": {"ethernets": [{"id": "e", "type": "phy", "name": "a-name-far-too-long",
                               "macAddress": {"string": "52:54:00:00:00:05"}}]}},
     "networkData.links.ethernets[0].name: 'a-name-far-too-long' is not an interface name"),
]


@pytest.mark.parametrize(("spec", "message"), MORE_ERRORS)
def test_more_errors_name_the_field(spec, message):
    with pytest.raises(Invalid) as error:
        r.render_network_data(spec, ADDRESSES, HOST, OBJECTS)
    assert str(error.value).startswith(message)
