# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""What one reconcile came to, whatever the kind: the one result type of the engine's reconcilers.

Hosts, machines, data, clusters and IPAM each return a ``Result`` (or a subclass adding what only that
kind reports, such as a host's state): the object as it now stands (None when it is gone), whether anything
was written, when to come back (None: only when something changes; 0: at once, through the rate limiter),
and a message for people. Modules and the operator read these four fields and nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object


@dataclass
class Result:
    obj: Object | None
    changed: bool = False
    requeue_after: float | None = None
    message: str = ""

    @property
    def requeue(self) -> bool:
        return self.requeue_after is not None

    def fields(self) -> dict[str, Any]:
        """The common fields, as the reconcile modules return them."""
        return {"changed": self.changed, "requeue_after": self.requeue_after, "message": self.message}
