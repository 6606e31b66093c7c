# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The classes of compute served here, keyed by the ``spec.kind`` a HostClaim names (compute/base.py).

Everything that chooses a class asks here: the HostClaim flow and its admission (hostclaims/), the Metal3Machine
flow and its machine sets (capm3/). A new class is one module (a ``ComputeClass``) and one entry below; its
driver, if it has one, comes in ``Services.drivers`` under its kind.
"""
from __future__ import annotations

from ansible_collections.metal3.baremetal.plugins.module_utils.compute.baremetal import BareMetal
from ansible_collections.metal3.baremetal.plugins.module_utils.compute.base import (
    DEFAULT_KIND,
    ComputeClass,
    claim_kind,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.compute.libvirt import Libvirt

# In the order messages list them and a deleted claim's release asks them.
CLASSES: dict[str, type[ComputeClass]] = {
    BareMetal.kind: BareMetal,
    Libvirt.kind: Libvirt,
}

__all__ = ["CLASSES", "DEFAULT_KIND", "claim_kind", "class_for", "kinds", "served_kinds"]


def class_for(kind: str | None) -> type[ComputeClass] | None:
    """The class that serves claims of ``kind`` (None: the default, baremetal); None when none is served here."""
    return CLASSES.get(kind or DEFAULT_KIND)


def kinds() -> tuple[str, ...]:
    """The kinds served here."""
    return tuple(CLASSES)


def served_kinds() -> str:
    """The kinds served here, as a message lists them."""
    return ", ".join(CLASSES)
