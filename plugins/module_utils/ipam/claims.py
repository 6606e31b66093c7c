# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""What the ip_claim and ip_pool modules do: put the object, then run its reconcile function."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, cast

from ansible_collections.metal3.baremetal.plugins.module_utils.core.address import address_record
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid, NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import (
    ADDRESS_ANNOTATION,
    CLAIM_FINALIZER,
    IPAM_API,
    NETWORK_NAME_LABEL,
    POOL_GROUP_LABEL,
    POOL_NAME_LABEL,
    POOL_NAMESPACE_LABEL,
    REQUESTED_ADDRESS_ANNOTATION,
    Allocation,
    reconcile_ip_claim,
    reconcile_ip_pool,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.pools import POOL_API, pool_warnings
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import ensure_absent, ensure_present
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store

if TYPE_CHECKING:
    from ansible_collections.metal3.baremetal.plugins.module_utils.api.types import IPAddress, IPAddressSpec

# Module option → the label that chooses a pool (ELF's names).
SELECTION_OPTIONS = {"ip_pool_name": POOL_NAME_LABEL, "ip_pool_namespace": POOL_NAMESPACE_LABEL,
                     "ip_pool_group": POOL_GROUP_LABEL, "network_name": NETWORK_NAME_LABEL}


def claim_object(name: str, namespace: str, pool: str | None = None, pool_namespace: str | None = None,
                 labels: dict[str, str] | None = None, address: str | None = None) -> Object:
    # Born with its finalizer, so an address is never allocated to a claim that could vanish unreleased.
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels or {}),
                                "finalizers": [CLAIM_FINALIZER]}
    if address:
        metadata["annotations"] = {REQUESTED_ADDRESS_ANNOTATION: address}
    if pool_namespace and not pool:  # a namespace alone chooses nothing: say so rather than ignore it
        raise Invalid(f"pool_namespace: Invalid value: {pool_namespace!r}: names the namespace of pool, which is not "
                      "given (the selection labels choose a pool of another namespace with ip_pool_namespace)")
    spec: dict[str, Any] = {}
    if pool:
        spec["pool"] = {"apiVersion": IPAM_API, "kind": "IPPool", "name": pool,
                        "namespace": pool_namespace or namespace}
    return {"apiVersion": IPAM_API, "kind": "IPClaim", "metadata": metadata, "spec": spec}


def ensure_claim(store: Store, claim: Object, dry_run: bool = False,
                 wait_timeout: float = 0) -> tuple[dict[str, Any], Allocation]:
    """Ensure the claim and allocate: the outcome of putting the claim, and its allocation. Waits up to
    ``wait_timeout`` for a pool to appear."""
    outcome = ensure_present(store, claim, dry_run)
    ref = Ref.of(claim)
    deadline = time.monotonic() + wait_timeout
    # The claim as just created or read is the first reconcile's (a check mode's create wrote nothing: read).
    current = None if dry_run else (outcome["result"] or None)
    while True:
        try:
            allocation = reconcile_ip_claim(store, ref, dry_run, current)
            current = None
        except NotFound:  # check mode on a claim that does not exist yet
            allocation = Allocation(outcome["result"])
        if not allocation.requeue or time.monotonic() >= deadline:
            return outcome, allocation
        time.sleep(0.5)


def claim_present(store: Store, claim: Object, dry_run: bool = False, wait_timeout: float = 0) -> dict[str, Any]:
    """The ip_claim module's result: ensure the claim, allocate, and say what it holds."""
    outcome, allocation = ensure_claim(store, claim, dry_run, wait_timeout)
    result = _result(allocation, outcome["changed"] or allocation.changed)
    result["diff"] = {
        "before": {"claim": outcome["diff"]["before"], "address": None if allocation.changed else result["address"]},
        "after": {"claim": outcome["diff"]["after"], "address": result["address"]},
    }
    return result


