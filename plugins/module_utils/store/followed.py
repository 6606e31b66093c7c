# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""A live view of the objects one selector matches: what a controller's informer cache is.

A backend that can watch (kube-apiserver) keeps it current from a list and a watch; the engine reads it instead
of reading the objects again through the API. It is eventually consistent: another process's write shows up a
moment later, so the engine uses it only where stale knowledge costs a retry, never a wrong answer (a
claimer's view of which addresses are taken). A caller puts in what it has just written itself, so that its own
writes are never older in its view than in the store.
"""
from __future__ import annotations

import contextlib
import threading
from collections import deque
from typing import Callable

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object


def _version(obj: Object) -> int:
    """An object's resourceVersion as a number, to keep the newer of two copies (-1: unknown)."""
    try:
        return int(obj["metadata"].get("resourceVersion") or -1)
    except (TypeError, ValueError):
        return -1


# How many of its latest changes a view remembers for changed_since; a reader further behind reads everything.
CHANGES_KEPT = 4096


class Followed:
    """The objects of one kind, namespace and label selector, by name."""

    def __init__(self) -> None:
        self._objects: dict[str, Object] = {}
        # The objects put since the last replace, newest last, numbered: what changed since a reader's mark.
        self._changes: deque[tuple[int, Object]] = deque(maxlen=CHANGES_KEPT)
        self._change = 0  # the number of the latest change
        self._replaced = 0  # the number of the change a replace was
        self._gone: dict[str, int] = {}  # name: version of its deletion, so a late copy does not revive it
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        self.kept = False  # kept current by the backend (a watch), else as of its last list
        # Set by the backend: ends a read it is blocked in (a watch), so that close() ends it at once.
        self.interrupt: Callable[[], None] = lambda: None

    def objects(self) -> list[Object]:
        with self._lock:
            return list(self._objects.values())

    def mark(self) -> int:
        """Where the view is now, for changed_since."""
        with self._lock:
            return self._change

    def changed_since(self, mark: int) -> tuple[list[Object], int]:
        """The objects put since ``mark`` (every object, when the view was replaced since or remembers no change
        that old), and the view's new mark: a reader that only adds what it learns reads each change once."""
        with self._lock:
            oldest = self._changes[0][0] if self._changes else self._change + 1
            if mark < self._replaced or mark + 1 < oldest:
                return list(self._objects.values()), self._change
            return [obj for number, obj in self._changes if number > mark], self._change

    def replace(self, items: list[Object]) -> None:
        """Everything, as a list gave it."""
        with self._lock:
            self._objects = {o["metadata"]["name"]: o for o in items}
            self._gone.clear()
            self._change += 1
            self._replaced = self._change
            self._changes.clear()

    def put(self, obj: Object) -> None:
        """An object as a write or a watch event gave it; an older copy than the one held is ignored."""
        name = obj["metadata"]["name"]
        version = _version(obj)
        with self._lock:
            held = self._objects.get(name)
            if held is not None and _version(held) > version:
                return
            if self._gone.get(name, -1) >= version >= 0:
                return
            self._objects[name] = obj
            self._gone.pop(name, None)
            self._change += 1
            self._changes.append((self._change, obj))

    def forget(self, obj: Object) -> None:
        """An object deleted."""
        name = obj["metadata"]["name"]
        with self._lock:
            held = self._objects.get(name)
            if held is not None and _version(held) > _version(obj):
                return  # deleted, then created again: the newer one stays
            self._objects.pop(name, None)
            self._gone[name] = _version(obj)

    def apply(self, event: str, obj: Object) -> None:
        """A watch event (ADDED, MODIFIED, DELETED)."""
        if event == "DELETED":
            self.forget(obj)
        elif event in ("ADDED", "MODIFIED"):
            self.put(obj)

    def close(self) -> None:
        self.stopping.set()
        with contextlib.suppress(OSError):  # the read ended meanwhile, its connection closed
            self.interrupt()
