"""The local backend validates as kube-apiserver does: metadata rules, the CRD schema, strict fields."""
from __future__ import annotations

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.api.kinds import KindInfo, lookup
from ansible_collections.metal3.baremetal.plugins.module_utils.api.validation import validate
from ansible_collections.metal3.baremetal.plugins.module_utils.errors import BadRequest, Invalid, UnknownKind

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
