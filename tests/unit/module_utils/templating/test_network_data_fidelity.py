"""networkData rendered as cloud-init reads it and as CAPM3's renderNetworkLinks / getRoutesv4 write it.

Upstream: baremetal/metal3data_manager.go and api/v1beta2/metal3datatemplate_types.go of
metal3-io/cluster-api-provider-metal3; cloud-init's reader is convert_net_json in
cloudinit/sources/helpers/openstack.py, which reads ``link["vlan_mac_address"]`` on every VLAN.
"""
from __future__ import annotations

import pytest
import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.templating import render as r

ADDRESSES = {"mgmt": {"address": "192.168.11.10", "prefix": 24, "gateway": "192.168.11.1",
                      "dns_servers": ["192.168.11.2"]}}
HOST = {"metadata": {"name": "host-0", "annotations": {"mac": "52:54:00:00:00:09"}},
        "spec": {"bootMACAddress": "52:54:00:00:00:01"},
        "status": {"hardware": {"nics": [{"name": "eno1", "mac": "52:54:00:00:00:01"},
                                         {"name": "eno2", "mac": "52:54:00:00:00:02"}]}}}
OBJECTS = {"baremetalhost": HOST}

NIC0 = {"id": "nic0", "type": "phy", "macAddress": {"fromHostInterface": "eno1"}}
NIC1 = {"id": "nic1", "type": "phy", "macAddress": {"fromHostInterface": "eno2"}}
NIC_BY_NAME = {"id": "nic2", "type": "phy", "name": "enp3s0"}
BOND = {"id": "bond1", "bondMode": "802.3ad", "bondLinks": ["nic0", "nic1"]}


def render(links: dict) -> dict[str, dict]:
    """The rendered links by id."""
    return {link["id"]: link for link in r.render_network_data({"links": links}, ADDRESSES, HOST, OBJECTS)["links"]}


# 1. links → the vlan_mac_address of vlan "v" (cloud-init's converter needs the key on every VLAN)
VLAN_MAC = [
    pytest.param({"ethernets": [NIC0, NIC1], "bonds": [BOND], "vlans": [{"id": "v", "vlanID": 11, "link": "bond1"}]},
                 "52:54:00:00:00:01", id="bond-without-mac-takes-its-first-member's"),
    pytest.param({"ethernets": [NIC0, NIC1], "bonds": [{**BOND, "bondLinks": ["nic1", "nic0"]}],
                  "vlans": [{"id": "v", "vlanID": 11, "vlanLink": "bond1"}]},
                 "52:54:00:00:00:02", id="first-member-is-the-first-in-bondLinks"),
    pytest.param({"ethernets": [NIC0, NIC1], "bonds": [{**BOND, "macAddress": {"string": "52:54:00:00:00:0b"}}],
                  "vlans": [{"id": "v", "vlanID": 11, "vlanLink": "bond1"}]},
                 "52:54:00:00:00:0b", id="bond-with-its-own-mac"),
    pytest.param({"ethernets": [NIC1], "vlans": [{"id": "v", "vlanID": 5, "vlanLink": "nic1"}]},
                 "52:54:00:00:00:02", id="ethernet-fromHostInterface"),
    pytest.param({"ethernets": [{"id": "e", "type": "phy", "name": "eth7",
                                 "macAddress": {"fromAnnotation": {"object": "baremetalhost", "annotation": "mac"}}}],
                  "vlans": [{"id": "v", "vlanID": 5, "vlanLink": "e"}]},
                 "52:54:00:00:00:09", id="ethernet-fromAnnotation"),
    pytest.param({"ethernets": [NIC0], "vlans": [{"id": "v", "vlanID": 5, "vlanLink": "nic0",
                                                  "macAddress": {"string": "52:54:00:00:00:0c"}}]},
                 "52:54:00:00:00:0c", id="vlan-with-its-own-mac-keeps-it"),
    pytest.param({"ethernets": [NIC_BY_NAME], "vlans": [{"id": "v", "vlanID": 5, "vlanLink": "nic2",
                                                         "macAddress": {"fromHostInterface": "eno2"}}]},
                 "52:54:00:00:00:02", id="vlan-on-a-named-ethernet-with-its-own-mac"),
    pytest.param({"vlans": [{"id": "v", "vlanID": 5, "vlanLink": "nic0"}], "ethernets": [NIC0]},
                 "52:54:00:00:00:01", id="links-listed-vlans-first"),
]


