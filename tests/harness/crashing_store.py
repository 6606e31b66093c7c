"""A store that "dies" at its Nth write: for the tests that kill a process at every point of a multi-write step
(an allocation, a move) and check that the next run finishes it."""
from __future__ import annotations

from typing import Any, Callable, TypeVar

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.delegating import DelegatingStore

T = TypeVar("T")


class Crash(BaseException):
    """The process dies: a BaseException, so that nothing in the engine catches it."""


class Writes:
    """The writes of one process, counted across the stores it writes to; it dies at the ``crash_at``-th
    (counting from 0; None: never)."""

    def __init__(self, crash_at: int | None) -> None:
        self.crash_at, self.count = crash_at, 0


class CrashingStore(DelegatingStore):
    """A store that dies at a write (``crash_at``: the write's number, or Writes shared with other stores), and
    runs ``before_take`` once, just before the first object of kind ``take_kind`` is created through it."""

    def __init__(self, inner: Store, crash_at: int | None | Writes, before_take: Callable[[], None] | None = None,
                 take_kind: str = "IPAddress") -> None:
        super().__init__(inner)  # its follows too: on kube-apiserver, the claimers' live views
        self.before_take, self.take_kind = before_take, take_kind
        self.counted = crash_at if isinstance(crash_at, Writes) else Writes(crash_at)

    @property
    def writes(self) -> int:
        return self.counted.count

    def _write(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self.counted.count == self.counted.crash_at:
            raise Crash(f"died at write {self.counted.count} ({call.__name__})")
        self.counted.count += 1
        return super()._write(call, *args, **kwargs)

    def create(self, obj: Object, dry_run: bool = False) -> Object:
        if obj["kind"] == self.take_kind and self.before_take is not None:
            hook, self.before_take = self.before_take, None
            hook()
        return super().create(obj, dry_run=dry_run)

    def close(self) -> None:
        pass
