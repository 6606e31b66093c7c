# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""CAPM3's names: API versions, finalizers, annotations, labels; and owner references.

The engine reads and writes CAPM3's objects at today's version, v1beta2 (the CRDs' storage version); objects
written at v1beta1 are converted on the way (api/conversion.py: by the local store, or by kube-apiserver through
the conversion webhook), so the flow is the same whichever version a user's manifests are at.
"""
from __future__ import annotations

from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.core import objects, pause
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store

INFRA_API = "infrastructure.cluster.x-k8s.io/v1beta2"
CAPI_API = "cluster.x-k8s.io/v1beta1"
# A control plane provider's API group (KubeadmControlPlane's): an owner of it makes a machine a control plane's.
CONTROL_PLANE_GROUP = "controlplane.cluster.x-k8s.io"

MACHINE_FINALIZER = "metal3machine.infrastructure.cluster.x-k8s.io"
DATA_CLAIM_FINALIZER = "metal3dataclaim.infrastructure.cluster.x-k8s.io"
DATA_FINALIZER = "metal3data.infrastructure.cluster.x-k8s.io"
CLUSTER_FINALIZER = "metal3cluster.infrastructure.cluster.x-k8s.io"

HOST_ANNOTATION = "metal3.io/BareMetalHost"  # on the Metal3Machine: <namespace>/<host>, the association record
# Ours, for HostClaim mode: on the Metal3Machine, <namespace>/<name> of the HostClaim it made (the record its data
# renders from, as HOST_ANNOTATION is in the direct mode).
HOST_CLAIM_ANNOTATION = "metal3.io/HostClaim"
PAUSED_ANNOTATION = pause.PAUSED_ANNOTATION  # Cluster API's; the one check is core/pause.py's paused()
CLONED_FROM_NAME = "cluster.x-k8s.io/cloned-from-name"
CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"
SECRET_TYPE = "infrastructure.cluster.x-k8s.io/secret"

# Lives in core (the IPAM engine, below capm3, makes owner references too); named here too for CAPM3's callers.
owner_reference = objects.owner_reference


def owner_named(obj: Object, kind: str) -> dict[str, Any] | None:
    return next((r for r in obj["metadata"].get("ownerReferences") or [] if r.get("kind") == kind), None)


def capi_cluster_of(store: Store, obj: Object) -> Object | None:
    """The Cluster API Cluster ``obj`` belongs to (its cluster-name label), when there is one: its spec.paused
    pauses ``obj`` (core/pause.py)."""
    name = pause.cluster_name(obj)
    return store.get_if_exists(Ref(CAPI_API, "Cluster", name, obj["metadata"]["namespace"])) if name else None
