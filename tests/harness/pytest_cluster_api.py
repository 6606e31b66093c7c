"""pytest fixtures for Cluster API's real managers (issue 32): core, kubeadm bootstrap and kubeadm control plane,
started once per session (per xdist worker) on a kube-apiserver of their own, with the collection's CRDs, and a
fresh namespace per test there. Not on ``kube_cluster``: core's controllers would act on the Clusters and Machines
that other tests write there, and its webhooks and CRDs would refuse the bare objects they write against
tests/fixtures/crd's stand-ins. A Cluster API that cannot start fails the tests that need it; it never skips them."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.harness.cluster import ClusterError, KubeCluster
from tests.harness.cluster_api import COLLECTION_CRD_FILES, ClusterAPI


@pytest.fixture(scope="session")
def cluster_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterAPI]:
    cluster = KubeCluster(Path(tmp_path_factory.mktemp("cluster-api")))
    capi = ClusterAPI(cluster)
    try:
        cluster.start()
        cluster.install_crds(COLLECTION_CRD_FILES)
        capi.start()
    except (ClusterError, RuntimeError) as e:  # RuntimeError: hack/cluster-api.sh could not build the cache
        capi.stop()
        cluster.stop()
        pytest.fail(f"Cluster API could not be started: {e}", pytrace=False)
    yield capi
    capi.stop()
    cluster.stop()


@pytest.fixture
def cluster_api_namespace(cluster_api: ClusterAPI, request: pytest.FixtureRequest) -> Iterator[str]:
    name = cluster_api.new_namespace(request.node.name.split("[")[0].replace("_", "-")[:30].strip("-"))
    yield name
    cluster_api.cluster.delete_namespace(name)
