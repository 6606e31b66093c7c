"""Upstream's baremetal-operator, built from its snapshot (sources.py), driving the test harness's Ironic and
sushy-tools' fake Redfish systems: the anchor of the hosts benchmark (benchmarks/hosts/bench.py).

BMO runs with its own CRDs (exported from the same snapshot) on a fresh harness kube-apiserver, watching one
namespace, with its webhooks off (``--webhook-port 0``), its Ironic provisioner plugin, and the harness Ironic's
credentials in ``$METAL3_AUTH_ROOT_DIR/ironic`` as ironic-image hands them to it. Its deploy kernel and ramdisk are
URLs on the Ironic's HTTP server: hosts registered with inspection and cleaning off never boot the agent.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "build" / "collections"), str(REPO), str(REPO / "operator")]

from benchmarks.upstream.sources import BMO, build, git_dir, plugin_dir  # noqa: E402
from tests.harness.cluster import KubeCluster, free_port  # noqa: E402
from tests.harness.ironic import Ironic  # noqa: E402


def crds(snapshots: Path, into: Path) -> list[Path]:
    """baremetal-operator's CRDs as its snapshot holds them (config/base/crds/bases), written into ``into``."""
    repo = ["git", "--git-dir", str(git_dir(snapshots, BMO))]
    names = subprocess.run([*repo, "ls-tree", "--name-only", "HEAD", "config/base/crds/bases/"], check=True,
                           capture_output=True, text=True).stdout.split()
    into.mkdir(parents=True, exist_ok=True)
    for name in names:
        (into / Path(name).name).write_bytes(subprocess.run([*repo, "show", f"HEAD:{name}"], check=True,
                                                            capture_output=True).stdout)
    return sorted(into.glob("*.yaml"))


class UpstreamBMO:
    """baremetal-operator watching ``namespace`` of ``cluster``, driving ``ironic``; ``start()``, ``stop()``."""

    def __init__(self, snapshots: Path, cluster: KubeCluster, ironic: Ironic, namespace: str, workdir: Path,
                 *args: str) -> None:
        self.binary = build("baremetal-operator", snapshots)
        self.plugins = plugin_dir("baremetal-operator", snapshots)
        self.cluster, self.ironic, self.namespace, self.workdir, self.args = cluster, ironic, namespace, workdir, args
        self.process: subprocess.Popen[bytes] | None = None
        self.metrics_port = free_port()

    def start(self) -> UpstreamBMO:
        auth = self.workdir / "auth" / "ironic"
        auth.mkdir(parents=True, exist_ok=True)
        for key, value in self.ironic.credentials().items():
            (auth / key).write_text(value)
        files = f"http://127.0.0.1:{self.ironic.http_port}"
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig), "IRONIC_ENDPOINT": f"{self.ironic.url}/v1/",
               "METAL3_AUTH_ROOT_DIR": str(self.workdir / "auth"), "PROVISIONER_PLUGIN_DIR": str(self.plugins),
               "DEPLOY_KERNEL_URL": f"{files}/ipa.kernel", "DEPLOY_RAMDISK_URL": f"{files}/ipa.initramfs"}
        log = open(self.workdir / "baremetal-operator.log", "wb")  # noqa: SIM115 - lives as long as the process
        self.process = subprocess.Popen(
            [str(self.binary), "--namespace", self.namespace, "--webhook-port", "0",
             "--metrics-addr", f"127.0.0.1:{self.metrics_port}", "--health-addr", f"127.0.0.1:{free_port()}",
             *self.args],
            env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        return self

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
