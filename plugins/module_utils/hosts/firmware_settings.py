# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""HostFirmwareSettings and FirmwareSchema, as baremetal-operator's controller of that kind keeps them.

A registered BareMetalHost owns a HostFirmwareSettings of its name (hosts/baremetalhost.py makes it). Each reconcile
of it reads the host's current BIOS settings and their registry from the provisioner, and writes:

- ``status.settings``: the current values (a setting whose name holds "Password" is left out, as upstream);
- a FirmwareSchema of the registry in the host's namespace, named after a hash of its content
  (``schema-<8 hex>``), so that hosts of one model share one; it is owned by every HostFirmwareSettings using it,
  and ``status.schema`` names it;
- ``ChangeDetected``: whether ``spec.settings`` differs from the current values; ``Valid``: whether it fits the
  schema (hosts/firmware.settings_problems; False names each setting that does not, with why). Both carry the
  generation they judged.

The host applies a valid change (hosts/baremetalhost.py: manual cleaning while it is available); the next read
after that shows it, and ChangeDetected goes False. While a change is pending the settings are read every minute,
otherwise every five, as upstream.
"""
from __future__ import annotations

import hashlib
from typing import Any, Mapping

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    NotFound,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref, now, owner_reference
from ansible_collections.metal3.baremetal.plugins.module_utils.core.provisioner import Provisioner, ProvisionerFactory
from ansible_collections.metal3.baremetal.plugins.module_utils.core.reconcile import Result
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import baremetalhost as bmh
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.firmware import (
    API,
    CHANGE_DETECTED,
    ON_REBOOT,
    SCHEMA_KIND,
    UPDATE_POLICY_KIND,
    VALID,
    settings_problems,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.writes import set_condition

# Upstream's requeue delays: settings read again every 5 minutes, every minute while a change is pending, and
# after 30 s when the provisioner could not read them.
REQUEUE, REQUEUE_CHANGE_DETECTED, RETRY = 300.0, 60.0, 30.0
SUCCESS, CONFIGURATION_ERROR = "Success", "ConfigurationError"  # the conditions' reasons, upstream's
MAX_MESSAGE = 1024  # the Valid condition's message: a tenant's values are echoed in it, so it is bounded


MAX_SETTINGS = 1000  # the settings one request may ask for: a BIOS has a few hundred at most


def ask_settings(store: Store, ref: Ref, settings: Mapping[str, Any], dry_run: bool = False) -> tuple[Object, bool]:
    """``settings`` merged into the HostFirmwareSettings' spec.settings (a None value takes one out); the object, and
    whether it changed. A value that is neither text nor an integer is refused naming it, and nothing is written."""
    if len(settings) > MAX_SETTINGS:
        raise BadRequest(f"settings: {len(settings)} settings, more than the {MAX_SETTINGS} one request may ask for")
    for name, value in settings.items():
        if not isinstance(name, str) or not name or len(name) > 256:
            raise BadRequest(f"settings: {str(name)[:64]!r} is not a setting's name (1 to 256 characters)")
        if isinstance(value, bool) or not isinstance(value, (str, int, type(None))):
            raise BadRequest(f"settings.{name}: must be a string or an integer, not {type(value).__name__} "
                             f"(quote a value such as true or 1.5)")
    current = store.get(ref)
    wanted = dict((current.get("spec") or {}).get("settings") or {})
    for name, value in settings.items():
        if value is None:
            wanted.pop(name, None)
        else:
            wanted[name] = value
    if wanted == ((current.get("spec") or {}).get("settings") or {}):
        return current, False
    return store.update({**current, "spec": {**(current.get("spec") or {}), "settings": wanted}}, dry_run=dry_run), True


def summary(settings: Object | None) -> dict[str, Any]:
    """A HostFirmwareSettings as the module reports it (nothing asked, nothing read when the host has none)."""
    status = (settings or {}).get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    return {"settings": status.get("settings") or {},
            "wanted": ((settings or {}).get("spec") or {}).get("settings") or {},
            "schema": (status.get("schema") or {}).get("name", ""),
            "change_detected": (conditions.get(CHANGE_DETECTED) or {}).get("status") == "True",
            "valid": (conditions.get(VALID) or {}).get("status", "True") == "True",
            "message": (conditions.get(VALID) or {}).get("message", "")}


def reconcile_firmware_settings(store: Store, provisioners: ProvisionerFactory, ref: Ref,
                                dry_run: bool = False) -> Result:
    """One reconcile of the HostFirmwareSettings ``ref``."""
    found = host_and_provisioner(store, provisioners, ref)
    if isinstance(found, Result):
        return found
    settings, host, provisioner = found
    read = provisioner.firmware_settings()
    if read.error:
        return Result(settings, requeue_after=RETRY, message=f"cannot read the host's settings: {read.error}")
    schema = _schema(store, settings, host, read.schema, dry_run)
    status, pending = _status(settings, read.settings, schema, _when_applied(store, host))
    return write_status(store, settings, status, pending, "settings read: a change is pending" if pending
                        else "settings read", dry_run)


def host_and_provisioner(store: Store, provisioners: ProvisionerFactory,
                         ref: Ref) -> tuple[Object, Object, Provisioner] | Result:
    """A host's firmware kind ``ref``, its host and the host's provisioner; or, when it is not read now, the
    reconcile's Result saying why (gone, no host, the host not managed: upstream's skipReconcileSubresource)."""
    obj = store.get_if_exists(ref)
    if obj is None:
        return Result(None, message="not found")
    host_ref = Ref(bmh.API, bmh.KIND, ref.name, ref.namespace)
    host = store.get_if_exists(host_ref)
    if host is None:
        return Result(obj, message=f"no {host_ref}")
    skipped = skip_reason(host)
    if skipped:
        return Result(obj, requeue_after=RETRY, message=f"not read: the host is {skipped}", waits_on=[host_ref])
    provisioning = (host.get("status") or {}).get("provisioning") or {}
    return obj, host, provisioners(f"{ref.namespace}{bmh.NODE_NAME_SEPARATOR}{ref.name}",
                                   provisioning.get("ID") or "")


def write_status(store: Store, obj: Object, status: dict[str, Any], pending: bool, message: str,
                 dry_run: bool) -> Result:
    """``status`` written when it differs from the object's (lastUpdated aside); read again every minute while a
    change is ``pending``, every five otherwise, as upstream."""
    requeue = REQUEUE_CHANGE_DETECTED if pending else REQUEUE
    before = {k: v for k, v in (obj.get("status") or {}).items() if k != "lastUpdated"}
    if before == status:
        return Result(obj, requeue_after=requeue, message="up to date")
    try:
        obj = store.update_status({**obj, "status": {**status, "lastUpdated": now()}}, dry_run=dry_run)
    except (Conflict, NotFound):
        return Result(obj, requeue_after=0, message=f"{Ref.of(obj)} changed while reconciling; will look again")
    return Result(obj, True, requeue, message)


def skip_reason(host: Object) -> str:
    """Why a host's settings are not read now (upstream's skipReconcileSubresource), or ''."""
    if bmh.host_state(host) in (bmh.NONE, bmh.UNMANAGED):
        return "not registered"
    annotations = host["metadata"].get("annotations") or {}
    if (host.get("status") or {}).get("operationalStatus") == "detached" or bmh.DETACHED_ANNOTATION in annotations:
        return "detached"
    if bmh.PAUSED_ANNOTATION in annotations:
        return "paused"
    return ""


def _when_applied(store: Store, host: Object) -> str:
    """When the host applies a valid change, for the ChangeDetected condition's message (upstream leaves it empty):
    a provisioned host only on a reboot, and only under a HostUpdatePolicy that allows it."""
    if bmh.host_state(host) not in (bmh.PROVISIONED, bmh.EXTERNALLY_PROVISIONED):
        return "applied by the host while it is available"
    ref = Ref(API, UPDATE_POLICY_KIND, host["metadata"]["name"], host["metadata"]["namespace"])
    policy = store.get_if_exists(ref) or {}
    if (policy.get("spec") or {}).get("firmwareSettings") == ON_REBOOT:
        return "the host is provisioned: applied by servicing when it next reboots (its HostUpdatePolicy allows it)"
    return (f"the host is provisioned: not applied until it is available again, or until a HostUpdatePolicy "
            f"{ref.name} with firmwareSettings {ON_REBOOT} allows servicing it when it reboots")


def _status(settings: Object, current: dict[str, str], schema: Object,
            when_applied: str) -> tuple[dict[str, Any], bool]:
    """The status upstream writes, and whether a change is pending (ChangeDetected, saying when it is applied)."""
    generation = settings["metadata"].get("generation")
    old = settings.get("status") or {}
    status: dict[str, Any] = {
        "settings": {name: value for name, value in current.items() if "Password" not in name},
        "schema": {"name": schema["metadata"]["name"], "namespace": schema["metadata"]["namespace"]},
    }
    desired = (settings.get("spec") or {}).get("settings") or {}
    pending = any(status["settings"].get(name) != str(value) for name, value in desired.items())
    problems = settings_problems(desired, status["settings"], schema["spec"]["schema"]) if pending else []
    message = ("Invalid BIOS setting: " + "; ".join(text for _name, text in problems)) if problems else ""
    if len(message) > MAX_MESSAGE:
        message = message[:MAX_MESSAGE - 3] + "..."
    conditions = set_condition(old.get("conditions"), CHANGE_DETECTED, pending, SUCCESS,
                               when_applied if pending and not problems else "", observed_generation=generation)
    conditions = set_condition(conditions, VALID, not problems, CONFIGURATION_ERROR if problems else SUCCESS,
                               message, observed_generation=generation)
    status["conditions"] = conditions
    return status, pending


def schema_name(schema: dict[str, dict[str, Any]]) -> str:
    """Upstream's GetSchemaName: a hash of every entry's name and values, sorted, so that hosts whose BMCs describe
    the same settings alike (one model) get one name."""
    parts: list[str] = []
    for name, entry in schema.items():
        parts += [name, str(entry.get("attribute_type") or ""), *(entry.get("allowable_values") or [])]
        parts += [str(entry[key]) for key in ("lower_bound", "upper_bound", "min_length", "max_length")
                  if entry.get(key) is not None]
        if entry.get("read_only") is not None:
            parts.append("true" if entry["read_only"] else "false")
    text = "[" + " ".join(sorted(parts)) + "]"  # as Go prints a []string
    return "schema-" + hashlib.sha256(text.encode()).hexdigest()[:8]


def _schema(store: Store, settings: Object, host: Object, schema: dict[str, dict[str, Any]],
            dry_run: bool) -> Object:
    """The FirmwareSchema of ``schema`` in the host's namespace, made when none of that content exists yet; owned by
    ``settings`` (an owner reference added to one another host made)."""
    ref = Ref(API, SCHEMA_KIND, schema_name(schema), settings["metadata"]["namespace"])
    owner = owner_reference(settings)
    existing = store.get_if_exists(ref)
    if existing is None:
        vendor = ((host.get("status") or {}).get("hardware") or {}).get("systemVendor") or {}
        new: Object = {
            "apiVersion": API, "kind": SCHEMA_KIND,
            "metadata": {"name": ref.name, "namespace": ref.namespace, "ownerReferences": [owner]},
            "spec": {"hardwareVendor": vendor.get("manufacturer") or "",
                     "hardwareModel": vendor.get("productName") or "",
                     # Password settings are not kept, as they are not in the settings either.
                     "schema": {name: entry for name, entry in schema.items()
                                if "Password" not in name and entry.get("attribute_type") != "Password"}},
        }
        try:
            return store.create(new, dry_run=dry_run)
        except AlreadyExists:  # another host of the same model made it meanwhile
            existing = store.get(ref)
    owners = existing["metadata"].get("ownerReferences") or []
    if any(o.get("uid") == owner["uid"] for o in owners):
        return existing
    return store.patch(ref, {"metadata": {"ownerReferences": [*owners, owner]}}, dry_run=dry_run)
