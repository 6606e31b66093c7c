# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Metal3DataClaim → Metal3Data → rendered secrets, as CAPM3's data template controllers do.

A claim gets the Metal3Data with the lowest free index of its template, named
``<template>-<index>``: two claimers racing for one index collide on create and the
loser takes the next; the Metal3Data of a template are listed by a label naming it.
A Metal3Data claims one address per pool its template names (IPClaim ``<data>-<pool>``,
through the IPAM engine), renders meta_data and network_data, and writes them to the
secrets ``<metal3machine>-metadata`` and ``<metal3machine>-networkdata``, which are
never rendered again once they exist. A template without networkData renders no
network_data: no networkdata Secret, no ``spec.networkData`` on the Metal3Data, so the
host gets none (CAPM3's createSecrets), and cloud-init falls back to its default.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Mapping, cast

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import (
    CAPI_API,
    DATA_CLAIM_FINALIZER,
    DATA_FINALIZER,
    HOST_ANNOTATION,
    HOST_CLAIM_ANNOTATION,
    INFRA_API,
    SECRET_TYPE,
    capi_cluster_of,
    owner_named,
    owner_reference,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core import pause
from ansible_collections.metal3.baremetal.plugins.module_utils.core.address import Address
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import (
    AlreadyExists,
    Conflict,
    Invalid,
    NotFound,
    TooManyConflicts,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import (
    Object,
    Ref,
    controlled_by,
    split_reference,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.reconcile import Result
from ansible_collections.metal3.baremetal.plugins.module_utils.core.retry import Backoff, retry_on_conflict
from ansible_collections.metal3.baremetal.plugins.module_utils.core.selector import label_value
from ansible_collections.metal3.baremetal.plugins.module_utils.hostclaims import hostclaim
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import API as BMH_API
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import IPAM_API
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.claims import (
    claim_absent,
    claim_object,
    ensure_claim,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import dump_yaml
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.writes import (
    ensure_finalizer,
    remove_finalizer,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.templating.render import (
    normalize_template_spec,
    pool_names,
    render_meta_data,
    render_network_data,
)

if TYPE_CHECKING:
    from ansible_collections.metal3.baremetal.plugins.module_utils.api.types import Metal3Data

DATA_NAME_LABEL = "infrastructure.cluster.x-k8s.io/data-name"
POOL_NAME_LABEL = "infrastructure.cluster.x-k8s.io/pool-name"
# On a Metal3Data: the name of its template, so the data of one template are listed without the rest.
TEMPLATE_LABEL = "metal3.baremetal/data-template"
WAIT = 1.0
# Each step lists again and takes the lowest index still free, so racing claimers move on past each other.
INDEX_BACKOFF = Backoff(steps=10)


@dataclass
class DataResult(Result):
    """What a reconcile of a Metal3DataClaim or Metal3Data came to; ``ready`` once the data is rendered."""

    ready: bool = False


def template_namespace(template: Mapping[str, Any], namespace: str, field: str) -> str:
    """The namespace of a data template that an object of ``namespace`` names: its own, always. CAPM3's template
    controller serves only the claims of its template's namespace (a claim naming another namespace's template is
    never served there); here such a claim says why, rather than wait for ever. Another namespace's template would
    hand its strings, and its pools' addresses, to whoever names it."""
    given = template.get("namespace") or namespace
    if given != namespace:
        raise Invalid(f"{field}: {given!r} is not the namespace of the object that names it ({namespace!r}); a "
                      "data template serves only its own namespace")
    return given


def template_spec(store: Store, namespace: str, name: str) -> dict[str, Any]:
    return normalize_template_spec(store.get(Ref(INFRA_API, "Metal3DataTemplate", name, namespace)).get("spec") or {})


# -- Metal3DataClaim ------------------------------------------------------------------------------------------

def reconcile_data_claim(store: Store, ref: Ref, dry_run: bool = False) -> DataResult:
    try:
        claim = store.get(ref)
    except NotFound:
        return DataResult(None, message="gone")
    if pause.paused(claim, capi_cluster_of(store, claim)):
        return DataResult(claim, message="paused")
    if claim["metadata"].get("deletionTimestamp"):
        return _delete_claim(store, claim, dry_run)
    claim = ensure_finalizer(store, ref, DATA_CLAIM_FINALIZER, dry_run)
    rendered = (claim.get("status") or {}).get("renderedData")
    if rendered:
        step = reconcile_data(store, Ref(INFRA_API, "Metal3Data", rendered["name"], ref.namespace), dry_run)
        return DataResult(claim, step.changed, step.requeue_after, step.message, step.waits_on, ready=step.ready)
    template = (claim.get("spec") or {}).get("template") or {}
    if not template.get("name"):
        return _claim_status(store, claim, None, "spec.template.name: Required value", dry_run, None)
    try:
        template_ns = template_namespace(template, ref.namespace, "spec.template.namespace")
    except Invalid as e:
        return _claim_status(store, claim, None, str(e), dry_run, None)
    try:
        store.get(Ref(INFRA_API, "Metal3DataTemplate", template["name"], template_ns))
    except NotFound:
        return _claim_status(store, claim, None, f"Metal3DataTemplate {template_ns}/{template['name']} not found",
                             dry_run, WAIT * 5)
    try:
        data = _create_data(store, claim, template["name"], template_ns, dry_run)
    except TooManyConflicts as e:
        return DataResult(claim, False, WAIT, str(e))
    return _claim_status(store, claim, data, "", dry_run, 0.0)


def _create_data(store: Store, claim: Object, template: str, template_ns: str, dry_run: bool) -> Object:
    """The claim's Metal3Data: the one it already has, else a new one at the lowest free index.

    TooManyConflicts when racing claimers took every index tried."""
    namespace, claim_name = claim["metadata"]["namespace"], claim["metadata"]["name"]
    owners = [owner_reference(claim, controller=True),
              *(r for r in claim["metadata"].get("ownerReferences") or [] if not r.get("controller"))]
    labels = {k: v for k, v in (claim["metadata"].get("labels") or {}).items() if k.startswith("cluster.x-k8s.io/")}
    labels[TEMPLATE_LABEL] = label_value(template)
    taken: set[int] = set()  # indexes found taken on create: by data the list does not show (made unlabelled)

    def attempt() -> Object:
        datas = [d for d in store.list(INFRA_API, "Metal3Data", namespace, f"{TEMPLATE_LABEL}={labels[TEMPLATE_LABEL]}")
                 if _named(d, "template") == template]
        for data in datas:  # created by an earlier step that did not get to write the claim's status
            if _named(data, "claim") == claim_name:
                return data
        used = taken | {d["spec"].get("index") for d in datas}
        index = next(i for i in range(len(used) + 1) if i not in used)
        data = {"apiVersion": INFRA_API, "kind": "Metal3Data",
                "metadata": {"name": f"{template}-{index}", "namespace": namespace, "ownerReferences": owners,
                             "finalizers": [DATA_FINALIZER], "labels": labels},
                "spec": {"index": index, "template": {"name": template, "namespace": template_ns},
                         "claim": {"name": claim_name, "namespace": namespace}}}
        try:
            return store.create(data, dry_run=dry_run)
        except AlreadyExists:
            existing = store.get_if_exists(Ref.of(data))
            if existing is not None and _named(existing, "claim") == claim_name:
                return existing  # ours, made before data were labelled
            taken.add(index)
            raise Conflict(f"Metal3Data {namespace}/{template}-{index} was taken by another claim") from None

    try:
        return retry_on_conflict(attempt, INDEX_BACKOFF)
    except TooManyConflicts:
        raise TooManyConflicts(f"Metal3DataClaim {namespace}/{claim_name}: no free index of template {template} "
                               f"in {INDEX_BACKOFF.steps} attempts: others keep taking them") from None


def _claim_status(store: Store, claim: Object, data: Object | None, error: str, dry_run: bool,
                  requeue: float | None) -> DataResult:
    status: dict[str, Any] = {}
    if data is not None:
        status["renderedData"] = {"name": data["metadata"]["name"], "namespace": data["metadata"]["namespace"]}
    if error:
        status["errorMessage"] = error

    return DataResult(_write_status(store, claim, status, dry_run), True, requeue, error or "Metal3Data created")


def _write_status(store: Store, obj: Object, status: dict[str, Any], dry_run: bool) -> Object:
    """``obj`` with ``status``. A claim and its data are each reconciled on their own and inside their
    Metal3Machine's reconcile (the operator runs them at once): another may have written meanwhile, the same
    status from the same state, so a conflict reads again."""
    def write() -> Object:
        current = store.get(Ref.of(obj))
        if (current.get("status") or {}) == status:
            return current
        return store.update_status({**current, "status": status}, dry_run=dry_run)

    return obj if (obj.get("status") or {}) == status else retry_on_conflict(write)


def _delete_claim(store: Store, claim: Object, dry_run: bool) -> DataResult:
    ref = Ref.of(claim)
    rendered = (claim.get("status") or {}).get("renderedData")
    if rendered:
        data_ref = Ref(INFRA_API, "Metal3Data", rendered["name"], ref.namespace)
        if controlled_by(store.get_if_exists(data_ref), claim):  # status names it; only the claim's own goes
            with contextlib.suppress(NotFound):
                store.delete(data_ref, dry_run=dry_run)
            step = reconcile_data(store, data_ref, dry_run)
            if step.obj is not None:
                return DataResult(claim, True, WAIT, f"releasing {data_ref}")
    remove_finalizer(store, ref, DATA_CLAIM_FINALIZER, dry_run)
    return DataResult(None, message="released", changed=True)


# -- Metal3Data --------------------------------------------------------------------------------------------

def reconcile_data(store: Store, ref: Ref, dry_run: bool = False) -> DataResult:
    try:
        data = store.get(ref)
    except NotFound:
        return DataResult(None, message="gone")
    if pause.paused(data, capi_cluster_of(store, data)):
        return DataResult(data, message="paused")
    if data["metadata"].get("deletionTimestamp"):
        return _delete_data(store, data, dry_run)
    view = cast("Metal3Data", data)  # as stored: its schema holds
    if (view.get("status") or {}).get("ready"):
        return DataResult(data, ready=True)
    namespace = ref.namespace
    claim_name = _named(data, "claim")
    claim = store.get_if_exists(Ref(INFRA_API, "Metal3DataClaim", claim_name, namespace)) if claim_name else None
    if claim is None:
        return DataResult(data, False, WAIT, "waiting for its Metal3DataClaim")
    objects = _objects(store, claim)
    if "metal3machine" not in objects or "baremetalhost" not in objects:
        return DataResult(data, False, WAIT, "waiting for the Metal3Machine to be associated with a host")
    m3m_name = objects["metal3machine"]["metadata"]["name"]
    try:
        template = view["spec"].get("template") or {}
        if not template.get("name"):
            raise Invalid("spec.template.name: Required value")
        spec = template_spec(store, template_namespace(template, namespace, "spec.template.namespace"),
                             template["name"])
    except Invalid as e:
        return _data_status(store, data, False, str(e), dry_run)
    names = {"metaData": f"{m3m_name}-metadata"}
    if spec.get("networkData") is not None:  # as CAPM3: a template without networkData renders no Secret of it
        names["networkData"] = f"{m3m_name}-networkdata"
    existing = {key: store.get_if_exists(Ref("v1", "Secret", name, namespace)) for key, name in names.items()}
    foreign = [name for key, name in names.items()
               if existing[key] is not None and not controlled_by(existing[key], data)]
    if foreign:  # someone else's Secret under the name the data renders to: never overwritten nor read back
        return _foreign_secret(store, data, foreign[0], dry_run)
    try:
        if all(existing.values()):  # never rendered again: a node reprovisions in the exact same state
            rendered = {}
        else:
            addresses: dict[str, Address] = {}
            for pool in pool_names(spec, objects):
                address = _address(store, data, pool, dry_run)
                if address is None:
                    return DataResult(data, False, WAIT, f"waiting for an address from IPPool {pool}",
                                      [Ref(IPAM_API, "IPClaim", _address_claim_name(data, pool), namespace)])
                addresses[pool] = address
            rendered = {"metaData": render_meta_data(spec.get("metaData") or {}, view["spec"]["index"], objects,
                                                     addresses, namespace)}
            if "networkData" in names:
                rendered["networkData"] = render_network_data(spec["networkData"], addresses,
                                                              objects["baremetalhost"], objects)
    except Invalid as e:
        return _data_status(store, data, False, str(e), dry_run)
    for key, name in names.items():
        if not existing[key]:
            try:
                store.create({"apiVersion": "v1", "kind": "Secret", "type": SECRET_TYPE,
                              "metadata": {"name": name, "namespace": namespace,
                                           "ownerReferences": [owner_reference(data, controller=True)]},
                              "stringData": {key: dump_yaml(rendered[key])}}, dry_run=dry_run)
            except AlreadyExists:
                # The data's claim and the data itself are reconciled apart (the operator runs both at once):
                # the other one rendered it meanwhile, the same render. Any other Secret is left alone.
                winner = store.get_if_exists(Ref("v1", "Secret", name, namespace))
                if winner is None or not controlled_by(winner, data):
                    return _foreign_secret(store, data, name, dry_run)

    def refer() -> Object:
        current = store.get(ref)
        current["spec"].update({key: {"name": name, "namespace": namespace} for key, name in names.items()})
        return current if current == data else store.update(current, dry_run=dry_run)

    data = retry_on_conflict(refer)
    return _data_status(store, data, True, "", dry_run)


def _foreign_secret(store: Store, data: Object, name: str, dry_run: bool) -> DataResult:
    namespace = data["metadata"]["namespace"]
    return _data_status(store, data, False, f"Secret {namespace}/{name} exists and was not rendered by this "
                                            "Metal3Data; it is left alone", dry_run)


def _named(data: Object, field: Literal["claim", "template"]) -> str | None:
    """The name a Metal3Data's spec.claim or spec.template gives (v1beta2 leaves an empty reference out)."""
    return ((cast("Metal3Data", data).get("spec") or {}).get(field) or {}).get("name")


def _objects(store: Store, claim: Object) -> dict[str, Object]:
    """machine, metal3machine and baremetalhost of a claim, as far as they exist yet."""
    namespace = claim["metadata"]["namespace"]
    objects: dict[str, Object] = {}
    owner = owner_named(claim, "Metal3Machine")
    m3m = store.get_if_exists(Ref(INFRA_API, "Metal3Machine", owner["name"] if owner else claim["metadata"]["name"],
                                  namespace))
    if m3m is None:
        return objects
    objects["metal3machine"] = m3m
    machine = owner_named(m3m, "Machine")
    annotations = m3m["metadata"].get("annotations") or {}
    host = annotations.get(HOST_ANNOTATION)
    host_ns, host_name = split_reference(host or "", namespace)
    claim_ns, claim_name = split_reference(annotations.get(HOST_CLAIM_ANNOTATION) or "", namespace)
    bare_metal_host: Object | None
    if claim_name:  # HostClaim mode: the host as its claim shows it
        host_claim = store.get_if_exists(Ref(BMH_API, hostclaim.KIND, claim_name, claim_ns))
        bare_metal_host = hostclaim.host_view(store, host_claim)
    else:
        bare_metal_host = store.get_if_exists(Ref(BMH_API, "BareMetalHost", host_name, host_ns)) \
            if host else None
    found = {"machine": store.get_if_exists(Ref(CAPI_API, "Machine", machine["name"], namespace)) if machine else None,
             "baremetalhost": bare_metal_host}
    objects.update({key: obj for key, obj in found.items() if obj is not None})
    return objects


def _address_claim_name(data: Object, pool: str) -> str:
    return f"{data['metadata']['name']}-{pool}"


def _address(store: Store, data: Object, pool: str, dry_run: bool) -> Address | None:
    """The address of IPClaim ``<data>-<pool>``, made when missing; None while the pool has none yet."""
    namespace = data["metadata"]["namespace"]
    claim = claim_object(_address_claim_name(data, pool), namespace, pool, namespace,
                         {DATA_NAME_LABEL: data["metadata"]["name"], POOL_NAME_LABEL: pool})
    claim["metadata"]["ownerReferences"] = [owner_reference(data, controller=True)]
    _outcome, allocation = ensure_claim(store, claim, dry_run)
    if allocation.error:
        raise Invalid(f"IPPool {pool}: {allocation.error}")
    return Address.of(allocation.address) if allocation.address is not None else None


def _data_status(store: Store, data: Object, ready: bool, error: str, dry_run: bool) -> DataResult:
    status = {"ready": ready, **({"errorMessage": error} if error else {})}
    return DataResult(_write_status(store, data, status, dry_run), True, None, error or "rendered", ready=ready)


def _delete_data(store: Store, data: Object, dry_run: bool) -> DataResult:
    """Release the addresses (IPClaims <data>-<pool>), then let the data and its secrets go."""
    namespace = data["metadata"]["namespace"]
    for claim in store.list(IPAM_API, "IPClaim", namespace, f"{DATA_NAME_LABEL}={data['metadata']['name']}"):
        claim_absent(store, Ref.of(claim), dry_run)
    spec = cast("Metal3Data", data)["spec"]
    for name in ((spec.get("metaData") or {}).get("name"), (spec.get("networkData") or {}).get("name")):
        secret = store.get_if_exists(Ref("v1", "Secret", name, namespace)) if name else None
        # the spec names it; only a Secret this data rendered is deleted
        if secret is not None and controlled_by(secret, data):
            with contextlib.suppress(NotFound):
                store.delete(Ref.of(secret), dry_run=dry_run)
    try:
        remove_finalizer(store, Ref.of(data), DATA_FINALIZER, dry_run)
    except Conflict:
        return DataResult(data, False, WAIT, "will retry")
    return DataResult(None, message="released", changed=True)
