"""The provider design's manifests (seed 002) as written - the MetalStackCluster in namespace metal-stack, the
MetalStackMachine and the MetalStackFirewall in default - on the local store, beside what Cluster API and the
partition give them: each reconciles to ready, with its owner references and its pinned host."""
from __future__ import annotations

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.cluster import reconcile_metalstack_cluster
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.firewall import (
    reconcile_metalstack_firewall,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.machine import reconcile_metalstack_machine
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import apply, load_definitions
from tests.integration.metal_stack_world import (
    BMH_API,
    SEEDS,
    capi_cluster,
    capi_machine,
    partition,
    seed,
    set_state,
)

INFRA = "infrastructure.cluster.x-k8s.io"


def test_the_seeds_manifests_as_written_reconcile_to_ready_with_their_owners(tmp_path):
    with open_store({"backend": "local", "store_path": str(tmp_path / "store.db")}) as local:
        for namespace in ("metal-stack", "default"):
            partition(local, namespace)
        apply(local, [o for name in ("cluster", "machine", "firewall")
                      for o in load_definitions(src=str(SEEDS / f"seed-{name}.yaml"))], "present")
        # the default namespace's machine belongs to a cluster of its own namespace, of the same spec
        capi_cluster(local, "metal-stack-cluster", "metal-stack")
        capi_cluster(local, "metal-stack-cluster", "default")
        local.create(seed("cluster", "default"))
        capi_machine(local, "metal-stack-cluster", "default", "metal-stack-cluster", "metal-stack-machine",
                     "test1-controlplane-0-user-data")
        # the seed's firewall names its cluster by label: one without a firewall of its own
        test1 = seed("cluster", "default")
        test1["metadata"]["name"] = "test1-v8vmn"
        del test1["spec"]["firewallSpec"]
        local.create(test1)

        def ready(reconcile, api, kind, name, namespace):
            ref = Ref(f"{INFRA}/{api}", kind, name, namespace)
            for _step in range(3):
                step = reconcile(local, ref)
                if getattr(step, "host", "") and not step.ready:
                    namespace_, name_ = step.host.split("/")
                    set_state(local, Ref(BMH_API, "BareMetalHost", name_, namespace_), "provisioned")
            assert step.ready, step.message
            return local.get(ref)

        for namespace in ("metal-stack", "default"):
            cluster = ready(reconcile_metalstack_cluster, "v1alpha3", "MetalStackCluster", "metal-stack-cluster",
                            namespace)
            assert cluster["status"]["ready"] is True
            assert [(o["apiVersion"], o["kind"], o["name"]) for o in cluster["metadata"]["ownerReferences"]] == [
                ("cluster.x-k8s.io/v1beta1", "Cluster", "metal-stack-cluster")]
        ready(reconcile_metalstack_cluster, "v1alpha3", "MetalStackCluster", "test1-v8vmn", "default")
        machine = ready(reconcile_metalstack_machine, "v1alpha3", "MetalStackMachine", "metal-stack-machine",
                        "default")
        assert [(o["kind"], o["name"]) for o in machine["metadata"]["ownerReferences"]] == [
            ("Machine", "metal-stack-cluster")]
        assert machine["spec"]["userData"] == {"name": "test1-controlplane-0-user-data", "namespace": "default"}
        assert [a["type"] for a in machine["status"]["addresses"]] == ["InternalIP", "Hostname", "InternalDNS"]
        assert machine["metadata"]["annotations"]["metal3.io/BareMetalHost"] == "default/server-1"  # pinned
        firewall = ready(reconcile_metalstack_firewall, "v1alpha4", "MetalStackFirewall", "test1-v8vmn", "default")
        assert firewall["metadata"]["annotations"]["metal3.io/BareMetalHost"] == "default/server-0"  # pinned