def claim_absent(store: Store, ref: Ref, dry_run: bool = False) -> dict[str, Any]:
    outcome = ensure_absent(store, ref, dry_run)
    changed = outcome["changed"]
    held = ((outcome["diff"]["before"].get("metadata") or {}).get("annotations") or {}).get(ADDRESS_ANNOTATION)
    try:
        if store.get(ref)["metadata"].get("deletionTimestamp") and not dry_run:
            allocation = reconcile_ip_claim(store, ref, dry_run)
            changed = changed or allocation.changed
    except NotFound:
        pass
    return {"changed": changed, "claim": {}, "allocated": False, **address_record(None), "ip_address": {}, "pool": {},
            "diff": {"before": {"claim": outcome["diff"]["before"], "address": held} if held or changed else {},
                     "after": {}}}


def _result(allocation: Allocation, changed: bool) -> dict[str, Any]:
    result: dict[str, Any] = {"changed": changed, "claim": allocation.obj or {},
                              "ip_address": allocation.address or {}, "allocated": allocation.address is not None,
                              **allocation.summary()}
    address = cast("IPAddress", allocation.address or {})
    pool = address.get("spec", cast("IPAddressSpec", {})).get("pool") or {}
    result["pool"] = {"name": pool["name"], "namespace": pool.get("namespace")} if pool else {}
    if allocation.error:
        result.update(failed=True, msg=allocation.error)
    elif allocation.waiting:
        result["msg"] = f"waiting: {allocation.waiting}"
    return result


def pool_present(store: Store, definition: Object | None, ref: Ref, dry_run: bool = False) -> dict[str, Any]:
    """Ensure the pool (when a definition is given), then rebuild its status from its addresses."""
    changed = False
    diff: dict[str, Any] = {"before": {}, "after": {}}
    if definition is not None:
        annotations = definition["metadata"].get("annotations") or {}
        if None in annotations.values() and store.get_if_exists(ref) is None:
            # A None annotation removes it from a stored pool (merge patch); a new pool is born without it.
            definition["metadata"]["annotations"] = {k: v for k, v in annotations.items() if v is not None}
        outcome = ensure_present(store, definition, dry_run)
        changed, diff = outcome["changed"], outcome["diff"]
    try:
        state = reconcile_ip_pool(store, ref, dry_run)
    except NotFound:
        state = None
    pool = state.obj if state else {}
    changed = changed or bool(state and state.released)
    result = {"changed": changed, "pool": pool or {}, "allocations": state.allocations if state else {}, "diff": diff}
    if state and state.obj:
        warnings = state.warnings
    else:  # a pool not stored (check mode): the definition's
        warnings = pool_warnings(definition) if definition and "spec" in definition else ()
    if warnings:  # what upstream accepts and we think risky: the task says so (and the pool's condition)
        result["warnings"] = [f"IPPool {ref.namespace}/{ref.name}: {w}" for w in warnings]
    return result


def applied_pool_warnings(objects: list[Object]) -> list[str]:
    """The warnings of the IPPools among ``objects`` (as the resource module applies them, admitted already):
    what upstream accepts in them and we think risky."""
    return [f"IPPool {obj['metadata'].get('namespace') or 'default'}/{obj['metadata'].get('name')}: {warning}"
            for obj in objects if obj.get("apiVersion") == POOL_API and obj.get("kind") == "IPPool"
            for warning in pool_warnings(obj)]


def pool_absent(store: Store, ref: Ref, dry_run: bool = False) -> dict[str, Any]:
    """Delete a pool that has no allocations; one that has is refused and left alone."""
    try:
        state = reconcile_ip_pool(store, ref, dry_run)
    except NotFound:
        return {"changed": False, "pool": {}, "allocations": {}}
    if state.allocations:
        raise Invalid(f"IPPool {ref.namespace}/{ref.name} still has {len(state.allocations)} allocations "
                      f"({', '.join(sorted(state.allocations))}): delete their claims first")
    outcome = ensure_absent(store, ref, dry_run)
    if not dry_run:
        reconcile_ip_pool(store, ref, dry_run)
    return {"changed": outcome["changed"], "pool": {}, "allocations": {}, "diff": outcome["diff"]}
