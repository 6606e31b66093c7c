"""cloud-init's own code reads every network_data the collection renders, and writes the network asked for.

Each network_data goes through Debian's cloud-init (tests/harness/cloud_init.py): its OpenStack converter,
then its netplan renderer, as on a machine's first boot. The netplan it writes is summed up as facts, one line
each (see :func:`facts`), and compared with the facts each case expects. The inputs are every network_data the
renderer's unit tests produce (their own tables, imported) and the network_data of `make demo`'s machines
(its manifests rendered through the engine's renderer with the addresses its pools give).

Facts worth knowing when reading the tables: cloud-init 22.4 names bonds bond0, bond1... in the order of
``links`` (a bond's ``name`` is not read), a VLAN ``<its link's name>.<vlan id>``, an ethernet by its ``name``
or else by the kernel name of the NIC with its MAC; it reads DNS servers from the top-level ``services`` only
(and gives them to every interface with an address), never from a route's ``services``; its netplan renderer
writes the routes of static networks only, never those of a DHCP network (upstream's API has both).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.pools import parse_pool
from ansible_collections.metal3.baremetal.plugins.module_utils.templating import render as r
from tests.harness import cloud_init
from tests.unit.module_utils.templating import test_network_data_fidelity as fidelity
from tests.unit.module_utils.templating import test_render as unit

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "playbooks" / "files" / "demo"
FAILURE_DOMAIN = "infrastructure.cluster.x-k8s.io/failure-domain"

# The machine the unit tests' network_data boots on: MAC address -> the kernel's name of that NIC.
UNIT_MACHINE = {"52:54:00:00:00:01": "eno1", "52:54:00:00:00:02": "eno2",
                "52:54:00:00:00:09": "ens9",  # the NIC whose MAC the host's `mac` annotation gives
                "52:54:00:00:00:0a": "ens10", "52:54:00:00:00:0b": "ens11", "52:54:00:00:00:0c": "ens12"}

# The netplan keys :func:`facts` reads (any other fails it, so that nothing cloud-init writes goes unseen).
COMMON_KEYS = {"mtu", "addresses", "dhcp4", "dhcp6", "accept-ra", "routes", "nameservers"}
KEYS = {"ethernets": {"match", "set-name"}, "bonds": {"interfaces", "parameters", "macaddress"},
        "vlans": {"id", "link", "macaddress"}}


def facts(network: dict[str, Any]) -> set[str]:
    """The netplan ``network`` mapping as one line per fact.

    ``ethernet NAME [mac=M] [mtu=N]``, ``bond NAME interfaces=A,B mode=M [parameter=value...] [mac=M] [mtu=N]``,
    ``vlan NAME id=N link=L [mac=M] [mtu=N]`` (mac: the MAC matched or set, mtu: when not 1500), and per
    interface ``NAME address CIDR``, ``NAME dhcp4``, ``NAME dhcp6``, ``NAME accept-ra=BOOL``,
    ``NAME route TO via GATEWAY``, ``NAME dns SERVER``.
    """
    def link(cfg: dict[str, Any]) -> list[str]:
        mac = cfg.get("macaddress") or (cfg.get("match") or {}).get("macaddress")
        return [*([f"mac={mac}"] if mac else []), *([f"mtu={cfg['mtu']}"] if cfg.get("mtu", 1500) != 1500 else [])]

    lines = set()
    for name, cfg in (network.get("ethernets") or {}).items():
        lines.add(" ".join(["ethernet", name, *link(cfg)]))
    for name, cfg in (network.get("bonds") or {}).items():
        parameters = dict(cfg.get("parameters") or {})
        lines.add(" ".join(["bond", name, f"interfaces={','.join(cfg.get('interfaces') or [])}",
                            f"mode={parameters.pop('mode', None)}",
                            *(f"{key}={value}" for key, value in sorted(parameters.items())), *link(cfg)]))
    for name, cfg in (network.get("vlans") or {}).items():
        lines.add(" ".join(["vlan", name, f"id={cfg['id']}", f"link={cfg['link']}", *link(cfg)]))
    assert set(network) <= {"version", *KEYS}, f"netplan sections no fact reads: {set(network) - set(KEYS)}"
    for section, keys in KEYS.items():
        for name, cfg in (network.get(section) or {}).items():
            unread = set(cfg) - keys - COMMON_KEYS
            assert not unread, f"{name}: netplan keys no fact reads: {unread}"
            lines.update(f"{name} address {address}" for address in cfg.get("addresses") or [])
            lines.update(f"{name} {dhcp}" for dhcp in ("dhcp4", "dhcp6") if cfg.get(dhcp))
            if "accept-ra" in cfg:
                lines.add(f"{name} accept-ra={str(cfg['accept-ra']).lower()}")
            lines.update(f"{name} route {route['to']} via {route['via']}" for route in cfg.get("routes") or [])
            lines.update(f"{name} dns {server}" for server in (cfg.get("nameservers") or {}).get("addresses") or [])
    return lines


def read(network_data: dict, known_macs: dict[str, str]) -> set[str]:
    return facts(cloud_init.netplan(network_data, known_macs))


# -- the renderer's unit tests ---------------------------------------------------------------------------------

def unit_network(i: int) -> Callable[[], dict]:
    """test_render.NETWORK[i], rendered."""
    return lambda: r.render_network_data(unit.NETWORK[i][0], unit.ADDRESSES, unit.HOST, unit.OBJECTS)


def unit_seed() -> dict:
    """test_render.SEED, the feature request's az-a template, rendered."""
    return r.render_network_data(r.normalize_template_spec(unit.SEED)["networkData"], unit.SEED_ADDRESSES, unit.HOST)


