"""Fakes for the operator's seams: a clock that moves only when told (or when a wait would have slept), and a
runner that returns what the test scripted instead of running a role."""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from metal3_operator.runner import Result
from metal3_operator.watches import Watch


class FakeClock:
    """Exact, instant time: ``wait`` with a timeout returns at once with the clock moved on by it, as if it had
    slept; without one, only another thread's notify can end it."""

    def __init__(self, start: float = 1000.0) -> None:
        self.time = start

    def now(self) -> float:
        return self.time

    def advance(self, seconds: float) -> None:
        self.time += seconds

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        if timeout is None:
            condition.wait()
        else:
            self.time += timeout


class FakeRunner:
    """Answers each run with the next scripted Result (the last one again once the script runs out), and
    records what each run was given."""

    def __init__(self, *results: Result) -> None:
        self.results = list(results) or [Result(True)]
        self.runs: list[dict[str, Any]] = []
        self.forgotten: list[tuple[str, str]] = []
        self.on_disk: list[tuple[str, str]] = []

    def run(self, watch: Watch, obj: dict[str, Any], variables: dict[str, Any], finalizer: bool = False,
            cancel: Callable[[], bool] | None = None, max_artifacts: int | None = None,
            verbosity: int = 0) -> Result:
        self.runs.append({"obj": obj, "variables": variables, "finalizer": finalizer, "verbosity": verbosity,
                          "max_artifacts": max_artifacts})
        return self.results.pop(0) if len(self.results) > 1 else self.results[0]

    def forget(self, watch: Watch, namespace: str, name: str) -> None:
        self.forgotten.append((namespace, name))

    def objects(self, watch: Watch) -> list[tuple[str, str]]:
        return list(self.on_disk)
