# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Progress you can watch: a line each time a host or a machine changes state while a task waits for it.

The waits (core/waiting.py and the loops built on it) call ``report`` after each step of each object. Nothing
is printed unless someone is watching: the action plugins (plugin_utils/engine_action.py) watch with Ansible's
display for the length of a task, so ``ansible-playbook`` shows, at any verbosity::

    metal3/host-0: inspecting -> available (1m12s)

A line is printed only when a state differs from the one seen before (never one a poll), the elapsed time
counted from the start of the task. Under AnsiballZ, and in the operator, nobody watches and ``report`` does
nothing.
"""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable, Iterator

NONE_LABEL = "none"  # upstream's empty provisioning state, as a line shows it


def format_elapsed(seconds: float) -> str:
    """Whole seconds as a person reads them: 7s, 1m12s, 1h02m05s."""
    total = max(0, int(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def format_line(label: str, before: str | None, after: str, elapsed: float) -> str:
    """``label: before -> after (elapsed)``; without a known state before, ``label: after (elapsed)``."""
    if before is None:
        return f"{label}: {after or NONE_LABEL} ({format_elapsed(elapsed)})"
    return f"{label}: {before or NONE_LABEL} -> {after or NONE_LABEL} ({format_elapsed(elapsed)})"


class Progress:
    """The last state seen of each object, and a line through ``emit`` whenever one changes.

    Safe to call from the threads a wait runs its hosts in: each line is made and emitted under one lock, so
    lines never interleave and a change is told once.
    """

    def __init__(self, emit: Callable[[str], None], clock: Callable[[], float] = time.monotonic):
        self.emit, self.clock = emit, clock
        self.started = clock()
        self._seen: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def observe(self, kind: str, label: str, state: str, before: str | None = None,
                changed: bool = False) -> str | None:
        """Record that ``label`` (a ``kind``) is in ``state``; the line printed, or None.

        The first time an object is seen, the state it was in before this task is ``before`` when the caller
        knows it (a host's status before its step); when it does not, a line is printed only if the step
        ``changed`` something, so that a run that changes nothing prints nothing.
        """
        with self._lock:
            key = (kind, label)
            first = key not in self._seen
            previous = self._seen.get(key, before)
            self._seen[key] = state
            if previous == state or first and previous is None and not changed:
                return None
            line = format_line(label, previous, state, self.clock() - self.started)
            self.emit(line)
            return line


_watching: Progress | None = None  # process-wide: the waits' worker threads report to the same watcher
_watching_lock = threading.Lock()


@contextlib.contextmanager
def watching(progress: Progress) -> Iterator[Progress]:
    """Report to ``progress`` for the length of the block (an action plugin's task)."""
    global _watching
    with _watching_lock:
        outer, _watching = _watching, progress
    try:
        yield progress
    finally:
        with _watching_lock:
            _watching = outer


def report(kind: str, label: str, state: str, before: str | None = None, changed: bool = False) -> None:
    """Tell whoever watches that ``label`` is in ``state`` (see Progress.observe); nothing when nobody does."""
    progress = _watching
    if progress is None:
        return
    # A line that cannot be printed must never fail the wait it tells of.
    with contextlib.suppress(Exception):
        progress.observe(kind, label, state, before, changed)
