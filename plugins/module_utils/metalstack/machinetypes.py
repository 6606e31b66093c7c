# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Machine types (metal-stack's sizes): named sets of hardware constraints matched against hosts' inspected hardware.

A MachineType (metal3.io/v1alpha1, ours: upstream Metal3 has none) lives beside the BareMetalHosts it classifies,
in their namespace. Its ``spec.constraints`` is a list of ``{type, min, max}``, at most one of each type:

| type | the host's value (its ``status.hardware``, upstream's HardwareDetails) | min / max |
|---|---|---|
| cores | ``cpu.count`` | whole numbers |
| memory | ``ramMebibytes`` * 2^20, in bytes | bytes, or a Kubernetes quantity (``16Gi``, ``500G``) |
| storage | the ``sizeBytes`` of every disk of ``storage`` together | bytes, or a quantity |
| disks | how many disks ``storage`` lists | whole numbers |
| nics | how many NICs ``nics`` lists | whole numbers |

``min`` defaults to 0 and ``max`` to no bound; one of them must be given, and min is never above max. A host fits
a type when its value of every constrained type lies in [min, max] (both ends included). A host without
``status.hardware`` (not inspected yet) fits no type; a host with no ``storage`` or ``nics`` listed has none (as
upstream leaves an empty list out). Inspection reports the memory the firmware leaves to the OS, often a little
below the DIMMs' nominal size: a type's memory ``min`` should allow for that.

Types may overlap (metal-stack refuses overlapping sizes; here a host may fit several): ``classify`` names every
type a host fits, and ``host_machine_type`` one of them - the first by name - for a column of one value.

