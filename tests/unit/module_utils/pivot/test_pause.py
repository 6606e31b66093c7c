"""Every reconcile of a kind a move carries leaves a paused object alone: no write at all, a 'paused' message.
And a moved host takes its status from the status annotation instead of starting over."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils import engine  # noqa: F401  # pylint: disable=unused-import
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.cluster import reconcile_metal3cluster
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.data import reconcile_data, reconcile_data_claim
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.hostclaims.hostclaim import reconcile_host_claim
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import reconcile_host
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import (
    reconcile_ip_address_claim,
    reconcile_ip_claim,
    reconcile_ip_pool,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.prefixes import (
    reconcile_prefix_claim,
    reconcile_prefix_pool,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.harness.crashing_store import CrashingStore, Writes

NS = "tenant"
INFRA = "infrastructure.cluster.x-k8s.io/v1beta2"
PAUSED = {"cluster.x-k8s.io/paused": "true"}

# (reconcile, the paused object)
CASES: list[tuple[Callable[..., Any], Object]] = [
    (reconcile_metal3cluster, {"apiVersion": INFRA, "kind": "Metal3Cluster", "metadata": {"name": "c1"},
                               "spec": {"controlPlaneEndpoint": {"host": "192.0.2.1", "port": 6443}}}),
    (reconcile_data_claim, {"apiVersion": INFRA, "kind": "Metal3DataClaim", "metadata": {"name": "dc"},
                            "spec": {"template": {"name": "tpl"}}}),
    (reconcile_data, {"apiVersion": INFRA, "kind": "Metal3Data", "metadata": {"name": "tpl-0"},
                      "spec": {"index": 0, "template": {"name": "tpl"}, "claim": {"name": "dc"}}}),
    (reconcile_ip_claim, {"apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPClaim", "metadata": {"name": "ic"},
                          "spec": {"pool": {"name": "pool"}}}),
    (reconcile_ip_pool, {"apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPPool", "metadata": {"name": "pool"},
                         "spec": {"namePrefix": "pool", "pools": [{"start": "192.0.2.2", "end": "192.0.2.9"}],
                                  "prefix": 24}}),
    (reconcile_ip_address_claim, {"apiVersion": "ipam.cluster.x-k8s.io/v1beta1", "kind": "IPAddressClaim",
                                  "metadata": {"name": "ac"},
                                  "spec": {"poolRef": {"apiGroup": "ipam.metal3.io", "kind": "IPPool",
                                                       "name": "pool"}}}),
    (reconcile_prefix_pool, {"apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPPrefixPool",
                             "metadata": {"name": "pp"}, "spec": {"prefixes": ["10.0.0.0/16"], "prefixLength": 24}}),
    (reconcile_prefix_claim, {"apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPPrefixClaim",
                              "metadata": {"name": "pc"}, "spec": {"pool": {"name": "pp"}}}),
    (reconcile_host_claim, {"apiVersion": "metal3.io/v1alpha1", "kind": "HostClaim", "metadata": {"name": "hc"},
                            "spec": {"poweredOn": True}}),
]


@pytest.mark.parametrize("reconcile,obj", CASES, ids=[c[1]["kind"] for c in CASES])
def test_a_paused_object_is_not_written(tmp_path: Path, reconcile: Callable[..., Any], obj: Object):
    with LocalStore(str(tmp_path / "store.db")) as store:
        obj = {**obj, "metadata": {**obj["metadata"], "namespace": NS, "annotations": PAUSED}}
        stored = store.create(obj)
        result = reconcile(CrashingStore(store, Writes(0)), Ref.of(stored))  # any write would raise Crash
        assert result.message == "paused" and not result.changed
        assert store.get(Ref.of(stored)) == stored


def test_a_metal3cluster_of_a_paused_cluster_is_not_written(tmp_path: Path):
    with LocalStore(str(tmp_path / "store.db")) as store:
        store.create({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
                      "metadata": {"name": "c1", "namespace": NS}, "spec": {"paused": True}})
        m3c = store.create({"apiVersion": INFRA, "kind": "Metal3Cluster",
                            "metadata": {"name": "c1", "namespace": NS,
                                         "labels": {"cluster.x-k8s.io/cluster-name": "c1"}}, "spec": {}})
        assert reconcile_metal3cluster(CrashingStore(store, Writes(0)), Ref.of(m3c)).message == "paused"


def test_a_moved_host_takes_its_status_from_the_annotation_and_the_annotation_goes(tmp_path: Path):
    status = {"provisioning": {"state": "provisioned", "ID": "node-1"}, "operationalStatus": "OK",
              "poweredOn": True, "errorCount": 0, "lastUpdated": "2024-01-01T00:00:00Z"}
    with LocalStore(str(tmp_path / "store.db")) as store:
        host = store.create({"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
                             "metadata": {"name": "h0", "namespace": NS,
                                          "annotations": {"baremetalhost.metal3.io/status": json.dumps(status)}},
                             "spec": {"online": True, "bmc": {"address": "ipmi://192.0.2.1", "credentialsName": "x"}}})

        def no_provisioner(*_args: Any) -> Any:
            raise AssertionError("the provisioner is not reached: nothing is registered or deployed")

        step = reconcile_host(store, no_provisioner, Ref.of(host))
        assert step.changed and step.state == "provisioned" and step.requeue_after == 0
        after = store.get(Ref.of(host))
        assert after["status"] == status
        assert "baremetalhost.metal3.io/status" not in (after["metadata"].get("annotations") or {})