@pytest.mark.parametrize(("links", "mac"), VLAN_MAC)
def test_a_vlan_without_mac_address_takes_the_mac_of_its_link(links, mac):
    assert render(links)["v"]["vlan_mac_address"] == mac


# the seed's az-a template (feature request CAPM3#2716), as written: no macAddress on its VLANs
SEED_LINKS = yaml.safe_load("""
ethernets:
- {id: nic0, type: phy, macAddress: {fromHostInterface: eno1}}
- {id: nic1, type: phy, macAddress: {fromHostInterface: eno2}}
bonds:
- {id: bond1, type: bond, interfaces: [nic0, nic1], bondMode: "802.3ad", bondMiimon: 100, bondLACPRate: fast,
   bondXmitHashPolicy: "layer3+4"}
vlans:
- {id: bond1.11, type: vlan, link: bond1, vlanID: 11, mtu: 9000}
- {id: bond1.12, type: vlan, link: bond1, vlanID: 12}
""")


def test_the_seeds_vlans_render_every_key_cloud_init_reads():
    links = render(SEED_LINKS)
    for vlan in ("bond1.11", "bond1.12"):
        assert {"vlan_link", "vlan_id", "vlan_mac_address"} <= set(links[vlan])
        assert links[vlan]["vlan_mac_address"] == "52:54:00:00:00:01"  # nic0's, the bond's first member


# links → the error, naming the VLAN's macAddress
VLAN_MAC_ERRORS = [
    pytest.param({"vlans": [{"id": "v", "vlanID": 5, "vlanLink": "bond9"}]},
                 "networkData.links.vlans[0].macAddress: required: there is no link 'bond9'", id="unknown-link"),
    pytest.param({"ethernets": [NIC_BY_NAME], "vlans": [{"id": "v", "vlanID": 5, "vlanLink": "nic2"}]},
                 "networkData.links.vlans[0].macAddress: required: the link 'nic2' has no MAC address",
                 id="ethernet-by-name-only"),
    pytest.param({"ethernets": [NIC_BY_NAME, NIC0], "bonds": [{**BOND, "bondLinks": ["nic2", "nic0"]}],
                  "vlans": [{"id": "v", "vlanID": 5, "vlanLink": "bond1"}]},
                 "networkData.links.vlans[0].macAddress: required: the link 'bond1' has no MAC address",
                 id="bond-whose-first-member-is-by-name-only"),
]


@pytest.mark.parametrize(("links", "message"), VLAN_MAC_ERRORS)
def test_a_vlan_whose_link_has_no_mac_needs_its_own(links, message):
    with pytest.raises(Invalid) as error:
        render(links)
    assert str(error.value).startswith(message)


# 2. links → the ids in the order rendered: upstream's renderNetworkLinks writes bonds, then ethernets, then vlans
ORDER = [
    pytest.param({"ethernets": [NIC0, NIC1], "bonds": [BOND], "vlans": [{"id": "v", "vlanID": 5, "link": "bond1"}]},
                 ["bond1", "nic0", "nic1", "v"], id="ethernets-bonds-vlans"),
    pytest.param({"vlans": [{"id": "v", "vlanID": 5, "link": "bond1"}], "bonds": [BOND], "ethernets": [NIC0, NIC1]},
                 ["bond1", "nic0", "nic1", "v"], id="vlans-bonds-ethernets"),
    pytest.param({"ethernets": [NIC1, NIC0, NIC_BY_NAME],
                  "bonds": [{**BOND, "id": "b2", "bondLinks": ["nic2"]}, BOND]},
                 ["b2", "bond1", "nic1", "nic0", "nic2"], id="each-kind-in-its-own-order"),
    pytest.param({"ethernets": [NIC0], "vlans": [{"id": "v", "vlanID": 5, "link": "nic0"}]},
                 ["nic0", "v"], id="no-bonds"),
]


