"""One reconcile's run through ansible-runner: what the role is handed, what the operator learns back, the
prefork server giving the same outcome as a fresh ansible-playbook, and runs that fail to start."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import yaml

from metal3_operator.parameters import extra_vars
from metal3_operator.prefork import end_process_tree
from metal3_operator.runner import Runner
from metal3_operator.watches import Watch

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "operator"
WATCH = Watch("example.com", "v1", "Probe", role="probe")
CR = {"apiVersion": "example.com/v1", "kind": "Probe", "metadata": {"name": "p-0", "namespace": "ns"},
      "spec": {"size": 3, "probeRequeue": 7}}


@pytest.fixture(params=[True, False], ids=["prefork", "fresh"])
def runner(request, tmp_path, monkeypatch):
    monkeypatch.setenv("ANSIBLE_ROLES_PATH", str(FIXTURES / "roles"))
    runner = Runner(tmp_path / "runner", prefork=request.param)
    yield runner
    runner.close()


def run(runner: Runner, cr=None, watch=WATCH, **variables):
    cr = cr or CR
    return runner.run(watch, cr, {**extra_vars(watch, cr), **variables})


def test_the_role_gets_the_cr_and_the_operator_its_stats_and_requeue(runner, tmp_path):
    out = tmp_path / "out.json"
    for _round in range(2):  # the first run of a prefork server imports Ansible; the second is a fork
        result = run(runner, probe_out=str(out))
        assert result.ok, result.failures
        assert result.requeue_after == 7.0
        assert result.stats == {"ok": 2, "changed": 1, "skipped": 1, "failures": 0}
        assert json.loads(out.read_text()) == {"meta": {"name": "p-0", "namespace": "ns"}, "size": 3, "vars": None,
                                               "verbosity": 0}
        out.unlink()


@pytest.mark.parametrize("period, requeue", [
    ("1m30s", 90.0),  # a Go duration, as the Ansible Operator reads it
    (12, 12.0),  # seconds, which the action writes 12s
    ("0s", 0.0),  # asked, but for no requeue (an object being deleted keeps its finalizer)
])
def test_a_requeue_after_task_is_the_requeue(runner, period, requeue):
    assert run(runner, probe_requeue=period).requeue_after == requeue


def test_what_a_requeue_after_task_waits_on_reaches_the_operator(runner):
    pool = {"api_version": "ipam.metal3.io/v1alpha1", "kind": "IPPool", "namespace": "ns", "name": "pool"}
    any_host = {"api_version": "metal3.io/v1alpha1", "kind": "BareMetalHost", "namespace": "ns"}
    result = run(runner, probe_requeue="10s", probe_wait_on=[pool, any_host])
    assert result.requeue_after == 10.0
    assert result.wait_on == [("ipam.metal3.io/v1alpha1", "IPPool", "ns", "pool"),
                              ("metal3.io/v1alpha1", "BareMetalHost", "ns", "")]


def test_a_run_skips_the_roles_argument_spec_validation(runner):
    """The role's vars are the watch's and the CR's meta, not a user's: its argument spec (which this run does not
    satisfy) is not checked, and no task worker is forked for it."""
    strict = Watch("example.com", "v1", "Probe", role="strict")
    result = run(runner, watch=strict)
    assert result.ok, result.failures
    assert result.stats["ok"] == 1  # the role's one task; no validation task


def test_a_prefork_runs_tasks_find_the_engine_warm(tmp_path, monkeypatch):
    """Its store backends imported and schema validators built once, by the server, not by each task's worker."""
    monkeypatch.setenv("ANSIBLE_ROLES_PATH", str(FIXTURES / "roles"))
    runner = Runner(tmp_path / "runner", prefork=True)
    try:
        # The first run may start before the server listens, and then runs cold: the second is a fork.
        run(runner, watch=Watch("example.com", "v1", "Probe", role="warm"))
        result = run(runner, watch=Watch("example.com", "v1", "Probe", role="warm"))
        assert result.ok, result.message()
    finally:
        runner.close()


def test_a_run_that_asks_nothing_is_not_requeued(runner):
    cr = {**CR, "spec": {"size": 3}}
    result = run(runner, cr=cr)
    assert result.ok and result.requeue_after is None


