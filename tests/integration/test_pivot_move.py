"""Pivot of the demo cluster: its machines provisioned on a real Ironic (fake-hardware) from a bastion's local
store, moved into a kube-apiserver and back. Every object is present once, with its status, no host is
provisioned again, no address changes, a second move changes nothing."""
from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import CAPI_API, INFRA_API
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.machines import converge
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.hostclaims.hostclaim import (
    HOSTS_REACHABLE,
    reconcile_host_claim,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import IronicOptions
from ansible_collections.metal3.baremetal.plugins.module_utils.pivot.move import (
    MOVING_ANNOTATION,
    SOURCE_UID_ANNOTATION,
    MoveRefused,
    move_cluster,
)
from tests.harness.crashing_store import Crash, CrashingStore
from tests.harness.demo import demo_objects, provision_demo_machines, settle_demo_hosts
from tests.integration.hostclaim_world import API, INFRA, policy, seed_infrastructure

IPAM = "ipam.metal3.io/v1alpha1"
HOSTS = ("metal3.io/v1alpha1", "BareMetalHost")
# What the demo's cluster is made of once its machines are ready: these move, the hosts and their BMC Secret stay.
MOVED_KINDS = [(CAPI_API, "Machine"), (INFRA_API, "Metal3Cluster"), (INFRA_API, "Metal3MachineTemplate"),
               (INFRA_API, "Metal3Machine"),
               (INFRA_API, "Metal3DataTemplate"), (INFRA_API, "Metal3DataClaim"), (INFRA_API, "Metal3Data"),
               (IPAM, "IPPool"), (IPAM, "IPClaim"), (IPAM, "IPAddress")]


def snapshot(store, namespace: str) -> dict[tuple[str, str], dict]:
    """The moved kinds' objects by (kind, name): spec, status, labels - what must survive a move."""
    taken = {}
    for api_version, kind in MOVED_KINDS:
        for obj in store.list(api_version, kind, namespace):
            taken[(kind, obj["metadata"]["name"])] = {
                # kube-apiserver drops an empty map of labels, the local store keeps it: the same labels
                "spec": obj.get("spec"), "status": obj.get("status"), "labels": obj["metadata"].get("labels") or {}}
    return taken


def secrets(store, namespace: str) -> list[str]:
    return sorted(s["metadata"]["name"] for s in store.list("v1", "Secret", namespace))


def hosts(store, namespace: str) -> dict[str, dict]:
    return {h["metadata"]["name"]: {"spec": h["spec"], "status": h["status"]} for h in store.list(*HOSTS, namespace)}


@pytest.fixture
def demo(tmp_path: Path, ironic, monkeypatch, kube_namespace):
    """The demo's cluster, its five machines ready, on a local store in the namespace the cluster will have."""
    for key, value in ironic.env.items():
        monkeypatch.setenv(key, value)
    options = {"backend": "local", "store_path": str(tmp_path / "store.db")}
    ironic_options = IronicOptions(cloud=ironic.cloud)
    # MAC addresses of their own: the session's Ironic is shared
    settle_demo_hosts(lambda: open_store(options), ironic_options, kube_namespace, demo_objects(kube_namespace, 6))
    provision_demo_machines(lambda: open_store(options), ironic_options, kube_namespace)
    return options, ironic_options


def test_the_demo_cluster_moves_into_a_cluster_and_back_leaving_its_hosts_as_they_are(
        demo, kube_cluster, kube_namespace):
    local_options, ironic_options = demo
    kube_options = {"backend": "kubernetes", "kubeconfig": str(kube_cluster.kubeconfig)}
    with open_store(local_options) as local, open_store(kube_options) as kube:
        before, hosts_before = snapshot(local, kube_namespace), hosts(local, kube_namespace)
        secrets_before = secrets(local, kube_namespace)
        addresses = sorted(a["spec"]["address"] for a in local.list(IPAM, "IPAddress", kube_namespace))
        assert len(addresses) == 10 and len([k for k in before if k[0] == "Metal3Machine"]) == 5

        # Killed halfway (at the 25th write to the cluster: objects created there, none deleted here yet) ...
        with pytest.raises(Crash):
            move_cluster(local, CrashingStore(kube, 25), "my-cluster", kube_namespace)
        # ... a re-run finishes it.
        there = move_cluster(local, kube, "my-cluster", kube_namespace)
        assert there.changed
        assert len([m for m in there.moved if m["kind"] not in ("Secret", "ConfigMap")]) == len(before)
        assert snapshot(kube, kube_namespace) == before  # every object once, with its status
        assert snapshot(local, kube_namespace) == {}
        # The user data and each machine's rendered data moved; the hosts' BMC credentials never leave.
        assert secrets(kube, kube_namespace) == [s for s in secrets_before if s != "demo-bmc"]
        assert "my-cluster-userdata" in secrets(kube, kube_namespace)
        assert sorted(a["spec"]["address"] for a in kube.list(IPAM, "IPAddress", kube_namespace)) == addresses
        assert hosts(local, kube_namespace) == hosts_before  # the hosts stay, as they were: none provisioned again
        assert secrets(local, kube_namespace) == ["demo-bmc"]
        for kind, name in before:
            annotations = kube.get(Ref(*next(k for k in MOVED_KINDS if k[1] == kind), name, kube_namespace))[
                "metadata"].get("annotations") or {}
            assert MOVING_ANNOTATION not in annotations and "cluster.x-k8s.io/paused" not in annotations
            assert SOURCE_UID_ANNOTATION in annotations

        again = move_cluster(local, kube, "my-cluster", kube_namespace)
        assert not again.changed and again.moved == []

        back = move_cluster(kube, local, "my-cluster", kube_namespace)
        assert back.changed
        assert snapshot(local, kube_namespace) == before
        assert snapshot(kube, kube_namespace) == {}
        assert secrets(local, kube_namespace) == secrets_before
        assert hosts(local, kube_namespace) == hosts_before

    # Back home, the machines find their hosts as they left them: a reconcile of all of them changes nothing.
    steps, ready = converge(lambda: open_store(local_options), ironic_options, kube_namespace, None, ("ready",), 60)
    assert ready and not any(s.changed for s in steps), [s.summary() for s in steps if s.changed]


def test_host_claims_moved_away_from_their_hosts_keep_them_through_an_identity_ref_and_drop_it_back_home(
        management, ironic, kube_cluster, kube_namespace):
    """A tenant cluster's HostClaims, bound to hosts of the management cluster, move to the workload cluster: the
    hosts stay where they are and the claims reach them through claims_identity_ref; moved back, they are at home
    with their hosts again and the reference goes."""
    namespace = kube_namespace  # the tenant's namespace, the same on both clusters
    mgmt_options = {"backend": "kubernetes", "kubeconfig": str(management.kubeconfig)}
    client.CoreV1Api(management.api_client()).create_namespace({"metadata": {"name": namespace}})
    seed_infrastructure(mgmt_options, IronicOptions(cloud=ironic.cloud), INFRA,
                        [policy("tenants", INFRA, names=[namespace])], hosts=2)
    label = {"cluster.x-k8s.io/cluster-name": "tenant"}
    with open_store(mgmt_options) as mgmt, \
            open_store({"backend": "kubernetes", "kubeconfig": str(kube_cluster.kubeconfig)}) as workload:
        mgmt.create({"apiVersion": INFRA_API, "kind": "Metal3Cluster",
                     "metadata": {"name": "tenant", "namespace": namespace},
                     "spec": {"controlPlaneEndpoint": {"host": "192.0.2.10", "port": 6443}}})
        refs = [Ref.of(mgmt.create({"apiVersion": API, "kind": "HostClaim",
                                    "metadata": {"name": f"claim-{i}", "namespace": namespace, "labels": label},
                                    "spec": {"poweredOn": False, "hostSelector": {"inNamespace": INFRA}}}))
                for i in range(2)]
        held = {ref.name: reconcile_host_claim(mgmt, ref).host for ref in refs}
        assert all(held.values()) and len(set(held.values())) == 2

        with pytest.raises(MoveRefused, match="give claims_identity_ref"):
            move_cluster(mgmt, workload, "tenant", namespace)  # the claims would lose their hosts: refused
        workload.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hosts", "namespace": namespace},
                         "stringData": {"kubeconfig": management.inline_kubeconfig()}})
        assert move_cluster(mgmt, workload, "tenant", namespace, claims_identity_ref="hosts").changed
        for ref in refs:
            moved = workload.get(ref)
            assert moved["spec"]["identityRef"] == {"name": "hosts"}
            step = reconcile_host_claim(workload, ref, outbound=OutboundPolicy.of(["127.0.0.1"]))
            assert step.phase == "bound" and step.host == held[ref.name]  # the same host, now a remote one
            assert condition(workload.get(ref), HOSTS_REACHABLE) == "True"
            assert mgmt.get_if_exists(ref) is None
        hosts = {f"{INFRA}/{h['metadata']['name']}": h for h in mgmt.list(API, "BareMetalHost", INFRA)}
        assert {name: hosts[host]["spec"]["consumerRef"]["name"] for name, host in held.items()} == \
            {name: name for name in held}
        assert workload.list(API, "BareMetalHost", INFRA) == []

        assert move_cluster(workload, mgmt, "tenant", namespace).changed
        for ref in refs:
            home = mgmt.get(ref)
            assert "identityRef" not in home["spec"]
            step = reconcile_host_claim(mgmt, ref)
            assert step.phase == "bound" and step.host == held[ref.name]
            assert condition(mgmt.get(ref), HOSTS_REACHABLE) == ""  # at home: no hosts elsewhere to reach
            assert not reconcile_host_claim(mgmt, ref).changed


def condition(obj: dict, kind: str) -> str:
    return next((c["status"] for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), "")
