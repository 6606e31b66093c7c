# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""IPPool address ranges: parsing, validation (upstream's webhook rules) and offsets.

A pool's entries form one offset space: entry 0's addresses, then entry 1's, ...
Allocation works on offsets (see allocation.py); this module turns them into
addresses and back.
"""
from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Union, cast

from ansible_collections.metal3.baremetal.plugins.module_utils.api.kinds import lookup
from ansible_collections.metal3.baremetal.plugins.module_utils.api.validation import validate
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import DNS_SUBDOMAIN, SUBDOMAIN_RULE

if TYPE_CHECKING:
    from ansible_collections.metal3.baremetal.plugins.module_utils.api.types import (
        IPPool,
        IPPoolSpec,
        IPPoolSpecPoolsItem,
    )

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]  # noqa: UP007 - a runtime alias
Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]  # noqa: UP007 - a runtime alias
POOL_API = "ipam.metal3.io/v1alpha1"
# The longest address of each family, spelt as in an IPAddress name: the longest name a namePrefix makes.
LONGEST_ADDRESS = {4: "255.255.255.255", 6: "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}
# Allocation looks at most this many addresses of a pool (a /64 holds 2**64): the first 2**24.
MAX_OFFSETS = 1 << 24


# allocationStrategy random needs each entry's size as an index: upstream's limit is a Go int, 2**63 - 1.
RANDOM_MAX_SIZE = (1 << 63) - 1


@dataclass(frozen=True)
class Range:
    """One pool entry, resolved: its usable addresses and the network settings of an address in it.

    An entry may give no address at all (``last < first``): one with only ``end``, which upstream's allocator
    takes nothing from, or a subnet written at its last address.
    """

    index: int
    first: int
    last: int
    version: int
    prefix: int | None  # None when no prefix is set anywhere: the IPAddress then has none, as upstream's
    gateway: str | None
    dns_servers: tuple[str, ...]
    # IPv4: the broadcast addresses of the entry's subnet and of the network its prefix defines
    broadcasts: tuple[int, ...] = ()

    @property
    def size(self) -> int:
        return max(0, self.last - self.first + 1)

    @property
    def field(self) -> str:
        return f"spec.pools[{self.index}]"

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
    # What upstream's webhook accepts and we think risky: said (module warnings, the pool's PoolWarning condition
    # and an Event), never refused.
    warnings: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return min(sum(r.size for r in self.ranges), MAX_OFFSETS)

    def address_at(self, offset: int) -> tuple[IPAddress, Range]:
        for entry in self.ranges:
            if offset < entry.size:
                return _address(entry.first + offset, entry.version), entry
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

    def offsets_of(self, addresses: Iterable[str]) -> Iterator[int]:
        """The offsets of the pool's addresses among ``addresses`` (as this collection writes them): a pool's
        whole index is read on every allocation, so each is parsed at C speed, not through ``ipaddress``."""
        for address in addresses:
            family, version = (socket.AF_INET6, 6) if ":" in address else (socket.AF_INET, 4)
            try:
                value = int.from_bytes(socket.inet_pton(family, address), "big")
            except (OSError, TypeError):
                continue  # not an address: the index is a hint, and the IPAddress objects are the truth
            base = 0
            for entry in self.ranges:
                if entry.version == version and entry.first <= value <= entry.last:
                    if base + value - entry.first < MAX_OFFSETS:
                        yield base + value - entry.first
                    break
                base += entry.size

    def entry_of(self, address: str | IPAddress) -> Range | None:
        ip = ipaddress.ip_address(address) if isinstance(address, str) else address
        return next((entry for entry in self.ranges if entry.contains(ip)), None)

    def withheld(self, address: str | IPAddress) -> str | None:
        """Why ``address`` is never handed out, even to a claim that asks for it by name: it is the gateway, or
        an IPv4 broadcast address, of an entry. None for any other address."""
        ip = ipaddress.ip_address(address) if isinstance(address, str) else address
        for entry in self.ranges:
            if entry.gateway and ipaddress.ip_address(entry.gateway) == ip:
                return f"the gateway of {entry.field}"
            if ip.version == 4 and int(ip) in entry.broadcasts:
                return f"the broadcast address of {entry.field}"
        return None

    def reserved_offsets(self) -> Iterator[int]:
        """Offsets never handed out to a claim that did not ask for them: gateways, IPv4 broadcast addresses
        and preAllocations."""
        reserved: list[IPAddress] = [ipaddress.ip_address(e.gateway) for e in self.ranges if e.gateway]
        reserved += [_address(b, 4) for e in self.ranges for b in e.broadcasts]
        reserved += [ipaddress.ip_address(a) for a in self.pre_allocations.values()]
        for address in reserved:
            offset = self.offset_of(address)
            if offset is not None:
                yield offset

    def address_name(self, address: str) -> str:
        return address_name(self.name_prefix, address)


def address_name(name_prefix: str, address: str) -> str:
    """Upstream's IPAddress name: ``<namePrefix>-<address>``, '.' and ':' replaced by '-', and the trailing '-'
    trimmed (an IPv6 address that ends in '::' makes one): ``2001:db8:2::`` in pool s2 is ``s2-2001-db8-2``."""
    return f"{name_prefix}-{address.replace(':', '-').replace('.', '-')}".rstrip("-")


def parse_ip(value: Any, field: str) -> IPAddress:
    """``value`` as an IP address; Invalid naming ``field`` when it is none."""
    try:
        return ipaddress.ip_address(str(value))
    except ValueError:
        raise Invalid(f"{field}: Invalid value: {value!r}: not an IP address") from None


def _subnet(value: Any, field: str) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    """A subnet as written: its network, and the address it was written with (``192.168.1.10/24``)."""
    try:
        if "/" not in str(value):
            raise ValueError(value)
        return ipaddress.ip_interface(str(value))
    except ValueError:
        raise Invalid(f"{field}: Invalid value: {value!r}: not a CIDR") from None


def _subnet_range(subnet: ipaddress.IPv4Interface | ipaddress.IPv6Interface) -> tuple[int, int]:
    """Usable addresses of an entry given by its subnet.

    As upstream: from the address the subnet is written with + 1 (``192.168.1.10/24`` starts at .11,
    ``192.168.1.0/24`` at .1). Ours: the IPv4 broadcast address is never handed out, and point-to-point and
    host subnets are whole: /31 and /127 give both addresses (RFC 3021, RFC 6164), /32 and /128 the one.
    """
    network = subnet.network
    first, last = int(network.network_address), int(network.broadcast_address)
    if network.max_prefixlen - network.prefixlen <= 1:
        return first, last
    return int(subnet.ip) + 1, (last - 1 if network.version == 4 else last)


def parse_pool(obj: dict[str, Any]) -> Pool:
    """Parse and validate an IPPool; Invalid names the first bad field, in kube-apiserver's words."""
    _check_schema(obj)
    pool = cast("IPPool", obj)  # its schema holds: typed from here on
    name = (pool.get("metadata") or {}).get("name", "")
    # A pool without a spec reads as one with an empty spec, which _parse refuses (no namePrefix).
    spec = pool.get("spec") or cast("IPPoolSpec", {})
    try:
        return _parse(name, spec)
    except Invalid as e:
        raise Invalid(f'IPPool.ipam.metal3.io "{name}" is invalid: {e}') from None


