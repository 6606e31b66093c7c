"""A MetalStackFirewall's rules: bad input refused by field, every rendered rule set read by the real
`nft --check`, one applied for real in a network namespace, and the cloud-init user data that carries it."""
from __future__ import annotations

import importlib
import ipaddress
import subprocess
from typing import Any

import pytest
import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.firewall_rules import (
    FORWARDING_CONF,
    NFTABLES_CONF,
    NFTABLES_DROP_IN,
    EgressRule,
    FirewallRules,
    IngressRule,
    firewall_user_data,
    parse_rule_object,
    parse_rules,
    render_ruleset,
)
from tests.harness import cloud_init
from tests.harness.nft import apply_ruleset, check_ruleset

EGRESS = {"ports": [443], "to": ["0.0.0.0/0"]}
INGRESS = {"ports": [443], "from": ["0.0.0.0/0"]}

# spec, the message's fragment (naming the field)
BAD_SPECS: list[tuple[Any, str]] = [
    ({"ingressRules": [INGRESS, {"ports": [70000], "from": ["1.2.3.0/24"]}]},
     "spec.ingressRules[1].ports[0]: 70000 is not a port (1-65535)"),
    ({"egressRules": [{"ports": [53], "to": ["10.0.0.0/8", "::/0", "10.0.0.0/33"]}]},
     "spec.egressRules[0].to[2]: '10.0.0.0/33' is not a CIDR"),
    ({"egressRules": [{"ports": [53], "to": ["10.0.0.0/8"], "port": 53}]},
     "spec.egressRules[0]: unknown field 'port' (known fields: comment, protocol, ports, to)"),
    ({"ingressRules": [{"ports": [53], "from": ["10.0.0.0/8"], "source": "x"}]},
     "spec.ingressRules[0]: unknown field 'source'"),
    ({"egressRules": [{"to": ["10.0.0.0/8"]}]}, "spec.egressRules[0].ports: Required value"),
    ({"egressRules": [{"ports": [], "to": ["10.0.0.0/8"]}]}, "spec.egressRules[0].ports: Required value"),
    ({"egressRules": [{"ports": 443, "to": ["10.0.0.0/8"]}]}, "spec.egressRules[0].ports: must be a list"),
    ({"egressRules": [{"ports": [0], "to": ["10.0.0.0/8"]}]}, "spec.egressRules[0].ports[0]: 0 is not a port"),
    ({"egressRules": [{"ports": [22, True], "to": ["10.0.0.0/8"]}]},
     "spec.egressRules[0].ports[1]: True is not a port"),
    ({"egressRules": [{"ports": ["80"], "to": ["10.0.0.0/8"]}]},
     "spec.egressRules[0].ports[0]: '80' is not a port"),
    ({"egressRules": [{"ports": [80], "to": []}]}, "spec.egressRules[0].to: Required value"),
    ({"egressRules": [{"ports": [80]}]}, "spec.egressRules[0].to: Required value"),
    ({"egressRules": [{"ports": [80], "to": "10.0.0.0/8"}]}, "spec.egressRules[0].to: must be a list of CIDRs"),
    ({"egressRules": [{"ports": [80], "to": ["10.0.0.1"]}]}, "spec.egressRules[0].to[0]: '10.0.0.1' is not a CIDR"),
    ({"egressRules": [{"ports": [80], "to": [" 10.0.0.0/8"]}]},
     "spec.egressRules[0].to[0]: ' 10.0.0.0/8' is not a CIDR"),
    ({"egressRules": [{"ports": [80], "to": ["10.0.0.0/8 accept"]}]},
     "spec.egressRules[0].to[0]: '10.0.0.0/8 accept' is not a CIDR"),
    ({"egressRules": [{"ports": [80], "to": [167772160]}]}, "spec.egressRules[0].to[0]: 167772160 is not a CIDR"),
    # Python's ipaddress takes any text after '%' as an IPv6 scope, and writes it back
    ({"egressRules": [{"ports": [80], "to": ["fe80::%x} accept/64"]}]},
     "spec.egressRules[0].to[0]: 'fe80::%x} accept/64' is not a CIDR"),
    ({"egressRules": [{"ports": [80], "to": ["fe80::%eth0/64"]}]},
     "spec.egressRules[0].to[0]: 'fe80::%eth0/64' is not a CIDR"),
    ({"ingressRules": [{"ports": [80]}]}, "spec.ingressRules[0].from: Required value"),
    ({"ingressRules": [{"ports": [80], "from": ["1.2.3.0/24"], "to": ["10.8.4.0/24", "fe80::/64x"]}]},
     "spec.ingressRules[0].to[1]: 'fe80::/64x' is not a CIDR"),
    ({"egressRules": [{**EGRESS, "protocol": "ICMP"}]},
     "spec.egressRules[0].protocol: Unsupported value: 'ICMP': supported values: \"TCP\", \"UDP\""),
    ({"egressRules": [{**EGRESS, "protocol": "tcp"}]}, "spec.egressRules[0].protocol: Unsupported value: 'tcp'"),
    ({"egressRules": [{**EGRESS, "comment": 42}]}, "spec.egressRules[0].comment: must be a string"),
    ({"ingressRules": [{**INGRESS, "comment": "x" * 129}]},
     "spec.ingressRules[0].comment: must be at most 128 characters, not 129"),
    ({"egressPolicy": "block"}, "spec.egressPolicy: Unsupported value: 'block': supported values: \"allow\", \"deny\""),
    ({"egressRules": {"ports": [80]}}, "spec.egressRules: must be a list, not an object"),
    ({"ingressRules": ["tcp/80"]}, "spec.ingressRules[0]: must be an object, not a string"),
    (["egressRules"], "spec: must be an object, not a list"),
]


