"""The collection as Galaxy receives it: `ansible-galaxy collection build` of this checkout's files carries what a
user runs or reads, and none of the checkout's tools, caches or tests (galaxy.yml's build_ignore); each role has
the README Galaxy requires."""
from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# Whole directories a user gets, each with every file git has in it.
SHIPPED_DIRS = ("plugins", "roles", "playbooks", "meta", "docs", "examples", "operator", "config",
                "execution-environment", "extensions")
SHIPPED_FILES = ("README.md", "LICENSE", "CHANGELOG.rst", "changelogs/changelog.yaml", "changelogs/config.yaml",
                 "requirements.txt", "bindep.txt", ".ansible-lint", ".ansible-lint-ignore")
# Paths no file of the tarball may be under: the checkout's.
LEFT_OUT = ("tests/", "build/", ".venv/", ".venv-sanity/", "benchmarks/", "hack/", ".ci/", "changelogs/fragments/",
            "changelogs/.plugin-cache.yaml", "Makefile", "pyproject.toml", "requirements-test.txt", "ansible.cfg",
            ".gitignore")


def _checkout_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=False)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    return [name for name in listed.stdout.decode().split("\0") if name and (REPO / name).is_file()]


@pytest.fixture(scope="module")
def tarball(tmp_path_factory) -> tuple[Path, list[str], list[str]]:
    """Built from a copy of the checkout's files (tracked and new, not ignored), as a fresh clone would be."""
    work = tmp_path_factory.mktemp("tarball")
    files = _checkout_files()
    source = work / "src"
    for name in files:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_bytes((REPO / name).read_bytes())
    build = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(work / "out")],
                           cwd=source, capture_output=True, text=True, timeout=300, check=False)
    assert build.returncode == 0, build.stdout + build.stderr
    (artifact,) = (work / "out").glob("*.tar.gz")
    with tarfile.open(artifact) as tar:
        names = [member.name for member in tar.getmembers() if member.isfile()]
    return artifact, names, files


def test_the_tarball_is_named_after_galaxy_yml(tarball):
    artifact, _names, _files = tarball
    version = yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]
    assert artifact.name == f"metal3-baremetal-{version}.tar.gz"


def test_the_tarball_carries_what_a_user_needs(tarball):
    _artifact, names, files = tarball
    missing = [f for f in files if f.split("/")[0] in SHIPPED_DIRS and "/__pycache__/" not in f and f not in names]
    assert missing == []
    assert [f for f in SHIPPED_FILES if f not in names] == []
    assert {"MANIFEST.json", "FILES.json"} <= set(names)


def test_the_tarball_leaves_the_checkout_out(tarball):
    _artifact, names, _files = tarball
    assert [n for n in names if n.startswith(LEFT_OUT) or n.endswith((".pyc", ".tar.gz"))] == []


@pytest.mark.parametrize("role", sorted(p.parent.parent.name for p in (REPO / "roles").glob("*/tasks/main.yml")))
def test_each_role_has_a_readme_naming_its_variables(role):
    """Galaxy refuses a collection whose roles have no README; this one names the role and each of its
    variables (its argument spec's options)."""
    readme = (REPO / "roles" / role / "README.md").read_text()
    assert readme.startswith(f"# metal3.baremetal.{role}\n")
    spec = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    options = spec["argument_specs"]["main"].get("options") or {}
    assert [o for o in options if f"`{o}`" not in readme] == []