def pool_warnings(obj: dict[str, Any]) -> tuple[str, ...]:
    """What upstream's webhook accepts in the IPPool ``obj`` and we think risky (empty when nothing is); Invalid,
    as parse_pool, when it is refused."""
    return parse_pool(obj).warnings


def _check_schema(obj: dict[str, Any]) -> None:
    """The CRD schema's checks on the spec, before any code here reads it: a definition reaches parse_pool
    (through admission) before the store validates it, and a wrong type must be a field error, not a crash."""
    api_version = obj.get("apiVersion")
    if not isinstance(api_version, str) or not api_version:
        api_version = POOL_API
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    checked: dict[str, Any] = {"apiVersion": api_version, "kind": "IPPool", "metadata": {"name": name}}
    if obj.get("spec") is not None:
        checked["spec"] = obj["spec"]
    validate(lookup(api_version, "IPPool"), checked)


def _parse(name: str, spec: IPPoolSpec) -> Pool:
    if not spec.get("namePrefix"):
        raise Invalid("spec.namePrefix: Required value")
    # The pool's own gateway and DNS servers, whether or not an entry uses them (upstream's webhook checks them).
    if spec.get("gateway"):
        parse_ip(spec["gateway"], "spec.gateway")
    for j, server in enumerate(spec.get("dnsServers") or []):
        parse_ip(server, f"spec.dnsServers[{j}]")
    ranges: list[Range] = []
    warnings: list[str] = []
    for i, entry in enumerate(spec.get("pools") or []):
        ranges.append(_entry(i, entry, spec, warnings))
        if spec.get("allocationStrategy") == "random":
            _check_indexable(f"spec.pools[{i}]", entry)
    _check_overlaps(ranges)
    _check_name_prefix(spec["namePrefix"], {r.version for r in ranges} or {4})
    pool = Pool(name, spec["namePrefix"], spec.get("allocationStrategy") or "sequential", tuple(ranges),
                dict(spec.get("preAllocations") or {}), tuple(warnings))
    _check_pre_allocations(pool)
    return pool


