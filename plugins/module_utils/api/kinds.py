# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The kinds the local store knows: the collection's CRDs, and kinds owned by others.

The collection's own kinds come from its CRDs (config/crd, embedded in crds.py),
so the local backend validates against the schemas kube-apiserver uses. Kinds
owned by Kubernetes or Cluster API are stored as given.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.errors import UnknownKind
from ansible_collections.metal3.baremetal.plugins.module_utils.store.objects import split_api_version


@dataclass(frozen=True)
class KindInfo:
    group: str
    kind: str
    plural: str
    versions: tuple[str, ...]
    namespaced: bool = True
    status_subresource: bool = False
    # openAPIV3Schema of the CRD; None for kinds stored as given.
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)

    @property
    def resource(self) -> str:
        """'ippools.ipam.metal3.io', as kube-apiserver names a resource in its messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        """'IPPool.ipam.metal3.io', as kube-apiserver names a kind in Invalid messages."""
        return f"{self.kind}.{self.group}" if self.group else self.kind


# Kinds owned by others that the collection reads or writes: (group, kind, plural, versions, status subresource).
FOREIGN_KINDS = (
    ("", "Secret", "secrets", ("v1",), False),
    ("", "ConfigMap", "configmaps", ("v1",), False),
    ("", "Event", "events", ("v1",), False),
    ("cluster.x-k8s.io", "Cluster", "clusters", ("v1beta1", "v1beta2"), True),
    ("cluster.x-k8s.io", "Machine", "machines", ("v1beta1", "v1beta2"), True),
    ("cluster.x-k8s.io", "MachineDeployment", "machinedeployments", ("v1beta1", "v1beta2"), True),
    ("ipam.cluster.x-k8s.io", "IPAddressClaim", "ipaddressclaims", ("v1beta1", "v1beta2"), True),
    ("ipam.cluster.x-k8s.io", "IPAddress", "ipaddresses", ("v1beta1", "v1beta2"), False),
)


@lru_cache(maxsize=1)
def _registry() -> dict[tuple[str, str], KindInfo]:
    from ansible_collections.metal3.baremetal.plugins.module_utils.api.crds import CRDS

    registry: dict[tuple[str, str], KindInfo] = {}
    for group, kind, plural, versions, status in FOREIGN_KINDS:
        registry[(group, kind)] = KindInfo(group, kind, plural, versions, True, status)
    for crd in CRDS:
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
