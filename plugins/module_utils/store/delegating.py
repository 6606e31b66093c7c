# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""A store that passes every call to another (``inner``): the base of the stores that wrap one and change some
of its calls (admission, a remote cluster's errors, a test's crashes), so that each says only what it changes.

Every call goes through ``_call`` and every write, before that, through ``_write``: a subclass that treats all
calls (or all writes) alike overrides one of those; one that changes a method overrides the method.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, TypeVar

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.followed import Followed

T = TypeVar("T")


class DelegatingStore(Store):
    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.backend = inner.backend
        self.follows = inner.follows

    def _call(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``call`` (a method of ``inner``) with these arguments."""
        return call(*args, **kwargs)

    def _write(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A write: ``call`` (a method of ``inner``, named ``call.__name__``) with these arguments."""
        return self._call(call, *args, **kwargs)

    def get(self, ref: Ref) -> Object:
        return self._call(self.inner.get, ref)

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | Iterable[str] | None = None) -> list[Object]:
        return self._call(self.inner.list, api_version, kind, namespace, label_selector)

    def follow(self, api_version: str, kind: str, namespace: str, label_selector: str) -> Followed | None:
        return self._call(self.inner.follow, api_version, kind, namespace, label_selector)

    def create(self, obj: Object, dry_run: bool = False) -> Object:
        return self._write(self.inner.create, obj, dry_run=dry_run)

    def update(self, obj: Object, dry_run: bool = False) -> Object:
        return self._write(self.inner.update, obj, dry_run=dry_run)

    def update_status(self, obj: Object, dry_run: bool = False) -> Object:
        return self._write(self.inner.update_status, obj, dry_run=dry_run)

    def patch(self, ref: Ref, patch: Object, dry_run: bool = False) -> Object:
        return self._write(self.inner.patch, ref, patch, dry_run=dry_run)

    def patch_status(self, ref: Ref, patch: Object, dry_run: bool = False) -> Object:
        return self._write(self.inner.patch_status, ref, patch, dry_run=dry_run)

    def delete(self, ref: Ref, dry_run: bool = False) -> Object | None:
        return self._write(self.inner.delete, ref, dry_run=dry_run)

    def close(self) -> None:
        self.inner.close()