@pytest.mark.parametrize("spec,message", BAD_SPECS,
                         ids=[message.split(":")[0] + "-" + str(i) for i, (_spec, message) in enumerate(BAD_SPECS)])
def test_bad_spec_is_refused_naming_the_field(spec: Any, message: str) -> None:
    with pytest.raises(Invalid) as refused:
        parse_rules(spec)
    assert message in str(refused.value)


def test_the_field_prefix_is_the_callers() -> None:
    with pytest.raises(Invalid, match=r"^spec\.firewallSpec\.egressRules\[0\]\.ports\[0\]: 65536 is not a port"):
        parse_rules({"egressRules": [{"ports": [65536], "to": ["10.0.0.0/8"]}]}, "spec.firewallSpec")


@pytest.mark.parametrize("value,message", [
    ({"egressPolicy": "deny"}, "data.rules: unknown field 'egressPolicy' (known fields: egressRules, ingressRules)"),
    ({"egresRules": []}, "data.rules: unknown field 'egresRules'"),
    ("egressRules: []", "data.rules: must be an object with egressRules and ingressRules, not a string"),
    ({"ingressRules": [{"ports": [80], "from": ["1.2.3.4/40"]}]},
     "data.rules.ingressRules[0].from[0]: '1.2.3.4/40' is not a CIDR"),
])
def test_bad_rule_object_is_refused_naming_the_field(value: Any, message: str) -> None:
    with pytest.raises(Invalid) as refused:
        parse_rule_object(value)
    assert message in str(refused.value)


@pytest.mark.parametrize("node_network,spec,message", [
    ("10.8.4.0/33", {}, "node network: '10.8.4.0/33' is not a CIDR"),
    ("10.8.4.1", {}, "node network: '10.8.4.1' is not a CIDR"),
    ("10.8.4.0/24", {"ingressRules": [{**INGRESS, "to": ["10.8.4.0/25", "10.8.5.0/24"]}]},
     "spec.ingressRules[0].to[1]: '10.8.5.0/24' is not within the node network 10.8.4.0/24"),
    ("10.8.4.0/24", {"ingressRules": [{**INGRESS, "to": ["10.8.0.0/16"]}]},
     "spec.ingressRules[0].to[0]: '10.8.0.0/16' is not within the node network 10.8.4.0/24"),
    ("2001:db8:4::/64", {"ingressRules": [{**INGRESS, "to": ["10.8.4.0/24"]}]},
     "spec.ingressRules[0].to[0]: '10.8.4.0/24' is not within the node network 2001:db8:4::/64"),
])
def test_render_refuses_what_leaves_the_node_network(node_network: str, spec: dict, message: str) -> None:
    with pytest.raises(Invalid) as refused:
        render_ruleset(node_network, parse_rules(spec))
    assert message in str(refused.value)


