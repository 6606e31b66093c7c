# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Put manifests into a store and read objects back: the engine of the resource and resource_info modules."""
from __future__ import annotations

import copy
from typing import Any, Iterable

from ansible_collections.metal3.baremetal.plugins.module_utils.api.admission import admit
from ansible_collections.metal3.baremetal.plugins.module_utils.errors import BadRequest, NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.objects import (
    Object,
    Ref,
    fold_string_data,
    hide_secret_data,
    merge_patch,
    require_identity,
    without_server_fields,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.store.selector import parse_selector

try:
    import yaml

    HAS_YAML = True
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    HAS_YAML = False


def parse_yaml(text: str, where: str, all_documents: bool = False) -> Any:
    """YAML (or JSON) text; BadRequest naming ``where`` and the line when malformed."""
    try:
        return list(yaml.safe_load_all(text)) if all_documents else yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise BadRequest(f"{where}: malformed YAML{line}: {problem}") from None


def dump_yaml(value: Any) -> str:
    """YAML text of ``value``, keys in their order (rendered cloud-init data, for instance)."""
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False)


def parse_manifests(text: str, where: str) -> list[Object]:
    """The objects of a (multi-document) YAML text."""
    return flatten(parse_yaml(text, where, all_documents=True), where)


def flatten(documents: Iterable[Any], where: str) -> list[Object]:
    """Objects of a list of documents: empty documents dropped, ``kind: List`` expanded."""
    objects: list[Object] = []
    for index, document in enumerate(documents):
        if document is None:
            continue
        if not isinstance(document, dict):
            raise BadRequest(f"{where}: document {index + 1} is a {type(document).__name__}, not a mapping")
        if document.get("kind") == "List" or (document.get("kind", "").endswith("List") and "items" in document):
            objects.extend(flatten(document.get("items") or [], where))
        else:
            objects.append(document)
    return objects


def load_definitions(definition: Any = None, src: str | None = None) -> list[Object]:
    """The objects given inline (a mapping, a list, or YAML text) or in a file."""
    if src:
        try:
            with open(src, encoding="utf-8") as f:
                return parse_manifests(f.read(), src)
        except OSError as e:
            raise BadRequest(f"src: cannot read {src}: {e.strerror}") from None
    if isinstance(definition, str):
        return parse_manifests(definition, "definition")
    if isinstance(definition, dict):
        return flatten([definition], "definition")
    if isinstance(definition, list):
        return flatten(definition, "definition")
    return []


def complete(obj: Object, api_version: str | None, kind: str | None, name: str | None,
             namespace: str | None, where: str) -> Object:
    """Fill what a definition leaves out from the module's own options, then check its identity."""
    obj = copy.deepcopy(obj)
    if api_version and not obj.get("apiVersion"):
        obj["apiVersion"] = api_version
    if kind and not obj.get("kind"):
        obj["kind"] = kind
    metadata = obj.setdefault("metadata", {})
    if isinstance(metadata, dict):
        if name and not metadata.get("name"):
            metadata["name"] = name
        if not metadata.get("namespace"):
            metadata["namespace"] = namespace or "default"
    require_identity(obj, where)
    return obj


def _outcome(result: Object | None, method: str, changed: bool, before: Object | None) -> dict[str, Any]:
    shown = hide_secret_data(result) if result else {}
    return {
        "result": shown,
        "method": method,
        "changed": changed,
        "diff": {
            "before": hide_secret_data(without_server_fields(before)) if before else {},
            "after": without_server_fields(shown) if shown else {},
        },
    }


def ensure_present(store: Store, obj: Object, dry_run: bool = False) -> dict[str, Any]:
    """Create the object, or merge it into the stored one; nothing is written when nothing would change."""
    desired = copy.deepcopy(obj)
    fold_string_data(desired)
    ref = Ref.of(desired)
    try:
        existing = store.get(ref)
    except NotFound:
        admit(store, desired, None)
        return _outcome(store.create(desired, dry_run=dry_run), "create", True, None)
    merged = merge_patch(existing, desired)
    if without_server_fields(merged) == without_server_fields(existing) and not _stale(desired, existing):
        return _outcome(existing, "none", False, existing)
    admit(store, merged, existing)
    result = store.patch(ref, desired, dry_run=dry_run)
    changed = result["metadata"].get("resourceVersion") != existing["metadata"].get("resourceVersion") or dry_run
    return _outcome(result, "update" if changed else "none", changed, existing)


def _stale(desired: Object, existing: Object) -> bool:
    """A definition that carries a resourceVersion other than the stored one must reach the store, to Conflict."""
    wanted = (desired.get("metadata") or {}).get("resourceVersion")
    return bool(wanted) and str(wanted) != existing["metadata"].get("resourceVersion")


def ensure_absent(store: Store, ref: Ref, dry_run: bool = False) -> dict[str, Any]:
    try:
        existing = store.get(ref)
    except NotFound:
        return _outcome(None, "none", False, None)
    if existing["metadata"].get("deletionTimestamp"):
        return _outcome(existing, "none", False, existing)
    remaining = store.delete(ref, dry_run=dry_run)
    return _outcome(remaining, "delete", True, existing)


def apply(store: Store, objects: list[Object], state: str, dry_run: bool = False) -> list[dict[str, Any]]:
    """Bring each object to ``state`` ('present' or 'absent'), in order.

    Several objects are first tried in a dry run, so one bad document fails the task before any is written.
    """
    def run(dry: bool) -> list[dict[str, Any]]:
        if state == "absent":
            return [ensure_absent(store, Ref.of(o), dry) for o in objects]
        return [ensure_present(store, o, dry) for o in objects]

    if len(objects) > 1 and not dry_run:
        run(True)
    return run(dry_run)


def find(store: Store, api_version: str, kind: str, name: str | None = None, namespace: str | None = None,
         label_selectors: list[str] | None = None) -> list[Object]:
    """Objects by name or by label selector; nothing found is an empty list, not an error."""
    if name:
        try:
            found = [store.get(Ref(api_version, kind, name, namespace or "default"))]
        except NotFound:
            return []
        if label_selectors:
            selector = parse_selector(label_selectors)
            found = [o for o in found if selector.matches(o["metadata"].get("labels"))]
    else:
        found = store.list(api_version, kind, namespace, label_selectors)
    return [hide_secret_data(o) for o in found]


def check_one_source(definition: Any, src: str | None, kind: str | None, name: str | None, state: str) -> None:
    if definition is None and not src and not (kind and name):
        raise BadRequest("one of definition, src, or kind and name is required")
    if definition is None and not src and state == "present":
        raise BadRequest("state=present needs a definition or src")
