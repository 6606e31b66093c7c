"""The virtual lab for the tests: one at a time per machine (one libvirtd serves every lab), and playbooks run
inside its network namespace, as a user runs them against the lab."""
from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
from pathlib import Path
from typing import Any, Iterator

from tests.harness.processes import process_tree
from tests.integration.playbook_runs import REPO, ansible_playbook

LAB_PLAYBOOK = REPO / "playbooks" / "lab.yml"
LOCK = REPO / "build" / "virtual-lab.lock"
# make test runs the lab on one worker beside the other worker's tests. The guests run under emulation, each a
# host thread busy as long as its guest is, and the scheduler shares the cores fairly per thread: beside the other
# worker's many processes the guests got a fraction of a core each, and the lab test took 74 minutes in CI where
# it took about 40 alone that day. The lab's processes go first; the other worker runs in what they leave.
LAB_NICE = -10


@contextlib.contextmanager
def one_lab_at_a_time() -> Iterator[None]:
    """Held while a test's lab exists: pytest-xdist workers (and a person's `make lab`) take turns."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def lab_first(base: Path) -> None:
    """The lab's daemons under ``base`` (libvirtd, Ironic, the BMCs, dnsmasq) and their children run at LAB_NICE;
    what they start later (the guests, which libvirtd's RPC threads fork) inherits it. Every thread: a nice value
    is a thread's own on Linux (libvirtd's main thread alone left the guests at 0)."""
    roots = {int(f.read_text().split()[0]) for f in (*base.glob("*.pid"), *base.glob("*/*.pid"))}
    for pid in {pid for root in roots for pid in process_tree(root)}:
        for task in Path(f"/proc/{pid}/task").glob("[0-9]*"):
            with contextlib.suppress(ProcessLookupError):  # gone meanwhile
                os.setpriority(os.PRIO_PROCESS, int(task.name), LAB_NICE)


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