@pytest.mark.parametrize(("links", "ids"), ORDER)
def test_links_are_rendered_in_upstreams_order(links, ids):
    rendered = r.render_network_data({"links": links}, ADDRESSES, HOST, OBJECTS)["links"]
    assert [link["id"] for link in rendered] == ids


# 3. a bond → its bond_xmit_hash_policy (None: no key). Upstream writes "" when the policy is not set, which
# cloud-init's netplan renderer carries over as the invalid `transmit-hash-policy: ''`: written only when set.
XMIT_HASH_POLICY = [
    pytest.param({}, None, id="unset"),
    pytest.param({"bondXmitHashPolicy": ""}, None, id="empty"),
    pytest.param({"bondXmitHashPolicy": "layer2"}, "layer2", id="layer2"),
    pytest.param({"bondXmitHashPolicy": "layer2+3"}, "layer2+3", id="layer2+3"),
]


@pytest.mark.parametrize(("fields", "policy"), XMIT_HASH_POLICY)
def test_bond_xmit_hash_policy_is_rendered_when_set(fields, policy):
    bond = render({"ethernets": [NIC0, NIC1], "bonds": [{**BOND, **fields}]})["bond1"]
    assert bond.get("bond_xmit_hash_policy") == policy


def test_a_parameter_may_never_set_the_xmit_hash_policy_even_when_unset():
    bond = {**BOND, "parameters": [{"name": "xmit_hash_policy", "value": "layer2"}]}
    with pytest.raises(Invalid, match=r"^networkData\.links\.bonds\[0\]\.parameters\[0\]\.name: illegal params"):
        render({"ethernets": [NIC0, NIC1], "bonds": [bond]})


# a route → its services: upstream writes the key on every route, an empty list when there are none
ROUTE_SERVICES = [
    pytest.param({}, [], id="none"),
    pytest.param({"services": {}}, [], id="empty"),
    pytest.param({"services": {"dns": ["8.8.8.8"]}}, [{"type": "dns", "address": "8.8.8.8"}], id="dns"),
    pytest.param({"services": {"dnsFromIPPool": "mgmt"}}, [{"type": "dns", "address": "192.168.11.2"}],
                 id="dnsFromIPPool"),
]


def route_services_network_data(kind: str, fields: dict) -> dict:
    """networkData with one network of ``kind`` on nic0 whose one route has ``fields``."""
    route = {"network": "10.0.0.0", "prefix": 8, "gateway": {"string": "192.168.11.1"}, **fields}
    network = {"id": "n", "link": "nic0", "routes": [route]}
    if kind == "ipv4":
        network["ipAddressFromIPPool"] = "mgmt"
    return {"links": {"ethernets": [NIC0]}, "networks": {kind: [network]}}


@pytest.mark.parametrize(("fields", "services"), ROUTE_SERVICES)
@pytest.mark.parametrize("kind", ["ipv4", "ipv4DHCP"])
def test_route_services_are_always_rendered(kind, fields, services):
    rendered = r.render_network_data(route_services_network_data(kind, fields), ADDRESSES, HOST, OBJECTS)
    assert rendered["networks"][0]["routes"] == [{"network": "10.0.0.0", "netmask": "255.0.0.0",
                                                  "gateway": "192.168.11.1", "services": services}]


# 4. a link given by kernel name without macAddress → the link rendered: name, and no MAC key
BY_NAME = [
    pytest.param({"ethernets": [NIC_BY_NAME]}, "nic2",
                 {"type": "phy", "id": "nic2", "mtu": 1500, "name": "enp3s0"}, id="ethernet"),
    pytest.param({"ethernets": [{**NIC_BY_NAME, "mtu": 9000, "type": "ovs"}]}, "nic2",
                 {"type": "ovs", "id": "nic2", "mtu": 9000, "name": "enp3s0"}, id="ethernet-ovs-mtu"),
    pytest.param({"ethernets": [NIC_BY_NAME], "bonds": [{"id": "b", "name": "bond0", "bondMode": "active-backup",
                                                         "bondLinks": ["nic2"]}]}, "b",
                 {"type": "bond", "id": "b", "mtu": 1500, "bond_mode": "active-backup", "bond_links": ["nic2"],
                  "name": "bond0"}, id="bond"),
    pytest.param({"ethernets": [{**NIC0, "name": "eth0"}]}, "nic0",
                 {"type": "phy", "id": "nic0", "mtu": 1500, "name": "eth0",
                  "ethernet_mac_address": "52:54:00:00:00:01"},
                 id="ethernet-name-and-mac-renames"),
]


