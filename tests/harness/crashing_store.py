"""A store that "dies" at its Nth write: for the tests that kill a process at every point of a multi-write step
(an allocation, a move) and check that the next run finishes it."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.followed import Followed


class Crash(BaseException):
    """The process dies: a BaseException, so that nothing in the engine catches it."""


class Writes:
    """The writes of one process, counted across the stores it writes to; it dies at the ``crash_at``-th
    (counting from 0; None: never)."""

    def __init__(self, crash_at: int | None) -> None:
        self.crash_at, self.count = crash_at, 0


class CrashingStore(Store):
    """A store that dies at a write (``crash_at``: the write's number, or Writes shared with other stores), and
    runs ``before_take`` once, just before the first object of kind ``take_kind`` is created through it."""

    def __init__(self, inner: Store, crash_at: int | None | Writes, before_take: Callable[[], None] | None = None,
                 take_kind: str = "IPAddress") -> None:
        self.inner, self.before_take, self.take_kind = inner, before_take, take_kind
        self.counted = crash_at if isinstance(crash_at, Writes) else Writes(crash_at)
        self.backend, self.follows = inner.backend, inner.follows  # on kube-apiserver, the claimers' live views

    @property
    def writes(self) -> int:
        return self.counted.count

    def _write(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self.counted.count == self.counted.crash_at:
            raise Crash(f"died at write {self.counted.count} ({method})")
        self.counted.count += 1
        return getattr(self.inner, method)(*args, **kwargs)

    def get(self, ref: Ref) -> Object:
        return self.inner.get(ref)

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | Iterable[str] | None = None) -> list[Object]:
        return self.inner.list(api_version, kind, namespace, label_selector)

    def follow(self, api_version: str, kind: str, namespace: str, label_selector: str) -> Followed | None:
        return self.inner.follow(api_version, kind, namespace, label_selector)

    def create(self, obj: Object, dry_run: bool = False) -> Object:
        if obj["kind"] == self.take_kind and self.before_take is not None:
            hook, self.before_take = self.before_take, None
            hook()
        return self._write("create", obj, dry_run=dry_run)

    def update(self, obj: Object, dry_run: bool = False) -> Object:
        return self._write("update", obj, dry_run=dry_run)

    def update_status(self, obj: Object, dry_run: bool = False) -> Object:
        return self._write("update_status", obj, dry_run=dry_run)

    def patch(self, ref: Ref, patch: Object, dry_run: bool = False) -> Object:
        return self._write("patch", ref, patch, dry_run=dry_run)

    def patch_status(self, ref: Ref, patch: Object, dry_run: bool = False) -> Object:
        return self._write("patch_status", ref, patch, dry_run=dry_run)

    def delete(self, ref: Ref, dry_run: bool = False) -> Object | None:
        return self._write("delete", ref, dry_run=dry_run)

    def close(self) -> None:
        pass
