"""Cluster API's own controllers (issue 32): the core manager, the kubeadm bootstrap provider and the kubeadm
control plane of ``sigs.k8s.io/cluster-api``, with their CRDs and webhook manifests, as hack/cluster-api.sh
builds them once per machine (``bin/``, ``crds/<provider>/``, ``webhooks/<provider>.yaml``)."""
from __future__ import annotations

import subprocess
from pathlib import Path

from tests.harness.cluster import REPO

PROVIDERS = ("core", "bootstrap", "controlplane")
BINARIES = ("cluster-api-manager", "kubeadm-bootstrap-manager", "kubeadm-control-plane-manager")


def cluster_api_dir() -> Path:
    """The cache hack/cluster-api.sh fills (it builds on a cold machine, and prints it at once on a warm one)."""
    built = subprocess.run(["bash", str(REPO / "hack" / "cluster-api.sh")], capture_output=True, text=True,
                           check=False)
    if built.returncode != 0:
        raise RuntimeError(f"hack/cluster-api.sh failed:\n{built.stderr[-3000:]}")
    return Path(built.stdout.strip().splitlines()[-1])