def test_a_run_has_the_verbosity_it_is_given(runner, tmp_path):
    out = tmp_path / "out.json"
    assert runner.run(WATCH, CR, {**extra_vars(WATCH, CR), "probe_out": str(out)}, verbosity=3).ok
    assert json.loads(out.read_text())["verbosity"] == 3


def test_a_failed_task_is_the_failure_message(runner):
    result = run(runner, probe_fail=True)
    assert not result.ok
    assert result.failures == ["spec.size: 3 is not a size"]
    assert result.stats["failures"] == 1


def test_a_playbook_that_never_starts_says_why(runner):
    broken = Watch("example.com", "v1", "Probe", playbook=str(FIXTURES / "broken.yml"))
    result = run(runner, watch=broken)
    assert not result.ok
    assert result.failures[0].startswith("did not receive playbook_on_stats event")
    assert "no.such.module" in result.failures[0]


def test_artifacts_are_rotated_to_the_watchs_bound(runner):
    for _round in range(4):
        assert runner.run(WATCH, CR, extra_vars(WATCH, CR), max_artifacts=2).ok
    artifacts = runner.private_dir(WATCH, "ns", "p-0") / "artifacts"
    assert len(list(artifacts.iterdir())) == 2


def test_a_run_is_cancelled_when_asked(runner, tmp_path):
    slow = tmp_path / "slow.yml"
    slow.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                    "    - ansible.builtin.pause: {seconds: 60}\n")
    started = time.monotonic()
    result = runner.run(Watch("example.com", "v1", "Probe", playbook=str(slow)), CR, {},
                        cancel=lambda: time.monotonic() - started > 2)
    assert not result.ok
    assert time.monotonic() - started < 30


def slow_playbook(tmp_path: Path) -> tuple[Path, Path]:
    """A play whose one task runs a process that starts another, both naming tmp_path, and waits a minute; and the
    file the last one writes once it is up. The last one ignores SIGTERM, as a task finishing a write might."""
    up = tmp_path / "up"
    waits = (f"import pathlib, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
             f"pathlib.Path({str(up)!r}).touch(); time.sleep(60)")
    starts = f"import subprocess, sys; subprocess.call([sys.executable, '-c', {waits!r}, sys.argv[1]])"
    slow = tmp_path / "slow.yml"
    slow.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"ansible.builtin.command": {"argv": ["{{ ansible_python_interpreter }}", "-c", starts, str(tmp_path)]}}]}]))
    return slow, up


def processes_naming(marker: Path, runner: Runner | None) -> list[str]:
    """The processes whose command line names marker: a run's ansible-playbook and its task workers (fresh), the
    task's own processes; with prefork, the forked run and its workers name the server's socket - the server
    itself, which outlives a run, is left out."""
    spared = {os.getpid(), runner._server.pid if runner and runner._server else 0}
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if proc.name.isdigit() and int(proc.name) not in spared and str(marker) in cmdline:
            found.append(f"{proc.name}: {cmdline[:200]}")
    return found


def gone(marker: Path, runner: Runner | None) -> list[str]:
    """The processes naming marker that are still there once they have had a few seconds to go."""
    deadline = time.monotonic() + 10
    while (left := processes_naming(marker, runner)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def test_a_cancelled_run_leaves_none_of_its_processes(runner, tmp_path):
    """Cancelling ends the whole run: ansible-playbook (or, with prefork, the server's fork), its task workers -
    each in a session of its own - and what the task started, not only the process ansible-runner started."""
    assert run(runner).ok  # with prefork, the slow run below is then a fork of a listening server
    slow, up = slow_playbook(tmp_path)
    result = runner.run(Watch("example.com", "v1", "Probe", playbook=str(slow)), CR, {}, cancel=up.exists)
    assert not result.ok
    assert up.exists()
    assert gone(tmp_path, runner) == []


def test_closing_the_runner_ends_the_runs_under_way(runner, tmp_path):
    assert run(runner).ok
    slow, up = slow_playbook(tmp_path)
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(
        runner.run(Watch("example.com", "v1", "Probe", playbook=str(slow)), CR, {})))
    thread.start()
    deadline = time.monotonic() + 60
    while not up.exists() and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert up.exists()
    runner.close()
    thread.join(60)  # close waits for the runs it cancels, for a while: on a loaded machine, maybe not long enough
    assert [r.ok for r in results] == [False]
    assert gone(tmp_path, runner) == []


