"""pytest fixtures: one real Ironic and one Redfish emulator per test session (see harness/ironic.py).

Tests that use them are marked ``pytest.mark.xdist_group("ironic")``: under ``--dist loadgroup`` they all
run on one worker, so the session has one Ironic.
"""
from __future__ import annotations

import shutil
from typing import Iterator

import pytest

from tests.harness.ironic import LAB, Ironic, RedfishEmulator, free_port


@pytest.fixture(scope="session")
def ironic() -> Iterator[Ironic]:
    lab = Ironic(LAB / "ironic", free_port(), free_port())
    lab.stop("absent")  # whatever a previous run left
    shutil.rmtree(lab.base_dir, ignore_errors=True)
    lab.start()
    yield lab
    lab.stop()


@pytest.fixture(scope="session")
def redfish_emulator() -> Iterator[RedfishEmulator]:
    emulator = RedfishEmulator(LAB / "emulator", free_port())
    shutil.rmtree(emulator.base_dir, ignore_errors=True)
    emulator.start()
    yield emulator
    emulator.stop()