def test_parsed_rules() -> None:
    rules = parse_rules({"egressPolicy": "deny", "image": "not ours", "egressRules": [
        {"comment": "dns", "protocol": "UDP", "ports": [53], "to": ["10.0.0.5/8", "2001:db8::/32"]}],
        "ingressRules": [{"ports": [443, 80], "from": ["0.0.0.0/0"]}]})
    assert rules.egress_policy == "deny"
    assert [str(n) for n in rules.egress_rules[0].to] == ["10.0.0.0/8", "2001:db8::/32"]  # host bits dropped
    assert (rules.egress_rules[0].protocol, rules.egress_rules[0].ports) == ("UDP", (53,))
    assert rules.ingress_rules[0].protocol == "TCP" and rules.ingress_rules[0].to == ()
    assert parse_rules({}) == parse_rules(None) == FirewallRules()  # type: ignore[arg-type]
    assert parse_rule_object(None) == FirewallRules()


HOSTILE = 'pwn" accept; }\n}\ntable inet evil { chain c { type filter hook input priority -300; policy accept; } }\n#'

# id: node network, spec, attached rule object, fragments the rule set has, fragments it has not
RULESETS: list[tuple[str, str, dict, dict | None, list[str], list[str]]] = [
    ("ipv4-defaults", "10.8.4.0/24", {}, None,
     ["policy drop;", 'iif "lo" accept', "ct state established,related accept",
      'ip saddr 10.8.4.0/24 accept comment "node network egress"',
      "table ip metal3-firewall-nat {",
      "ip saddr 10.8.4.0/24 ip daddr != 10.8.4.0/24 masquerade"],
     ["table ip6 metal3-firewall-nat {\n"]),
    ("ipv6", "2001:db8:4::/64",
     {"egressRules": [{"ports": [443], "to": ["2001:db8:ff::/48"]}],
      "ingressRules": [{"protocol": "UDP", "ports": [51820], "from": ["2001:db8:100::/40"]}]}, None,
     ['ip6 saddr 2001:db8:4::/64 accept comment "node network egress"',
      "ip6 saddr 2001:db8:4::/64 ip6 daddr 2001:db8:ff::/48 tcp dport 443 accept",
      "ip6 saddr 2001:db8:100::/40 ip6 daddr 2001:db8:4::/64 udp dport 51820 accept",
      "table ip6 metal3-firewall-nat {",
      "ip6 saddr 2001:db8:4::/64 ip6 daddr != 2001:db8:4::/64 masquerade"],
     ["table ip metal3-firewall-nat {\n", "ip saddr"]),
    ("egress-deny", "10.8.4.0/24",
     {"egressPolicy": "deny", "egressRules": [
         {"comment": "https and dns", "ports": [443, 53, 443, 80], "to": ["0.0.0.0/0"]},
         {"protocol": "UDP", "ports": [53, 123], "to": ["1.1.1.1/32", "8.8.8.8/32", "8.8.4.4/32"]}]}, None,
     ['ip saddr 10.8.4.0/24 ip daddr 0.0.0.0/0 tcp dport { 53, 80, 443 } accept comment "https and dns"',
      "ip saddr 10.8.4.0/24 ip daddr { 1.1.1.1/32, 8.8.4.4/32, 8.8.8.8/32 } udp dport { 53, 123 } accept",
      "egress policy deny"],
     ['ip saddr 10.8.4.0/24 accept']),
    ("ingress-with-and-without-to", "10.8.4.0/24",
     {"ingressRules": [
         {"comment": "api server", "ports": [6443], "from": ["0.0.0.0/0"], "to": ["10.8.4.10/32"]},
         {"ports": [22], "from": ["192.0.2.0/24", "198.51.100.7/32"]},
         {"ports": [30000, 30001], "from": ["203.0.113.0/24"], "to": ["10.8.4.128/25", "10.8.4.0/25"]}]}, None,
     ['ip saddr 0.0.0.0/0 ip daddr 10.8.4.10/32 tcp dport 6443 accept comment "api server"',
      "ip saddr { 192.0.2.0/24, 198.51.100.7/32 } ip daddr 10.8.4.0/24 tcp dport 22 accept",
      "ip saddr 203.0.113.0/24 ip daddr 10.8.4.0/24 tcp dport { 30000, 30001 } accept"],  # the two halves merged
     []),
    ("attached-rule-object", "10.8.4.0/24",
     {"egressPolicy": "deny", "egressRules": [{"ports": [443], "to": ["0.0.0.0/0"], "comment": "spec"}]},
     {"egressRules": [{"protocol": "UDP", "ports": [53], "to": ["10.0.0.53/32"], "comment": "attached"}],
      "ingressRules": [{"ports": [80], "from": ["0.0.0.0/0"], "comment": "attached ingress"}]},
     ['tcp dport 443 accept comment "spec"',
      'ip saddr 10.8.4.0/24 ip daddr 10.0.0.53/32 udp dport 53 accept comment "attached"',
      'ip saddr 0.0.0.0/0 ip daddr 10.8.4.0/24 tcp dport 80 accept comment "attached ingress"'],
     []),
    ("overlapping-and-mixed-families", "10.8.4.0/24",
     {"egressRules": [{"ports": [443], "to": ["10.0.0.0/8", "10.1.0.0/16", "2001:db8::/32", "10.0.0.0/8"]},
                      {"ports": [443], "to": ["2001:db8::/32"]}],
      "ingressRules": [{"ports": [22], "from": ["2001:db8::/32", "192.0.2.0/25", "192.0.2.128/25"]}]}, None,
     ["ip saddr 10.8.4.0/24 ip daddr 10.0.0.0/8 tcp dport 443 accept",
      "ip saddr 192.0.2.0/24 ip daddr 10.8.4.0/24 tcp dport 22 accept",
      "# spec.egressRules[0].to: 2001:db8::/32 left out: the node network is IPv4",
      "# spec.egressRules[1]: left out, none of its destinations is IPv4",
      "# spec.ingressRules[0].from: 2001:db8::/32 left out"],
     ["ip6 daddr"]),
    ("everything-to-everywhere", "2001:db8:4::/64",
     {"egressPolicy": "deny", "egressRules": [{"ports": [1, 65535], "to": ["::/0", "0.0.0.0/0"]}],
      "ingressRules": [{"ports": [65535], "from": ["::/0"], "to": ["2001:db8:4::1/128"]}]}, None,
     ["ip6 saddr 2001:db8:4::/64 ip6 daddr ::/0 tcp dport { 1, 65535 } accept",
      "ip6 saddr ::/0 ip6 daddr 2001:db8:4::1/128 tcp dport 65535 accept"],
     []),
    ("comments", "10.8.4.0/24",
     {"egressRules": [
         {"ports": [1], "to": ["10.0.0.0/8"], "comment": 'say "hello"; then } leave'},
         {"ports": [2], "to": ["10.0.0.0/8"], "comment": "line one\nline two\r\n\tthree"},
         {"ports": [3], "to": ["10.0.0.0/8"], "comment": "back\\slash # hash $var ${x} @set"},
         {"ports": [4], "to": ["10.0.0.0/8"], "comment": "Zugriff für DNS ☃"},
         {"ports": [5], "to": ["10.0.0.0/8"], "comment": "x" * 128},
         {"ports": [6], "to": ["10.0.0.0/8"], "comment": ""},
         {"ports": [7], "to": ["10.0.0.0/8"], "comment": "\n"},
         {"ports": [8], "to": ["10.0.0.0/8"], "comment": HOSTILE}]}, None,
     ['tcp dport 1 accept comment "say _hello_; then } leave"',
      'tcp dport 2 accept comment "line one line two three"',
      'tcp dport 3 accept comment "back_slash # hash $var ${x} @set"',
      'tcp dport 4 accept comment "Zugriff f_r DNS _"',
      f'tcp dport 5 accept comment "{"x" * 128}"',
      "tcp dport 6 accept\n", "tcp dport 7 accept\n",
      'tcp dport 8 accept comment "pwn_ accept; } } table inet evil { chain c { type filter hook input priority '
      '-300; policy accept; } } #"'],
     ["table inet evil {\n"]),
]


