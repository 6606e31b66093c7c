"""Run playbooks the way a user does: ansible-playbook, in a subprocess, with the collection installed."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = Path(__file__).resolve().parent / "playbooks"


@dataclass
class Run:
    rc: int
    output: str

    @property
    def ok(self) -> bool:
        return self.rc == 0


def ansible_playbook(playbook: str | Path, extra_vars: dict | None = None, *args: str, timeout: float = 600,
                     env: dict[str, str] | None = None, netns: str | None = None) -> Run:
    """``netns``: run it inside that network namespace (``ip netns exec``), as a user reaches the lab."""
    path = Path(playbook)
    if not path.is_absolute():
        path = PLAYBOOKS / path
    command = [str(Path(sys.executable).parent / "ansible-playbook"), str(path), *args]
    if extra_vars:
        command += ["-e", json.dumps(extra_vars)]
    if netns:
        command = ["ip", "netns", "exec", netns, *command]
    return _run(command, env, timeout)


def ansible_inventory(source: str | Path, *args: str, timeout: float = 120, env: dict[str, str] | None = None) -> Run:
    """``ansible-inventory -i SOURCE ARGS`` (``--graph``, ``--list``), as ansible_playbook runs a playbook."""
    return _run([str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(source), *args], env, timeout)


def _run(command: list[str], env: dict[str, str] | None, timeout: float) -> Run:
    environment = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(REPO / "build" / "collections"),
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        "ANSIBLE_LOCALHOST_WARNING": "false",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        **(env or {}),
    }
    completed = subprocess.run(command, env=environment, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                               check=False)
    return Run(completed.returncode, completed.stdout + completed.stderr)
