# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""An address claimed from a pool, the one record IPAM hands to the templating of Metal3Data.

It crosses three boundaries - the IPAM engine to the CAPM3 engine, the ``ip_claim`` module to a playbook,
a playbook to the ``network_data`` and ``meta_data`` filters - with one serialisation, :meth:`Address.to_dict`
(``address``, ``prefix``, ``gateway``, ``dns_servers``), so an ``ip_claim`` result goes to the filters as it is.
It lives in core because templating (below IPAM) reads it.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object

# The IPAddress spec's spelling of dns_servers: read from a mapping too, as the filters documented it before.
DNS_SERVERS_SPEC_FIELD = "dnsServers"


@dataclass(frozen=True)
class Address:
    address: str
    prefix: int | None = None
    gateway: str | None = None
    dns_servers: tuple[str, ...] = ()

    @classmethod
    def of(cls, ip_address: Object) -> Address:
        """The address an IPAddress object (ipam.metal3.io, or Cluster API's, which has no DNS servers) holds."""
        spec = ip_address.get("spec") or {}
        return cls(str(spec["address"]), spec.get("prefix"), spec.get("gateway") or None,
                   tuple(spec.get(DNS_SERVERS_SPEC_FIELD) or ()))

    @classmethod
    def parse(cls, value: Any, path: str) -> Address:
        """The address a caller hands over: an Address, or a mapping with its fields (an ``ip_claim`` result;
        other keys are ignored). Errors name the field."""
        if isinstance(value, Address):
            return value
        if not isinstance(value, dict):
            raise Invalid(f"{path}: must be a mapping")
        address = value.get("address")
        if not isinstance(address, str) or not address:
            raise Invalid(f"{path}.address: required, a string")
        return cls(address, _prefix(value.get("prefix"), f"{path}.prefix"),
                   _optional_string(value.get("gateway"), f"{path}.gateway"), _dns_servers(value, path))

    def to_dict(self) -> dict[str, Any]:
        return {"address": self.address, "prefix": self.prefix, "gateway": self.gateway,
                "dns_servers": list(self.dns_servers)}


def address_record(address: Address | None) -> dict[str, Any]:
    """:meth:`Address.to_dict`, or the same keys empty when no address is held."""
    if address is not None:
        return address.to_dict()
    return {f.name: [] if f.name == "dns_servers" else None for f in dataclasses.fields(Address)}


def parse_dns_servers(value: Any, path: str) -> tuple[str, ...]:
    """The DNS servers of an address record, whether or not it holds an address: an Address's, or those of a
    mapping (``dns_servers``, or ``dnsServers``). Errors name the field."""
    if isinstance(value, Address):
        return value.dns_servers
    if not isinstance(value, dict):
        raise Invalid(f"{path}: must be a mapping")
    return _dns_servers(value, path)


def parse_gateway(value: Any, path: str) -> str | None:
    """The gateway of an address record, whether or not it holds an address (see parse_dns_servers)."""
    if isinstance(value, Address):
        return value.gateway
    if not isinstance(value, dict):
        raise Invalid(f"{path}: must be a mapping")
    return _optional_string(value.get("gateway"), f"{path}.gateway")


def _prefix(value: Any, path: str) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"[0-9]+", value.strip()):  # Jinja hands numbers over as text
        return int(value)
    raise Invalid(f"{path}: must be an integer, not {value!r}")


def _optional_string(value: Any, path: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise Invalid(f"{path}: must be a string, not {value!r}")
    return value


def _dns_servers(value: dict[str, Any], path: str) -> tuple[str, ...]:
    field = "dns_servers"
    if value.get(DNS_SERVERS_SPEC_FIELD) is not None:
        if value.get(field) is not None and value[field] != value[DNS_SERVERS_SPEC_FIELD]:
            raise Invalid(f"{path}.{DNS_SERVERS_SPEC_FIELD}: set beside dns_servers, differently; set one of them")
        field = DNS_SERVERS_SPEC_FIELD
    servers = value.get(field)
    if servers is None:
        return ()
    if not isinstance(servers, list) or not all(isinstance(s, str) and s for s in servers):
        raise Invalid(f"{path}.{field}: must be a list of addresses, not {servers!r}")
    return tuple(servers)
