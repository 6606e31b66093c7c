"""Objects waiting on other objects: an exhausted claim on its pool, reconciled again when the pool changes.

The Ansible Operator's dependent watches are the model: a role names what it waits on (the ``wait_on`` of its
``requeue_after`` task), and a change of that object, seen by the informer of its kind, requeues the waiter -
instead of a timed requeue that runs again and again while nothing changed.

One change wakes one waiter: the one that has waited longest, as upstream's pool hands a freed address to its
oldest claim. If it takes what was freed, its own write changes the object again, which wakes the next; if it
cannot, it waits again in its place, and so would every newer waiter, so none is woken for nothing. A waiter keeps
the time it began waiting until it stops waiting (served, or gone).

A change that comes while the waiter's reconcile runs (after it read, before it says it waits) is not lost: the
reconcile runs inside ``reconciling()``, whose mark ``wait`` is given, and ``wait`` refuses (the waiter goes again
at once) when one of its targets changed since. Changes are remembered only while a reconcile that may ask about
them runs, so what the registry holds is bounded by what waits, not by what ever changed.
"""
from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass

# What is waited on: (group, kind, namespace, name); a name of "" is any object of the kind in the namespace.
Target = tuple[str, str, str, str]


def target_of(api_version: str, kind: str, namespace: str, name: str = "") -> Target:
    group = api_version.rpartition("/")[0]
    return group, kind, namespace, name


@dataclass(frozen=True)
class Waiter:
    """A waiting object: the key its controller's queue knows it by, and how to requeue it there."""

    controller: str
    key: Hashable
    requeue: Callable[[Hashable], None]

    @property
    def id(self) -> tuple[str, Hashable]:
        return self.controller, self.key


class Waiters:
    def __init__(self, watched: Callable[[str, str, str], bool], clock: Callable[[], float] = time.monotonic) -> None:
        """``watched(group, kind, namespace)``: whether an informer of this operator sees changes there."""
        self.watched = watched
        self.clock = clock
        self._lock = threading.Lock()
        self._since: dict[tuple[str, Hashable], float] = {}
        self._waiting: dict[Target, dict[tuple[str, Hashable], Waiter]] = {}
        self._targets: dict[tuple[str, Hashable], list[Target]] = {}  # what each waiter waits on
        self._changes = 0
        self._changed: dict[Target, int] = {}  # the count of changes when each target last changed
        self._marks: Counter[int] = Counter()  # the marks of the reconciles running

    @contextlib.contextmanager
    def reconciling(self) -> Iterator[int]:
        """Around one reconcile: where changes stand when it starts (its mark, for ``wait``)."""
        with self._lock:
            mark = self._changes
            self._marks[mark] += 1
        try:
            yield mark
        finally:
            with self._lock:
                self._marks[mark] -= 1
                if not self._marks[mark]:
                    del self._marks[mark]
                oldest = min(self._marks, default=self._changes)
                self._changed = {t: n for t, n in self._changed.items() if n >= oldest}

    def wait(self, waiter: Waiter, targets: Iterable[Target], mark: int) -> str:
        """``waiter`` waits until one of ``targets`` changes: "waiting"; "changed" when one changed since
        ``mark`` (the waiter should go again at once); "unwatched" when one of them is where no informer looks
        (only a timed requeue brings the waiter back; it keeps no place)."""
        targets = list(targets)
        if not targets or not all(self.watched(*target[:3]) for target in targets):
            self.forget(waiter.controller, waiter.key)
            return "unwatched"
        with self._lock:
            self._since.setdefault(waiter.id, self.clock())  # its place, kept however often it goes again
            if any(self._changed.get(target, -1) >= mark for target in targets):
                return "changed"
            self._unregister(waiter.id)
            self._targets[waiter.id] = targets
            for target in targets:
                self._waiting.setdefault(target, {})[waiter.id] = waiter
        return "waiting"

    def forget(self, controller: str, key: Hashable) -> None:
        """The object no longer waits (served, or gone)."""
        with self._lock:
            self._since.pop((controller, key), None)
            self._unregister((controller, key))

    def _unregister(self, waiter_id: tuple[str, Hashable]) -> None:
        """Take the waiter off what it waits on (its place, ``_since``, stays)."""
        for target in self._targets.pop(waiter_id, []):
            waiting = self._waiting.get(target) or {}
            waiting.pop(waiter_id, None)
            if not waiting:
                self._waiting.pop(target, None)

    def changed(self, group: str, kind: str, namespace: str, name: str) -> None:
        """An object changed: the longest waiter on it (or on any of its kind there) is requeued, and waits no
        more until its reconcile says it does again."""
        targets = ((group, kind, namespace, name), (group, kind, namespace, ""))
        with self._lock:
            if self._marks:  # a reconcile running may ask whether this changed since it started
                for target in targets:
                    self._changed[target] = self._changes
            self._changes += 1
            candidates = [w for target in targets for w in (self._waiting.get(target) or {}).values()]
            if not candidates:
                return
            oldest = min(candidates, key=lambda w: self._since.get(w.id, 0.0))
            self._unregister(oldest.id)
        oldest.requeue(oldest.key)

    def waiting(self, controller: str) -> list[Hashable]:
        """The keys of ``controller`` that wait, longest first (for tests and metrics)."""
        with self._lock:
            ids = [wid for wid in self._targets if wid[0] == controller]
            return [wid[1] for wid in sorted(ids, key=lambda wid: self._since.get(wid, 0.0))]

    def remembered(self) -> int:
        """How many targets and changes the registry holds (for tests: it stays bounded)."""
        with self._lock:
            return len(self._waiting) + len(self._changed)
