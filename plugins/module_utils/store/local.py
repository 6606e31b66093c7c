# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The local backend: one SQLite file, for a bastion with no cluster.

Every write is one ``BEGIN IMMEDIATE`` transaction, so several ansible-playbook
processes (parallel AWX jobs on one execution node) can share the file: SQLite
serialises the writers, and the resourceVersion check inside the transaction
gives the same Conflict semantics as kube-apiserver.

As kube-apiserver does, the store keeps each object of a CRD at the CRD's storage
version: what is written is validated against the schema of the version it is
written at, then converted to the storage version (api/conversion.py); what is
read is converted to the version asked for. Kinds owned by others are stored as
given and served under each of their versions.
"""
from __future__ import annotations

import contextlib
import copy
import json
import os
import random
import sqlite3
import time
import uuid
from contextlib import contextmanager
from typing import Iterable, Iterator

from ansible_collections.metal3.baremetal.plugins.module_utils.api.conversion import convert
from ansible_collections.metal3.baremetal.plugins.module_utils.api.kinds import KindInfo, lookup
from ansible_collections.metal3.baremetal.plugins.module_utils.api.validation import validate
from ansible_collections.metal3.baremetal.plugins.module_utils.core import selector as sel
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Invalid,
    NotFound,
    Unavailable,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import (
    Object,
    Ref,
    check_namespace,
    check_ref,
    check_size,
    checked_ref,
    clone,
    fold_string_data,
    merge_patch_into,
    now,
    owner_uids,
    require_identity,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store

DEFAULT_PATH = "~/.local/share/metal3-baremetal/store.db"
BUSY_TIMEOUT_SECONDS = 120.0
SCHEMA_VERSION = 1  # bump when _SCHEMA changes; its statements must stay idempotent (IF NOT EXISTS)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    id INTEGER PRIMARY KEY,
    grp TEXT NOT NULL,
    kind TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    uid TEXT NOT NULL UNIQUE,
    body TEXT NOT NULL,
    UNIQUE (grp, kind, namespace, name)
);
CREATE TABLE IF NOT EXISTS labels (
    object_id INTEGER NOT NULL REFERENCES objects(id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (object_id, key)
);
CREATE INDEX IF NOT EXISTS labels_by_key_value ON labels (key, value);
CREATE TABLE IF NOT EXISTS owners (
    object_id INTEGER NOT NULL REFERENCES objects(id) ON DELETE CASCADE,
    owner_uid TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS owners_by_uid ON owners (owner_uid);
CREATE INDEX IF NOT EXISTS owners_by_object ON owners (object_id);
CREATE TABLE IF NOT EXISTS revision (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
INSERT OR IGNORE INTO revision (id, value) VALUES (1, 0);
"""


def resolve_path(path: str | None) -> str:
    return os.path.abspath(os.path.expanduser(path or os.environ.get("METAL3_STORE_PATH") or DEFAULT_PATH))