@pytest.mark.parametrize(("links", "link_id", "expected"), BY_NAME)
def test_links_given_by_kernel_name(links, link_id, expected):
    assert render(links)[link_id] == expected


def test_an_ethernet_needs_a_mac_address_or_a_name():
    with pytest.raises(Invalid, match=r"^networkData\.links\.ethernets\[0\]\.macAddress: required unless name is set"):
        render({"ethernets": [{"id": "e", "type": "phy"}]})
    with pytest.raises(Invalid, match=r"^networkData\.links\.ethernets\[0\]\.name: 'bad name' is not an interface"):
        render({"ethernets": [{"id": "e", "type": "phy", "name": "bad name"}]})


# 5. networkData → the field the error names: every link id a bond, a VLAN or a network names must be a link
# (cloud-init's converter fails with KeyError on a bond member or VLAN link that is not, and drops a network),
# and a link is in one bond at most (cloud-init's netplan renders the earlier bond without members)
LINK_REFERENCE_ERRORS = [
    pytest.param({"links": {"ethernets": [NIC0], "bonds": [{**BOND, "bondLinks": ["nic0", "nic9"]}]}},
                 "networkData.links.bonds[0].bondLinks[1]: there is no link 'nic9' in networkData.links",
                 id="bond-member"),
    pytest.param({"links": {"ethernets": [NIC0], "bonds": [{"id": "b", "bondMode": "802.3ad",
                                                            "interfaces": ["nic9"]}]}},
                 "networkData.links.bonds[0].interfaces[0]: there is no link 'nic9'", id="bond-member-seed-spelling"),
    pytest.param({"links": {"ethernets": [NIC0, NIC1], "bonds": [BOND, {**BOND, "id": "b2", "bondLinks": ["nic1"]}]}},
                 "networkData.links.bonds[1].bondLinks[0]: 'nic1' is already a member of the bond 'bond1'",
                 id="member-of-two-bonds"),
    pytest.param({"links": {"vlans": [{"id": "v", "vlanID": 5, "vlanLink": "nic9",
                                       "macAddress": {"string": "52:54:00:00:00:0c"}}]}},
                 "networkData.links.vlans[0].vlanLink: there is no link 'nic9'", id="vlan-link-with-its-own-mac"),
    pytest.param({"links": {"ethernets": [NIC0]},
                  "networks": {"ipv4DHCP": [{"id": "n", "link": "nic0"}, {"id": "m", "link": "eth0"}]}},
                 "networkData.networks.ipv4DHCP[1].link: there is no link 'eth0' in networkData.links",
                 id="network-link"),
    pytest.param({"networks": {"ipv4": [{"id": "n", "link": "nic0", "ipAddressFromIPPool": "mgmt"}]}},
                 "networkData.networks.ipv4[0].link: there is no link 'nic0'", id="network-without-links"),
]


@pytest.mark.parametrize(("network_data", "message"), LINK_REFERENCE_ERRORS)
def test_every_link_named_is_a_link(network_data, message):
    with pytest.raises(Invalid) as error:
        r.render_network_data(network_data, ADDRESSES, HOST, OBJECTS)
    assert str(error.value).startswith(message)


# a MAC address written with '-' → rendered with ':', the form cloud-init and netplan match NICs by
MAC_SEPARATORS = [
    pytest.param({"string": "52-54-00-00-00-0A"}, "52:54:00:00:00:0A", id="string"),
    pytest.param({"fromAnnotation": {"object": "baremetalhost", "annotation": "dashes"}}, "52:54:00:00:00:0b",
                 id="fromAnnotation"),
    pytest.param({"string": "52:54:00:00:00:0c"}, "52:54:00:00:00:0c", id="colons-unchanged"),
]


DASHES_HOST = {**HOST, "metadata": {"name": "host-0", "annotations": {"dashes": "52-54-00-00-00-0b"}}}


