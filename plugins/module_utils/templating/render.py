# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The metaData and networkData of a Metal3DataTemplate, rendered as CAPM3's metal3data_manager.go does.

metaData becomes cloud-init meta_data (a flat mapping of strings); networkData becomes OpenStack's
network_data.json (``links``, ``networks``, ``services``). Beside upstream's v1beta1 field names the
renderer reads the v1beta2 names of the metaData pool sources and the shorter spelling of the seed
documents (bond ``interfaces``, ``bondMiimon``, ``bondLACPRate``; vlan ``link``; route ``to`` and ``via``),
and renders both spellings alike. Every error is an :class:`Invalid` whose message starts with the path of
the field at fault.

Where upstream renders what cloud-init's converter and netplan renderer cannot read, the renderer differs
(``make test`` feeds every rendering through Debian's cloud-init to keep it so):

- a VLAN without ``macAddress`` gets the MAC of the link it sits on as ``vlan_mac_address`` (upstream leaves
  the key out and cloud-init fails with ``KeyError``);
- an ethernet needs ``macAddress`` or ``name`` (cloud-init fails on one with neither);
- a bond without ``bondXmitHashPolicy`` has no ``bond_xmit_hash_policy`` (upstream writes ``""``, which
  cloud-init carries into netplan as the invalid ``transmit-hash-policy: ''``);
- a MAC address is written with ``:`` (``52-54-...`` matches no NIC in cloud-init nor in netplan);
- a bond member, a VLAN's link and a network's link must name a link of ``networkData.links`` (cloud-init
  fails with ``KeyError`` on the first two and silently drops a network whose link is not there), and a link
  is a member of one bond at most (cloud-init's netplan leaves the earlier bond without it).
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal, NamedTuple, Union, overload

from ansible_collections.metal3.baremetal.plugins.module_utils.core.address import (
    Address,
    parse_dns_servers,
    parse_gateway,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object

Addresses = Mapping[str, Union[Address, dict[str, Any]]]  # noqa: UP007 - a runtime alias
"""Pool name -> the address claimed from it: an :class:`Address`, or its mapping (an ``ip_claim`` result)."""

OBJECTS = ("machine", "metal3machine", "baremetalhost")
LINK_TYPES = ("bridge", "dvs", "hw_veb", "hyperv", "ovs", "tap", "vhostuser", "vif", "phy")
BOND_MODES = ("balance-rr", "active-backup", "balance-xor", "broadcast", "balance-tlb", "balance-alb", "802.3ad")
BOND_XMIT_HASH_POLICIES = ("layer2", "layer3+4", "layer2+3")
# The seed's bond fields that stand for one bond parameter each.
BOND_PARAMETER_FIELDS = {"bondMiimon": "miimon", "bondLACPRate": "lacp_rate", "bondUpdelay": "updelay",
                         "bondDowndelay": "downdelay"}
# Keys a bond parameter may never set: upstream always writes them, so a parameter would override a checked field.
BOND_RESERVED_KEYS = ("bond_mode", "bond_links", "bond_xmit_hash_policy")
MAC_ADDRESS = re.compile(r"([0-9A-Fa-f]{2}[:-]){5}([0-9A-Fa-f]{2})")
LINK_NAME = re.compile(r"[a-zA-Z][a-zA-Z0-9._-]*")
LINK_NAME_MAX = 15  # IFNAMSIZ - 1
MTU_RANGE = (1280, 9000)
VLAN_ID_RANGE = (0, 4096)

# metaData pool sources, v1beta1 and v1beta2 names -> the field of the pool's Address each renders.
META_DATA_POOL_SOURCES = {
    "ipAddressesFromIPPool": "address", "ipAddressesFromPool": "address",
    "prefixesFromIPPool": "prefix", "prefixesFromPool": "prefix",
    "gatewaysFromIPPool": "gateway", "gatewaysFromPool": "gateway",
    "dnsServersFromIPPool": "dns_servers", "dnsServersFromPool": "dns_servers",
}
POOL_ITEM_FIELDS = ("name", "apiGroup", "kind")

# networkData.networks kinds -> (network_data.json type, IP version); ipv4 and ipv6 take an address from a pool.
NETWORK_KINDS = {"ipv4": ("ipv4", 4), "ipv6": ("ipv6", 6), "ipv4DHCP": ("ipv4_dhcp", 4),
                 "ipv6DHCP": ("ipv6_dhcp", 6), "ipv6SLAAC": ("ipv6_slaac", 6)}
STATIC_NETWORKS = ("ipv4", "ipv6")
STATIC_NETWORK_FIELDS = ("id", "link", "routes", "ipAddressFromIPPool", "fromPoolRef", "fromPoolAnnotation")
DYNAMIC_NETWORK_FIELDS = ("id", "link", "routes")
ROUTE_FIELDS = ("network", "prefix", "gateway", "services", "to", "via")
GATEWAY_FIELDS = ("string", "fromIPPool", "fromPoolRef", "fromPoolAnnotation")
SERVICES_FIELDS = ("dns", "dnsFromIPPool")
MAC_ADDRESS_FIELDS = ("string", "fromHostInterface", "fromAnnotation")
ETHERNET_FIELDS = ("type", "id", "mtu", "macAddress", "name")
BOND_FIELDS = ("id", "type", "bondMode", "bondXmitHashPolicy", "bondLinks", "interfaces", "mtu", "macAddress", "name",
               "parameters", *BOND_PARAMETER_FIELDS)
VLAN_FIELDS = ("id", "type", "vlanID", "vlanLink", "link", "mtu", "macAddress", "name")


class PoolRef(NamedTuple):
    """Where a template names a pool: by ``name``, or by an ``annotation`` ({object, annotation}) of an object."""

    path: str
    name: str | None = None
    annotation: dict[str, str] | None = None


# -- public API ---------------------------------------------------------------------------------------------

def normalize_template_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """``{"metaData", "networkData"}`` of a Metal3DataTemplate spec, upstream's or the seed's (under ``template``).

    A part the template does not set is None, not an empty mapping: CAPM3 renders no document for a part that is
    not set (no networkdata Secret, no networkData reference on the Metal3Data nor on the host), and the empty
    document ``{links: [], networks: [], services: []}`` for a ``networkData: {}`` that is.
    """
    spec = _mapping(spec, "spec")
    template = _mapping(spec.get("template"), "spec.template")
    normalized: dict[str, Any] = {}
    for part in ("metaData", "networkData"):
        outer, inner = spec.get(part), template.get(part)
        if outer is not None and inner is not None and outer != inner:
            raise Invalid(f"spec.template.{part}: differs from spec.{part}; set one of them")
        normalized[part] = outer if outer is not None else inner
    return normalized


def referenced_pools(template_spec: dict[str, Any]) -> list[str]:
    """The pools a template names directly, sorted; those named by an annotation need :func:`pool_names`."""
    return sorted({ref.name for ref in _pool_refs(normalize_template_spec(template_spec)) if ref.name is not None})


def pool_names(template_spec: dict[str, Any], objects: dict[str, Object] | None = None) -> list[str]:
    """Every pool a template names, sorted, reading ``fromPoolAnnotation`` from the annotations of ``objects``."""
    objects = objects or {}
    return sorted({_pool_name(ref, objects) for ref in _pool_refs(normalize_template_spec(template_spec))})


@overload
def render_network_data(network_data: None, addresses: Addresses, host: Object | None = None,
                        objects: dict[str, Object] | None = None) -> None: ...


@overload
def render_network_data(network_data: dict[str, Any], addresses: Addresses, host: Object | None = None,
                        objects: dict[str, Object] | None = None) -> dict[str, Any]: ...


def render_network_data(network_data: dict[str, Any] | None, addresses: Addresses, host: Object | None = None,
                        objects: dict[str, Object] | None = None) -> dict[str, Any] | None:
    """OpenStack network_data.json of a template's networkData, with the addresses claimed from its pools.

    A template without networkData (None) renders no document (None), as CAPM3's renderNetworkData: the machine
    then gets no network_data at all and cloud-init falls back to its default network. An empty networkData
    (``{}``) renders the empty document ``{links: [], networks: [], services: []}``, as upstream's does.
    """
    if network_data is not None:
        network_data = _fields(network_data, "networkData", ("links", "networks", "services"))
    objects = _objects(objects)
    if host is None:
        host = objects.get("baremetalhost")
    elif objects.get("baremetalhost") is None:
        objects["baremetalhost"] = _object_mapping(host, "host")
    addresses = _mapping(addresses, "addresses")
    if network_data is None:  # the arguments are checked all the same
        return None
    references: list[tuple[str, str]] = []  # (field, the link id it names), checked once every link is known
    rendered = {
        "links": _links(network_data.get("links"), host, objects, references),
        "networks": _networks(network_data.get("networks"), addresses, objects, references),
        "services": _dns_services(network_data.get("services"), "networkData.services", addresses, objects),
    }
    ids = {link["id"] for link in rendered["links"]}
    for field, link_id in references:
        if link_id not in ids:  # cloud-init: KeyError on a bond member or VLAN link; a network is dropped
            raise Invalid(f"{field}: there is no link '{link_id}' in networkData.links")
    return rendered


def render_meta_data(meta_data: dict[str, Any], index: int, objects: dict[str, Object], addresses: Addresses,
                     namespace: str) -> dict[str, str]:
    """cloud-init meta_data of a template's metaData for the Metal3Data of ``index`` in ``namespace``."""
    objects = _objects(objects)
    addresses = _mapping(addresses, "addresses")
    index = _integer(index, "index", 0)
    if not isinstance(namespace, str) or not namespace:
        raise Invalid(f"namespace: must be a non-empty string, not {namespace!r}")

    def from_host_interface(item: dict[str, Any], path: str) -> str:
        host = objects.get("baremetalhost")
        if item.get("fromBootMAC"):
            if item.get("interface"):
                raise Invalid(f"{path}.interface: must be empty when fromBootMAC is true")
            return _boot_mac(host, f"{path}.fromBootMAC")
        return _nic_mac(host, _string(item, "interface", path), f"{path}.interface")

    def from_pool(field: str) -> Callable[[dict[str, Any], str], str]:
        def render(item: dict[str, Any], path: str) -> str:
            name = _string(item, "name", path)
            if field == "dns_servers":  # upstream never renders these (CAPM3#3363)
                return ",".join(_pool_dns_servers(addresses, name, path))
            if field == "gateway":
                return _pool_gateway(addresses, name, path) or ""
            pool = _pool(addresses, name, path)
            if field == "prefix":
                return str(_pool_prefix(pool, name, path, 128))
            return str(getattr(pool, field) or "")
        return render

    def from_index(item: dict[str, Any], path: str) -> str:
        offset = _integer(item.get("offset", 0), f"{path}.offset")
        step = _integer(item.get("step"), f"{path}.step") if item.get("step") is not None else 1
        # upstream reads step 0 as the default 1
        value = offset + index * (step or 1)
        return f"{_string(item, 'prefix', path, required=False) or ''}{value}" \
               f"{_string(item, 'suffix', path, required=False) or ''}"

    def object_name(item: dict[str, Any], path: str) -> str:
        return str(_metadata(objects, item.get("object"), f"{path}.object", "name") or "")

    def from_label(item: dict[str, Any], path: str) -> str:
        labels = _mapping(_metadata(objects, item.get("object"), f"{path}.object", "labels"), f"{path}.object")
        return str(labels.get(_string(item, "label", path), ""))

    def from_annotation(item: dict[str, Any], path: str) -> str:
        annotations = _mapping(_metadata(objects, item.get("object"), f"{path}.object", "annotations"),
                               f"{path}.object")
        return str(annotations.get(_string(item, "annotation", path), ""))

    def literal(item: dict[str, Any], path: str) -> str:
        value = item.get("value")
        if not isinstance(value, str):
            raise Invalid(f"{path}.value: must be a string")
        return value

    # upstream's order; strings come last so they override any other source of the same key
    sources: list[tuple[str, tuple[str, ...], Callable[[dict[str, Any], str], str]]] = [
        ("fromHostInterfaces", ("interface", "fromBootMAC"), from_host_interface),
        *((source, POOL_ITEM_FIELDS, from_pool(field)) for source, field in META_DATA_POOL_SOURCES.items()),
        ("indexes", ("offset", "step", "prefix", "suffix"), from_index),
        ("namespaces", (), lambda _item, _path: str(namespace)),
        ("objectNames", ("object",), object_name),
        ("fromLabels", ("object", "label"), from_label),
        ("fromAnnotations", ("object", "annotation"), from_annotation),
        ("strings", ("value",), literal),
    ]
    meta_data = _fields(meta_data, "metaData", [source for source, _fields_, _render in sources])
    rendered: dict[str, str] = {}
    for source, fields, render in sources:
        for path, item in _items(meta_data.get(source), f"metaData.{source}"):
            entry = _fields(item, path, ("key", *fields))
            rendered[_string(entry, "key", path)] = render(entry, path)
    if objects.get("metal3machine") and objects.get("baremetalhost"):
        rendered["providerid"] = (f"{namespace}/{_metadata(objects, 'baremetalhost', 'objects', 'name')}/"
                                  f"{_metadata(objects, 'metal3machine', 'objects', 'name')}")
    return rendered


# -- pools --------------------------------------------------------------------------------------------------

def _pool_refs(spec: dict[str, Any]) -> Iterator[PoolRef]:
    """Every place the metaData and networkData of a normalized spec name a pool, in upstream's precedence."""
    meta_data = _mapping(spec.get("metaData"), "metaData")
    for source in META_DATA_POOL_SOURCES:
        for path, item in _items(meta_data.get(source), f"metaData.{source}"):
            yield PoolRef(path, _string(_mapping(item, path), "name", path))
    network_data = _mapping(spec.get("networkData"), "networkData")
    networks = _mapping(network_data.get("networks"), "networkData.networks")
    for kind in NETWORK_KINDS:
        for path, item in _items(networks.get(kind), f"networkData.networks.{kind}"):
            network = _mapping(item, path)
            if kind in STATIC_NETWORKS:
                yield _network_pool(network, path)
            for route_path, route_item in _items(network.get("routes"), f"{path}.routes"):
                route = _mapping(route_item, route_path)
                gateway = _gateway(route, route_path)
                if isinstance(gateway, PoolRef):
                    yield gateway
                dns = _dns_pool(route.get("services"), f"{route_path}.services")
                if dns is not None:
                    yield dns
    dns = _dns_pool(network_data.get("services"), "networkData.services")
    if dns is not None:
        yield dns


def _network_pool(network: dict[str, Any], path: str) -> PoolRef:
    """The pool of a static network: fromPoolAnnotation, else fromPoolRef, else ipAddressFromIPPool."""
    if network.get("fromPoolAnnotation") is not None:
        field = f"{path}.fromPoolAnnotation"
        return PoolRef(field, annotation=_annotation_ref(network["fromPoolAnnotation"], field))
    if network.get("fromPoolRef") is not None:
        return PoolRef(f"{path}.fromPoolRef", _pool_ref_name(network["fromPoolRef"], f"{path}.fromPoolRef"))
    if network.get("ipAddressFromIPPool") is not None:
        return PoolRef(f"{path}.ipAddressFromIPPool", _string(network, "ipAddressFromIPPool", path))
    raise Invalid(f"{path}.ipAddressFromIPPool: required (or fromPoolRef, or fromPoolAnnotation)")


def _gateway(route: dict[str, Any], path: str) -> str | PoolRef:
    """A route's gateway, literal or the gateway of a pool: string, else fromPoolAnnotation, fromPoolRef, fromIPPool."""
    if _aliased(route, path, "gateway", "via") == "via":
        return _string(route, "via", path)
    field = f"{path}.gateway"
    gateway = _fields(route.get("gateway"), field, GATEWAY_FIELDS)
    if gateway.get("string") is not None:
        return _string(gateway, "string", field)
    if gateway.get("fromPoolAnnotation") is not None:
        return PoolRef(f"{field}.fromPoolAnnotation",
                       annotation=_annotation_ref(gateway["fromPoolAnnotation"], f"{field}.fromPoolAnnotation"))
    if gateway.get("fromPoolRef") is not None:
        return PoolRef(f"{field}.fromPoolRef", _pool_ref_name(gateway["fromPoolRef"], f"{field}.fromPoolRef"))
    if gateway.get("fromIPPool") is not None:
        return PoolRef(f"{field}.fromIPPool", _string(gateway, "fromIPPool", field))
    raise Invalid(f"{field}: required, one of string, fromIPPool, fromPoolRef, fromPoolAnnotation")


def _dns_pool(services: Any, path: str) -> PoolRef | None:
    services = _mapping(services, path)
    if services.get("dnsFromIPPool") is None:
        return None
    return PoolRef(f"{path}.dnsFromIPPool", _string(services, "dnsFromIPPool", path))


def _annotation_ref(value: Any, path: str) -> dict[str, str]:
    ref = _fields(value, path, ("object", "annotation"))
    return {"object": _object_kind(ref.get("object"), f"{path}.object"),
            "annotation": _string(ref, "annotation", path)}


def _pool_ref_name(value: Any, path: str) -> str:
    # apiGroup and kind pick the IPAM provider; the pool is known by its name alone
    return _string(_fields(value, path, POOL_ITEM_FIELDS), "name", path)


def _pool_name(ref: PoolRef, objects: dict[str, Object]) -> str:
    if ref.name is not None:
        return ref.name
    return _annotation_value(objects, ref.annotation or {}, ref.path)


def _pool(addresses: Addresses, name: str, path: str) -> Address:
    pool = addresses.get(name)
    if not isinstance(pool, Address) and not _mapping(pool, f"addresses[{name}]").get("address"):
        raise Invalid(f"{path}: no address from pool '{name}'")
    return Address.parse(pool, f"addresses[{name}]")


def _pool_dns_servers(addresses: Addresses, name: str, path: str) -> tuple[str, ...]:
    return tuple(_pool_gave(addresses, name, path, "DNS servers") or ())


def _pool_gateway(addresses: Addresses, name: str, path: str) -> str | None:
    gateway = _pool_gave(addresses, name, path, "gateway")
    return str(gateway) if gateway else None


def _pool_gave(addresses: Addresses, name: str, path: str, part: str) -> Any:
    """The DNS servers or the gateway a pool gave. CAPM3's renderers of network services, routes and metaData
    read only that part of what the pool gave, never its address: a pool that gave it but no address (a record
    without one, handed to the filters) renders it. A pool that gave neither an address nor that part - or no
    record at all - is an error naming the field."""
    pool = addresses.get(name)
    where = f"addresses[{name}]"
    record = pool if isinstance(pool, Address) else _mapping(pool, where)
    if isinstance(record, Address) or record.get("address"):
        address = Address.parse(record, where)
        return address.dns_servers if part == "DNS servers" else address.gateway
    given = parse_dns_servers(record, where) if part == "DNS servers" else parse_gateway(record, where)
    if not given:
        raise Invalid(f"{path}: no address nor {part} from pool '{name}'")
    return given


def _pool_prefix(pool: Address, name: str, path: str, bits: int) -> int:
    prefix = pool.prefix
    try:
        return _integer(prefix, path, 0, bits)
    except Invalid:
        raise Invalid(f"{path}: pool '{name}' gave the bad prefix {prefix!r}") from None


def _pool_address(pool: Address, name: str, path: str, version: int) -> str:
    address = pool.address
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        parsed = None
    if parsed is None or parsed.version != version:
        raise Invalid(f"{path}: pool '{name}' gave {address!r}, not an IPv{version} address")
    return address


# -- networkData --------------------------------------------------------------------------------------------

def _links(value: Any, host: Object | None, objects: dict[str, Object],
           references: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """The links in upstream's order (renderNetworkLinks): bonds, then ethernets, then vlans.

    cloud-init resolves ``bond_links`` and ``vlan_link`` after reading every link, so the order is not a
    dependency order. A VLAN given without ``macAddress`` takes the MAC of the link it sits on (see
    :func:`_vlan_mac`), because cloud-init's converter requires ``vlan_mac_address``. Every bond member and
    VLAN link is added to ``references``.
    """
    links = _fields(value, "networkData.links", ("ethernets", "bonds", "vlans"))
    ethernets = [_ethernet(_fields(item, path, ETHERNET_FIELDS), path, host, objects)
                 for path, item in _items(links.get("ethernets"), "networkData.links.ethernets")]
    bonds = []
    bond_of: dict[str, str] = {}  # member -> its bond: a NIC is enslaved to one bond at most
    for path, item in _items(links.get("bonds"), "networkData.links.bonds"):
        entry = _bond(_fields(item, path, BOND_FIELDS), path, host, objects)
        field = f"{path}.{_aliased(item, path, 'bondLinks', 'interfaces')}"
        for i, member in enumerate(entry["bond_links"]):
            if member in bond_of:  # cloud-init's netplan renders the earlier bond without it
                raise Invalid(f"{field}[{i}]: '{member}' is already a member of the bond '{bond_of[member]}'")
            bond_of[member] = entry["id"]
            references.append((f"{field}[{i}]", member))
        bonds.append(entry)
    # link id -> its MAC address (None when given by name only), for the VLANs that name no MAC of their own
    macs: dict[str, str | None] = {}
    for entry in ethernets:
        macs.setdefault(entry["id"], entry.get("ethernet_mac_address"))
    for entry in bonds:  # its own MAC, else the MAC of its first member, as the kernel gives it
        macs.setdefault(entry["id"], entry.get("ethernet_mac_address") or macs.get(entry["bond_links"][0]))
    vlans = []
    for path, item in _items(links.get("vlans"), "networkData.links.vlans"):
        link = _fields(item, path, VLAN_FIELDS)
        _fixed_type(link, path, "vlan")
        link_field = _aliased(link, path, "vlanLink", "link")
        entry = {"type": "vlan", "id": _string(link, "id", path), "mtu": _mtu(link, path),
                 "vlan_link": _string(link, link_field, path),
                 "vlan_id": _integer(link.get("vlanID"), f"{path}.vlanID", *VLAN_ID_RANGE)}
        references.append((f"{path}.{link_field}", entry["vlan_link"]))
        _named(entry, link, path)
        if link.get("macAddress") is not None:
            entry["vlan_mac_address"] = _mac_address(link["macAddress"], f"{path}.macAddress", host, objects)
        else:
            entry["vlan_mac_address"] = _vlan_mac(entry["vlan_link"], macs, f"{path}.macAddress")
        macs.setdefault(entry["id"], entry["vlan_mac_address"])
        vlans.append(entry)
    return [*bonds, *ethernets, *vlans]


def _ethernet(link: dict[str, Any], path: str, host: Object | None, objects: dict[str, Object]) -> dict[str, Any]:
    entry = {"type": _choice(link, "type", path, LINK_TYPES), "id": _string(link, "id", path),
             "mtu": _mtu(link, path)}
    _named(entry, link, path)
    if link.get("macAddress") is not None:
        entry["ethernet_mac_address"] = _mac_address(link["macAddress"], f"{path}.macAddress", host, objects)
    elif "name" not in entry:  # cloud-init: "No mac_address or name entry"
        raise Invalid(f"{path}.macAddress: required unless name is set (cloud-init finds an ethernet by its MAC "
                      f"address or by its kernel name)")
    return entry


def _vlan_mac(vlan_link: str, macs: dict[str, str | None], path: str) -> str:
    """The MAC of the link a VLAN sits on, for a VLAN given without ``macAddress``."""
    if vlan_link not in macs:
        raise Invalid(f"{path}: required: there is no link '{vlan_link}' in networkData.links to take the MAC "
                      f"address from")
    mac = macs[vlan_link]
    if mac is None:
        raise Invalid(f"{path}: required: the link '{vlan_link}' has no MAC address to take (an ethernet given "
                      f"by name only, or a bond without macAddress whose first member has none)")
    return mac


def _bond(link: dict[str, Any], path: str, host: Object | None, objects: dict[str, Object]) -> dict[str, Any]:
    _fixed_type(link, path, "bond")
    entry: dict[str, Any] = {"type": "bond", "id": _string(link, "id", path), "mtu": _mtu(link, path),
                             "bond_mode": _choice(link, "bondMode", path, BOND_MODES),
                             "bond_links": _bond_links(link, path)}
    # upstream writes an empty policy when none is set, which cloud-init carries into netplan as the invalid
    # `transmit-hash-policy: ''`: the key is written only when set (a parameter still may not set it)
    if link.get("bondXmitHashPolicy") not in (None, ""):
        entry["bond_xmit_hash_policy"] = _choice(link, "bondXmitHashPolicy", path, BOND_XMIT_HASH_POLICIES)
    if link.get("macAddress") is not None:
        entry["ethernet_mac_address"] = _mac_address(link["macAddress"], f"{path}.macAddress", host, objects)
    _named(entry, link, path)
    for parameter_path, name, value in _bond_parameters(link, path):
        key = f"bond_{name}"
        if key in entry or key in BOND_RESERVED_KEYS:  # upstream: "illegal params"
            raise Invalid(f"{parameter_path}: illegal params: {key} is already set")
        entry[key] = value
    return entry


def _bond_links(link: dict[str, Any], path: str) -> list[str]:
    field = _aliased(link, path, "bondLinks", "interfaces")
    links = link.get(field)
    if links is None:
        raise Invalid(f"{path}.{field}: required")
    if not isinstance(links, list) or not links or not all(isinstance(i, str) and i for i in links):
        raise Invalid(f"{path}.{field}: must be a non-empty list of link ids")
    return list(links)


def _bond_parameters(link: dict[str, Any], path: str) -> list[tuple[str, str, Any]]:
    """(path, name, value) of every bond parameter: the seed's bond fields, then ``parameters``."""
    parameters = [(f"{path}.{field}", name, link[field])
                  for field, name in BOND_PARAMETER_FIELDS.items() if link.get(field) is not None]
    if isinstance(link.get("parameters"), dict):  # v1beta1 writes them as a mapping
        for name, value in link["parameters"].items():
            if not isinstance(name, str) or not name:
                raise Invalid(f"{path}.parameters: parameter names must be strings")
            parameters.append((f"{path}.parameters.{name}", name, value))
        return parameters
    for item_path, item in _items(link.get("parameters"), f"{path}.parameters"):
        parameter = _fields(item, item_path, ("name", "value"))
        if parameter.get("value") is None:
            raise Invalid(f"{item_path}.value: required")
        parameters.append((f"{item_path}.name", _string(parameter, "name", item_path), parameter["value"]))
    return parameters


def _mac_address(value: Any, path: str, host: Object | None, objects: dict[str, Object]) -> str:
    if value is None:
        raise Invalid(f"{path}: required")
    mac = _fields(value, path, MAC_ADDRESS_FIELDS)
    given = [field for field in MAC_ADDRESS_FIELDS if mac.get(field) is not None]
    if len(given) != 1:
        raise Invalid(f"{path}: needs exactly one of {', '.join(MAC_ADDRESS_FIELDS)}")
    field = f"{path}.{given[0]}"
    if given[0] == "string":
        address = _string(mac, "string", path)
    elif given[0] == "fromHostInterface":
        address = _nic_mac(host, _string(mac, "fromHostInterface", path), field)
    else:
        address = _annotation_value(objects, _annotation_ref(mac["fromAnnotation"], field), field)
    if not MAC_ADDRESS.fullmatch(address):
        raise Invalid(f"{path}: {address!r} is not a MAC address")
    return address.replace("-", ":")  # cloud-init and netplan match NICs by the colon form only


def _named(entry: dict[str, Any], link: dict[str, Any], path: str) -> dict[str, Any]:
    name = _string(link, "name", path, required=False)
    if name is not None:
        if len(name) > LINK_NAME_MAX or not LINK_NAME.fullmatch(name):
            raise Invalid(f"{path}.name: {name!r} is not an interface name (a letter, then letters, digits, "
                          f"'.', '_' or '-', at most {LINK_NAME_MAX} characters)")
        entry["name"] = name
    return entry


def _fixed_type(link: dict[str, Any], path: str, kind: str) -> None:
    if link.get("type") is not None and link["type"] != kind:
        raise Invalid(f"{path}.type: must be '{kind}' if set")


def _mtu(link: dict[str, Any], path: str) -> int:
    return _integer(link["mtu"], f"{path}.mtu", *MTU_RANGE) if link.get("mtu") is not None else 1500


def _networks(value: Any, addresses: Addresses, objects: dict[str, Object],
              references: list[tuple[str, str]]) -> list[dict[str, Any]]:
    networks = _fields(value, "networkData.networks", NETWORK_KINDS)
    rendered: list[dict[str, Any]] = []
    for kind, (network_type, version) in NETWORK_KINDS.items():
        for path, item in _items(networks.get(kind), f"networkData.networks.{kind}"):
            network = _fields(item, path, STATIC_NETWORK_FIELDS if kind in STATIC_NETWORKS else DYNAMIC_NETWORK_FIELDS)
            entry: dict[str, Any] = {"type": network_type, "id": _string(network, "id", path),
                                     "link": _string(network, "link", path)}
            references.append((f"{path}.link", entry["link"]))
            if kind in STATIC_NETWORKS:
                ref = _network_pool(network, path)
                name = _pool_name(ref, objects)
                pool = _pool(addresses, name, ref.path)
                entry["ip_address"] = _pool_address(pool, name, ref.path, version)
                entry["netmask"] = _netmask(_pool_prefix(pool, name, ref.path, 32 if version == 4 else 128), version)
            entry["routes"] = _routes(network.get("routes"), f"{path}.routes", version, addresses, objects)
            rendered.append(entry)
    return rendered


def _routes(value: Any, path: str, version: int, addresses: Addresses,
            objects: dict[str, Object]) -> list[dict[str, Any]]:
    rendered = []
    for route_path, item in _items(value, path):
        route = _fields(item, route_path, ROUTE_FIELDS)
        network, prefix = _destination(route, route_path, version)
        given = _gateway(route, route_path)
        if isinstance(given, PoolRef):
            name = _pool_name(given, objects)
            gateway_path = given.path
            gateway = _pool_gateway(addresses, name, gateway_path)
            if not gateway:
                raise Invalid(f"{gateway_path}: pool '{name}' has no gateway")
        else:
            gateway, gateway_path = given, f"{route_path}.{_aliased(route, route_path, 'gateway', 'via')}"
        _ip(gateway, gateway_path, version)
        # upstream writes services on every route, an empty list when the route has none
        rendered.append({"network": network, "netmask": _netmask(prefix, version), "gateway": gateway,
                         "services": _dns_services(route.get("services"), f"{route_path}.services", addresses,
                                                   objects)})
    return rendered


def _destination(route: dict[str, Any], path: str, version: int) -> tuple[str, int]:
    """(network, prefix) of a route, from network and prefix, or from the seed's CIDR ``to``."""
    bits = 32 if version == 4 else 128
    if route.get("to") is None:
        network = _string(route, "network", path)
        _ip(network, f"{path}.network", version)
        return network, _integer(route.get("prefix", 0), f"{path}.prefix", 0, bits)
    if route.get("network") is not None or route.get("prefix") is not None:
        raise Invalid(f"{path}.to: set beside network and prefix; set one of them")
    to = _string(route, "to", path)
    try:
        cidr = ipaddress.ip_interface(to) if "/" in to else None
    except ValueError:
        cidr = None
    if cidr is None:
        raise Invalid(f"{path}.to: {to!r} is not a network in CIDR form")
    if cidr.version != version:
        raise Invalid(f"{path}.to: {to!r} is not an IPv{version} network")
    return str(cidr.ip), cidr.network.prefixlen


def _dns_services(value: Any, path: str, addresses: Addresses, objects: dict[str, Object]) -> list[dict[str, str]]:
    services = _fields(value, path, SERVICES_FIELDS)
    rendered = []
    for item_path, server in _items(services.get("dns"), f"{path}.dns"):
        rendered.append({"type": "dns", "address": _ip(server, item_path)})
    ref = _dns_pool(services, path)
    if ref is not None:
        name = _pool_name(ref, objects)
        rendered.extend({"type": "dns", "address": server} for server in _pool_dns_servers(addresses, name, ref.path))
    return rendered


def _netmask(prefix: int, version: int) -> str:
    return ipaddress.ip_network(f"{'0.0.0.0' if version == 4 else '::'}/{prefix}").netmask.compressed


# -- objects and the host -----------------------------------------------------------------------------------

def _object_kind(value: Any, path: str) -> str:
    # upstream compares object kinds case-insensitively
    if not isinstance(value, str) or value.lower() not in OBJECTS:
        raise Invalid(f"{path}: must be one of {', '.join(OBJECTS)}, not {value!r}")
    return value.lower()


def _objects(objects: Any) -> dict[str, Object]:
    """The objects sources read from, each a mapping with mapping metadata (checked here, read later)."""
    checked: dict[str, Object] = dict(_mapping(objects, "objects"))
    for kind in OBJECTS:
        if checked.get(kind) is not None:
            checked[kind] = _object_mapping(checked[kind], f"objects.{kind}")
    return checked


def _object_mapping(obj: Any, path: str) -> Object:
    mapping = _mapping(obj, path)
    metadata = _mapping(mapping.get("metadata"), f"{path}.metadata")
    for field in ("labels", "annotations"):
        _mapping(metadata.get(field), f"{path}.metadata.{field}")
    return mapping


def _object(objects: dict[str, Object], kind: Any, path: str) -> Object:
    kind = _object_kind(kind, path)
    obj = objects.get(kind)
    if not isinstance(obj, dict):
        raise Invalid(f"{path}: no {kind} to read from")
    return obj


def _metadata(objects: dict[str, Object], kind: Any, path: str, field: str) -> Any:
    """A metadata field of the object of ``kind`` (checked by _objects)."""
    return (_object(objects, kind, path).get("metadata") or {}).get(field)


def _annotation_value(objects: dict[str, Object], ref: dict[str, str], path: str) -> str:
    value = (_metadata(objects, ref["object"], f"{path}.object", "annotations") or {}).get(ref["annotation"])
    if not value:
        raise Invalid(f"{path}: the {ref['object']} has no annotation '{ref['annotation']}'")
    return str(value)


def _nic_mac(host: Object | None, nic: str, path: str) -> str:
    status = _mapping(_mapping(host, "host").get("status"), "host.status")
    nics = _mapping(status.get("hardware"), "host.status.hardware").get("nics") or []
    if not isinstance(nics, list):
        raise Invalid("host.status.hardware.nics: must be a list")
    for entry in nics:
        if isinstance(entry, dict) and entry.get("name") == nic and entry.get("mac"):
            return str(entry["mac"])
    raise Invalid(f"{path}: the host has no interface '{nic}'")


def _boot_mac(host: Object | None, path: str) -> str:
    mac = _mapping(_mapping(host, "host").get("spec"), "host.spec").get("bootMACAddress")
    if not mac:
        raise Invalid(f"{path}: the host has no bootMACAddress")
    return str(mac)


# -- shapes -------------------------------------------------------------------------------------------------

def _mapping(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Invalid(f"{path}: must be a mapping")
    return value


def _fields(value: Any, path: str, known: Iterable[str]) -> dict[str, Any]:
    """``value`` as a mapping of known fields only."""
    mapping = _mapping(value, path)
    known = set(known)
    for field in mapping:
        if field not in known:
            raise Invalid(f"{path}.{field}: unknown field")
    return mapping


def _items(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if value is None:
        return
    if not isinstance(value, list):
        raise Invalid(f"{path}: must be a list")
    for i, item in enumerate(value):
        yield f"{path}[{i}]", item


def _aliased(mapping: dict[str, Any], path: str, field: str, alias: str) -> str:
    """Which of upstream's ``field`` and the seed's ``alias`` a mapping sets; never both."""
    if mapping.get(alias) is None:
        return field
    if mapping.get(field) is not None:
        raise Invalid(f"{path}.{alias}: set beside {field}; set one of them")
    return alias


@overload
def _string(mapping: dict[str, Any], field: str, path: str, required: Literal[True] = True) -> str: ...


@overload
def _string(mapping: dict[str, Any], field: str, path: str, required: bool) -> str | None: ...


def _string(mapping: dict[str, Any], field: str, path: str, required: bool = True) -> str | None:
    """``mapping[field]`` as a non-empty string; None when unset and not ``required``."""
    value = mapping.get(field)
    if value is None or value == "":
        if required:
            raise Invalid(f"{path}.{field}: required")
        return None
    if not isinstance(value, str):
        raise Invalid(f"{path}.{field}: must be a string")
    return value


def _choice(mapping: dict[str, Any], field: str, path: str, choices: tuple[str, ...]) -> str:
    value = _string(mapping, field, path)
    if value not in choices:
        raise Invalid(f"{path}.{field}: must be one of {', '.join(choices)}, not {value!r}")
    return value


def _integer(value: Any, path: str, low: int | None = None, high: int | None = None) -> int:
    if value is None:
        raise Invalid(f"{path}: required")
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value.strip()):  # Jinja hands numbers over as text
        number = int(value)
    else:
        raise Invalid(f"{path}: must be an integer")
    if (low is not None and number < low) or (high is not None and number > high):
        bounds = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise Invalid(f"{path}: must be an integer {bounds}, not {number}")
    return number


def _ip(value: Any, path: str, version: int | None = None) -> str:
    try:
        parsed = ipaddress.ip_address(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None or (version is not None and parsed.version != version):
        raise Invalid(f"{path}: {value!r} is not an IPv{version or '4 or IPv6'} address")
    return str(value)
