"""Fixtures for the operator's tests: the operator process, against the harness's cluster, on the test's
namespace; stopped (and its log shown on failure) after the test."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from kubernetes import client

from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import Ironic, IronicOptions
from metal3_operator.manager import main
from tests.harness.cluster import KubeCluster
from tests.harness.operator_process import Operator

REPO = Path(__file__).resolve().parents[2]
# A cluster whose API server never answers: what the operator does before it reaches one.
UNREACHABLE_KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


@pytest.fixture
def operator_main(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., int]:
    """The operator's main, in-process, run from ``tmp_path`` (its runner directory ``tmp_path/runner``) with this
    repo's roles and operator/watches.yaml, no metrics or health ports, against a cluster that never answers
    unless ``kubeconfig`` names another; later flags win over these."""
    unreachable = tmp_path / "kubeconfig"
    unreachable.write_text(UNREACHABLE_KUBECONFIG)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ANSIBLE_COLLECTIONS_PATH", str(REPO / "build" / "collections"))  # where the roles are

    def run(*flags: str, kubeconfig: Path = unreachable) -> int:
        return main(["--watches-file", str(REPO / "operator" / "watches.yaml"), "--kubeconfig", str(kubeconfig),
                     "--runner-dir", str(tmp_path / "runner"), "--metrics-bind-address", "0",
                     "--health-probe-bind-address", "0", *flags])
    return run


@pytest.fixture
def operators(kube_cluster: KubeCluster, kube_namespace: str, tmp_path: Path) -> Iterator[Callable[..., Operator]]:
    """Start operators with ``operators(*flags, env=...)``; all are stopped at the end of the test."""
    started: list[Operator] = []

    def start(*args: str, env: dict[str, str] | None = None, wait_ready: bool = True) -> Operator:
        operator = Operator(kube_cluster, tmp_path / f"operator-{len(started)}", kube_namespace, *args, env=env)
        started.append(operator)
        return operator.start(wait_ready)

    yield start
    for operator in started:
        operator.stop()
        print(f"--- {operator.log.name}\n{operator.tail(60)}")


@pytest.fixture
def ironic_client(ironic: Any, monkeypatch: pytest.MonkeyPatch) -> Ironic:
    """A client of the harness's Ironic, for what the tests check there."""
    for key, value in ironic.env.items():
        monkeypatch.setenv(key, value)
    return Ironic(IronicOptions(cloud=ironic.cloud))


@pytest.fixture
def custom(kube_cluster: KubeCluster) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(kube_cluster.api_client())


def eventually(check: Callable[[], Any], what: str, timeout: float = 120.0, interval: float = 0.5) -> Any:
    """``check()``'s first truthy value, or a failure naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout:.0f}s (last: {value!r})")
        time.sleep(interval)


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), {})


@pytest.fixture
def cluster_api_operator(cluster_api: Any, cluster_api_namespace: str, ironic: Any,
                         tmp_path: Path) -> Iterator[Operator]:
    """The collection's operator on the ``cluster_api`` fixture's cluster, for the scenarios under Cluster API's
    managers. The workload cluster's API is on loopback there: the operator is told it may connect there."""
    env = {**ironic.env, "METAL3_ALLOWED_LOCAL_HOSTS": "127.0.0.1"}
    started = Operator(cluster_api.cluster, tmp_path / "operator", cluster_api_namespace, env=env).start()
    yield started
    started.stop()
    print(f"--- {started.log.name}\n{started.tail(60)}")
