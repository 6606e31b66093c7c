"""ip-address-manager's own test cases, carried over: each relevant case of its ``ipam/ippool_manager_test.go``
and ``internal/webhooks/v1alpha1/ippool_webhook_test.go`` - the input, and upstream's expected outcome - in
this collection's terms.

Each id starts with upstream's name of the case. Where the collection differs from upstream on purpose, the case
asserts our behaviour and its id says ``[ours: ...]``; docs/ipam.md's "Where we differ from ip-address-manager, on
purpose" lists the same differences. Pools upstream's webhook accepts are accepted, those we think risky (a
gateway off its entry's network, a range beyond the network its prefix defines) with a warning, and allocated as
upstream allocates them. Facts carry over; names are made object names: upstream's
claim ``TestRef`` is ``testref`` here, its pools have the ``namePrefix`` its CRD requires.

Not carried over: the webhook's nil-object cases (there is always a stored pool to compare with), the Go
helpers' own cases (isIPInRange, finalizer and owner-reference helpers), and the manager's cases about its
in-memory status cache ("Already exists": upstream trusts ``status.indexes``; ours finds the claim's IPAddress).
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import (
    CAPI_IPAM_API,
    CLAIM_LABEL,
    CONFLICTING_REQUEST,
    EXHAUSTED,
    IPAM_API,
    POOL_LABEL,
    REQUESTED_NOT_AVAILABLE,
    admit_ip_pool,
    reconcile_ip_address_claim,
    reconcile_ip_claim,
    reconcile_ip_pool,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.pools import address_name, check_update, parse_pool
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

NS = "myns"
POOL = "abc"


def pool_object(spec: dict, name: str = POOL) -> dict:
    return {"apiVersion": IPAM_API, "kind": "IPPool", "metadata": {"name": name, "namespace": NS},
            "spec": {"namePrefix": "abcpref", **spec}}


# -- the webhook: ippool_webhook_test.go, TestIPPoolValidation (create) ----------------------------------------

START, END = "192.168.0.10", "192.168.0.20"
BAD_START, BAD_END = "192.168.0.149", "192.168.0.140"
SUBNET, LARGE_V6_SUBNET = "192.168.0.0/24", "2001:db8::/32"

# id, spec, None when accepted or the refusal (a regular expression)
CREATE = [
    ("should succeed when values and templates correct", {}, None),
    ("should succeed when start <= end", {"pools": [{"start": START, "end": END}]}, None),
    ("should succeed when start == end", {"pools": [{"start": START, "end": START}]}, None),
    ("should fail when start > end", {"pools": [{"start": BAD_START, "end": BAD_END}]},
     r"spec\.pools\[0\]\.start: Invalid value: '192\.168\.0\.149': after end '192\.168\.0\.140'"),
    ("should succeed when only start is provided", {"pools": [{"start": START}]}, None),
    ("should succeed when only end is provided", {"pools": [{"end": END}]}, None),
    ("should fail when one pool has invalid range",
     {"pools": [{"start": START, "end": END}, {"start": BAD_START, "end": BAD_END}]}, r"spec\.pools\[1\]\.start"),
    ("should fail with malformed start IP address", {"pools": [{"start": "not-an-ip", "end": END}]},
     r"spec\.pools\[0\]\.start: Invalid value: 'not-an-ip': not an IP address"),
    ("should fail with invalid IP format in start", {"pools": [{"start": "256.256.256.256", "end": END}]},
     r"spec\.pools\[0\]\.start: Invalid value: '256\.256\.256\.256'"),
    ("should fail with malformed end IP address", {"pools": [{"start": START, "end": "not-an-ip"}]},
     r"spec\.pools\[0\]\.end: Invalid value: 'not-an-ip'"),
    ("should fail with malformed gateway IP", {"gateway": "invalid-gateway"},
     r"spec\.gateway: Invalid value: 'invalid-gateway': not an IP address"),
    ("should fail with malformed DNS server IP", {"dnsServers": ["not-an-ip"]},
     r"spec\.dnsServers\[0\]: Invalid value: 'not-an-ip'"),
    ("should fail with malformed preAllocation IP", {"preAllocations": {"test": "not-an-ip"}},
     r"spec\.preAllocations\[test\]: Invalid value: 'not-an-ip'"),
    ("should fail with malformed subnet CIDR", {"pools": [{"subnet": "not-a-cidr"}]},
     r"spec\.pools\[0\]\.subnet: Invalid value: 'not-a-cidr': not a CIDR"),
    # upstream: the entry names none of start, end or subnet (and the gateway is malformed): refused for the first
    ("should fail with malformed pool-specific gateway IP", {"pools": [{"gateway": "invalid-gateway"}]},
     r"spec\.pools\[0\]: Required value: pool entry must specify at least one of start, end, or subnet"),
    ("should fail with malformed pool-specific DNS server IP", {"pools": [{"dnsServers": ["not-an-ip"]}]},
     r"spec\.pools\[0\]: Required value"),
    ("should succeed with valid gateway IP", {"gateway": "192.168.0.1"}, None),
    ("should succeed with unique preAllocation IPs",
     {"pools": [{"subnet": SUBNET}],
      "preAllocations": {"claim1": "192.168.0.10", "claim2": "192.168.0.11", "claim3": "192.168.0.12"}}, None),
    ("should fail when preAllocation is outside the declared pools at create",
     {"pools": [{"subnet": SUBNET}], "preAllocations": {"claim1": "10.0.0.5"}},
     r"spec\.preAllocations\[claim1\]: Invalid value: '10\.0\.0\.5': outside every pool entry"),
    ("should succeed with random strategy when pool is bounded by start and end",
     {"allocationStrategy": "random", "pools": [{"start": START, "end": END}]}, None),
    ("should succeed with random strategy when pool is bounded by subnet only",
     {"allocationStrategy": "random", "pools": [{"subnet": SUBNET}]}, None),
    ("should succeed with random strategy when pool is bounded by start and subnet",
     {"allocationStrategy": "random", "pools": [{"start": START, "subnet": SUBNET}]}, None),
    ("should fail with random strategy when pool is unbounded (start only)",
     {"allocationStrategy": "random", "pools": [{"start": START}]},
     r'^IPPool\.ipam\.metal3\.io "abc" is invalid: spec\.pools\[0\]: Invalid value: "": cannot be used with '
     r'allocationStrategy "random": pool with Start requires End or Subnet to determine size$'),
    ("should fail with random strategy when one pool is unbounded",
     {"allocationStrategy": "random", "pools": [{"start": START, "end": END}, {"start": START}]},
     r'spec\.pools\[1\]: Invalid value: "": cannot be used with allocationStrategy "random"'),
    ("should fail with random strategy when pool is too large to index",
     {"allocationStrategy": "random", "pools": [{"subnet": LARGE_V6_SUBNET}]},
     r'spec\.pools\[0\]: Invalid value: "": cannot be used with allocationStrategy "random": pool size exceeds '
     r"int range$"),
    ("should succeed with sequential strategy when pool is unbounded (start only)",
     {"allocationStrategy": "sequential", "pools": [{"start": START}]}, None),
    ("should fail when multiple claims have the same preAllocated IP",
     {"pools": [{"start": START}], "preAllocations": {"claim1": "192.168.0.10", "claim2": "192.168.0.10"}},
     r"spec\.preAllocations\[claim2\]: Invalid value: '192\.168\.0\.10': IP address is already pre-allocated to "
     r'claim "claim1"'),
    ("should fail when IPv6 preAllocations differ only in textual representation",
     {"pools": [{"start": START}],
      "preAllocations": {"claim1": "2001:db8::1", "claim2": "2001:0db8:0000:0000:0000:0000:0000:0001"}},
     r'IP address is already pre-allocated to claim "claim1"'),
    ("should succeed when IPv6 preAllocations are genuinely different",
     {"pools": [{"subnet": LARGE_V6_SUBNET}], "preAllocations": {"claim1": "2001:db8::1", "claim2": "2001:db8::2"}},
     None),
]


@pytest.mark.parametrize(("spec", "refusal"), [c[1:] for c in CREATE], ids=[c[0] for c in CREATE])
def test_the_webhook_on_create(spec, refusal):
    if refusal is None:
        parse_pool(pool_object(spec))
        return
    with pytest.raises(Invalid, match=refusal):
        parse_pool(pool_object(spec))


# -- the webhook: TestIPPoolUpdateValidation ----------------------------------------------------------------

U_START, U_END, U_SUBNET, U_V6 = "192.168.0.1", "192.168.0.10", "192.168.0.1/25", "2001:db8::/64"
IN_USE = ["192.168.0.3"]

# id, old spec, addresses in use (the old pool's status.indexes), new spec, None or the refusal
UPDATE = [
    ("should succeed when values and templates correct", {}, [], {}, None),
    ("should fail when namePrefix value changes", {"namePrefix": "abcd"}, [], {"namePrefix": "abcde"},
     r"spec\.namePrefix: Invalid value: 'abcde': field is immutable \(was 'abcd'\)"),
    ("should fail when updating to invalid range (start > end)", {}, [],
     {"pools": [{"start": BAD_START, "end": BAD_END}]}, r"spec\.pools\[0\]\.start: .* after end"),
    ("should succeed when updating to valid range", {}, [], {"pools": [{"start": U_START, "end": U_END}]}, None),
    ("should succeed when preAllocations are between start and end", {}, IN_USE,
     {"pools": [{"start": U_START, "end": U_END}], "preAllocations": {"alloc": "192.168.0.2"}}, None),
    ("should fail when preAllocations are out of start and end", {}, IN_USE,
     {"pools": [{"start": U_START, "end": U_END}], "preAllocations": {"alloc": "192.168.0.20"}},
     r"spec\.preAllocations\[alloc\]: Invalid value: '192\.168\.0\.20': outside every pool entry"),
    # a subnet written with host bits (192.168.0.1/25) starts at the written address + 1, 192.168.0.2
    ("should succeed when preAllocations are in the cidr", {}, IN_USE,
     {"pools": [{"subnet": U_SUBNET}], "preAllocations": {"alloc": "192.168.0.2"}}, None),
    ("should fail when preAllocations are out of cidr", {}, IN_USE,
     {"pools": [{"subnet": U_SUBNET}], "preAllocations": {"alloc": "192.168.0.250"}},
     r"spec\.preAllocations\[alloc\]: .* outside every pool entry"),
    ("should fail when allocationStrategy changes", {"allocationStrategy": "sequential"}, [],
     {"allocationStrategy": "random"}, r"spec\.allocationStrategy: Invalid value: 'random': field is immutable"),
    ("should succeed when allocationStrategy stays the same", {"allocationStrategy": "random"}, [],
     {"allocationStrategy": "random"}, None),
    ("should fail when ip in use", {}, ["192.168.0.30"],
     {"pools": [{"start": U_START, "end": U_END}], "preAllocations": {"alloc": "192.168.0.2"}},
     r"spec\.pools: Forbidden: allocated addresses would fall outside the pool: 192\.168\.0\.30"),
    ("should succeed when update has unique preAllocation IPs", {"pools": [{"start": U_START, "end": U_END}]}, [],
     {"pools": [{"start": U_START, "end": U_END}],
      "preAllocations": {"claim1": "192.168.0.2", "claim2": "192.168.0.3"}}, None),
    ("should fail when update has duplicate preAllocation IPs", {"pools": [{"start": U_START, "end": U_END}]}, [],
     {"pools": [{"start": U_START, "end": U_END}],
      "preAllocations": {"claim1": "192.168.0.2", "claim2": "192.168.0.2"}},
     r'spec\.preAllocations\[claim2\]: .* IP address is already pre-allocated to claim "claim1"'),
    ("should fail when update has IPv6 duplicates with different textual representation",
     {"pools": [{"subnet": U_V6}]}, [],
     {"pools": [{"start": U_START, "end": U_END}],
      "preAllocations": {"claim1": "2001:db8::1", "claim2": "2001:0db8:0000:0000:0000:0000:0000:0001"}},
     r'IP address is already pre-allocated to claim "claim1"'),
    ("should succeed when IPv6 preAllocations are genuinely different", {"pools": [{"subnet": U_V6}]}, [],
     {"pools": [{"subnet": U_V6}], "preAllocations": {"claim1": "2001:db8::1", "claim2": "2001:db8::2"}}, None),
]


@pytest.mark.parametrize(("old", "in_use", "new", "refusal"), [c[1:] for c in UPDATE], ids=[c[0] for c in UPDATE])
def test_the_webhook_on_update(old, in_use, new, refusal):
    if refusal is None:
        check_update(pool_object(old), pool_object(new), in_use)
        return
    with pytest.raises(Invalid, match=refusal):
        check_update(pool_object(old), pool_object(new), in_use)


# -- allocation: ippool_manager_test.go, "Test AllocateAddress" and "Test capiAllocateAddress" -------------------


@dataclass(frozen=True)
class Gets:
    """The claim gets ``address``; its IPAddress has ``prefix`` (None: none), ``gateway`` and ``dns``."""

    address: str | tuple[str, ...]  # a tuple: any one of them (random allocation)
    prefix: int | None = None
    gateway: str | None = None
    dns: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fails:
    """The claim gets no address, and its status says ``message`` (an IPAddressClaim's Ready condition, with
    the contract's reason)."""

    message: str

    @property
    def reason(self) -> str:
        return "PoolExhausted" if self.message == EXHAUSTED else "AllocationFailed"


@dataclass(frozen=True)
class RefusedAtApply:
    """The pool itself is refused when it is applied, naming the field (a regular expression)."""

    refusal: str


@dataclass(frozen=True)
class Case:
    id: str
    spec: dict
    outcome: Gets | Fails | RefusedAtApply
    claim: str = "testref"
    requested: str | None = None
    taken: tuple[str, ...] = ()  # addresses other claims of the pool hold


# CAPM3's example cluster template's pool2 (examples/templates/cluster.yaml).
CAPM3_POOL2 = {"pools": [{"subnet": "192.168.1.0/24"}], "prefix": 25, "gateway": "192.168.1.1"}

# The pool of most of upstream's allocation cases: 192.168.0.11-20, prefix and gateway from the pool.
ONE_POOL = {"pools": [{"start": "192.168.0.11", "end": "192.168.0.20"}], "prefix": 24, "gateway": "192.168.0.1"}
TAKEN = ("192.168.0.11", "192.168.0.12")

ALLOCATE = [
    Case("Empty pools", {}, Fails(EXHAUSTED), claim="abc"),
    Case("One pool, pre-allocated (entry 0's gateway off its /26: accepted, with a warning)",
         {"pools": [{"start": "192.168.0.11", "end": "192.168.0.20", "prefix": 26, "gateway": "192.168.1.1",
                     "dnsServers": ["8.8.8.8"]},
                    {"start": "192.168.0.21", "end": "192.168.0.30"}],
          "preAllocations": {"testref": "192.168.0.21"}, "prefix": 24, "gateway": "192.168.0.1",
          "dnsServers": ["8.8.4.4"]},
         Gets("192.168.0.21", 24, "192.168.0.1", ("8.8.4.4",))),
    Case("One pool, IPv6 pre-allocated (non-canonical)",
         {"pools": [{"start": "2001:db8::1", "end": "2001:db8::a"}], "preAllocations": {"testref": "2001:db8::0005"},
          "prefix": 64, "gateway": "2001:db8::ffff", "dnsServers": ["2001:4860:4860::8888"]},
         Gets("2001:db8::5", 64, "2001:db8::ffff", ("2001:4860:4860::8888",))),
    Case("One pool, pre-allocated, with overrides (the entry's gateway off its /26: accepted, with a warning)",
         {"pools": [{"start": "192.168.0.11", "end": "192.168.0.20", "prefix": 26, "gateway": "192.168.1.1",
                     "dnsServers": ["8.8.8.8"]}],
          "preAllocations": {"testref": "192.168.0.15"}, "prefix": 24, "gateway": "192.168.0.1",
          "dnsServers": ["8.8.4.4"]},
         Gets("192.168.0.15", 26, "192.168.1.1", ("8.8.8.8",))),
    # Upstream's webhook refuses this pool too; its allocator's "Pre-allocated IP out of bounds" is for a pool that
    # got past the webhook.
    Case("One pool, pre-allocated, out of bounds - refused at apply, as upstream's webhook does",
         {"pools": [{"start": "192.168.0.11", "end": "192.168.0.20", "prefix": 26, "gateway": "192.168.1.1"}],
          "preAllocations": {"testref": "192.168.0.21"}, "prefix": 24, "gateway": "192.168.0.1"},
         RefusedAtApply(r"spec\.preAllocations\[testref\]: Invalid value: '192\.168\.0\.21': outside every pool "
                        r"entry")),
    Case("One pool, with start and existing address", ONE_POOL, Gets("192.168.0.13", 24, "192.168.0.1"),
         taken=TAKEN),
    Case("One pool, with start and existing address, ipAddress annotation present", ONE_POOL,
         Gets("192.168.0.16", 24, "192.168.0.1"), requested="192.168.0.16", taken=TAKEN),
    Case("One pool, with start and existing address, ipAddress annotation present but already acquired", ONE_POOL,
         Fails(REQUESTED_NOT_AVAILABLE), requested="192.168.0.11", taken=TAKEN),
    Case("One pool, with start and existing address, ipAddress annotation present and requested ipAddress in "
         "preAllocations with conflicting ipclaim name",
         {**ONE_POOL, "preAllocations": {"testref": "192.168.0.15"}}, Fails(CONFLICTING_REQUEST),
         requested="192.168.0.16", taken=TAKEN),
    Case("One pool, with start and existing address, ipAddress annotation present and requested ipAddress in "
         "preAllocations with non-conflicting ipclaim name",
         {**ONE_POOL, "preAllocations": {"testref": "192.168.0.16"}}, Gets("192.168.0.16", 24, "192.168.0.1"),
         requested="192.168.0.16", taken=TAKEN),
    Case("One pool, with subnet and override prefix",
         {"pools": [{"start": "192.168.0.11", "end": "192.168.0.20", "prefix": 24, "gateway": "192.168.0.1",
                     "dnsServers": ["8.8.8.8"]}],
          "prefix": 26, "gateway": "192.168.1.1", "dnsServers": ["8.8.4.4"]},
         Gets("192.168.0.13", 24, "192.168.0.1", ("8.8.8.8",)), taken=TAKEN),
    # The subnet is written with host bits: 192.168.1.10/24 starts at 192.168.1.11 (taken), as upstream's. Entry 1
    # goes beyond the /26 the pool's prefix makes, and the gateways are off their entries' networks: accepted, with
    # warnings, and allocated as upstream allocates.
    Case("two pools, with subnet and override prefix in first",
         {"pools": [{"start": "192.168.0.10", "end": "192.168.0.10", "prefix": 24, "gateway": "192.168.1.1",
                     "dnsServers": ["8.8.8.8"]},
                    {"subnet": "192.168.1.10/24"}],
          "prefix": 26, "gateway": "192.168.2.1", "dnsServers": ["8.8.4.4"]},
         Gets("192.168.1.12", 26, "192.168.2.1", ("8.8.4.4",)), taken=("192.168.1.11", "192.168.0.10")),
    Case("two pools, with subnet and override prefix",
         {"pools": [{"start": "192.168.0.10", "end": "192.168.0.10"},
                    {"subnet": "192.168.1.10/24", "prefix": 24, "gateway": "192.168.1.1", "dnsServers": ["8.8.8.8"]}],
          "prefix": 26, "gateway": "192.168.2.1", "dnsServers": ["8.8.4.4"]},
         Gets("192.168.1.12", 24, "192.168.1.1", ("8.8.8.8",)), taken=("192.168.1.11", "192.168.0.10")),
    Case("Exhausted pools start",
         {"pools": [{"start": "192.168.0.10", "end": "192.168.0.10"}], "prefix": 24, "gateway": "192.168.0.1"},
         Fails(EXHAUSTED), taken=("192.168.0.10",)),
    Case("Exhausted pools subnet [ours: 192.168.0.1, the gateway, and 192.168.0.3, the broadcast address, are "
         "never handed out; the outcome is upstream's]",
         {"pools": [{"subnet": "192.168.0.0/30"}], "prefix": 24, "gateway": "192.168.0.1"},
         Fails(EXHAUSTED), taken=("192.168.0.1", "192.168.0.2", "192.168.0.3")),
    Case("Invalid ipAddress annotation", ONE_POOL,
         Fails('Invalid ipAddress annotation "not-a-valid-ip": not a valid IP address'), requested="not-a-valid-ip"),
    # The issue's case: an address outside every entry is "Exhausted IP Pools" upstream, not "Requested IP not
    # available" (that is for an address of the pool another claim holds).
    Case("requested address outside every entry", ONE_POOL, Fails(EXHAUSTED), requested="10.9.9.9"),
    Case("requested address pre-allocated to another claim", {**ONE_POOL, "preAllocations": {"other": "192.168.0.15"}},
         Fails(REQUESTED_NOT_AVAILABLE), requested="192.168.0.15"),
    # -- Random allocation strategy ("Context: Random allocation strategy") --
    Case("Random: should allocate an IP within pool range",
         {"allocationStrategy": "random", "pools": [{"start": "192.168.0.10", "end": "192.168.0.20"}], "prefix": 24,
          "gateway": "192.168.0.1"},
         Gets(tuple(f"192.168.0.{i}" for i in range(10, 21)), 24, "192.168.0.1")),
    Case("Random: should allocate the last remaining IP in a nearly full pool",
         {"allocationStrategy": "random", "pools": [{"start": "192.168.0.10", "end": "192.168.0.14"}], "prefix": 24,
          "gateway": "192.168.0.1"},
         Gets("192.168.0.12", 24, "192.168.0.1"), taken=("192.168.0.10", "192.168.0.11", "192.168.0.13",
                                                         "192.168.0.14")),
    Case("Random: should return error when pool is exhausted",
         {"allocationStrategy": "random", "pools": [{"start": "192.168.0.10", "end": "192.168.0.12"}], "prefix": 24,
          "gateway": "192.168.0.1"},
         Fails(EXHAUSTED), taken=("192.168.0.10", "192.168.0.11", "192.168.0.12")),
    Case("Random: should respect PreAllocations even with random strategy",
         {"allocationStrategy": "random", "pools": [{"start": "192.168.0.10", "end": "192.168.0.20"}], "prefix": 24,
          "gateway": "192.168.0.1", "preAllocations": {"testref": "192.168.0.15"}},
         Gets("192.168.0.15", 24, "192.168.0.1")),
    Case("Random: should respect requestedIP annotation even with random strategy",
         {"allocationStrategy": "random", "pools": [{"start": "192.168.0.10", "end": "192.168.0.20"}], "prefix": 24,
          "gateway": "192.168.0.1"},
         Gets("192.168.0.16", 24, "192.168.0.1"), requested="192.168.0.16"),
    Case("Random: should select the only available IP when others are already allocated",
         {"allocationStrategy": "random", "pools": [{"start": "192.168.0.10", "end": "192.168.0.12"}], "prefix": 24,
          "gateway": "192.168.0.1"},
         Gets("192.168.0.11", 24, "192.168.0.1"), claim="claim-b", taken=("192.168.0.10", "192.168.0.12")),
    Case("Random: should error with exhausted IP pools when no IP is available",
         {"allocationStrategy": "random", "pools": [{"start": "192.168.0.10", "end": "192.168.0.11"}], "prefix": 24,
          "gateway": "192.168.0.1"},
         Fails(EXHAUSTED), claim="claim-c", taken=("192.168.0.10", "192.168.0.11")),
    # -- What the webhook now accepts, allocated as upstream allocates it (issue 13) --
    Case("only start, no prefix anywhere: start, then on; the IPAddress has no prefix",
         {"pools": [{"start": "192.168.0.10"}]}, Gets("192.168.0.12"), taken=("192.168.0.10", "192.168.0.11")),
    Case("start and end, no prefix anywhere", {"pools": [{"start": "192.168.0.10", "end": "192.168.0.20"}]},
         Gets("192.168.0.10")),
    Case("only end: no address from that entry", {"pools": [{"end": "192.168.0.20"},
                                                            {"start": "10.0.0.5", "end": "10.0.0.6"}], "prefix": 24},
         Gets("10.0.0.5", 24)),
    Case("only end, alone: Exhausted IP Pools", {"pools": [{"end": "192.168.0.20"}]}, Fails(EXHAUSTED)),
    Case("subnet written with host bits: the written address + 1", {"pools": [{"subnet": "192.168.1.10/24"}]},
         Gets("192.168.1.11", 24)),
    # -- Where we differ on purpose --
    Case("[ours: the gateway is never handed out by allocation] subnet with the gateway first",
         {"pools": [{"subnet": "192.168.0.0/29"}], "gateway": "192.168.0.1"}, Gets("192.168.0.2", 29, "192.168.0.1")),
    Case("[ours: an ipAddress annotation asking for the gateway is refused, naming the annotation]",
         {"pools": [{"subnet": "192.168.0.0/29"}], "gateway": "192.168.0.1"},
         Fails('Invalid ipAddress annotation "192.168.0.1": the gateway of spec.pools[0], which is never handed out'),
         requested="192.168.0.1"),
    Case("[ours: the IPv4 broadcast address is never handed out] /30", {"pools": [{"subnet": "192.168.0.0/30"}]},
         Fails(EXHAUSTED), taken=("192.168.0.1", "192.168.0.2")),
    Case("[ours: the IPv4 broadcast address is never handed out] inside start and end",
         {"pools": [{"start": "192.168.0.254", "end": "192.168.0.255"}], "prefix": 24}, Fails(EXHAUSTED),
         taken=("192.168.0.254",)),
    Case("[ours: an ipAddress annotation asking for the broadcast address is refused, naming the annotation]",
         {"pools": [{"subnet": "192.168.0.0/24"}]},
         Fails('Invalid ipAddress annotation "192.168.0.255": the broadcast address of spec.pools[0], which is '
               "never handed out"), requested="192.168.0.255"),
    Case("[ours: /31 gives both addresses] the first", {"pools": [{"subnet": "10.0.0.0/31"}]}, Gets("10.0.0.0", 31)),
    Case("[ours: /31 gives both addresses] the second", {"pools": [{"subnet": "10.0.0.0/31"}]}, Gets("10.0.0.1", 31),
         taken=("10.0.0.0",)),
    Case("[ours: /127 gives both addresses]", {"pools": [{"subnet": "2001:db8::/127"}]}, Gets("2001:db8::", 127)),
    Case("[ours: only start ends with the network its prefix defines; upstream hands out 192.168.0.255, then "
         "192.168.1.0 and on]",
         {"pools": [{"start": "192.168.0.253"}], "prefix": 24}, Fails(EXHAUSTED),
         taken=("192.168.0.253", "192.168.0.254")),
    Case("[ours: end bounds an entry with a subnet; upstream reads end only beside start]",
         {"pools": [{"subnet": "192.168.0.0/24", "end": "192.168.0.2"}]}, Fails(EXHAUSTED),
         taken=("192.168.0.1", "192.168.0.2")),
    Case("[ours: a subnet with no prefix anywhere gives its own prefix; upstream's IPAddress has prefix 0]",
         {"pools": [{"subnet": "192.168.0.0/24"}]}, Gets("192.168.0.1", 24)),
    # -- CAPM3's example cluster template, pool2 (examples/templates/cluster.yaml): a /24 subnet, prefix 25 --
    Case("[ours: the gateway is never handed out; upstream gives 192.168.1.1] CAPM3's pool2, the first claim",
         CAPM3_POOL2, Gets("192.168.1.2", 25, "192.168.1.1")),
    Case("CAPM3's pool2: an address of the subnet's upper half, with prefix 25 and the pool's gateway, as upstream's",
         CAPM3_POOL2, Gets("192.168.1.200", 25, "192.168.1.1"), requested="192.168.1.200"),
    Case("CAPM3's pool2: the next after the lower half's addresses is 192.168.1.128, as upstream's "
         "[ours: 192.168.1.127, the broadcast address of the /25 the prefix makes there, is never handed out]",
         CAPM3_POOL2, Gets("192.168.1.128", 25, "192.168.1.1"),
         taken=tuple(f"192.168.1.{i}" for i in range(2, 127))),
    Case("[ours: a preAllocation of the gateway is refused at apply]",
         {"pools": [{"subnet": "192.168.0.0/24"}], "gateway": "192.168.0.1",
          "preAllocations": {"testref": "192.168.0.1"}},
         RefusedAtApply(r"spec\.preAllocations\[testref\]: Invalid value: '192\.168\.0\.1': the gateway of "
                        r"spec\.pools\[0\], which is never handed out")),
    Case("[ours: overlapping entries are refused]",
         {"pools": [{"start": "192.168.0.10", "end": "192.168.0.20"}, {"start": "192.168.0.15", "end": "192.168.0.30"}],
          "prefix": 24},
         RefusedAtApply(r"spec\.pools\[1\]: Invalid value: overlaps spec\.pools\[0\]")),
]


@pytest.fixture
def store(tmp_path):
    with LocalStore(str(tmp_path / "store.db")) as opened:
        yield opened


def apply_pool(store, spec: dict) -> dict:
    """The pool as ip_pool and resource apply it: admitted (upstream's webhook rules and ours), then created."""
    obj = pool_object(spec)
    admit_ip_pool(store, obj, None)
    return store.create(obj)


def hold(store, address: str, claim: str, indexed: bool = True) -> None:
    """An IPAddress of the pool that another claim holds, and the pool's index of it (upstream's cases give the
    allocator that index, a map address: claim); ``indexed=False``: an index that has not caught up."""
    if indexed:
        store.patch_status(Ref(IPAM_API, "IPPool", POOL, NS), {"status": {"indexes": {claim: address}}})
    store.create({"apiVersion": IPAM_API, "kind": "IPAddress",
                  "metadata": {"name": address_name("abcpref", address), "namespace": NS,
                               "labels": {POOL_LABEL: POOL, CLAIM_LABEL: claim}},
                  "spec": {"address": address, "pool": {"name": POOL, "namespace": NS},
                           "claim": {"name": claim, "namespace": NS}}})


def ask(store, kind: str, name: str, requested: str | None = None):
    metadata = {"name": name, "namespace": NS, "annotations": {"ipAddress": requested} if requested else {}}
    if kind == "IPClaim":
        store.create({"apiVersion": IPAM_API, "kind": kind, "metadata": metadata, "spec": {"pool": {"name": POOL}}})
        return reconcile_ip_claim(store, Ref(IPAM_API, kind, name, NS))
    store.create({"apiVersion": CAPI_IPAM_API, "kind": kind, "metadata": metadata,
                  "spec": {"poolRef": {"apiGroup": "ipam.metal3.io", "kind": "IPPool", "name": POOL}}})
    return reconcile_ip_address_claim(store, Ref(CAPI_IPAM_API, kind, name, NS))


def canonical(address: str) -> str:
    return str(ipaddress.ip_address(address))


@pytest.mark.parametrize("kind", ["IPClaim", "IPAddressClaim"])
@pytest.mark.parametrize("case", ALLOCATE, ids=[c.id for c in ALLOCATE])
def test_allocation(store, kind, case):
    if isinstance(case.outcome, RefusedAtApply):
        with pytest.raises(Invalid, match=case.outcome.refusal):
            apply_pool(store, case.spec)
        return
    apply_pool(store, case.spec)
    for i, address in enumerate(case.taken):
        hold(store, address, f"other-{i}")
    result = ask(store, kind, case.claim, case.requested)
    claim = (store.list(IPAM_API if kind == "IPClaim" else CAPI_IPAM_API, kind, NS))[0]
    if isinstance(case.outcome, Fails):
        assert (result.error, result.address) == (case.outcome.message, None)
        if kind == "IPClaim":
            assert claim["status"]["errorMessage"] == case.outcome.message
        else:
            ready = claim["status"]["conditions"][0]
            assert (ready["type"], ready["status"], ready["reason"], ready["message"]) == \
                ("Ready", "False", case.outcome.reason, case.outcome.message)
        return
    expected = case.outcome
    wanted = expected.address if isinstance(expected.address, tuple) else (expected.address,)
    spec = result.address["spec"]
    assert spec["address"] in wanted
    assert result.address["metadata"]["name"] == address_name("abcpref", spec["address"])
    if kind == "IPClaim":
        assert (spec.get("prefix"), spec.get("gateway"), tuple(spec.get("dnsServers") or ())) == \
            (expected.prefix, expected.gateway, expected.dns)
        assert claim["status"]["address"]["name"] == result.address["metadata"]["name"]
    else:  # the contract's IPAddress: named after the claim, prefix 0 when the pool sets none, no DNS servers
        answer = store.get(Ref(CAPI_IPAM_API, "IPAddress", case.claim, NS))["spec"]
        assert (answer["address"], answer["prefix"], answer.get("gateway")) == \
            (spec["address"], expected.prefix or 0, expected.gateway)
        assert claim["status"]["addressRef"] == {"name": case.claim}


def test_random_should_not_allocate_duplicate_ips(store):
    """Random: "should not allocate duplicate IPs with random strategy" - all 11 addresses, each once."""
    apply_pool(store, {"allocationStrategy": "random", "pools": [{"start": "192.168.0.10", "end": "192.168.0.20"}],
                       "prefix": 24, "gateway": "192.168.0.1"})
    got = [ask(store, "IPClaim", f"testref-{i}").address["spec"]["address"] for i in range(11)]
    assert sorted(got, key=ipaddress.ip_address) == [f"192.168.0.{i}" for i in range(10, 21)]


def test_random_multiple_claims_of_both_kinds_get_unique_ips(store):
    """UpdateAddresses: "Random strategy: multiple claims get unique IPs" (two IPClaims, one IPAddressClaim)."""
    apply_pool(store, {"allocationStrategy": "random", "pools": [{"start": "192.168.0.11", "end": "192.168.0.20"}],
                       "prefix": 24, "gateway": "192.168.0.1"})
    got = [ask(store, kind, name).address["spec"]["address"]
           for kind, name in (("IPClaim", "claim1"), ("IPClaim", "claim2"), ("IPAddressClaim", "caclaim1"))]
    assert len(set(got)) == 3
    assert all(ipaddress.ip_address("192.168.0.11") <= ipaddress.ip_address(a) <= ipaddress.ip_address("192.168.0.20")
               for a in got)


def test_random_picks_among_the_first_2_24_addresses_of_a_larger_pool(store):
    """[ours: random picks among a pool's first 2**24 addresses, the allocator's index; upstream among all]"""
    apply_pool(store, {"allocationStrategy": "random", "pools": [{"subnet": "2001:db8::/100"}]})
    for i in range(20):
        address = ipaddress.ip_address(ask(store, "IPClaim", f"c{i}").address["spec"]["address"])
        assert int(address) - int(ipaddress.ip_address("2001:db8::")) <= 1 << 24


def test_update_addresses_error_in_existing_claims_is_tried_again(store):
    """UpdateAddresses "Both IPClaim and IPAddressClaim present with error in existing claims" [ours: upstream's
    pool reconcile skips a claim whose status holds an error, for good; ours tries it again on each reconcile, so
    it gets an address once one is free]."""
    apply_pool(store, {"pools": [{"start": "192.168.0.11", "end": "192.168.0.11"}], "prefix": 24})
    assert ask(store, "IPClaim", "abce").address is not None
    assert ask(store, "IPClaim", "abcd").error == EXHAUSTED
    assert ask(store, "IPAddressClaim", "cabcd").error == EXHAUSTED
    ref = Ref(IPAM_API, "IPClaim", "abce", NS)
    store.delete(ref)
    reconcile_ip_claim(store, ref)
    assert reconcile_ip_claim(store, Ref(IPAM_API, "IPClaim", "abcd", NS)).address["spec"]["address"] == \
        "192.168.0.11"
    assert "errorMessage" not in store.get(Ref(IPAM_API, "IPClaim", "abcd", NS))["status"]


# -- "Test CreateAddresses": the IPAddress made, its name, and the pool's status.indexes ------------------------

CREATE_ADDRESSES = [
    ("Not allocated yet, pre-allocated", {"preAllocations": {"abc": "192.168.0.15"}}, (), "abcpref-192-168-0-15",
     {"abc": "192.168.0.15"}),
    ("Not allocated yet", {}, ("192.168.0.11",), "abcpref-192-168-0-12",
     {"bcd": "192.168.0.11", "abc": "192.168.0.12"}),
    # Upstream's allocator did not know of 192.168.0.11: its create collides and it requeues, creating nothing.
    ("Not allocated yet, conflict [ours: the create collides on the IPAddress name and the claim takes the next "
     "address in the same reconcile]", {"indexed": False}, ("192.168.0.11",), "abcpref-192-168-0-12",
     {"abc": "192.168.0.12"}),
]


@pytest.mark.parametrize(("spec", "taken", "name", "indexes"), [c[1:] for c in CREATE_ADDRESSES],
                         ids=[c[0] for c in CREATE_ADDRESSES])
def test_create_addresses(store, spec, taken, name, indexes):
    indexed = spec.pop("indexed", True)
    apply_pool(store, {"pools": [{"start": "192.168.0.11", "end": "192.168.0.20"}], **spec})
    for address in taken:
        hold(store, address, "bcd", indexed)
    result = ask(store, "IPClaim", "abc")
    assert result.address["metadata"]["name"] == name
    assert "prefix" not in result.address["spec"]  # no prefix anywhere: none, as upstream's (its 0 is left out)
    assert store.get(Ref(IPAM_API, "IPPool", POOL, NS))["status"]["indexes"] == indexes


def test_create_addresses_not_allocated_yet_exhausted_pool(store):
    apply_pool(store, {"pools": [{"start": "192.168.0.11", "end": "192.168.0.11"}]})
    hold(store, "192.168.0.11", "bcd")
    assert ask(store, "IPClaim", "abc").error == EXHAUSTED
    assert [a["metadata"]["name"] for a in store.list(IPAM_API, "IPAddress", NS)] == ["abcpref-192-168-0-11"]
    assert store.get(Ref(IPAM_API, "IPPool", POOL, NS))["status"]["indexes"] == {"bcd": "192.168.0.11"}


# -- the IPAddress name (the manager's formatAddressName) ---------------------------------------------------

NAMES = [
    ("abcpref", "192.168.0.15", "abcpref-192-168-0-15"),
    ("abcpref", "2001:db8::5", "abcpref-2001-db8--5"),
    ("s2", "2001:db8:2::", "s2-2001-db8-2"),  # ends in '::': the trailing '-' trimmed, as upstream
    ("p", "2001:db8::", "p-2001-db8"),
]


@pytest.mark.parametrize(("prefix", "address", "name"), NAMES, ids=[n[1] for n in NAMES])
def test_the_ip_address_name_is_upstreams(prefix, address, name):
    assert address_name(prefix, address) == name


def test_an_ip_address_ending_in_double_colon_gets_upstreams_name(store):
    apply_pool(store, {"pools": [{"start": "2001:db8:2::", "end": "2001:db8:2::"}], "prefix": 64})
    assert ask(store, "IPClaim", "c").address["metadata"]["name"] == "abcpref-2001-db8-2"


# -- "Test getIndexes", "Test UpdateAddresses", "Test DeleteAddresses": the pool's reconcile --------------------


def test_update_addresses_claim_and_ip_exist(store):
    """UpdateAddresses "Claim and IP exist": the pool's reconcile releases the claim being deleted (abcf) and
    writes the others' addresses as status.indexes; getIndexes: an IPAddress of another pool is not counted."""
    apply_pool(store, {"pools": [{"start": "192.168.1.11", "end": "192.168.1.20"}], "prefix": 24,
                       "gateway": "192.168.1.1"})
    store.create(pool_object({"namePrefix": "abcdpref", "pools": [{"start": "192.168.1.11", "end": "192.168.1.20"}],
                              "prefix": 24}, name="abcd"))
    for name in ("abc", "abce", "abcf"):
        ask(store, "IPClaim", name)
    store.create({"apiVersion": IPAM_API, "kind": "IPClaim", "metadata": {"name": "abcd", "namespace": NS},
                  "spec": {"pool": {"name": "abcd"}}})
    reconcile_ip_claim(store, Ref(IPAM_API, "IPClaim", "abcd", NS))
    store.delete(Ref(IPAM_API, "IPClaim", "abcf", NS))
    state = reconcile_ip_pool(store, Ref(IPAM_API, "IPPool", POOL, NS))
    assert state.allocations == {"abc": "192.168.1.11", "abce": "192.168.1.12"}
    assert store.get(Ref(IPAM_API, "IPPool", POOL, NS))["status"]["indexes"] == state.allocations
    assert sorted(a["metadata"]["name"] for a in store.list(IPAM_API, "IPAddress", NS)) == \
        ["abcdpref-192-168-1-11", "abcpref-192-168-1-11", "abcpref-192-168-1-12"]


def test_update_addresses_ip_claim_with_deletion_timestamp_and_finalizers(store):
    """UpdateAddresses "IPClaim with deletion timestamp and finalizers": another finalizer keeps the address."""
    apply_pool(store, {"pools": [{"start": "192.168.1.11", "end": "192.168.1.20"}], "prefix": 24})
    ask(store, "IPClaim", "inuseclaim")
    ref = Ref(IPAM_API, "IPClaim", "inuseclaim", NS)
    held = store.get(ref)
    held["metadata"]["finalizers"].append("metal3data.infrastructure.cluster.x-k8s.io")
    store.update(held)
    store.delete(ref)
    state = reconcile_ip_pool(store, Ref(IPAM_API, "IPPool", POOL, NS))
    assert state.allocations == {"inuseclaim": "192.168.1.11"}


def test_delete_addresses_deletion_needed(store):
    """DeleteAddresses "Deletion needed": the IPAddress goes, the claim's finalizer goes, the index forgets it;
    getIndexes: a preAllocation stays reserved for its claim even with no IPAddress."""
    apply_pool(store, {"pools": [{"start": "192.168.0.11", "end": "192.168.0.20"}], "prefix": 24,
                       "preAllocations": {"testref": "192.168.0.11"}})
    assert ask(store, "IPClaim", "testref").address["spec"]["address"] == "192.168.0.11"
    ref = Ref(IPAM_API, "IPClaim", "testref", NS)
    store.delete(ref)
    assert reconcile_ip_claim(store, ref).released
    assert store.list(IPAM_API, "IPAddress", NS) == [] and store.list(IPAM_API, "IPClaim", NS) == []
    assert store.get(Ref(IPAM_API, "IPPool", POOL, NS))["status"]["indexes"] == {}
    assert ask(store, "IPClaim", "another").address["spec"]["address"] == "192.168.0.12"
