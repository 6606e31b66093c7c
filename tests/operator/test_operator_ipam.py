"""The operator on the real kube-apiserver, with the IPAM kinds: what users of the Ansible Operator expect of
it (conditions, events, finalizers, leader election, restarts), on IPPools and IPClaims."""
from __future__ import annotations

import signal
import time
from typing import Any

import pytest
from kubernetes import client

from tests.operator.conftest import condition, eventually

pytestmark = pytest.mark.kubernetes

IPAM = ("ipam.metal3.io", "v1alpha1")
POOL_SPEC = {"namePrefix": "pool", "pools": [{"start": "192.168.10.10", "end": "192.168.10.200"}], "prefix": 24,
             "gateway": "192.168.10.1"}


def create_pool(custom: client.CustomObjectsApi, ns: str, name: str = "pool", spec: dict | None = None) -> None:
    custom.create_namespaced_custom_object(*IPAM, ns, "ippools", {
        "apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPPool", "metadata": {"name": name},
        "spec": spec or POOL_SPEC})


def create_claims(custom: client.CustomObjectsApi, ns: str, count: int, pool: str = "pool") -> None:
    for i in range(count):
        custom.create_namespaced_custom_object(*IPAM, ns, "ipclaims", {
            "apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPClaim", "metadata": {"name": f"claim-{i}"},
            "spec": {"pool": {"name": pool}}})


def items(custom: client.CustomObjectsApi, ns: str, plural: str) -> list[dict[str, Any]]:
    return custom.list_namespaced_custom_object(*IPAM, ns, plural)["items"]


def ready_claims(custom: client.CustomObjectsApi, ns: str, count: int) -> list[dict[str, Any]] | None:
    claims = items(custom, ns, "ipclaims")
    ready = [c for c in claims if condition(c, "Ready").get("status") == "True"
             and condition(c, "Successful").get("status") == "True"]
    return claims if len(ready) == count == len(claims) else None


def assert_one_address_each(custom: client.CustomObjectsApi, ns: str, count: int) -> None:
    """Every claim holds one IPAddress that names it; no address is shared, none is left over."""
    claims = {c["metadata"]["name"]: c for c in items(custom, ns, "ipclaims")}
    addresses = items(custom, ns, "ipaddresses")
    assert len(claims) == count
    assert len(addresses) == count, sorted(a["metadata"]["name"] for a in addresses)
    by_name = {a["metadata"]["name"]: a for a in addresses}
    assert len({a["spec"]["address"] for a in addresses}) == count
    for name, claim in claims.items():
        held = by_name[claim["status"]["address"]["name"]]
        assert held["spec"]["claim"]["name"] == name
    pool = custom.get_namespaced_custom_object(*IPAM, ns, "ippools", "pool")
    assert sorted(pool["status"]["allocations"]) == sorted(claims)


def test_fifty_claims_get_fifty_distinct_addresses_and_ready_conditions(operators, custom, kube_namespace):
    operator = operators()
    create_pool(custom, kube_namespace)
    create_claims(custom, kube_namespace, 50)
    claims = eventually(lambda: ready_claims(custom, kube_namespace, 50), "50 claims Ready", timeout=180)
    assert_one_address_each(custom, kube_namespace, 50)
    for claim in claims:
        running = condition(claim, "Running")
        assert running["reason"] == "Successful" and running["message"] == "Awaiting next reconciliation"
        assert running["ansibleResult"]["failures"] == 0
        assert condition(claim, "Failure")["status"] == "False"
        assert "ipclaim.ipam.metal3.io" in claim["metadata"]["finalizers"]
    samples = operator.metrics()
    assert samples['controller_runtime_reconcile_total{controller="ipclaim.ipam.metal3.io",result="success"}'] >= 50
    assert samples['ansible_operator_reconciles_count{GVK="ipam.metal3.io/v1alpha1, Kind=IPClaim"}'] >= 50
    assert samples['workqueue_depth{name="ipclaim.ipam.metal3.io"}'] == 0
    assert operator.probe("/healthz") == 200


