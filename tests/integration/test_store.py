"""The store's contract, run against both backends: the local SQLite file and a real kube-apiserver.

Each test runs twice (see the ``backend`` fixture); what passes on one and fails on the other is a bug.
"""
from __future__ import annotations

import base64
import copy

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Invalid,
    NotFound,
    UnknownKind,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from tests.conftest import eventually

POOL_API = "ipam.metal3.io/v1alpha1"


def pool(name: str, namespace: str, labels: dict[str, str] | None = None, **spec: object) -> dict:
    return {
        "apiVersion": POOL_API,
        "kind": "IPPool",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"namePrefix": name, "pools": [{"start": "192.168.0.10", "end": "192.168.0.20"}], "prefix": 24,
                 **spec},
    }


def config_map(name: str, namespace: str, **metadata: object) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace, **metadata},
            "data": {"key": "value"}}


def test_create_sets_server_fields_and_get_returns_the_object(store, namespace):
    created = store.create(pool("p1", namespace))
    meta = created["metadata"]
    assert meta["uid"] and meta["resourceVersion"] and meta["creationTimestamp"]
    assert meta["generation"] == 1
    got = store.get(Ref(POOL_API, "IPPool", "p1", namespace))
    assert got["spec"] == created["spec"]
    assert got["metadata"]["uid"] == meta["uid"]


def test_create_on_a_taken_name_is_already_exists(store, namespace):
    store.create(pool("p1", namespace))
    with pytest.raises(AlreadyExists, match='"p1" already exists'):
        store.create(pool("p1", namespace))


def test_get_of_a_missing_object_is_not_found(store, namespace):
    with pytest.raises(NotFound, match='"nothing" not found'):
        store.get(Ref(POOL_API, "IPPool", "nothing", namespace))


def test_get_if_exists_is_none_for_a_missing_object(store, namespace):
    assert store.get_if_exists(Ref(POOL_API, "IPPool", "absent", namespace)) is None
    store.create(pool("present", namespace))
    assert store.get_if_exists(Ref(POOL_API, "IPPool", "present", namespace))["metadata"]["name"] == "present"


def test_create_drops_status_of_a_kind_with_a_status_subresource(store, namespace):
    obj = pool("p1", namespace)
    obj["status"] = {"allocations": {"a": "192.168.0.10"}}
    assert "allocations" not in (store.create(obj).get("status") or {})


SELECTOR_CASES = [
    ("rack=a", ["h1", "h2"]),
    ("rack==a", ["h1", "h2"]),
    ("rack!=a", ["h3", "h4"]),
    ("rack in (a,b)", ["h1", "h2", "h3"]),
    ("rack notin (a,b)", ["h4"]),
    ("role", ["h1", "h3"]),
    ("!role", ["h2", "h4"]),
    ("rack=a,role=worker", ["h1"]),
    ("rack in (a, b), !role", ["h2"]),
    (["rack=a", "role"], ["h1"]),
    ("", ["h1", "h2", "h3", "h4"]),
]


@pytest.mark.parametrize(("selector", "expected"), SELECTOR_CASES, ids=[str(c[0]) for c in SELECTOR_CASES])
def test_list_by_label_selector(store, namespace, selector, expected):
    labels = {"h1": {"rack": "a", "role": "worker"}, "h2": {"rack": "a"}, "h3": {"rack": "b", "role": "cp"}, "h4": {}}
    for name, host_labels in labels.items():
        store.create(config_map(name, namespace, labels=host_labels))
    found = store.list("v1", "ConfigMap", namespace, selector)
    assert [o["metadata"]["name"] for o in found if o["metadata"]["name"] in labels] == expected


def test_list_is_scoped_to_the_namespace(store, namespace):
    store.create(pool("p1", namespace))
    assert [o["metadata"]["name"] for o in store.list(POOL_API, "IPPool", namespace)] == ["p1"]
    assert all(o["kind"] == "IPPool" and o["apiVersion"] == POOL_API for o in store.list(POOL_API, "IPPool", namespace))


def test_an_invalid_label_selector_is_a_bad_request_naming_it(store, namespace):
    with pytest.raises(BadRequest, match="invalid label selector 'rack in a'"):
        store.list("v1", "ConfigMap", namespace, "rack in a")


def test_update_with_a_stale_resource_version_is_a_conflict(store, namespace):
    first = store.create(pool("p1", namespace))
    second = copy.deepcopy(first)
    first["spec"]["prefix"] = 25
    updated = store.update(first)
    assert updated["metadata"]["resourceVersion"] != second["metadata"]["resourceVersion"]
    second["spec"]["prefix"] = 26
    with pytest.raises(Conflict, match="the object has been modified"):
        store.update(second)
    assert store.get(Ref.of(first))["spec"]["prefix"] == 25