def unit_spec(spec: dict) -> Callable[[], dict]:
    """A networkData of test_render, rendered."""
    return lambda: r.render_network_data(spec, unit.ADDRESSES, unit.HOST, unit.OBJECTS)


def fidelity_links(table: str, case: str, bond: dict | None = None) -> Callable[[], dict]:
    """The links of a case of a test_network_data_fidelity table, rendered (XMIT_HASH_POLICY: on its bond)."""
    values = next(param.values for param in getattr(fidelity, table) if param.id == case)
    links = values[0] if bond is None else {"ethernets": [fidelity.NIC0, fidelity.NIC1],
                                            "bonds": [{**bond, **values[0]}]}
    return lambda: r.render_network_data({"links": links}, fidelity.ADDRESSES, fidelity.HOST, fidelity.OBJECTS)


def fidelity_mac(case: str) -> Callable[[], dict]:
    """test_network_data_fidelity.MAC_SEPARATORS[case]: an ethernet of that MAC and a VLAN on it, rendered."""
    mac = next(param.values[0] for param in fidelity.MAC_SEPARATORS if param.id == case)
    return lambda: r.render_network_data(fidelity.mac_links(mac), {}, fidelity.DASHES_HOST)


def fidelity_route(case: str, kind: str) -> Callable[[], dict]:
    """test_network_data_fidelity.ROUTE_SERVICES[case] on a network of ``kind``, rendered."""
    fields = next(param.values[0] for param in fidelity.ROUTE_SERVICES if param.id == case)
    return lambda: r.render_network_data(fidelity.route_services_network_data(kind, fields), fidelity.ADDRESSES,
                                         fidelity.HOST, fidelity.OBJECTS)


def fidelity_document(case: str) -> Callable[[], dict]:
    """test_network_data_fidelity.TEMPLATE_DOCUMENTS[case]: the document a template renders (one that renders
    none is no network_data for cloud-init to read: it falls back to its default network)."""
    spec = next(param.values[0] for param in fidelity.TEMPLATE_DOCUMENTS if param.id == case)
    return lambda: r.render_network_data(r.normalize_template_spec(spec)["networkData"], fidelity.ADDRESSES,
                                         fidelity.HOST, fidelity.OBJECTS)


