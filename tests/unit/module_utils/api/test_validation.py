"""The local backend validates as kube-apiserver does: metadata rules, the CRD schema, strict fields."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.api import validation
from ansible_collections.metal3.baremetal.plugins.module_utils.api.kinds import KindInfo, known_kinds, lookup
from ansible_collections.metal3.baremetal.plugins.module_utils.api.validation import validate
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest, Invalid, UnknownKind

SCHEMA = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 1},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "port": {"x-kubernetes-int-or-string": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "note": {"type": "string", "nullable": True},
            },
        },
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    },
}
WIDGET = KindInfo("example.com", "Widget", "widgets", ("v1",), True, True, SCHEMA)


def widget(**spec: object) -> dict:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 1, **spec}}


VALID = [
    widget(),
    widget(mode="a", port=8080, labels={"x": "y"}, free={"any": {"thing": [1]}}, items=[{"name": "n"}]),
    widget(port="http"),
    widget(note=None),
]


@pytest.mark.parametrize("obj", VALID)
def test_valid_objects_pass(obj):
    validate(WIDGET, obj)


INVALID = [
    (widget(size="big"), r"spec\.size: Invalid value: 'big': must be of type integer"),
    (widget(size=0), r"spec\.size: Invalid value: 0"),
    (widget(mode="c"), r'spec\.mode: Unsupported value: \'c\': supported values: "a", "b"'),
    ({**widget(), "spec": {}}, r"spec\.size: Required value"),
    (widget(items=[{"name": 5}]), r"spec\.items\[0\]\.name: Invalid value: 5"),
    (widget(port=1.5), r"spec\.port"),
    (widget(labels={"x": 1}), r"spec\.labels\.x"),
    ({**widget(), "metadata": {"name": "Bad_Name"}}, r"metadata\.name: Invalid value: 'Bad_Name'"),
    ({**widget(), "metadata": {}}, r"metadata\.name: Required value"),
    ({**widget(), "metadata": {"name": "w", "namespace": "Not.A.Label"}}, r"metadata\.namespace"),
    ({**widget(), "metadata": {"name": "w", "labels": {"-bad": "x"}}}, r"metadata\.labels"),
    ({**widget(), "metadata": {"name": "w", "labels": {"k": 1}}}, r"metadata\.labels"),
    ({**widget(), "metadata": {"name": "w", "annotations": {"k": 1}}}, r"metadata\.annotations"),
    ({**widget(), "metadata": {"name": "w", "ownerReferences": [{"kind": "X"}]}},
     r"metadata\.ownerReferences\[0\]\.apiVersion: Required value"),
]


@pytest.mark.parametrize(("obj", "message"), INVALID)
def test_invalid_objects_name_the_field(obj, message):
    with pytest.raises(Invalid, match=message) as raised:
        validate(WIDGET, obj)
    assert str(raised.value).startswith('Widget.example.com "')


UNKNOWN_FIELDS = [
    (widget(colour="blue"), 'unknown field "spec.colour"'),
    (widget(items=[{"name": "n", "extra": 1}]), 'unknown field "spec.items[0].extra"'),
    ({**widget(), "extra": 1}, 'unknown field "extra"'),
    ({**widget(), "status": {"ready": True, "phase": "x"}}, 'unknown field "status.phase"'),
]


@pytest.mark.parametrize(("obj", "message"), UNKNOWN_FIELDS)
def test_unknown_fields_are_refused_as_strict_field_validation_refuses_them(obj, message):
    with pytest.raises(BadRequest, match="strict decoding error") as raised:
        validate(WIDGET, obj)
    assert message in str(raised.value)


SECRET = lookup("v1", "Secret")


def test_secret_data_must_be_base64_and_the_value_is_never_shown():
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"password": "hunter2!"}}
    with pytest.raises(Invalid, match=r"data\[password\]: Invalid value: not valid base64") as raised:
        validate(SECRET, secret)
    assert "hunter2" not in str(raised.value)


def test_kinds_owned_by_others_are_stored_as_given():
    machine = lookup("cluster.x-k8s.io/v1beta1", "Machine")
    assert machine.schema is None
    validate(machine, {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine", "metadata": {"name": "m"},
                       "spec": {"anything": {"goes": True}}})


@pytest.mark.parametrize(("api_version", "kind"), [("example.com/v1", "Widget"), ("v2", "Secret"),
                                                   ("metal3.io/v9", "BareMetalHost")])
def test_unknown_kinds_and_versions_are_refused(api_version, kind):
    with pytest.raises(UnknownKind, match=repr(kind)):
        lookup(api_version, kind)


# Each served version of a CRD has its own schema: v2 of this one renames spec.size to spec.count.
SCHEMA_V2 = {**SCHEMA, "properties": {**SCHEMA["properties"], "spec": {
    "type": "object", "required": ["count"], "properties": {"count": {"type": "integer", "minimum": 1}}}}}
TWO_VERSIONS = KindInfo("example.com", "Widget", "widgets", ("v1", "v2"), True, True, SCHEMA_V2,
                        {"v1": SCHEMA, "v2": SCHEMA_V2}, "v2")


def test_an_object_is_validated_against_the_schema_of_its_own_version():
    validate(TWO_VERSIONS, widget())
    validate(TWO_VERSIONS, {**widget(), "apiVersion": "example.com/v2", "spec": {"count": 2}})
    with pytest.raises(BadRequest, match='unknown field "spec.size"'):
        validate(TWO_VERSIONS, {**widget(), "apiVersion": "example.com/v2", "spec": {"count": 2, "size": 1}})
    with pytest.raises(Invalid, match=r"spec\.size: Required value"):
        validate(TWO_VERSIONS, {**widget(), "spec": {}})


# (version, kind, path of a field only that version has)
CAPM3_VERSION_FIELDS = [
    ("v1beta1", "Metal3Cluster", ["spec", "noCloudProvider"]),
    ("v1beta1", "Metal3DataTemplate", ["spec", "templateReference"]),
    ("v1beta1", "Metal3Machine", ["status", "ready"]),
    ("v1beta2", "Metal3Machine", ["status", "initialization"]),
    ("v1beta2", "Metal3Machine", ["status", "deprecated"]),
    ("v1beta2", "Metal3DataTemplate", ["spec", "metaData", "ipAddressesFromPool"]),
]


def has(schema: dict, path: list[str]) -> bool:
    for key in path:
        schema = (schema.get("properties") or {}).get(key)
        if schema is None:
            return False
    return True


@pytest.mark.parametrize(("version", "kind", "path"), CAPM3_VERSION_FIELDS)
def test_capm3_kinds_serve_both_versions_each_with_its_fields_and_store_v1beta2(version, kind, path):
    info = lookup(f"infrastructure.cluster.x-k8s.io/{version}", kind)
    assert info.versions == ("v1beta2", "v1beta1") and info.storage == "v1beta2"
    assert info.schema is info.schemas["v1beta2"]
    other = "v1beta2" if version == "v1beta1" else "v1beta1"
    assert has(info.schema_for(version), path) and not has(info.schema_for(other), path)


# A library the engine needs, missing on the controller: the import is blocked in a fresh interpreter, and the
# first use fails naming the library and how to install it - never a write with its schema unchecked.
MISSING_LIBRARY = [
    ("jsonschema", """
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
store = LocalStore(sys.argv[1])
store.create({"apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPPool",
              "metadata": {"name": "p", "namespace": "ns"}, "spec": {"namePrefix": "p"}})