def test_deleted_claim_releases_its_address_and_goes(operators, custom, kube_namespace):
    operator = operators()
    create_pool(custom, kube_namespace)
    create_claims(custom, kube_namespace, 2)
    eventually(lambda: ready_claims(custom, kube_namespace, 2), "2 claims Ready")
    custom.delete_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "claim-0")
    eventually(lambda: [c["metadata"]["name"] for c in items(custom, kube_namespace, "ipclaims")] == ["claim-1"],
               "claim-0 gone")
    addresses = items(custom, kube_namespace, "ipaddresses")
    assert [a["spec"]["claim"]["name"] for a in addresses] == ["claim-1"]
    eventually(lambda: sorted(custom.get_namespaced_custom_object(*IPAM, kube_namespace, "ippools", "pool")
                              ["status"]["allocations"]) == ["claim-1"], "the pool's allocations updated")
    runs = operator.workdir / "runner" / "ipam.metal3.io" / "v1alpha1" / "IPClaim" / kube_namespace
    eventually(lambda: sorted(p.name for p in runs.iterdir()) == ["claim-1"], "claim-0's run directory removed")


def test_claims_of_an_exhausted_pool_wait_without_failing_runs_and_the_oldest_gets_the_first_freed_address(
        operators, custom, kube_namespace):
    operator = operators()
    create_pool(custom, kube_namespace, spec={**POOL_SPEC, "pools": [{"start": "192.168.10.10",
                                                                      "end": "192.168.10.11"}]})
    create_claims(custom, kube_namespace, 2)
    eventually(lambda: ready_claims(custom, kube_namespace, 2), "2 claims Ready")
    runs = operator.workdir / "runner" / "ipam.metal3.io" / "v1alpha1" / "IPClaim" / kube_namespace

    def exhausted(name: str) -> dict[str, Any] | None:
        claim = custom.get_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", name)
        done = condition(claim, "Running").get("reason") == "Successful"
        return claim if done and (claim.get("status") or {}).get("errorMessage") == "Exhausted IP Pools" else None

    for name in ("waits-longest", "waits-less"):  # one after the other: their order is the order they wait in
        custom.create_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", {
            "apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPClaim", "metadata": {"name": name},
            "spec": {"pool": {"name": "pool"}}})
        claim = eventually(lambda name=name: exhausted(name), f"{name} exhausted, its run done")
        assert condition(claim, "Failure")["status"] == "False"  # waiting is not failing
    started = {name: len(list((runs / name / "artifacts").iterdir())) for name in ("waits-longest", "waits-less")}
    # Longer than the period a timed requeue would have come back after (10 s): nothing changed, nothing ran.
    time.sleep(15)
    assert {name: len(list((runs / name / "artifacts").iterdir())) for name in started} == started
    samples = operator.metrics()
    assert samples.get('controller_runtime_reconcile_total{controller="ipclaim.ipam.metal3.io",result="error"}',
                       0) == 0

    held = {a["spec"]["claim"]["name"]: a["spec"]["address"] for a in items(custom, kube_namespace, "ipaddresses")}
    custom.delete_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "claim-0")
    freed = eventually(lambda: condition(custom.get_namespaced_custom_object(
        *IPAM, kube_namespace, "ipclaims", "waits-longest"), "Ready").get("status") == "True",
        "the claim that waited longest Ready")
    assert freed
    addresses = {a["spec"]["claim"]["name"]: a["spec"]["address"]
                 for a in items(custom, kube_namespace, "ipaddresses")}
    assert addresses == {"claim-1": held["claim-1"], "waits-longest": held["claim-0"]}
    # Woken in turn by that allocation's write to the pool, the newer claim finds it exhausted again.
    eventually(lambda: exhausted("waits-less"), "waits-less still exhausted, its run done")