def fidelity_dns(case: str) -> Callable[[], dict]:
    """test_network_data_fidelity.DNS_FROM_POOL[case]: the top-level dnsFromIPPool of a pool that gave DNS servers
    (and maybe no address), beside a static network on eno1, rendered."""
    addresses = next(param.values[0] for param in fidelity.DNS_FROM_POOL if param.id == case)
    network_data = {"links": {"ethernets": [fidelity.NIC0]},
                    "networks": {"ipv4": [{"id": "n", "link": "nic0", "ipAddressFromIPPool": "mgmt"}]},
                    "services": {"dnsFromIPPool": "dns"}}
    return lambda: r.render_network_data(network_data, {**fidelity.ADDRESSES, **addresses}, fidelity.HOST,
                                         fidelity.OBJECTS)


ENO = {"ethernet eno1 mac=52:54:00:00:00:01", "ethernet eno2 mac=52:54:00:00:00:02"}
LACP_BOND = "bond bond0 interfaces=eno1,eno2 mode=802.3ad"
STATIC_ENO1 = {"ethernet eno1 mac=52:54:00:00:00:01", "eno1 address 192.168.11.10/24",
               "eno1 route 10.0.0.0/8 via 192.168.11.1"}  # route services: never read by cloud-init
DHCP_ENO1 = {"ethernet eno1 mac=52:54:00:00:00:01", "eno1 dhcp4"}  # the routes of a DHCP network: never written

