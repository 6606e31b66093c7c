"""Upstream's ip-address-manager, built from its Go source once per machine and run like our operators, for the
side-by-side benchmark (bench.py --versus-upstream).

The Go module proxy serves no version of github.com/metal3-io/ip-address-manager here (403 on 2026-11-26), so
the source is a checkout given with --versus-upstream (for instance the snapshot `fetch github:metal3-io/...`
brings, exported with `git archive`); its dependencies come from the module proxy. The binary is cached under
~/.cache/metal3-baremetal by the hash of the source's go.sum and main.go, like the kube binaries.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from tests.harness.cluster import free_port
from tests.harness.operator_process import _OperatorProcess

CACHE = Path.home() / ".cache" / "metal3-baremetal"
# Upstream's client rate limit (main.go: --kube-api-qps 20, --kube-api-burst 30); "unthrottled" lifts it.
UNTHROTTLED = ["--kube-api-qps", "100000", "--kube-api-burst", "100000"]


def ipam_binary(source: Path) -> Path:
    """The ip-address-manager built from ``source`` (once per machine and source)."""
    digest = hashlib.sha256((source / "go.sum").read_bytes() + (source / "main.go").read_bytes()).hexdigest()[:12]
    binary = CACHE / f"ip-address-manager-{digest}" / "manager"
    if not binary.exists():
        binary.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["go", "build", "-o", str(binary.with_suffix(".tmp")), "."], cwd=source, check=True)
        binary.with_suffix(".tmp").rename(binary)
    return binary


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


def upstream_kind(source: Path) -> type[UpstreamIPAM]:
    """UpstreamIPAM with its binary built from ``source``: what bench.measure starts."""
    if shutil.which("go") is None:
        raise SystemExit("building ip-address-manager needs Go")
    binary = ipam_binary(source)
    return type("UpstreamIPAM", (UpstreamIPAM,), {"binary": binary})
