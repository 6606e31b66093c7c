# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Kubernetes object conventions shared by both store backends."""
from __future__ import annotations

import base64
import copy
import datetime
import json
import re
from dataclasses import dataclass
from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest, Invalid

Object = dict[str, Any]

# Fields the server owns; they never make a difference between what a user
# asked for and what is stored.
SERVER_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
                   "managedFields", "selfLink", "deletionGracePeriodSeconds")


@dataclass(frozen=True)
class Ref:
    """Names one object: its apiVersion, kind, namespace and name."""

    api_version: str
    kind: str
    name: str
    namespace: str = "default"

    @classmethod
    def of(cls, obj: Object, default_namespace: str = "default") -> Ref:
        metadata = obj.get("metadata") or {}
        return cls(obj.get("apiVersion", ""), obj.get("kind", ""), metadata.get("name", ""),
                   metadata.get("namespace") or default_namespace)

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
SUBDOMAIN_RULE = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                  "and must start and end with an alphanumeric character")
LABEL_RULE = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
              "start and end with an alphanumeric character")
# Kinds whose names kube-apiserver only requires to be a valid path segment (RBAC's "system:..." names).
PATH_SEGMENT_NAMED = {("rbac.authorization.k8s.io", kind)
                      for kind in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")}


# The cluster-scoped kinds the engine addresses (a workload cluster's Nodes: capm3/workload.py), by (group, kind).
CLUSTER_SCOPED = {("", "Node")}


def name_problem(name: object, path_segment: bool = False) -> str | None:
    """What is wrong with ``name`` as an object name, or None when it is a valid one."""
    if not isinstance(name, str) or not name:
        return "Required value: name is required"
    if path_segment:
        if name in (".", "..") or "/" in name or "%" in name:
            return f"Invalid value: {name!r}: may not be '.' or '..' and may not contain '/' or '%'"
        return None
    if len(name) > 253 or not DNS_SUBDOMAIN.match(name):
        return f"Invalid value: {name!r}: {SUBDOMAIN_RULE}"
    return None


def dns_label_problem(value: object) -> str | None:
    """What is wrong with ``value`` as an RFC 1123 label (a namespace name), or None when it is one."""
    if not isinstance(value, str) or len(value) > 63 or not DNS_LABEL.match(value):
        return f"Invalid value: {value!r}: {LABEL_RULE}"
    return None


def check_name(name: object, field: str, kind: str = "", api_version: str = "") -> str:
    """``name`` when it is a valid object name; Invalid naming ``field`` otherwise.

    Every name that reaches a store passes here before any request is built: the Kubernetes client puts names
    into URL paths, where '../..' would reach another namespace's objects.
    """
    problem = name_problem(name, (split_api_version(api_version)[0], kind) in PATH_SEGMENT_NAMED)
    if problem:
        raise Invalid(f"{field}: {problem}")
    return str(name)


def check_namespace(namespace: object, field: str) -> str:
    """``namespace`` when it is a valid namespace name; Invalid naming ``field`` otherwise."""
    problem = dns_label_problem(namespace)
    if problem:
        raise Invalid(f"{field}: {problem}")
    return str(namespace)


def checked_ref(obj: Object) -> Ref:
    """The Ref of an object about to be written, its metadata.name and metadata.namespace checked and named."""
    ref = Ref.of(obj)
    check_name(ref.name, "metadata.name", ref.kind, ref.api_version)
    check_namespace(ref.namespace, "metadata.namespace")
    return ref


def check_ref(ref: Ref) -> Ref:
    """``ref`` when its name and namespace are valid; Invalid naming the kind otherwise. A cluster-scoped kind
    (CLUSTER_SCOPED) has the namespace ''."""
    check_name(ref.name, f"{ref.kind} name", ref.kind, ref.api_version)
    if not (ref.namespace == "" and (split_api_version(ref.api_version)[0], ref.kind) in CLUSTER_SCOPED):
        check_namespace(ref.namespace, f"{ref.kind} namespace")
    return ref


def split_api_version(api_version: str) -> tuple[str, str]:
    """'ipam.metal3.io/v1alpha1' → ('ipam.metal3.io', 'v1alpha1'); 'v1' → ('', 'v1')."""
    group, _slash, version = api_version.rpartition("/")
    return group, version


def split_reference(reference: str, namespace: str) -> tuple[str, str]:
    """``<namespace>/<name>`` (the form of the host and HostClaim annotations and of a module's host names) as
    (namespace, name); a bare name is in ``namespace``."""
    given, _slash, name = reference.rpartition("/")
    return given or namespace, name


def rfc3339(moment: datetime.datetime) -> str:
    """A moment as Kubernetes writes timestamps: UTC, whole seconds, ``Z``."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now() -> str:
    return rfc3339(datetime.datetime.now(datetime.UTC))


def parse_time(value: Any) -> datetime.datetime:
    """An RFC 3339 timestamp as upstream writes them (``2024-05-01T10:00:00Z``), as an aware datetime."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"not a timestamp: {value!r}")
    parsed = datetime.datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def clone(obj: Any) -> Any:
    """A deep copy of an API object: through JSON, several times faster than ``copy.deepcopy`` on the large
    ones (a pool's index); an object that is not plain JSON data is copied the slow way."""
    try:
        return json.loads(json.dumps(obj))
    except (TypeError, ValueError):
        return copy.deepcopy(obj)


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply a JSON merge patch (RFC 7386) and return the result; ``target`` is not modified."""
    return merge_patch_into(clone(target), patch)


def merge_patch_into(target: Any, patch: Any) -> Any:
    """Apply a JSON merge patch to ``target`` itself (a dict), and return the result."""
    if not isinstance(patch, dict):
        return clone(patch)
    result = target if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch_into(result.get(key), value)
    return result


def without_server_fields(obj: Object) -> Object:
    """A copy of ``obj`` without the metadata the server sets, for comparing intent with state."""
    result = copy.deepcopy(obj)
    metadata = result.get("metadata") or {}
    for field in SERVER_METADATA:
        metadata.pop(field, None)
    return result


def owner_uids(obj: Object) -> list[str]:
    return [ref["uid"] for ref in (obj.get("metadata") or {}).get("ownerReferences") or [] if ref.get("uid")]


# etcd's default request limit, which kube-apiserver's writes must fit in: the local store holds objects to it too,
# so what one backend accepts the other does.
MAX_OBJECT_BYTES = 1572864


def check_size(obj: Object, encoded: str | None = None) -> None:
    """BadRequest when ``obj`` (``encoded``, when the caller has it already) is larger than a Kubernetes API
    server stores."""
    size = len(encoded if encoded is not None else json.dumps(obj, separators=(",", ":")))
    if size > MAX_OBJECT_BYTES:
        raise BadRequest(f"{Ref.of(obj)}: Request entity too large: the object is {size} bytes, more than the "
                         f"{MAX_OBJECT_BYTES} bytes (1.5 MiB) a Kubernetes API server stores")


def owner_reference(owner: Object, controller: bool = False) -> dict[str, Any]:
    """An ownerReference to ``owner``; ``controller``: as its controller, blocking its deletion until this goes."""
    ref: dict[str, Any] = {"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                           "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}
    if controller:
        ref.update(controller=True, blockOwnerDeletion=True)
    return ref


def controlled_by(obj: Object | None, owner: Object) -> bool:
    """Whether ``owner`` is the controller of ``obj`` (a controller ownerReference with its uid).

    The engine deletes, overwrites or reads back as its own only what it made: an object a spec merely names
    may be anyone's (a tenant naming another's Secret must not make the engine delete it).
    """
    uid = (owner.get("metadata") or {}).get("uid")
    return bool(obj and uid) and any(
        ref.get("controller") and ref.get("uid") == uid
        for ref in ((obj or {}).get("metadata") or {}).get("ownerReferences") or [])


def require_identity(obj: Any, where: str = "definition") -> None:
    """Raise BadRequest unless ``obj`` is a mapping with apiVersion, kind and metadata.name."""
    if not isinstance(obj, dict):
        raise BadRequest(f"{where}: an object must be a mapping, not {type(obj).__name__}")
    for field in ("apiVersion", "kind"):
        if not obj.get(field) or not isinstance(obj[field], str):
            raise BadRequest(f"{where}: {field} is required")
    metadata = obj.get("metadata")
    if metadata is None:
        raise BadRequest(f"{where}: metadata.name is required")
    if not isinstance(metadata, dict):
        raise BadRequest(f"{where}: metadata must be a mapping")
    if not metadata.get("name"):
        raise BadRequest(f"{where}: metadata.name is required")


def fold_string_data(obj: Object) -> None:
    """Secret.stringData is write-only: fold it into base64 ``data``, as kube-apiserver does."""
    if obj.get("kind") != "Secret" or obj.get("apiVersion") != "v1" or "stringData" not in obj:
        return
    string_data = obj.pop("stringData") or {}
    if string_data:
        data = obj.get("data") or {}
        data.update({k: base64.b64encode(str(v).encode()).decode() for k, v in string_data.items()})
        obj["data"] = data


HIDDEN = "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"


def hide_secret_data(obj: Object) -> Object:
    """A copy of ``obj`` safe to print: a Secret's values replaced, as Ansible hides no_log values."""
    if obj.get("kind") != "Secret" or obj.get("apiVersion") != "v1":
        return obj
    shown = copy.deepcopy(obj)
    for field in ("data", "stringData"):
        if isinstance(shown.get(field), dict):
            shown[field] = {key: HIDDEN for key in shown[field]}
    return shown


def secret_values(secret: Object) -> dict[str, str]:
    """A Secret's values, decoded (stringData as well, for a Secret not yet folded)."""
    values = {key: base64.b64decode(value).decode() for key, value in (secret.get("data") or {}).items()}
    values.update({key: str(value) for key, value in (secret.get("stringData") or {}).items()})
    return values
