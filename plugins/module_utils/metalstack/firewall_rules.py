# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""A MetalStackFirewall's nftables rule set, and the cloud-init user data that installs it on the firewall.

The firewall sits between the cluster's node network (one IPv4 or IPv6 CIDR, e.g. ``10.8.4.0/24``; the
firewall holds its gateway address) and a public network. Its rule set:

- input: default drop; loopback, established/related and IPv6 neighbour discovery (IPv6's ARP, without which
  the nodes cannot reach their gateway) accepted; connection-tracking-invalid packets dropped;
- forward: default drop; established/related accepted, invalid dropped; the node network out to anywhere
  (``egressPolicy: allow``, the default) or only to what ``egressRules`` list (``egressPolicy: deny``); then
  ``ingressRules``: traffic from their sources into the node network;
- NAT: what leaves the node network for a destination outside it is masqueraded (source NAT to the firewall's
  outgoing address), in ``table ip metal3-firewall-nat`` (``ip6`` for an IPv6 node network).

The fields, as MetalStackFirewall.spec (and a cluster's spec.firewallSpec) carries them, and as the ``rules``
key of the ConfigMap ``ruleSetRef`` names holds them (YAML or JSON; reading the ConfigMap is the caller's):

``egressPolicy``: ``allow`` (default) or ``deny`` - spec only. Either side saying ``deny`` makes it deny.

``egressRules``: list of
    ``comment`` (string, optional, at most 128 characters),
    ``protocol`` (``TCP`` or ``UDP``, default ``TCP``),
    ``ports`` (list of integers 1-65535, at least one),
    ``to`` (list of CIDRs, at least one): from the node network to these destinations and ports allowed.
    Only meaningful with ``egressPolicy: deny``; with ``allow`` they are rendered too (and change nothing).

``ingressRules``: list of
    ``comment``, ``protocol``, ``ports`` as above,
    ``from`` (list of CIDRs, at least one): the sources,
    ``to`` (list of CIDRs inside the node network, optional): the destinations, the whole node network when
    omitted.

Unknown keys inside a rule are refused by name; a CIDR is ``address/prefix`` (host bits are dropped:
``10.0.0.5/24`` is ``10.0.0.0/24``). A rule may list IPv4 and IPv6 CIDRs together (a rule object shared by
clusters of both families): only those of the node network's family can ever match, and the others are left
out of the rendered rule, with a comment line saying so. Comments are free text; what reaches nft keeps only
printable ASCII without ``"`` and ``\\`` (anything else becomes ``_``, line breaks a space), inside nft's
double quotes, so that no comment can end its string.

The rule set touches only its own tables (``inet metal3-firewall``, ``ip``/``ip6 metal3-firewall-nat``): each
is declared empty and deleted before it is defined, in the one transaction ``nft -f`` makes, so that applying
it again replaces it, and whatever else the machine has (Docker's, a CNI's) is left alone.
"""
from __future__ import annotations

import dataclasses
import ipaddress
import re
from typing import Any, Literal, Union

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import name_problem

try:
    import yaml

    HAS_YAML = True
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    HAS_YAML = False

Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]  # noqa: UP007 - a runtime alias, for Python 3.9's pylint
Protocol = Literal["TCP", "UDP"]
EgressPolicy = Literal["allow", "deny"]

PROTOCOLS: tuple[Protocol, ...] = ("TCP", "UDP")
EGRESS_POLICIES: tuple[EgressPolicy, ...] = ("allow", "deny")
COMMENT_MAX = 128  # nft's own limit on a rule's comment
FILTER_TABLE = "metal3-firewall"
NAT_TABLE = "metal3-firewall-nat"
NFTABLES_CONF = "/etc/nftables.conf"
# Forwarding's sysctl settings, outside /etc/sysctl.d: systemd-sysctl applies that directory at every boot before
# any rule set loads, which would route unfiltered until (and unless) the rules apply. This file is applied only
# once the rules applied: by the first boot's runcmd after ``nft -f`` succeeded, and at each later boot by
# nftables.service after it loaded them (an ExecStartPost, which systemd runs only when ExecStart succeeded).
FORWARDING_CONF = "/etc/metal3/firewall-forwarding.conf"
NFTABLES_DROP_IN = "/etc/systemd/system/nftables.service.d/90-metal3-forwarding.conf"

EGRESS_KEYS = ("comment", "protocol", "ports", "to")
INGRESS_KEYS = ("comment", "protocol", "ports", "from", "to")
RULE_OBJECT_KEYS = ("egressRules", "ingressRules")


@dataclasses.dataclass(frozen=True)
class EgressRule:
    """From the node network to ``to`` on ``ports`` allowed. ``where`` names the rule in messages."""

    ports: tuple[int, ...]
    to: tuple[Network, ...]
    protocol: Protocol = "TCP"
    comment: str | None = None
    where: str = dataclasses.field(default="egressRules[?]", compare=False)


@dataclasses.dataclass(frozen=True)
class IngressRule:
    """From ``from_`` (the field ``from``) to ``to`` (the whole node network when empty) on ``ports`` allowed."""

    ports: tuple[int, ...]
    from_: tuple[Network, ...]
    to: tuple[Network, ...] = ()
    protocol: Protocol = "TCP"
    comment: str | None = None
    where: str = dataclasses.field(default="ingressRules[?]", compare=False)


@dataclasses.dataclass(frozen=True)
class FirewallRules:
    egress_policy: EgressPolicy = "allow"
    egress_rules: tuple[EgressRule, ...] = ()
    ingress_rules: tuple[IngressRule, ...] = ()


# --- parsing -------------------------------------------------------------------------------------------------


def parse_rules(spec: dict[str, Any], field: str = "spec") -> FirewallRules:
    """The rules of ``spec`` (``egressPolicy``, ``egressRules``, ``ingressRules``; other keys of ``spec`` are
    not this module's and are ignored). Invalid, naming the field (``spec.ingressRules[1].ports[0]``), when one
    is wrong."""
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        raise Invalid(f"{field}: must be an object, not {_kind(spec)}")
    policy = spec.get("egressPolicy")
    if policy is None:
        policy = "allow"
    if policy not in EGRESS_POLICIES:
        raise Invalid(f"{field}.egressPolicy: Unsupported value: {policy!r}: supported values: "
                      + ", ".join(f'"{p}"' for p in EGRESS_POLICIES))
    egress = tuple(_egress_rule(rule, where) for rule, where in _items(spec, "egressRules", field))
    ingress = tuple(_ingress_rule(rule, where) for rule, where in _items(spec, "ingressRules", field))
    return FirewallRules(policy, egress, ingress)


def parse_rule_object(value: Any, field: str = "data.rules") -> FirewallRules:
    """The rules of an attached rule object (the parsed ``data.rules`` of a ConfigMap): ``egressRules`` and
    ``ingressRules`` only, any other key refused by name."""
    if value is None:
        return FirewallRules()
    if not isinstance(value, dict):
        raise Invalid(f"{field}: must be an object with egressRules and ingressRules, not {_kind(value)}")
    _known_keys(value, RULE_OBJECT_KEYS, field)
    return parse_rules(value, field)


def _items(spec: dict[str, Any], key: str, field: str) -> list[tuple[Any, str]]:
    rules = spec.get(key)
    if rules is None:
        return []
    if not isinstance(rules, list):
        raise Invalid(f"{field}.{key}: must be a list, not {_kind(rules)}")
    return [(rule, f"{field}.{key}[{index}]") for index, rule in enumerate(rules)]


def _egress_rule(rule: Any, where: str) -> EgressRule:
    _rule_object(rule, EGRESS_KEYS, where)
    return EgressRule(ports=_ports(rule.get("ports"), f"{where}.ports"),
                      to=_cidrs(rule.get("to"), f"{where}.to", required=True),
                      protocol=_protocol(rule.get("protocol"), f"{where}.protocol"),
                      comment=_comment(rule.get("comment"), f"{where}.comment"), where=where)


def _ingress_rule(rule: Any, where: str) -> IngressRule:
    _rule_object(rule, INGRESS_KEYS, where)
    return IngressRule(ports=_ports(rule.get("ports"), f"{where}.ports"),
                       from_=_cidrs(rule.get("from"), f"{where}.from", required=True),
                       to=_cidrs(rule.get("to"), f"{where}.to", required=False),
                       protocol=_protocol(rule.get("protocol"), f"{where}.protocol"),
                       comment=_comment(rule.get("comment"), f"{where}.comment"), where=where)


def _rule_object(rule: Any, keys: tuple[str, ...], where: str) -> None:
    if not isinstance(rule, dict):
        raise Invalid(f"{where}: must be an object, not {_kind(rule)}")
    _known_keys(rule, keys, where)


def _known_keys(value: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
    unknown = [str(key) for key in value if key not in keys]
    if unknown:
        raise Invalid(f"{where}: unknown field {sorted(unknown)[0]!r} (known fields: {', '.join(keys)})")


def _ports(value: Any, field: str) -> tuple[int, ...]:
    if value is None or value == []:
        raise Invalid(f"{field}: Required value: at least one port")
    if not isinstance(value, list):
        raise Invalid(f"{field}: must be a list of ports, not {_kind(value)}")
    ports = []
    for index, port in enumerate(value):
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise Invalid(f"{field}[{index}]: {port!r} is not a port (1-65535)")
        ports.append(port)
    return tuple(ports)


def _cidrs(value: Any, field: str, required: bool) -> tuple[Network, ...]:
    if value is None or value == []:
        if required:
            raise Invalid(f"{field}: Required value: at least one CIDR")
        return ()
    if not isinstance(value, list):
        raise Invalid(f"{field}: must be a list of CIDRs, not {_kind(value)}")
    return tuple(parse_cidr(cidr, f"{field}[{index}]") for index, cidr in enumerate(value))


def parse_cidr(value: Any, field: str) -> Network:
    """``value`` (``address/prefix``) as a network, host bits dropped; Invalid naming ``field`` otherwise. An IPv6
    scope (``fe80::%eth0/64``), which Python's ipaddress takes as any text after ``%``, is none."""
    if isinstance(value, str) and "/" in value and "%" not in value and value == value.strip():
        try:
            return ipaddress.ip_network(value, strict=False)
        except ValueError:
            pass
    raise Invalid(f"{field}: {value!r} is not a CIDR")


def _protocol(value: Any, field: str) -> Protocol:
    if value is None:
        return "TCP"
    for protocol in PROTOCOLS:
        if value == protocol:
            return protocol
    raise Invalid(f"{field}: Unsupported value: {value!r}: supported values: "
                  + ", ".join(f'"{p}"' for p in PROTOCOLS))


def _comment(value: Any, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid(f"{field}: must be a string, not {_kind(value)}")
    if len(value) > COMMENT_MAX:
        raise Invalid(f"{field}: must be at most {COMMENT_MAX} characters, not {len(value)}")
    return value


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
             float: "a number"}
    return names.get(type(value), type(value).__name__)


# --- rendering -----------------------------------------------------------------------------------------------

_SAFE = re.compile(r"[^ -~]|[\"\\]")  # anything but printable ASCII, and the two characters nft's strings fear
_SPACE = re.compile(r"[\t\n\r\v\f]+")


def nft_text(text: str, limit: int = COMMENT_MAX) -> str:
    """``text`` made safe inside nft's double quotes (and in a ``#`` comment line): printable ASCII only, without
    ``"`` or ``\\``, line breaks turned into a space, at most ``limit`` characters."""
    return _SAFE.sub("_", _SPACE.sub(" ", text))[:limit]


def render_ruleset(node_network: str, rules: FirewallRules, extra: FirewallRules | None = None) -> str:
    """The nftables configuration (``nft -f``) of a firewall of ``node_network`` with ``rules`` and the rules of
    an attached rule object, ``extra``. The same input renders the same text. Invalid when ``node_network`` is
    no CIDR or an ingress rule's ``to`` leaves it."""
    network = parse_cidr(node_network, "node network")
    extra = extra or FirewallRules()
    deny = "deny" in (rules.egress_policy, extra.egress_policy)
    family = _family(network)
    node = _cidr(network)
    lines = [
        "# nftables rule set of a MetalStackFirewall, rendered by metal3.baremetal: do not edit, it is replaced.",
        f"# node network {node} (IPv{network.version}); egress policy {'deny' if deny else 'allow'}.",
        "# Only the tables below are replaced; each is declared empty then deleted, so that `nft -f` may apply",
        "# this file again.",
    ]
    for fam, table in (("inet", FILTER_TABLE), ("ip", NAT_TABLE), ("ip6", NAT_TABLE)):
        lines += [f"table {fam} {table} {{}}", f"delete table {fam} {table}"]

    forward = [
        "ct state established,related accept",
        "ct state invalid drop",
    ]
    if not deny:
        forward.append(f'{family} saddr {node} accept comment "node network egress"')
    skipped: list[str] = []
    for egress in rules.egress_rules + extra.egress_rules:
        forward += _egress(egress, network, skipped)
    for ingress in rules.ingress_rules + extra.ingress_rules:
        forward += _ingress(ingress, network, skipped)

    lines += [""] + [f"# {nft_text(note, 200)}" for note in skipped]
    # indented with spaces: YAML would write text with tabs in quotes, not as the user data's literal block
    lines += [
        f"table inet {FILTER_TABLE} {{",
        "    chain input {",
        "        type filter hook input priority filter; policy drop;",
        '        iif "lo" accept',
        "        ct state established,related accept",
        "        ct state invalid drop",
        "        icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit, nd-router-advert } accept",
        "    }",
        "",
        "    chain forward {",
        "        type filter hook forward priority filter; policy drop;",
        *(f"        {statement}" for statement in forward),
        "    }",
        "}",
        "",
        f"table {family} {NAT_TABLE} {{",
        "    chain postrouting {",
        "        type nat hook postrouting priority srcnat; policy accept;",
        f'        {family} saddr {node} {family} daddr != {node} masquerade comment "node network SNAT"',
        "    }",
        "}",
    ]
    return "\n".join(lines) + "\n"


def _family(network: Network) -> str:
    return "ip" if network.version == 4 else "ip6"


def _egress(rule: EgressRule, network: Network, skipped: list[str]) -> list[str]:
    family = _family(network)
    to = _same_family(rule.to, network, f"{rule.where}.to", skipped)
    if not to:
        skipped.append(f"{rule.where}: left out, none of its destinations is IPv{network.version}")
        return []
    return [f"{family} saddr {_cidr(network)} {family} daddr {_networks(to)} {_ports_match(rule)} "
            f"accept{_comment_of(rule)}"]


def _ingress(rule: IngressRule, network: Network, skipped: list[str]) -> list[str]:
    family = _family(network)
    for index, destination in enumerate(rule.to):
        if not _within(destination, network):
            raise Invalid(f"{rule.where}.to[{index}]: '{_cidr(destination)}' is not within the node "
                          f"network {_cidr(network)}")
    sources = _same_family(rule.from_, network, f"{rule.where}.from", skipped)
    if not sources:
        skipped.append(f"{rule.where}: left out, none of its sources is IPv{network.version}")
        return []
    to = _collapse(rule.to) if rule.to else [network]
    return [f"{family} saddr {_networks(sources)} {family} daddr {_networks(to)} {_ports_match(rule)} "
            f"accept{_comment_of(rule)}"]


def _same_family(networks: tuple[Network, ...], network: Network, where: str, skipped: list[str]) -> list[Network]:
    other = [_cidr(n) for n in networks if n.version != network.version]
    if other:
        skipped.append(f"{where}: {', '.join(other)} left out: the node network is IPv{network.version}")
    return _collapse(tuple(n for n in networks if n.version == network.version))


def _collapse(networks: tuple[Network, ...]) -> list[Network]:
    """The networks, sorted (IPv4 first), overlaps merged (nft refuses overlapping intervals in a set)."""
    v4 = [n for n in networks if isinstance(n, ipaddress.IPv4Network)]
    v6 = [n for n in networks if isinstance(n, ipaddress.IPv6Network)]
    return [*ipaddress.collapse_addresses(v4), *ipaddress.collapse_addresses(v6)]


def _within(inner: Network, outer: Network) -> bool:
    if isinstance(inner, ipaddress.IPv4Network) and isinstance(outer, ipaddress.IPv4Network):
        return inner.subnet_of(outer)
    if isinstance(inner, ipaddress.IPv6Network) and isinstance(outer, ipaddress.IPv6Network):
        return inner.subnet_of(outer)
    return False


def _cidr(network: Network) -> str:
    """``network`` as nft reads it, from its numbers alone (never a scope text a caller's object might carry)."""
    number = int(network.network_address)
    address = ipaddress.IPv4Address(number) if network.version == 4 else ipaddress.IPv6Address(number)
    return f"{address}/{int(network.prefixlen)}"


def _networks(networks: list[Network]) -> str:
    return _set([_cidr(network) for network in networks])


def _set(values: list[str]) -> str:
    return values[0] if len(values) == 1 else "{ " + ", ".join(values) + " }"


def _ports_match(rule: EgressRule | IngressRule) -> str:
    protocol = {"TCP": "tcp", "UDP": "udp"}[rule.protocol]
    return f"{protocol} dport {_set([str(int(port)) for port in sorted(set(rule.ports))])}"


def _comment_of(rule: EgressRule | IngressRule) -> str:
    if not rule.comment:
        return ""
    text = nft_text(rule.comment)
    return f' comment "{text}"' if text.strip() else ""


# --- cloud-init ----------------------------------------------------------------------------------------------


def firewall_user_data(ruleset: str, hostname: str | None = None) -> str:
    """A ``#cloud-config`` document that installs ``ruleset`` as /etc/nftables.conf, applies it and, only when it
    applied, enables IPv4 and IPv6 forwarding; where the unit exists, nftables.service applies the file again at
    each boot, and turns forwarding on only after it did (the firewall fails closed: rules that do not load leave
    the machine routing nothing)."""
    if not HAS_YAML:  # pragma: no cover
        raise Invalid("PyYAML is needed to render cloud-init user data")
    config: dict[str, Any] = {}
    if hostname is not None:
        problem = name_problem(hostname)
        if problem:
            raise Invalid(f"hostname: {problem}")
        config["hostname"] = hostname.split(".")[0]
        if "." in hostname:
            config["fqdn"] = hostname
        config["preserve_hostname"] = False
    config["write_files"] = [
        {"path": FORWARDING_CONF, "owner": "root:root", "permissions": "0644",
         "content": "net.ipv4.ip_forward = 1\nnet.ipv6.conf.all.forwarding = 1\n"},
        {"path": NFTABLES_DROP_IN, "owner": "root:root", "permissions": "0644",
         "content": f"[Service]\nExecStartPost=/bin/sh -c 'sysctl -p {FORWARDING_CONF}'\n"},
        {"path": NFTABLES_CONF, "owner": "root:root", "permissions": "0644", "content": ruleset},
    ]
    config["runcmd"] = [
        ["sh", "-c", f"nft -f {NFTABLES_CONF} && sysctl -p {FORWARDING_CONF}"],
        ["sh", "-c", "if systemctl cat nftables.service >/dev/null 2>&1; then systemctl daemon-reload; "
                     "systemctl enable nftables.service; fi"],
    ]
    return "#cloud-config\n" + _dump_yaml(config)


def _dump_yaml(value: Any) -> str:
    """YAML of ``value`` by a SafeDumper that writes multi-line strings as literal blocks (``|``) where YAML allows
    it (no tabs, no trailing spaces; otherwise quoted, as SafeDumper would)."""

    class Dumper(yaml.SafeDumper):
        pass

    def string(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
        return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)

    Dumper.add_representer(str, string)
    return yaml.dump(value, Dumper=Dumper, sort_keys=False, default_flow_style=False, allow_unicode=False,
                     width=4096)
