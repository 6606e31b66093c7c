"""A rate-limited work queue keyed by object, with client-go's workqueue semantics.

- A key waiting in the queue is there once, however often it is added (dedupe).
- A key being processed is never handed out again until ``done``; added meanwhile, it comes back after.
- ``add_rate_limited`` waits as long as the rate limiter says (client-go's default: per key 5 ms doubling up to
  1000 s, and a 10 qps / burst 100 bucket over all keys); ``forget`` resets the key's backoff.
- ``add_after`` delays a key (requeue_after, reconcilePeriod); a key waits there once, for its earliest time,
  so requeues asked for by successive reconciles do not pile up into extra reconciles later.

Time is the injected clock's, so tests advance it instead of sleeping.
"""
from __future__ import annotations

import heapq
import itertools
import threading
from collections import deque
from collections.abc import Hashable

from metal3_operator.ratelimit import Clock, MonotonicClock, RateLimiter, controller_rate_limiter


class WorkQueue:
    def __init__(self, rate_limiter: RateLimiter | None = None, clock: Clock | None = None) -> None:
        self.clock = clock or MonotonicClock()
        self.rate_limiter = rate_limiter or controller_rate_limiter(self.clock)
        self._queue: deque[Hashable] = deque()
        self._dirty: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._delayed: list[tuple[float, int, Hashable]] = []
        self._due: dict[Hashable, float] = {}  # when each delayed key is due; heap entries that disagree are stale
        self._sequence = itertools.count()
        self._shutting_down = False
        self._cond = threading.Condition()

    def __len__(self) -> int:
        """Depth: keys waiting to be processed (not the delayed ones)."""
        with self._cond:
            return len(self._queue)

    def add(self, key: Hashable) -> None:
        with self._cond:
            self._add(key)

    def _add(self, key: Hashable) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._cond.notify()

    def add_after(self, key: Hashable, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            due = self.clock.now() + delay
            if self._shutting_down or self._due.get(key, due) < due:
                return
            self._due[key] = due
            heapq.heappush(self._delayed, (due, next(self._sequence), key))
            self._cond.notify()

    def add_rate_limited(self, key: Hashable) -> float:
        """Requeue a key after the rate limiter's wait (a failure, or a reconcile asking to come back at once);
        returns the wait."""
        delay = self.rate_limiter.when(key)
        self.add_after(key, delay)
        return delay

    def forget(self, key: Hashable) -> None:
        self.rate_limiter.forget(key)

    def failures(self, key: Hashable) -> int:
        """Rate-limited requeues of the key since it was last forgotten."""
        return self.rate_limiter.requeues(key)

    def get(self) -> Hashable | None:
        """The next key to process, waiting as needed; None once the queue shuts down."""
        with self._cond:
            while True:
                if self._shutting_down:
                    return None
                now = self.clock.now()
                while self._delayed and self._delayed[0][0] <= now:
                    due, _sequence, key = heapq.heappop(self._delayed)
                    if self._due.get(key) == due:
                        del self._due[key]
                        self._add(key)
                if self._queue:
                    key = self._queue.popleft()
                    self._processing.add(key)
                    self._dirty.discard(key)
                    return key
                self.clock.wait(self._cond, self._delayed[0][0] - now if self._delayed else None)

    def done(self, key: Hashable) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty and not self._shutting_down:
                self._queue.append(key)
                self._cond.notify()

    def shut_down(self) -> None:
        with self._cond:
            self._shutting_down = True
            self._cond.notify_all()
