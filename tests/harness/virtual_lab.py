"""The virtual lab for the tests: one at a time per machine (one libvirtd serves every lab), and playbooks run
inside its network namespace, as a user runs them against the lab."""
from __future__ import annotations

import fcntl
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from tests.integration.playbook_runs import REPO, ansible_playbook

LAB_PLAYBOOK = REPO / "playbooks" / "lab.yml"
LOCK = REPO / "build" / "virtual-lab.lock"


@contextmanager
def one_lab_at_a_time() -> Iterator[None]:
    """Held while a test's lab exists: pytest-xdist workers (and a person's `make lab`) take turns."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def without_leftovers(lab: dict[str, Any]) -> None:
    """What a run killed before its teardown left of the lab ``lab`` (the role's variables) removed: its virtual
    servers, namespace, Ironic and Ironic's database, and the demo's store. A new lab then starts from nothing:
    Ironic's old nodes would otherwise wake up in the new servers' places, in states the new run never asked for."""
    removed = ansible_playbook(LAB_PLAYBOOK, {**lab, "virtual_lab_state": "absent"}, timeout=900)  # VMs of claims too
    assert removed.ok, removed.output[-5000:]
    base = Path(lab["virtual_lab_base_dir"])
    for leftover in (*base.glob("store.db*"), base / "ironic" / "ironic.sqlite"):
        leftover.unlink(missing_ok=True)


def lab_images() -> Path:
    """The lab's images (hack/lab-images.sh builds them on the first call on a machine)."""
    done = subprocess.run(["bash", str(REPO / "hack" / "lab-images.sh")], capture_output=True, text=True,
                          check=False, timeout=3600)
    assert done.returncode == 0, done.stderr[-5000:]
    return Path(done.stdout.strip())
