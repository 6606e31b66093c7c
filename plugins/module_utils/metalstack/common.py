# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The metal-stack provider's names, and how its objects find each other.

There is no metal-api: a "network ID" names an IPPool of the namespace, a machine type a MachineType beside the
hosts, a partition a failure domain, and a machine ID a BareMetalHost (its Ironic node UUID, or its name).
"""
from __future__ import annotations

import json
import re
from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import (
    CAPI_API,
    CLUSTER_NAME_LABEL,
    owner_reference,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import parse_yaml
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store

GROUP = "infrastructure.cluster.x-k8s.io"
CLUSTER_API = f"{GROUP}/v1alpha3"  # the versions the provider's design document writes
MACHINE_API = f"{GROUP}/v1alpha3"
FIREWALL_API = f"{GROUP}/v1alpha4"
# Upstream's finalizers (cluster-api-provider-metal-stack), and the same form for the firewall.
CLUSTER_FINALIZER = "metal-stack.infrastructure.cluster.x-k8s.io/cluster"
MACHINE_FINALIZER = "metal-stack.infrastructure.cluster.x-k8s.io/machine"
FIREWALL_FINALIZER = "metal-stack.infrastructure.cluster.x-k8s.io/firewall"
# Upstream's condition types.
NODE_NETWORK_ENSURED = "ClusterNodeNetworkEnsured"
CONTROL_PLANE_IP_ENSURED = "ClusterControlPlaneIPEnsured"
MACHINE_CREATED = "MachineCreated"
MACHINE_READY = "MachineReady"
FIREWALL_ENSURED = "ClusterFirewallEnsured"
DEFAULT_PORT = 443  # upstream's ClusterControlPlaneEndpointDefaultPort
IMAGES_CONFIGMAP = "metal-stack-images"
IMAGE_FIELDS = ("url", "checksum", "checksumType", "diskFormat")
PROVIDER_ID = re.compile(r"^(?:metalstack://(?P<id>[A-Za-z0-9._-]+)|metal://[A-Za-z0-9._-]+/(?P<upstream>[A-Za-z0-9._-]+))$")


def machine_type(spec: dict[str, Any], field: str = "spec") -> str:
    """spec.machineType, or upstream's spelling spec.size; both set differently is an error."""
    given, size = spec.get("machineType"), spec.get("size")
    if given and size and given != size:
        raise Invalid(f"{field}.size: {size!r} differs from {field}.machineType {given!r}; set one of them")
    return str(given or size or "")


def pinned_id(spec: dict[str, Any], field: str = "spec.providerID") -> str:
    """The machine ID a providerID pins (``metalstack://<id>``, or upstream's ``metal://<partition>/<id>``); ''
    when none is given."""
    value = spec.get("providerID") or ""
    if not value:
        return ""
    match = PROVIDER_ID.fullmatch(value)
    if match is None:
        raise Invalid(f"{field}: {value!r} is not a machine ID (metalstack://<id> or metal://<partition>/<id>)")
    return match.group("id") or match.group("upstream")


def host_id(host: Object) -> str:
    """A host's machine ID: its Ironic node UUID once registered, else its name."""
    return str(((host.get("status") or {}).get("provisioning") or {}).get("ID") or host["metadata"]["name"])


def is_host(host: Object, machine_id: str) -> bool:
    return machine_id in (host_id(host), host["metadata"]["name"])


