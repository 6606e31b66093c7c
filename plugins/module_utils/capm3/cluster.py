# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Metal3Cluster, as CAPM3's cluster controller: provisioned (status.initialization.provisioned) once its
control-plane endpoint is set, its failure domains published in status, and, deleted, gone only once none of its
Metal3Machines is left - and, unlike CAPM3, having let go of the hosts its Cluster kept for node reuse, which CAPM3
leaves held by a Cluster that no longer exists."""
from __future__ import annotations

import copy
from dataclasses import dataclass

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import (
    CAPI_API,
    CLUSTER_FINALIZER,
    CLUSTER_NAME_LABEL,
    INFRA_API,
    capi_cluster_of,
    owner_named,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core import pause
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.core.reconcile import Result
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.claim import Consumer, release_kept_hosts
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.writes import (
    ensure_finalizer,
    remove_finalizer,
    set_condition,
)

READY_CONDITION = "BaremetalInfrastructureReady"
READY_REASON = "Ready"  # upstream's BaremetalInfrastructureReadyReason
WAIT = 5.0


@dataclass
class ClusterResult(Result):
    """What a reconcile of a Metal3Cluster came to; ``ready`` once it is provisioned."""

    ready: bool = False


def reconcile_metal3cluster(store: Store, ref: Ref, dry_run: bool = False) -> ClusterResult:
    try:
        cluster = store.get(ref)
    except NotFound:
        return ClusterResult(None, message="gone")
    if pause.paused(cluster, capi_cluster_of(store, cluster)):
        return ClusterResult(cluster, message="paused")
    if cluster["metadata"].get("deletionTimestamp"):
        machines = store.list(INFRA_API, "Metal3Machine", ref.namespace, f"{CLUSTER_NAME_LABEL}={ref.name}")
        if machines:
            return ClusterResult(cluster, False, WAIT, f"waiting for {len(machines)} Metal3Machines to go")
        owner = owner_named(cluster, "Cluster")
        capi_name = owner["name"] if owner else pause.cluster_name(cluster)
        if capi_name:
            release_kept_hosts(store, ref.namespace, Consumer(CAPI_API, "Cluster", capi_name, ref.namespace), dry_run)
        remove_finalizer(store, ref, CLUSTER_FINALIZER, dry_run)
        return ClusterResult(None, True, message="deleted")
    before = cluster
    cluster = ensure_finalizer(store, ref, CLUSTER_FINALIZER, dry_run)
    spec = cluster.get("spec") or {}
    endpoint = spec.get("controlPlaneEndpoint") or {}
    ready = bool(endpoint.get("host")) and bool(endpoint.get("port"))
    status = copy.deepcopy(cluster.get("status") or {})
    status["initialization"] = {**(status.get("initialization") or {}), "provisioned": ready}
    status["failureDomains"] = copy.deepcopy(spec.get("failureDomains") or [])  # a list in v1beta2
    if not status["failureDomains"]:
        del status["failureDomains"]
    status["conditions"] = set_condition(status.get("conditions"), READY_CONDITION, ready,
                                         READY_REASON if ready else "ControlPlaneEndpointMissing",
                                         "" if ready else "spec.controlPlaneEndpoint: host and port are required")
    if status != cluster.get("status"):
        cluster = store.update_status({**cluster, "status": status}, dry_run=dry_run)
    return ClusterResult(cluster, cluster != before, None, "ready" if ready else "no control-plane endpoint",
                         ready=ready)
