"""Fixtures shared by every test: a store on each backend, the same test run against both."""
from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import pytest

# The engine's entry point: the domains' admission rules registered, as every module and the operator have them.
from ansible_collections.metal3.baremetal.plugins.module_utils import engine  # noqa: F401  # pylint: disable=unused-import
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.kube import KubernetesStore
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

pytest_plugins = ["tests.harness.pytest_kube", "tests.harness.pytest_cluster_api", "tests.harness.pytest_ironic"]

BACKENDS = ["local", "kubernetes"]
T = TypeVar("T")


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM (a CI job's timeout, a plain ``kill``) stops the run as Ctrl-C does, so that the fixtures' teardowns
    still stop the harness's processes (etcd, kube-apiserver, Ironic, Cluster API's managers), which a run killed
    outright leaves behind."""
    signal.signal(signal.SIGTERM, _interrupted)


def _interrupted(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def namespace(backend: str, request: pytest.FixtureRequest) -> str:
    """A fresh namespace: a new one on the cluster; 'test' in a fresh local file."""
    if backend == "kubernetes":
        return request.getfixturevalue("kube_namespace")
    return "test"


@pytest.fixture
def store_options(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    """The module options that name this test's store."""
    if backend == "kubernetes":
        cluster = request.getfixturevalue("kube_cluster")
        return {"backend": "kubernetes", "kubeconfig": str(cluster.kubeconfig)}
    return {"backend": "local", "store_path": str(tmp_path / "store.db")}


@pytest.fixture
def store(store_options: dict[str, str]) -> Iterator[Store]:
    if store_options["backend"] == "kubernetes":
        opened: Store = KubernetesStore(kubeconfig=store_options["kubeconfig"])
    else:
        opened = LocalStore(store_options["store_path"])
    with opened:
        yield opened


def eventually(check: Callable[[], T], timeout: float = 30.0, interval: float = 0.2) -> T:
    """Poll until ``check`` returns a truthy value; for what a cluster does asynchronously (garbage collection)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The virtual lab's tests first and on one worker (``--dist loadgroup``): they take the longest and hold the
    one lab a machine has, so the other worker runs everything else meanwhile instead of waiting for the lab."""
    for item in items:
        if item.get_closest_marker("virtual_lab"):
            item.add_marker(pytest.mark.xdist_group("virtual-lab"))
    items.sort(key=lambda item: item.get_closest_marker("virtual_lab") is None)
    if getattr(config.option, "loadgroup", False):  # an xdist worker of --dist loadgroup
        for item in items:
            _in_its_group(item)


def _in_its_group(item: pytest.Item) -> None:
    """The item's node id ends with its xdist groups, which is how xdist's scheduler sends a group to one worker.
    xdist 3.8 writes the suffix into ``_nodeid``, which pytest 9.2's structured node ids no longer read
    (pytest-dev/pytest-xdist#1386): every group was spread over both workers (a module fixture that runs the
    hosts benchmark ran on each, and the lab tests waited for each other's lab). Set here the way pytest 9.2
    reads it, with xdist's own suffix."""
    groups = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                     for mark in item.iter_markers("xdist_group")})
    if groups and not item.nodeid.endswith("@" + "_".join(groups)) and hasattr(item, "_id"):
        from _pytest.nodeid import coerce_node_id  # pytest 9.2's; older ones read xdist's _nodeid

        item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(groups)}")