def _check_pre_allocations(pool: Pool) -> None:
    """Each preAllocation an address, none twice (upstream's rules), none a gateway or a broadcast address (a
    gateway is never a claim's address), each inside an entry: what could never be handed out is refused now."""
    seen: dict[IPAddress, str] = {}
    for claim, address in pool.pre_allocations.items():
        field = f"spec.preAllocations[{claim}]"
        ip = parse_ip(address, field)
        if ip in seen:
            raise Invalid(f'{field}: Invalid value: {address!r}: IP address is already pre-allocated to claim '
                          f'"{seen[ip]}"')
        seen[ip] = claim
    for ip, claim in seen.items():
        field, address = f"spec.preAllocations[{claim}]", pool.pre_allocations[claim]
        withheld = pool.withheld(ip)
        if withheld:
            raise Invalid(f"{field}: Invalid value: {address!r}: {withheld}, which is never handed out")
        if pool.entry_of(ip) is None:
            raise Invalid(f"{field}: Invalid value: {address!r}: outside every pool entry")


def _entry(i: int, entry: IPPoolSpecPoolsItem, spec: IPPoolSpec, warnings: list[str]) -> Range:
    """Pool entry ``i``, with the pool's prefix, gateway and dnsServers where it sets none of its own; what is
    risky in it goes to ``warnings``."""
    where = f"spec.pools[{i}]"
    subnet = _subnet(entry["subnet"], f"{where}.subnet") if entry.get("subnet") else None
    start = parse_ip(entry["start"], f"{where}.start") if entry.get("start") else None
    end = parse_ip(entry["end"], f"{where}.end") if entry.get("end") else None
    given = [v for v in (subnet.ip if subnet else None, start, end) if v is not None]
    if not given:
        raise Invalid(f"{where}: Required value: pool entry must specify at least one of start, end, or subnet")
    versions = {v.version for v in given}
    if len(versions) > 1:
        raise Invalid(f"{where}: Invalid value: start, end and subnet mix IPv4 and IPv6")
    version = versions.pop()
    prefix, prefix_field = _prefix(where, entry, spec, subnet, version)
    first, last = _bounds(where, version, subnet, start, end, prefix)
    network = None
    if prefix is not None and first <= last:
        network = _range_network(where, entry, _address(first, version), _address(last, version), prefix,
                                 prefix_field, warnings)
    gateway, gateway_field = entry.get("gateway"), f"{where}.gateway"
    if not gateway:
        gateway, gateway_field = spec.get("gateway"), "spec.gateway"
    if gateway:
        gateway_ip = parse_ip(gateway, gateway_field)
        if gateway_ip.version != version:
            raise Invalid(f"{gateway_field}: Invalid value: {gateway!r}: not an IPv{version} address")
        if network is not None:
            _check_gateway(gateway_ip, network, where, gateway_field, warnings)
    for j, server in enumerate(entry.get("dnsServers") or []):
        parse_ip(server, f"{where}.dnsServers[{j}]")
    dns = entry.get("dnsServers") or spec.get("dnsServers") or []
    return Range(i, first, last, version, prefix, gateway or None, tuple(dns),
                 _broadcasts(version, subnet.network if subnet else None, network))


def _prefix(where: str, entry: IPPoolSpecPoolsItem, spec: IPPoolSpec,
            subnet: ipaddress.IPv4Interface | ipaddress.IPv6Interface | None, version: int) -> tuple[int | None, str]:
    """The entry's prefix and the field it comes from: its own, else the pool's, else its subnet's; None when
    there is none. A prefix of 0 is none, as upstream reads it (its prefix is an int, 0 when left out)."""
    for prefix, field in ((entry.get("prefix"), f"{where}.prefix"), (spec.get("prefix"), "spec.prefix")):
        if prefix:
            if prefix > (32 if version == 4 else 128):
                raise Invalid(f"{field}: Invalid value: {prefix}: out of range for IPv{version}")
            return prefix, field
    if subnet is not None:
        return subnet.network.prefixlen, f"{where}.subnet"
    return None, ""