@pytest.mark.parametrize("node_network,spec,attached,present,absent", [r[1:] for r in RULESETS],
                         ids=[r[0] for r in RULESETS])
def test_rendered_ruleset_passes_nft_check(node_network: str, spec: dict, attached: dict | None,
                                           present: list[str], absent: list[str]) -> None:
    extra = parse_rule_object(attached) if attached is not None else None
    text = render_ruleset(node_network, parse_rules(spec), extra)
    for fragment in present:
        assert fragment in text, f"{fragment!r} not in:\n{text}"
    for fragment in absent:
        assert fragment not in text, f"{fragment!r} in:\n{text}"
    assert text == render_ruleset(node_network, parse_rules(spec), extra)  # the same text every time
    assert text.startswith("# nftables rule set of a MetalStackFirewall")
    assert "\t" not in text
    check_ruleset(text)


def test_render_is_safe_with_rules_made_without_parse_rules() -> None:
    """A rule built in Python (no parse_rules, no length check): its comment still cannot leave nft's string."""
    rule = EgressRule(ports=(443,), to=(ipaddress.ip_network("0.0.0.0/0"),), comment=(HOSTILE + "\n") * 5)
    text = render_ruleset("10.8.4.0/24", FirewallRules(egress_rules=(rule,)))
    line = next(line for line in text.splitlines() if "tcp dport 443" in line)
    assert line.endswith('"') and len(line.split('comment "')[1]) == 128 + 1
    check_ruleset(text)


