# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Put manifests into a store and read objects back: the engine of the resource and resource_info modules.

Admission (upstream's webhook rules) is the store's: the store ``open_store`` returns admits every write, and
whatever store is given here is used admitted.
"""
from __future__ import annotations

import copy
from typing import Any, Iterable

from ansible_collections.metal3.baremetal.plugins.module_utils.api.kinds import lookup
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import (
    AlreadyExists,
    BadRequest,
    NotFound,
    UnknownKind,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import (
    Object,
    Ref,
    check_name,
    check_namespace,
    fold_string_data,
    hide_secret_data,
    merge_patch,
    require_identity,
    without_server_fields,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.selector import parse_selector
from ansible_collections.metal3.baremetal.plugins.module_utils.store.admitted import admitted
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store

try:
    import yaml

    HAS_YAML = True
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    HAS_YAML = False


# How many nodes a document may have once its aliases are expanded. Aliases are shared, not copied, when YAML is
# loaded, but whatever serialises the result expands them: nine nested aliases of nine make 9**9 nodes, gigabytes
# (the "billion laughs"). A 1.5 MiB object, the most a store keeps, has far fewer nodes than this.
MAX_EXPANDED_NODES = 200_000
MAX_DEPTH = 100  # far deeper than any schema here; deeper input only exhausts the recursion of what reads it


def expanded_nodes(value: Any, limit: int = MAX_EXPANDED_NODES) -> int:
    """How many nodes ``value`` (a YAML node graph, or loaded data) has once its shared parts are expanded,
    counted without expanding them; BadRequest past ``limit``."""
    sizes: dict[int, int] = {}

    def size(node: Any, depth: int) -> int:
        children = node.value if isinstance(node, yaml.Node) else node
        if isinstance(children, dict):
            children = [item for pair in children.items() for item in pair]
        elif not isinstance(children, (list, tuple)):
            return 1
        if depth > MAX_DEPTH:
            raise BadRequest(f"values nested more than {MAX_DEPTH} levels deep")
        key = id(node)
        if key not in sizes:
            sizes[key] = 0  # a node reached again while being sized is a cycle: counted once
            total = 1
            for child in children:
                total += sum(size(c, depth + 1) for c in child) if isinstance(child, tuple) else size(child, depth + 1)
                if total > limit:
                    raise BadRequest(f"more than {limit} nodes once its YAML aliases are expanded")
            sizes[key] = total
        return sizes[key]

    return size(value, 0)


def _load_documents(text: str, where: str) -> list[Any]:
    """Each document of ``text``, refused before it is built when its aliases expand past the bound."""
    loader = yaml.SafeLoader(text)
    try:
        documents: list[Any] = []
        while loader.check_node():
            node = loader.get_node()
            try:
                expanded_nodes(node)
            except BadRequest as e:
                raise BadRequest(f"{where}: document {len(documents) + 1} has {e}") from None
            documents.append(loader.construct_document(node))
        return documents
    except RecursionError:  # the parser itself recurses per level of nesting
        raise BadRequest(f"{where}: values nested too deeply") from None
    finally:
        loader.dispose()


def parse_yaml(text: str, where: str, all_documents: bool = False) -> Any:
    """YAML (or JSON) text; BadRequest naming ``where`` and the line when malformed."""
    try:
        documents = _load_documents(text, where)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise BadRequest(f"{where}: malformed YAML{line}: {problem}") from None
    if all_documents:
        return documents
    if len(documents) > 1:
        raise BadRequest(f"{where}: expected one YAML document, found {len(documents)}")
    return documents[0] if documents else None


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
        kind = document.get("kind")  # not checked yet: require_identity names a kind that is no string
        if kind == "List" or (isinstance(kind, str) and kind.endswith("List") and "items" in document):
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
    if isinstance(definition, (dict, list)):
        try:  # already loaded (by Ansible, from the playbook), with its aliases shared
            expanded_nodes(definition)
        except BadRequest as e:
            raise BadRequest(f"definition: {e}") from None
        return flatten([definition] if isinstance(definition, dict) else definition, "definition")
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
        if not metadata.get("namespace") and not cluster_scoped(obj):
            metadata["namespace"] = namespace or "default"
    require_identity(obj, where)
    # Named as the manifest's fields before the store builds a request from them.
    check_name(obj["metadata"]["name"], "metadata.name", obj["kind"], obj["apiVersion"])
    if "namespace" in obj["metadata"] or not cluster_scoped(obj):
        check_namespace(obj["metadata"].get("namespace"), "metadata.namespace")
    return obj


def cluster_scoped(obj: Object) -> bool:
    """Whether ``obj`` is of a kind that lives outside namespaces (a Namespace), as far as the collection knows."""
    try:
        return not lookup(str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")).namespaced
    except UnknownKind:
        return False


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
    store = admitted(store)
    desired = copy.deepcopy(obj)
    fold_string_data(desired)
    ref = Ref.of(desired)
    existing = store.get_if_exists(ref)
    if existing is None:
        try:
            # A null in a manifest is no value (a merge patch's meaning, and what an apply of it leaves): not stored.
            return _outcome(store.create(merge_patch({}, desired), dry_run=dry_run), "create", True, None)
        except AlreadyExists:
            # Created since it was read (the same object's other reconcile: the operator runs a Metal3Data's
            # own and its machine's at once): merged into, as had it been there first.
            existing = store.get(ref)
    merged = merge_patch(existing, desired)
    if without_server_fields(merged) == without_server_fields(existing) and not _stale(desired, existing):
        return _outcome(existing, "none", False, existing)
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

    Several objects are first tried in a dry run, so one bad document fails the task before any is written (an
    object in a namespace an earlier document creates is only admitted then: a cluster cannot dry-run into it).
    """
    store = admitted(store)

    def run(dry: bool) -> list[dict[str, Any]]:
        if state == "absent":
            return [ensure_absent(store, Ref.of(o), dry) for o in objects]
        results = []
        new_namespaces: set[str] = set()  # created by an earlier document: a dry run cannot see them yet
        for obj in objects:
            try:
                result = ensure_present(store, obj, dry)
            except NotFound:
                # A Kubernetes API server refuses a dry run into a namespace that does not exist yet; the object
                # is written once the Namespace before it is (its admission has run already).
                if not (dry and (obj.get("metadata") or {}).get("namespace") in new_namespaces):
                    raise
                result = _outcome(obj, "create", True, None)
            if _is_namespace(obj) and result["method"] == "create":
                new_namespaces.add(obj["metadata"]["name"])
            results.append(result)
        return results

    if len(objects) > 1 and not dry_run:
        run(True)
    return run(dry_run)


def _is_namespace(obj: Object) -> bool:
    return obj.get("apiVersion") == "v1" and obj.get("kind") == "Namespace"


def find(store: Store, api_version: str, kind: str, name: str | None = None, namespace: str | None = None,
         label_selectors: list[str] | None = None, secret_data: bool = False) -> list[Object]:
    """Objects by name or by label selector; nothing found is an empty list, not an error. A Secret's values are
    hidden unless ``secret_data`` (resource_info and the resource lookup, asked for Secrets on purpose, return
    them as stored, base64, as kubernetes.core's k8s_info does)."""
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
    return found if secret_data else [hide_secret_data(o) for o in found]


def names_to_reconcile(store: Store, name: str | None, api_version: str, kinds: Iterable[str],
                       namespace: str) -> list[str]:
    """What a module that reconciles objects of ``kinds`` works on: the one ``name`` (checked as an object name, and
    named ``name`` in the error), else every one in the namespace, by name, once however many kinds share it."""
    if name:
        return [check_name(name, "name")]
    return sorted({obj["metadata"]["name"] for kind in kinds for obj in store.list(api_version, kind, namespace)})


def check_one_source(definition: Any, src: str | None, kind: str | None, name: str | None, state: str) -> None:
    if definition is None and not src and not (kind and name):
        raise BadRequest("one of definition, src, or kind and name is required")
    if definition is None and not src and state == "present":
        raise BadRequest("state=present needs a definition or src")
