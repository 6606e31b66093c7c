"""The engine deletes, overwrites or reads back as its own only what it made (issue 12, the confused deputy).

A spec may name any object; someone allowed to write Metal3Data or Metal3Machines but not Secrets must not be
able to make the engine delete or adopt another's Secret. Run on both backends.
"""
from __future__ import annotations

import copy

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import (
    DATA_CLAIM_FINALIZER,
    DATA_FINALIZER,
    HOST_ANNOTATION,
    INFRA_API,
    MACHINE_FINALIZER,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.data import reconcile_data, reconcile_data_claim
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.machine import reconcile_metal3machine
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref, secret_values

SECRET = "v1"


def secret(store, name: str, namespace: str, owner: dict | None = None) -> dict:
    metadata: dict = {"name": name, "namespace": namespace}
    if owner:
        metadata["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                        "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                        "controller": True}]
    return store.create({"apiVersion": SECRET, "kind": "Secret", "metadata": metadata,
                         "stringData": {"password": "victim-password"}})


def metal3data(store, namespace: str, **spec: object) -> dict:
    return store.create({"apiVersion": INFRA_API, "kind": "Metal3Data",
                         "metadata": {"name": "net-0", "namespace": namespace, "finalizers": [DATA_FINALIZER]},
                         "spec": {"index": 0, "template": {"name": "net"}, "claim": {"name": "m"}, **spec}})


def exists(store, kind: str, name: str, namespace: str, api: str = SECRET) -> bool:
    return store.get_if_exists(Ref(api, kind, name, namespace)) is not None


def test_deleting_a_metal3data_leaves_the_secrets_its_spec_names_but_did_not_render(store, namespace):
    secret(store, "victim", namespace)
    data = metal3data(store, namespace, metaData={"name": "victim"}, networkData={"name": "victim"})
    reconcile_data(store, Ref.of(data))
    store.delete(Ref.of(data))
    assert reconcile_data(store, Ref.of(data)).obj is None  # released
    assert not exists(store, "Metal3Data", "net-0", namespace, INFRA_API)
    assert secret_values(store.get(Ref(SECRET, "Secret", "victim", namespace))) == {"password": "victim-password"}


def test_deleting_a_metal3data_deletes_the_secrets_it_rendered(store, namespace):
    data = metal3data(store, namespace, metaData={"name": "m-metadata"}, networkData={"name": "victim"})
    secret(store, "m-metadata", namespace, owner=data)
    secret(store, "victim", namespace)
    store.delete(Ref.of(data))
    reconcile_data(store, Ref.of(data))
    assert not exists(store, "Secret", "m-metadata", namespace)
    assert exists(store, "Secret", "victim", namespace)


def test_deleting_a_claim_leaves_a_metal3data_its_status_names_but_it_does_not_control(store, namespace):
    other = metal3data(store, namespace)
    claim = store.create({"apiVersion": INFRA_API, "kind": "Metal3DataClaim",
                          "metadata": {"name": "intruder", "namespace": namespace,
                                       "finalizers": [DATA_CLAIM_FINALIZER]},
                          "spec": {"template": {"name": "net"}}})
    store.patch_status(Ref.of(claim), {"status": {"renderedData": {"name": "net-0"}}})
    store.delete(Ref.of(claim))
    assert reconcile_data_claim(store, Ref.of(claim)).obj is None
    assert store.get(Ref.of(other))["metadata"].get("deletionTimestamp") is None


def test_deleting_a_metal3machine_leaves_a_data_claim_of_its_name_that_it_did_not_make(store, namespace):
    m3m = store.create({"apiVersion": INFRA_API, "kind": "Metal3Machine",
                        "metadata": {"name": "m", "namespace": namespace, "finalizers": [MACHINE_FINALIZER]},
                        "spec": {}})
    store.create({"apiVersion": INFRA_API, "kind": "Metal3DataClaim", "metadata": {"name": "m", "namespace": namespace},
                  "spec": {"template": {"name": "net"}}})
    store.delete(Ref.of(m3m))
    reconcile_metal3machine(store, Ref.of(m3m))
    assert not exists(store, "Metal3Machine", "m", namespace, INFRA_API)
    assert exists(store, "Metal3DataClaim", "m", namespace, INFRA_API)


