# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Read-modify-write helpers every reconcile uses: finalizers, conditions.

The store's resourceVersion check makes each write safe; these only retry it (core/retry.py).
"""
from __future__ import annotations

from typing import Any, Callable

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref, now
from ansible_collections.metal3.baremetal.plugins.module_utils.core.retry import retry_on_conflict
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store


def ensure_finalizer(store: Store, ref: Ref, finalizer: str, dry_run: bool = False) -> Object:
    """Add ``finalizer`` unless it is there or the object is being deleted; returns the object."""
    def write() -> Object:
        obj = store.get(ref)
        finalizers = obj["metadata"].get("finalizers") or []
        if finalizer in finalizers or obj["metadata"].get("deletionTimestamp"):
            return obj
        obj["metadata"]["finalizers"] = [*finalizers, finalizer]
        return store.update(obj, dry_run=dry_run)

    return retry_on_conflict(write)


def standing(store: Store, obj: Object, dry_run: bool = False, change: Callable[[Object], Object] | None = None,
             status: bool = False) -> Object:
    """``obj`` as the API server holds it now: written back (``change`` applied first, else unchanged: a no-op
    write, which moves nothing), resourceVersion-checked, read and written again on Conflict; NotFound when it
    went. ``status``: written through the status subresource. A read alone would not do: the Ansible Operator's
    proxy answers a GET of a watched kind from its informer's cache, which may lag behind a deletion. A copy that
    shows a deletion is returned as it is, unwritten: a deletion is never undone."""
    known = [obj]

    def touch() -> Object:
        current = known.pop() if known else store.get(Ref.of(obj))
        if current["metadata"].get("deletionTimestamp"):
            return current
        written = change(current) if change else current
        return (store.update_status if status else store.update)(written, dry_run=dry_run)

    return retry_on_conflict(touch)


def remove_finalizer(store: Store, ref: Ref, finalizer: str, dry_run: bool = False) -> None:
    """Remove ``finalizer``; an object already gone is fine."""
    def write() -> Object:
        try:
            obj = store.get(ref)
        except NotFound:
            return {}
        finalizers = obj["metadata"].get("finalizers") or []
        if finalizer not in finalizers:
            return obj
        obj["metadata"]["finalizers"] = [f for f in finalizers if f != finalizer]
        try:
            return store.update(obj, dry_run=dry_run) or {}
        except NotFound:  # another releaser took the last finalizer off between the read and this write
            return {}

    retry_on_conflict(write)


def release_finalized(store: Store, ref: Ref, uid: str | None, finalizer: str, dry_run: bool = False) -> bool:
    """Delete the very object ``uid`` names, which ``finalizer`` holds: False (and nothing done) when ``ref`` now
    names another object, True once this one is gone or going.

    Only that object loses its finalizer: when two releasers race (a claim's own reconcile and its pool's), the
    loser must never free an object of the same name that another claim has taken since. At worst its delete marks
    that one deleting, and its finalizer keeps it held.
    """
    def unfinalize() -> Object:
        current = store.get(ref)
        finalizers = current["metadata"].get("finalizers") or []
        if current["metadata"].get("uid") != uid:
            return {}  # not this object any more
        if finalizer in finalizers:
            current["metadata"]["finalizers"] = [f for f in finalizers if f != finalizer]
            current = store.update(current, dry_run=dry_run)
        return current

    try:
        if not retry_on_conflict(unfinalize):
            return False
        store.delete(ref, dry_run=dry_run)
    except NotFound:
        pass
    return True


def set_condition(conditions: list[dict[str, Any]] | None, type_: str, status: bool | str, reason: str = "",
                  message: str = "", observed_generation: int | None = None) -> list[dict[str, Any]]:
    """``conditions`` with the one of ``type_`` set; lastTransitionTime moves only when it changes.
    ``observed_generation``: the generation of the object the condition judged (metav1.Condition's field)."""
    value = status if isinstance(status, str) else ("True" if status else "False")
    condition: dict[str, Any] = {"type": type_, "status": value, "reason": reason, "message": message}
    if observed_generation is not None:
        condition["observedGeneration"] = observed_generation
    previous = next((c for c in conditions or [] if c.get("type") == type_), {})
    same = all(previous.get(key) == condition[key] for key in ("status", "reason", "message"))
    condition["lastTransitionTime"] = previous.get("lastTransitionTime") if same else now()
    return [*(c for c in conditions or [] if c.get("type") != type_), condition]
