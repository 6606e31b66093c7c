# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""What baremetal-operator checks of a host's firmware kinds in its controllers, not in a webhook.

Upstream admits any HostFirmwareSettings and any HostFirmwareComponents names; its controllers check them each
reconcile and report the outcome in the object's ``Valid`` condition (False, with the messages) rather than
refusing the write. These are those checks as plain functions, for the reconciles of issue 33 to call:

- ``settings_problems``: HostFirmwareSettings ``spec.settings`` against the host's current settings (its
  ``status.settings``) and its FirmwareSchema - upstream's ``validateHostFirmwareSettings``
  (internal/controller/metal3.io/hostfirmwaresettings_controller.go) and ``FirmwareSchema.ValidateSetting`` /
  ``SettingSchema.Validate`` (apis/metal3.io/v1alpha1/firmwareschema_types.go);
- ``component_problems``: HostFirmwareComponents ``spec.updates`` names - upstream's
  ``ValidateHostFirmwareComponents`` (apis/metal3.io/v1alpha1/hostfirmwarecomponents_types.go), which its
  controller calls.

Each problem is ``(what it is about, upstream's text)``: the setting's name, or the update's field. A setting's
value is what the CRD admits (an IntOrString): an ``int`` or a ``str``, compared as upstream compares them - an
Enumeration or a Boolean by its text, an Integer by its number, a String by its length in bytes.
"""
from __future__ import annotations

import re
from typing import Any, Iterator, Mapping, Sequence

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, owner_reference
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy, Refused
from ansible_collections.metal3.baremetal.plugins.module_utils.core.provisioner import (
    NIC_COMPONENT_PREFIX,
    known_component,
)

Problem = tuple[str, str]  # (the setting's name or the field, upstream's text)

API = "metal3.io/v1alpha1"
SETTINGS_KIND = "HostFirmwareSettings"
COMPONENTS_KIND = "HostFirmwareComponents"
SCHEMA_KIND = "FirmwareSchema"
# HostFirmwareSettings' conditions, upstream's: the spec fits the schema; the spec differs from the host's settings.
VALID, CHANGE_DETECTED = "Valid", "ChangeDetected"
# What lets a provisioned host be changed without reprovisioning (servicing): a HostUpdatePolicy of its name, whose
# firmwareSettings (or firmwareUpdates) is onReboot.
UPDATE_POLICY_KIND, ON_REBOOT = "HostUpdatePolicy", "onReboot"


# What Go's strconv.Atoi reads: an optional sign and decimal digits, within int64.
_ATOI = re.compile(r"^[+-]?[0-9]+$")
_INT64 = (-(2 ** 63), 2 ** 63 - 1)


def _atoi(text: str) -> int | None:
    if not _ATOI.match(text):
        return None
    number = int(text)
    return number if _INT64[0] <= number <= _INT64[1] else None


def _text(value: int | str) -> str:
    """IntOrString's String(): an integer in decimal, a string as it is."""
    return str(value)


def _number(value: int | str) -> int:
    """IntOrString's IntValue(): an integer as it is, a string read by Atoi (0 when it is none)."""
    if isinstance(value, int):
        return value
    return _atoi(value) or 0


def _setting_invalid(name: str, message: str) -> Problem:
    """Upstream's SchemaSettingError."""
    return name, f"Setting {name} is invalid, {message}"


def _out_of_bounds(name: str, measure: int, lower: int | None, upper: int | None, what: str,
                   unit: str) -> Problem | None:
    """An Integer's value or a String's length (``what`` it is, the bounds' ``unit``) against its bounds, in
    upstream's words."""
    if lower is not None and measure < lower:
        return _setting_invalid(name, f"{what} is below minimum {unit} {lower}")
    if upper is not None and measure > upper:
        return _setting_invalid(name, f"{what} is above maximum {unit} {upper}")
    return None


def setting_problem(name: str, value: int | str, schema: Mapping[str, Any]) -> Problem | None:
    """Upstream's SettingSchema.Validate: ``value`` for the setting ``name`` that ``schema`` (one entry of a
    FirmwareSchema's spec.schema) describes - read-only, a password, then by its attribute_type."""
    if schema.get("read_only"):
        return _setting_invalid(name, "it is ReadOnly")
    if "Password" in name:
        return _setting_invalid(name, "Password fields can't be set")
    attribute_type = schema.get("attribute_type") or ""
    text = _text(value)
    if attribute_type == "Enumeration":
        if text in (schema.get("allowable_values") or []):
            return None
        return _setting_invalid(name, f"unknown enumeration value - {text}")
    if attribute_type == "Integer":
        if isinstance(value, str) and _atoi(value) is None:
            return _setting_invalid(name, f"String {text} entered while integer expected")
        number = _number(value)
        return _out_of_bounds(name, number, schema.get("lower_bound"), schema.get("upper_bound"),
                              f"integer {number}", "value")
    if attribute_type == "String":
        length = len(text.encode())  # Go's len(): bytes
        return _out_of_bounds(name, length, schema.get("min_length"), schema.get("max_length"),
                              f"string {text} length", "length")
    if attribute_type == "Boolean":
        if text in ("true", "false"):
            return None
        return _setting_invalid(name, f"{text} is not a boolean")
    if attribute_type == "Password":
        return _setting_invalid(name, "passwords are immutable")
    if attribute_type == "":
        return None  # allowed: the BIOS registry may not have described the setting
    return _setting_invalid(name, f"unexpected attribute type {attribute_type}")


def schema_setting_problem(name: str, value: int | str, schema: Mapping[str, Any]) -> Problem | None:
    """Upstream's FirmwareSchema.ValidateSetting: ``name`` must be in ``schema`` (a FirmwareSchema's spec.schema,
    every setting's name to what describes it), and ``value`` must be what its entry allows."""
    if name not in schema:
        return _setting_invalid(name, "it is not in the associated schema")
    return setting_problem(name, value, schema[name] or {})


def settings_problems(desired: Mapping[str, int | str], current: Mapping[str, str] | None,
                      schema: Mapping[str, Any] | None) -> list[Problem]:
    """Upstream's validateHostFirmwareSettings: every problem of ``desired`` (a HostFirmwareSettings'
    spec.settings) given the host's ``current`` settings (its status.settings) and the FirmwareSchema's
    spec.schema (None before there is one: then only names are checked), in the order of the settings' names.

    A setting may not be a password (its name holds "Password"), must be one the host has, and must fit the
    schema: known, writable, and a value its type allows (an Enumeration's value, an Integer within its bounds,
    a String within its lengths, true or false)."""
    problems: list[Problem] = []
    for name in sorted(desired):
        if "Password" in name:
            problems.append((name, "cannot set Password field"))
            continue
        if name not in (current or {}):
            problems.append((name, f"setting {name} is not in the Status field"))
            continue
        if schema is not None:
            problem = schema_setting_problem(name, desired[name], schema)
            if problem:
                problems.append(problem)
    return problems


def component_problems(updates: Sequence[Mapping[str, Any]]) -> Iterator[Problem]:
    """Upstream's ValidateHostFirmwareComponents: each update of ``updates`` (a HostFirmwareComponents'
    spec.updates) must name bmc, bios or a nic:<id> component. Upstream stops at the first; every one is named
    here."""
    for index, update in enumerate(updates):
        component = str(update.get("component") or "")
        if not known_component(component):
            yield f"spec.updates[{index}].component", (
                f"component {component} is invalid, only 'bmc', 'bios', or names starting with "
                f"'{NIC_COMPONENT_PREFIX}' are allowed as update names")


def component_url_problems(updates: Sequence[Mapping[str, Any]], outbound: OutboundPolicy) -> Iterator[Problem]:
    """Each update's URL that Ironic would be sent on the tenant's say but that names the controller's own hosts
    (loopback, link-local; core/outbound.py), unless ``outbound`` allows them: such an update is not sent. Not
    upstream's (it hands any URL on)."""
    for index, update in enumerate(updates):
        field = f"spec.updates[{index}].url"
        try:
            outbound.check(str(update.get("url") or ""), field)
        except Refused as e:
            yield field, str(e).removeprefix(f"{field}: ")


def _owned(host: Object, kind: str, spec: Object) -> Object:
    metadata = host["metadata"]
    return {"apiVersion": API, "kind": kind,
            "metadata": {"name": metadata["name"], "namespace": metadata["namespace"],
                         "ownerReferences": [owner_reference(host)]},
            "spec": spec}


def new_settings(host: Object) -> Object:
    """The HostFirmwareSettings a registered host gets, as upstream's host controller makes it: the host's name,
    owned by the host (deleted with it), asking for nothing."""
    return _owned(host, SETTINGS_KIND, {"settings": {}})


def new_components(host: Object) -> Object:
    """The HostFirmwareComponents a registered host gets when its BMC lists firmware components, as upstream's host
    controller makes it: the host's name, owned by the host, asking for no update."""
    return _owned(host, COMPONENTS_KIND, {"updates": []})


def updates_difference(wanted: Sequence[Mapping[str, Any]], sent: Sequence[Mapping[str, Any]] | None
                       ) -> list[dict[str, str]]:
    """Upstream's getUpdatesDifference: the updates of ``wanted`` (spec.updates) whose component was not sent
    (status.updates) with that same URL."""
    done = {str(update.get("component")): str(update.get("url")) for update in sent or []}
    return [{"component": str(update.get("component")), "url": str(update.get("url"))} for update in wanted
            if done.get(str(update.get("component"))) != str(update.get("url"))]


def _judged(obj: Object | None) -> bool | None:
    """Upstream's hostObjectHasChanges for a firmware kind: True when its reconcile found its current spec valid
    and a change in it; False when not (or when it is not judged at all); None while its judgement is of an older
    generation - wait for it."""
    if obj is None:
        return False
    conditions = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}
    changed = conditions.get(CHANGE_DETECTED)
    if changed is None:
        return False
    if changed.get("observedGeneration") != obj["metadata"].get("generation"):
        return None
    return (conditions.get(VALID) or {}).get("status") == "True" and changed.get("status") == "True"


def pending_updates(components: Object | None) -> list[dict[str, str]] | None:
    """The firmware updates a HostFirmwareComponents asks for that were not sent yet, once its reconcile found them
    valid (upstream's getHostFirmwareComponents then getUpdatesDifference): [] when there is nothing to send; None
    while its reconcile has not looked at its current spec yet - wait for it."""
    judged = _judged(components)
    if judged is None:
        return None
    if not judged or components is None:
        return []
    return updates_difference((components.get("spec") or {}).get("updates") or [],
                              (components.get("status") or {}).get("updates"))


def pending_settings(settings: Object | None) -> dict[str, int | str] | None:
    """The settings a HostFirmwareSettings asks for, once its reconcile found them valid and not yet the host's
    (upstream's hostObjectHasChanges): {} when there is nothing to apply; None while its reconcile has not looked
    at its current spec yet, or has not read the host's settings - wait for it."""
    judged = _judged(settings)
    if judged is None:
        return None
    if not judged or settings is None:
        return {}
    if not (settings.get("status") or {}).get("settings"):
        return None
    return dict((settings.get("spec") or {}).get("settings") or {})
