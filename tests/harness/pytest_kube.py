"""pytest fixtures for the real Kubernetes API: one cluster per session (per xdist worker), a fresh
namespace per test. A cluster that cannot start fails the tests that need it; it never skips them."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.harness.cluster import ClusterError, KubeCluster


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    cluster = KubeCluster(Path(tmp_path_factory.mktemp("kube")))
    try:
        cluster.start()
        cluster.install_crds()
    except ClusterError as e:
        cluster.stop()
        pytest.fail(f"the Kubernetes API could not be started: {e}", pytrace=False)
    yield cluster
    cluster.stop()


@pytest.fixture
def kube_namespace(kube_cluster: KubeCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    name = kube_cluster.new_namespace(request.node.name.split("[")[0].replace("_", "-")[:30].strip("-"))
    yield name
    kube_cluster.delete_namespace(name)
