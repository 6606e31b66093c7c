"""pytest fixtures: a real Ironic and a Redfish emulator per test session (see harness/ironic.py).

Under pytest-xdist each worker has its own (own directory, own ports); their start-ups take turns, as the
workers share one virtualenv for Ironic and sushy-tools.
"""
from __future__ import annotations

import os
import shutil
from typing import Iterator

import pytest

from tests.harness.ironic import LAB, Ironic, RedfishEmulator, free_port

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")


@pytest.fixture(scope="session")
def ironic() -> Iterator[Ironic]:
    lab = Ironic(LAB / f"ironic-{WORKER}", free_port(), free_port())
    lab.stop("absent")  # whatever a previous run left
    shutil.rmtree(lab.base_dir, ignore_errors=True)
    lab.start()
    yield lab
    lab.stop()


@pytest.fixture(scope="session")
def redfish_emulator() -> Iterator[RedfishEmulator]:
    emulator = RedfishEmulator(LAB / f"emulator-{WORKER}", free_port())
    shutil.rmtree(emulator.base_dir, ignore_errors=True)
    emulator.start()
    yield emulator
    emulator.stop()


@pytest.fixture(scope="session")
def redfish_hardware() -> Iterator[RedfishEmulator]:
    """Redfish BMCs with BIOS settings, their registry and firmware: sushy-tools' libvirt driver on libvirt's test
    hypervisor, in the emulator's own process (no VM)."""
    emulator = RedfishEmulator(LAB / f"hardware-{WORKER}", free_port(), systems=8, prefix="hw",
                               mac_prefix="00:5c:52:31:3d", driver="libvirt")
    shutil.rmtree(emulator.base_dir, ignore_errors=True)
    emulator.start()
    yield emulator
    emulator.stop()
