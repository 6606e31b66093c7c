# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The kinds the local store knows: the collection's CRDs, and kinds owned by others.

The collection's own kinds come from its CRDs (config/crd, generated into crds.py),
so the local backend validates against the schemas kube-apiserver uses, each served
version against its own. Kinds owned by Kubernetes or Cluster API are stored as given.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import UnknownKind
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import split_api_version


@dataclass(frozen=True)
class KindInfo:
    group: str
    kind: str
    plural: str
    versions: tuple[str, ...]
    namespaced: bool = True
    status_subresource: bool = False
    # openAPIV3Schema of the CRD's storage version; None for kinds stored as given.
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    # openAPIV3Schema of each served version, by version name (None for a version without one); None for kinds
    # stored as given.
    schemas: dict[str, dict[str, Any] | None] | None = field(default=None, compare=False, hash=False)
    # The version the CRD stores ('' for kinds stored as given, at whatever version they were written).
    storage: str = ""

    @property
    def resource(self) -> str:
        """'ippools.ipam.metal3.io', as kube-apiserver names a resource in its messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        """'IPPool.ipam.metal3.io', as kube-apiserver names a kind in Invalid messages."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    def schema_for(self, version: str) -> dict[str, Any] | None:
        """The openAPIV3Schema of ``version`` (each served version has its own), else the storage version's."""
        return (self.schemas or {}).get(version, self.schema)


# Kinds owned by others that the collection reads or writes, or that a whole Cluster API cluster template holds
# (CAPM3's clusterctl and e2e templates), stored as given: (group, kind, plural, versions, status subresource).
# The versions are those Kubernetes and Cluster API (v1.11 and later) serve.
CAPI_VERSIONS = ("v1beta1", "v1beta2")
FOREIGN_KINDS = (
    ("", "Namespace", "namespaces", ("v1",), True),
    ("", "Secret", "secrets", ("v1",), False),
    ("", "ConfigMap", "configmaps", ("v1",), False),
    ("", "Event", "events", ("v1",), False),
    ("cluster.x-k8s.io", "Cluster", "clusters", CAPI_VERSIONS, True),
    ("cluster.x-k8s.io", "ClusterClass", "clusterclasses", CAPI_VERSIONS, True),
    ("cluster.x-k8s.io", "Machine", "machines", CAPI_VERSIONS, True),
    ("cluster.x-k8s.io", "MachineSet", "machinesets", CAPI_VERSIONS, True),
    ("cluster.x-k8s.io", "MachineDeployment", "machinedeployments", CAPI_VERSIONS, True),
    ("cluster.x-k8s.io", "MachineHealthCheck", "machinehealthchecks", CAPI_VERSIONS, True),
    ("controlplane.cluster.x-k8s.io", "KubeadmControlPlane", "kubeadmcontrolplanes", CAPI_VERSIONS, True),
    ("controlplane.cluster.x-k8s.io", "KubeadmControlPlaneTemplate", "kubeadmcontrolplanetemplates", CAPI_VERSIONS,
     False),
    ("bootstrap.cluster.x-k8s.io", "KubeadmConfig", "kubeadmconfigs", CAPI_VERSIONS, True),
    ("bootstrap.cluster.x-k8s.io", "KubeadmConfigTemplate", "kubeadmconfigtemplates", CAPI_VERSIONS, False),
    ("addons.cluster.x-k8s.io", "ClusterResourceSet", "clusterresourcesets", CAPI_VERSIONS, True),
    ("ipam.cluster.x-k8s.io", "IPAddressClaim", "ipaddressclaims", CAPI_VERSIONS, True),
    ("ipam.cluster.x-k8s.io", "IPAddress", "ipaddresses", CAPI_VERSIONS, False),
)
# Of those, the kinds that live outside any namespace.
CLUSTER_SCOPED_FOREIGN_KINDS = {("", "Namespace")}


@lru_cache(maxsize=1)
def _registry() -> dict[tuple[str, str], KindInfo]:
    from ansible_collections.metal3.baremetal.plugins.module_utils.api.crds import crds

    registry: dict[tuple[str, str], KindInfo] = {}
    for group, kind, plural, versions, status in FOREIGN_KINDS:
        registry[(group, kind)] = KindInfo(group, kind, plural, versions,
                                           (group, kind) not in CLUSTER_SCOPED_FOREIGN_KINDS, status)
    for crd in crds():
        spec = crd["spec"]
        served = [v for v in spec["versions"] if v.get("served", True)]
        storage = next((v for v in served if v.get("storage")), served[0])
        registry[(spec["group"], spec["names"]["kind"])] = KindInfo(
            group=spec["group"],
            kind=spec["names"]["kind"],
            plural=spec["names"]["plural"],
            versions=tuple(v["name"] for v in served),
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            status_subresource="status" in (storage.get("subresources") or {}),
            schema=(storage.get("schema") or {}).get("openAPIV3Schema"),
            schemas={v["name"]: (v.get("schema") or {}).get("openAPIV3Schema") for v in served},
            storage=storage["name"],
        )
    return registry


def lookup(api_version: str, kind: str) -> KindInfo:
    """The KindInfo of ``kind`` in ``api_version``; UnknownKind when the store does not know it."""
    group, version = split_api_version(api_version)
    info = _registry().get((group, kind))
    if info is None or version not in info.versions:
        known = sorted(f"{k[1]} ({k[0] or 'core'})" for k in _registry())
        raise UnknownKind(f"unknown kind {kind!r} in apiVersion {api_version!r}: "
                          f"the local store knows {', '.join(known)}")
    return info


def known_kinds() -> list[KindInfo]:
    """Every kind the store knows."""
    return list(_registry().values())
