"""The ironic and redfish_emulator roles and their daemon module: a port another process holds is reported,
naming that process, and nothing is started; Ironic's database and logs are its user's only."""
from __future__ import annotations

import configparser
import json
import os
import re
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.daemon import Daemon, Holder, port_holders
from tests.harness.ironic import HARNESS_PLAYBOOK, VENV, Ironic, RedfishEmulator, free_port, installing
from tests.integration.playbook_runs import ansible_playbook


@pytest.fixture
def listener() -> Iterator[subprocess.Popen]:
    """Somebody else's web server, on a port of its own (``listener.port``)."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    process.port = port  # type: ignore[attr-defined]
    for _attempt in range(300):
        if port_holders(port) or process.poll() is not None:
            break
        time.sleep(0.1)
    assert [h.pid for h in port_holders(port)] == [process.pid]
    yield process
    process.kill()
    process.wait()


def test_the_daemon_module_does_not_start_on_a_port_another_process_listens_on(tmp_path: Path, listener):
    playbook = tmp_path / "daemon.yml"
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [{
        "metal3.baremetal.daemon": {"command": [sys.executable, "-m", "http.server", str(listener.port)],
                                    "pid_file": str(tmp_path / "http.pid"), "log_file": str(tmp_path / "http.log"),
                                    "ports": [listener.port]}}]}]))
    run = ansible_playbook(playbook)
    assert not run.ok
    assert f"port {listener.port} is already in use by pid {listener.pid} ({sys.executable} -m http.server" \
        in run.output
    assert not (tmp_path / "http.pid").exists()
    assert [h.pid for h in port_holders(listener.port)] == [listener.pid]


def test_the_daemon_module_starts_checks_and_restarts_a_server_on_its_own_port(tmp_path: Path):
    port = free_port()
    pid_file = tmp_path / "http.pid"
    playbook = tmp_path / "daemon.yml"
    daemon = {"command": [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
              "pid_file": str(pid_file), "log_file": str(tmp_path / "http.log"), "ports": [port], "umask": "0077"}
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"metal3.baremetal.daemon": {**daemon, "state": "started"}, "register": "first"},
        {"metal3.baremetal.daemon": {**daemon, "state": "started"}, "check_mode": True, "register": "checked"},
        {"metal3.baremetal.daemon": {**daemon, "state": "started"}, "register": "again"},
        {"metal3.baremetal.daemon": {**daemon, "state": "restarted"}, "register": "restarted"},
        {"ansible.builtin.assert": {"that": [
            "first is changed", "checked is not changed", "again is not changed", "restarted is changed",
            "checked.pid == first.pid", "again.pid == first.pid", "restarted.pid != first.pid"]}},
    ]}]))
    try:
        run = ansible_playbook(playbook)
        assert run.ok, run.output[-3000:]
        [holder] = port_holders(port)
        assert holder.pid == int(pid_file.read_text().split()[0])
    finally:
        Daemon([], str(pid_file), os.devnull).stop()
    assert port_holders(port) == []


def second_ironic(tmp_path: Path, port: int, http_port: int) -> tuple[Ironic, str]:
    """Run the role for another Ironic on these ports; its output, which must be a failure."""
    other = Ironic(tmp_path / "second", port, http_port)
    with installing():
        run = ansible_playbook(HARNESS_PLAYBOOK, {"lab_ironic": True, "ironic_state": "started", **other._vars()},
                               timeout=900)
    assert not run.ok, run.output[-3000:]
    return other, run.output


def assert_nothing_started(other: Ironic) -> None:
    assert sorted(p.name for p in other.base_dir.glob("*.pid")) == []


def test_a_second_ironic_on_the_port_of_the_first_fails_naming_the_first(ironic, tmp_path: Path):
    first = Daemon([], str(ironic.base_dir / "metal3-ironic.pid"), os.devnull)
    pid = first.pid()
    other, output = second_ironic(tmp_path, ironic.port, free_port())
    named = re.search(rf"cannot start {VENV}/bin/ironic: port {ironic.port} is already in use by pid (\d+) \(ironic",
                      output)
    assert named, output[-3000:]
    assert first.owns(Holder(int(named[1])))  # the first Ironic, or its API worker
    assert_nothing_started(other)
    assert first.pid() == pid  # the first one is left alone
    with urllib.request.urlopen(f"{ironic.url}/v1", timeout=10) as answer:
        assert answer.status == 200


def test_ironic_is_not_started_when_the_port_of_its_http_server_is_taken(ironic, tmp_path: Path, listener):
    other, output = second_ironic(tmp_path, free_port(), listener.port)
    assert f"port {listener.port} is already in use by pid {listener.pid} (" in output
    assert_nothing_started(other)


def test_the_redfish_emulator_does_not_start_on_a_port_another_process_listens_on(tmp_path: Path, listener):
    emulator = RedfishEmulator(tmp_path / "emulator", listener.port)
    with installing():
        run = ansible_playbook(HARNESS_PLAYBOOK, {"lab_emulator": True, "redfish_emulator_state": "started",
                                                  **emulator._vars()}, timeout=900)
    assert not run.ok
    assert f"/bin/sushy-emulator: port {listener.port} is already in use by pid {listener.pid} (" in run.output
    assert not (emulator.base_dir / "emulator.pid").exists()


def test_the_database_and_the_logs_of_ironic_are_private(ironic):
    request = urllib.request.Request(f"{ironic.url}/v1/nodes", headers={"X-OpenStack-Ironic-API-Version": "latest"})
    manager = urllib.request.HTTPPasswordMgrWithDefaultRealm()
    credentials = ironic.credentials()
    manager.add_password(None, ironic.url, credentials["username"], credentials["password"])
    with urllib.request.build_opener(urllib.request.HTTPBasicAuthHandler(manager)).open(request, timeout=30) as r:
        assert r.status == 200  # Ironic has the database open
    files = [*ironic.base_dir.glob("ironic.sqlite*"), *(ironic.base_dir / "log").glob("*.log")]
    names = {f.name for f in files}
    assert {"ironic.sqlite", "metal3-ironic.log", "metal3-ironic-http.log"} <= names, names
    modes = {f.name: oct(stat.S_IMODE(f.stat().st_mode)) for f in files}
    assert modes == dict.fromkeys(names, "0o600")


def test_metadata_cleaning_erases_metadata_only_and_the_agent_stays_up_after_inspection(ironic):
    """automatedCleaningMode metadata means what it means with Metal3's Ironic (ironic-image's ironic.conf):
    automated cleaning runs the agent's erase_devices_metadata and never erase_devices (a whole-disk shred), and
    with fast track the agent inspection booted stays up for the cleaning and the deployment."""
    # Read as oslo.config reads it: a section given again (ironic_config_overrides) adds to it, a later value wins.
    conf = configparser.ConfigParser(interpolation=None, strict=False)
    conf.read(ironic.base_dir / "ironic.conf")
    assert conf.getboolean("deploy", "fast_track")
    assert conf.getint("deploy", "erase_devices_metadata_priority") == 10
    assert conf.getint("deploy", "erase_devices_priority") == 0
    assert conf.getboolean("inspector", "power_off") is False
