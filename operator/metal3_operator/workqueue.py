"""A rate-limited work queue keyed by object, with client-go's workqueue semantics.

- A key waiting in the queue is there once, however often it is added (dedupe).
- A key being processed is never handed out again until ``done``; added meanwhile, it comes back after.
- ``add_rate_limited`` waits base * 2^(failures-1), up to a maximum, per key; ``forget`` resets it.
- ``add_after`` delays a key (requeue_after, reconcilePeriod); a key waits there once, for its earliest time,
  so requeues asked for by successive reconciles do not pile up into extra reconciles later.
"""
from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Hashable


class WorkQueue:
    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._queue: deque[Hashable] = deque()
        self._dirty: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._failures: dict[Hashable, int] = {}
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
            due = time.monotonic() + delay
            if self._shutting_down or self._due.get(key, due) < due:
                return
            self._due[key] = due
            heapq.heappush(self._delayed, (due, next(self._sequence), key))
            self._cond.notify()

    def add_rate_limited(self, key: Hashable) -> float:
        """Requeue a key that failed, after its backoff; returns the delay."""
        with self._cond:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        delay = min(self.base_delay * (2 ** failures), self.max_delay)
        self.add_after(key, delay)
        return delay

    def forget(self, key: Hashable) -> None:
        with self._cond:
            self._failures.pop(key, None)

    def failures(self, key: Hashable) -> int:
        with self._cond:
            return self._failures.get(key, 0)

    def get(self) -> Hashable | None:
        """The next key to process, waiting as needed; None once the queue shuts down."""
        with self._cond:
            while True:
                if self._shutting_down:
                    return None
                now = time.monotonic()
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
                timeout = self._delayed[0][0] - now if self._delayed else None
                self._cond.wait(timeout)

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
