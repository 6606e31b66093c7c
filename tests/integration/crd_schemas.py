"""The collection's CRD schemas as tests walk them: every field with its path, and objects with one field set."""
from __future__ import annotations

from typing import Any, Iterator

from ansible_collections.metal3.baremetal.plugins.module_utils.api.crds import crds


def _schemas() -> dict[str, tuple[str, dict[str, Any]]]:
    found = {}
    for crd in crds():
        version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
        found[crd["spec"]["names"]["kind"]] = (f"{crd['spec']['group']}/{version['name']}",
                                               version["schema"]["openAPIV3Schema"])
    return found


SCHEMAS = _schemas()


def set_path(obj: dict[str, Any], parts: list[str], value: Any) -> None:
    """Set the field at ``parts`` ('0' is an index; lists and maps made on the way)."""
    node: Any = obj
    for part, following in zip(parts[:-1], parts[1:], strict=True):
        empty: Any = [] if following == "0" else {}
        if isinstance(node, list):
            if not node or not isinstance(node[0], type(empty)):
                node[:] = [empty]
            node = node[0]
        else:
            if not isinstance(node.get(part), type(empty)):
                node[part] = empty
            node = node[part]
    if isinstance(node, list):
        node[:] = [value]
    else:
        node[parts[-1]] = value


def shown(parts: list[str]) -> str:
    return ".".join(parts).replace(".0.", "[0].").replace(".0", "[0]")


def walk(node: dict[str, Any], parts: list[str]) -> Iterator[tuple[list[str], dict[str, Any]]]:
    """Every schema node under ``node``, with its path; nothing under preserve-unknown-fields."""
    yield parts, node
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return
    for key, sub in (node.get("properties") or {}).items():
        yield from walk(sub, [*parts, key])
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], [*parts, "0"])
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], [*parts, "az-a"])