# source of the network_data → the facts of the netplan cloud-init writes for it
UNIT_CASES = [
    pytest.param(unit_network(0), {"ethernet eno1 mac=52:54:00:00:00:01", "ethernet ens9 mac=52:54:00:00:00:09",
                                   "ethernet data0 mac=52:54:00:00:00:05 mtu=9000"}, id="test_render.NETWORK[0]"),
    pytest.param(unit_network(1), {"ethernet eth0", "ethernet eth1",
                                   "bond bond0 interfaces=eth0,eth1 mode=active-backup primary=eth0",
                                   "vlan bond0.5 id=5 link=bond0 mac=52:54:00:00:00:07"},
                 id="test_render.NETWORK[1]"),
    pytest.param(unit_network(2), {*ENO, "eno1 address 192.168.11.10/24", "eno1 address fd00::10/64",
                                   "eno1 route 10.0.0.0/8 via 192.168.11.1", "eno1 route ::/0 via fd00::1",
                                   "eno1 dns 1.1.1.1", "eno1 dns fd00::53",  # the top-level services
                                   "eno1 accept-ra=false",  # a static IPv6 address
                                   "eno2 dhcp4", "eno2 dhcp6", "eno2 accept-ra=true"},  # ipv4DHCP, ipv6DHCP, SLAAC
                 id="test_render.NETWORK[2]"),  # every network kind
    pytest.param(unit_network(3), {"ethernet eth0", "eth0 address 192.168.11.10/24"},
                 id="test_render.NETWORK[3]"),
    pytest.param(unit_seed, {*ENO, f"{LACP_BOND} lacp-rate=fast mii-monitor-interval=100 transmit-hash-policy=layer3+4",
                             "vlan bond0.11 id=11 link=bond0 mac=52:54:00:00:00:01 mtu=9000",
                             "vlan bond0.12 id=12 link=bond0 mac=52:54:00:00:00:01",
                             "bond0.11 address 192.168.11.10/24", "bond0.11 route 0.0.0.0/0 via 192.168.11.1",
                             "bond0.12 address 192.168.12.10/24"}, id="test_render.SEED"),
    pytest.param(unit_spec(unit.GATEWAY_ROUTES), {"ethernet eth0", "eth0 dhcp4"},  # routes of DHCP: never written
                 id="test_render.GATEWAY_ROUTES"),
    pytest.param(unit_spec(unit.V1BETA1_BOND_PARAMETERS),
                 {"ethernet eth0", "bond bond0 interfaces=eth0 mode=balance-rr mii-monitor-interval=100"},
                 id="test_render.V1BETA1_BOND_PARAMETERS"),
    pytest.param(lambda: r.render_network_data({"links": fidelity.SEED_LINKS}, fidelity.ADDRESSES, fidelity.HOST),
                 {*ENO, f"{LACP_BOND} lacp-rate=fast mii-monitor-interval=100 transmit-hash-policy=layer3+4",
                  "vlan bond0.11 id=11 link=bond0 mac=52:54:00:00:00:01 mtu=9000",
                  "vlan bond0.12 id=12 link=bond0 mac=52:54:00:00:00:01"}, id="fidelity.SEED_LINKS"),
    *(pytest.param(fidelity_links("VLAN_MAC", case), expected, id=f"fidelity.VLAN_MAC[{case}]") for case, expected in [
        ("bond-without-mac-takes-its-first-member's",
         {*ENO, LACP_BOND, "vlan bond0.11 id=11 link=bond0 mac=52:54:00:00:00:01"}),
        ("first-member-is-the-first-in-bondLinks",
         {*ENO, LACP_BOND, "vlan bond0.11 id=11 link=bond0 mac=52:54:00:00:00:02"}),
        ("bond-with-its-own-mac",
         {*ENO, f"{LACP_BOND} mac=52:54:00:00:00:0b", "vlan bond0.11 id=11 link=bond0 mac=52:54:00:00:00:0b"}),
        ("ethernet-fromHostInterface",
         {"ethernet eno2 mac=52:54:00:00:00:02", "vlan eno2.5 id=5 link=eno2 mac=52:54:00:00:00:02"}),
        ("ethernet-fromAnnotation",
         {"ethernet eth7 mac=52:54:00:00:00:09", "vlan eth7.5 id=5 link=eth7 mac=52:54:00:00:00:09"}),
        ("vlan-with-its-own-mac-keeps-it",
         {"ethernet eno1 mac=52:54:00:00:00:01", "vlan eno1.5 id=5 link=eno1 mac=52:54:00:00:00:0c"}),
        ("vlan-on-a-named-ethernet-with-its-own-mac",
         {"ethernet enp3s0", "vlan enp3s0.5 id=5 link=enp3s0 mac=52:54:00:00:00:02"}),
        ("links-listed-vlans-first",
         {"ethernet eno1 mac=52:54:00:00:00:01", "vlan eno1.5 id=5 link=eno1 mac=52:54:00:00:00:01"}),
    ]),
    *(pytest.param(fidelity_links("ORDER", case), expected, id=f"fidelity.ORDER[{case}]") for case, expected in [
        ("ethernets-bonds-vlans", {*ENO, LACP_BOND, "vlan bond0.5 id=5 link=bond0 mac=52:54:00:00:00:01"}),
        ("vlans-bonds-ethernets", {*ENO, LACP_BOND, "vlan bond0.5 id=5 link=bond0 mac=52:54:00:00:00:01"}),
        ("each-kind-in-its-own-order", {*ENO, "ethernet enp3s0", "bond bond0 interfaces=enp3s0 mode=802.3ad",
                                        "bond bond1 interfaces=eno1,eno2 mode=802.3ad"}),
        ("no-bonds", {"ethernet eno1 mac=52:54:00:00:00:01", "vlan eno1.5 id=5 link=eno1 mac=52:54:00:00:00:01"}),
    ]),
    *(pytest.param(fidelity_links("XMIT_HASH_POLICY", case, fidelity.BOND), {*ENO, bond},
                   id=f"fidelity.XMIT_HASH_POLICY[{case}]") for case, bond in [
        ("unset", LACP_BOND),  # no transmit-hash-policy at all: the kernel's default
        ("empty", LACP_BOND),
        ("layer2", f"{LACP_BOND} transmit-hash-policy=layer2"),
        ("layer2+3", f"{LACP_BOND} transmit-hash-policy=layer2+3"),
    ]),
    *(pytest.param(fidelity_route(case, kind), expected, id=f"fidelity.ROUTE_SERVICES[{case}]-{kind}")
      for case in ("none", "empty", "dns", "dnsFromIPPool")
      for kind, expected in (("ipv4", STATIC_ENO1), ("ipv4DHCP", DHCP_ENO1))),
    *(pytest.param(fidelity_document(case), set(), id=f"fidelity.TEMPLATE_DOCUMENTS[{case}]")
      for case in ("empty-networkData", "seed-spelling-empty-networkData", "services-only")),  # no interface at all
    *(pytest.param(fidelity_dns(case), {"ethernet eno1 mac=52:54:00:00:00:01", "eno1 address 192.168.11.10/24",
                                        *(f"eno1 dns {server}" for server in servers)},
                   id=f"fidelity.DNS_FROM_POOL[{case}]") for case, servers in [
        ("dns-servers-and-no-address", ("10.0.0.53", "10.0.0.54")),
        ("dns-servers-only", ("10.0.0.53", "10.0.0.54")),
        ("ip-address-spec-spelling", ("10.0.0.53", "10.0.0.54")),
        ("empty-address", ("fd00::53",)),
        ("an-address-and-no-dns-servers", ()),
    ]),
    *(pytest.param(fidelity_links("BY_NAME", case), expected, id=f"fidelity.BY_NAME[{case}]") for case, expected in [
        ("ethernet", {"ethernet enp3s0"}),
        ("ethernet-ovs-mtu", {"ethernet enp3s0 mtu=9000"}),
        ("bond", {"ethernet enp3s0", "bond bond0 interfaces=enp3s0 mode=active-backup"}),
        ("ethernet-name-and-mac-renames", {"ethernet eth0 mac=52:54:00:00:00:01"}),
    ]),
    *(pytest.param(fidelity_mac(case), {f"ethernet {nic} mac={mac}", f"vlan {nic}.5 id=5 link={nic} mac={mac}"},
                   id=f"fidelity.MAC_SEPARATORS[{case}]") for case, nic, mac in [
        ("string", "ens10", "52:54:00:00:00:0a"),  # 52-54-00-00-00-0A, as written
        ("fromAnnotation", "ens11", "52:54:00:00:00:0b"),
        ("colons-unchanged", "ens12", "52:54:00:00:00:0c"),
    ]),
]