class LocalStore(Store):
    backend = "local"

    def __init__(self, path: str | None = None, busy_timeout: float = BUSY_TIMEOUT_SECONDS) -> None:
        self.path = resolve_path(path)
        try:
            directory = os.path.dirname(self.path)
            if not os.path.isdir(directory):
                os.makedirs(directory, mode=0o700, exist_ok=True)
            if not os.path.exists(self.path):
                # Created 0600 before SQLite opens it: the store holds BMC credentials.
                os.close(os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600))
            self.busy_timeout = busy_timeout
            # SQLite's busy handler only covers statements other than BEGIN (see _begin): a checkpoint.
            self._db = sqlite3.connect(self.path, timeout=5.0, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            # The schema is written once per file, not under the write lock at every open: each module task
            # opens the store, and parallel playbooks would queue for it.
            if self._db.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
                with self._transaction():
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            self._db.execute(statement)
                    self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except OSError as e:
            raise Unavailable(f"cannot open the local store {self.path}: {e.strerror or e}") from None
        except sqlite3.Error as e:
            raise self._unavailable(e) from None

    def close(self) -> None:
        self._db.close()

    # -- transactions ---------------------------------------------------------------------------

    def _begin(self) -> None:
        """Take the write lock. SQLite's own busy handler sleeps up to 100 ms between tries, which makes
        many writers queue for long; short jittered sleeps keep a busy file moving."""
        deadline = time.monotonic() + self.busy_timeout
        attempt = 0
        while True:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) and "busy" not in str(e):
                    raise Unavailable(f"cannot write the local store {self.path}: {e}") from None
                if time.monotonic() > deadline:
                    raise Unavailable(f"the local store {self.path} stayed locked for {self.busy_timeout:.0f}s "
                                      "by another writer") from None
            attempt += 1
            time.sleep(random.uniform(0.0002, 0.001 * min(attempt, 20)))

    @contextmanager
    def _transaction(self, dry_run: bool = False) -> Iterator[sqlite3.Connection]:
        """One write transaction; rolled back on error, and always in dry-run (check mode)."""
        self._begin()
        try:
            yield self._db
        except sqlite3.DatabaseError as e:  # a corrupted file, found by a statement
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
            raise self._unavailable(e) from None
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        try:
            self._db.execute("ROLLBACK" if dry_run else "COMMIT")
        except sqlite3.Error as e:
            raise Unavailable(f"cannot write the local store {self.path}: {e}") from None

    def _unavailable(self, e: sqlite3.Error) -> Unavailable:
        return Unavailable(f"cannot open the local store {self.path}: {e}")

    @contextmanager
    def _reading(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.DatabaseError as e:  # a corrupted file: the same message whichever page is hit first
            raise self._unavailable(e) from None

    def _next_revision(self) -> str:
        (value,) = self._db.execute("UPDATE revision SET value = value + 1 WHERE id = 1 RETURNING value").fetchone()
        return str(value)

    # -- rows -----------------------------------------------------------------------------------

    def _row(self, info: KindInfo, namespace: str, name: str) -> tuple[int, Object] | None:
        row = self._db.execute("SELECT id, body FROM objects WHERE grp=? AND kind=? AND namespace=? AND name=?",
                               (info.group, info.kind, namespace, name)).fetchone()
        return (row[0], json.loads(row[1])) if row else None

    def _load(self, info: KindInfo, ref: Ref) -> tuple[int, Object]:
        found = self._row(info, ref.namespace, ref.name)
        if found is None:
            raise NotFound(f'{info.resource} "{ref.name}" not found')
        return found

    def _write(self, row_id: int | None, info: KindInfo, obj: Object) -> int:
        metadata = obj["metadata"]
        body = json.dumps(obj, separators=(",", ":"))
        check_size(obj, body)  # the body written is the one measured: one encoding per write
        if row_id is None:
            cursor = self._db.execute(
                "INSERT INTO objects (grp, kind, namespace, name, uid, body) VALUES (?, ?, ?, ?, ?, ?)",
                (info.group, info.kind, metadata["namespace"], metadata["name"], metadata["uid"], body))
            row_id = cursor.lastrowid
            if row_id is None:  # every INSERT of one row sets it
                raise AssertionError("SQLite gave no row id for an INSERT")
        else:
            self._db.execute("UPDATE objects SET body=? WHERE id=?", (body, row_id))
            self._db.execute("DELETE FROM labels WHERE object_id=?", (row_id,))
            self._db.execute("DELETE FROM owners WHERE object_id=?", (row_id,))
        self._db.executemany("INSERT INTO labels (object_id, key, value) VALUES (?, ?, ?)",
                             [(row_id, k, v) for k, v in (metadata.get("labels") or {}).items()])
        self._db.executemany("INSERT INTO owners (object_id, owner_uid) VALUES (?, ?)",
                             [(row_id, uid) for uid in owner_uids(obj)])
        return row_id

    def _remove(self, row_id: int, obj: Object) -> None:
        """Remove a row, then collect its dependents, as Kubernetes' garbage collector does."""
        self._db.execute("DELETE FROM objects WHERE id=?", (row_id,))
        dependents = self._db.execute(
            "SELECT objects.id, objects.body FROM owners JOIN objects ON objects.id = owners.object_id "
            "WHERE owners.owner_uid=?", (obj["metadata"]["uid"],)).fetchall()
        for dependent_id, body in dependents:
            dependent = json.loads(body)
            # A dependent is garbage only once every owner is gone.
            owners = owner_uids(dependent)
            alive = self._db.execute(f"SELECT 1 FROM objects WHERE uid IN ({','.join('?' * len(owners))}) LIMIT 1",
                                     owners).fetchone()
            if not alive:
                self._delete_row(dependent_id, dependent)

    def _delete_row(self, row_id: int, obj: Object) -> Object | None:
        metadata = obj["metadata"]
        if metadata.get("finalizers"):
            if not metadata.get("deletionTimestamp"):
                metadata["deletionTimestamp"] = now()
                metadata["resourceVersion"] = self._next_revision()
                self._write(row_id, lookup(obj["apiVersion"], obj["kind"]), obj)
            return obj
        self._remove(row_id, obj)
        return None

    # -- reads ----------------------------------------------------------------------------------

    def get(self, ref: Ref) -> Object:
        check_ref(ref)
        info = lookup(ref.api_version, ref.kind)
        with self._reading():
            return _served(info, self._load(info, ref)[1], ref.api_version)

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | Iterable[str] | None = None) -> list[Object]:
        info = lookup(api_version, kind)
        selector = sel.parse_selector(label_selector)
        if namespace is not None:
            check_namespace(namespace, f"{kind} namespace")
        # An equality requirement drives the query from the label index (CROSS JOIN fixes the order), so a
        # lookup by label costs the same however many objects of the kind there are.
        driver = next((r for r in selector.requirements if r.operator in (sel.EQUALS, sel.IN)), None)
        args: list[object] = []
        if driver:
            query = ("SELECT o.body FROM labels AS l CROSS JOIN objects AS o ON o.id = l.object_id "
                     f"WHERE l.key=? AND l.value IN ({','.join('?' * len(driver.values))}) AND ")
            args.extend([driver.key, *driver.values])
        else:
            query = "SELECT o.body FROM objects AS o WHERE "
        query += "o.grp=? AND o.kind=?"
        args.extend([info.group, info.kind])
        if namespace is not None:
            query += " AND o.namespace=?"
            args.append(namespace)
        for requirement in selector.requirements:
            if requirement is not driver:
                clause, clause_args = _label_clause(requirement)
                query += " AND " + clause
                args.extend(clause_args)
        query += " ORDER BY o.namespace, o.name"
        with self._reading():
            objects = [json.loads(body) for (body,) in self._db.execute(query, args)]
        return [_served(info, o, api_version) for o in objects if selector.matches(o["metadata"].get("labels"))]

    # -- writes ---------------------------------------------------------------------------------

    def create(self, obj: Object, dry_run: bool = False) -> Object:
        require_identity(obj)
        info = lookup(obj["apiVersion"], obj["kind"])
        obj = copy.deepcopy(obj)
        metadata = obj["metadata"]
        if metadata.get("resourceVersion"):
            raise BadRequest("resourceVersion should not be set on objects to be created")
        metadata["namespace"] = metadata.get("namespace") or "default"
        validate(info, obj)
        for field in ("deletionTimestamp", "generation", "uid", "creationTimestamp"):
            metadata.pop(field, None)
        if info.status_subresource:
            obj.pop("status", None)
        fold_string_data(obj)
        stored = _stored(info, obj)
        with self._transaction(dry_run):
            if self._row(info, metadata["namespace"], metadata["name"]) is not None:
                raise AlreadyExists(f'{info.resource} "{metadata["name"]}" already exists')
            stored["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp=now(), generation=1,
                                      resourceVersion=self._next_revision())
            self._write(None, info, stored)
        return _served(info, stored, obj["apiVersion"])

    def update(self, obj: Object, dry_run: bool = False) -> Object:
        require_identity(obj)
        info = lookup(obj["apiVersion"], obj["kind"])
        ref = checked_ref(obj)
        if info.group and not (obj["metadata"].get("resourceVersion")):
            # kube-apiserver refuses unconditional updates of custom resources.
            raise Invalid(f'{info.qualified_kind} "{ref.name}" is invalid: metadata.resourceVersion: '
                          "Invalid value: 0x0: must be specified for an update")
        with self._transaction(dry_run):
            row_id, current = self._load(info, ref)
            return self._replace(info, row_id, current, obj, status_only=False)

    def update_status(self, obj: Object, dry_run: bool = False) -> Object:
        require_identity(obj)
        info = lookup(obj["apiVersion"], obj["kind"])
        with self._transaction(dry_run):
            row_id, current = self._load(info, checked_ref(obj))
            return self._replace(info, row_id, current, obj, status_only=True)

    def patch(self, ref: Ref, patch: Object, dry_run: bool = False) -> Object:
        return self._patch(ref, patch, dry_run, status_only=False)

    def patch_status(self, ref: Ref, patch: Object, dry_run: bool = False) -> Object:
        return self._patch(ref, patch, dry_run, status_only=True)

    def _patch(self, ref: Ref, patch: Object, dry_run: bool, status_only: bool) -> Object:
        if not isinstance(patch, dict):
            raise BadRequest(f"a merge patch must be a mapping, not {type(patch).__name__}")
        check_ref(ref)
        info = lookup(ref.api_version, ref.kind)
        with self._transaction(dry_run):
            row_id, stored = self._load(info, ref)
            desired = merge_patch_into(_served(info, clone(stored), ref.api_version), patch)
            if not (patch.get("metadata") or {}).get("resourceVersion"):
                desired["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"]
            desired["apiVersion"] = ref.api_version
            return self._replace(info, row_id, stored, desired, status_only)

    def _replace(self, info: KindInfo, row_id: int, stored: Object, desired: Object, status_only: bool) -> Object:
        """The one write path of update, update_status, patch and patch_status: ``desired`` is at the version it
        names, ``stored`` at the storage version; the result is at ``desired``'s version."""
        current = _served(info, clone(stored), desired["apiVersion"])
        ref = Ref.of(current)
        expected = (desired.get("metadata") or {}).get("resourceVersion")
        if expected and str(expected) != current["metadata"]["resourceVersion"]:
            raise Conflict(f'Operation cannot be fulfilled on {info.resource} "{ref.name}": the object has been '
                           "modified; please apply your changes to the latest version and try again")
        if status_only:
            new = clone(current)
            if "status" in desired:
                new["status"] = clone(desired["status"])
            else:
                new.pop("status", None)
        else:
            new = clone(desired)
            new["metadata"] = new.get("metadata") or {}
            if info.status_subresource:
                new.pop("status", None)
                if "status" in current:
                    new["status"] = current["status"]
        metadata = new["metadata"]
        for field in ("uid", "creationTimestamp", "deletionTimestamp", "generation", "namespace", "name"):
            if field in current["metadata"]:
                metadata[field] = current["metadata"][field]
            else:
                metadata.pop(field, None)
        new["apiVersion"], new["kind"] = current["apiVersion"], current["kind"]
        validate(info, new)
        fold_string_data(new)
        if current["metadata"].get("deletionTimestamp"):
            added = set(metadata.get("finalizers") or []) - set(current["metadata"].get("finalizers") or [])
            if added:
                raise Invalid(f'{info.qualified_kind} "{ref.name}" is invalid: metadata.finalizers: Forbidden: '
                              f"no new finalizers can be added if the object is being deleted, found new "
                              f"finalizers {sorted(added)}")
        metadata["resourceVersion"] = current["metadata"]["resourceVersion"]
        new_stored = _stored(info, new)
        if new_stored == stored:
            return current  # a no-op write leaves resourceVersion alone, as kube-apiserver does
        if _spec_of(new_stored) != _spec_of(stored):
            new_stored["metadata"]["generation"] = int(stored["metadata"].get("generation", 1)) + 1
        new_stored["metadata"]["resourceVersion"] = self._next_revision()
        self._write(row_id, info, new_stored)
        if metadata.get("deletionTimestamp") and not metadata.get("finalizers"):
            self._remove(row_id, new_stored)
        return _served(info, new_stored, new["apiVersion"])

    def delete(self, ref: Ref, dry_run: bool = False) -> Object | None:
        check_ref(ref)
        info = lookup(ref.api_version, ref.kind)
        with self._transaction(dry_run):
            row_id, current = self._load(info, ref)
            remaining = self._delete_row(row_id, current)
        return None if remaining is None else _served(info, remaining, ref.api_version)


