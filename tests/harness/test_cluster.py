"""The harness itself: a real kube-apiserver answers, namespaces are fresh, the collection's CRDs are
served, and the garbage collector deletes dependents (which the store's cascade relies on)."""
from __future__ import annotations

import yaml
from kubernetes import client

from tests.conftest import eventually
from tests.harness.cluster import CRD_FILES


def test_the_api_answers_with_the_built_version(kube_cluster):
    version = client.VersionApi(kube_cluster.api_client()).get_code()
    assert version.git_version.startswith("v1.34.")


def test_each_test_gets_a_fresh_namespace(kube_cluster, kube_namespace):
    core = client.CoreV1Api(kube_cluster.api_client())
    # Only the garbage collector and namespace controllers run, so nothing fills a new namespace.
    assert core.list_namespaced_config_map(kube_namespace).items == []


def test_every_crd_of_the_collection_is_installed_and_served(kube_cluster):
    assert CRD_FILES, "config/crd holds no CRD"
    extensions = client.ApiextensionsV1Api(kube_cluster.api_client())
    installed = {crd.metadata.name for crd in extensions.list_custom_resource_definition().items}
    wanted = {doc["metadata"]["name"] for path in CRD_FILES for doc in yaml.safe_load_all(path.read_text()) if doc}
    assert wanted <= installed


def test_the_garbage_collector_deletes_dependents(kube_cluster, kube_namespace):
    core = client.CoreV1Api(kube_cluster.api_client())
    owner = core.create_namespaced_config_map(kube_namespace, {"metadata": {"name": "owner"}})
    core.create_namespaced_config_map(kube_namespace, {"metadata": {"name": "dependent", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}]}})
    core.delete_namespaced_config_map("owner", kube_namespace)

    def gone() -> bool:
        return "dependent" not in {cm.metadata.name for cm in core.list_namespaced_config_map(kube_namespace).items}

    assert eventually(gone, timeout=60)


def test_a_namespace_deleted_at_a_tests_end_goes_though_no_operator_releases_its_objects(kube_cluster):
    """A test ends with objects whose finalizers only its (stopped) operator would remove, a CAPM3 kind served at
    two versions among them: the namespace still goes, instead of being swept by the namespace controller for
    the rest of the session."""
    name = kube_cluster.new_namespace("finalized")
    custom = client.CustomObjectsApi(kube_cluster.api_client())
    custom.create_namespaced_custom_object("ipam.metal3.io", "v1alpha1", name, "ippools", {
        "apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPPool",
        "metadata": {"name": "pool", "finalizers": ["ippool.ipam.metal3.io"]}, "spec": {"namePrefix": "pool"}})
    custom.create_namespaced_custom_object("infrastructure.cluster.x-k8s.io", "v1beta1", name, "metal3datatemplates", {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "Metal3DataTemplate",
        "metadata": {"name": "template", "finalizers": ["metal3datatemplate.infrastructure.cluster.x-k8s.io"]},
        "spec": {"clusterName": "c"}})
    kube_cluster.delete_namespace(name)
    core = client.CoreV1Api(kube_cluster.api_client())

    def gone() -> bool:
        return name not in {ns.metadata.name for ns in core.list_namespace().items}

    assert eventually(gone, timeout=120)


def test_make_cluster_starts_a_cluster_people_can_use_and_stops_it(tmp_path):
    import subprocess
    import sys

    from ansible_collections.metal3.baremetal.plugins.module_utils.store.kube import KubernetesStore
    from tests.harness.cluster import REPO

    script = [sys.executable, "-m", "tests.harness.cluster"]  # as `make cluster` runs it
    up = subprocess.run([*script, "up", "--dir", str(tmp_path)], capture_output=True, text=True, timeout=300,
                        check=False, cwd=REPO)
    try:
        assert up.returncode == 0, up.stderr
        last = up.stdout.strip().splitlines()[-1]
        assert last == f"export KUBECONFIG={tmp_path / 'kubeconfig'}"
        with KubernetesStore(kubeconfig=str(tmp_path / "kubeconfig")) as store:
            assert store.list("ipam.metal3.io/v1alpha1", "IPPool", "default") == []
    finally:
        down = subprocess.run([*script, "down", "--dir", str(tmp_path)], capture_output=True, text=True, timeout=60,
                              check=False, cwd=REPO)
    assert down.returncode == 0, down.stderr
    assert "stopped 4 processes" in down.stdout  # etcd, kube-apiserver, controller-manager, conversion webhook
