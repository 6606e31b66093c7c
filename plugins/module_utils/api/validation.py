# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Validation of objects as kube-apiserver validates them, for the local backend.

Object metadata follows Kubernetes' rules (names, labels, annotations); the
body follows the kind's CRD schema, with unknown fields refused as kube-apiserver
refuses them under ``fieldValidation=Strict`` (which the Kubernetes backend sets).
"""
from __future__ import annotations

import base64
import binascii
import copy
import re
from functools import cache
from typing import Any, Iterable

from ansible_collections.metal3.baremetal.plugins.module_utils.api.kinds import KindInfo, known_kinds
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest, Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import (
    PATH_SEGMENT_NAMED,
    dns_label_problem,
    name_problem,
    split_api_version,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.selector import (
    validate_label_key,
    validate_labels,
)

try:
    import jsonschema

    JSONSCHEMA_IMPORT_ERROR: ImportError | None = None
except ImportError as e:  # reported by _validator, the first time a schema is to be checked: never skipped
    JSONSCHEMA_IMPORT_ERROR = e

_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_ANNOTATIONS_MAX_BYTES = 256 * 1024


def _to_jsonschema(node: Any, top: bool = False) -> Any:
    """Translate an openAPIV3Schema into JSON Schema with kube-apiserver's meaning."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: _to_jsonschema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not"):
            out[key] = _to_jsonschema(value)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [_to_jsonschema(sub) for sub in value]
        elif key in ("description", "example", "default", "externalDocs", "format", "nullable") \
                or key.startswith("x-kubernetes-"):
            continue
        else:
            out[key] = copy.deepcopy(value)
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if top:
        out.setdefault("properties", {})
        out["properties"].setdefault("apiVersion", {"type": "string"})
        out["properties"].setdefault("kind", {"type": "string"})
        out["properties"]["metadata"] = {"type": "object"}
    is_object = node.get("type") == "object" or top
    if is_object and "additionalProperties" not in node and not node.get("x-kubernetes-preserve-unknown-fields") \
            and ("properties" in node or top):
        out["additionalProperties"] = False  # strict field validation: unknown fields are refused
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


@cache
def _validator(info: KindInfo, version: str) -> Any:
    if JSONSCHEMA_IMPORT_ERROR is not None:
        raise BadRequest(f"{info.qualified_kind}: checking it against its schema needs the Python library "
                         f"'jsonschema' on the controller (pip install jsonschema): {JSONSCHEMA_IMPORT_ERROR}")
    key = (info.qualified_kind, version)
    if key not in _VALIDATORS:
        _VALIDATORS[key] = _Validator(_to_jsonschema(info.schema_for(version), top=True))
    return _VALIDATORS[key]


def build_validators() -> None:
    """Build every known kind's validator now, not on its first use (a process that forks workers builds them
    once for all of them)."""
    for info in known_kinds():
        for version in info.versions:
            if info.schema_for(version) is not None:
                _validator(info, version)


_VALIDATORS: dict[tuple[str, str], Any] = {}
_STRING = {"type": "string"}


def _string_maps(validator: Any, additional: Any, instance: Any, schema: Any) -> Any:
    """additionalProperties, with a map of strings (an IPPool's index of thousands of claims, say) checked at
    C speed: jsonschema's own descends into each value."""
    if additional == _STRING and isinstance(instance, dict) and not schema.get("properties") \
            and not schema.get("patternProperties"):
        for name, value in instance.items():
            if not isinstance(value, str):
                yield jsonschema.ValidationError(f"{value!r} is not of type 'string'", validator="type",
                                                 validator_value="string", instance=value, schema=_STRING,
                                                 path=[name])
        return
    yield from _ADDITIONAL_PROPERTIES(validator, additional, instance, schema)


if JSONSCHEMA_IMPORT_ERROR is None:
    _ADDITIONAL_PROPERTIES = jsonschema.Draft7Validator.VALIDATORS["additionalProperties"]
    _Validator = jsonschema.validators.extend(jsonschema.Draft7Validator, {"additionalProperties": _string_maps})