@pytest.fixture
def associated(store, namespace):
    """A Metal3Machine associated with a host, its data claim and Metal3Data, ready to render."""
    store.create({"apiVersion": INFRA_API, "kind": "Metal3DataTemplate",  # networkData set: both Secrets rendered
                  "metadata": {"name": "net", "namespace": namespace}, "spec": {"networkData": {}}})
    store.create({"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
                  "metadata": {"name": "h", "namespace": namespace},
                  "spec": {"online": False, "bmc": {"address": "fake://h", "credentialsName": "h-bmc"}}})
    m3m = store.create({"apiVersion": INFRA_API, "kind": "Metal3Machine",
                        "metadata": {"name": "m", "namespace": namespace,
                                     "annotations": {HOST_ANNOTATION: f"{namespace}/h"}}, "spec": {}})
    claim = store.create({"apiVersion": INFRA_API, "kind": "Metal3DataClaim",
                          "metadata": {"name": "m", "namespace": namespace, "ownerReferences": [
                              {"apiVersion": INFRA_API, "kind": "Metal3Machine", "name": "m",
                               "uid": m3m["metadata"]["uid"], "controller": True}]},
                          "spec": {"template": {"name": "net"}}})
    return Ref.of(claim)


def test_rendering_never_adopts_a_secret_of_the_rendered_name_that_it_did_not_make(store, namespace, associated):
    secret(store, "m-metadata", namespace)
    reconcile_data_claim(store, associated)  # makes the Metal3Data
    step = reconcile_data_claim(store, associated)  # renders it
    data = store.get(Ref(INFRA_API, "Metal3Data", "net-0", namespace))
    assert not step.ready
    assert data["status"]["errorMessage"] == (f"Secret {namespace}/m-metadata exists and was not rendered by this "
                                              "Metal3Data; it is left alone")
    assert secret_values(store.get(Ref(SECRET, "Secret", "m-metadata", namespace))) == {"password": "victim-password"}
    assert not exists(store, "Secret", "m-networkdata", namespace)


def test_rendering_writes_secrets_the_data_controls_and_reads_them_back(store, namespace, associated):
    reconcile_data_claim(store, associated)
    assert reconcile_data_claim(store, associated).ready
    data = store.get(Ref(INFRA_API, "Metal3Data", "net-0", namespace))
    for name in ("m-metadata", "m-networkdata"):
        rendered = store.get(Ref(SECRET, "Secret", name, namespace))
        assert [r["uid"] for r in rendered["metadata"]["ownerReferences"] if r.get("controller")] == \
            [data["metadata"]["uid"]]


class CreatedMeanwhile:
    """A store on which, just before this reconcile creates the ``kind`` named ``name``, ``make(store, obj)``
    creates it first: the same object's other reconcile, or a stranger."""

    def __init__(self, store, kind: str, name: str, make) -> None:
        self._store, self._kind, self._name, self._make = store, kind, name, make

    def __getattr__(self, attribute):
        return getattr(self._store, attribute)

    def create(self, obj, **kwargs):
        if (obj["kind"], obj["metadata"]["name"]) == (self._kind, self._name):
            self._make(self._store, obj)
        return self._store.create(obj, **kwargs)


@pytest.mark.parametrize(("owner_of", "ready"), [
    ("net-0", True),  # the same data's other reconcile (claim's and data's run at once in the operator)
    (None, False),  # a stranger's Secret: left alone, as when it was there first
])
def test_rendering_that_races_to_create_a_secret_adopts_only_its_own_datas(
        store, namespace, associated, owner_of, ready):
    reconcile_data_claim(store, associated)  # makes the Metal3Data
    data_ref = Ref(INFRA_API, "Metal3Data", "net-0", namespace)
    owner = store.get(data_ref) if owner_of else None
    raced = CreatedMeanwhile(store, "Secret", "m-metadata", lambda st, obj: secret(st, "m-metadata", namespace, owner))
    step = reconcile_data(raced, data_ref)
    assert step.ready is ready
    data = store.get(Ref(INFRA_API, "Metal3Data", "net-0", namespace))
    if ready:
        assert data["spec"]["metaData"] == {"name": "m-metadata", "namespace": namespace}
    else:
        assert data["status"]["errorMessage"] == (f"Secret {namespace}/m-metadata exists and was not rendered by "
                                                  "this Metal3Data; it is left alone")
    assert secret_values(store.get(Ref(SECRET, "Secret", "m-metadata", namespace))) == {"password": "victim-password"}


