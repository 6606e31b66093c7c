"""One reconcile = one ansible-runner run of the watch's role or playbook, in-process.

``ansible_runner.run`` is called from the worker thread, with a private data dir per object (an object is
never reconciled twice at once, so its directory is never shared), artifacts rotated to the watch's
maxRunnerArtifacts, the interpreter named in the inventory, no fact gathering, and events read from the
event handler in memory instead of from disk. ansible-playbook itself is the prefork server's (prefork.py).
"""
from __future__ import annotations

import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import ansible_runner
import ptyprocess
import yaml

from metal3_operator.prefork import check_ansible_core, end_process_tree
from metal3_operator.watches import Watch, WatchesError, parse_duration

log = logging.getLogger("metal3_operator.runner")


def _close_without_waiting_for_the_dead(close: Callable[..., None]) -> Callable[..., None]:
    """ansible-runner closes a finished run's pty with ptyprocess, which first sleeps 0.1 s "to give the kernel
    time" - for a process that has already exited, as every run's has by then: a tenth of a second of every
    reconcile, a quarter of a cheap one. Only that wait goes; a process still alive gets it as before."""
    def wrapped(self: ptyprocess.PtyProcess, force: bool = True) -> None:
        if not self.closed and not self.isalive():
            self.delayafterclose = 0
        close(self, force)

    wrapped.skips_delay_after_exit = True  # type: ignore[attr-defined]
    return wrapped


def patch_pty_close() -> None:
    """Install the close above, once: done by the Runner when it starts, so that importing this module changes
    nothing in ptyprocess for anyone else in the process."""
    if not getattr(ptyprocess.PtyProcess.close, "skips_delay_after_exit", False):
        ptyprocess.PtyProcess.close = _close_without_waiting_for_the_dead(ptyprocess.PtyProcess.close)


def _end_the_whole_run(handle_termination: Callable[..., None]) -> Callable[..., None]:
    """ansible-runner ends a cancelled (or timed out) run by killing its child's process group: ansible-playbook,
    but not its task workers, each of which Ansible puts in a session of its own, nor what their tasks started -
    they would go on, reparented to init. This ends the child's whole process tree first (with prefork, the child
    is the client, and its going ends the run on the server's side)."""
    def wrapped(cls: type, pid: int, pidfile: str | None = None) -> None:
        end_process_tree(pid)
        handle_termination(pid, pidfile)

    wrapped.ends_the_whole_run = True  # type: ignore[attr-defined]
    return wrapped


def patch_run_termination() -> None:
    """Install the termination above, once, as the Runner starts (as patch_pty_close)."""
    if not getattr(ansible_runner.runner.Runner.handle_termination, "ends_the_whole_run", False):
        ansible_runner.runner.Runner.handle_termination = classmethod(
            _end_the_whole_run(ansible_runner.runner.Runner.handle_termination))


HERE = Path(__file__).resolve().parent
# Imported by the prefork server once, so that each run's action plugins find them already loaded (and the
# engine's caches filled: its store backends, kinds and schema validators). openstacksdk, which every run that
# talks to Ironic imports, costs a second of CPU to import: more than the rest of a host's reconcile.
PRELOAD = ["ansible.plugins.inventory", "ansible.plugins.strategy.linear", "ansible.executor.process.worker",
           "ansible.plugins.shell.powershell", "tomllib", "kubernetes.client", "kubernetes.dynamic",
           "kubernetes.config", "jsonschema", "yaml", "openstack", "openstack.config.loader",
           "openstack.baremetal.baremetal_service", "openstack.baremetal.v1._proxy",
           "ansible_collections.metal3.baremetal.plugins.action.*",
           "ansible_collections.metal3.baremetal.plugins.module_utils.engine:warm"]
# The actions a role asks to be requeued with, matched by the name written in the task as the Ansible Operator
# matches them (its controller's reconcile.go): operator_sdk.util's, or the collection's called by its short name.
REQUEUE_ACTIONS = {"requeue_after", "operator_sdk.util.requeue_after"}
# ansible-runner calls every plugin installed beside it for each event; the Ansible Operator's http plugin, there
# for the tests that run the real one, posts nowhere here (and would log that for each event). The Runner drops it
# when it starts.
UNUSED_RUNNER_PLUGINS = ("http",)
# Seconds Runner.close waits for the runs it cancels to return: ansible-runner looks at a run's cancel every 5 s.
CLOSE_TIMEOUT = 15.0


