# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Retries as client-go makes them: a few steps, each delay backed off and jittered.

A read-modify-write that meets Conflict reads again and retries; after the last step the Conflict
becomes ``TooManyConflicts``, which no ``except Conflict`` mistakes for "the object moved on". Jitter
spreads racing writers apart so they do not meet again on the next step (client-go's
``wait.Backoff``; ``retry.DefaultBackoff`` is steps 4, 10 ms, factor 5, jitter 0.1).
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable, Iterator, TypeVar

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Conflict, TooManyConflicts

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """``steps`` attempts; before attempt n+1 wait duration * factor**n, plus up to jitter of it, capped."""

    steps: int = 6
    duration: float = 0.005
    factor: float = 3.0
    jitter: float = 1.0
    cap: float = 1.0

    def delays(self, rng: random.Random | None = None) -> Iterator[float]:
        """The ``steps - 1`` waits between attempts."""
        draw = (rng or random).random
        delay = self.duration
        for _step in range(self.steps - 1):
            yield min(self.cap, delay * (1.0 + self.jitter * draw()))
            delay *= self.factor


# Contended writes of the engine (pool status, host claims): at most ~1.5 s of waiting in 6 attempts.
DEFAULT_BACKOFF = Backoff()


def retry_on_conflict(write: Callable[[], T], backoff: Backoff = DEFAULT_BACKOFF,
                      sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None) -> T:
    """Run a read-modify-write until it lands; TooManyConflicts when every step met Conflict."""
    delays = backoff.delays(rng)
    while True:
        try:
            return write()
        except Conflict as e:
            delay = next(delays, None)
            if delay is None:
                raise TooManyConflicts(f"{e} (still conflicting after {backoff.steps} attempts)") from None
            sleep(delay)