@pytest.mark.parametrize(("network_data", "expected"), UNIT_CASES)
def test_cloud_init_reads_what_the_renderer_tests_render(network_data, expected):
    assert read(network_data(), UNIT_MACHINE) == expected


def test_every_network_data_table_of_the_renderer_tests_is_read():
    """A case added to the renderer's tables needs its line above."""
    read_ids = {param.id for param in UNIT_CASES}
    tables = {f"test_render.NETWORK[{i}]" for i in range(len(unit.NETWORK))} | {
        f"fidelity.{table}[{param.id}]" for table in ("VLAN_MAC", "ORDER", "XMIT_HASH_POLICY", "BY_NAME",
                                                      "MAC_SEPARATORS")
        for param in getattr(fidelity, table)} | {
        f"fidelity.ROUTE_SERVICES[{param.id}]-{kind}" for param in fidelity.ROUTE_SERVICES
        for kind in ("ipv4", "ipv4DHCP")} | {
        f"fidelity.TEMPLATE_DOCUMENTS[{param.id}]" for param in fidelity.TEMPLATE_DOCUMENTS
        if param.values[1] is not None} | {f"fidelity.DNS_FROM_POOL[{param.id}]" for param in fidelity.DNS_FROM_POOL}
    assert tables <= read_ids


# -- make demo's machines -------------------------------------------------------------------------------------

def demo_documents(name: str) -> list[dict]:
    return [doc for doc in yaml.safe_load_all((DEMO / name).read_text()) if doc]


