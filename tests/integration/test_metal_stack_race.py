"""Ten MetalStackClusters, each reconciled in its own process at the same moment, race for a super-network with
room for eight /24 node networks, on both backends: eight get a network, none given twice; the other two wait,
their ClusterNodeNetworkEnsured condition saying the super-network is full; deleting one cluster lets a waiting one
have its network."""
from __future__ import annotations

import ipaddress
import multiprocessing
import queue
from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.cluster import reconcile_metalstack_cluster
from tests.integration.metal_stack_world import IPAM_API, seed

CLUSTERS, ROOM = 10, 8
API = "infrastructure.cluster.x-k8s.io/v1alpha3"


def _cluster_process(options: dict[str, str], namespace: str, name: str, barrier: Any, results: Any) -> None:
    """One cluster's reconcile in a process of its own, with its own store, started together with the others."""
    with open_store(options) as store:
        ref = Ref(API, "MetalStackCluster", name, namespace)
        store.get(ref)  # connected before the start
        barrier.wait(timeout=120)
        step = reconcile_metalstack_cluster(store, ref)
        results.put((name, step.ready, (step.obj or {}).get("status", {}).get("nodeNetwork"), step.message))


def race(options: dict[str, str], namespace: str, names: list[str]) -> dict[str, tuple[bool, str | None, str]]:
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(len(names)), context.Queue()
    processes = [context.Process(target=_cluster_process, args=(options, namespace, name, barrier, results))
                 for name in names]
    for process in processes:
        process.start()
    outcomes = {}
    try:
        for _name in names:
            name, ready, network, message = results.get(timeout=300)
            outcomes[name] = (ready, network, message)
    except queue.Empty:
        raise AssertionError(f"clusters did not all answer: {sorted(outcomes)} of {names}") from None
    finally:
        for process in processes:
            process.join(60)
    assert [p.exitcode for p in processes] == [0] * len(names), "a cluster's reconcile failed (its traceback is above)"
    return outcomes


def test_ten_clusters_race_for_room_for_eight_networks(store, store_options, namespace):
    store.create({"apiVersion": IPAM_API, "kind": "IPPrefixPool", "metadata": {"name": "super", "namespace": namespace},
                  "spec": {"prefixes": ["10.8.0.0/21"], "prefixLength": 24, "partition": "vagrant"}})
    names = [f"cluster-{i}" for i in range(CLUSTERS)]
    for name in names:
        cluster = seed("cluster", namespace)
        cluster["metadata"]["name"] = name
        del cluster["spec"]["firewallSpec"]
        store.create(cluster)

    outcomes = race(store_options, namespace, names)

    ready = {name: network for name, (ok, network, _message) in outcomes.items() if ok}
    waiting = sorted(name for name, (ok, _network, _message) in outcomes.items() if not ok)
    assert len(ready) == ROOM and len(set(ready.values())) == ROOM, outcomes
    networks = [ipaddress.ip_network(n) for n in ready.values()]
    assert all(a == b or not a.overlaps(b) for a in networks for b in networks)
    assert all(n.subnet_of(ipaddress.ip_network("10.8.0.0/21")) for n in networks)
    for name in waiting:
        status = store.get(Ref(API, "MetalStackCluster", name, namespace))["status"]
        condition = next(c for c in status["conditions"] if c["type"] == "ClusterNodeNetworkEnsured")
        assert condition["status"] == "False" and status["ready"] is False
        assert condition["message"] == f"IPPrefixPool {namespace}/super has no free /24 left: all 8 are taken"
    pools = {p["metadata"]["name"] for p in store.list(IPAM_API, "IPPool", namespace)}
    assert pools == {f"{name}-node-network" for name in ready}  # no pool for a cluster without a network

    leaving = sorted(ready)[0]
    store.delete(Ref(API, "MetalStackCluster", leaving, namespace))
    assert reconcile_metalstack_cluster(store, Ref(API, "MetalStackCluster", leaving, namespace)).obj is None
    first, second = (reconcile_metalstack_cluster(store, Ref(API, "MetalStackCluster", name, namespace))
                     for name in waiting)
    assert first.ready and first.obj["status"]["nodeNetwork"] == ready[leaving]
    assert not second.ready and "has no free /24 left" in second.message