def _converts(info: KindInfo) -> bool:
    """Whether the store keeps ``info``'s objects at a storage version (a CRD's), not as they were written."""
    return bool(info.storage)


def _stored(info: KindInfo, obj: Object) -> Object:
    """``obj`` as the store keeps it: at its CRD's storage version (``obj`` itself when it is at that version)."""
    storage = f"{info.group}/{info.storage}" if info.group else info.storage
    if not _converts(info) or obj.get("apiVersion") == storage:
        return obj
    return convert(obj, storage)


def _served(info: KindInfo, obj: Object, api_version: str) -> Object:
    """A stored object at ``api_version`` (``obj`` itself when it is at that version); kinds stored as given are
    one form under each of their versions."""
    if obj.get("apiVersion") == api_version:
        return obj
    if _converts(info):
        return convert(obj, api_version)
    obj["apiVersion"] = api_version
    return obj


def _spec_of(obj: Object) -> Object:
    """Everything but metadata and status: what bumps generation when it changes."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _label_clause(requirement: sel.Requirement) -> tuple[str, list[object]]:
    """A SQL condition on the labels table that pre-selects rows for a requirement."""
    subquery = "SELECT object_id FROM labels WHERE key=?"
    args: list[object] = [requirement.key]
    if requirement.operator in (sel.EQUALS, sel.IN, sel.NOT_EQUALS, sel.NOT_IN):
        subquery += f" AND value IN ({','.join('?' * len(requirement.values))})"
        args.extend(requirement.values)
    negated = requirement.operator in (sel.NOT_EQUALS, sel.NOT_IN, sel.DOES_NOT_EXIST)
    return f"o.id {'NOT IN' if negated else 'IN'} ({subquery})", args
