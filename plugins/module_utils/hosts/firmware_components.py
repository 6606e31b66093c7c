# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""HostFirmwareComponents, as baremetal-operator's controller of that kind keeps it.

A registered BareMetalHost whose BMC lists firmware components owns a HostFirmwareComponents of its name
(hosts/baremetalhost.py makes it). Each reconcile of it reads the components from the provisioner, and writes:

- ``status.components``: each of bios, bmc and nic:<id> with its initialVersion, currentVersion,
  lastVersionFlashed and updatedAt, as Ironic last read them from the BMC;
- ``ChangeDetected``: whether ``spec.updates`` differs from ``status.updates`` (the updates the host last sent to
  its BMC; the host writes it as it sends them); ``Valid``: whether each update names a component upstream allows
  (hosts/firmware.component_problems) and a URL the controller may hand on (not its own loopback or link-local
  hosts, core/outbound.py: not upstream's); False names each field. Both carry the generation they judged.

The host sends valid updates (hosts/baremetalhost.py: in a manual cleaning while it is available, or by servicing
a provisioned host under its HostUpdatePolicy); the next read after that shows the new versions. While a change
is pending the components are read every minute, otherwise every five, as upstream.
"""
from __future__ import annotations

from typing import Any, Sequence

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.core.provisioner import ProvisionerFactory
from ansible_collections.metal3.baremetal.plugins.module_utils.core.reconcile import Result
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.firmware import (
    CHANGE_DETECTED,
    VALID,
    component_problems,
    component_url_problems,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.firmware_settings import (
    MAX_MESSAGE,
    RETRY,
    host_and_provisioner,
    write_status,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.writes import set_condition

# The conditions' reasons, upstream's.
OK, INVALID_COMPONENT = "OK", "InvalidComponent"
MAX_UPDATES = 64  # the updates one request may ask for: a host has a BIOS, a BMC and a few NICs
MAX_URL = 2048


def ask_updates(store: Store, ref: Ref, updates: Sequence[Any], dry_run: bool = False) -> tuple[Object, bool]:
    """``updates`` as the HostFirmwareComponents' spec.updates (replacing it, as upstream's list is replaced); the
    object, and whether it changed. An update that is not a component and a URL is refused naming it, and nothing
    is written; what the components and URLs may be is the reconcile's to judge (Valid), as upstream."""
    if len(updates) > MAX_UPDATES:
        raise BadRequest(f"updates: {len(updates)} updates, more than the {MAX_UPDATES} one request may ask for")
    wanted: list[dict[str, str]] = []
    for index, update in enumerate(updates):
        if not isinstance(update, dict) or set(update) - {"component", "url"}:
            raise BadRequest(f"updates[{index}]: must be a mapping of component and url only")
        for key, longest in (("component", 256), ("url", MAX_URL)):
            value = update.get(key)
            if not isinstance(value, str) or not value or len(value) > longest:
                raise BadRequest(f"updates[{index}].{key}: must be a string of 1 to {longest} characters")
        wanted.append({"component": update["component"], "url": update["url"]})
    current = store.get(ref)
    if wanted == ((current.get("spec") or {}).get("updates") or []):
        return current, False
    return store.update({**current, "spec": {**(current.get("spec") or {}), "updates": wanted}}, dry_run=dry_run), True


def summary(components: Object | None) -> dict[str, Any]:
    """A HostFirmwareComponents as the module reports it, beside the host's settings (nothing when it has none)."""
    status = (components or {}).get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    return {"components": status.get("components") or [],
            "updates": ((components or {}).get("spec") or {}).get("updates") or [],
            "updates_sent": status.get("updates") or [],
            "updates_change_detected": (conditions.get(CHANGE_DETECTED) or {}).get("status") == "True",
            "updates_valid": (conditions.get(VALID) or {}).get("status", "True") == "True",
            "updates_message": (conditions.get(VALID) or {}).get("message", "")}


def reconcile_firmware_components(store: Store, provisioners: ProvisionerFactory, ref: Ref, dry_run: bool = False,
                                  outbound: OutboundPolicy | None = None) -> Result:
    """One reconcile of the HostFirmwareComponents ``ref``; ``outbound``: the controller's own hosts an update's URL
    may name (none by default)."""
    found = host_and_provisioner(store, provisioners, ref)
    if isinstance(found, Result):
        return found
    components, _host, provisioner = found
    read = provisioner.firmware_components()
    if read.error:
        return Result(components, requeue_after=RETRY, message=f"cannot read the host's firmware: {read.error}")
    status, pending = _status(components, read.components, outbound or OutboundPolicy())
    return write_status(store, components, status, pending, "firmware read: an update is pending" if pending
                        else "firmware read", dry_run)


def _status(components: Object, current: list[dict[str, str]], outbound: OutboundPolicy) -> tuple[dict[str, Any], bool]:
    """The status upstream writes (status.updates kept as the host wrote it), and whether an update is pending."""
    generation = components["metadata"].get("generation")
    old = components.get("status") or {}
    status: dict[str, Any] = {k: v for k, v in old.items() if k not in ("components", "conditions", "lastUpdated")}
    status["components"] = current
    wanted = (components.get("spec") or {}).get("updates") or []
    pending = wanted != (old.get("updates") or [])
    problems = [*component_problems(wanted), *component_url_problems(wanted, outbound)] if pending else []
    message = ("Invalid Firmware Components: " + "; ".join(f"{field}: {text}" for field, text in problems)
               if problems else "")
    if len(message) > MAX_MESSAGE:
        message = message[:MAX_MESSAGE - 3] + "..."
    reason = INVALID_COMPONENT if problems else OK
    conditions = set_condition(old.get("conditions"), CHANGE_DETECTED, pending, OK, observed_generation=generation)
    conditions = set_condition(conditions, VALID, not problems, reason, message, observed_generation=generation)
    status["conditions"] = conditions
    return status, pending
