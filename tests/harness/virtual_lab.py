"""The virtual lab for the tests: one at a time per machine (one libvirtd serves every lab), and playbooks run
inside its network namespace, as a user runs them against the lab."""
from __future__ import annotations

import fcntl
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tests.integration.playbook_runs import REPO

LAB_PLAYBOOK = REPO / "playbooks" / "lab.yml"
LOCK = REPO / "build" / "virtual-lab.lock"


@contextmanager
def one_lab_at_a_time() -> Iterator[None]:
    """Held while a test's lab exists: pytest-xdist workers (and a person's `make lab`) take turns."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def lab_images() -> Path:
    """The lab's images (hack/lab-images.sh builds them on the first call on a machine)."""
    done = subprocess.run(["bash", str(REPO / "hack" / "lab-images.sh")], capture_output=True, text=True,
                          check=False, timeout=3600)
    assert done.returncode == 0, done.stderr[-5000:]
    return Path(done.stdout.strip())
