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

from ansible_collections.metal3.baremetal.plugins.module_utils.errors import Invalid

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]  # noqa: UP007 - a runtime alias
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
        """`<namePrefix>-<address with '.' and ':' replaced by '-'>`, upstream's IPAddress name.

        An IPv6 address that ends in '::' is spelt '::0' (the same address), since an object name cannot
        end with '-'; upstream's name for it is not a valid name at all.
        """
        spelt = f"{address}0" if address.endswith("::") else address
        return f"{self.name_prefix}-{spelt.replace('.', '-').replace(':', '-')}"


def _ip(value: Any, field: str) -> IPAddress:
    try:
        return ipaddress.ip_address(str(value))
    except ValueError:
        raise Invalid(f"{field}: Invalid value: {value!r}: not an IP address") from None


def _network(value: Any, field: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    try:
        return ipaddress.ip_network(str(value), strict=False)
    except ValueError:
        raise Invalid(f"{field}: Invalid value: {value!r}: not a CIDR") from None


def _subnet_range(network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> tuple[int, int]:
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
    name = (obj.get("metadata") or {}).get("name", "")
    spec = obj.get("spec") or {}
    try:
        return _parse(name, spec)
    except Invalid as e:
        raise Invalid(f'IPPool.ipam.metal3.io "{name}" is invalid: {e}') from None


def _parse(name: str, spec: dict[str, Any]) -> Pool:
    if not spec.get("namePrefix"):
        raise Invalid("spec.namePrefix: Required value")
    default_prefix = spec.get("prefix")
    default_gateway = spec.get("gateway")
    default_dns = spec.get("dnsServers") or []
    ranges: list[Range] = []
    for i, entry in enumerate(spec.get("pools") or []):
        where = f"spec.pools[{i}]"
        subnet = _network(entry["subnet"], f"{where}.subnet") if entry.get("subnet") else None
        start = _ip(entry["start"], f"{where}.start") if entry.get("start") else None
        end = _ip(entry["end"], f"{where}.end") if entry.get("end") else None
        versions = {v.version for v in (subnet, start, end) if v is not None}
        if not versions:
            raise Invalid(f"{where}: Required value: start and end, or subnet")
        if len(versions) > 1:
            raise Invalid(f"{where}: Invalid value: start, end and subnet mix IPv4 and IPv6")
        subnet_first, subnet_last = _subnet_range(subnet) if subnet else (None, None)
        if start is None and subnet is None:
            raise Invalid(f"{where}.start: Required value: start or subnet is required")
        if end is None and subnet is None:
            raise Invalid(f"{where}.end: Required value: end or subnet is required")
        first = int(start) if start is not None else subnet_first
        last = int(end) if end is not None else subnet_last
        if subnet is not None:
            for field, value in (("start", start), ("end", end)):
                if value is not None and value not in subnet:
                    raise Invalid(f"{where}.{field}: Invalid value: {str(value)!r}: outside the subnet {subnet}")
        if first > last:
            raise Invalid(f"{where}.start: Invalid value: {str(ipaddress.ip_address(first))!r}: "
                          f"after end {str(ipaddress.ip_address(last))!r}")
        version = versions.pop()
        prefix = entry.get("prefix", default_prefix)
        if prefix is None:
            if subnet is None:
                raise Invalid(f"{where}.prefix: Required value: set prefix on the entry or the pool, or a subnet")
            prefix = subnet.prefixlen
        if not 0 <= int(prefix) <= (32 if version == 4 else 128):
            raise Invalid(f"{where}.prefix: Invalid value: {prefix}: out of range for IPv{version}")
        gateway = entry.get("gateway", default_gateway)
        if gateway:
            gateway_ip = _ip(gateway, f"{where}.gateway" if entry.get("gateway") else "spec.gateway")
            if gateway_ip.version != version:
                raise Invalid(f"{where}.gateway: Invalid value: {gateway!r}: not an IPv{version} address")
        dns = entry.get("dnsServers", default_dns) or []
        for j, server in enumerate(dns):
            _ip(server, f"{where}.dnsServers[{j}]" if entry.get("dnsServers") else f"spec.dnsServers[{j}]")
        ranges.append(Range(i, first, last, version, int(prefix), gateway or None, tuple(dns)))
    _check_overlaps(ranges)
    pool = Pool(name, spec["namePrefix"], spec.get("allocationStrategy") or "sequential", tuple(ranges),
                dict(spec.get("preAllocations") or {}))
    for claim, address in pool.pre_allocations.items():
        ip = _ip(address, f"spec.preAllocations[{claim}]")
        if pool.entry_of(ip) is None:
            raise Invalid(f"spec.preAllocations[{claim}]: Invalid value: {address!r}: outside every pool entry")
    return pool


def _check_overlaps(ranges: Iterable[Range]) -> None:
    ordered = sorted(ranges, key=lambda r: (r.version, r.first))
    for before, after in zip(ordered, ordered[1:], strict=False):
        if before.version == after.version and after.first <= before.last:
            low, high = sorted((before.index, after.index))
            raise Invalid(f"spec.pools[{high}]: Invalid value: overlaps spec.pools[{low}]")


def check_update(old: dict[str, Any], new: dict[str, Any], allocated: Iterable[str]) -> None:
    """Upstream's update rules: namePrefix and allocationStrategy are immutable; no allocated address may
    fall out of the pool."""
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
