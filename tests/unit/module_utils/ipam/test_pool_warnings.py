"""Pools upstream's IPPool webhook accepts and we think risky are accepted with a warning, not refused (issue 30,
item 13): the task's ``warnings`` (ip_pool, resource), the pool's PoolWarning condition and a Warning Event; and
CAPM3's own example pool is admitted and allocates as upstream's does."""
from __future__ import annotations

import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import (
    IPAM_API,
    POOL_WARNING_CONDITION,
    RISKY_POOL,
    reconcile_ip_pool,
)
from ansible_collections.metal3.baremetal.plugins.modules.ip_claim import SPEC as IP_CLAIM
from ansible_collections.metal3.baremetal.plugins.modules.ip_pool import SPEC as IP_POOL
from ansible_collections.metal3.baremetal.plugins.modules.resource import SPEC as RESOURCE
from ansible_collections.metal3.baremetal.plugins.plugin_utils.engine_action import run_spec

# cluster-api-provider-metal3 examples/templates/cluster.yaml, pool2, as written there (${CLUSTER_NAME} filled in)
CAPM3_POOL2 = """
apiVersion: ipam.metal3.io/v1alpha1
kind: IPPool
metadata:
  name: pool2
spec:
  clusterName: test1
  pools:
  - subnet: 192.168.1.0/24
  prefix: 25
  gateway: 192.168.1.1
  namePrefix: pool2
"""
# ip-address-manager's "One pool, pre-allocated, with overrides": entry 0's gateway is off its /26
OFF_NETWORK_GATEWAY = {"namePrefix": "p", "prefix": 24, "gateway": "192.168.0.1",
                       "pools": [{"start": "192.168.0.11", "end": "192.168.0.20", "prefix": 26,
                                  "gateway": "192.168.1.1"}]}


def options(tmp_path) -> dict:
    return {"backend": "local", "store_path": str(tmp_path / "store.db")}


def pool_conditions(tmp_path, name: str, namespace: str = "default") -> list[dict]:
    with open_store(options(tmp_path)) as store:
        return (store.get(Ref(IPAM_API, "IPPool", name, namespace)).get("status") or {}).get("conditions") or []


def events(tmp_path, namespace: str = "default") -> list[dict]:
    with open_store(options(tmp_path)) as store:
        return store.list("v1", "Event", namespace)


def test_capm3s_example_pool_is_applied_with_a_warning_and_allocates_as_upstream(tmp_path):
    """Refused before ('outside 192.168.1.0/25 ... the range must lie in one network'). Upstream hands out
    192.168.1.1 first; ours never hands out the gateway (docs/ipam.md), so .2, with prefix 25 and the pool's gateway;
    an address of the upper half gets prefix 25 and that gateway too, as upstream's."""
    result = run_spec(RESOURCE, {**options(tmp_path), "definition": yaml.safe_load(CAPM3_POOL2),
                                 "namespace": "default"}, False)
    assert not result.get("failed"), result
    assert result["changed"] and result["method"] == "create"
    assert len(result["warnings"]) == 1
    assert result["warnings"][0].startswith("IPPool default/pool2: spec.pools[0].subnet: 192.168.1.254 is outside "
                                            "192.168.1.0/25, the network spec.prefix 25 defines around 192.168.1.1")
    first = run_spec(IP_CLAIM, {**options(tmp_path), "name": "first", "pool": "pool2"}, False)
    asked = run_spec(IP_CLAIM, {**options(tmp_path), "name": "asked", "pool": "pool2", "address": "192.168.1.200"},
                     False)
    assert (first["address"], asked["address"]) == ("192.168.1.2", "192.168.1.200")
    with open_store(options(tmp_path)) as store:
        for name, address in (("first", "192.168.1.2"), ("asked", "192.168.1.200")):
            spec = store.get(Ref(IPAM_API, "IPAddress", f"pool2-{address.replace('.', '-')}", "default"))["spec"]
            assert (spec["address"], spec["prefix"], spec["gateway"]) == (address, 25, "192.168.1.1"), name


def test_ip_pool_returns_the_warning_and_the_pool_says_it_in_a_condition_and_an_event(tmp_path):
    result = run_spec(IP_POOL, {**options(tmp_path), "name": "p", "spec": OFF_NETWORK_GATEWAY}, False)
    assert not result.get("failed"), result
    assert result["warnings"] == [
        "IPPool default/p: spec.pools[0].gateway: 192.168.1.1 is outside 192.168.0.0/26, the network of "
        "spec.pools[0]: a host reaches it only through an on-link route"]
    warning = [c for c in pool_conditions(tmp_path, "p") if c["type"] == POOL_WARNING_CONDITION]
    assert [(c["status"], c["reason"], c["message"]) for c in warning] == \
        [("True", RISKY_POOL, result["warnings"][0].removeprefix("IPPool default/p: "))]
    recorded = events(tmp_path)
    assert [(e["type"], e["reason"], e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in recorded] == \
        [("Warning", RISKY_POOL, "IPPool", "p")]
    assert recorded[0]["message"] == warning[0]["message"]
    # Each further reconcile of the unchanged pool: the same condition, no second Event.
    with open_store(options(tmp_path)) as store:
        state = reconcile_ip_pool(store, Ref(IPAM_API, "IPPool", "p", "default"))
    assert state.warnings and len(events(tmp_path)) == 1
    assert [c for c in pool_conditions(tmp_path, "p") if c["type"] == POOL_WARNING_CONDITION] == warning


def test_a_pool_made_safe_loses_its_warning_condition(tmp_path):
    run_spec(IP_POOL, {**options(tmp_path), "name": "p", "spec": OFF_NETWORK_GATEWAY}, False)
    safe = {**OFF_NETWORK_GATEWAY, "pools": [{**OFF_NETWORK_GATEWAY["pools"][0], "gateway": "192.168.0.62"}]}
    result = run_spec(IP_POOL, {**options(tmp_path), "name": "p", "spec": safe}, False)
    assert not result.get("failed") and "warnings" not in result, result
    assert [c for c in pool_conditions(tmp_path, "p") if c["type"] == POOL_WARNING_CONDITION] == []


def test_a_safe_pool_gets_no_warning_condition_nor_event(tmp_path):
    spec = {"namePrefix": "p", "pools": [{"subnet": "192.168.0.0/24"}], "gateway": "192.168.0.1"}
    result = run_spec(IP_POOL, {**options(tmp_path), "name": "p", "spec": spec}, False)
    assert not result.get("failed") and "warnings" not in result, result
    assert pool_conditions(tmp_path, "p") == [] and events(tmp_path) == []


def test_check_mode_warns_and_writes_nothing(tmp_path):
    result = run_spec(IP_POOL, {**options(tmp_path), "name": "p", "spec": OFF_NETWORK_GATEWAY}, True)
    assert result["changed"] and len(result["warnings"]) == 1
    assert events(tmp_path) == []
