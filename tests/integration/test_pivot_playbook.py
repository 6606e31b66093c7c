"""playbooks/pivot.yml as a bastion runs it: a cluster's objects moved from one local store to another, shown in a
table; run again, nothing moves; bad variables fail first, naming them."""
from __future__ import annotations

from pathlib import Path

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from tests.integration.playbook_runs import REPO, ansible_playbook

PLAYBOOK = REPO / "playbooks" / "pivot.yml"
INFRA = "infrastructure.cluster.x-k8s.io/v1beta1"
IPAM = "ipam.metal3.io/v1alpha1"
NS = "metal3"


def test_the_pivot_playbook_moves_a_cluster_and_a_second_run_moves_nothing(tmp_path: Path):
    source = {"backend": "local", "store_path": str(tmp_path / "bastion.db")}
    target = {"backend": "local", "store_path": str(tmp_path / "cluster.db")}
    labels = {"cluster.x-k8s.io/cluster-name": "c1"}
    with open_store(source) as store:
        store.create({"apiVersion": INFRA, "kind": "Metal3Cluster", "metadata": {"name": "c1", "namespace": NS},
                      "spec": {"controlPlaneEndpoint": {"host": "192.0.2.10", "port": 6443}}})
        store.create({"apiVersion": IPAM, "kind": "IPPool",
                      "metadata": {"name": "c1-pool", "namespace": NS, "labels": labels},
                      "spec": {"namePrefix": "c1", "pools": [{"subnet": "192.0.2.0/24"}], "prefix": 24}})
        store.create({"apiVersion": IPAM, "kind": "IPPool", "metadata": {"name": "other", "namespace": NS},
                      "spec": {"namePrefix": "o", "pools": [{"subnet": "198.51.100.0/24"}], "prefix": 24}})
    extra = {"pivot_cluster": "c1", "pivot_namespace": NS, "pivot_from": source, "pivot_to": target}

    run = ansible_playbook(PLAYBOOK, extra)
    assert run.ok, run.output
    assert "Metal3Cluster  metal3     c1" in run.output and "IPPool         metal3     c1-pool" in run.output
    with open_store(source) as bastion, open_store(target) as cluster:
        assert cluster.get(Ref(INFRA, "Metal3Cluster", "c1", NS))
        assert cluster.get(Ref(IPAM, "IPPool", "c1-pool", NS))
        assert bastion.get_if_exists(Ref(INFRA, "Metal3Cluster", "c1", NS)) is None
        assert [p["metadata"]["name"] for p in bastion.list(IPAM, "IPPool", NS)] == ["other"]  # not the cluster's

    again = ansible_playbook(PLAYBOOK, extra)
    assert again.ok, again.output
    assert "was moved already" in again.output and "changed=0" in again.output


def test_the_pivot_playbook_names_the_variables_it_wants(tmp_path: Path):
    run = ansible_playbook(PLAYBOOK, {"pivot_cluster": "c1", "pivot_from": "local"})
    assert not run.ok
    assert "pivot needs pivot_cluster" in run.output and "pivot_from and pivot_to" in run.output
    assert "Traceback" not in run.output
