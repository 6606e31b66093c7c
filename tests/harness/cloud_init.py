"""cloud-init's own code reading an OpenStack network_data.json, as it does on a machine's first boot.

The code is Debian's cloud-init package, unpacked by hack/cloud-init.sh into the user cache (or the directory
METAL3_CLOUD_INIT_DIR names), imported from there into the tests' Python. :func:`netplan` runs the two steps
cloud-init takes from network_data to the machine's network configuration:

1. ``cloudinit.sources.helpers.openstack.convert_net_json``: network_data → cloud-init's network config v1.
   ``known_macs`` (MAC address → kernel name) stands for the machine's NICs, which cloud-init reads from /sys.
2. ``cloudinit.net.network_state.parse_net_config_data`` and ``cloudinit.net.netplan.Renderer``: v1 → the
   netplan YAML cloud-init writes to /etc/netplan/50-cloud-init.yaml (here under a temporary directory).

A config that cloud-init would skip with a warning at boot raises here instead (``skip_broken=False``).
"""
from __future__ import annotations

import copy
import functools
import importlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock

import yaml

REPO = Path(__file__).resolve().parents[2]
NETPLAN_FILE = "etc/netplan/50-cloud-init.yaml"


class CloudInitError(Exception):
    """cloud-init's package could not be had; the message says why."""


def package_dir() -> Path:
    """The directory holding the ``cloudinit`` package: METAL3_CLOUD_INIT_DIR, else hack/cloud-init.sh's."""
    if os.environ.get("METAL3_CLOUD_INIT_DIR"):
        return Path(os.environ["METAL3_CLOUD_INIT_DIR"])
    unpacked = subprocess.run(["bash", str(REPO / "hack" / "cloud-init.sh")], capture_output=True, text=True,
                              check=False)
    if unpacked.returncode != 0:
        raise CloudInitError(f"hack/cloud-init.sh failed:\n{unpacked.stderr[-3000:]}")
    return Path(unpacked.stdout.strip().splitlines()[-1])


@functools.cache
def modules() -> dict[str, ModuleType]:
    """cloud-init's modules this harness calls, imported from its package directory."""
    directory = str(package_dir())
    if directory not in sys.path:
        sys.path.append(directory)
    names = {"openstack": "cloudinit.sources.helpers.openstack", "net": "cloudinit.net",
             "network_state": "cloudinit.net.network_state", "netplan": "cloudinit.net.netplan",
             "version": "cloudinit.version"}
    return {key: importlib.import_module(name) for key, name in names.items()}


def version() -> str:
    """cloud-init's own version string, e.g. ``22.4.2``."""
    return modules()["version"].version_string()


def network_config(network_data: dict, known_macs: dict[str, str]) -> dict[str, Any]:
    """cloud-init's network config v1 for ``network_data`` on a machine whose NICs are ``known_macs``."""
    ci = modules()
    # The converter also looks for InfiniBand NICs in /sys; the machine in question has none.
    with mock.patch.object(ci["net"], "get_ib_hwaddrs_by_interface", return_value={}):
        # (a copy: the converter turns the services of what it is given into its own nameserver entries)
        return ci["openstack"].convert_net_json(copy.deepcopy(network_data), known_macs=dict(known_macs))


def netplan(network_data: dict, known_macs: dict[str, str]) -> dict[str, Any]:
    """The ``network`` mapping of the netplan YAML cloud-init writes for ``network_data``."""
    ci = modules()
    state = ci["network_state"].parse_net_config_data(network_config(network_data, known_macs), skip_broken=False)
    # features: what `netplan info` would list (nothing needed here); no `netplan generate` afterwards
    renderer = ci["netplan"].Renderer({"features": [], "clean_default": False, "postcmds": False})
    with tempfile.TemporaryDirectory() as target:
        renderer.render_network_state(state, target=target)
        return yaml.safe_load((Path(target) / NETPLAN_FILE).read_text())["network"]