def _path(parts: Iterable[Any]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _describe(error: Any) -> tuple[str, str]:
    """(field path, what is wrong) of a jsonschema error, in kube-apiserver's words."""
    path = _path(error.absolute_path)
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        field = ".".join(p for p in (path, extra[0] if extra else "") if p)
        return field, "unknown field"
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        return ".".join(p for p in (path, missing) if p), "Required value"
    if error.validator == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        return path, f"Invalid value: {error.instance!r}: must be of type {expected}"
    if error.validator == "enum":
        allowed = ", ".join(f'"{v}"' for v in error.validator_value)
        return path, f"Unsupported value: {error.instance!r}: supported values: {allowed}"
    if error.validator == "pattern":
        return path, f"Invalid value: {error.instance!r}: must match the pattern {error.validator_value!r}"
    return path, f"Invalid value: {error.instance!r}: {error.message}"


def _validate_metadata(info: KindInfo, obj: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    metadata = obj.get("metadata") or {}
    problem = name_problem(metadata.get("name", ""), (info.group, info.kind) in PATH_SEGMENT_NAMED)
    if problem:
        problems.append(f"metadata.name: {problem}")
    namespace = metadata.get("namespace")
    namespace_problem = dns_label_problem(namespace) if namespace is not None else None
    if namespace_problem:
        problems.append(f"metadata.namespace: {namespace_problem}")
    for field, check in (("labels", validate_labels), ("annotations", _validate_annotations)):
        value = metadata.get(field)
        if value is None:
            continue
        if not isinstance(value, dict):
            problems.append(f"metadata.{field}: Invalid value: must be a map of strings")
            continue
        try:
            check(value)
        except BadRequest as e:
            problems.append(f"metadata.{field}: Invalid value: {e}")
    finalizers = metadata.get("finalizers")
    if finalizers is not None and (not isinstance(finalizers, list) or not all(isinstance(v, str) for v in finalizers)):
        problems.append("metadata.finalizers: Invalid value: must be a list of strings")
    for i, ref in enumerate(metadata.get("ownerReferences") or []):
        for required in ("apiVersion", "kind", "name", "uid"):
            if not isinstance(ref, dict) or not ref.get(required):
                problems.append(f"metadata.ownerReferences[{i}].{required}: Required value")
    if info.kind == "Secret" and not info.group:
        problems.extend(_validate_secret_data(obj))
    return problems


def _validate_annotations(annotations: dict[str, Any]) -> None:
    size = 0
    for key, value in annotations.items():
        validate_label_key(key)
        if not isinstance(value, str):
            raise BadRequest(f"annotation {key!r} must be a string, not {type(value).__name__}")
        size += len(key) + len(value)
    if size > _ANNOTATIONS_MAX_BYTES:
        raise BadRequest(f"annotations are {size} bytes, more than the {_ANNOTATIONS_MAX_BYTES} allowed")


def _validate_secret_data(obj: dict[str, Any]) -> list[str]:
    problems = []
    for field in ("data", "stringData"):
        values = obj.get(field) or {}
        if not isinstance(values, dict):
            problems.append(f"{field}: Invalid value: must be a map of strings")
            continue
        for key, value in values.items():
            if not _SECRET_KEY.match(key):
                problems.append(f"{field}[{key}]: Invalid value: a valid config key must consist of "
                                "alphanumeric characters, '-', '_' or '.'")
            elif not isinstance(value, str):
                problems.append(f"{field}[{key}]: Invalid value: must be a string")
            elif field == "data":
                try:
                    base64.b64decode(value, validate=True)
                except (binascii.Error, ValueError):
                    # The value itself is secret: name the key, never show the value.
                    problems.append(f"data[{key}]: Invalid value: not valid base64")
    return problems


def validate(info: KindInfo, obj: dict[str, Any]) -> None:
    """Raise Invalid (or BadRequest for unknown fields) naming each bad field of ``obj``, against the schema of
    the version its apiVersion names (each served version of a CRD has its own)."""
    name = (obj.get("metadata") or {}).get("name", "")
    problems = _validate_metadata(info, obj)
    unknown: list[str] = []
    version = split_api_version(str(obj.get("apiVersion") or ""))[1]
    if info.schema_for(version) is not None:
        for error in sorted(_validator(info, version).iter_errors(obj), key=lambda e: list(e.absolute_path)):
            field, what = _describe(error)
            if what == "unknown field":
                unknown.append(field)
            else:
                problems.append(f"{field}: {what}")
    if unknown:
        # kube-apiserver reports unknown fields under fieldValidation=Strict as a BadRequest.
        raise BadRequest("strict decoding error: " + ", ".join(f'unknown field "{f}"' for f in unknown))
    if problems:
        raise Invalid(f'{info.qualified_kind} "{name}" is invalid: ' + ", ".join(problems))