``reconcile_machine_type`` writes which hosts of the namespace fit (``status.hosts``, sorted, and
``status.matched``, their count) and the ``Ready`` condition (False, with the problem, for a malformed spec,
which then matches no host). Admission refuses a malformed spec when it is written, naming the field.
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.api import admission
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid, NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import (
    Object,
    Ref,
    now,
    without_server_fields,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.quantity import format_bytes, parse_quantity, whole
from ansible_collections.metal3.baremetal.plugins.module_utils.core.reconcile import Result
from ansible_collections.metal3.baremetal.plugins.module_utils.core.retry import retry_on_conflict
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import ensure_absent, ensure_present
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.writes import set_condition

GROUP = "metal3.io"
API = "metal3.io/v1alpha1"
KIND = "MachineType"
HOST_API = "metal3.io/v1alpha1"
HOST_KIND = "BareMetalHost"

CORES, MEMORY, STORAGE, DISKS, NICS = "cores", "memory", "storage", "disks", "nics"
CONSTRAINT_TYPES = (CORES, MEMORY, STORAGE, DISKS, NICS)
BYTE_TYPES = frozenset({MEMORY, STORAGE})
INT64_MAX = (1 << 63) - 1
MEBIBYTE = 1 << 20

READY_CONDITION = "Ready"
READY_REASON = "ConstraintsValid"
INVALID_REASON = "InvalidConstraints"
NOT_INSPECTED = "not inspected: no status.hardware"

_WHOLE_NUMBER = re.compile(r"\+?[0-9]+")
# What a count is called in a reason, singular and plural.
_NOUNS = {CORES: ("core", "cores"), DISKS: ("disk", "disks"), NICS: ("NIC", "NICs")}

Problem = tuple[str, str]  # (field, what is wrong with it)


@dataclass(frozen=True)
class Constraint:
    """One hardware constraint: the host's value of ``type`` lies in [min, max] (max None: no bound)."""

    type: str
    min: int = 0
    max: int | None = None

    def allows(self, value: int) -> bool:
        return self.min <= value and (self.max is None or value <= self.max)

    def shown(self, value: int) -> str:
        """A value of this constraint's type as people read it: bytes as a quantity, counts as numbers."""
        return format_bytes(value) if self.type in BYTE_TYPES else str(value)

    def wanted(self) -> str:
        """'4 to 8', 'at least 16Gi', 'at most 2', 'exactly 1'."""
        if self.max is None:
            return f"at least {self.shown(self.min)}"
        if self.min == self.max:
            return f"exactly {self.shown(self.min)}"
        if self.min == 0:
            return f"at most {self.shown(self.max)}"
        return f"{self.shown(self.min)} to {self.shown(self.max)}"


@dataclass(frozen=True)
class MachineType:
    """A MachineType's spec, parsed: its constraints in the order written."""

    name: str
    namespace: str
    constraints: tuple[Constraint, ...]
    description: str = ""

    def constraint(self, type_: str) -> Constraint | None:
        return next((c for c in self.constraints if c.type == type_), None)


# -- parsing ---------------------------------------------------------------------------------------------------


def parse_machine_type(obj: Object) -> MachineType:
    """The MachineType ``obj`` as the engine reads it; Invalid naming every malformed field (``spec.constraints[1]
    .min: '16Xi' is not a quantity ...``), one problem after another, separated by '; '."""
    machine_type, problems = _parse(obj)
    if problems or machine_type is None:
        raise Invalid("; ".join(f"{f}: {w}" for f, w in problems))
    return machine_type


def machine_type_problems(obj: Object) -> list[Problem]:
    """What is wrong with ``obj``'s spec, each (field, problem); empty when it parses."""
    return _parse(obj)[1]


def _parse(obj: Object) -> tuple[MachineType | None, list[Problem]]:
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return None, [("spec", "Required value: a mapping with constraints")]
    problems: list[Problem] = []
    description = spec.get("description")
    if description is not None and not isinstance(description, str):
        problems.append(("spec.description", f"{description!r} is not a string"))
    items = spec.get("constraints")
    if not isinstance(items, list) or not items:
        problems.append(("spec.constraints", "Required value: at least one constraint "
                                             f"(a type of {', '.join(CONSTRAINT_TYPES)}, with min and max)"))
        return None, problems
    constraints: list[Constraint] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        where = f"spec.constraints[{index}]"
        if not isinstance(item, dict):
            problems.append((where, f"{item!r} is not a mapping of type, min and max"))
            continue
        type_ = item.get("type")
        if type_ is None:
            problems.append((f"{where}.type", f"Required value: one of {', '.join(CONSTRAINT_TYPES)}"))
            continue
        if type_ not in CONSTRAINT_TYPES:
            problems.append((f"{where}.type", f"{type_!r} is not one of {', '.join(CONSTRAINT_TYPES)}"))
            continue
        if type_ in seen:
            problems.append((f"{where}.type", f"{type_!r} is constrained twice (also spec.constraints[{seen[type_]}])"))
            continue
        seen[type_] = index
        low, low_problem = _bound(type_, item.get("min"))
        high, high_problem = _bound(type_, item.get("max"))
        problems += [(f"{where}.{end}", p) for end, p in (("min", low_problem), ("max", high_problem)) if p]
        if low_problem or high_problem:
            continue
        if low is None and high is None:
            problems.append((where, f"Required value: min or max (a {type_} constraint without either allows "
                                    "anything)"))
            continue
        constraint = Constraint(type_, low or 0, high)
        if high is not None and constraint.min > high:
            problems.append((f"{where}.max", f"{constraint.shown(high)} is below min {constraint.shown(low or 0)}"))
            continue
        constraints.append(constraint)
    if problems:
        return None, problems
    return MachineType(str(metadata.get("name") or ""), str(metadata.get("namespace") or "default"),
                       tuple(constraints), str(description or "")), []


def _bound(type_: str, value: Any) -> tuple[int | None, str]:
    """A min or max of ``type_`` as an integer (None when not given), or the problem with it."""
    if value is None:
        return None, ""
    if type_ in BYTE_TYPES:
        amount = parse_quantity(value)
        if amount is None:
            return None, (f"{value!r} is not a quantity (a number of bytes, or a number with a suffix such as 16Gi "
                          "or 500G)")
    else:
        whole_number = (isinstance(value, int) and not isinstance(value, bool)) or \
            (isinstance(value, str) and _WHOLE_NUMBER.fullmatch(value.strip()) is not None)
        amount = parse_quantity(value) if whole_number else None
        if amount is None:
            return None, f"{value!r} is not a whole number of {_NOUNS[type_][1]}"
    if amount < 0:
        return None, f"{value!r} must not be negative"
    number = whole(amount)
    if number > INT64_MAX:
        return None, f"{value!r} is more than {INT64_MAX}" + (" bytes" if type_ in BYTE_TYPES else "")
    return number, ""


# -- matching --------------------------------------------------------------------------------------------------


def hardware_facts(host: Object) -> dict[str, int | str] | str:
    """The host's value of each constraint type, or, for a type it cannot say, why; NOT_INSPECTED when it has no
    ``status.hardware`` at all."""
    hardware = (host.get("status") or {}).get("hardware")
    if not isinstance(hardware, dict) or not hardware:
        return NOT_INSPECTED
    facts: dict[str, int | str] = {}
    cpu = hardware.get("cpu")
    count = _count(cpu.get("count") if isinstance(cpu, dict) else None)
    facts[CORES] = count if count is not None else "no status.hardware.cpu.count"
    ram = _count(hardware.get("ramMebibytes"))
    facts[MEMORY] = ram * MEBIBYTE if ram is not None else "no status.hardware.ramMebibytes"
    disks = hardware.get("storage")
    if disks is None:
        disks = []  # upstream leaves an empty list out
    if not isinstance(disks, list):
        facts[DISKS] = facts[STORAGE] = "status.hardware.storage is not a list"
    else:
        facts[DISKS] = len(disks)
        sizes = [_count(d.get("sizeBytes")) if isinstance(d, dict) else None for d in disks]
        unsized = [i for i, size in enumerate(sizes) if size is None]
        facts[STORAGE] = (f"no status.hardware.storage[{unsized[0]}].sizeBytes" if unsized
                          else sum(size or 0 for size in sizes))
    nics = hardware.get("nics")
    if nics is None:
        nics = []
    facts[NICS] = len(nics) if isinstance(nics, list) else "status.hardware.nics is not a list"
    return facts


def _count(value: Any) -> int | None:
    """``value`` when it is a whole number (not a bool, not negative), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def mismatch(machine_type: MachineType, host: Object) -> str:
    """'' when ``host`` fits ``machine_type``; else why not, every failed constraint in the type's order, joined
    by '; ' (``has 2 cores, v1-small-x86 wants 4 to 8``, ``not inspected: no status.hardware``)."""
    facts = hardware_facts(host)
    if isinstance(facts, str):
        return facts
    reasons = []
    for constraint in machine_type.constraints:
        value = facts[constraint.type]
        if isinstance(value, str):
            reasons.append(f"{value} ({machine_type.name} wants {constraint.wanted()} {constraint.type})")
        elif not constraint.allows(value):
            reasons.append(f"has {_amount(constraint, value)}, {machine_type.name} wants {constraint.wanted()}")
    return "; ".join(reasons)


def _amount(constraint: Constraint, value: int) -> str:
    """'2 cores', '1 disk', '16Gi memory', '500G storage'."""
    if constraint.type in BYTE_TYPES:
        return f"{format_bytes(value)} {constraint.type}"
    singular, plural = _NOUNS[constraint.type]
    return f"{value} {singular if value == 1 else plural}"


def classify(machine_types: list[MachineType], host: Object) -> list[str]:
    """The names of every type ``host`` fits, sorted."""
    return sorted(t.name for t in machine_types if not mismatch(t, host))


def host_machine_type(machine_types: list[MachineType], host: Object) -> str:
    """The one type to show for ``host`` (a table's column): '' when it fits none, the first by name when it fits
    several (types should not overlap, as metal-stack's sizes may not; ``classify`` names them all)."""
    fits = classify(machine_types, host)
    return fits[0] if fits else ""


# -- reconcile -------------------------------------------------------------------------------------------------


@dataclass
class MachineTypeResult(Result):
    """A reconcile of a MachineType: the hosts that fit, sorted, and why each other host does not."""

    hosts: list[str] = field(default_factory=list)
    mismatches: dict[str, str] = field(default_factory=dict)
    ready: bool = False
    # The MachineType before and after (without the fields the server sets), for a module's diff.
    diff: dict[str, Any] = field(default_factory=dict)


def reconcile_machine_type(store: Store, ref: Ref, dry_run: bool = False) -> MachineTypeResult:
    """Match the MachineType against the BareMetalHosts of its namespace: write ``status.hosts``, ``status.matched``
    and the Ready condition (False with the problem for a malformed spec), and ``lastUpdated``, only when they
    change. Nothing to come back for: a host's change is a new reconcile."""
    def step() -> MachineTypeResult:
        try:
            obj = store.get(ref)
        except NotFound:
            return MachineTypeResult(None, message="gone")
        return _reconcile(store, obj, dry_run)

    return retry_on_conflict(step)


def _reconcile(store: Store, obj: Object, dry_run: bool, write: bool = True) -> MachineTypeResult:
    try:
        machine_type: MachineType | None = parse_machine_type(obj)
        problem = ""
    except Invalid as e:
        machine_type, problem = None, str(e)
    hosts: list[str] = []
    mismatches: dict[str, str] = {}
    if machine_type is not None:
        namespace = obj["metadata"].get("namespace") or "default"
        for host in store.list(HOST_API, HOST_KIND, namespace):
            why = mismatch(machine_type, host)
            if why:
                mismatches[host["metadata"]["name"]] = why
            else:
                hosts.append(host["metadata"]["name"])
    hosts.sort()
    status = copy.deepcopy(obj.get("status") or {})
    status["hosts"] = hosts
    status["matched"] = len(hosts)
    status["conditions"] = set_condition(status.get("conditions"), READY_CONDITION, not problem,
                                         INVALID_REASON if problem else READY_REASON, problem)
    changed = status != (obj.get("status") or {})
    if changed:
        status["lastUpdated"] = now()
        updated = {**obj, "status": status}
        obj = store.update_status(updated, dry_run=dry_run) if write else updated
    message = problem or f"{len(hosts)} of {len(hosts) + len(mismatches)} hosts fit"
    return MachineTypeResult(obj, changed, None, message, hosts=hosts, mismatches=mismatches, ready=not problem)


def machine_type_present(store: Store, definition: Object | None, ref: Ref,
                         dry_run: bool = False) -> MachineTypeResult:
    """Apply ``definition`` (merged into the stored MachineType, or a new one; admitted first), then reconcile it.
    Without a definition the MachineType must exist. In a dry run nothing is written, and the result is what would
    be: the hosts the type as defined would match."""
    before = store.get_if_exists(ref)
    applied = False
    if definition is not None:
        outcome = ensure_present(store, definition, dry_run)
        applied = bool(outcome["changed"])
    elif before is None:
        raise NotFound(f"{KIND} {ref.namespace}/{ref.name} does not exist and no definition was given")
    if dry_run and definition is not None:
        step = _reconcile(store, outcome["result"], dry_run, write=False)
    else:
        step = reconcile_machine_type(store, ref, dry_run)
    step.changed = step.changed or applied
    step.diff = _diff(before, step.obj)
    return step


def machine_type_absent(store: Store, ref: Ref, dry_run: bool = False) -> MachineTypeResult:
    """Delete the MachineType (it holds nothing, so has no finalizer); one already gone is fine."""
    outcome = ensure_absent(store, ref, dry_run)
    changed = bool(outcome["changed"])
    return MachineTypeResult(None, changed, None, "deleted" if changed else "gone", diff=outcome["diff"])


def _diff(before: Object | None, after: Object | None) -> dict[str, Any]:
    return {"before": without_server_fields(before) if before else {},
            "after": without_server_fields(after) if after else {}}


# -- admission -------------------------------------------------------------------------------------------------


def admit_machine_type(store: admission.Reader, new: Object, old: Object | None) -> None:
    """Ours (upstream has no MachineType): the spec must parse; Invalid naming every malformed field."""
    problems = machine_type_problems(new)
    if problems:
        name = (new.get("metadata") or {}).get("name", "")
        raise Invalid(f'{KIND}.{GROUP} "{name}" is invalid: ' + "; ".join(f"{f}: {w}" for f, w in problems))


admission.register(GROUP, KIND, admit_machine_type)
