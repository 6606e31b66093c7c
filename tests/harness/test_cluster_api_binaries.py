"""Cluster API's real controllers, built once per machine by hack/cluster-api.sh (issue 32): each binary runs, says
the release it was built from, and the cache holds the CRDs of the kinds the operator meets under Cluster API,
served at v1beta2, with each provider's webhook configurations. Nothing here starts a manager against a cluster."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.harness.cluster_api import BINARIES, PROVIDERS, cluster_api_dir

pytestmark = pytest.mark.kubernetes

VERSION = os.environ.get("CLUSTER_API_VERSION", "v1.14.2")

# The kinds issue 32's scenarios use, by the provider that defines them.
KINDS = {
    "core": {"Cluster", "Machine", "MachineSet", "MachineDeployment", "MachineHealthCheck", "ClusterClass"},
    "bootstrap": {"KubeadmConfig", "KubeadmConfigTemplate"},
    "controlplane": {"KubeadmControlPlane", "KubeadmControlPlaneTemplate"},
}


@pytest.fixture(scope="module")
def cache() -> Path:
    return cluster_api_dir()


def crds(directory: Path) -> list[dict]:
    return [doc for path in sorted(directory.glob("*.yaml")) for doc in yaml.safe_load_all(path.read_text())
            if doc and doc.get("kind") == "CustomResourceDefinition"]


def test_a_second_run_prints_the_same_cache_at_once(cache):
    again = subprocess.run(["bash", "hack/cluster-api.sh"], capture_output=True, text=True, timeout=10,
                           check=True, cwd=Path(__file__).resolve().parents[2])
    assert again.stdout.strip() == str(cache)
    assert again.stderr == ""
    assert cache.name == f"cluster-api-{VERSION}-r1"


@pytest.mark.parametrize("binary", BINARIES)
def test_each_manager_runs_and_answers_help(cache, binary):
    answered = subprocess.run([str(cache / "bin" / binary), "--help"], capture_output=True, text=True, timeout=30,
                              check=False)
    assert answered.returncode == 0, answered.stderr
    assert "--leader-elect" in answered.stdout + answered.stderr


@pytest.mark.parametrize("binary", BINARIES)
def test_each_manager_logs_the_release_it_was_built_from(cache, binary, tmp_path):
    # The managers log their version first, then load the kubeconfig: one that does not exist stops them there.
    env = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"}
    ran = subprocess.run([str(cache / "bin" / binary), f"--kubeconfig={tmp_path / 'absent'}"], capture_output=True,
                         text=True, timeout=30, check=False, env=env)
    assert ran.returncode != 0
    assert f"Version: {VERSION} " in ran.stdout + ran.stderr


def interpreter_requested(elf: bytes) -> bool:
    """Whether a 64-bit little-endian ELF executable has a PT_INTERP program header (asks for a dynamic loader)."""
    assert elf[:6] == b"\x7fELF\x02\x01"
    phoff = int.from_bytes(elf[32:40], "little")
    phentsize, phnum = int.from_bytes(elf[54:56], "little"), int.from_bytes(elf[56:58], "little")
    pt_interp = 3
    return any(int.from_bytes(elf[phoff + i * phentsize:phoff + i * phentsize + 4], "little") == pt_interp
               for i in range(phnum))


def test_the_binaries_are_static(cache):
    for binary in BINARIES:
        with (cache / "bin" / binary).open("rb") as elf:
            assert not interpreter_requested(elf.read(1 << 16)), f"{binary} asks for a dynamic loader"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_crds_of_each_provider_define_its_kinds_served_at_v1beta2(cache, provider):
    served = {crd["spec"]["names"]["kind"] for crd in crds(cache / "crds" / provider)
              if any(version["name"] == "v1beta2" and version["served"] for version in crd["spec"]["versions"])}
    assert KINDS[provider] <= served


def test_the_webhook_manifests_of_each_provider_are_cached(cache):
    for provider in PROVIDERS:
        docs = [doc for doc in yaml.safe_load_all((cache / "webhooks" / f"{provider}.yaml").read_text()) if doc]
        assert {doc["kind"] for doc in docs} <= {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
        assert any(doc["kind"] == "ValidatingWebhookConfiguration" for doc in docs), provider


def test_the_cache_is_read_only(cache):
    files = [path for path in cache.rglob("*") if path.is_file()]
    assert files
    assert not [path for path in files if path.stat().st_mode & 0o222]
