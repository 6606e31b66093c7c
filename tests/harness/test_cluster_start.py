"""`make cluster` on a fresh clone (issue 30, item 10): the target installs the collection first, and a harness that
fails to start stops what it started. The components are stand-ins (a process each that only waits) and the
failure is injected after kube-apiserver started: the cleanup is what is under test, not Kubernetes."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.harness import cluster as harness


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def stand_ins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """etcd, kube-apiserver and kube-controller-manager that start and wait; kube-apiserver answers ready at
    once. Returns the pids spawned, which the test's end kills if anything left them running."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for component in ("etcd", "kube-apiserver", "kube-controller-manager"):
        (bin_dir / component).write_text("#!/bin/sh\nexec sleep 300\n")
        (bin_dir / component).chmod(0o755)
    monkeypatch.setenv("METAL3_KUBE_BIN_DIR", str(bin_dir))
    monkeypatch.setattr(harness.KubeCluster, "_wait_ready", lambda self: None)
    spawned: list[int] = []
    spawn = harness.KubeCluster._spawn

    def spying(self: harness.KubeCluster, name: str, command: list[str], env: dict[str, str] | None = None) -> None:
        spawn(self, name, command, env)
        spawned.append(self.processes[name].pid)

    monkeypatch.setattr(harness.KubeCluster, "_spawn", spying)
    yield spawned
    for pid in spawned:
        if alive(pid):
            os.kill(pid, 9)


def injected(*_args: object, **_kwargs: object) -> None:
    raise harness.ClusterError("injected failure")


def test_a_start_that_fails_after_the_apiserver_started_leaves_nothing_running(stand_ins, tmp_path, monkeypatch):
    monkeypatch.setattr(harness.KubeCluster, "_start_conversion_webhook", injected)
    cluster = harness.KubeCluster(tmp_path / "cluster")
    with pytest.raises(harness.ClusterError, match="injected failure"):
        cluster.start()
    assert len(stand_ins) == 2  # etcd and kube-apiserver had started
    assert [pid for pid in stand_ins if alive(pid)] == []
    assert not cluster.pids_file.exists()


def test_up_that_fails_after_the_start_stops_everything_and_says_why(stand_ins, tmp_path, monkeypatch, capsys):
    """`make cluster`: the cluster started (all of it, the webhook too), then installing the CRDs failed."""
    monkeypatch.setattr(harness.KubeCluster, "_start_conversion_webhook",
                        lambda self: self._spawn("conversion-webhook", ["sleep", "300"]))
    monkeypatch.setattr(harness.KubeCluster, "install_crds", injected)
    directory = tmp_path / "cluster"
    assert harness.main(["up", "--dir", str(directory)]) == 1
    assert "error: injected failure" in capsys.readouterr().err
    assert len(stand_ins) == 4
    assert [pid for pid in stand_ins if alive(pid)] == []
    assert not (directory / "pids").exists()  # `make cluster-down` has nothing to do, and `up` may run again


def test_pids_are_recorded_as_each_process_starts(stand_ins, tmp_path, monkeypatch):
    """Whatever stops a start half-way (a signal, a kill), `make cluster-down` finds what had started."""
    recorded: list[str] = []
    monkeypatch.setattr(harness.KubeCluster, "_start_conversion_webhook",
                        lambda self: recorded.append(self.pids_file.read_text()) or injected())
    with pytest.raises(harness.ClusterError):
        harness.KubeCluster(tmp_path / "cluster").start()
    assert recorded == ["".join(f"{pid}\n" for pid in stand_ins)]


def test_make_cluster_installs_the_collection_first(tmp_path):
    """On a fresh clone build/collections does not exist; the target must make it before the harness imports it.
    ``make -n`` with the collection's place moved to an empty directory lists what the target would run."""
    collections = tmp_path / "collections"
    planned = subprocess.run(["make", "-n", "cluster", f"COLLECTIONS={collections}"], cwd=harness.REPO,
                             capture_output=True, text=True, timeout=60, check=True).stdout
    link = f"ln -sfn ../../../.. {collections}/ansible_collections/metal3/baremetal"
    assert link in planned, planned
    assert planned.index(link) < planned.index("tests.harness.cluster up"), planned


def test_a_missing_collection_is_named_before_anything_starts(stand_ins, tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "COLLECTION", tmp_path / "nowhere" / "ansible_collections" / "metal3" / "baremetal")
    monkeypatch.setattr(harness, "REPO", tmp_path / "nowhere")
    with pytest.raises(harness.ClusterError, match=r"not installed at .*run `make collection`"):
        harness.KubeCluster(tmp_path / "cluster").start()
    assert stand_ins == []