def test_ending_a_process_tree_reaches_every_session_in_it(tmp_path):
    """A child in a session of its own (as Ansible's task workers are), its child, both ignoring SIGTERM: all end
    with the root, none is left to init."""
    up = tmp_path / "up"
    leaf = f"import pathlib, time; pathlib.Path({str(up)!r}).touch(); time.sleep(60)"
    middle = ("import os, signal, subprocess, sys; os.setsid(); signal.signal(signal.SIGTERM, signal.SIG_IGN); "
              f"subprocess.call([sys.executable, '-c', {leaf!r}, sys.argv[1]])")
    root = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys; subprocess.call([sys.executable, '-c', "
                             f"{middle!r}, sys.argv[1]])", str(tmp_path)])
    try:
        deadline = time.monotonic() + 30
        while not up.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        tree = [int(line.split(":")[0]) for line in processes_naming(tmp_path, None)]
        assert len(tree) == 3
        assert sorted(end_process_tree(root.pid)) == sorted(tree)
        root.wait(10)
        assert gone(tmp_path, None) == []
    finally:
        root.kill()
        root.wait()


def test_a_run_whose_environment_differs_starts_cold_with_the_same_outcome(tmp_path, monkeypatch):
    monkeypatch.setenv("ANSIBLE_ROLES_PATH", str(FIXTURES / "roles"))
    runner = Runner(tmp_path / "runner", prefork=True)
    try:
        assert run(runner).ok
        runner.envvars["ANSIBLE_FORCE_COLOR"] = "false"  # Ansible reads this at import: no fork can serve it
        result = run(runner)
        assert result.ok and result.requeue_after == 7.0
    finally:
        runner.close()


def test_mark_unsafe_keeps_cr_fields_from_being_templated(runner, tmp_path):
    out = tmp_path / "out.json"
    cr = {**CR, "spec": {"size": "{{ 7 * 6 }}"}}
    for watch, size in ((Watch("example.com", "v1", "Probe", role="probe", mark_unsafe=True), "{{ 7 * 6 }}"),
                        (WATCH, "42")):
        assert run(runner, cr=cr, watch=watch, probe_out=str(out)).ok
        assert str(json.loads(out.read_text())["size"]) == size


def test_a_role_found_by_its_path_runs_from_that_path(runner, tmp_path):
    out = tmp_path / "out.json"
    by_path = Watch("example.com", "v1", "Probe", role=str(FIXTURES / "roles" / "probe"))
    assert run(runner, watch=by_path, probe_out=str(out)).ok
    assert json.loads(out.read_text())["size"] == 3


def test_importing_the_runner_leaves_ptyprocess_alone_and_starting_one_patches_it_once(tmp_path):
    # A process of its own: this one has started Runners already.
    probe = f"""
from pathlib import Path
import ptyprocess
original = ptyprocess.PtyProcess.close
import metal3_operator.runner as runner
assert ptyprocess.PtyProcess.close is original, "patched at import"
runner.Runner(Path({str(tmp_path / "runner")!r}), prefork=False)
patched = ptyprocess.PtyProcess.close
assert patched is not original, "not patched by a started Runner"
runner.Runner(Path({str(tmp_path / "runner")!r}), prefork=False)
assert ptyprocess.PtyProcess.close is patched, "patched twice"
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "operator")}, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("requirements, package", [
    ("operator/requirements.txt", "ansible-core"),
    ("operator/requirements.txt", "ansible-runner"),
    ("operator/requirements.txt", "ptyprocess"),
])
def test_the_internals_the_runner_relies_on_are_pinned(requirements, package):
    """prefork.py and runner.py reach into these packages' internals (operator/requirements.txt says which):
    each is pinned to one version, and that is the version the tests run."""
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", (ROOT / requirements).read_text(), re.MULTILINE))
    assert package in pins, f"{package} is not pinned exactly in {requirements}"
    assert version(package) == pins[package]
