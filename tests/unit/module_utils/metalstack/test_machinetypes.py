"""Machine types (metal-stack's sizes) as tables: hosts x types -> the reason a host does not fit ('' when it does),
malformed specs -> the field and the problem, overlapping types, and the reconcile that writes status.hosts."""
from __future__ import annotations

from typing import Any, Iterator

import pytest

# The engine's entry point: every kind's admission rules registered, as the modules have them.
from ansible_collections.metal3.baremetal.plugins.module_utils import engine  # noqa: F401  # pylint: disable=unused-import
from ansible_collections.metal3.baremetal.plugins.module_utils.api.admission import RULED_KINDS, rule_for
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid, NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.machinetypes import (
    API,
    INVALID_REASON,
    KIND,
    NOT_INSPECTED,
    READY_CONDITION,
    READY_REASON,
    Constraint,
    MachineType,
    admit_machine_type,
    classify,
    host_machine_type,
    machine_type_absent,
    machine_type_present,
    mismatch,
    parse_machine_type,
    reconcile_machine_type,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.store.admitted import admitted
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

NS = "metal"
GI = 1 << 30
G = 10**9
T = 10**12


def machine_type(name: str, *constraints: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": KIND, "metadata": {"name": name, "namespace": NS},
            "spec": {"constraints": list(constraints), **spec}}


def host(name: str = "node", cores: int | None = 4, ram_mib: int | None = 16384, disks: list[Any] | None = None,
         nics: int | None = 2, inspected: bool = True, **hardware: Any) -> dict[str, Any]:
    """A BareMetalHost with upstream's HardwareDetails in status.hardware (cores, RAM, disks by size, NICs)."""
    obj: dict[str, Any] = {"apiVersion": API, "kind": "BareMetalHost", "metadata": {"name": name, "namespace": NS},
                           "spec": {"online": False}}
    if not inspected:
        return obj
    details: dict[str, Any] = {"hostname": name, "systemVendor": {"manufacturer": "QEMU"}}
    if cores is not None:
        details["cpu"] = {"arch": "x86_64", "count": cores}
    if ram_mib is not None:
        details["ramMebibytes"] = ram_mib
    disks = [500 * G] if disks is None else disks
    if disks:
        details["storage"] = [{"name": f"/dev/sd{chr(97 + i)}", "sizeBytes": size} if isinstance(size, int)
                              else size for i, size in enumerate(disks)]
    if nics:
        details["nics"] = [{"name": f"eth{i}", "mac": f"52:54:00:00:00:{i:02x}"} for i in range(nics)]
    details.update(hardware)
    obj["status"] = {"hardware": details}
    return obj


TYPES = {
    # quantities as strings
    "small": machine_type("small", {"type": "cores", "min": 4, "max": 8},
                          {"type": "memory", "min": "16Gi", "max": "32Gi"}, {"type": "storage", "min": "500G"}),
    # the same memory bounds as integers of bytes, and as a string of digits
    "bytes": machine_type("bytes", {"type": "memory", "min": 16 * GI, "max": str(32 * GI)}),
    "two-to-four-disks": machine_type("two-to-four-disks", {"type": "disks", "min": 2, "max": 4}),
    "big-storage": machine_type("big-storage", {"type": "storage", "min": "1T"}),
    "two-nics": machine_type("two-nics", {"type": "nics", "min": 2}),
    "four-cores": machine_type("four-cores", {"type": "cores", "min": "4", "max": 4}),
    "tiny": machine_type("tiny", {"type": "cores", "max": 2}, {"type": "memory", "max": "1.5Gi"}),
}

MATCHES = [
    # (type, host, the reason it does not fit: '' when it does)
    ("small", host(cores=4, ram_mib=16384, disks=[500 * G]), ""),
    ("small", host(cores=8, ram_mib=32768, disks=[500 * G]), ""),
    ("small", host(cores=3), "has 3 cores, small wants 4 to 8"),
    ("small", host(cores=9), "has 9 cores, small wants 4 to 8"),
    ("small", host(ram_mib=16383), "has 16383Mi memory, small wants 16Gi to 32Gi"),
    ("small", host(ram_mib=32769), "has 32769Mi memory, small wants 16Gi to 32Gi"),
    ("small", host(disks=[250 * G, 250 * G]), ""),
    ("small", host(disks=[250 * G, 249 * G]), "has 499G storage, small wants at least 500G"),
    ("small", host(cores=2, ram_mib=8192, disks=[]),
     "has 2 cores, small wants 4 to 8; has 8Gi memory, small wants 16Gi to 32Gi; has 0 storage, small wants at least "
     "500G"),
    ("small", host(inspected=False), NOT_INSPECTED),
    ("small", {**host(), "status": {"hardware": {}}}, NOT_INSPECTED),
    ("small", host(cores=None), "no status.hardware.cpu.count (small wants 4 to 8 cores)"),
    ("small", host(ram_mib=None), "no status.hardware.ramMebibytes (small wants 16Gi to 32Gi memory)"),
    ("small", host(disks=[500 * G, {"name": "/dev/sdb"}]),
     "no status.hardware.storage[1].sizeBytes (small wants at least 500G storage)"),
    ("bytes", host(ram_mib=16384), ""),
    ("bytes", host(ram_mib=32768), ""),
    ("bytes", host(ram_mib=32769), "has 32769Mi memory, bytes wants 16Gi to 32Gi"),
    ("bytes", host(ram_mib=16383, cores=None, disks=[]), "has 16383Mi memory, bytes wants 16Gi to 32Gi"),
    # disks counts the disks, storage adds their sizes up
    ("two-to-four-disks", host(disks=[4 * T]), "has 1 disk, two-to-four-disks wants 2 to 4"),
    ("two-to-four-disks", host(disks=[1, 1]), ""),
    ("two-to-four-disks", host(disks=[G] * 4), ""),
    ("two-to-four-disks", host(disks=[G] * 5), "has 5 disks, two-to-four-disks wants 2 to 4"),
    ("two-to-four-disks", host(disks=[]), "has 0 disks, two-to-four-disks wants 2 to 4"),
    ("big-storage", host(disks=[4 * T]), ""),
    ("big-storage", host(disks=[500 * G, 500 * G]), ""),
    ("big-storage", host(disks=[500 * G, 499 * G]), "has 999G storage, big-storage wants at least 1T"),
    ("two-nics", host(nics=2), ""),
    ("two-nics", host(nics=1), "has 1 NIC, two-nics wants at least 2"),
    ("two-nics", host(nics=0), "has 0 NICs, two-nics wants at least 2"),
    ("four-cores", host(cores=4), ""),
    ("four-cores", host(cores=5), "has 5 cores, four-cores wants exactly 4"),
    ("tiny", host(cores=2, ram_mib=1536), ""),
    ("tiny", host(cores=1, ram_mib=1537), "has 1537Mi memory, tiny wants at most 1536Mi"),
    ("tiny", host(cores=3, ram_mib=1024), "has 3 cores, tiny wants at most 2"),
]


@pytest.mark.parametrize(("type_name", "host_obj", "reason"), MATCHES,
                         ids=[f"{t}-{i}" for i, (t, _h, _r) in enumerate(MATCHES)])
def test_a_host_fits_a_type_or_says_why_not(type_name: str, host_obj: dict[str, Any], reason: str):
    assert mismatch(parse_machine_type(TYPES[type_name]), host_obj) == reason


def test_the_table_covers_every_type_both_ways():
    assert len(MATCHES) >= 15
    assert {t for t, _h, r in MATCHES if r == ""} == set(TYPES)
    assert {t for t, _h, r in MATCHES if r} == set(TYPES)


def test_a_parsed_type_holds_bytes_and_counts():
    parsed = parse_machine_type(TYPES["small"] | {"spec": {**TYPES["small"]["spec"], "description": "x86, small"}})
    assert parsed == MachineType("small", NS, (Constraint("cores", 4, 8), Constraint("memory", 16 * GI, 32 * GI),
                                               Constraint("storage", 500 * G, None)), "x86, small")
    assert parse_machine_type(TYPES["bytes"]).constraint("memory") == Constraint("memory", 16 * GI, 32 * GI)
    assert parse_machine_type(TYPES["tiny"]).constraint("cores") == Constraint("cores", 0, 2)
    assert parse_machine_type(TYPES["tiny"]).constraint("disks") is None
    # a fraction of a byte rounds up, as Kubernetes reads a quantity into an integer
    assert parse_machine_type(machine_type("m", {"type": "memory", "min": "1.5", "max": "1e3"})).constraints == (
        Constraint("memory", 2, 1000),)


BAD = [
    # (constraints, or a whole spec, -> the message: field, then problem)
    ([{"type": "cores", "min": 4}, {"type": "memory", "min": "16Xi"}],
     "spec.constraints[1].min: '16Xi' is not a quantity"),
    ([{"type": "gpu", "min": 1}], "spec.constraints[0].type: 'gpu' is not one of cores, memory, storage, disks, nics"),
    ([{"type": "cores", "min": 8, "max": 4}], "spec.constraints[0].max: 4 is below min 8"),
    ([{"type": "memory", "min": "32Gi", "max": 16 * GI}], "spec.constraints[0].max: 16Gi is below min 32Gi"),
    ([{"type": "storage", "min": "1T", "max": "500G"}], "spec.constraints[0].max: 500G is below min 1T"),
    ([{"type": "cores", "min": 4}, {"type": "nics", "min": 1}, {"type": "cores", "max": 8}],
     "spec.constraints[2].type: 'cores' is constrained twice (also spec.constraints[0])"),
    ([{"type": "cores", "min": "4k"}], "spec.constraints[0].min: '4k' is not a whole number of cores"),
    ([{"type": "disks", "max": 2.5}], "spec.constraints[0].max: 2.5 is not a whole number of disks"),
    ([{"type": "nics", "min": True}], "spec.constraints[0].min: True is not a whole number of NICs"),
    ([{"type": "memory", "min": True}], "spec.constraints[0].min: True is not a quantity"),
    ([{"type": "memory", "max": ["16Gi"]}], "spec.constraints[0].max: ['16Gi'] is not a quantity"),
    ([{"type": "cores", "min": -1}], "spec.constraints[0].min: -1 must not be negative"),
    ([{"type": "memory", "min": "-1Gi"}], "spec.constraints[0].min: '-1Gi' must not be negative"),
    ([{"type": "storage", "max": "16Ei"}], "spec.constraints[0].max: '16Ei' is more than 9223372036854775807 bytes"),
    ([{"type": "cores"}], "spec.constraints[0]: Required value: min or max"),
    ([{"min": 4}], "spec.constraints[0].type: Required value: one of cores, memory, storage, disks, nics"),
    (["cores"], "spec.constraints[0]: 'cores' is not a mapping of type, min and max"),
    ([], "spec.constraints: Required value: at least one constraint"),
    ({"description": "no constraints"}, "spec.constraints: Required value: at least one constraint"),
    ({"constraints": [{"type": "cores", "min": 1}], "description": 7}, "spec.description: 7 is not a string"),
    (None, "spec: Required value"),
]


@pytest.mark.parametrize(("spec", "message"), BAD, ids=[m.split(":")[0] + f"-{i}" for i, (_s, m) in enumerate(BAD)])
def test_a_malformed_spec_is_invalid_naming_the_field(spec: Any, message: str):
    obj: dict[str, Any] = machine_type("bad")
    if isinstance(spec, list):
        obj["spec"]["constraints"] = spec
    elif spec is None:
        del obj["spec"]
    else:
        obj["spec"] = spec
    with pytest.raises(Invalid) as refused:
        parse_machine_type(obj)
    assert message in str(refused.value)
    with pytest.raises(Invalid, match=r'^MachineType\.metal3\.io "bad" is invalid: ') as admission:
        admit_machine_type(None, obj, None)  # type: ignore[arg-type]  # the rule reads nothing
    assert message in str(admission.value)


def test_every_problem_is_named_at_once():
    obj = machine_type("bad", {"type": "gpu"}, {"type": "memory", "min": "16Xi"}, {"type": "cores", "min": 8, "max": 4})
    with pytest.raises(Invalid) as refused:
        parse_machine_type(obj)
    assert str(refused.value) == (
        "spec.constraints[0].type: 'gpu' is not one of cores, memory, storage, disks, nics; "
        "spec.constraints[1].min: '16Xi' is not a quantity (a number of bytes, or a number with a suffix such as "
        "16Gi or 500G); spec.constraints[2].max: 4 is below min 8")


OVERLAPPING = [parse_machine_type(machine_type(name, *constraints)) for name, constraints in [
    ("c-at-least-4", [{"type": "cores", "min": 4}]),
    ("b-4-to-8", [{"type": "cores", "min": 4, "max": 8}]),
    ("d-16-or-more", [{"type": "cores", "min": 16}]),
    ("a-16gi", [{"type": "memory", "min": "16Gi"}]),
]]


@pytest.mark.parametrize(("host_obj", "fits", "shown"), [
    (host(cores=8, ram_mib=16384), ["a-16gi", "b-4-to-8", "c-at-least-4"], "a-16gi"),
    (host(cores=16, ram_mib=8192), ["c-at-least-4", "d-16-or-more"], "c-at-least-4"),
    (host(cores=4, ram_mib=8192), ["b-4-to-8", "c-at-least-4"], "b-4-to-8"),
    (host(cores=2, ram_mib=8192), [], ""),
    (host(inspected=False), [], ""),
])
def test_classify_names_every_type_a_host_fits_and_the_column_the_first(host_obj, fits, shown):
    assert classify(OVERLAPPING, host_obj) == fits
    assert host_machine_type(OVERLAPPING, host_obj) == shown


def test_machine_type_has_admission_rules():
    assert ("metal3.io", KIND) in RULED_KINDS
    assert rule_for(API, KIND) is admit_machine_type


# -- the reconcile, on a local store ----------------------------------------------------------------------------


@pytest.fixture
def local(tmp_path) -> Iterator[Store]:
    with LocalStore(str(tmp_path / "store.db")) as opened:
        yield opened


def put_host(store: Store, obj: dict[str, Any]) -> dict[str, Any]:
    """A host as inspection leaves it: created, then its status (status.hardware) written as a controller does."""
    created = store.create({k: v for k, v in obj.items() if k != "status"})
    if "status" in obj:
        created = store.update_status({**created, "status": obj["status"]})
    return created


REF = Ref(API, KIND, "small", NS)


def test_reconcile_writes_the_hosts_that_fit_sorted_and_only_when_they_change(local: Store):
    store = admitted(local)
    for obj in [host("node-b", cores=4), host("node-a", cores=8), host("node-c", cores=2),
                host("node-d", inspected=False)]:
        put_host(store, obj)
    store.create(TYPES["small"])

    step = reconcile_machine_type(store, REF)
    assert (step.changed, step.ready, step.hosts) == (True, True, ["node-a", "node-b"])
    assert step.mismatches == {"node-c": "has 2 cores, small wants 4 to 8", "node-d": NOT_INSPECTED}
    assert step.message == "2 of 4 hosts fit"
    status = store.get(REF)["status"]
    assert (status["hosts"], status["matched"]) == (["node-a", "node-b"], 2)
    [ready] = status["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == (READY_CONDITION, "True", READY_REASON)
    written = store.get(REF)

    again = reconcile_machine_type(store, REF)
    assert not again.changed
    assert store.get(REF)["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]

    # node-c is inspected again with more cores; node-a loses its disk
    node_c = store.get(Ref(API, "BareMetalHost", "node-c", NS))
    store.update_status({**node_c, "status": host("node-c", cores=6)["status"]})
    node_a = store.get(Ref(API, "BareMetalHost", "node-a", NS))
    store.update_status({**node_a, "status": host("node-a", cores=8, disks=[])["status"]})
    assert reconcile_machine_type(store, REF, dry_run=True).hosts == ["node-b", "node-c"]
    assert store.get(REF)["status"]["hosts"] == ["node-a", "node-b"]  # a dry run writes nothing
    step = reconcile_machine_type(store, REF)
    assert step.changed and step.hosts == ["node-b", "node-c"]
    assert store.get(REF)["status"]["hosts"] == ["node-b", "node-c"]
    assert store.get(REF)["status"]["conditions"][0]["lastTransitionTime"] == ready["lastTransitionTime"]


def test_hosts_of_other_namespaces_are_not_matched(local: Store):
    put_host(local, host("here", cores=4))
    put_host(local, {**host("there", cores=4), "metadata": {"name": "there", "namespace": "elsewhere"}})
    admitted(local).create(TYPES["small"])
    assert reconcile_machine_type(local, REF).hosts == ["here"]


def test_a_malformed_type_stored_around_admission_is_not_ready_and_matches_nothing(local: Store):
    put_host(local, host("node", cores=4))
    bad = machine_type("small", {"type": "cores", "min": 8, "max": 4})
    local.create(bad)  # the raw store: as by an older collection, or by hand
    step = reconcile_machine_type(local, REF)
    assert (step.changed, step.ready, step.hosts) == (True, False, [])
    assert step.message == "spec.constraints[0].max: 4 is below min 8"
    status = local.get(REF)["status"]
    assert status["hosts"] == [] and status["matched"] == 0
    [ready] = status["conditions"]
    assert (ready["status"], ready["reason"], ready["message"]) == ("False", INVALID_REASON, step.message)


def test_admission_refuses_a_malformed_type_naming_the_field_and_stores_nothing(local: Store):
    with pytest.raises(Invalid, match=r"spec\.constraints\[1\]\.min: '16Xi' is not a quantity"):
        admitted(local).create(machine_type("small", {"type": "cores", "min": 4}, {"type": "memory", "min": "16Xi"}))
    assert local.get_if_exists(REF) is None
    admitted(local).create(TYPES["small"])
    with pytest.raises(Invalid, match=r"spec\.constraints\[0\]\.max: 2 is below min 4"):
        admitted(local).patch(REF, {"spec": {"constraints": [{"type": "cores", "min": 4, "max": 2}]}})
    assert local.get(REF)["spec"] == TYPES["small"]["spec"]


def test_present_applies_a_definition_and_a_dry_run_shows_what_would_be(local: Store):
    store = admitted(local)
    put_host(store, host("node-a", cores=4))
    put_host(store, host("node-b", cores=2))
    would = machine_type_present(store, TYPES["small"], REF, dry_run=True)
    assert (would.changed, would.hosts) == (True, ["node-a"])
    assert would.diff["before"] == {} and would.diff["after"]["status"]["hosts"] == ["node-a"]
    assert local.get_if_exists(REF) is None

    done = machine_type_present(store, TYPES["small"], REF)
    assert (done.changed, done.hosts) == (True, ["node-a"])
    assert local.get(REF)["status"]["hosts"] == ["node-a"]
    assert not machine_type_present(store, TYPES["small"], REF).changed
    assert not machine_type_present(store, None, REF).changed

    looser = machine_type("small", {"type": "cores", "min": 2})
    would = machine_type_present(store, looser, REF, dry_run=True)
    assert (would.changed, would.hosts) == (True, ["node-a", "node-b"])
    assert local.get(REF)["status"]["hosts"] == ["node-a"]
    done = machine_type_present(store, looser, REF)
    assert done.changed and done.hosts == ["node-a", "node-b"]
    assert done.diff["before"]["status"]["hosts"] == ["node-a"]
    assert done.diff["after"]["status"]["hosts"] == ["node-a", "node-b"]

    assert machine_type_absent(store, REF, dry_run=True).changed
    assert local.get_if_exists(REF) is not None
    assert machine_type_absent(store, REF).changed
    assert local.get_if_exists(REF) is None
    assert not machine_type_absent(store, REF).changed
    assert reconcile_machine_type(store, REF).message == "gone"
    with pytest.raises(NotFound, match="no definition was given"):
        machine_type_present(store, None, REF)