def _bounds(where: str, version: int, subnet: ipaddress.IPv4Interface | ipaddress.IPv6Interface | None,
            start: IPAddress | None, end: IPAddress | None, prefix: int | None) -> tuple[int, int]:
    """First and last address of an entry: start and end, or what of them the subnet gives.

    Where upstream reads them otherwise: an entry with only ``start`` ends with the network its prefix defines
    (upstream's goes on to the family's last address), and ``end`` always bounds an entry (upstream's allocator
    reads it only beside ``start``). An entry with only ``end`` gives nothing, as upstream's.
    """
    if subnet is not None:
        for field, value in (("start", start), ("end", end)):
            if value is not None and value not in subnet.network:
                raise Invalid(f"{where}.{field}: Invalid value: {str(value)!r}: outside the subnet {subnet.network}")
        first, last = _subnet_range(subnet)
        first = int(start) if start is not None else first
        last = int(end) if end is not None else last
    elif start is not None:
        first = int(start)
        if end is not None:
            last = int(end)
        elif prefix is not None:
            last = int(ipaddress.ip_network((start, prefix), strict=False).broadcast_address)
        else:
            last = int(ipaddress.ip_address(LONGEST_ADDRESS[version]))
    else:
        if end is None:  # _entry refuses an entry with none of subnet, start and end
            raise AssertionError("a pool entry with none of subnet, start and end")
        return int(end) + 1, int(end)  # only end: no address, as upstream's
    if first > last:
        if start is not None and end is not None:
            raise Invalid(f"{where}.start: Invalid value: {str(start)!r}: after end {str(end)!r}")
        if start is not None:
            raise Invalid(f"{where}.start: Invalid value: {str(start)!r}: after "
                          f"{str(_address(last, version))!r}, the last address the subnet gives")
        if end is not None:
            raise Invalid(f"{where}.end: Invalid value: {str(end)!r}: before "
                          f"{str(_address(first, version))!r}, the first address the subnet gives")
    return first, last


def _broadcasts(version: int, *networks: Network | None) -> tuple[int, ...]:
    """The IPv4 broadcast addresses of the given networks (none for /31 and /32)."""
    if version != 4:
        return ()
    return tuple(sorted({int(n.broadcast_address) for n in networks if n is not None and n.prefixlen <= 30}))


def _check_indexable(where: str, entry: IPPoolSpecPoolsItem) -> None:
    """Upstream's rule for allocationStrategy random: each entry has a size, by upstream's reckoning, that an
    index can hold. An entry with only start (or only end), or one too large (a /32 of IPv6), is refused with
    upstream's message."""
    subnet = ipaddress.ip_interface(str(entry["subnet"])).network if entry.get("subnet") else None
    start = ipaddress.ip_address(str(entry["start"])) if entry.get("start") else None
    end = ipaddress.ip_address(str(entry["end"])) if entry.get("end") else None
    problem, size = None, 0
    if start is None and subnet is None:
        problem = "either Start or Subnet is required for ipAddress"
    elif start is not None and end is not None:
        size = int(end) - int(start) + 1
    elif start is not None and subnet is not None:
        size = int(subnet.broadcast_address) - int(start) + 1
    elif start is not None:
        problem = "pool with Start requires End or Subnet to determine size"
    elif subnet is not None:
        size = int(subnet.broadcast_address) - int(subnet.network_address)
    if problem is None and size > RANDOM_MAX_SIZE:
        problem = "pool size exceeds int range"
    if problem:
        raise Invalid(f'{where}: Invalid value: "": cannot be used with allocationStrategy "random": {problem}')


def _address(value: int, version: int) -> IPAddress:
    # ipaddress.ip_address(int) reads any int below 2**32 as IPv4, whatever the entry's family
    return ipaddress.IPv4Address(value) if version == 4 else ipaddress.IPv6Address(value)


def _range_network(where: str, entry: IPPoolSpecPoolsItem, low: IPAddress, high: IPAddress, prefix: int,
                   prefix_field: str, warnings: list[str]) -> Network:
    """The network ``prefix`` defines around the entry's first address. A range that goes beyond it is what
    upstream accepts (CAPM3's example pool: subnet 192.168.1.0/24 with prefix 25), and a warning: the addresses
    at its far end get a prefix (and a gateway) of a network they are not in."""
    network = ipaddress.ip_network((low, prefix), strict=False)
    if high not in network:
        field = f"{where}.end" if entry.get("end") else f"{where}.subnet"
        warnings.append(f"{field}: {high} is outside {network}, the network {prefix_field} {prefix} defines around "
                        f"{low}: the addresses of {where} beyond it get a prefix (and gateway) of a network they are "
                        "not in")
    return network


def _check_gateway(gateway: IPAddress, network: Network, where: str, field: str, warnings: list[str]) -> None:
    """A gateway off the network of the addresses it serves is what upstream accepts (an on-link gateway outside
    the subnet is real in bare-metal hosting), and a warning: a host reaches it only through an on-link route.
    None for an IPv6 link-local gateway (fe80::/10, reached on every link), nor for host prefixes (/32, /128),
    whose gateway is always off-network."""
    link_local = gateway.version == 6 and gateway.is_link_local
    if gateway in network or link_local or network.prefixlen == network.max_prefixlen:
        return
    inherited = ", which sets no gateway of its own" if field == "spec.gateway" else ""
    warnings.append(f"{field}: {gateway} is outside {network}, the network of {where}{inherited}: a host reaches it "
                    "only through an on-link route")


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
    ordered = sorted((r for r in ranges if r.size), key=lambda r: (r.version, r.first))
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