def resolve_image(store: Store, namespace: str, image: str, field: str = "spec.image") -> dict[str, Any]:
    """A BareMetalHost image for ``image``: metal-stack names images, so the name is looked up in the
    namespace's ConfigMap metal-stack-images (name -> {url, checksum, checksumType, diskFormat}). Invalid,
    naming the field, when it is not there."""
    catalogue = store.get_if_exists(Ref("v1", "ConfigMap", IMAGES_CONFIGMAP, namespace))
    entries = (catalogue or {}).get("data") or {}
    if image not in entries:
        known = ", ".join(sorted(entries)) or "none"
        raise Invalid(f"{field}: {image!r} is not an image of ConfigMap {namespace}/{IMAGES_CONFIGMAP} "
                      f"(its images: {known})")
    where = f"ConfigMap {namespace}/{IMAGES_CONFIGMAP} data.{image}"
    entry = parse_yaml(entries[image], where)
    if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
        raise Invalid(f"{where}: must be a mapping with a url (and checksum, checksumType, diskFormat)")
    unknown = sorted(set(entry) - set(IMAGE_FIELDS))
    if unknown:
        raise Invalid(f"{where}: unknown field {unknown[0]!r}; known: {', '.join(IMAGE_FIELDS)}")
    host_image = {key: str(entry[key]) for key in ("url", "checksum", "checksumType") if entry.get(key)}
    if entry.get("diskFormat"):
        host_image["format"] = str(entry["diskFormat"])
    return host_image


def capi_cluster(store: Store, name: str, namespace: str) -> Object | None:
    return store.get_if_exists(Ref(CAPI_API, "Cluster", name, namespace)) if name else None


def cluster_for(store: Store, obj: Object, capi_machine: Object | None = None) -> Object | None:
    """The MetalStackCluster an object belongs to: through its cluster-name label (or its Machine's clusterName),
    the Cluster API Cluster's infrastructureRef; without Cluster API, the MetalStackCluster of that name."""
    namespace = obj["metadata"]["namespace"]
    name = ((obj["metadata"].get("labels") or {}).get(CLUSTER_NAME_LABEL)
            or ((capi_machine or {}).get("spec") or {}).get("clusterName") or "")
    if not name:
        return None
    cluster = capi_cluster(store, name, namespace)
    infra = ((cluster or {}).get("spec") or {}).get("infrastructureRef") or {}
    if infra.get("kind") == "MetalStackCluster" and infra.get("name"):
        name = infra["name"]
    return store.get_if_exists(Ref(CLUSTER_API, "MetalStackCluster", name, namespace))


def capi_owner(store: Store, obj: Object, kind: str) -> Object | None:
    """The Cluster API object (Cluster or Machine) of the namespace whose infrastructureRef names ``obj``."""
    namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    for candidate in store.list(CAPI_API, kind, namespace):
        infra = (candidate.get("spec") or {}).get("infrastructureRef") or {}
        if infra.get("kind") == obj["kind"] and infra.get("name") == name:
            return candidate
    return None


def owner_patch(obj: Object, owner: Object | None) -> dict[str, Any] | None:
    """The metadata patch that adds ``owner`` to ``obj``'s ownerReferences, as Cluster API's controllers do for
    an infrastructure object; None when there is nothing to add."""
    if owner is None:
        return None
    references = obj["metadata"].get("ownerReferences") or []
    if any(r.get("uid") == owner["metadata"].get("uid") for r in references):
        return None
    return {"metadata": {"ownerReferences": [*references, owner_reference(owner)]}}


def rules_of(store: Store, namespace: str, spec: dict[str, Any], field: str) -> dict[str, Any]:
    """The egressRules and ingressRules of the ConfigMap ``spec.ruleSetRef`` names (data.rules), {} for none."""
    ref = spec.get("ruleSetRef")
    if not ref:
        return {}
    configmap = store.get_if_exists(Ref("v1", "ConfigMap", ref["name"], namespace))
    if configmap is None:
        raise Invalid(f"{field}.ruleSetRef.name: ConfigMap {namespace}/{ref['name']} does not exist")
    text = (configmap.get("data") or {}).get("rules")
    if text is None:
        raise Invalid(f"{field}.ruleSetRef.name: ConfigMap {namespace}/{ref['name']} has no data.rules")
    rules = parse_yaml(text, f"ConfigMap {namespace}/{ref['name']} data.rules")
    if not isinstance(rules, dict):
        raise Invalid(f"ConfigMap {namespace}/{ref['name']} data.rules: must be a mapping of egressRules and "
                      f"ingressRules, not {json.dumps(rules)[:80]}")
    return rules
