# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Cluster API's pause, in one place: every reconciler of a kind that a move carries asks here.

An object is paused by the ``cluster.x-k8s.io/paused`` annotation on it, or by ``spec.paused`` on its Cluster
(``clusterctl move`` sets both, and so does metal3.baremetal.move). A paused object is read, never written.
"""
from __future__ import annotations

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object

PAUSED_ANNOTATION = "cluster.x-k8s.io/paused"
CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"


def cluster_name(obj: Object) -> str:
    """The name of the Cluster ``obj`` belongs to (its cluster-name label), or ''."""
    return str(((obj.get("metadata") or {}).get("labels") or {}).get(CLUSTER_NAME_LABEL) or "")


def paused(obj: Object | None, cluster: Object | None = None) -> bool:
    """Whether ``obj`` carries the pause annotation, or ``cluster`` (its Cluster, when known) has spec.paused."""
    if obj is not None and PAUSED_ANNOTATION in ((obj.get("metadata") or {}).get("annotations") or {}):
        return True
    return bool(((cluster or {}).get("spec") or {}).get("paused"))
