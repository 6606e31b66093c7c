"""CAPM3's bookkeeping on a real SQLite store: data indexes, machine spread, pause, cluster readiness."""
from __future__ import annotations

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.cluster import reconcile_metal3cluster
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import INFRA_API, PAUSED_ANNOTATION
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.data import reconcile_data_claim
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.machine import (
    online_after_release,
    reconcile_metal3machine,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.machines import spread
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

NS = "ns"


@pytest.fixture
def store(tmp_path):
    with LocalStore(str(tmp_path / "store.db")) as opened:
        yield opened


def claim(store, name: str) -> Ref:
    store.create({"apiVersion": INFRA_API, "kind": "Metal3DataClaim", "metadata": {"name": name, "namespace": NS},
                  "spec": {"template": {"name": "net"}}})
    ref = Ref(INFRA_API, "Metal3DataClaim", name, NS)
    reconcile_data_claim(store, ref)
    return ref


def test_a_claim_gets_the_lowest_free_index_named_template_index(store):
    store.create({"apiVersion": INFRA_API, "kind": "Metal3DataTemplate", "metadata": {"name": "net", "namespace": NS},
                  "spec": {}})
    refs = [claim(store, f"m-{i}") for i in range(3)]
    rendered = [store.get(ref)["status"]["renderedData"]["name"] for ref in refs]
    assert rendered == ["net-0", "net-1", "net-2"]
    store.delete(refs[1])
    assert reconcile_data_claim(store, refs[1]).obj is None  # released: its Metal3Data is gone
    assert store.get(Ref(INFRA_API, "Metal3Data", "net-2", NS))["spec"]["index"] == 2
    assert store.get(claim(store, "m-3"))["status"]["renderedData"]["name"] == "net-1"  # the gap is reused
    assert reconcile_data_claim(store, claim(store, "m-4")).obj["status"]["renderedData"]["name"] == "net-3"


def test_a_claim_of_a_missing_template_says_so(store):
    ref = claim(store, "lost")
    assert store.get(ref)["status"]["errorMessage"] == f"Metal3DataTemplate {NS}/net not found"


# machines already placed → the domain of the next one
SPREAD = [
    ([], "az-a"),
    (["az-a"], "az-b"),
    (["az-a", "az-b"], "az-a"),
    (["az-b", "az-b"], "az-a"),
    (["az-a", "other"], "az-b"),
]


@pytest.mark.parametrize(("taken", "expected"), SPREAD)
def test_machines_go_to_the_failure_domain_with_the_fewest(taken, expected):
    assert spread(["az-b", "az-a"], taken) == expected
    assert spread([], taken) is None


def test_a_paused_machine_is_left_alone(store):
    store.create({"apiVersion": INFRA_API, "kind": "Metal3Machine", "metadata": {
        "name": "m", "namespace": NS, "annotations": {PAUSED_ANNOTATION: ""}}, "spec": {}})
    ref = Ref(INFRA_API, "Metal3Machine", "m", NS)
    before = store.get(ref)
    step = reconcile_metal3machine(store, ref)
    assert step.phase == "paused" and store.get(ref) == before


def test_a_cluster_is_ready_with_its_endpoint_and_publishes_its_failure_domains(store):
    store.create({"apiVersion": INFRA_API, "kind": "Metal3Cluster", "metadata": {"name": "c", "namespace": NS},
                  "spec": {"failureDomains": [{"name": "az-a", "controlPlane": True}]}})
    ref = Ref(INFRA_API, "Metal3Cluster", "c", NS)
    step = reconcile_metal3cluster(store, ref)
    assert not step.ready and "ControlPlaneEndpointMissing" in str(step.cluster["status"]["conditions"])
    assert step.cluster["status"]["initialization"] == {"provisioned": False}
    store.patch(ref, {"spec": {"controlPlaneEndpoint": {"host": "10.0.0.5", "port": 6443}}})
    step = reconcile_metal3cluster(store, ref)
    assert step.ready and step.cluster["status"]["failureDomains"] == [{"name": "az-a", "controlPlane": True}]
    assert step.cluster["status"]["initialization"] == {"provisioned": True}
    assert not reconcile_metal3cluster(store, ref).changed
    store.create({"apiVersion": INFRA_API, "kind": "Metal3Machine", "metadata": {
        "name": "m", "namespace": NS, "labels": {"cluster.x-k8s.io/cluster-name": "c"}}, "spec": {}})
    store.delete(ref)
    assert reconcile_metal3cluster(store, ref).requeue_after  # waits for its machines
    store.delete(Ref(INFRA_API, "Metal3Machine", "m", NS))
    assert reconcile_metal3cluster(store, ref).cluster is None


def test_a_cluster_written_at_v1beta1_is_reconciled_and_read_back_in_v1beta1s_words(store):
    old = "infrastructure.cluster.x-k8s.io/v1beta1"
    store.create({"apiVersion": old, "kind": "Metal3Cluster", "metadata": {"name": "c", "namespace": NS},
                  "spec": {"controlPlaneEndpoint": {"host": "10.0.0.5", "port": 6443}, "noCloudProvider": True,
                           "failureDomains": {"az-a": {"controlPlane": True}, "az-b": {}}}})
    assert reconcile_metal3cluster(store, Ref(INFRA_API, "Metal3Cluster", "c", NS)).ready
    cluster = store.get(Ref(old, "Metal3Cluster", "c", NS))
    assert cluster["spec"]["noCloudProvider"] is True
    assert cluster["status"]["ready"] is True
    assert cluster["status"]["failureDomains"] == {"az-a": {"controlPlane": True}, "az-b": {}}
    assert cluster["status"]["v1beta2"]["conditions"][0]["type"] == "BaremetalInfrastructureReady"


# host spec, fast track → powered on once released (upstream's fast-track matrix)
RELEASE_POWER = [
    ({}, False, False),
    ({}, True, True),
    ({"automatedCleaningMode": "disabled"}, True, False),
    ({"disablePowerOff": True}, False, True),
    ({"automatedCleaningMode": "metadata"}, False, False),
]


@pytest.mark.parametrize(("spec", "fast_track", "online"), RELEASE_POWER)
def test_power_of_a_released_host(spec, fast_track, online):
    assert online_after_release(spec, fast_track) is online
