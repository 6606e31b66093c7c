# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""MetalStackCluster, as the metal-stack provider's cluster controller: the cluster's own node network (a prefix
of its partition's IPPrefixPool, made an IPPool), a control-plane address of the public network when the endpoint
is empty, and its MetalStackFirewall. Deleted, it frees them in upstream's order: machines first, then the
firewall, then the control-plane address, then the network."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import (
    CLUSTER_NAME_LABEL,
    owner_named,
    owner_reference,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core import pause
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid, NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref, controlled_by
from ansible_collections.metal3.baremetal.plugins.module_utils.core.reconcile import Result
from ansible_collections.metal3.baremetal.plugins.module_utils.core.retry import retry_on_conflict
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import IPAM_API
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.claims import pool_absent
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.prefixes import (
    PREFIX_API,
    prefix_claim_object,
    reconcile_prefix_claim,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.common import (
    CLUSTER_FINALIZER,
    CONTROL_PLANE_IP_ENSURED,
    DEFAULT_PORT,
    FIREWALL_API,
    FIREWALL_ENSURED,
    MACHINE_API,
    NODE_NETWORK_ENSURED,
    capi_cluster,
    capi_owner,
    cluster_for,
    owner_patch,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.firewall import (
    reconcile_metalstack_firewall,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.machine import capi_machine_of
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.server import (
    claim_address,
    release_addresses,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.writes import (
    ensure_finalizer,
    remove_finalizer,
    set_condition,
)

KIND = "MetalStackCluster"
WAIT = 2.0
NETWORK_WAIT = 10.0  # a cluster waiting for a prefix looks again (one freed, a pool grown)
NODE_NETWORK = "node-network"  # <cluster>-node-network: the prefix claim and the IPPool made of it


@dataclass
class ClusterResult(Result):
    """What one reconcile of a MetalStackCluster came to; ``ready`` once network and endpoint are there."""

    ready: bool = False
    error: str = ""  # the spec cannot be served as it is: the message names the field
    phase: str = ""

    def summary(self) -> dict[str, Any]:
        spec, status = (self.obj or {}).get("spec") or {}, (self.obj or {}).get("status") or {}
        return {"name": ((self.obj or {}).get("metadata") or {}).get("name"), "ready": self.ready,
                "phase": self.phase, "node_network": status.get("nodeNetwork", ""),
                "node_network_pool": status.get("nodeNetworkPool", ""),
                "control_plane_endpoint": spec.get("controlPlaneEndpoint") or {},
                "firewall": status.get("firewall", ""), "requeue_after": self.requeue_after,
                "waits_on": self.wait_targets(), "message": self.message}


def reconcile_metalstack_cluster(store: Store, ref: Ref, dry_run: bool = False) -> ClusterResult:
    """One step of the MetalStackCluster named by ``ref``."""
    try:
        obj = store.get(ref)
    except NotFound:
        return ClusterResult(None, message="gone", phase="deleted")
    flow = _Flow(store, obj, dry_run)
    if flow.paused():
        return ClusterResult(obj, message="paused", phase="paused")
    if obj["metadata"].get("deletionTimestamp"):
        return flow.delete()
    try:
        return flow.normal()
    except Invalid as e:
        flow.write_status(False, [], failure=str(e))
        return ClusterResult(flow.obj, flow.changed, None, str(e), error=str(e), phase="failed")


class _Flow:
    def __init__(self, store: Store, obj: Object, dry_run: bool) -> None:
        self.store, self.obj, self.dry_run = store, obj, dry_run
        self.ref = Ref.of(obj)
        self.changed = False
        owner = owner_named(obj, "Cluster")
        self.capi = (capi_cluster(store, owner["name"], self.ref.namespace) if owner
                     else capi_owner(store, obj, "Cluster"))

    def paused(self) -> bool:
        return pause.paused(self.obj, self.capi)

    def _patch(self, patch: dict[str, Any]) -> None:
        self.obj = self.store.patch(self.ref, patch, dry_run=self.dry_run)
        self.changed = True

    # -- normal -------------------------------------------------------------------------------------------------
    def normal(self) -> ClusterResult:
        finalized = ensure_finalizer(self.store, self.ref, CLUSTER_FINALIZER, self.dry_run)
        self.changed = finalized != self.obj
        self.obj = finalized
        patch = owner_patch(self.obj, self.capi)
        if patch:
            self._patch(patch)
        conditions: list[tuple[str, bool, str, str]] = []
        network, waiting = self._node_network()
        conditions.append((NODE_NETWORK_ENSURED, bool(network), "Ensured" if network else "Waiting", waiting))
        endpoint, endpoint_waiting = self._endpoint()
        conditions.append((CONTROL_PLANE_IP_ENSURED, bool(endpoint), "Ensured" if endpoint else "Waiting",
                           endpoint_waiting))
        firewall = self._firewall() if network else ""
        if self.obj["spec"].get("firewallSpec"):
            conditions.append((FIREWALL_ENSURED, bool(firewall), "Ensured" if firewall else "Waiting",
                               "" if firewall else "waiting for the node network"))
        ready = bool(network and endpoint)
        self.write_status(ready, conditions, network=network, firewall=firewall)
        message = "ready" if ready else (waiting or endpoint_waiting)
        return ClusterResult(self.obj, self.changed, None if ready else NETWORK_WAIT, message, ready=ready,
                             phase="ready" if ready else "pending")

    def _node_network(self) -> tuple[str, str]:
        """The node network's prefix (status.nodeNetwork), its IPPool made first; else ('', why not)."""
        spec = self.obj["spec"]
        given = spec.get("nodeNetworkID")
        if given:
            pool = self.store.get_if_exists(Ref(IPAM_API, "IPPool", given, self.ref.namespace))
            if pool is None:
                return "", f"spec.nodeNetworkID: IPPool {self.ref.namespace}/{given} does not exist"
            subnet = ((pool["spec"].get("pools") or [{}])[0]).get("subnet") or ""
            return subnet or given, ""
        super_network = self._prefix_pool()
        if super_network is None:
            return "", (f"no IPPrefixPool of partition {spec['partition']} (nor one without a partition) in "
                        f"namespace {self.ref.namespace}")
        claim_ref = Ref(PREFIX_API, "IPPrefixClaim", self._node_network_name(), self.ref.namespace)
        existing = self.store.get_if_exists(claim_ref)
        if existing is None:
            claim = prefix_claim_object(claim_ref.name, claim_ref.namespace, super_network["metadata"]["name"],
                                        owner=self.obj)
            claim["metadata"].setdefault("labels", {})[CLUSTER_NAME_LABEL] = self.ref.name
            self.store.create(claim, dry_run=self.dry_run)
            self.changed = True
        elif not controlled_by(existing, self.obj):
            raise Invalid(f"IPPrefixClaim {claim_ref.namespace}/{claim_ref.name} exists and was not made by "
                          f"{self.ref}; it is left alone")
        allocation = reconcile_prefix_claim(self.store, claim_ref, self.dry_run)
        self.changed = self.changed or allocation.changed
        if not allocation.prefix:
            return "", allocation.message or allocation.reason or "waiting for a node network prefix"
        self._ensure_pool(allocation.prefix)
        if spec.get("nodeNetworkID") != self._node_network_name():  # upstream writes the acquired network back
            self._patch({"spec": {"nodeNetworkID": self._node_network_name()}})
        return allocation.prefix, ""

    def _node_network_name(self) -> str:
        return f"{self.ref.name}-{NODE_NETWORK}"

    def _prefix_pool(self) -> Object | None:
        pools = sorted(self.store.list(PREFIX_API, "IPPrefixPool", self.ref.namespace),
                       key=lambda p: p["metadata"]["name"])
        partition = self.obj["spec"]["partition"]
        return (next((p for p in pools if (p.get("spec") or {}).get("partition") == partition), None)
                or next((p for p in pools if not (p.get("spec") or {}).get("partition")), None))

    def _ensure_pool(self, prefix: str) -> None:
        """The node network's IPPool: the prefix, its first address the gateway (the firewall's)."""
        network = ipaddress.ip_network(prefix)
        ref = Ref(IPAM_API, "IPPool", self._node_network_name(), self.ref.namespace)
        existing = self.store.get_if_exists(ref)
        if existing is not None:
            if not controlled_by(existing, self.obj):
                raise Invalid(f"IPPool {ref.namespace}/{ref.name} exists and was not made by {self.ref}; it is "
                              "left alone")
            return
        self.store.create({"apiVersion": IPAM_API, "kind": "IPPool",
                           "metadata": {"name": ref.name, "namespace": ref.namespace,
                                        "labels": {CLUSTER_NAME_LABEL: self.ref.name},
                                        "ownerReferences": [owner_reference(self.obj, controller=True)]},
                           "spec": {"clusterName": self.ref.name, "namePrefix": ref.name,
                                    "pools": [{"subnet": str(network), "gateway": str(next(network.hosts()))}],
                                    "prefix": network.prefixlen}}, dry_run=self.dry_run)
        self.changed = True

    def _endpoint(self) -> tuple[str, str]:
        """spec.controlPlaneEndpoint.host, set from controlPlaneIP or an address of the public network when
        empty; else ('', why not)."""
        spec = self.obj["spec"]
        endpoint = spec.get("controlPlaneEndpoint") or {}
        if endpoint.get("host"):
            return str(endpoint["host"]), ""
        host = spec.get("controlPlaneIP")
        if not host:
            if not spec.get("publicNetworkID"):
                raise Invalid("spec.controlPlaneEndpoint.host: Required value: set it, spec.controlPlaneIP, or "
                              "spec.publicNetworkID to take an address of the public network")
            address, why = claim_address(self.store, self.obj, "control-plane", spec["publicNetworkID"],
                                         {CLUSTER_NAME_LABEL: self.ref.name}, self.dry_run)
            if address is None:
                return "", why
            host = address.address
        self._patch({"spec": {"controlPlaneEndpoint": {"host": host, "port": endpoint.get("port") or DEFAULT_PORT}}})
        return str(host), ""

    def _firewall(self) -> str:
        """The cluster's MetalStackFirewall ``<cluster>-firewall``, made of spec.firewallSpec; '' for none."""
        firewall_spec = self.obj["spec"].get("firewallSpec")
        if not firewall_spec:
            return ""
        ref = Ref(FIREWALL_API, "MetalStackFirewall", f"{self.ref.name}-firewall", self.ref.namespace)
        existing = self.store.get_if_exists(ref)
        if existing is None:
            self.store.create({"apiVersion": FIREWALL_API, "kind": "MetalStackFirewall",
                               "metadata": {"name": ref.name, "namespace": ref.namespace,
                                            "labels": {CLUSTER_NAME_LABEL: self._cluster_label()},
                                            "ownerReferences": [owner_reference(self.obj, controller=True)]},
                               "spec": dict(firewall_spec)}, dry_run=self.dry_run)
            self.changed = True
        elif not controlled_by(existing, self.obj):
            raise Invalid(f"MetalStackFirewall {ref.namespace}/{ref.name} exists and was not made by {self.ref}; "
                          "it is left alone")
        elif existing["spec"] != firewall_spec:
            self.store.update({**existing, "spec": dict(firewall_spec)}, dry_run=self.dry_run)
            self.changed = True
        return ref.name

    def _cluster_label(self) -> str:
        """The name the cluster-name label carries: the Cluster API Cluster's, else this cluster's."""
        return str((self.capi or {}).get("metadata", {}).get("name") or self.ref.name)

    def write_status(self, ready: bool, conditions: list[tuple[str, bool, str, str]], network: str = "",
                     firewall: str = "", failure: str = "") -> None:
        def write() -> Object:
            current = self.store.get(self.ref)
            status = dict(current.get("status") or {})
            status["ready"] = ready
            status["initialization"] = {**(status.get("initialization") or {}), "provisioned": ready}
            for key, value in (("nodeNetwork", network), ("firewall", firewall)):
                if value:
                    status[key] = value
            pool = current["spec"].get("nodeNetworkID")
            if network and pool:
                status["nodeNetworkPool"] = pool
            for type_, value_, reason, message in conditions:
                status["conditions"] = set_condition(status.get("conditions"), type_, value_, reason, message)
            if failure:
                status.update(failureReason="InvalidConfiguration", failureMessage=failure)
                status["conditions"] = set_condition(status.get("conditions"), "Ready", False,
                                                     "InvalidConfiguration", failure)
            else:
                status.pop("failureReason", None)
                status.pop("failureMessage", None)
                status["conditions"] = set_condition(status.get("conditions"), "Ready", ready,
                                                     "Ready" if ready else "Waiting")
            if status == current.get("status"):
                return current
            self.changed = True
            return self.store.update_status({**current, "status": status}, dry_run=self.dry_run)

        self.obj = retry_on_conflict(write)

    # -- delete -------------------------------------------------------------------------------------------------
    def delete(self) -> ClusterResult:
        """Upstream's order: machines first, then the firewall, then the control-plane address, then the
        network; each waited for before the next."""
        uid = self.obj["metadata"]["uid"]
        machines = [m for m in self.store.list(MACHINE_API, "MetalStackMachine", self.ref.namespace)
                    if (cluster_for(self.store, m, capi_machine_of(self.store, m)) or {}).get("metadata", {}).get(
                        "uid") == uid]
        if machines:
            return self._deleting(f"waiting for {len(machines)} MetalStackMachines to go")
        firewall_ref = Ref(FIREWALL_API, "MetalStackFirewall", f"{self.ref.name}-firewall", self.ref.namespace)
        firewall = self.store.get_if_exists(firewall_ref)
        if controlled_by(firewall, self.obj):
            if not (firewall or {})["metadata"].get("deletionTimestamp"):
                self.store.delete(firewall_ref, dry_run=self.dry_run)
            step = reconcile_metalstack_firewall(self.store, firewall_ref, self.dry_run)
            if step.obj is not None:
                return self._deleting(f"waiting for the firewall to go: {step.message}")
        if not release_addresses(self.store, self.obj, self.dry_run):
            return self._deleting("releasing the control-plane address")
        pool_ref = Ref(IPAM_API, "IPPool", self._node_network_name(), self.ref.namespace)
        if controlled_by(self.store.get_if_exists(pool_ref), self.obj):
            self.changed = pool_absent(self.store, pool_ref, self.dry_run)["changed"] or self.changed
        claim_ref = Ref(PREFIX_API, "IPPrefixClaim", self._node_network_name(), self.ref.namespace)
        claim = self.store.get_if_exists(claim_ref)
        if controlled_by(claim, self.obj):
            if not (claim or {})["metadata"].get("deletionTimestamp"):
                self.store.delete(claim_ref, dry_run=self.dry_run)
            if reconcile_prefix_claim(self.store, claim_ref, self.dry_run).obj is not None:
                return self._deleting("releasing the node network")
        remove_finalizer(self.store, self.ref, CLUSTER_FINALIZER, self.dry_run)
        return ClusterResult(None, True, message="deleted", phase="deleted")

    def _deleting(self, message: str) -> ClusterResult:
        return ClusterResult(self.obj, True, WAIT, message, phase="deleting")