"""),
    ("kubernetes", """
from ansible_collections.metal3.baremetal.plugins.module_utils.store.kube import KubernetesStore
KubernetesStore(host="https://127.0.0.1:1")
"""),
]


@pytest.mark.parametrize(("library", "code"), MISSING_LIBRARY, ids=[library for library, _code in MISSING_LIBRARY])
def test_a_missing_library_fails_loudly_naming_it(library, code, tmp_path):
    script = f"""
import sys
sys.modules[{library!r}] = None  # import {library} raises ImportError
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest
try:
{textwrap.indent(code.strip(), "    ")}
except BadRequest as e:
    print(e)
    sys.exit(3)
"""
    run = subprocess.run([sys.executable, "-c", script, str(tmp_path / "store.db")], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, check=False)
    assert run.returncode == 3, run.stdout + run.stderr
    assert f"needs the Python library '{library}' on the controller (pip install {library})" in run.stdout
    assert f"import of {library} halted" in run.stdout  # the import error itself


def test_every_kinds_validators_can_be_built_ahead_of_use():
    """What the operator's prefork server does once, so that no task's worker builds one."""
    validation.build_validators()
    expected = {(info.qualified_kind, version) for info in known_kinds() for version in info.versions
                if info.schema_for(version) is not None}
    assert expected <= set(validation._VALIDATORS)
    assert ("IPPool.ipam.metal3.io", "v1alpha1") in expected
