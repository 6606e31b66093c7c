"""What the operator knows of one watched kind: the last version of each object its list/watch saw.

The informer writes it; the reconciler reads an object from it instead of from the API, and the roles' reads of
watched kinds can be served from it (``get`` and ``list`` are the read side; the objects they return are shared:
copy before changing one).
"""
from __future__ import annotations

import builtins
import threading
import time
from typing import Any

Key = tuple[str, str]  # (namespace, name); namespace "" for a cluster-scoped object
Replaced = dict[Key, "dict[str, Any] | None"]  # each key listed again, and the version it replaced (None: new)


def key_of(obj: dict[str, Any]) -> Key:
    return obj["metadata"].get("namespace") or "", obj["metadata"]["name"]


def at_least(obj: dict[str, Any], version: str) -> bool:
    """Whether ``obj`` is at ``version`` or later. kube-apiserver's resourceVersions are etcd's revisions, which
    only grow; one that is not a number is compared for equality alone."""
    have = obj["metadata"].get("resourceVersion") or ""
    try:
        return int(have) >= int(version)
    except ValueError:
        return have == version


class Cache:
    def __init__(self, api_version: str, kind: str) -> None:
        self.api_version = api_version
        self.kind = kind
        self._objects: dict[Key, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    def keys(self) -> list[Key]:
        with self._lock:
            return sorted(self._objects)

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._objects.get((namespace or "", name))

    def list(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """Objects of one namespace (all when None), by namespace and name."""
        with self._lock:
            return [o for k, o in sorted(self._objects.items(), key=lambda item: item[0])
                    if namespace is None or k[0] == namespace]

    def wait_for(self, key: Key, version: str, timeout: float) -> dict[str, Any] | None:
        """The object once the cache holds ``version`` of it or a later one; None when it does not within
        ``timeout`` seconds, or holds the object no more."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                obj = self._objects.get(key)
                if obj is None:
                    return None
                if at_least(obj, version):
                    return obj
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(left)

    def put(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """Store an object's new version; the version it replaces, if any."""
        obj.setdefault("apiVersion", self.api_version)
        obj.setdefault("kind", self.kind)
        with self._lock:
            old = self._objects.get(key_of(obj))
            self._objects[key_of(obj)] = obj
            self._changed.notify_all()
            return old

    def remove(self, key: Key) -> dict[str, Any] | None:
        with self._lock:
            self._changed.notify_all()
            return self._objects.pop(key, None)

    # Below the method ``list``, annotations must name the builtin as builtins.list.
    def replace(self, namespace: str, objects: builtins.list[dict[str, Any]]) -> tuple[builtins.list[Key], Replaced]:
        """What a re-list of ``namespace`` ("" for all) saw, in place of what was known of it: the keys that went,
        and the version each listed key replaced."""
        for obj in objects:
            obj.setdefault("apiVersion", self.api_version)
            obj.setdefault("kind", self.kind)
        listed = {key_of(o): o for o in objects}
        with self._lock:
            gone = [k for k in self._objects if (not namespace or k[0] == namespace) and k not in listed]
            for k in gone:
                del self._objects[k]
            replaced = {k: self._objects.get(k) for k in listed}
            self._objects.update(listed)
            self._changed.notify_all()
        return gone, replaced