def mac_links(mac: dict) -> dict:
    """networkData: an ethernet of macAddress ``mac`` and a VLAN on it."""
    return {"links": {"ethernets": [{"id": "e", "type": "phy", "macAddress": mac}],
                      "vlans": [{"id": "v", "vlanID": 5, "vlanLink": "e"}]}}


@pytest.mark.parametrize(("mac", "rendered"), MAC_SEPARATORS)
def test_mac_addresses_are_rendered_with_colons(mac, rendered):
    links = r.render_network_data(mac_links(mac), {}, DASHES_HOST)["links"]
    assert [link.get("ethernet_mac_address") or link.get("vlan_mac_address") for link in links] == [rendered] * 2


# 6. a Metal3DataTemplate spec → the network_data document it renders. Upstream's renderNetworkData returns nil for a
# template whose networkData is nil, and createSecrets then makes no networkdata Secret and sets no
# Metal3Data.spec.networkData (so the host gets none and cloud-init falls back to its default network); a
# networkData that is set, even empty, renders every key, an empty list each.
EMPTY_DOCUMENT = {"links": [], "networks": [], "services": []}
TEMPLATE_DOCUMENTS = [
    pytest.param({}, None, id="no-networkData"),
    pytest.param({"clusterName": "c", "metaData": {"strings": [{"key": "k", "value": "v"}]}}, None,
                 id="metaData-only"),
    pytest.param({"template": {"metaData": {}}}, None, id="seed-spelling-no-networkData"),
    pytest.param({"networkData": {}}, EMPTY_DOCUMENT, id="empty-networkData"),
    pytest.param({"template": {"networkData": {}}}, EMPTY_DOCUMENT, id="seed-spelling-empty-networkData"),
    pytest.param({"networkData": {"services": {"dns": ["8.8.8.8"]}}},
                 {**EMPTY_DOCUMENT, "services": [{"type": "dns", "address": "8.8.8.8"}]}, id="services-only"),
]


@pytest.mark.parametrize(("spec", "document"), TEMPLATE_DOCUMENTS)
def test_a_template_without_network_data_renders_no_document(spec, document):
    network_data = r.normalize_template_spec(spec)["networkData"]
    assert r.render_network_data(network_data, ADDRESSES, HOST, OBJECTS) == document


def test_no_network_data_still_checks_the_other_arguments():
    with pytest.raises(Invalid, match=r"^addresses: must be a mapping"):
        r.render_network_data(None, ["mgmt"], HOST)


# 7. what a pool gave → the DNS servers dnsFromIPPool renders. Upstream's renderNetworkServices and getRoutesv4/v6
# read only the dnsServers of what the pool gave, never its address: a pool that gave DNS servers but no address
# (a record of DNS servers only, as a playbook hands the filters) renders them, top-level and on a route alike.
DNS_ONLY = {"address": None, "prefix": None, "gateway": None, "dns_servers": ["10.0.0.53", "10.0.0.54"]}
DNS_ONLY_SERVICES = [{"type": "dns", "address": "10.0.0.53"}, {"type": "dns", "address": "10.0.0.54"}]
DNS_FROM_POOL = [
    pytest.param({"dns": DNS_ONLY}, DNS_ONLY_SERVICES, id="dns-servers-and-no-address"),
    pytest.param({"dns": {"dns_servers": ["10.0.0.53", "10.0.0.54"]}}, DNS_ONLY_SERVICES, id="dns-servers-only"),
    pytest.param({"dns": {"dnsServers": ["10.0.0.53", "10.0.0.54"]}}, DNS_ONLY_SERVICES,
                 id="ip-address-spec-spelling"),
    pytest.param({"dns": {"address": "", "dns_servers": ["fd00::53"]}}, [{"type": "dns", "address": "fd00::53"}],
                 id="empty-address"),
    pytest.param({"dns": {"address": "10.0.0.5", "prefix": 24, "dns_servers": []}}, [],
                 id="an-address-and-no-dns-servers"),  # upstream: an empty list
]