def demo_network_data(host_name: str) -> tuple[dict, dict[str, str]]:
    """The network_data of a machine on the demo host ``host_name``, and the host's NICs (MAC -> name).

    The host's failure domain picks its data template (cp-net-<domain>), as the demo's machine templates do;
    the k-th host of a domain gets the k-th address each pool hands out. The host's NICs are those of its
    inspect.metal3.io/hardwaredetails annotation, where the demo's hosts (inspection disabled) take them from.
    """
    cluster = demo_documents("cluster.yaml")
    hosts = [doc for doc in demo_documents("hosts.yaml") if doc["kind"] == "BareMetalHost"]
    host = next(doc for doc in hosts if doc["metadata"]["name"] == host_name)
    domain = host["metadata"]["labels"][FAILURE_DOMAIN]
    k = [doc for doc in hosts if doc["metadata"]["labels"][FAILURE_DOMAIN] == domain].index(host)
    template = next(doc for doc in cluster if doc["kind"] == "Metal3DataTemplate"
                    and doc["metadata"]["name"] == f"cp-net-{domain}")
    host["status"] = {"hardware": json.loads(host["metadata"]["annotations"]["inspect.metal3.io/hardwaredetails"])}
    addresses = {}
    for pool_name in r.pool_names(template["spec"], {"baremetalhost": host}):
        pool_obj = next(doc for doc in cluster if doc["kind"] == "IPPool" and doc["metadata"]["name"] == pool_name)
        pool = parse_pool(pool_obj)
        reserved = set(pool.reserved_offsets())
        address, entry = pool.address_at([offset for offset in range(pool.size) if offset not in reserved][k])
        addresses[pool_name] = {"address": str(address), "prefix": entry.prefix, "gateway": entry.gateway,
                                "dnsServers": list(entry.dns_servers)}
    network_data = r.render_network_data(r.normalize_template_spec(template["spec"])["networkData"], addresses, host)
    return network_data, {nic["mac"]: nic["name"] for nic in host["status"]["hardware"]["nics"]}


def seed_machine(domain: tuple[int, int, str], macs: tuple[str, str], mgmt: str, storage: str) -> set[str]:
    """The netplan facts of the seed's bond + two VLANs: eno1 and eno2 bonded, mgmt and storage on VLANs.

    ``domain``: the mgmt VLAN id, the storage VLAN id, the mgmt gateway.
    """
    mgmt_id, storage_id, gateway = domain
    mgmt_vlan, storage_vlan = f"bond0.{mgmt_id}", f"bond0.{storage_id}"
    return {f"ethernet eno1 mac={macs[0]}", f"ethernet eno2 mac={macs[1]}",
            f"{LACP_BOND} lacp-rate=fast mii-monitor-interval=100 transmit-hash-policy=layer3+4",
            f"vlan {mgmt_vlan} id={mgmt_id} link=bond0 mac={macs[0]} mtu=9000",  # the bond's MAC: eno1's
            f"vlan {storage_vlan} id={storage_id} link=bond0 mac={macs[0]}",
            f"{mgmt_vlan} address {mgmt}", f"{mgmt_vlan} route 0.0.0.0/0 via {gateway}",
            f"{storage_vlan} address {storage}"}  # no DNS: the seed's templates ask for none


AZ_A, AZ_B = (11, 12, "192.168.11.1"), (21, 22, "192.168.21.1")

# demo host → the facts of the netplan cloud-init writes on it
DEMO_CASES = [
    ("host-0", seed_machine(AZ_A, ("52:54:00:de:00:01", "52:54:00:de:00:02"), "192.168.11.10/24", "192.168.12.10/24")),
    ("host-1", seed_machine(AZ_A, ("52:54:00:de:01:01", "52:54:00:de:01:02"), "192.168.11.11/24", "192.168.12.11/24")),
    ("host-2", seed_machine(AZ_A, ("52:54:00:de:02:01", "52:54:00:de:02:02"), "192.168.11.12/24", "192.168.12.12/24")),
    ("host-3", seed_machine(AZ_B, ("52:54:00:de:03:01", "52:54:00:de:03:02"), "192.168.21.10/24", "192.168.22.10/24")),
    ("host-4", seed_machine(AZ_B, ("52:54:00:de:04:01", "52:54:00:de:04:02"), "192.168.21.11/24", "192.168.22.11/24")),
    ("host-5", seed_machine(AZ_B, ("52:54:00:de:05:01", "52:54:00:de:05:02"), "192.168.21.12/24", "192.168.22.12/24")),
]


