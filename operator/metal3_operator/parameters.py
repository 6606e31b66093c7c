"""The extra vars a reconcile hands to its role, built as the Ansible Operator builds them (``makeParameters``):
the spec with snake_cased keys at the top, ``ansible_operator_meta``, the whole CR as ``_<group>_<kind>`` and
its raw spec as ``_<group>_<kind>_spec``, then the watch's vars (and the finalizer's, on a finalizer run).
"""
from __future__ import annotations

import re
from typing import Any

from metal3_operator.watches import Watch

_BOUNDARIES = (
    re.compile(r"([A-Z]+)([A-Z][a-z])"),  # HTTPServer -> HTTP_Server
    re.compile(r"([a-z0-9])([A-Z])"),  # bootMode -> boot_Mode
)


def to_snake(name: str) -> str:
    """camelCase to snake_case; acronyms stay one word (rootDeviceHints -> root_device_hints,
    HTTPProxy -> http_proxy)."""
    for pattern in _BOUNDARIES:
        name = pattern.sub(r"\1_\2", name)
    return re.sub(r"[\s\-]+", "_", name).lower()


def snake_keys(value: Any) -> Any:
    """Keys of every mapping, nested and in lists, snake_cased; values untouched."""
    if isinstance(value, dict):
        return {to_snake(k) if isinstance(k, str) else k: snake_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [snake_keys(v) for v in value]
    return value


def mark_unsafe(value: Any) -> Any:
    """Every string wrapped so Ansible never templates it: a CR field cannot inject Jinja into the role."""
    if isinstance(value, str):
        return {"__ansible_unsafe": value}
    if isinstance(value, dict):
        return {k: mark_unsafe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mark_unsafe(v) for v in value]
    return value


def object_var(watch: Watch) -> str:
    """``_<group>_<kind>``: dots and dashes of the group become underscores, the kind is lower-cased."""
    group = re.sub(r"[.\-]", "_", watch.group)
    return f"_{group}_{watch.kind.lower()}" if group else f"_{watch.kind.lower()}"


def extra_vars(watch: Watch, obj: dict[str, Any], finalizer: bool = False) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    top = snake_keys(spec) if watch.snake_case_parameters else dict(spec)
    # markUnsafe covers every string that comes from the CR: the spec on top, its name and namespace, the object
    # and its spec (kube-apiserver's name rules keep Jinja out of a name; nothing here relies on them).
    unsafe = mark_unsafe if watch.mark_unsafe else (lambda value: value)
    meta = obj.get("metadata") or {}
    variables: dict[str, Any] = {
        **unsafe(top),
        "ansible_operator_meta": unsafe({"name": meta.get("name"), "namespace": meta.get("namespace")}),
        object_var(watch): unsafe(obj),
        f"{object_var(watch)}_spec": unsafe(spec),
        **watch.vars,
    }
    if finalizer and watch.finalizer:
        variables.update(watch.finalizer.vars)
    return variables
