"""The operator's writes to what it reconciles - its finalizer, the status conditions, a failure's Event -
through the collection's store and its conflict retry, as the engine writes.

A write starts from the copy it is given, when it has one it can trust (the cache's, or what its last write
returned: no read first), and reads the object afresh only after a Conflict; an object that is gone is nothing
to write (None).
"""
from __future__ import annotations

import copy
import dataclasses
import logging
from typing import Any, Callable

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import (
    Metal3Error,
    NotFound,
    TooManyConflicts,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.core.retry import retry_on_conflict
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from metal3_operator import status
from metal3_operator.cache import Key

log = logging.getLogger("metal3_operator.writes")


def ref_of(obj: dict[str, Any]) -> Ref:
    meta = obj["metadata"]
    return Ref(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace") or "")


class ObjectWriter:
    def __init__(self, store: Store, wrote: Callable[[Object], None] | None = None) -> None:
        """``wrote``: told of each object as written (the proxy, so that a role's read waits for the cache to
        hold what the operator wrote)."""
        self.store = store
        self.wrote = wrote

    def _rewrite(self, obj: dict[str, Any] | Ref, change: Callable[[Object], bool],
                 write: Callable[[Object], Object]) -> Object | None:
        """``change`` the object and ``write`` it, on the copy given first (a Ref: read it) and on a fresh read
        after a Conflict; the object as written (as it is, when ``change`` found nothing to do), None when it is
        gone."""
        ref = obj if isinstance(obj, Ref) else ref_of(obj)
        first = [] if isinstance(obj, Ref) else [copy.deepcopy(obj)]

        def attempt() -> Object:
            obj = first.pop() if first else self.store.get(ref)
            if not change(obj):
                return obj
            written = write(obj)
            if self.wrote:
                self.wrote(written)
            return written

        try:
            return retry_on_conflict(attempt)
        except NotFound:
            return None

    def add_finalizer(self, seen: dict[str, Any] | Ref, finalizer: str) -> Object | None:
        def add(obj: Object) -> bool:
            finalizers = obj["metadata"].setdefault("finalizers", [])
            if finalizer in finalizers:
                return False
            finalizers.append(finalizer)
            return True

        return self._rewrite(seen, add, self.store.update)

    def remove_finalizer(self, seen: dict[str, Any] | Ref, finalizer: str) -> Object | None:
        def remove(obj: Object) -> bool:
            finalizers = obj["metadata"].get("finalizers") or []
            if finalizer not in finalizers:
                return False
            finalizers.remove(finalizer)
            return True

        return self._rewrite(seen, remove, self.store.update)

    def write_conditions(self, seen: dict[str, Any] | Ref, conditions: list[dict[str, Any]]) -> Object | None:
        """Merge ``conditions`` into the status (other types kept); a status that would not change, but for the
        time of a run's result, is not written. Still conflicting after the retries: logged, as the next
        reconcile writes it again."""
        def merge(obj: Object) -> bool:
            current = obj.get("status") or {}
            before = current.get("conditions") or []
            after = status.merge(before, conditions)
            if status.timeless(after) == status.timeless(before):
                return False
            merged = {**current, "conditions": after}
            obj["status"] = merged
            return True

        try:
            return self._rewrite(seen, merge, self.store.update_status)
        except TooManyConflicts as e:
            log.warning("status not written: %s", e)
            return None


@dataclasses.dataclass(frozen=True)
class FailureEvent:
    """The Event a failing object got last: the same failure again counts on it. (Not a NamedTuple: its
    ``count``, the Event's field, would hide tuple.count.)"""
    namespace: str
    name: str
    message: str
    count: int


class EventRecorder:
    """Warning Events for failed reconciles. A repeat of an object's last failure counts on its Event, as
    client-go's event recorder does, instead of adding an Event per retry. Events are best effort: a failure to
    write one is logged, never raised."""

    def __init__(self, store: Store, component: str) -> None:
        self.store = store
        self.component = component
        self.last: dict[Key, FailureEvent] = {}

    def failed(self, key: Key, obj: dict[str, Any], message: str) -> None:
        last = self.last.get(key)
        if last and last.message == message:
            try:
                self.store.patch(Ref("v1", "Event", last.name, last.namespace),
                                 {"count": last.count + 1, "lastTimestamp": status.now()})
                self.last[key] = dataclasses.replace(last, count=last.count + 1)
                return
            except NotFound:
                pass  # the Event expired: a new one is posted
            except Metal3Error as e:
                log.warning("could not count the failure Event: %s", e)
                return
        event = status.failure_event(obj, message, self.component)
        try:
            created = self.store.create(event)
        except Metal3Error as e:
            log.warning("could not post the failure Event: %s", e)
            return
        self.last[key] = FailureEvent(created["metadata"]["namespace"], created["metadata"]["name"], message, 1)

    def forget(self, key: Key) -> None:
        self.last.pop(key, None)
