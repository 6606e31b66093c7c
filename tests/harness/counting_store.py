"""A store that counts its calls: on the kubernetes backend each is one API request. For the tests that hold
the engine to its request budget, and for the benchmarks that report requests per operation."""
from __future__ import annotations

import collections
from typing import Any

# The store's calls, each one API request on the kubernetes backend.
VERBS = ("get", "get_if_exists", "list", "create", "update", "update_status", "patch", "patch_status", "delete")


class CountingStore:
    """A store that counts its calls by verb and kind; failed calls (a lost create, a conflict) count too."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.counts: collections.Counter[tuple[str, str]] = collections.Counter()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if name not in VERBS:
            return attribute

        def counted(first: Any, *args: Any, **kwargs: Any) -> Any:
            # get/patch/delete take a Ref, create/update an object, list (api_version, kind, ...)
            kind = first["kind"] if isinstance(first, dict) else getattr(first, "kind", args[0] if args else "?")
            self.counts[("get" if name == "get_if_exists" else name, kind)] += 1
            return attribute(first, *args, **kwargs)
        return counted

    def __enter__(self) -> CountingStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.inner.close()
