"""A real Ironic (fake-hardware and redfish) and sushy-tools Redfish BMCs, started with the collection's roles.

Everything lives under build/ironic-lab (git-ignored); the virtualenv holding Ironic and sushy-tools is kept
between runs (build/ironic-venv), so only the first run pays for the pip install.
"""
from __future__ import annotations

import fcntl
import json
import socket
import sqlite3
import urllib.request
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

from tests.integration.playbook_runs import REPO, ansible_playbook

LAB = REPO / "build" / "ironic-lab"
VENV = REPO / "build" / "ironic-venv"
HARNESS_PLAYBOOK = Path(__file__).resolve().parent / "lab.yml"


# Redfish BIOS and firmware steps looked at every 2 s (Ironic waits 60 s between looks, and a minute more after a
# firmware update), and a step that never ends failed after 5 minutes instead of 30.
STEPS_POLLED_OFTEN = {
    "redfish": {"firmware_update_status_interval": 2, "firmware_update_fail_interval": 2,
                "firmware_update_validation_interval": 1, "firmware_update_required_successes": 1,
                "firmware_update_reboot_delay": 5},
    "conductor": {"clean_callback_timeout": 300, "service_callback_timeout": 300},
}
# Ansible's to_uuid: the UUID the redfish_emulator role gives a system, from its name.
ANSIBLE_UUID_NAMESPACE = uuid.UUID("361e6d51-faec-444a-9079-341386da8e2e")


@contextmanager
def installing() -> Iterator[None]:
    """Serialise start-ups: pytest-xdist workers (and benchmarks) share one virtualenv for Ironic and sushy-tools."""
    LAB.mkdir(parents=True, exist_ok=True)
    with open(LAB / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Ironic:
    base_dir: Path
    port: int
    http_port: int
    cloud: str = "metal3"

    @property
    def clouds_yaml(self) -> Path:
        return self.base_dir.parent / f"{self.base_dir.name}-clouds.yaml"

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to reach this Ironic: openstacksdk's clouds.yaml and cloud name."""
        return {"OS_CLIENT_CONFIG_FILE": str(self.clouds_yaml), "OS_CLOUD": self.cloud}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def credentials(self) -> dict[str, str]:
        auth = yaml.safe_load(self.clouds_yaml.read_text())["clouds"][self.cloud]["auth"]
        return {"username": auth["username"], "password": auth["password"]}

    def instance_info(self, node_name: str) -> dict[str, Any]:
        """A node's instance_info as Ironic stored it (its API hides the config drive; its database does not)."""
        with sqlite3.connect(self.base_dir / "ironic.sqlite") as db:
            row = db.execute("SELECT instance_info FROM nodes WHERE name = ?", (node_name,)).fetchone()
        return json.loads(row[0]) if row and row[0] else {}

    def start(self, **extra: Any) -> None:
        with installing():
            run = ansible_playbook(HARNESS_PLAYBOOK, {"lab_ironic": True, "ironic_state": "started",
                                                      **self._vars(), **extra}, timeout=900)
        assert run.ok, run.output[-4000:]

    def stop(self, state: str = "stopped") -> None:
        ansible_playbook(HARNESS_PLAYBOOK, {"lab_ironic": True, "ironic_state": state, **self._vars()})

    def _vars(self) -> dict[str, Any]:
        # The emulated BMCs answer at once or not at all (a test's dead BMC). sushy already tries each request ten
        # times, three seconds apart; Ironic's five tries of that made each call to a dead BMC last 2.5 minutes.
        return {"ironic_base_dir": str(self.base_dir), "ironic_venv": str(VENV), "ironic_api_port": self.port,
                "ironic_http_port": self.http_port, "ironic_clouds_yaml": str(self.clouds_yaml),
                "ironic_supervisor": "process", "ironic_redfish_connection_attempts": 1,
                "ironic_redfish_connection_retry_interval": 1, "ironic_config_overrides": STEPS_POLLED_OFTEN}


@dataclass
class RedfishEmulator:
    base_dir: Path
    port: int
    systems: int = 4
    username: str = "admin"
    password: str = "Emul4tor-BMC-pw-7f3a"
    prefix: str = "node"
    mac_prefix: str = "00:5c:52:31:3b"
    driver: str = "fake"  # or libvirt: sushy-tools' libvirt driver on libvirt's test hypervisor (BIOS, firmware)

    def start(self) -> None:
        with installing():
            run = ansible_playbook(HARNESS_PLAYBOOK, {"lab_emulator": True, "redfish_emulator_state": "started",
                                                      **self._vars()}, timeout=900)
        assert run.ok, run.output[-4000:]

    def stop(self) -> None:
        ansible_playbook(HARNESS_PLAYBOOK, {"lab_emulator": True, "redfish_emulator_state": "stopped",
                                            **self._vars()})

    def address(self, name: str, scheme: str = "redfish+http") -> str:
        """The BMC address of system ``name``: by name on the fake driver, which finds a system by name as well as
        by UUID; by UUID on the libvirt driver, which redirects a name to it."""
        system = name if self.driver == "fake" else self.uuid(name)
        return f"{scheme}://127.0.0.1:{self.port}/redfish/v1/Systems/{system}"

    @staticmethod
    def uuid(name: str) -> str:
        return str(uuid.uuid5(ANSIBLE_UUID_NAMESPACE, name))

    def mac(self, index: int) -> str:
        return f"{self.mac_prefix}:{index:02x}"

    def system(self, name: str, resource: str = "") -> dict[str, Any]:
        """System ``name`` (by name or UUID) as Redfish shows it, or one of its resources (``BIOS``)."""
        system = name if self.driver == "fake" else self.uuid(name)
        return self._get(f"/redfish/v1/Systems/{system}" + (f"/{resource}" if resource else ""))

    def _get(self, path: str) -> dict[str, Any]:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}")
        manager = urllib.request.HTTPPasswordMgrWithDefaultRealm()
        manager.add_password(None, f"http://127.0.0.1:{self.port}/", self.username, self.password)
        opener = urllib.request.build_opener(urllib.request.HTTPBasicAuthHandler(manager))
        with opener.open(request, timeout=10) as response:
            return json.load(response)

    def _vars(self) -> dict[str, Any]:
        return {"redfish_emulator_base_dir": str(self.base_dir), "redfish_emulator_venv": str(VENV),
                "redfish_emulator_port": self.port, "redfish_emulator_systems": self.systems,
                "redfish_emulator_username": self.username, "redfish_emulator_password": self.password,
                "redfish_emulator_name_prefix": self.prefix, "redfish_emulator_mac_prefix": self.mac_prefix,
                "redfish_emulator_driver": self.driver}