def test_update_bumps_generation_only_when_the_spec_changes(store, namespace):
    created = store.create(pool("p1", namespace))
    created["metadata"]["labels"] = {"new": "label"}
    relabelled = store.update(created)
    assert relabelled["metadata"]["generation"] == 1
    relabelled["spec"]["prefix"] = 25
    assert store.update(relabelled)["metadata"]["generation"] == 2


def test_an_unchanged_update_keeps_the_resource_version(store, namespace):
    created = store.create(pool("p1", namespace))
    assert store.update(copy.deepcopy(created))["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_update_leaves_status_alone_and_update_status_leaves_spec_alone(store, namespace):
    created = store.create(pool("p1", namespace))
    created["status"] = {"allocations": {"c1": "192.168.0.10"}}
    with_status = store.update_status(created)
    assert with_status["status"]["allocations"] == {"c1": "192.168.0.10"}
    assert with_status["metadata"]["generation"] == 1

    with_status["spec"]["prefix"] = 25
    with_status["status"] = {"allocations": {}}
    updated = store.update(with_status)
    assert updated["spec"]["prefix"] == 25
    assert updated["status"]["allocations"] == {"c1": "192.168.0.10"}

    updated["spec"]["prefix"] = 30
    updated["status"]["allocations"]["c2"] = "192.168.0.11"
    status_only = store.update_status(updated)
    assert status_only["spec"]["prefix"] == 25
    assert status_only["status"]["allocations"] == {"c1": "192.168.0.10", "c2": "192.168.0.11"}


def test_update_status_with_a_stale_resource_version_is_a_conflict(store, namespace):
    created = store.create(pool("p1", namespace))
    store.update_status({**created, "status": {"allocations": {"a": "192.168.0.10"}}})
    with pytest.raises(Conflict):
        store.update_status({**created, "status": {"allocations": {"b": "192.168.0.11"}}})


def test_merge_patch_adds_replaces_and_removes(store, namespace):
    store.create(pool("p1", namespace, labels={"a": "1", "b": "2"}, gateway="192.168.0.1"))
    ref = Ref(POOL_API, "IPPool", "p1", namespace)
    patched = store.patch(ref, {"metadata": {"labels": {"a": None, "c": "3"}}, "spec": {"gateway": None, "prefix": 25}})
    assert patched["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert "gateway" not in patched["spec"]
    assert patched["spec"]["prefix"] == 25
    assert patched["spec"]["namePrefix"] == "p1"


def test_merge_patch_with_a_stale_resource_version_is_a_conflict(store, namespace):
    created = store.create(pool("p1", namespace))
    ref = Ref.of(created)
    store.patch(ref, {"spec": {"prefix": 25}})
    with pytest.raises(Conflict):
        store.patch(ref, {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
                          "spec": {"prefix": 26}})


def test_patch_status(store, namespace):
    created = store.create(pool("p1", namespace))
    patched = store.patch_status(Ref.of(created), {"status": {"allocations": {"a": "192.168.0.10"}}})
    assert patched["status"]["allocations"] == {"a": "192.168.0.10"}
    assert patched["metadata"]["generation"] == 1


def test_delete_without_finalizers_removes(store, namespace):
    created = store.create(pool("p1", namespace))
    assert store.delete(Ref.of(created)) is None
    with pytest.raises(NotFound):
        store.get(Ref.of(created))
    with pytest.raises(NotFound):
        store.delete(Ref.of(created))


def test_delete_with_finalizers_keeps_the_object_until_they_are_removed(store, namespace):
    obj = pool("p1", namespace)
    obj["metadata"]["finalizers"] = ["ipam.metal3.io/test"]
    created = store.create(obj)
    kept = store.delete(Ref.of(created))
    assert kept is not None and kept["metadata"]["deletionTimestamp"]
    current = store.get(Ref.of(created))
    assert current["metadata"]["deletionTimestamp"]
    current["metadata"]["finalizers"].append("another/finalizer")
    with pytest.raises(Invalid, match="finalizers"):
        store.update(copy.deepcopy(current))
    current["metadata"]["finalizers"] = []
    store.update(current)
    with pytest.raises(NotFound):
        store.get(Ref.of(created))


def test_dependents_are_deleted_in_cascade_once_their_owner_is_gone(store, namespace):
    owner = store.create(config_map("owner", namespace))
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    store.create(config_map("dependent", namespace, ownerReferences=[reference]))
    store.create(config_map("bystander", namespace))
    store.delete(Ref.of(owner))

    def dependent_gone() -> bool:
        names = [o["metadata"]["name"] for o in store.list("v1", "ConfigMap", namespace)]
        return "dependent" not in names

    assert eventually(dependent_gone), "the dependent outlived its owner"
    assert store.get(Ref("v1", "ConfigMap", "bystander", namespace))


def test_secret_string_data_is_stored_as_base64_data(store, namespace):
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bmc", "namespace": namespace},
              "type": "Opaque", "stringData": {"username": "admin", "password": "s3cret"}}
    stored = store.create(secret)
    assert "stringData" not in stored
    assert base64.b64decode(stored["data"]["password"]) == b"s3cret"


def test_a_schema_violation_is_invalid_and_names_the_field(store, namespace):
    obj = pool("p1", namespace)
    obj["spec"]["prefix"] = "twenty-four"
    with pytest.raises(Invalid, match=r"spec\.prefix"):
        store.create(obj)
    with pytest.raises(NotFound):
        store.get(Ref.of(obj))


def test_an_unknown_field_is_refused_and_named(store, namespace):
    obj = pool("p1", namespace)
    obj["spec"]["colour"] = "blue"
    with pytest.raises(BadRequest, match=r'unknown field "spec\.colour"'):
        store.create(obj)


def test_an_unknown_kind_is_refused(store, namespace):
    with pytest.raises(UnknownKind, match="Widget"):
        store.create({"apiVersion": "example.com/v1", "kind": "Widget",
                      "metadata": {"name": "w", "namespace": namespace}})


def test_an_invalid_name_is_invalid(store, namespace):
    with pytest.raises(Invalid, match="metadata.name"):
        store.create(config_map("Not_A_Name", namespace))


def test_dry_run_validates_but_writes_nothing(store, namespace):
    result = store.create(pool("p1", namespace), dry_run=True)
    assert result["metadata"]["name"] == "p1"
    with pytest.raises(NotFound):
        store.get(Ref(POOL_API, "IPPool", "p1", namespace))
    created = store.create(pool("p1", namespace))
    store.patch(Ref.of(created), {"spec": {"prefix": 25}}, dry_run=True)
    assert store.delete(Ref.of(created), dry_run=True) is None
    assert store.get(Ref.of(created))["spec"]["prefix"] == 24


# -- versions: a CRD's objects are stored at its storage version and served at each version it serves ------------

INFRA_V1 = "infrastructure.cluster.x-k8s.io/v1beta1"
INFRA_V2 = "infrastructure.cluster.x-k8s.io/v1beta2"


def machine(api_version: str, name: str, namespace: str, image: dict) -> dict:
    return {"apiVersion": api_version, "kind": "Metal3Machine", "metadata": {"name": name, "namespace": namespace},
            "spec": {"image": {"url": "http://images/os.img", **image}}}


def test_an_object_is_served_at_every_version_of_its_kind(store, namespace):
    created = store.create(machine(INFRA_V1, "m1", namespace, {"format": "qcow2"}))
    assert created["apiVersion"] == INFRA_V1 and created["spec"]["image"]["format"] == "qcow2"
    at_v2 = store.get(Ref(INFRA_V2, "Metal3Machine", "m1", namespace))
    assert at_v2["apiVersion"] == INFRA_V2 and at_v2["spec"]["image"] == {"url": "http://images/os.img",
                                                                          "diskFormat": "qcow2"}
    assert at_v2["metadata"]["uid"] == created["metadata"]["uid"]
    store.create(machine(INFRA_V2, "m2", namespace, {"diskFormat": "raw"}))
    assert [(m["metadata"]["name"], m["spec"]["image"]["format"])
            for m in store.list(INFRA_V1, "Metal3Machine", namespace)] == [("m1", "qcow2"), ("m2", "raw")]
    assert store.delete(Ref(INFRA_V2, "Metal3Machine", "m1", namespace)) is None
    assert store.get_if_exists(Ref(INFRA_V1, "Metal3Machine", "m1", namespace)) is None


def test_versions_share_one_resource_version_and_generation(store, namespace):
    created = store.create(machine(INFRA_V1, "m1", namespace, {"format": "qcow2"}))
    unchanged = store.update(copy.deepcopy(created))
    assert unchanged["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    at_v2 = store.get(Ref(INFRA_V2, "Metal3Machine", "m1", namespace))
    assert at_v2["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    at_v2["spec"]["image"]["diskFormat"] = "raw"
    changed = store.update(at_v2)
    assert changed["metadata"]["generation"] == 2
    with pytest.raises(Conflict):
        store.update(created)  # read before the change, at the other version
    stale = store.get(Ref(INFRA_V1, "Metal3Machine", "m1", namespace))
    assert stale["spec"]["image"]["format"] == "raw" and stale["metadata"]["generation"] == 2


def test_a_bad_field_is_named_in_the_words_of_the_version_written(store, namespace):
    with pytest.raises(BadRequest, match=r'unknown field "spec\.image\.diskFormat"'):
        store.create(machine(INFRA_V1, "m1", namespace, {"diskFormat": "raw"}))
    with pytest.raises(Invalid, match=r"spec\.image\.format"):
        store.create(machine(INFRA_V1, "m1", namespace, {"format": "zip"}))
    with pytest.raises(BadRequest, match=r'unknown field "spec\.image\.format"'):
        store.create(machine(INFRA_V2, "m1", namespace, {"format": "raw"}))
