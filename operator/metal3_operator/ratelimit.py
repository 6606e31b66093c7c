"""When a key may come back to the work queue: client-go's rate limiters, on an injected clock.

- ``ItemExponential``: per key, base * 2^(requeues so far), capped; ``forget`` resets the key.
- ``TokenBucket``: for every key together, ``qps`` tokens a second and at most ``burst`` saved up; a requeue
  with no token waits for the next one (golang.org/x/time/rate's reservation).
- ``MaxOf``: the longest wait any of them asks, each of them consulted every time.

``controller_rate_limiter`` is client-go's ``DefaultControllerRateLimiter``: per key 5 ms .. 1000 s, and 10
requeues a second (bursts of 100) over all keys, so a reconcile that keeps asking to come back at once slows
down to exponential backoff, and many of them together cannot exceed the bucket.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Hashable
from typing import Protocol


class Clock(Protocol):
    """Time as the work queue and its rate limiters see it; tests give a fake one."""

    def now(self) -> float:
        """Seconds on a monotonic scale."""

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        """Wait on ``condition`` (held by the caller) until notified or ``timeout`` seconds (None: no limit)."""


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        condition.wait(timeout)


class RateLimiter(Protocol):
    def when(self, key: Hashable) -> float:
        """Seconds until ``key`` may be requeued; each call counts as a requeue."""

    def forget(self, key: Hashable) -> None:
        """The key is done with: its history goes."""

    def requeues(self, key: Hashable) -> int:
        """How many times ``key`` was requeued since it was last forgotten."""


class ItemExponential:
    def __init__(self, base: float = 0.005, cap: float = 1000.0) -> None:
        self.base = base
        self.cap = cap
        self._requeues: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def when(self, key: Hashable) -> float:
        with self._lock:
            requeues = self._requeues.get(key, 0)
            self._requeues[key] = requeues + 1
        # 2^n grows past any cap long before it overflows a float; the exponent is bounded all the same.
        return min(self.base * 2.0 ** min(requeues, 1000), self.cap)

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._requeues.pop(key, None)

    def requeues(self, key: Hashable) -> int:
        with self._lock:
            return self._requeues.get(key, 0)


class TokenBucket:
    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock | None = None) -> None:
        self.qps = qps
        self.burst = burst
        self.clock = clock or MonotonicClock()
        self._tokens = float(burst)
        self._last = self.clock.now()
        self._lock = threading.Lock()

    def when(self, key: Hashable) -> float:
        with self._lock:
            now = self.clock.now()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
            # A token is taken even when none is left: the debt is paid by the wait, so later callers queue
            # behind this one instead of all waking at the next token.
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def forget(self, key: Hashable) -> None:
        pass  # the bucket is shared: no key has a history of its own

    def requeues(self, key: Hashable) -> int:
        return 0


class MaxOf:
    def __init__(self, *limiters: RateLimiter) -> None:
        self.limiters = limiters

    def when(self, key: Hashable) -> float:
        return max(limiter.when(key) for limiter in self.limiters)

    def forget(self, key: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(key)

    def requeues(self, key: Hashable) -> int:
        return max(limiter.requeues(key) for limiter in self.limiters)


def controller_rate_limiter(clock: Clock | None = None) -> MaxOf:
    """client-go's DefaultControllerRateLimiter."""
    return MaxOf(ItemExponential(0.005, 1000.0), TokenBucket(10.0, 100, clock))