def test_malformed_spec_gets_a_failure_condition_and_an_event_and_nothing_else(
        operators, custom, kube_cluster, kube_namespace):
    operators()
    create_pool(custom, kube_namespace, "good")
    create_pool(custom, kube_namespace, "bad", {"namePrefix": "bad", "prefix": 24,
                                                "pools": [{"start": "192.168.20.50", "end": "192.168.20.10"}]})
    create_claims(custom, kube_namespace, 1, pool="good")
    eventually(lambda: ready_claims(custom, kube_namespace, 1), "the good pool's claim Ready")

    def failed() -> dict[str, Any]:
        bad = custom.get_namespaced_custom_object(*IPAM, kube_namespace, "ippools", "bad")
        return condition(bad, "Failure") if condition(bad, "Failure").get("status") == "True" else {}

    failure = eventually(failed, "a Failure condition on the bad pool")
    assert failure["reason"] == "Failed"
    assert "pools[0]" in failure["message"] and "end" in failure["message"], failure["message"]
    assert "Traceback" not in failure["message"]
    bad = custom.get_namespaced_custom_object(*IPAM, kube_namespace, "ippools", "bad")
    assert condition(bad, "Successful")["status"] == "False"
    assert "allocations" not in (bad.get("status") or {})
    core = client.CoreV1Api(kube_cluster.api_client())

    def warnings() -> list[Any]:
        return [e for e in core.list_namespaced_event(kube_namespace).items
                if e.involved_object.name == "bad" and e.type == "Warning"]

    # Each retry fails the same way: one Event, counting them.
    eventually(lambda: warnings() and warnings()[0].count >= 3, "the failure Event counted three times")
    event, = warnings()
    assert event.reason == "ReconcileFailed" and "pools[0]" in event.message
    assert [a["spec"]["pool"]["name"] for a in items(custom, kube_namespace, "ipaddresses")] == ["good"]


def test_killed_mid_reconcile_and_restarted_converges_with_nothing_leaked_or_duplicated(operators, custom,
                                                                                        kube_namespace):
    first = operators()
    create_pool(custom, kube_namespace)
    create_claims(custom, kube_namespace, 20)
    eventually(lambda: first.reconciles() >= 3, "a few reconciles under way", interval=0.05)
    first.kill()
    assert first.process.returncode == -signal.SIGKILL
    assert not ready_claims(custom, kube_namespace, 20), "the kill came too late to be mid-reconcile"
    operators()
    eventually(lambda: ready_claims(custom, kube_namespace, 20), "20 claims Ready after the restart", timeout=180)
    assert_one_address_each(custom, kube_namespace, 20)


def test_two_replicas_only_the_leader_reconciles_and_the_other_takes_over(operators, custom, kube_namespace):
    election = ["--leader-elect", "--leader-election-namespace", kube_namespace]
    one = operators(*election)
    two = operators(*election)
    eventually(lambda: one.metrics().get('leader_election_master_status{name="metal3-baremetal-operator"}') == 1
               or two.metrics().get('leader_election_master_status{name="metal3-baremetal-operator"}') == 1,
               "a leader")
    leader, follower = (one, two) if one.metrics().get(
        'leader_election_master_status{name="metal3-baremetal-operator"}') == 1 else (two, one)
    create_pool(custom, kube_namespace)
    create_claims(custom, kube_namespace, 5)
    eventually(lambda: ready_claims(custom, kube_namespace, 5), "5 claims Ready")
    assert leader.reconciles() >= 5
    assert follower.reconciles() == 0
    assert leader.stop() == 0  # a graceful stop hands the lease over at once
    custom.create_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", {
        "apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPClaim", "metadata": {"name": "claim-5"},
        "spec": {"pool": {"name": "pool"}}})
    # Generous: the new leader lists every kind and reconciles all six claims and the pool afresh, each an
    # ansible-playbook run, on a machine make test loads with virtual machines.
    eventually(lambda: ready_claims(custom, kube_namespace, 6), "the new claim Ready under the new leader",
               timeout=300)
    assert follower.reconciles() >= 1
