# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The one loop every ``wait_for`` runs: a step, a verdict, a pause, until reached, given up or out of time.

Hosts (hosts/baremetalhost.py ``wait_for_host``), machines (capm3/machines.py ``converge``) and HostClaims
(hostclaims/hostclaim.py ``converge_claims``) wait through it; each step reports what it saw to core/progress.py,
which is how a long wait prints as it goes.
"""
from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(step: Callable[[], T], verdict: Callable[[T], bool | None], timeout: float,
               pause: Callable[[T], float] = lambda _result: 0.5,
               sleep: Callable[[float], None] = time.sleep) -> tuple[T, bool]:
    """Take ``step`` until ``verdict`` of what it returned says reached (True) or given up (False).

    ``verdict`` None: keep going, after ``pause`` of that result (seconds), as long as ``timeout`` seconds
    have not passed since the first step; then the last result and False.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = step()
        outcome = verdict(result)
        if outcome is not None:
            return result, outcome
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return result, False
        sleep(min(pause(result), remaining))
