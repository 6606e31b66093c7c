"""The operator as its users run it: ``python -m metal3_operator`` in a process of its own, against the
harness's kube-apiserver, watching one test namespace. Tests read its /metrics and probes, and stop it with
SIGTERM or kill it with SIGKILL."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.harness.cluster import KubeCluster, free_port

REPO = Path(__file__).resolve().parents[2]
WATCHES = REPO / "operator" / "watches.yaml"


class Operator:
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

    def start(self, wait_ready: bool = True) -> Operator:
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env, "WATCH_NAMESPACE": self.namespace,
               "PYTHONPATH": os.pathsep.join([str(REPO / "operator"), os.environ.get("PYTHONPATH", "")]),
               "ANSIBLE_COLLECTIONS_PATH": str(REPO / "build" / "collections"),
               "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
        env.pop("KUBECONFIG", None)
        command = [sys.executable, "-m", "metal3_operator", "--watches-file", str(self.watches),
                   "--kubeconfig", str(self.cluster.kubeconfig), "--runner-dir", str(self.workdir / "runner"),
                   "--metrics-bind-address", f"127.0.0.1:{self.metrics_port}",
                   "--health-probe-bind-address", f"127.0.0.1:{self.health_port}", *self.args]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir)
        if wait_ready:
            self.wait(lambda: self.probe("/readyz") == 200, "ready")
        return self

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

    def _get(self, port: int, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, ""
        except OSError:
            return 0, ""

    def probe(self, path: str) -> int:
        return self._get(self.health_port, path)[0]

    def metrics(self) -> dict[str, float]:
        """Samples by name with labels, e.g. ``controller_runtime_reconcile_total{controller="...",...}``."""
        text = self._get(self.metrics_port, "/metrics")[1]
        samples = {}
        for line in text.splitlines():
            match = re.match(r"^([^#\s].*?)\s+([0-9.eE+-]+|NaN|[+-]Inf)$", line)
            if match:
                samples[match.group(1)] = float(match.group(2))
        return samples

    def reconciles(self) -> float:
        return sum(v for k, v in self.metrics().items() if k.startswith("controller_runtime_reconcile_total{"))

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
