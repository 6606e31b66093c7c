"""The operators as their users run them, against the harness's kube-apiserver, watching one test namespace:
the collection's (``python -m metal3_operator``, ``Operator``) and the real Ansible Operator
(``ansible-operator run``, built by hack/ansible-operator.sh, ``AnsibleOperator``), each in a process of its own.
Tests read their /metrics and probes, and stop them with SIGTERM or kill them with SIGKILL."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import IO, Any

from tests.harness.cache import cached
from tests.harness.cluster import KubeCluster, free_port

REPO = Path(__file__).resolve().parents[2]
WATCHES = REPO / "operator" / "watches.yaml"
COLLECTIONS = REPO / "build" / "collections"


def http_get(port: int, path: str) -> tuple[int, str]:
    """Status and body of a GET on loopback; 0 when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""
    except OSError:
        return 0, ""


def metrics_at(port: int) -> dict[str, float]:
    """A Prometheus endpoint's samples by name with labels, e.g.
    ``controller_runtime_reconcile_total{controller="...",...}``."""
    samples = {}
    for line in http_get(port, "/metrics")[1].splitlines():
        match = re.match(r"^([^#\s].*?)\s+([0-9.eE+-]+|NaN|[+-]Inf)$", line)
        if match:
            samples[match.group(1)] = float(match.group(2))
    return samples


def reconciles(samples: dict[str, float], controller: str = "") -> float:
    """controller-runtime's reconcile count, of the controllers whose name starts with ``controller``."""
    prefix = "controller_runtime_reconcile_total{"
    return sum(v for k, v in samples.items()
               if k.startswith(prefix) and f'controller="{controller}' in k)


class _OperatorProcess:
    """What both operators share: a process with its log, its metrics and its probes."""

    def __init__(self, cluster: KubeCluster, workdir: Path, namespace: str, *args: str,
                 env: dict[str, str] | None = None, watches: Path = WATCHES) -> None:
        self.cluster = cluster
        self.workdir = workdir
        self.namespace = namespace
        self.args = list(args)
        self.env = env or {}
        self.watches = watches
        self.metrics_port = free_port()
        self.health_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log = workdir / f"operator-{self.metrics_port}.log"

    def _spawn(self, command: list[str], env: dict[str, str], wait_ready: bool) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir)
        if wait_ready:
            self.wait(lambda: self.probe("/readyz") == 200, "ready")

    def wait(self, check: Any, what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if self.process and self.process.poll() is not None:
                raise AssertionError(f"the operator exited ({self.process.returncode}) before {what}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"the operator was not {what} after {timeout:.0f}s:\n{self.tail()}")
            time.sleep(0.2)

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def probe(self, path: str) -> int:
        return http_get(self.health_port, path)[0]

    def metrics(self) -> dict[str, float]:
        return metrics_at(self.metrics_port)

    def reconciles(self, controller: str = "") -> float:
        """Reconciles so far, of the controllers whose name starts with ``controller`` (all by default)."""
        return reconciles(self.metrics(), controller)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int | None:
        if not self.process or self.process.poll() is not None:
            return self.process.returncode if self.process else None
        self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def kill(self) -> None:
        self.stop(signal.SIGKILL)


class Operator(_OperatorProcess):
    """The collection's operator."""

    def start(self, wait_ready: bool = True) -> Operator:
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env, "WATCH_NAMESPACE": self.namespace,
               "PYTHONPATH": os.pathsep.join([str(REPO / "operator"), os.environ.get("PYTHONPATH", "")]),
               "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
               "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
        env.pop("KUBECONFIG", None)
        command = [sys.executable, "-m", "metal3_operator", "--watches-file", str(self.watches),
                   "--kubeconfig", str(self.cluster.kubeconfig), "--runner-dir", str(self.workdir / "runner"),
                   "--metrics-bind-address", f"127.0.0.1:{self.metrics_port}",
                   "--health-probe-bind-address", f"127.0.0.1:{self.health_port}",
                   # Its proxy's port picked here too: one the system picked as the operator started could be
                   # the metrics port picked here a moment before (seen: "Address already in use").
                   "--proxy-port", str(free_port()), *self.args]
        self._spawn(command, env, wait_ready)
        return self


# -- the real Ansible Operator --------------------------------------------------------------------------------

# Fixed in the Ansible Operator: the proxy its roles reach the API through (its reconciler hands them a
# kubeconfig naming localhost:8888 whatever --proxy-port says), the port of its osdk_metric API, and the runner
# directory of each object. One runs at a time on a machine; this lock (in the temporary directory, as the
# ports are the machine's) makes the others wait.
RUNNER_DIR = Path("/tmp") / "ansible-operator" / "runner"
LOCK = Path(tempfile.gettempdir()) / "metal3-baremetal-ansible-operator.lock"


def ansible_operator_binary() -> Path:
    """The real ``ansible-operator``: what hack/ansible-operator.sh builds or has cached."""
    return cached("ansible-operator.sh")


def ansible_operator_env(env: dict[str, str]) -> dict[str, str]:
    """The environment the Ansible Operator runs its roles in: ansible-runner and ansible-playbook of this
    Python's environment first on PATH, the collection on ANSIBLE_COLLECTIONS_PATH, the collection's store on
    the cluster (METAL3_BACKEND=kubernetes: the roles then reach it through the KUBECONFIG the operator gives
    them), no fact gathering."""
    return {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS), "METAL3_BACKEND": "kubernetes",
            # The Ansible Operator gathers facts before each role unless told (operator/README.md).
            "ANSIBLE_GATHERING": "explicit",
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]), **env}