@pytest.mark.parametrize(("addresses", "services"), DNS_FROM_POOL)
def test_dns_from_ip_pool_renders_what_the_pool_gave_without_an_address(addresses, services):
    top = r.render_network_data({"services": {"dnsFromIPPool": "dns"}}, addresses)
    assert top == {**EMPTY_DOCUMENT, "services": services}
    route = route_services_network_data("ipv4DHCP", {"services": {"dnsFromIPPool": "dns"}})
    rendered = r.render_network_data(route, addresses, HOST, OBJECTS)
    assert rendered["networks"][0]["routes"][0]["services"] == services
    meta = r.render_meta_data({"dnsServersFromIPPool": [{"key": "dns", "name": "dns"}]}, 0, {}, addresses, "ns")
    assert meta == {"dns": ",".join(service["address"] for service in services)}


# what a pool gave (a record without an address, as the filters take one) → the gateway a route and the metaData
# render from it: CAPM3 reads only the pool's gateway there
GATEWAY_FROM_POOL = [
    pytest.param({"gw": {"gateway": "192.168.11.254"}}, "192.168.11.254", id="a-gateway-and-no-address"),
    pytest.param({"gw": {"address": "", "gateway": "192.168.11.254"}}, "192.168.11.254", id="empty-address"),
    pytest.param({"gw": {"address": "192.168.11.7", "prefix": 24, "gateway": "192.168.11.1"}}, "192.168.11.1",
                 id="an-address-and-its-gateway"),
]


@pytest.mark.parametrize(("addresses", "gateway"), GATEWAY_FROM_POOL)
def test_a_gateway_from_a_pool_renders_what_the_pool_gave_without_an_address(addresses, gateway):
    route = route_services_network_data("ipv4DHCP", {"gateway": {"fromIPPool": "gw"}})
    rendered = r.render_network_data(route, addresses, HOST, OBJECTS)
    assert rendered["networks"][0]["routes"][0]["gateway"] == gateway
    meta = r.render_meta_data({"gatewaysFromIPPool": [{"key": "gw", "name": "gw"}]}, 0, {}, addresses, "ns")
    assert meta == {"gw": gateway}


def test_a_gateway_from_a_pool_that_gave_none_names_the_field():
    route = route_services_network_data("ipv4DHCP", {"gateway": {"fromIPPool": "gw"}})
    with pytest.raises(Invalid) as error:
        r.render_network_data(route, {"gw": {"dns_servers": ["10.0.0.53"]}}, HOST, OBJECTS)
    assert str(error.value) == "networkData.networks.ipv4DHCP[0].routes[0].gateway.fromIPPool: no address nor " \
                               "gateway from pool 'gw'"


# what a pool gave → the error dnsFromIPPool names: a pool that gave nothing, or is not there; and an address
# is still required where one is rendered
DNS_FROM_POOL_ERRORS = [
    pytest.param({"services": {"dnsFromIPPool": "dns"}}, {"dns": {**DNS_ONLY, "dns_servers": []}},
                 "networkData.services.dnsFromIPPool: no address nor DNS servers from pool 'dns'", id="nothing"),
    pytest.param({"services": {"dnsFromIPPool": "dns"}}, {},
                 "networkData.services.dnsFromIPPool: no address nor DNS servers from pool 'dns'", id="no-pool"),
    pytest.param({"services": {"dnsFromIPPool": "dns"}}, {"dns": {"dns_servers": "10.0.0.53"}},
                 "addresses[dns].dns_servers: must be a list of addresses", id="bad-dns-servers"),
    pytest.param({"links": {"ethernets": [NIC0]},
                  "networks": {"ipv4": [{"id": "n", "link": "nic0", "ipAddressFromIPPool": "dns"}]}},
                 {"dns": DNS_ONLY}, "networkData.networks.ipv4[0].ipAddressFromIPPool: no address from pool 'dns'",
                 id="an-address-is-still-needed-for-a-static-network"),
]


@pytest.mark.parametrize(("network_data", "addresses", "message"), DNS_FROM_POOL_ERRORS)
def test_dns_from_ip_pool_of_a_pool_that_gave_nothing_names_the_field(network_data, addresses, message):
    with pytest.raises(Invalid) as error:
        r.render_network_data(network_data, addresses, HOST, OBJECTS)
    assert str(error.value).startswith(message)
