"""A thread of a test that does one step every ``interval`` seconds while its ``with`` block runs (the node agent
playing kubelet, a ledger watching the store): what a step raises is kept in ``errors`` for the test to show, and
the loop goes on."""
from __future__ import annotations

import threading
from typing import Self


class Looping:
    def __init__(self, name: str, interval: float = 1.0) -> None:
        self.interval = interval
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.step()
            except Exception as e:  # noqa: BLE001 - kept for the test to show; the loop goes on
                self.errors.append(repr(e))

    def step(self) -> None:
        raise NotImplementedError
