"""A HostClaim's spec.kind (its class of compute) is fixed once the claim is bound (issue 30, item 3): admission
refuses the change naming spec.kind, on every write path the engine has; a claim not yet bound may change it. A
claim changed past admission (written to the raw store, as on a cluster where no webhook serves HostClaims) is
reported and not served as its new kind, and its release still releases what serves it: the host its consumerRef
names is deprovisioned and freed, the machine it made is deleted."""
from __future__ import annotations

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.hostclaims import hostclaim as hc
from ansible_collections.metal3.baremetal.plugins.module_utils.store.admitted import admitted
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.harness.fixture_machines import FixtureMachines
from tests.unit.module_utils.hostclaims.test_hostclaim import (
    IMAGE,
    INFRA,
    TENANT,
    claim,
    condition,
    host,
    policy,
    set_state,
)

API = "metal3.io/v1alpha1"
SERVER = Ref(API, "BareMetalHost", "server-0", INFRA)
MACHINE = f"{TENANT}.web"
ARGS = {"cpus": "1", "memory": "1Gi", "disk": "4Gi", "nics": "1"}
TO_LIBVIRT = {"spec": {"kind": "libvirt", "args": ARGS}}
TO_BAREMETAL = {"spec": {"kind": "baremetal", "args": None}}


@pytest.fixture
def raw(tmp_path):
    """The store without admission: what a tenant writes on a cluster that serves no HostClaim webhook."""
    with LocalStore(str(tmp_path / "store.db")) as opened:
        yield opened


@pytest.fixture
def machines():
    return FixtureMachines()


def bound_to_a_host(store, machines):
    policy(store, names=[TENANT])
    host(store, "server-0")
    ref = claim(store, "web", image=IMAGE)
    assert hc.reconcile_host_claim(store, ref, machines=machines).host == f"{INFRA}/server-0"
    set_state(store, SERVER, "provisioned", powered_on=True)
    return ref


def bound_to_a_machine(store, machines):
    ref = claim(store, "web", image=IMAGE, kind="libvirt", args=ARGS)
    assert hc.reconcile_host_claim(store, ref, machines=machines).phase == "provisioned"
    assert MACHINE in machines.machines
    return ref


@pytest.mark.parametrize("bind, change, before", [
    (bound_to_a_host, TO_LIBVIRT, "baremetal"),
    (bound_to_a_machine, TO_BAREMETAL, "libvirt"),
])
def test_admission_refuses_changing_the_kind_of_a_bound_claim_naming_spec_kind(raw, machines, bind, change, before):
    ref = bind(raw, machines)
    store = admitted(raw)
    kept = raw.get(ref)
    with pytest.raises(Invalid, match=r"spec\.kind: cannot change from " + before) as refused:
        store.patch(ref, change)
    assert "the claim is bound" in str(refused.value)
    with pytest.raises(Invalid, match=r"spec\.kind: cannot change"):
        spec = {k: v for k, v in {**kept["spec"], **change["spec"]}.items() if v is not None}
        store.update({**kept, "spec": spec})
    assert raw.get(ref) == kept  # nothing changed
    store.patch(ref, {"spec": {"poweredOn": False}})  # any other change of a bound claim is admitted


def test_a_claim_not_yet_bound_may_change_its_kind(raw, machines):
    store = admitted(raw)
    ref = claim(store, "web")  # no policy admits it: it stays pending, bound to nothing
    assert hc.reconcile_host_claim(store, ref, machines=machines).phase == "pending"
    store.patch(ref, TO_LIBVIRT)
    assert store.get(ref)["spec"]["kind"] == "libvirt"
    assert hc.reconcile_host_claim(store, ref, machines=machines).phase == "bound"  # now served as a machine
    assert store.get(ref)["status"]["virtualMachine"]["name"] == MACHINE


def test_a_host_bound_claim_switched_to_libvirt_past_admission_is_not_served_and_its_delete_frees_the_host(
        raw, machines):
    ref = bound_to_a_host(raw, machines)
    raw.patch(ref, TO_LIBVIRT)

    step = hc.reconcile_host_claim(raw, ref, machines=machines)
    assert step.phase == "failed" and step.error.startswith("spec.kind: libvirt - the claim is bound to host ")
    assert machines.writes() == []  # no machine made beside the host it holds
    ready = condition(raw.get(ref), "Ready")
    assert (ready["status"], ready["reason"]) == ("False", hc.KIND_CHANGED)
    assert raw.get(SERVER)["spec"]["consumerRef"]["name"] == "web"

    raw.delete(ref)
    step = hc.reconcile_host_claim(raw, ref, machines=machines)
    assert step.phase == "deleting"  # deprovisioned first, as any bare-metal claim's host
    cleared = raw.get(SERVER)["spec"]
    assert "image" not in cleared and cleared["online"] is False
    set_state(raw, SERVER, "available")
    assert hc.reconcile_host_claim(raw, ref, machines=machines).phase == "deleted"
    assert raw.get_if_exists(ref) is None
    assert "consumerRef" not in raw.get(SERVER)["spec"]  # free for the next claim
    assert machines.writes() == []


def test_a_host_bound_claim_whose_status_was_lost_still_frees_the_host_it_holds(raw, machines):
    """The world, not the status, says what serves the claim: a host whose consumerRef names it."""
    ref = bound_to_a_host(raw, machines)
    raw.patch(ref, TO_LIBVIRT)
    current = raw.get(ref)
    raw.update_status({**current, "status": {}})
    raw.delete(ref)
    hc.reconcile_host_claim(raw, ref, machines=machines)
    set_state(raw, SERVER, "available")
    assert hc.reconcile_host_claim(raw, ref, machines=machines).phase == "deleted"
    assert "consumerRef" not in raw.get(SERVER)["spec"]


def test_a_machine_bound_claim_switched_to_baremetal_past_admission_binds_no_host_and_its_delete_deletes_the_vm(
        raw, machines):
    policy(raw, names=[TENANT])
    host(raw, "server-0")
    ref = bound_to_a_machine(raw, machines)
    raw.patch(ref, TO_BAREMETAL)

    step = hc.reconcile_host_claim(raw, ref, machines=machines)
    assert step.phase == "failed" and step.error.startswith("spec.kind: baremetal - the claim is bound to virtual "
                                                            f"machine {TENANT}/{MACHINE}")
    assert "consumerRef" not in raw.get(SERVER)["spec"]  # no host taken beside the machine it has

    raw.delete(ref)
    assert hc.reconcile_host_claim(raw, ref, machines=machines).phase == "deleted"
    assert machines.machines == {} and ("delete", MACHINE) in machines.writes()
    assert raw.get_if_exists(ref) is None
    assert "consumerRef" not in raw.get(SERVER)["spec"]


def test_a_bare_metal_claim_never_served_by_a_machine_is_released_with_the_hypervisor_down(raw, machines):
    ref = bound_to_a_host(raw, machines)
    machines.down = True
    raw.delete(ref)
    assert hc.reconcile_host_claim(raw, ref, machines=machines).phase == "deleting"
    set_state(raw, SERVER, "available")
    assert hc.reconcile_host_claim(raw, ref, machines=machines).phase == "deleted"