def test_render_writes_networks_from_their_numbers() -> None:
    """A network built in Python with an IPv6 scope: the scope's text never reaches the rule set."""
    scoped = ipaddress.ip_network("2001:db8:9::%x } accept; table inet evil {/48")
    text = render_ruleset("2001:db8:4::/64", FirewallRules(
        egress_rules=(EgressRule(ports=(443,), to=(scoped,)),),
        ingress_rules=(IngressRule(ports=(22,), from_=(scoped,)),)))
    assert "ip6 saddr 2001:db8:4::/64 ip6 daddr 2001:db8:9::/48 tcp dport 443 accept" in text
    assert "ip6 saddr 2001:db8:9::/48 ip6 daddr 2001:db8:4::/64 tcp dport 22 accept" in text
    assert "evil" not in text and "%" not in text
    check_ruleset(text)


def test_check_ruleset_reports_nft_s_own_message() -> None:
    with pytest.raises(AssertionError, match=r"(?s)nft --check rejected.*Error: .*accpet"):
        check_ruleset("table inet t {\n chain c {\n  ip saddr 10.0.0.0/8 accpet\n }\n}\n")


def test_only_the_egress_policy_of_either_side_denies() -> None:
    allow = parse_rules({"egressPolicy": "allow"})
    deny = parse_rules({"egressPolicy": "deny"})
    assert 'accept comment "node network egress"' in render_ruleset("10.8.4.0/24", allow, FirewallRules())
    assert 'accept comment "node network egress"' not in render_ruleset("10.8.4.0/24", allow, deny)
    assert 'accept comment "node network egress"' not in render_ruleset("10.8.4.0/24", deny, allow)


def user_data(text: str, hostname: str | None = None) -> dict[str, Any]:
    rendered = firewall_user_data(text, hostname)
    assert rendered.startswith("#cloud-config\n")
    loaded = yaml.safe_load(rendered)
    assert isinstance(loaded, dict)
    return loaded


def test_user_data_writes_and_applies_the_ruleset() -> None:
    text = render_ruleset("10.8.4.0/24", parse_rules({"egressRules": [EGRESS]}))
    data = user_data(text, "fw-1.cluster.example")
    assert list(data) == ["hostname", "fqdn", "preserve_hostname", "write_files", "runcmd"]
    assert (data["hostname"], data["fqdn"]) == ("fw-1", "fw-1.cluster.example")
    files = {f["path"]: f for f in data["write_files"]}
    assert files[NFTABLES_CONF]["content"] == text  # verbatim
    assert files[NFTABLES_CONF]["permissions"] == "0644"
    assert "net.ipv4.ip_forward = 1" in files[FORWARDING_CONF]["content"]
    assert "net.ipv6.conf.all.forwarding = 1" in files[FORWARDING_CONF]["content"]
    runcmd = data["runcmd"]
    assert any("systemctl enable nftables" in " ".join(command) for command in runcmd)
    # the rule set as a literal block, readable in the user data
    assert "content: |\n    # nftables rule set" in firewall_user_data(text)
    assert "hostname" not in user_data(text)
    odd = "tab\there \ntrailing space \n'quotes\" and # hash: colon\n"  # not a literal block: quoted, still verbatim
    assert user_data(odd)["write_files"][-1]["content"] == odd