def test_a_data_whose_address_claim_its_other_reconcile_made_meanwhile_takes_that_claim(store, namespace, associated):
    store.create({"apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPPool",
                  "metadata": {"name": "pool", "namespace": namespace},
                  "spec": {"namePrefix": "pool", "pools": [{"start": "192.0.2.10", "end": "192.0.2.20"}],
                           "prefix": 24}})
    store.patch(Ref(INFRA_API, "Metal3DataTemplate", "net", namespace), {"spec": {"networkData": {
        "links": {"ethernets": [{"type": "phy", "id": "eth0", "macAddress": {"string": "52:54:00:00:00:01"}}]},
        "networks": {"ipv4": [{"id": "mgmt", "link": "eth0", "ipAddressFromIPPool": "pool"}]}}}})
    reconcile_data_claim(store, associated)  # makes the Metal3Data
    raced = CreatedMeanwhile(store, "IPClaim", "net-0-pool", lambda st, obj: st.create(copy.deepcopy(obj)))
    step = reconcile_data(raced, Ref(INFRA_API, "Metal3Data", "net-0", namespace))
    assert step.ready, step.message
    claims = store.list("ipam.metal3.io/v1alpha1", "IPClaim", namespace)
    assert [c["metadata"]["name"] for c in claims] == ["net-0-pool"]


class WrittenMeanwhile:
    """A store on which, just before this reconcile writes a Metal3DataClaim's status, the claim's other reconcile
    writes it (the same status, so only its resourceVersion moves on)."""

    def __init__(self, store) -> None:
        self._store, self.raced = store, 0

    def __getattr__(self, attribute):
        return getattr(self._store, attribute)

    def update_status(self, obj, **kwargs):
        if obj["kind"] == "Metal3DataClaim" and not self.raced:
            self.raced += 1
            self._store.update_status({**self._store.get(Ref.of(obj)), "status": obj["status"]})
        return self._store.update_status(obj, **kwargs)


def test_a_claims_status_written_meanwhile_by_its_other_reconcile_is_no_failure(store, namespace, associated):
    raced = WrittenMeanwhile(store)
    step = reconcile_data_claim(raced, associated)  # makes the Metal3Data, and names it in the claim's status
    assert raced.raced == 1
    assert step.message == "Metal3Data created"
    assert store.get(associated)["status"] == {"renderedData": {"name": "net-0", "namespace": namespace}}


def test_deleting_a_cluster_api_claim_leaves_an_ip_address_of_its_name_that_it_did_not_make(store, namespace):
    from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import (
        CAPI_CLAIM_FINALIZER,
        CAPI_IPAM_API,
        reconcile_ip_address_claim,
    )

    capi = CAPI_IPAM_API  # the contract's v1beta2
    theirs = store.create({"apiVersion": capi, "kind": "IPAddress", "metadata": {"name": "c", "namespace": namespace},
                           "spec": {"address": "10.0.0.9", "prefix": 24, "claimRef": {"name": "c"},
                                    "poolRef": {"apiGroup": "example.com", "kind": "Pool", "name": "p"}}})
    claim = store.create({"apiVersion": capi, "kind": "IPAddressClaim",
                          "metadata": {"name": "c", "namespace": namespace, "finalizers": [CAPI_CLAIM_FINALIZER]},
                          "spec": {"poolRef": {"apiGroup": "ipam.metal3.io", "kind": "IPPool", "name": "p"}}})
    store.delete(Ref.of(claim))
    reconcile_ip_address_claim(store, Ref.of(claim))
    assert not exists(store, "IPAddressClaim", "c", namespace, capi)
    assert store.get(Ref.of(theirs))["spec"]["address"] == "10.0.0.9"
