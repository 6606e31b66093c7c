# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""A store whose writes pass admission (api/admission.py): what ``open_store`` returns, whatever the backend.

Every create, update and patch of a kind with admission rules (BareMetalHost, IPPool) is first checked as
upstream's validating webhooks check it: against the object it would become (its status the stored one, as a
main-resource write never changes status) and, for an update or patch, the stored object it replaces. Status
writes and deletes are not admitted, as upstream's webhooks are not registered for them.

A patch or an update without a resourceVersion is sent pinned to the resourceVersion of the object it was
admitted against, and admitted again if that object changed in between: what is written is always what was
admitted, and the write still lands as an unconditional one would.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

from ansible_collections.metal3.baremetal.plugins.module_utils.api.admission import admit, rule_for
from ansible_collections.metal3.baremetal.plugins.module_utils.api.kinds import lookup
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import UnknownKind
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import (
    Object,
    Ref,
    merge_patch,
    require_identity,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.retry import retry_on_conflict
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.delegating import DelegatingStore


class AdmittedStore(DelegatingStore):
    def __getattr__(self, name: str) -> Any:  # the backend's own attributes (its path, its host)
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def create(self, obj: Object, dry_run: bool = False) -> Object:
        if isinstance(obj, dict) and rule_for(str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")):
            require_identity(obj)
            new = copy.deepcopy(obj)
            new["metadata"]["namespace"] = new["metadata"].get("namespace") or "default"
            if _has_status_subresource(new):
                new.pop("status", None)
            admit(self.inner, new, None)
        return self.inner.create(obj, dry_run=dry_run)

    def update(self, obj: Object, dry_run: bool = False) -> Object:
        if not (isinstance(obj, dict) and rule_for(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))):
            return self.inner.update(obj, dry_run=dry_run)
        require_identity(obj)
        ref = Ref.of(obj)
        pinned = (obj.get("metadata") or {}).get("resourceVersion")

        def write(old: Object) -> Object:
            admit(self.inner, _as_stored(obj, old), old)
            body = obj if pinned else merge_patch(obj, {"metadata": {"resourceVersion": _version(old)}})
            return self.inner.update(body, dry_run=dry_run)

        return self._admitted(ref, bool(pinned), write)

    def patch(self, ref: Ref, patch: Object, dry_run: bool = False) -> Object:
        if not (isinstance(patch, dict) and rule_for(ref.api_version, ref.kind)):
            return self.inner.patch(ref, patch, dry_run=dry_run)
        metadata = patch.get("metadata")
        pinned = metadata.get("resourceVersion") if isinstance(metadata, dict) else None

        def write(old: Object) -> Object:
            admit(self.inner, _as_stored(merge_patch(old, patch), old), old)
            body = patch if pinned else merge_patch(patch, {"metadata": {"resourceVersion": _version(old)}})
            return self.inner.patch(ref, body, dry_run=dry_run)

        return self._admitted(ref, bool(pinned), write)

    def _admitted(self, ref: Ref, pinned: bool, write: Callable[[Object], Object]) -> Object:
        """``write`` against the stored object; again, against the new one, when an unpinned write conflicts."""
        if pinned:  # the caller's own precondition: its Conflict is the caller's to handle
            return write(self.inner.get(ref))
        return retry_on_conflict(lambda: write(self.inner.get(ref)))


def admitted(store: Store) -> Store:
    """``store`` with its writes admitted (itself when they are already)."""
    return store if isinstance(store, AdmittedStore) else AdmittedStore(store)


def _version(obj: Object) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _has_status_subresource(obj: Object) -> bool:
    try:
        return lookup(str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")).status_subresource
    except UnknownKind:
        return False


def _as_stored(obj: Object, old: Object) -> Object:
    """``obj`` written over ``old`` as the store would keep it: identity and, for a kind with a status
    subresource, status from ``old``."""
    new = copy.deepcopy(obj)
    new["metadata"] = {**(new.get("metadata") or {}),
                       "name": old["metadata"]["name"], "namespace": old["metadata"].get("namespace", "default")}
    new["apiVersion"], new["kind"] = new.get("apiVersion") or old["apiVersion"], old["kind"]
    if _has_status_subresource(old):
        new.pop("status", None)
        if "status" in old:
            new["status"] = copy.deepcopy(old["status"])
    return new
