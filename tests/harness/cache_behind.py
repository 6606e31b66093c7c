"""A store whose reads come from a cache that has not caught up, as the Ansible Operator's proxy answers GETs and
lists of watched kinds from its informers: for the tests of what the engine must not trust a read for."""
from __future__ import annotations

import copy
from typing import Any


class CacheBehind:
    """A store whose reads are a cache's that has not caught up (the Ansible Operator's proxy answers GETs and lists
    of watched kinds from its informers): GETs of the objects in ``gets`` answer their old copy (a GET of a name
    the cache does not hold goes to the API server), lists of the kinds in ``lists`` answer their old items.
    Writes go through. ``catching_up``: each old copy is answered once, then the cache has caught up."""

    def __init__(self, inner: Any, gets: dict[tuple[str, str], dict] | None = None,
                 lists: dict[str, list] | None = None, catching_up: bool = False) -> None:
        self.inner, self.gets, self.lists, self.catching_up = inner, gets or {}, lists or {}, catching_up

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _cached(self, ref: Any) -> dict | None:
        key = (ref.kind, ref.name)
        cached = self.gets.pop(key, None) if self.catching_up else self.gets.get(key)
        return copy.deepcopy(cached) if cached is not None else None

    def get(self, ref: Any) -> dict:
        cached = self._cached(ref)
        return cached if cached is not None else self.inner.get(ref)

    def get_if_exists(self, ref: Any) -> dict | None:
        cached = self._cached(ref)
        return cached if cached is not None else self.inner.get_if_exists(ref)

    def list(self, api_version: str, kind: str, *args: Any, **kwargs: Any) -> list:
        if kind in self.lists:
            return copy.deepcopy(self.lists[kind])
        return self.inner.list(api_version, kind, *args, **kwargs)