def test_forwarding_is_enabled_only_after_the_rules_applied() -> None:
    """Issue 30 item 8: the firewall fails closed. Forwarding's settings are not in /etc/sysctl.d (systemd-sysctl
    applies that at every boot, before any rule set loads); the first boot turns forwarding on only when ``nft -f``
    succeeded, in the same command; later boots only in nftables.service's ExecStartPost, which systemd runs only
    when the rules loaded; nothing runs sysctl before the rules."""
    data = user_data(render_ruleset("10.8.4.0/24", parse_rules({"egressRules": [EGRESS]})))
    files = {f["path"]: f for f in data["write_files"]}
    assert not any(path.startswith(("/etc/sysctl.d/", "/usr/lib/sysctl.d/", "/run/sysctl.d/")) or
                   path == "/etc/sysctl.conf" for path in files)
    commands = [" ".join(command) for command in data["runcmd"]]
    assert commands[0] == f"sh -c nft -f {NFTABLES_CONF} && sysctl -p {FORWARDING_CONF}"
    assert not any("sysctl" in command for command in commands[1:])
    assert files[NFTABLES_DROP_IN]["content"] == \
        f"[Service]\nExecStartPost=/bin/sh -c 'sysctl -p {FORWARDING_CONF}'\n"


@pytest.mark.parametrize(("nft_status", "forwarding"), [(1, False), (0, True)])
def test_the_first_boots_commands_leave_forwarding_off_when_nft_fails(tmp_path, nft_status, forwarding) -> None:
    """The runcmd as cloud-init runs it (each list an argv, run in order), with ``nft`` and ``sysctl`` replaced by
    stand-ins that record their call: an ``nft -f`` that fails leaves forwarding off."""
    calls = tmp_path / "calls"
    for name, status in (("nft", nft_status), ("sysctl", 0), ("systemctl", 1)):
        stub = tmp_path / name
        stub.write_text(f'#!/bin/sh\necho "{name} $*" >> {calls}\nexit {status}\n')
        stub.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    for command in user_data(render_ruleset("10.8.4.0/24", parse_rules({"egressRules": [EGRESS]})))["runcmd"]:
        subprocess.run(command, env=env, check=False)
    recorded = calls.read_text().splitlines()
    assert recorded[0] == f"nft -f {NFTABLES_CONF}"
    assert (f"sysctl -p {FORWARDING_CONF}" in recorded) is forwarding
    assert not any(line.startswith("sysctl") for line in recorded[:1])


def test_a_hostile_comment_injects_neither_yaml_nor_nft() -> None:
    benign = render_ruleset("10.8.4.0/24", parse_rules({"egressRules": [{**EGRESS, "comment": "benign"}]}))
    hostile_yaml = "x\nruncmd: [[rm, -rf, /]]\nwrite_files: []\n- path: /etc/cron.d/injected"
    for comment in (HOSTILE, hostile_yaml, HOSTILE[:70] + "\n" + hostile_yaml[:50]):
        text = render_ruleset("10.8.4.0/24", parse_rules({"egressRules": [{**EGRESS, "comment": comment}]}))
        # one line differs from the benign rule set, the rule's own
        assert len(text.splitlines()) == len(benign.splitlines()), text
        changed = [(a, b) for a, b in zip(benign.splitlines(), text.splitlines(), strict=True) if a != b]
        assert len(changed) == 1, text
        assert changed[0][1].strip().startswith("ip saddr 10.8.4.0/24 ip daddr 0.0.0.0/0 tcp dport 443 accept comment")
        check_ruleset(text)
        data = user_data(text)
        assert list(data) == ["write_files", "runcmd"]
        assert [f["path"] for f in data["write_files"]] == [FORWARDING_CONF, NFTABLES_DROP_IN, NFTABLES_CONF]
        assert data["write_files"][-1]["content"] == text
        assert data["runcmd"] == user_data(benign)["runcmd"]
    hostile = parse_rules({"egressRules": [{**EGRESS, "comment": HOSTILE}]})
    applied = apply_ruleset(render_ruleset("10.8.4.0/24", hostile))
    assert applied.tables() == {("inet", "metal3-firewall"), ("ip", "metal3-firewall-nat")}


