"""The prefork server resets ansible-core's private per-process state, as the releases it is tested with keep it:
on any other ansible-core the operator refuses to start (a message naming the version found and the tested range,
no traceback) unless told --no-prefork; the server itself refuses too."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from metal3_operator import prefork
from metal3_operator.prefork import UntestedAnsibleCore, check_ansible_core
from metal3_operator.runner import Runner

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("tested, found, inside", [
    # a range of several releases
    (("2.19.10", "2.19.14"), "2.19.12", True),
    (("2.19.10", "2.19.14"), "2.19.10", True),  # the low edge
    (("2.19.10", "2.19.14"), "2.19.14", True),  # the high edge
    (("2.19.10", "2.19.14"), "2.19.9", False),
    (("2.19.10", "2.19.14"), "2.19.15", False),
    (("2.19.10", "2.19.14"), "2.19.10rc1", False),  # a pre-release of the low edge comes before it
    (("2.19.10", "2.19.14"), "2.19.14.post1", False),  # a post-release of the high edge after it
    (("2.19.10", "2.19.14"), "2.20.0", False),
    (("2.19.10", "2.19.14"), "2.18.12", False),
    (("2.19.10", "2.19.14"), "devel", False),  # not a version at all
    # the shipped one: a single release, both edges
    (prefork.TESTED_ANSIBLE_CORE, prefork.TESTED_ANSIBLE_CORE[0], True),
    (prefork.TESTED_ANSIBLE_CORE, prefork.TESTED_ANSIBLE_CORE[1], True),
    (prefork.TESTED_ANSIBLE_CORE, "2.19.13", False),
    (prefork.TESTED_ANSIBLE_CORE, "2.19.15", False),
    (prefork.TESTED_ANSIBLE_CORE, "2.20.0", False),
    (prefork.TESTED_ANSIBLE_CORE, "2.19.0", False),
])
def test_the_tested_range_includes_its_edges_and_nothing_beyond(monkeypatch, tested, found, inside):
    monkeypatch.setattr(prefork, "TESTED_ANSIBLE_CORE", tested)
    monkeypatch.setattr(prefork, "installed_ansible_core", lambda: found)
    if inside:
        assert check_ansible_core() == found
    else:
        with pytest.raises(UntestedAnsibleCore) as e:
            check_ansible_core()
        low, high = tested
        assert f"ansible-core {found} is installed" in str(e.value)
        assert f"tested with ansible-core {low if low == high else f'{low} to {high}'} only" in str(e.value)
        assert "--no-prefork" in str(e.value)


def test_the_installed_ansible_core_is_the_pinned_one_and_inside_the_range():
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", (REPO / "operator/requirements.txt").read_text(),
                           re.MULTILINE))
    assert prefork.installed_ansible_core() == version("ansible-core") == pins["ansible-core"]
    assert check_ansible_core() == pins["ansible-core"]


def test_an_untested_ansible_core_stops_the_operator_at_start_with_a_message(
        operator_main, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(prefork, "installed_ansible_core", lambda: "2.20.1")
    assert operator_main() == 2
    err = capsys.readouterr().err
    assert err.startswith("metal3_operator: ansible-core 2.20.1 is installed, and the prefork server is tested with "
                          f"ansible-core {prefork.tested_ansible_core()} only")
    assert "Traceback" not in err
    assert not (tmp_path / "runner").exists()  # nothing started, nothing written


def test_without_prefork_an_untested_ansible_core_is_no_reason_to_stop(operator_main, monkeypatch, capsys):
    """Without the prefork server nothing touches ansible-core's internals: the operator goes on (here, to find
    the cluster unreachable)."""
    monkeypatch.setattr(prefork, "installed_ansible_core", lambda: "2.20.1")
    assert operator_main("--no-prefork") == 2
    err = capsys.readouterr().err
    assert err.startswith("metal3_operator: cannot reach the Kubernetes API") and "ansible-core" not in err


def test_a_runner_with_prefork_refuses_an_untested_ansible_core_before_starting_anything(tmp_path, monkeypatch):
    monkeypatch.setattr(prefork, "installed_ansible_core", lambda: "2.19.0")
    with pytest.raises(UntestedAnsibleCore, match="ansible-core 2.19.0 is installed"):
        Runner(tmp_path / "runner", prefork=True)
    assert not (tmp_path / "runner").exists()
    Runner(tmp_path / "runner", prefork=False).close()


def test_the_server_refuses_an_untested_ansible_core_on_its_own(tmp_path):
    """Started by hand (not through the Runner, which checks first), the server says why it will not serve."""
    shim = tmp_path / "shim"
    (shim / "ansible").mkdir(parents=True)
    # An ansible package reporting another release, found before the real one: the server checks before it
    # imports anything else of Ansible.
    (shim / "ansible" / "__init__.py").write_text("")
    (shim / "ansible" / "release.py").write_text("__version__ = '2.21.0'\n")
    done = subprocess.run([sys.executable, str(REPO / "operator/metal3_operator/prefork.py"),
                           str(tmp_path / "prefork.sock"), "ansible-playbook"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(shim)}, stdin=subprocess.DEVNULL, timeout=60,
                          check=False)
    assert done.returncode == 2
    assert done.stderr.startswith("prefork: ansible-core 2.21.0 is installed") and "Traceback" not in done.stderr
    assert not (tmp_path / "prefork.sock").exists()