@pytest.mark.parametrize(("host", "expected"), DEMO_CASES)
def test_cloud_init_reads_the_network_data_of_the_demos_machines(host, expected):
    network_data, nics = demo_network_data(host)
    assert read(network_data, nics) == expected


def test_every_demo_host_is_read():
    hosts = [doc["metadata"]["name"] for doc in demo_documents("hosts.yaml") if doc["kind"] == "BareMetalHost"]
    assert [host for host, _facts in DEMO_CASES] == hosts


# -- what upstream renders and cloud-init cannot read: why the renderer differs there -----------------------------

ETH = {"type": "phy", "id": "nic0", "mtu": 1500, "ethernet_mac_address": "52:54:00:00:00:01"}
ETH1 = {"type": "phy", "id": "nic1", "mtu": 1500, "ethernet_mac_address": "52:54:00:00:00:02"}
BOND_LINK = {"type": "bond", "id": "bond1", "mtu": 1500, "bond_mode": "802.3ad", "bond_links": ["nic0", "nic1"]}

# network_data as CAPM3 renders it → the exception cloud-init raises (the renderer refuses the template, or
# renders otherwise: test_network_data_fidelity)
REFUSED = [
    pytest.param({"links": [ETH, {"type": "vlan", "id": "v", "mtu": 1500, "vlan_link": "nic0", "vlan_id": 5}]},
                 KeyError, "vlan_mac_address", id="vlan-without-vlan_mac_address"),
    pytest.param({"links": [{**BOND_LINK, "bond_links": ["nic0", "nic9"]}, ETH]}, KeyError, "nic9",
                 id="bond-member-not-a-link"),
    pytest.param({"links": [ETH, {"type": "vlan", "id": "v", "mtu": 1500, "vlan_link": "nic9", "vlan_id": 5,
                                  "vlan_mac_address": "52:54:00:00:00:01"}]},
                 KeyError, "nic9", id="vlan-link-not-a-link"),
    pytest.param({"links": [{"type": "phy", "id": "nic0", "mtu": 1500}]}, ValueError,
                 "No mac_address or name entry", id="ethernet-without-mac-or-name"),
    pytest.param({"links": [{**ETH, "ethernet_mac_address": "52-54-00-00-00-01"}]}, ValueError,
                 "Unable to find a system nic", id="mac-with-dashes"),
]


@pytest.mark.parametrize(("network_data", "error", "message"), REFUSED)
def test_what_cloud_init_refuses(network_data, error, message):
    with pytest.raises(error, match=message):
        read(network_data, UNIT_MACHINE)


# network_data as CAPM3 renders it → the facts cloud-init writes, which are not what was asked for
MISREAD = [
    pytest.param({"links": [{**BOND_LINK, "bond_xmit_hash_policy": ""}, ETH, ETH1]},
                 {*ENO, "bond bond0 interfaces=eno1,eno2 mode=802.3ad transmit-hash-policy="},
                 id="empty-xmit-hash-policy-is-written-to-netplan"),
    pytest.param({"links": [ETH], "networks": [{"type": "ipv4_dhcp", "id": "n", "link": "eth0", "routes": []}]},
                 {"ethernet eno1 mac=52:54:00:00:00:01"}, id="network-on-no-link-is-dropped"),
    pytest.param({"links": [BOND_LINK, {**BOND_LINK, "id": "bond2", "bond_links": ["nic1"]}, ETH, ETH1]},
                 {*ENO, "bond bond0 interfaces=eno1 mode=802.3ad", "bond bond1 interfaces=eno2 mode=802.3ad"},
                 id="member-of-two-bonds-leaves-the-first"),
]


@pytest.mark.parametrize(("network_data", "expected"), MISREAD)
def test_what_cloud_init_misreads(network_data, expected):
    assert read(network_data, UNIT_MACHINE) == expected
