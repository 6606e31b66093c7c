"""Metal3's own controllers (baremetal-operator, cluster-api-provider-metal3, ip-address-manager) built from their
source once per machine, for the benchmarks that run them beside ours (issue 34).

The Go module proxy serves no version of ``github.com/metal3-io/...`` here, so the sources are the snapshots that
``fetch github:metal3-io/<name>`` brings (one bare git directory each, ``<snapshots>/<owner>+<name>/repo``): each
is exported with ``git archive`` into a build directory, side by side, and a controller's Metal3 modules from
other repositories (CAPM3's baremetal-operator and ip-address-manager APIs, baremetal-operator's
ironic-standalone-operator API) are pointed at those exports with ``go mod edit -replace``. Everything else comes
from the module proxy at the versions the controller's go.sum pins.

baremetal-operator loads its provisioner as a Go plugin (``<name>-provisioner.so`` in $PROVISIONER_PLUGIN_DIR; since
2026 even Ironic's): its plugins are built beside its manager, both with cgo on and the same flags, as its
Dockerfile builds them (a plugin loads only into a binary built alike), and ``plugin_dir`` says where they are.

A build is cached under ~/.cache/metal3-baremetal by its name and a digest of the commits it was made from and the
Go version, like the kube binaries: a new snapshot builds again.

    .venv/bin/python benchmarks/upstream/sources.py --snapshots <dir> [name ...]   # builds, prints the paths
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

CACHE = Path.home() / ".cache" / "metal3-baremetal"
SNAPSHOTS_ENV = "METAL3_UPSTREAM_SNAPSHOTS"


@dataclasses.dataclass(frozen=True)
class Controller:
    """One upstream controller: its repository, the Metal3 modules of other repositories it needs (module path,
    repository and the module's directory there), and the Go plugins it loads (file name, package)."""
    repo: str
    needs: tuple[tuple[str, str, str], ...] = ()
    plugins: tuple[tuple[str, str], ...] = ()

    @property
    def repos(self) -> list[str]:
        return [self.repo, *sorted({need[1] for need in self.needs})]


BMO, CAPM3, IPAM, IRSO = ("metal3-io/baremetal-operator", "metal3-io/cluster-api-provider-metal3",
                          "metal3-io/ip-address-manager", "metal3-io/ironic-standalone-operator")
CONTROLLERS = {
    "ip-address-manager": Controller(IPAM),
    "baremetal-operator": Controller(
        BMO, (("github.com/metal3-io/ironic-standalone-operator/api", IRSO, "api"),),
        (("ironic-provisioner.so", "./pkg/provisioner/ironic/plugin/"),
         ("demo-provisioner.so", "./pkg/provisioner/demo/plugin/"))),
    "cluster-api-provider-metal3": Controller(CAPM3, (
        ("github.com/metal3-io/baremetal-operator/apis", BMO, "apis"),
        ("github.com/metal3-io/baremetal-operator/pkg/hardwareutils", BMO, "pkg/hardwareutils"),
        ("github.com/metal3-io/ip-address-manager/api", IPAM, "api"),
    )),
}


class SourceError(Exception):
    """A snapshot is missing, or a build failed: what to do is in the message."""


def snapshots_dir(given: Path | None = None) -> Path:
    """Where the fetched snapshots are: ``given``, else $METAL3_UPSTREAM_SNAPSHOTS."""
    where = given or (Path(os.environ[SNAPSHOTS_ENV]) if os.environ.get(SNAPSHOTS_ENV) else None)
    if where is None:
        raise SourceError(f"say where the snapshots are: --snapshots <dir> or ${SNAPSHOTS_ENV}")
    return where


def git_dir(snapshots: Path, repo: str) -> Path:
    path = snapshots / repo.replace("/", "+") / "repo"
    if not path.is_dir():
        raise SourceError(f"no snapshot of {repo} at {path}: fetch github:{repo} first")
    return path


def commit_of(snapshots: Path, repo: str) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir(snapshots, repo)), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


def revisions(name: str, snapshots: Path) -> dict[str, str]:
    """The commit of each repository a controller is built from, for the reports."""
    return {repo: commit_of(snapshots, repo) for repo in CONTROLLERS[name].repos}


def binary_path(name: str, snapshots: Path) -> Path:
    go = subprocess.run(["go", "env", "GOVERSION"], check=True, capture_output=True, text=True).stdout.strip()
    # The recipe (CONTROLLERS' entry) is in it: a build made another way is another build.
    commits = [f"{repo} {commit}" for repo, commit in revisions(name, snapshots).items()]
    key = "\n".join([name, go, repr(CONTROLLERS[name]), *commits])
    return CACHE / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}" / "manager"


def _export(snapshots: Path, repo: str, into: Path) -> None:
    archive = into.with_suffix(".tar")
    subprocess.run(["git", "--git-dir", str(git_dir(snapshots, repo)), "archive", "--format=tar", "-o",
                    str(archive), "HEAD"], check=True)
    into.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    archive.unlink()


def build(name: str, snapshots: Path | None = None) -> Path:
    """The controller ``name`` built from the snapshots (once per machine and commits); its binary's path."""
    if name not in CONTROLLERS:
        raise SourceError(f"no upstream controller {name!r}: one of {', '.join(CONTROLLERS)}")
    if shutil.which("go") is None:
        raise SourceError("building Metal3's controllers needs Go")
    snapshots = snapshots_dir(snapshots)
    controller = CONTROLLERS[name]
    binary = binary_path(name, snapshots)
    if binary.exists():
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"build-{name}-", dir=binary.parent) as work:
        sources = {repo: Path(work) / repo.split("/")[1] for repo in controller.repos}
        for repo, into in sources.items():
            _export(snapshots, repo, into)
        main = sources[controller.repo]
        env = {**os.environ, "GOFLAGS": "-buildvcs=false", "GOTOOLCHAIN": "local",
               "CGO_ENABLED": "1" if controller.plugins else "0"}
        for module, repo, directory in controller.needs:
            subprocess.run(["go", "mod", "edit", "-replace", f"{module}={sources[repo] / directory}"], cwd=main,
                           env=env, check=True)
        # The replaced modules' own requirements may be newer than what go.sum pins: tidy the sums, not the code.
        subprocess.run(["go", "mod", "tidy", "-e"], cwd=main, env=env, check=True, capture_output=True)
        builds = [(binary.parent / plugin, ["-buildmode=plugin", package]) for plugin, package in controller.plugins]
        for out, what in [*builds, (binary, ["."])]:  # the manager last: its presence says the build is whole
            done = subprocess.run(["go", "build", "-o", f"{out}.tmp", *what], cwd=main, env=env, capture_output=True,
                                  text=True, check=False)
            if done.returncode:
                raise SourceError(f"building {name} ({out.name}) failed:\n{done.stderr[-4000:]}")
            Path(f"{out}.tmp").rename(out)
    return binary


def plugin_dir(name: str, snapshots: Path | None = None) -> Path:
    """Where the Go plugins of the controller ``name`` are ($PROVISIONER_PLUGIN_DIR for baremetal-operator)."""
    return build(name, snapshots).parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--snapshots", type=Path, help=f"the fetched snapshots (else ${SNAPSHOTS_ENV})")
    parser.add_argument("names", nargs="*", metavar="name", help=f"of {', '.join(CONTROLLERS)} (all by default)")
    args = parser.parse_args(argv)
    try:
        for name in args.names or CONTROLLERS:
            print(name, build(name, args.snapshots))
    except SourceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
