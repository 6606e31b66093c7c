"""The compute seam: every class of compute behind one interface, chosen by spec.kind from one registry. A third
class - a toy cloud's instances, defined here - is one ComputeClass and one registry entry; a HostClaim of its
kind is then admitted by its class, bound, configured, shown and released by the same HostClaim flow as bare metal
and libvirt, with the class's driver given to reconcile_host_claim by its kind.

The HostClaim schema (config/crd) lists the kinds served in spec.kind's enum and the status field naming what
serves a claim of each, which every store holds a claim to: a real class adds its kind and its field there (data,
not code; hack/gen-crds.py holds the CRDs to the registry). Here the store's own schema check validates the toy
claims against a deep copy of the engine's loaded HostClaim schema to which the toy kind and its status field
``cloudInstance`` are added, as the class's CRD change would add them: nothing of a toy claim is rewritten."""
from __future__ import annotations

import copy
import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Iterator

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.api import kinds, validation
from ansible_collections.metal3.baremetal.plugins.module_utils.compute import registry
from ansible_collections.metal3.baremetal.plugins.module_utils.compute.baremetal import BareMetal
from ansible_collections.metal3.baremetal.plugins.module_utils.compute.base import (
    READY_CONDITION,
    UNREACHABLE_WAIT,
    Bound,
    ComputeClass,
    Observed,
    Stuck,
    Waiting,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.compute.libvirt import Libvirt
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest, Invalid, Unavailable
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.hostclaims import hostclaim as hc
from ansible_collections.metal3.baremetal.plugins.module_utils.hostclaims.admission import admit_host_claim
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

API = "metal3.io/v1alpha1"
NS = "tenant-a"
TOY = "toycloud"


@dataclass
class ToyCloud:
    """The toy cloud's API: instances by name (their owner and whether they run), every call recorded."""

    instances: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    down: bool = False

    def call(self, what: str, name: str) -> None:
        if self.down:
            raise Unavailable("the toy cloud does not answer")
        self.calls.append((what, name))


class ToyInstances(ComputeClass):
    """Claims served by the toy cloud's instances: one per claim, made once the claim has an image (size from
    spec.args.flavor), powered as poweredOn asks, deleted on release."""

    kind = TOY
    bound_field = "cloudInstance"
    noun = "instance"
    associated_reason = "InstanceAssociated"

    @classmethod
    def admit(cls, spec: dict[str, Any]) -> Iterator[tuple[str, str]]:
        if (spec.get("args") or {}).get("flavor") not in (None, "small", "large"):
            yield "spec.args.flavor", "is not a flavor of the toy cloud (small, large)"

    @property
    def cloud(self) -> ToyCloud:
        driver = self.services.drivers.get(TOY)
        if driver is None:
            raise Invalid(f"spec.kind: {TOY} - this controller has no toy cloud")
        return driver

    @property
    def name(self) -> str:
        return f"{self.claim.ref.namespace}-{self.claim.ref.name}"

    def bind(self, refusals: dict[str, str]) -> Bound:
        self.cloud.call("get", self.name)
        return Bound(self.cloud.instances.get(self.name))

    def configure(self, bound: Bound, refusals: dict[str, str]) -> Observed:
        instance = bound.obj
        if instance is None and self.claim.deploying and not refusals:
            self.cloud.call("create", self.name)
            instance = self.cloud.instances[self.name] = {"owner": self.claim.uid, "running": False}
            self.claim.changed = True
        if instance is not None and instance["running"] != bool(self.claim.spec.get("poweredOn")):
            self.cloud.call("power", self.name)
            instance["running"] = bool(self.claim.spec.get("poweredOn"))
            self.claim.changed = True
        flavor = (self.claim.spec.get("args") or {}).get("flavor", "small")
        host = {"apiVersion": API, "kind": "BareMetalHost",
                "metadata": {"name": self.name, "namespace": self.claim.ref.namespace, "labels": {}},
                "spec": {"bootMACAddress": "02:00:00:00:00:01"},
                "status": {"provisioning": {"state": "provisioned" if instance else "available"},
                           "poweredOn": bool(instance and instance["running"]),
                           "hardware": {"cpu": {"count": 2 if flavor == "small" else 8}, "hostname": self.name,
                                        "nics": [{"name": "eth0", "mac": "02:00:00:00:00:01", "ip": "10.0.0.7"}]}}}
        return Observed(host, refusals, f"instance {self.name} is {'running' if instance else 'not made'}")

    def failure(self, error: Exception) -> Stuck | None:
        if isinstance(error, Unavailable):
            return Stuck("failed", READY_CONDITION, "CloudUnavailable", str(error), UNREACHABLE_WAIT)
        return None

    def may_hold(self) -> bool:
        return self.services.drivers.get(TOY) is not None

    def release(self) -> Waiting | None:
        self.cloud.call("get", self.name)
        instance = self.cloud.instances.get(self.name)
        if instance is not None and instance["owner"] == self.claim.uid:
            self.cloud.call("delete", self.name)
            del self.cloud.instances[self.name]
            self.claim.changed = True
        return None


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A store whose HostClaim schema lists the toy kind in spec.kind's enum and its status field, as a real class's
    CRD would: the engine's loaded schemas (every served version), deep-copied and extended, in the store's
    registry of kinds for this test, with validators built from them (and the engine's own left as they are)."""
    real = kinds.lookup(API, "HostClaim")
    schemas = copy.deepcopy(real.schemas or {})
    for schema in schemas.values():
        assert schema is not None
        schema["properties"]["spec"]["properties"]["kind"]["enum"].append(TOY)
        status = schema["properties"]["status"]["properties"]
        status["cloudInstance"] = copy.deepcopy(status["bareMetalHost"])
    listed = dataclasses.replace(real, schema=schemas[real.storage], schemas=schemas)
    monkeypatch.setitem(kinds._registry(), (real.group, real.kind), listed)
    # The validators are cached by kind (a KindInfo's schema is not part of its identity): fresh caches here.
    monkeypatch.setattr(validation, "_VALIDATORS", {})
    monkeypatch.setattr(validation, "_validator", functools.cache(validation._validator.__wrapped__))
    with LocalStore(str(tmp_path / "store.db")) as opened:
        yield opened


@pytest.fixture
def cloud(monkeypatch):
    """The toy class registered (for this test only), and its driver."""
    monkeypatch.setitem(registry.CLASSES, TOY, ToyInstances)
    return ToyCloud()


def toy_claim(store, name="web", **spec):
    store.create({"apiVersion": API, "kind": "HostClaim", "metadata": {"name": name, "namespace": NS},
                  "spec": {"kind": TOY, "poweredOn": True, **spec}})
    return Ref(API, "HostClaim", name, NS)


def step(store, ref, cloud):
    return hc.reconcile_host_claim(store, ref, drivers={TOY: cloud})


def test_the_registry_holds_bare_metal_and_libvirt_in_order():
    assert list(registry.CLASSES.items()) == [("baremetal", BareMetal), ("libvirt", Libvirt)]
    assert registry.class_for(None) is BareMetal and registry.class_for("kubevirt") is None
    assert registry.served_kinds() == "baremetal, libvirt"


def test_the_stores_schema_check_sees_the_toy_kind_listed_and_still_refuses_what_is_not(store):
    claim = store.get(toy_claim(store))
    assert claim["spec"]["kind"] == TOY
    with pytest.raises(Invalid, match=r"spec\.kind: Unsupported value: 'kubevirt': supported values: \"baremetal\", "
                                      r"\"libvirt\", \"toycloud\""):
        toy_claim(store, "other", kind="kubevirt")
    claim = store.update_status({**claim, "status": {"cloudInstance": {"namespace": NS, "name": "i-1"}}})
    assert claim["status"]["cloudInstance"] == {"namespace": NS, "name": "i-1"}
    with pytest.raises(BadRequest, match=r'unknown field "status\.cloudInstances"'):
        store.update_status({**claim, "status": {"cloudInstances": {"namespace": NS, "name": "i-1"}}})


def test_the_engines_own_schema_lists_only_the_registrys_kinds():
    schema = kinds.lookup(API, "HostClaim").schema
    assert schema is not None
    assert schema["properties"]["spec"]["properties"]["kind"]["enum"] == list(registry.kinds())
    assert "cloudInstance" not in schema["properties"]["status"]["properties"]


def test_a_claim_of_a_registered_class_is_admitted_by_its_class(store, cloud):
    claim = store.get(toy_claim(store, args={"flavor": "large"}))
    admit_host_claim(store, claim, None)
    with pytest.raises(Invalid, match=r"spec\.args\.flavor: is not a flavor of the toy cloud"):
        admit_host_claim(store, {**claim, "spec": {**claim["spec"], "args": {"flavor": "huge"}}}, None)
    bound = {**claim, "status": {"cloudInstance": {"namespace": NS, "name": f"{NS}-web"}}}
    with pytest.raises(Invalid, match=r"spec\.kind: cannot change from toycloud to baremetal: the claim is bound"):
        admit_host_claim(store, {**bound, "spec": {"poweredOn": True}}, bound)


def test_a_claim_of_a_third_class_is_bound_provisioned_shown_and_released_by_the_same_flow(store, cloud):
    ref = toy_claim(store, args={"flavor": "large"})
    result = step(store, ref, cloud)
    assert (result.phase, result.host, result.state) == ("bound", f"{NS}/{NS}-web", "available")
    assert cloud.calls == [("get", f"{NS}-web")]  # no image: nothing made yet

    store.patch(ref, {"spec": {"image": {"url": "http://images/os.qcow2", "checksum": "0" * 64}}})
    result = step(store, ref, cloud)
    assert (result.phase, result.requeue_after, result.error) == ("provisioned", None, "")
    assert cloud.instances[f"{NS}-web"]["running"] is True
    claim = store.get(ref)
    assert claim["status"]["cloudInstance"] == {"namespace": NS, "name": f"{NS}-web"}
    assert {c["type"]: (c["status"], c["reason"]) for c in claim["status"]["conditions"]} == {
        "Associated": ("True", "InstanceAssociated"), "Synchronized": ("True", "ConfigurationSynced"),
        "Provisioned": ("True", "provisioned"), "Ready": ("True", "Ready")}
    assert {"type": "InternalIP", "address": "10.0.0.7"} in claim["status"]["addresses"]
    hardware = store.get(Ref(API, "HardwareData", "web", NS))
    assert hardware["spec"]["hardware"]["cpu"] == {"count": 8}  # what a data template renders from
    assert hc.host_view(store, claim)["metadata"]["name"] == f"{NS}-web"

    store.patch(ref, {"spec": {"poweredOn": False}})
    step(store, ref, cloud)
    assert cloud.instances[f"{NS}-web"]["running"] is False

    store.delete(ref)
    assert step(store, ref, cloud).phase == "deleted"
    assert cloud.instances == {} and ("delete", f"{NS}-web") in cloud.calls
    assert store.get_if_exists(ref) is None
    assert store.get_if_exists(Ref(API, "HardwareData", "web", NS)) is None


def test_a_failure_the_class_reads_as_the_claims_is_shown_on_the_claim(store, cloud):
    ref = toy_claim(store)
    cloud.down = True
    result = step(store, ref, cloud)
    assert (result.phase, result.requeue_after, result.message) == ("failed", UNREACHABLE_WAIT,
                                                                    "the toy cloud does not answer")
    ready = next(c for c in store.get(ref)["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "CloudUnavailable")


def test_a_kind_no_class_serves_is_reported_not_served_as_another(store):
    ref = toy_claim(store)  # not registered here
    result = hc.reconcile_host_claim(store, ref)
    assert (result.phase, result.error) == ("failed", "spec.kind: 'toycloud' is not a class of compute served "
                                                      "here (baremetal, libvirt)")
    claim = store.get(ref)
    assert not claim["metadata"].get("finalizers") and "bareMetalHost" not in claim["status"]
    ready = next(c for c in claim["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", hc.KIND_NOT_SERVED)
