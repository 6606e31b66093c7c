# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""What a BareMetalHost records of its RAID, as baremetal-operator's controller does
(internal/controller/metal3.io/baremetalhost_controller.go, saveHostProvisioningSettings and
clearHostProvisioningSettings): ``status.provisioning.raid`` is the RAID configuration last sent to the provisioner,
the spec's, where a spec without RAID (or ``raid: {}``) keeps the hardware volumes applied and removes the software
ones. Upstream's RAIDConfig, both lists always there: a list that is null keeps, an empty one removes.
"""
from __future__ import annotations

from typing import Any, Mapping

from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.raid import (
    HARDWARE,
    SOFTWARE,
    root_volume_count,
    volumes,
)


def recorded(raid: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``raid`` as the status holds it: both lists, null where absent; None when there is no RAID at all."""
    if raid is None:
        return None
    return {HARDWARE: volumes(raid, HARDWARE), SOFTWARE: volumes(raid, SOFTWARE)}


def target(spec_raid: Mapping[str, Any] | None, status_raid: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The RAID configuration the host is to have (what status.provisioning.raid becomes): the spec's; without one
    (none, or ``{}``) nothing when nothing was applied, else the hardware volumes applied kept and the software
    volumes removed."""
    wanted = recorded(spec_raid)
    if wanted is None or wanted == recorded({}):
        applied = recorded(status_raid)
        if applied is None:
            return wanted
        return {HARDWARE: applied[HARDWARE] or None, SOFTWARE: []}
    return wanted


def after_failure(status_raid: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What the host keeps recorded after its preparation failed: the hardware volumes (not to be built again and
    again), not the software ones."""
    applied = recorded(status_raid)
    return None if applied is None else {**applied, SOFTWARE: None}


def has_root_volume(spec_raid: Mapping[str, Any] | None) -> bool:
    """A software volume is the root volume: the host's root device follows it, not root device hints."""
    return root_volume_count(spec_raid) > 0
