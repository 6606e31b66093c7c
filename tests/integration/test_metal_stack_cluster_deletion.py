"""A deleted MetalStackCluster waits for its machines first - also for a machine that finds its cluster only through
its Cluster API Machine's spec.clusterName (the seed's machine carries no cluster-name label), the way the machine's
own reconcile finds it."""
from __future__ import annotations

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.cluster import reconcile_metalstack_cluster
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.machine import reconcile_metalstack_machine
from tests.integration.metal_stack_world import capi_cluster, capi_machine, partition, seed

INFRA = "infrastructure.cluster.x-k8s.io"


def test_a_deleted_cluster_waits_for_a_machine_it_knows_only_through_its_machine(store, namespace):
    partition(store, namespace)
    capi_cluster(store, "metal-stack-cluster", namespace)
    store.create(seed("cluster", namespace))
    cluster = Ref(f"{INFRA}/v1alpha3", "MetalStackCluster", "metal-stack-cluster", namespace)
    assert reconcile_metalstack_cluster(store, cluster).ready
    machine = seed("machine", namespace)
    assert "labels" not in machine["metadata"]
    store.create(machine)
    capi_machine(store, "cp-0", namespace, "metal-stack-cluster", "metal-stack-machine", "cp-0-bootstrap")
    step = reconcile_metalstack_machine(store, Ref(f"{INFRA}/v1alpha3", "MetalStackMachine", "metal-stack-machine",
                                                   namespace))
    assert step.host, step.message
    store.delete(cluster)
    step = reconcile_metalstack_cluster(store, cluster)
    assert step.message == "waiting for 1 MetalStackMachines to go"
    assert store.get_if_exists(Ref(f"{INFRA}/v1alpha4", "MetalStackFirewall", "metal-stack-cluster-firewall",
                                   namespace)) is not None
