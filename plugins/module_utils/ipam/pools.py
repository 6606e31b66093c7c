# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""IPPool address ranges: parsing, validation (upstream's webhook rules) and offsets.

A pool's entries form one offset space: entry 0's addresses, then entry 1's, ...
Allocation works on offsets (see allocation.py); this module turns them into
addresses and back.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Union

from ansible_collections.metal3.baremetal.plugins.module_utils.api.kinds import lookup
from ansible_collections.metal3.baremetal.plugins.module_utils.api.validation import validate
from ansible_collections.metal3.baremetal.plugins.module_utils.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.store.objects import DNS_SUBDOMAIN, SUBDOMAIN_RULE

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]  # noqa: UP007 - a runtime alias
Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]  # noqa: UP007 - a runtime alias
POOL_API = "ipam.metal3.io/v1alpha1"
# The longest address of each family, spelt as in an IPAddress name: the longest name a namePrefix makes.
LONGEST_ADDRESS = {4: "255.255.255.255", 6: "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}
# Allocation looks at most this many addresses of a pool (a /64 holds 2**64): the first 2**24.
MAX_OFFSETS = 1 << 24


@dataclass(frozen=True)
class Range:
    """One pool entry, resolved: its usable addresses and the network settings of an address in it."""

    index: int
    first: int
    last: int
    version: int
    prefix: int
    gateway: str | None
    dns_servers: tuple[str, ...]

    @property
    def size(self) -> int:
        return self.last - self.first + 1

    def contains(self, address: IPAddress) -> bool:
        return address.version == self.version and self.first <= int(address) <= self.last


@dataclass(frozen=True)
class Pool:
    """A parsed IPPool spec: its ranges in order, and its reserved addresses."""

    name: str
    name_prefix: str
    strategy: str
    ranges: tuple[Range, ...]
    pre_allocations: dict[str, str]

    @property
    def size(self) -> int:
        return min(sum(r.size for r in self.ranges), MAX_OFFSETS)

    def address_at(self, offset: int) -> tuple[IPAddress, Range]:
        for entry in self.ranges:
            if offset < entry.size:
                return ipaddress.ip_address(entry.first + offset), entry
            offset -= entry.size
        raise IndexError(offset)

    def offset_of(self, address: str | IPAddress) -> int | None:
        """The offset of an address in the pool, or None when no entry holds it."""
        ip = ipaddress.ip_address(address) if isinstance(address, str) else address
        base = 0
        for entry in self.ranges:
            if entry.contains(ip):
                offset = base + int(ip) - entry.first
                return offset if offset < MAX_OFFSETS else None
            base += entry.size
        return None

    def entry_of(self, address: str | IPAddress) -> Range | None:
        ip = ipaddress.ip_address(address) if isinstance(address, str) else address
        return next((entry for entry in self.ranges if entry.contains(ip)), None)

    def reserved_offsets(self) -> Iterator[int]:
        """Offsets never handed out to a claim that did not ask for them: gateways and preAllocations."""
        for entry in self.ranges:
            if entry.gateway:
                offset = self.offset_of(entry.gateway)
                if offset is not None:
                    yield offset
        for address in self.pre_allocations.values():
            offset = self.offset_of(address)
            if offset is not None:
                yield offset

    def address_name(self, address: str) -> str:
        return address_name(self.name_prefix, address)


def address_name(name_prefix: str, address: str) -> str:
    """`<namePrefix>-<address with '.' and ':' replaced by '-'>`, upstream's IPAddress name.

    An IPv6 address that ends in '::' is spelt '::0' (the same address), since an object name cannot
    end with '-'; upstream's name for it is not a valid name at all.
    """
    spelt = f"{address}0" if address.endswith("::") else address
    return f"{name_prefix}-{spelt.replace('.', '-').replace(':', '-')}"


def parse_ip(value: Any, field: str) -> IPAddress:
    """``value`` as an IP address; Invalid naming ``field`` when it is none."""
    try:
        return ipaddress.ip_address(str(value))
    except ValueError:
        raise Invalid(f"{field}: Invalid value: {value!r}: not an IP address") from None


def _network(value: Any, field: str) -> Network:
    try:
        return ipaddress.ip_network(str(value), strict=False)
    except ValueError:
        raise Invalid(f"{field}: Invalid value: {value!r}: not a CIDR") from None


def _subnet_range(network: Network) -> tuple[int, int]:
    """Usable addresses of a subnet-only entry.

    As upstream: the network address is skipped, and for IPv4 the broadcast address too. Point-to-point
    and host subnets are whole: /31 and /127 give both addresses (RFC 3021, RFC 6164), /32 and /128 the one.
    """
    first, last = int(network.network_address), int(network.broadcast_address)
    host_bits = network.max_prefixlen - network.prefixlen
    if host_bits <= 1:
        return first, last
    return first + 1, (last - 1 if network.version == 4 else last)


def parse_pool(obj: dict[str, Any]) -> Pool:
    """Parse and validate an IPPool; Invalid names the first bad field, in kube-apiserver's words."""
    _check_schema(obj)
    name = (obj.get("metadata") or {}).get("name", "")
    spec = obj.get("spec") or {}
    try:
        return _parse(name, spec)
    except Invalid as e:
        raise Invalid(f'IPPool.ipam.metal3.io "{name}" is invalid: {e}') from None


def _check_schema(obj: dict[str, Any]) -> None:
    """The CRD schema's checks on the spec, before any code here reads it: a definition reaches parse_pool
    (through admission) before the store validates it, and a wrong type must be a field error, not a crash."""
    api_version = obj.get("apiVersion")
    if not isinstance(api_version, str) or not api_version:
        api_version = POOL_API
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    checked: dict[str, Any] = {"apiVersion": api_version, "kind": "IPPool", "metadata": {"name": metadata.get("name")}}
    if obj.get("spec") is not None:
        checked["spec"] = obj["spec"]
    validate(lookup(api_version, "IPPool"), checked)


def _parse(name: str, spec: dict[str, Any]) -> Pool:
    if not spec.get("namePrefix"):
        raise Invalid("spec.namePrefix: Required value")
    ranges = [_entry(i, entry, spec) for i, entry in enumerate(spec.get("pools") or [])]
    _check_overlaps(ranges)
    _check_name_prefix(spec["namePrefix"], {r.version for r in ranges} or {4})
    pool = Pool(name, spec["namePrefix"], spec.get("allocationStrategy") or "sequential", tuple(ranges),
                dict(spec.get("preAllocations") or {}))
    for claim, address in pool.pre_allocations.items():
        ip = parse_ip(address, f"spec.preAllocations[{claim}]")
        if pool.entry_of(ip) is None:
            raise Invalid(f"spec.preAllocations[{claim}]: Invalid value: {address!r}: outside every pool entry")
    return pool


def _entry(i: int, entry: dict[str, Any], spec: dict[str, Any]) -> Range:
    """Pool entry ``i``, with the pool's prefix, gateway and dnsServers where it sets none of its own."""
    where = f"spec.pools[{i}]"
    subnet = _network(entry["subnet"], f"{where}.subnet") if entry.get("subnet") else None
    start = parse_ip(entry["start"], f"{where}.start") if entry.get("start") else None
    end = parse_ip(entry["end"], f"{where}.end") if entry.get("end") else None
    versions = {v.version for v in (subnet, start, end) if v is not None}
    if not versions:
        raise Invalid(f"{where}: Required value: start and end, or subnet")
    if len(versions) > 1:
        raise Invalid(f"{where}: Invalid value: start, end and subnet mix IPv4 and IPv6")
    version = versions.pop()
    first, last = _bounds(where, version, subnet, start, end)
    prefix, prefix_field = entry.get("prefix"), f"{where}.prefix"
    if prefix is None:
        prefix, prefix_field = spec.get("prefix"), "spec.prefix"
    if prefix is None:
        if subnet is None:
            raise Invalid(f"{where}.prefix: Required value: set prefix on the entry or the pool, or a subnet")
        prefix, prefix_field = subnet.prefixlen, f"{where}.subnet"
    if not 0 <= prefix <= (32 if version == 4 else 128):
        raise Invalid(f"{prefix_field}: Invalid value: {prefix}: out of range for IPv{version}")
    network = _range_network(where, entry, _address(first, version), _address(last, version), prefix, prefix_field)
    gateway, gateway_field = entry.get("gateway"), f"{where}.gateway"
    if not gateway:
        gateway, gateway_field = spec.get("gateway"), "spec.gateway"
    if gateway:
        gateway_ip = parse_ip(gateway, gateway_field)
        if gateway_ip.version != version:
            raise Invalid(f"{gateway_field}: Invalid value: {gateway!r}: not an IPv{version} address")
        _check_gateway(gateway_ip, network, where, gateway_field)
    dns = entry.get("dnsServers", spec.get("dnsServers")) or []
    for j, server in enumerate(dns):
        parse_ip(server, f"{where}.dnsServers[{j}]" if entry.get("dnsServers") else f"spec.dnsServers[{j}]")
    return Range(i, first, last, version, prefix, gateway or None, tuple(dns))


def _bounds(where: str, version: int, subnet: Network | None, start: IPAddress | None,
            end: IPAddress | None) -> tuple[int, int]:
    """First and last address of an entry: start and end, or what of them the subnet gives."""
    if start is None and subnet is None:
        raise Invalid(f"{where}.start: Required value: start or subnet is required")
    if end is None and subnet is None:
        raise Invalid(f"{where}.end: Required value: end or subnet is required")
    subnet_first, subnet_last = _subnet_range(subnet) if subnet else (0, 0)
    if subnet is not None:
        for field, value in (("start", start), ("end", end)):
            if value is not None and value not in subnet:
                raise Invalid(f"{where}.{field}: Invalid value: {str(value)!r}: outside the subnet {subnet}")
    first = int(start) if start is not None else subnet_first
    last = int(end) if end is not None else subnet_last
    if first > last:
        raise Invalid(f"{where}.start: Invalid value: {str(_address(first, version))!r}: "
                      f"after end {str(_address(last, version))!r}")
    return first, last


def _address(value: int, version: int) -> IPAddress:
    # ipaddress.ip_address(int) reads any int below 2**32 as IPv4, whatever the entry's family
    return ipaddress.IPv4Address(value) if version == 4 else ipaddress.IPv6Address(value)


def _range_network(where: str, entry: dict[str, Any], low: IPAddress, high: IPAddress, prefix: int,
                   prefix_field: str) -> Network:
    """The network ``prefix`` defines around the entry's first address; the whole range must lie in it, or the
    addresses at its far end get a prefix (and a gateway) of a network they are not in."""
    network = ipaddress.ip_network((low, prefix), strict=False)
    if high not in network:
        field = f"{where}.end" if entry.get("end") else f"{where}.subnet"
        raise Invalid(f"{field}: Invalid value: {str(high)!r}: outside {network}, the network {prefix_field} "
                      f"{prefix} defines around {low}; the range must lie in one network")
    return network


def _check_gateway(gateway: IPAddress, network: Network, where: str, field: str) -> None:
    """A gateway must be on the network of the addresses it serves. Exceptions: an IPv6 link-local gateway
    (fe80::/10, reached on every link), and host prefixes (/32, /128), whose gateway is always off-network."""
    link_local = gateway.version == 6 and gateway.is_link_local
    if gateway in network or link_local or network.prefixlen == network.max_prefixlen:
        return
    inherited = ", which sets no gateway of its own" if field == "spec.gateway" else ""
    raise Invalid(f"{field}: Invalid value: {str(gateway)!r}: outside {network}, the network of {where}{inherited}")


def _check_name_prefix(name_prefix: str, versions: set[int]) -> None:
    """IPAddress names are '<namePrefix>-<address>': the longest one the pool can make must be an object name."""
    for version in sorted(versions):
        sample = address_name(name_prefix, LONGEST_ADDRESS[version])
        if not DNS_SUBDOMAIN.match(sample):
            raise Invalid(f"spec.namePrefix: Invalid value: {name_prefix!r}: makes IPAddress names such as "
                          f"{sample!r}, which are not object names: {SUBDOMAIN_RULE}")
        if len(sample) > 253:
            raise Invalid(f"spec.namePrefix: Invalid value: {name_prefix!r}: too long: the IPAddress name of "
                          f"{LONGEST_ADDRESS[version]} would have {len(sample)} characters, more than 253")


def _check_overlaps(ranges: Iterable[Range]) -> None:
    ordered = sorted(ranges, key=lambda r: (r.version, r.first))
    for before, after in zip(ordered, ordered[1:], strict=False):
        if before.version == after.version and after.first <= before.last:
            low, high = sorted((before.index, after.index))
            raise Invalid(f"spec.pools[{high}]: Invalid value: overlaps spec.pools[{low}]")


def check_update(old: dict[str, Any], new: dict[str, Any], allocated: Iterable[str]) -> None:
    """Upstream's update rules: namePrefix and allocationStrategy are immutable; no allocated address may
    fall out of the pool."""
    _check_schema(new)
    name = (new.get("metadata") or {}).get("name", "")
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    for field, default in (("namePrefix", None), ("allocationStrategy", "sequential")):
        if old_spec.get(field, default) != new_spec.get(field, default):
            raise Invalid(f'IPPool.ipam.metal3.io "{name}" is invalid: spec.{field}: Invalid value: '
                          f"{new_spec.get(field)!r}: field is immutable (was {old_spec.get(field, default)!r})")
    pool = parse_pool(new)
    outside = sorted(a for a in allocated if pool.entry_of(a) is None)
    if outside:
        raise Invalid(f'IPPool.ipam.metal3.io "{name}" is invalid: spec.pools: Forbidden: allocated addresses '
                      f"would fall outside the pool: {', '.join(outside)}")