@dataclass
class Result:
    ok: bool
    failures: list[str] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)
    # Seconds, when a task asked to be requeued; 0 or less: asked, but for no requeue (the object's finalizer
    # stays all the same), as under the Ansible Operator.
    requeue_after: float | None = None
    # What the requeue_after task said the object waits on: (apiVersion, kind, namespace, name) each.
    wait_on: list[tuple[str, str, str, str]] = field(default_factory=list)

    def message(self) -> str:
        return "\n".join(self.failures)


class Events:
    """What a reconcile learns from its run's events: stats, failures, and when to look again - a task of action
    ``requeue_after`` returning ``period`` (a Go duration), read as the Ansible Operator reads it; the first one
    counts."""

    def __init__(self) -> None:
        self.stats: dict[str, Any] | None = None
        self.failures: list[str] = []
        self.requeue: float | None = None
        self.wait_on: list[tuple[str, str, str, str]] = []

    def __call__(self, event: dict[str, Any]) -> bool:
        kind = event.get("event")
        data: dict[str, Any] = event.get("event_data") or {}
        res: dict[str, Any] = data["res"] if isinstance(data.get("res"), dict) else {}
        if kind == "playbook_on_stats":
            self.stats = data
        elif kind == "runner_on_failed" and not data.get("ignore_errors"):
            self.failures.append(str(res.get("msg") or f"task {data.get('task', '?')} failed"))
            return True  # kept on disk, for whoever debugs it
        elif kind == "runner_on_ok" and data.get("task_action") in REQUEUE_ACTIONS and self.requeue is None:
            try:
                self.requeue = parse_duration(res.get("period"), "requeue_after: period")
            except WatchesError as e:
                self.failures.append(str(e))
            self.wait_on = [(str(t.get("api_version", "")), str(t.get("kind", "")), str(t.get("namespace", "")),
                             str(t.get("name") or "")) for t in res.get("wait_on") or [] if isinstance(t, dict)]
        return False

    def counts(self) -> dict[str, int]:
        if not self.stats:
            return {}
        return {key: sum((self.stats.get(key) or {}).values()) for key in ("ok", "changed", "skipped", "failures")}


