# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The store interface: Kubernetes object semantics over any backend.

Both backends (local SQLite, Kubernetes) give exactly these semantics, and the
store is the only lock the engine uses: uniqueness comes from names (create
fails with AlreadyExists on a taken name) and from resourceVersion-checked
writes (update fails with Conflict when the object changed since it was read).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Iterable

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.store.followed import Followed


class Store(ABC):
    backend = ""
    follows = False  # whether follow() gives live views

    @abstractmethod
    def get(self, ref: Ref) -> Object:
        """The object named by ``ref``; NotFound when there is none."""

    def get_if_exists(self, ref: Ref) -> Object | None:
        """The object named by ``ref``, or None when there is none."""
        try:
            return self.get(ref)
        except NotFound:
            return None

    @abstractmethod
    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | Iterable[str] | None = None) -> list[Object]:
        """Objects of a kind, in one namespace (or all when None), matching a label selector."""

    @abstractmethod
    def create(self, obj: Object, dry_run: bool = False) -> Object:
        """Store a new object; AlreadyExists when its name is taken. Status is dropped for kinds with a
        status subresource, as kube-apiserver drops it."""

    @abstractmethod
    def update(self, obj: Object, dry_run: bool = False) -> Object:
        """Replace an object; Conflict when metadata.resourceVersion is not the stored one. Status is
        kept as stored for kinds with a status subresource; generation bumps only when the spec changes.
        An object being deleted is removed once its last finalizer goes."""

    @abstractmethod
    def update_status(self, obj: Object, dry_run: bool = False) -> Object:
        """Replace only the status of an object (the status subresource); spec and generation untouched."""

    @abstractmethod
    def patch(self, ref: Ref, patch: Object, dry_run: bool = False) -> Object:
        """Apply a JSON merge patch; a metadata.resourceVersion in the patch is a precondition."""

    @abstractmethod
    def patch_status(self, ref: Ref, patch: Object, dry_run: bool = False) -> Object:
        """Apply a JSON merge patch to the status subresource."""

    @abstractmethod
    def delete(self, ref: Ref, dry_run: bool = False) -> Object | None:
        """Delete an object. With finalizers it is kept with a deletionTimestamp and returned; without,
        it is removed (None) and its dependents (ownerReferences) are deleted in cascade."""

    def follow(self, api_version: str, kind: str, namespace: str, label_selector: str) -> Followed | None:
        """A live view of the objects a selector matches in one namespace (see store/followed.py), kept for the
        store's life; None when the backend offers none (then read through the store)."""
        return None

    @abstractmethod
    def close(self) -> None:
        """Release the backend's resources."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
