"""Machine types (metal-stack's sizes) on both backends: hosts whose status.hardware is written as inspection writes
it, MachineTypes reconciled against them, malformed ones refused by admission, and the machine_type module run by
ansible-playbook."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.machinetypes import (
    API,
    KIND,
    reconcile_machine_type,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from tests.integration.playbook_runs import ansible_playbook

G = 10**9


def hardware(cores: int, ram_mib: int, disks: list[int], nics: int = 2) -> dict[str, Any]:
    """Upstream's HardwareDetails, as the Ironic provisioner writes it into a host's status."""
    return {"systemVendor": {"manufacturer": "QEMU", "productName": "Standard PC"},
            "cpu": {"arch": "x86_64", "model": "QEMU Virtual CPU", "clockMegahertz": 2400.0, "count": cores},
            "ramMebibytes": ram_mib,
            "storage": [{"name": f"/dev/vd{chr(97 + i)}", "sizeBytes": size, "type": "HDD", "rotational": True}
                        for i, size in enumerate(disks)],
            "nics": [{"name": f"eth{i}", "mac": f"52:54:00:00:01:{i:02x}", "ip": "", "speedGbps": 1, "pxe": i == 0}
                     for i in range(nics)],
            "hostname": "localhost"}


def inspected_host(store: Store, name: str, namespace: str, details: dict[str, Any] | None) -> None:
    """A host created, then inspected: its status.hardware written through the status subresource."""
    created = store.create({"apiVersion": API, "kind": "BareMetalHost",
                            "metadata": {"name": name, "namespace": namespace},
                            "spec": {"online": False, "bmc": {"address": "fake://" + name,
                                                              "credentialsName": f"{name}-bmc"}}})
    if details is not None:
        store.update_status({**created, "status": {**(created.get("status") or {}), "hardware": details,
                                                   "operationalStatus": "OK"}})


def machine_type(name: str, namespace: str, *constraints: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": KIND, "metadata": {"name": name, "namespace": namespace},
            "spec": {"constraints": list(constraints)}}


def test_a_machine_type_lists_the_hosts_whose_hardware_fits(store_options, store, namespace):
    inspected_host(store, "node-2", namespace, hardware(8, 32768, [500 * G]))
    inspected_host(store, "node-0", namespace, hardware(4, 16384, [250 * G, 250 * G]))
    inspected_host(store, "node-1", namespace, hardware(2, 8192, [100 * G]))
    inspected_host(store, "node-3", namespace, None)
    inspected_host(store, "node-4", namespace, hardware(16, 65536, [2000 * G], nics=4))
    with open_store(store_options) as admitted:
        admitted.create(machine_type("small", namespace, {"type": "cores", "min": 4, "max": 8},
                                     {"type": "memory", "min": "16Gi", "max": 32 * 2**30},
                                     {"type": "storage", "min": "500G"}))
        admitted.create(machine_type("large", namespace, {"type": "cores", "min": 16},
                                     {"type": "disks", "min": 1, "max": 1}, {"type": "nics", "min": 4}))
    small = Ref(API, KIND, "small", namespace)
    step = reconcile_machine_type(store, small)
    assert (step.changed, step.ready, step.hosts) == (True, True, ["node-0", "node-2"])
    assert step.mismatches["node-1"] == ("has 2 cores, small wants 4 to 8; has 8Gi memory, small wants 16Gi to "
                                         "32Gi; has 100G storage, small wants at least 500G")
    assert step.mismatches["node-3"] == "not inspected: no status.hardware"
    assert step.mismatches["node-4"] == "has 16 cores, small wants 4 to 8; has 64Gi memory, small wants 16Gi to 32Gi"
    stored = store.get(small)
    assert stored["status"]["hosts"] == ["node-0", "node-2"] and stored["status"]["matched"] == 2
    assert [(c["type"], c["status"]) for c in stored["status"]["conditions"]] == [("Ready", "True")]
    assert reconcile_machine_type(store, Ref(API, KIND, "large", namespace)).hosts == ["node-4"]

    # Nothing changed: nothing written.
    assert not reconcile_machine_type(store, small).changed
    assert store.get(small)["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]

    # node-3 is inspected; node-0 loses a disk.
    node_3 = store.get(Ref(API, "BareMetalHost", "node-3", namespace))
    inspected = hardware(6, 24576, [1000 * G])
    store.update_status({**node_3, "status": {**(node_3.get("status") or {}), "hardware": inspected}})
    node_0 = store.get(Ref(API, "BareMetalHost", "node-0", namespace))
    store.update_status({**node_0, "status": {**node_0["status"], "hardware": hardware(4, 16384, [250 * G])}})
    step = reconcile_machine_type(store, small)
    assert step.changed and step.hosts == ["node-2", "node-3"]
    assert store.get(small)["status"]["hosts"] == ["node-2", "node-3"]


@pytest.mark.parametrize(("constraints", "field", "problem"), [
    ([{"type": "cores", "min": 4}, {"type": "memory", "min": "16Xi"}], r"spec\.constraints\[1\]\.min",
     r"'16Xi' is not a quantity"),
    ([{"type": "cores", "min": 8, "max": 4}], r"spec\.constraints\[0\]\.max", "4 is below min 8"),
    ([{"type": "nics", "min": 1}, {"type": "nics", "max": 2}], r"spec\.constraints\[1\]\.type",
     "'nics' is constrained twice"),
    # the CRD's enum refuses it first, as kube-apiserver would, naming the field too
    ([{"type": "gpu", "min": 1}], r"spec\.constraints\[0\]\.type", "gpu"),
    ([], r"spec\.constraints", ""),
])
def test_a_malformed_machine_type_is_refused_naming_the_field_and_nothing_is_stored(
        store_options, store, namespace, constraints, field, problem):
    with open_store(store_options) as admitted, pytest.raises(Invalid, match=f"{field}.*{problem}"):
        admitted.create(machine_type("bad", namespace, *constraints))
    assert store.list(API, KIND, namespace) == []


def test_an_update_that_breaks_a_machine_type_is_refused_and_the_stored_one_kept(store_options, store, namespace):
    with open_store(store_options) as admitted:
        created = admitted.create(machine_type("small", namespace, {"type": "cores", "min": 4}))
        ref = Ref(API, KIND, "small", namespace)
        with pytest.raises(Invalid, match=r"spec\.constraints\[0\]\.max: 16Gi is below min 32Gi"):
            admitted.patch(ref, {"spec": {"constraints": [{"type": "memory", "min": "32Gi", "max": "16Gi"}]}})
        with pytest.raises(Invalid, match=r"spec\.constraints\[0\]\.min: '4 cores' is not a whole number of cores"):
            admitted.update({**created, "spec": {"constraints": [{"type": "cores", "min": "4 cores"}]}})
    assert store.get(ref)["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert store.get(ref)["spec"] == created["spec"]


def test_the_machine_type_module_applies_reconciles_and_deletes(store_options, store, namespace, tmp_path: Path):
    inspected_host(store, "fits", namespace, hardware(4, 16384, [500 * G]))
    inspected_host(store, "too-small", namespace, hardware(2, 16384, [500 * G]))
    results = tmp_path / "results.json"
    run = ansible_playbook("machine_types.yml", {"store": store_options, "ns": namespace, "results": str(results)})
    assert run.ok, run.output
    assert "Traceback" not in run.output
    outcome = json.loads(results.read_text())

    would = outcome["would"]
    assert would["changed"] and would["hosts"] == ["fits"]
    assert would["diff"]["before"] == {} and would["diff"]["after"]["status"]["hosts"] == ["fits"]
    applied = outcome["applied"]
    assert applied["changed"] and applied["hosts"] == ["fits"] and applied["ready"]
    assert applied["mismatches"] == {"too-small": "has 2 cores, small wants 4 to 8"}
    assert applied["machine_type"]["status"]["matched"] == 1
    assert applied["diff"]["after"]["spec"]["constraints"][1] == {"type": "memory", "min": "16Gi",
                                                                  "max": 34359738368}
    assert not outcome["again"]["changed"]
    bad = outcome["bad"]
    assert bad["failed"] and "spec.constraints[1].min: '16Xi' is not a quantity" in bad["msg"]
    assert "internal error" not in bad["msg"]
    assert outcome["other"]["failed"] and "definition: names MachineType" in outcome["other"]["msg"]
    refreshed = outcome["refreshed"]
    assert not refreshed["changed"] and refreshed["hosts"] == ["fits"]
    assert refreshed["machine_type"]["spec"]["constraints"][0] == {"type": "cores", "min": 4, "max": 8}
    assert outcome["removed"]["changed"] and outcome["removed"]["machine_type"] == {}
    assert outcome["gone"]["failed"] and "does not exist and no definition was given" in outcome["gone"]["msg"]
    assert store.list(API, KIND, namespace) == []