class Runner:
    """Runs roles for the controllers; owns the prefork server and the runner directory."""

    def __init__(self, runner_dir: Path, envvars: dict[str, str] | None = None, prefork: bool = True) -> None:
        if prefork:
            check_ansible_core()  # UntestedAnsibleCore before anything is started or written
        patch_pty_close()
        patch_run_termination()
        for plugin in UNUSED_RUNNER_PLUGINS:
            ansible_runner.plugins.pop(plugin, None)
        self.dir = runner_dir.resolve()  # the prefork server and its clients run elsewhere
        self.dir.mkdir(parents=True, exist_ok=True)
        self.envvars = {"ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
                        "ANSIBLE_RETRY_FILES_ENABLED": "false", **(envvars or {})}
        # An .ini name: Ansible's yaml inventory plugin, tried before the ini one, takes an extension-less file
        # and fails on it (a parse and an exception per run).
        self.inventory = self.dir / "inventory.ini"
        self.inventory.write_text(f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n")
        self._server: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        # Set by close: runs under way are cancelled, and close waits for them to return.
        self._closing = threading.Event()
        self._runs = 0
        self._runs_done = threading.Condition()
        # The ansible-playbook of this Python's environment, whatever PATH says.
        ansible_playbook = shutil.which("ansible-playbook", path=os.path.dirname(sys.executable)) \
            or shutil.which("ansible-playbook")
        if not ansible_playbook:
            raise RuntimeError("ansible-playbook is not installed beside this Python")
        self._binary = ansible_playbook
        if prefork:
            self._start_prefork(ansible_playbook)

    def _start_prefork(self, ansible_playbook: str) -> None:
        socket_path = self.dir / "prefork.sock"
        self._server = subprocess.Popen(
            [sys.executable, str(HERE / "prefork.py"), str(socket_path), ansible_playbook, *PRELOAD],
            stdin=subprocess.PIPE, cwd=self.dir)
        client = self.dir / "ansible-playbook"
        client.write_text(f"#!{sys.executable} -IS\n{(HERE / 'prefork_client.py').read_text()}")
        client.chmod(0o755)
        self._binary = str(client)
        self.envvars.update(METAL3_PREFORK_SOCKET=str(socket_path), METAL3_PREFORK_ANSIBLE_PLAYBOOK=ansible_playbook)

    def close(self) -> None:
        """End every run under way, whole (see ``_end_the_whole_run``), and the prefork server; return once the
        runs have returned (or CLOSE_TIMEOUT has passed)."""
        self._closing.set()
        if self._server and self._server.poll() is None:
            self._server.stdin.close()  # type: ignore[union-attr]  # the server ends its runs, then exits
            try:
                self._server.wait(10)
            except subprocess.TimeoutExpired:
                self._server.kill()
        with self._runs_done:  # ansible-runner asks each run's cancel every pexpect_timeout (5 s)
            self._runs_done.wait_for(lambda: self._runs == 0, CLOSE_TIMEOUT)

    def playbook(self, watch: Watch, finalizer: bool) -> str:
        """The playbook a run executes: the watch's, or a play applying its role to localhost."""
        target = watch.finalizer if finalizer and watch.finalizer and (watch.finalizer.role or
                                                                       watch.finalizer.playbook) else watch
        if target.playbook:
            return target.playbook
        # A role found by its path (not a collection's) is applied by that path. Imported without its argument
        # spec validation: what a run gives the role is the watch's vars and the CR's meta, not a user's input,
        # and the validation is a task of its own - a worker process forked per run, a fifth of an idle
        # reconcile. The Ansible Operator's play (roles:) still validates.
        path = self.dir / "playbooks" / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', str(target.role))}.yml"
        with self._lock:
            if not path.exists():
                path.parent.mkdir(exist_ok=True)
                play = [{"name": f"Reconcile with {target.role}", "hosts": "localhost", "gather_facts": False,
                         "tasks": [{"ansible.builtin.import_role": {"name": target.role,
                                                                    "rolespec_validate": False}}]}]
                path.write_text(yaml.safe_dump(play))
        return str(path)

    def _kind_dir(self, watch: Watch) -> Path:
        return self.dir / (watch.group or "core") / watch.version / watch.kind

    def private_dir(self, watch: Watch, namespace: str, name: str) -> Path:
        return self._kind_dir(watch) / (namespace or "_cluster") / name

    def objects(self, watch: Watch) -> list[tuple[str, str]]:
        """(namespace, name) of each object of the kind that has a directory here."""
        return [("" if d.parent.name == "_cluster" else d.parent.name, d.name)
                for d in self._kind_dir(watch).glob("*/*") if d.is_dir()]

    def forget(self, watch: Watch, namespace: str, name: str) -> None:
        """Remove an object's directory once the object is gone: artifacts stay bounded as objects come and go."""
        shutil.rmtree(self.private_dir(watch, namespace, name), ignore_errors=True)

    def run(self, watch: Watch, obj: dict[str, Any], variables: dict[str, Any], finalizer: bool = False,
            cancel: Callable[[], bool] | None = None, max_artifacts: int | None = None, verbosity: int = 0) -> Result:
        meta = obj["metadata"]
        private = self.private_dir(watch, meta.get("namespace", ""), meta["name"])
        (private / "env").mkdir(parents=True, exist_ok=True)
        # Written here rather than passed as extravars=, which ansible-runner would also put on the command
        # line, where a large CR does not fit. ansible-runner passes the file as -e @env/extravars.
        extravars = private / "env" / "extravars"
        extravars.write_text(json.dumps(variables))
        extravars.chmod(0o600)
        events = Events()

        def cancelled() -> bool:
            return self._closing.is_set() or (cancel is not None and cancel())

        with self._runs_done:
            self._runs += 1
        try:
            runner = ansible_runner.run(
                private_data_dir=str(private), binary=self._binary,
                cmdline=shlex.quote(self.playbook(watch, finalizer)), inventory=str(self.inventory),
                envvars=self.envvars, verbosity=verbosity or None, quiet=True, event_handler=events,
                fact_cache_type="memory", rotate_artifacts=max_artifacts or watch.max_runner_artifacts,
                cancel_callback=cancelled, settings={"suppress_ansible_output": True})
        finally:
            with self._runs_done:
                self._runs -= 1
                self._runs_done.notify_all()
        counts = events.counts()
        if runner.status == "successful" and events.stats is not None and not events.failures:
            return Result(True, [], counts, events.requeue, events.wait_on)
        failures = events.failures
        if events.stats is None:
            failures = failures or [f"did not receive playbook_on_stats event ({_stdout_tail(runner)})"]
        return Result(False, failures or [f"the run ended {runner.status} (rc {runner.rc})"], counts)


def _stdout_tail(runner: Any) -> str:
    """The last error lines of a run that never started its play: the reason is only in its output."""
    try:
        lines = [line.strip() for line in runner.stdout.read().splitlines() if line.strip()]
    except (OSError, AttributeError, ValueError):
        lines = []
    errors = [line for line in lines if "ERROR" in line] or lines
    return " ".join(errors[-3:])[:1000] or f"status {runner.status}, rc {runner.rc}"