# cloud-init 22.4 (Debian 12) calls jsonschema the way jsonschema 4.x deprecates
@pytest.mark.filterwarnings("ignore:Passing a schema to Validator.iter_errors:DeprecationWarning")
def test_user_data_passes_cloud_init_s_own_schema() -> None:
    """Debian's cloud-init (tests/harness/cloud_init.py) validates the user data against its schema, strictly."""
    cloud_init.modules()  # its package on sys.path
    schema = importlib.import_module("cloudinit.config.schema")
    text = render_ruleset("2001:db8:4::/64", parse_rules({"egressRules": [{**EGRESS, "comment": HOSTILE}]}))
    for hostname in (None, "fw-1.cluster.example"):
        schema.validate_cloudconfig_schema(user_data(text, hostname), schema=schema.get_schema(), strict=True)
    broken = {**user_data(text), "runcmd": "nft -f /etc/nftables.conf"}
    with pytest.raises(schema.SchemaValidationError):  # it does check
        schema.validate_cloudconfig_schema(broken, schema=schema.get_schema(), strict=True)


@pytest.mark.parametrize("hostname", ["fw\nruncmd: [x]", "FW", "fw_1", "-fw", ""])
def test_user_data_refuses_a_hostname_that_is_none(hostname: str) -> None:
    with pytest.raises(Invalid, match="^hostname: "):
        firewall_user_data("", hostname)


def test_applied_for_real_twice() -> None:
    """The rule set applied twice in a fresh network namespace (after another program's table, which it leaves
    alone): drop policies in, the node network's forward accept and its masquerade in place, once."""
    spec = {"ingressRules": [{"ports": [22], "from": ["192.0.2.0/24"], "comment": "ssh"}]}
    text = render_ruleset("10.8.4.0/24", parse_rules(spec))
    other = "table inet other {\n chain c {\n  type filter hook input priority 10; policy accept;\n }\n}\n"
    applied = apply_ruleset(text, times=2, before=other)
    assert applied.tables() == {("inet", "other"), ("inet", "metal3-firewall"), ("ip", "metal3-firewall-nat")}
    assert applied.chain("inet", "metal3-firewall", "input")["policy"] == "drop"
    assert applied.chain("inet", "metal3-firewall", "input")["hook"] == "input"
    assert applied.chain("inet", "metal3-firewall", "forward")["policy"] == "drop"
    assert applied.chain("ip", "metal3-firewall-nat", "postrouting")["type"] == "nat"
    assert applied.text.count('ip saddr 10.8.4.0/24 accept comment "node network egress"') == 1
    assert applied.text.count('ip saddr 192.0.2.0/24 ip daddr 10.8.4.0/24 tcp dport 22 accept comment "ssh"') == 1
    assert applied.text.count("ip saddr 10.8.4.0/24 ip daddr != 10.8.4.0/24 masquerade") == 1


def test_applied_over_another_family_replaces_the_nat_table() -> None:
    """A node network that went from IPv4 to IPv6: the IPv4 NAT table goes, the IPv6 one comes."""
    before = render_ruleset("10.8.4.0/24", FirewallRules())
    applied = apply_ruleset(render_ruleset("2001:db8:4::/64", FirewallRules()), before=before)
    assert applied.tables() == {("inet", "metal3-firewall"), ("ip6", "metal3-firewall-nat")}
    assert applied.chain("inet", "metal3-firewall", "input")["policy"] == "drop"
    assert 'ip6 saddr 2001:db8:4::/64 accept comment "node network egress"' in applied.text
    assert "ip saddr 10.8.4.0/24" not in applied.text
