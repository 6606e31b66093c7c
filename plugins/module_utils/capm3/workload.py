# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The workload cluster, as CAPM3 reaches it: through the ``<cluster>-kubeconfig`` Secret Cluster API keeps in
the Cluster's namespace (key ``value``), with no credential beyond it. Two things are done there for a machine
whose host is provisioned:

- its Node gets the machine's ``spec.providerID`` when kubelet did not set one: the Node is the one kubelet
  labelled ``metal3.io/uuid`` with the meta_data's uuid, the host's UID (CAPM3's providerID workflow). Once
  Cluster API's Machine names its Node (``status.nodeRef``), that Node is read by name and no Node is listed;
- the host's labels under the prefixes the Metal3Cluster's ``metal3.io/metal3-label-sync-prefixes`` annotation
  lists (comma-separated DNS subdomains; a label's prefix is what comes before its '/') are the Node's under
  those prefixes: added, changed and removed as on the host (CAPM3's label sync). Kubernetes' own prefixes
  (kubernetes.io, k8s.io and their subdomains) are refused, as CAPM3 refuses them.

The Secret is written by Cluster API, or by whoever can write Secrets in the namespace: it is checked as
core/kubeconfigs.py checks any, and the cluster it names answers within WORKLOAD_TIMEOUT.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.kubeconfigs import checked_kubeconfig
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import (
    DNS_SUBDOMAIN,
    SUBDOMAIN_RULE,
    Object,
    Ref,
    secret_values,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store

KUBECONFIG_KEY = "value"
UUID_LABEL = "metal3.io/uuid"
LABEL_SYNC_ANNOTATION = "metal3.io/metal3-label-sync-prefixes"
RESERVED_LABEL_DOMAINS = ("kubernetes.io", "k8s.io")
# (connect, read) seconds of each request to the workload cluster's API.
WORKLOAD_TIMEOUT = (10.0, 30.0)


def kubeconfig_secret(cluster_name: str) -> str:
    return f"{cluster_name}-kubeconfig"


def open_workload(store: Store, namespace: str, cluster_name: str, outbound: OutboundPolicy | None = None
                  ) -> Store | None:
    """The workload cluster of Cluster ``cluster_name``; None while Cluster API has written no kubeconfig for it.
    KubeconfigRefused for a kubeconfig that cannot be used, Unavailable for a cluster that does not answer."""
    name = kubeconfig_secret(cluster_name)
    secret = store.get_if_exists(Ref("v1", "Secret", name, namespace))
    if secret is None:
        return None
    config = checked_kubeconfig(secret_values(secret).get(KUBECONFIG_KEY), f"Secret {namespace}/{name}",
                                KUBECONFIG_KEY, outbound)
    from ansible_collections.metal3.baremetal.plugins.module_utils.store.kube import KubernetesStore

    return KubernetesStore(kubeconfig=config, request_timeout=WORKLOAD_TIMEOUT, untrusted=True)


def label_sync_prefixes(metal3_cluster: Object | None) -> set[str]:
    """The prefixes the Metal3Cluster's annotation lists; Invalid naming the annotation for a bad one."""
    text = ((metal3_cluster or {}).get("metadata", {}).get("annotations") or {}).get(LABEL_SYNC_ANNOTATION) or ""
    field = f"metadata.annotations[{LABEL_SYNC_ANNOTATION}]"
    prefixes = set()
    for prefix in (p.strip() for p in text.split(",")):
        if not prefix:
            continue
        if len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix):
            raise Invalid(f"{field}: invalid prefix {prefix!r}: {SUBDOMAIN_RULE}")
        if any(prefix == domain or prefix.endswith(f".{domain}") for domain in RESERVED_LABEL_DOMAINS):
            raise Invalid(f"{field}: invalid prefix {prefix!r}: {prefix} is reserved for Kubernetes")
        prefixes.add(prefix)
    return prefixes


def synced_labels(prefixes: set[str], labels: dict[str, str]) -> dict[str, str]:
    """The labels whose prefix is one of ``prefixes``."""
    return {key: value for key, value in labels.items()
            if "/" in key and key.split("/", 1)[0] in prefixes and key.split("/", 1)[1]}


@dataclass
class NodeStep:
    """What one pass over the machine's Node did: its name ('' when there is none yet), whether it wrote, and
    what it waits for."""

    node: str = ""
    changed: bool = False
    message: str = ""


def reconcile_node(workload: Store, provider_id: str, host_labels: dict[str, str], prefixes: set[str],
                   node_name: str = "", host_uid: str = "", dry_run: bool = False) -> NodeStep:
    """The machine's Node: its providerID set if kubelet set none, its synced labels the host's. The Node is
    ``node_name`` (the Machine's nodeRef) when it has ``provider_id``, else the one kubelet labelled with
    ``host_uid``; with neither (a HostClaim's machine, whose tenant does not see the host's UID) the step waits
    for Cluster API to find the Node by its providerID."""
    node = workload.get_if_exists(Ref("v1", "Node", node_name, "")) if node_name else None
    if node is not None and (node.get("spec") or {}).get("providerID") != provider_id:
        node = None
    if node is None:
        if not host_uid:
            return NodeStep(message=f"waiting for a Node with providerID {provider_id}")
        labelled = workload.list("v1", "Node", None, label_selector=f"{UUID_LABEL}={host_uid}")
        if not labelled:
            return NodeStep(message=f"waiting for the Node labelled {UUID_LABEL}={host_uid}")
        if len(labelled) > 1:
            names = ", ".join(sorted(n["metadata"]["name"] for n in labelled))
            return NodeStep(message=f"Nodes {names} are all labelled {UUID_LABEL}={host_uid}: none is given a "
                            "providerID")
        node = labelled[0]
        given = (node.get("spec") or {}).get("providerID")
        if given and given != provider_id:
            return NodeStep(node["metadata"]["name"], message=f"Node {node['metadata']['name']} has providerID "
                            f"{given}, not the machine's {provider_id}")
    name = node["metadata"]["name"]
    patch: dict[str, Any] = {}
    if not (node.get("spec") or {}).get("providerID"):
        patch["spec"] = {"providerID": provider_id}
    wanted = synced_labels(prefixes, host_labels)
    current = synced_labels(prefixes, node["metadata"].get("labels") or {})
    labels: dict[str, str | None] = {key: None for key in current if key not in wanted}
    labels.update({key: value for key, value in wanted.items() if current.get(key) != value})
    if labels:
        patch["metadata"] = {"labels": labels}
    if patch:
        workload.patch(Ref("v1", "Node", name, ""), patch, dry_run=dry_run)
    return NodeStep(name, bool(patch))
