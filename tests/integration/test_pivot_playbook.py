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


def test_what_another_cluster_uses_stays_and_check_mode_says_so(tmp_path: Path):
    """c1's machine and c2's machine share a user data Secret: check mode lists it as staying, writes nothing; the
    move leaves it, and c2's objects, in the source as they were."""
    source = {"backend": "local", "store_path": str(tmp_path / "bastion.db")}
    target = {"backend": "local", "store_path": str(tmp_path / "cluster.db")}
    image = {"url": "http://x/i.img", "checksum": "http://x/i.sha"}
    with open_store(source) as store:
        store.create({"apiVersion": INFRA, "kind": "Metal3Cluster", "metadata": {"name": "c1", "namespace": NS},
                      "spec": {"controlPlaneEndpoint": {"host": "192.0.2.10", "port": 6443}}})
        store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "shared-user-data", "namespace": NS},
                      "stringData": {"value": "#cloud-config"}})
        for cluster in ("c1", "c2"):
            store.create({"apiVersion": INFRA, "kind": "Metal3Machine",
                          "metadata": {"name": f"{cluster}-m0", "namespace": NS,
                                       "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
                          "spec": {"image": image, "userData": {"name": "shared-user-data"}}})
        before = {kind: store.list(api, kind, NS) for api, kind in ((INFRA, "Metal3Machine"), ("v1", "Secret"))}
    extra = {"pivot_cluster": "c1", "pivot_namespace": NS, "pivot_from": source, "pivot_to": target}
    reason = "used outside the move by Metal3Machine metal3/c2-m0 too"

    check = ansible_playbook(PLAYBOOK, extra, "--check")
    assert check.ok, check.output
    assert "Secret  metal3     shared-user-data  " + reason in check.output
    with open_store(source) as bastion, open_store(target) as cluster:
        assert {kind: bastion.list(api, kind, NS) for api, kind in ((INFRA, "Metal3Machine"), ("v1", "Secret"))} \
            == before
        assert cluster.list(INFRA, "Metal3Machine", NS) == []

    run = ansible_playbook(PLAYBOOK, extra, "-v")
    assert run.ok, run.output
    assert reason in run.output and '"stayed": [' in run.output
    with open_store(source) as bastion, open_store(target) as cluster:
        assert [m["metadata"]["name"] for m in cluster.list(INFRA, "Metal3Machine", NS)] == ["c1-m0"]
        assert cluster.list("v1", "Secret", NS) == []
        assert bastion.list("v1", "Secret", NS) == before["Secret"]
        assert bastion.list(INFRA, "Metal3Machine", NS) == [m for m in before["Metal3Machine"]
                                                            if m["metadata"]["name"] == "c2-m0"]
