"""README's Ansible commands (README.md and the docs/ pages its specifications moved to), run as written from the
checkout's root, outside make and with a clean environment (no ANSIBLE_COLLECTIONS_PATH, a HOME of the test's
own): the ansible.cfg at the root is what puts the collection on Ansible's path (issue 30, item 11).

The commands are every ``ansible-inventory``, ``ansible-doc`` and ``ansible-playbook`` line of README's ```sh /
```bash / ```console blocks and of its inline code. ansible-inventory and ansible-doc run as they are;
ansible-playbook runs with ``--syntax-check`` when it names one of the collection's playbooks (the playbooks need
Ironic, or a cluster) and not at all when it names the reader's own (``next.yml``).
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.machines import MachineSet, ensure_machines
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.harness.demo import demo_objects
from tests.integration.playbook_runs import REPO
from tests.integration.test_inventory_plugin import graph

TOOLS = ("ansible-inventory", "ansible-doc", "ansible-playbook")
BLOCK = re.compile(r"^```(?:sh|bash|console)\n(.*?)^```", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"`((?:" + "|".join(TOOLS) + r") [^`]+)`")


def readme_commands() -> list[str]:
    text = "\n".join(page.read_text() for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))])
    commands = []
    for block in BLOCK.findall(text):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line.strip().removeprefix("$ "))  # a comment after the command
            if line.split(" ", 1)[0] in TOOLS:
                commands.append(line)
    commands += INLINE.findall(re.sub(BLOCK, "", text))
    return list(dict.fromkeys(commands))


def collection_playbook(argv: list[str]) -> str | None:
    """The playbook an ansible-playbook command line names, when it is one of the collection's."""
    for word in argv[1:]:
        if word.startswith("metal3.baremetal."):
            return word
    return None


def runnable(command: str) -> bool:
    """Whether the test can run ``command``: an ansible-playbook line runs only when it names one of the
    collection's playbooks (not the reader's own, such as ``next.yml``, nor a bare option shown in prose)."""
    argv = shlex.split(command, comments=True)
    return argv[0] != "ansible-playbook" or collection_playbook(argv) is not None


COMMANDS = readme_commands()
RUNNABLE = [c for c in COMMANDS if runnable(c)]


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's objects and machine sets in namespace metal3 (what `make demo` makes before it provisions), in a
    store of the test's own: the user's real store is never touched."""
    path = tmp_path_factory.mktemp("readme") / "store.db"
    with LocalStore(str(path)) as store:
        for obj in demo_objects("metal3", 6):
            store.create(obj)
        for name, replicas, control_plane in (("my-cluster-controlplane", 3, True), ("my-cluster-workers", 2, False)):
            ensure_machines(store, MachineSet(name, "metal3", "my-cluster", name, replicas, control_plane,
                                              "my-cluster-userdata"))
    return path


def clean_env(home: Path, store_path: Path) -> dict[str, str]:
    """What a user's shell has after activating the virtualenv: no ANSIBLE_*, METAL3_* or K8S_AUTH_* settings."""
    return {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(home), "LC_ALL": "C.UTF-8", "METAL3_STORE_PATH": str(store_path)}


def test_readme_has_the_commands_this_test_runs():
    assert "ansible-inventory -i playbooks/files/demo.metal3.yml --graph" in COMMANDS, COMMANDS
    assert any(c.startswith("ansible-doc ") for c in COMMANDS), COMMANDS
    assert any(c.startswith("ansible-playbook metal3.baremetal.") for c in COMMANDS), COMMANDS


def test_what_is_not_run_is_only_the_reader_s_own_playbooks():
    others = [c for c in COMMANDS if c not in RUNNABLE]
    assert all(c.startswith("ansible-playbook") and "metal3.baremetal." not in c for c in others), others
    assert len(others) <= 2, others  # README grows a new kind of command: run it here too


@pytest.mark.parametrize("command", RUNNABLE)
def test_readme_command_runs_from_a_checkout(command: str, demo_store: Path, tmp_path: Path):
    argv = shlex.split(command, comments=True)
    if argv[0] == "ansible-playbook":
        argv.append("--syntax-check")
    home = tmp_path / "home"
    home.mkdir()
    run = subprocess.run(argv, cwd=REPO, env=clean_env(home, demo_store), capture_output=True, text=True,
                         timeout=300, check=False)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "unknown plugin" not in output and "could not be found" not in output and "Traceback" not in output, output
    if argv[0] == "ansible-inventory":
        groups = graph(run.stdout)
        assert groups.get("control_plane") == {f"my-cluster-controlplane-{i}" for i in range(3)}, run.stdout
        assert groups.get("workers") == {f"my-cluster-workers-{i}" for i in range(2)}, run.stdout
    if argv[0] == "ansible-doc":
        assert argv[-1] in run.stdout, output
    assert not (home / ".local" / "share" / "metal3-baremetal" / "store.db").exists()  # only the test's store
