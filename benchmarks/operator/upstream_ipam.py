"""Upstream's ip-address-manager, built from its Go source once per machine (benchmarks/upstream/sources.py) and
run like our operators, for the side-by-side benchmark (bench.py --versus-upstream).
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from benchmarks.upstream.sources import build
from tests.harness.cluster import free_port
from tests.harness.operator_process import _OperatorProcess

# Upstream's client rate limit (main.go: --kube-api-qps 20, --kube-api-burst 30); "unthrottled" lifts it.
UNTHROTTLED = ["--kube-api-qps", "100000", "--kube-api-burst", "100000"]


class UpstreamIPAM(_OperatorProcess):
    """ip-address-manager watching one namespace, its metrics on plain HTTP, its webhook server (which it starts
    whatever the cluster asks of it) on a self-signed certificate."""

    binary: Path

    def start(self, wait_ready: bool = True) -> UpstreamIPAM:
        self.workdir.mkdir(parents=True, exist_ok=True)
        certs = self.workdir / "certs"
        certs.mkdir(exist_ok=True)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                        "/CN=localhost", "-keyout", str(certs / "tls.key"), "-out", str(certs / "tls.crt")],
                       check=True, capture_output=True)
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig)}
        command = [str(self.binary), "--namespace", self.namespace, "--webhook-port", str(free_port()),
                   "--webhook-cert-dir", str(certs), "--health-addr", f"127.0.0.1:{self.health_port}",
                   "--diagnostics-address", f"127.0.0.1:{self.metrics_port}", "--insecure-diagnostics",
                   *self.args]
        self._spawn(command, env, wait_ready)
        return self


def upstream_kind(snapshots: Path) -> type[UpstreamIPAM]:
    """UpstreamIPAM with its binary built from the snapshots: what bench.measure starts."""
    return type("UpstreamIPAM", (UpstreamIPAM,), {"binary": build("ip-address-manager", snapshots)})