@contextlib.contextmanager
def machine_lock() -> Any:
    """The Ansible Operator's ports, for as long as the block runs."""
    with LOCK.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)


class AnsibleOperator(_OperatorProcess):
    """The real Ansible Operator, ``ansible-operator run --watches-file ...``, with the harness's kubeconfig. It
    holds the machine-wide lock from ``start`` to ``stop``; ``stop`` removes its runs' directories of the test's
    namespace (it keeps them under /tmp/ansible-operator/runner)."""

    _lock: IO[str] | None = None

    def start(self, wait_ready: bool = True) -> AnsibleOperator:
        self.workdir.mkdir(parents=True, exist_ok=True)
        binary = ansible_operator_binary()
        self._lock = LOCK.open("a")
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        env = ansible_operator_env({**self.env, "KUBECONFIG": str(self.cluster.kubeconfig),
                                    "WATCH_NAMESPACE": self.namespace})
        command = [str(binary), "run", "--watches-file", str(self.watches),
                   "--metrics-bind-address", f"127.0.0.1:{self.metrics_port}",
                   "--health-probe-bind-address", f"127.0.0.1:{self.health_port}", *self.args]
        try:
            self._spawn(command, env, wait_ready)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int | None:
        try:
            return super().stop(sig, timeout)
        finally:
            for runs in RUNNER_DIR.glob(f"*/*/*/{self.namespace}"):
                shutil.rmtree(runs, ignore_errors=True)
            if self._lock:
                self._lock.close()  # and with it the lock
                self._lock = None


def ansible_operator_accepts(watches: Path, env: dict[str, str] | None = None,
                             timeout: float = 60.0) -> tuple[bool, str]:
    """Whether the real Ansible Operator starts with ``watches`` (read from its directory, its working
    directory), and the error it logged when it does not. It loads and checks the file, adds a controller per
    watch (a selector that is none is refused there), then starts its proxy: that line is the verdict, before it
    ever reaches a cluster (its kubeconfig names one that does not answer)."""
    kubeconfig = Path(tempfile.mkdtemp(prefix="ansible-operator-")) / "unreachable.kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{free_port()}"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "none"}}]}))
    command = [str(ansible_operator_binary()), "run", "--watches-file", watches.name, "--proxy-port", str(free_port()),
               "--metrics-bind-address", "0", "--health-probe-bind-address", "0"]
    errors: list[str] = []
    deadline = time.monotonic() + timeout
    # Locked: once started, it binds the fixed port of its osdk_metric API for a moment.
    with machine_lock():
        process = subprocess.Popen(command, cwd=watches.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, env=ansible_operator_env({**(env or {}), "KUBECONFIG": str(kubeconfig)}))
        try:
            for line in process.stdout:  # type: ignore[union-attr]
                if '"logger":"proxy"' in line and "Starting to serve" in line:
                    return True, ""
                with contextlib.suppress(ValueError):
                    logged = json.loads(line)
                    if logged.get("level") == "error":
                        errors.append(f"{logged.get('msg', '')} {logged.get('error', '')}".strip())
                if time.monotonic() > deadline:
                    break
            return False, errors[-1] if errors else "exited before it started"
        finally:
            process.kill()
            process.wait()
            shutil.rmtree(kubeconfig.parent, ignore_errors=True)
