# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""What one reconcile came to, whatever the kind: the one result type of the engine's reconcilers.

Hosts, machines, data, clusters and IPAM each return a ``Result`` (or a subclass adding what only that
kind reports, such as a host's state): the object as it now stands (None when it is gone), whether anything
was written, when to come back (None: only when something changes; 0: at once, through the rate limiter),
and a message for people. Modules and the operator read these four fields and nothing else - and, of a
reconcile that waits on other objects to change (an exhausted claim on its pool), which ones: the collection's
operator reconciles it again when one of them changes, instead of after ``requeue_after``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref


@dataclass
class Result:
    obj: Object | None
    changed: bool = False
    requeue_after: float | None = None
    message: str = ""
    # The objects whose change may let this one go on; a name of "" is any object of the kind in the namespace.
    waits_on: list[Ref] = field(default_factory=list)

    @property
    def requeue(self) -> bool:
        return self.requeue_after is not None

    def fields(self) -> dict[str, Any]:
        """The common fields, as the reconcile modules return them."""
        fields: dict[str, Any] = {"changed": self.changed, "requeue_after": self.requeue_after,
                                  "message": self.message}
        if self.waits_on:
            fields["waits_on"] = self.wait_targets()
        return fields

    def wait_targets(self) -> list[dict[str, str]]:
        return [wait_target(ref) for ref in self.waits_on]


def wait_target(ref: Ref) -> dict[str, str]:
    """An object waited on, in the form the requeue_after task takes it (``wait_on``)."""
    return {"api_version": ref.api_version, "kind": ref.kind, "namespace": ref.namespace, "name": ref.name}
