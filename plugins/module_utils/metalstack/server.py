# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""A metal-stack machine on one of the collection's hosts: what a MetalStackMachine and a MetalStackFirewall share.

A server takes a host of its machine type in its partition (or the one host its providerID pins) with the
race-free claim every consumer uses (hosts/claim.py), holds its addresses through IPClaims it owns, renders
its network_data into a Secret it owns, and hands image, user data and network data to the host; deleted, it
releases the host (deprovisioned first), its addresses and its Secrets. Only objects it made (a controller
ownerReference) are ever updated or deleted.
"""
from __future__ import annotations

import contextlib
import ipaddress
from dataclasses import dataclass
from typing import Any, Callable

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import (
    CLUSTER_NAME_LABEL,
    HOST_ANNOTATION,
    SECRET_TYPE,
    owner_reference,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core import pause
from ansible_collections.metal3.baremetal.plugins.module_utils.core.address import Address
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid, NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import (
    Object,
    Ref,
    controlled_by,
    secret_values,
    split_reference,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.reconcile import Result
from ansible_collections.metal3.baremetal.plugins.module_utils.core.retry import retry_on_conflict
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (
    API as BMH_API,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (
    KIND as BMH_KIND,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (
    PROVISIONED,
    host_state,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.claim import (
    Consumer,
    associate,
    exclusion,
    release_host,
    update_claimed_host,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import IPAM_API, reconcile_ip_claim
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.claims import claim_object
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.common import (
    FIREWALL_API,
    MACHINE_API,
    MACHINE_CREATED,
    MACHINE_READY,
    capi_cluster,
    host_id,
    is_host,
    pinned_id,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.machinetypes import (
    MachineType,
    mismatch,
    parse_machine_type,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import dump_yaml
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.writes import remove_finalizer, set_condition
from ansible_collections.metal3.baremetal.plugins.module_utils.templating.render import render_network_data

MACHINE_TYPE_API = "metal3.io/v1alpha1"
# The kinds whose objects each hold a host: they respect each other's pins.
SERVER_KINDS = ((MACHINE_API, "MetalStackMachine"), (FIREWALL_API, "MetalStackFirewall"))
WAIT = 2.0  # while the host changes state
NO_HOST_WAIT = 10.0  # a machine without a host looks again (a host freed or added may serve it)


@dataclass(frozen=True)
class Attachment:
    """A network the server sits in: a name (the IPPool's, for a claimed address), the address it holds, and
    whether the default route goes through this network's gateway."""

    network: str
    address: Address
    default_route: bool = False
    second_nic: bool = False  # on the host's second NIC when it has one (the firewall's public side)


@dataclass
class ServerResult(Result):
    """What one reconcile of a MetalStackMachine or MetalStackFirewall came to."""

    ready: bool = False
    host: str = ""
    phase: str = ""
    error: str = ""  # the spec cannot be served as it is: the message names the field

    def summary(self) -> dict[str, Any]:
        metadata = (self.obj or {}).get("metadata") or {}
        spec, status = (self.obj or {}).get("spec") or {}, (self.obj or {}).get("status") or {}
        return {"name": metadata.get("name"), "namespace": metadata.get("namespace"), "phase": self.phase,
                "ready": self.ready, "host": self.host, "provider_id": spec.get("providerID", ""),
                "addresses": status.get("addresses", []), "requeue_after": self.requeue_after,
                "waits_on": self.wait_targets(), "message": self.message}


class Server:
    """The host side of one MetalStackMachine or MetalStackFirewall (``obj``)."""

    def __init__(self, store: Store, obj: Object, dry_run: bool) -> None:
        self.store, self.obj, self.dry_run = store, obj, dry_run
        self.ref = Ref.of(obj)
        self.consumer = Consumer.of(obj)

    @property
    def host_name(self) -> str:
        return str((self.obj["metadata"].get("annotations") or {}).get(HOST_ANNOTATION, ""))

    def host_ref(self) -> Ref | None:
        if not self.host_name:
            return None
        namespace, name = split_reference(self.host_name, self.ref.namespace)
        return Ref(BMH_API, BMH_KIND, name, namespace)

    # -- the host ----------------------------------------------------------------------------------------------
    def take_host(self, type_name: str, partition: str, pinned: str, cluster: str) -> tuple[Object | None, str]:
        """The host this server holds, or one of its type in its partition (the pinned one, if pinned) claimed
        now; else (None, why not)."""
        held = self.host_ref()
        if held is not None:
            host = self.store.get_if_exists(held)
            if host is not None and self.consumer.holds(host):
                return host, ""
            return None, f"host {self.host_name} is gone or held by another consumer"
        hosts = self.store.list(BMH_API, BMH_KIND, self.ref.namespace)
        if pinned:
            target = next((h for h in hosts if is_host(h, pinned)), None)
            if target is None:
                return None, f"the pinned host {pinned} does not exist in namespace {self.ref.namespace}"
            why = exclusion(target)
            if why and not self.consumer.holds(target):
                return None, f"the pinned host {target['metadata']['name']} is {why}"
        machine_type = self._machine_type(type_name)
        reserved = {} if pinned else self._pinned_by_others()

        def fits(host: Object) -> str:
            if pinned and not is_host(host, pinned):
                return "is not the pinned host"
            holder = next((who for machine_id, who in reserved.items() if is_host(host, machine_id)), "")
            if holder:
                return f"is pinned by {holder}"
            return mismatch(machine_type, host) if machine_type is not None else ""

        selection = associate(self.store, [self.ref.namespace], self.consumer, None, partition or None,
                              strict_failure_domain=bool(partition),
                              labels={CLUSTER_NAME_LABEL: cluster} if cluster else None, dry_run=self.dry_run,
                              fits=fits)
        if selection.host is None:
            return None, f"no host: {selection.reason}"
        name = f"{selection.host['metadata']['namespace']}/{selection.host['metadata']['name']}"
        self.obj = self.store.patch(self.ref, {"metadata": {"annotations": {HOST_ANNOTATION: name}}},
                                    dry_run=self.dry_run)
        return selection.host, ""

    def _pinned_by_others(self) -> dict[str, str]:
        """The machine IDs the other servers of the namespace pin and do not hold yet: an unpinned server leaves
        them alone, so a pinned one never waits for a host an unpinned one took first."""
        pinned: dict[str, str] = {}
        for api_version, kind in SERVER_KINDS:
            for other in self.store.list(api_version, kind, self.ref.namespace):
                spec = other.get("spec") or {}
                if other["metadata"].get("uid") == self.obj["metadata"].get("uid") or not spec.get("providerID") \
                        or HOST_ANNOTATION in (other["metadata"].get("annotations") or {}):
                    continue
                with contextlib.suppress(Invalid):  # a malformed providerID is its owner's error, not ours
                    pinned[pinned_id(spec)] = f"{kind} {other['metadata']['name']}"
        return pinned

    def _machine_type(self, name: str) -> MachineType | None:
        if not name:
            return None
        obj = self.store.get_if_exists(Ref(MACHINE_TYPE_API, "MachineType", name, self.ref.namespace))
        if obj is None:
            raise Invalid(f"spec.machineType: MachineType {self.ref.namespace}/{name} does not exist")
        return parse_machine_type(obj)

    def claim_address(self, suffix: str, pool: str, labels: dict[str, str]) -> tuple[Address | None, str]:
        return claim_address(self.store, self.obj, suffix, pool, labels, self.dry_run)

    # -- data -------------------------------------------------------------------------------------------------
    def own_secret(self, suffix: str, key: str, text: str) -> dict[str, str]:
        """The Secret ``<name>-<suffix>`` holding ``text`` under ``key``, made or brought up to date; only one
        this server made is ever overwritten."""
        ref = Ref("v1", "Secret", f"{self.ref.name}-{suffix}", self.ref.namespace)
        existing = self.store.get_if_exists(ref)
        if existing is None:
            self.store.create({"apiVersion": "v1", "kind": "Secret", "type": SECRET_TYPE,
                               "metadata": {"name": ref.name, "namespace": ref.namespace,
                                            "ownerReferences": [owner_reference(self.obj, controller=True)]},
                               "stringData": {key: text}}, dry_run=self.dry_run)
        elif not controlled_by(existing, self.obj):
            raise Invalid(f"Secret {ref.namespace}/{ref.name} exists and was not made by {self.ref}; it is left alone")
        elif secret_values(existing).get(key) != text:
            self.store.update({**{k: v for k, v in existing.items() if k != "data"}, "stringData": {key: text}},
                              dry_run=self.dry_run)
        return {"name": ref.name, "namespace": ref.namespace}

    def delete_own_secrets(self, *suffixes: str) -> None:
        for suffix in suffixes:
            ref = Ref("v1", "Secret", f"{self.ref.name}-{suffix}", self.ref.namespace)
            if controlled_by(self.store.get_if_exists(ref), self.obj):
                with contextlib.suppress(NotFound):
                    self.store.delete(ref, dry_run=self.dry_run)

    def network_data(self, host: Object, attachments: list[Attachment]) -> dict[str, str]:
        """The host's network_data (OpenStack's network_data.json) for ``attachments``, in a Secret this server
        owns: the first on the boot NIC, a ``second_nic`` one on the host's second NIC when it has one."""
        boot_mac = (host.get("spec") or {}).get("bootMACAddress") or ""
        if not boot_mac:
            raise Invalid(f"BareMetalHost {host['metadata']['name']}: spec.bootMACAddress is required to place "
                          "the server in its networks")
        other = [nic.get("mac") for nic in ((host.get("status") or {}).get("hardware") or {}).get("nics") or []
                 if nic.get("mac") and nic["mac"].lower() != boot_mac.lower()]
        links = [{"type": "phy", "id": "nic0", "macAddress": {"string": boot_mac}}]
        if other and any(a.second_nic for a in attachments):
            links.append({"type": "phy", "id": "nic1", "macAddress": {"string": sorted(other)[0]}})
        networks: dict[str, list[dict[str, Any]]] = {}
        for attachment in attachments:
            version = ipaddress.ip_address(attachment.address.address).version
            network: dict[str, Any] = {"id": attachment.network,
                                       "link": "nic1" if attachment.second_nic and len(links) > 1 else "nic0",
                                       "ipAddressFromIPPool": attachment.network}
            if attachment.default_route and attachment.address.gateway:
                network["routes"] = [{"network": "0.0.0.0" if version == 4 else "::", "prefix": 0,
                                      "gateway": {"fromIPPool": attachment.network}}]
            networks.setdefault(f"ipv{version}", []).append(network)
        dns = [server for a in attachments for server in a.address.dns_servers]
        template: dict[str, Any] = {"links": {"ethernets": links}, "networks": networks}
        if dns:
            template["services"] = {"dns": sorted(set(dns), key=dns.index)}
        rendered = render_network_data(template, {a.network: a.address for a in attachments}, host)
        return self.own_secret("network-data", "networkData", dump_yaml(rendered))

    # -- provisioning -----------------------------------------------------------------------------------------
    def provision(self, image: dict[str, Any], user_data: dict[str, str] | None,
                  network_data: dict[str, str]) -> Object:
        """Image (never replaced in place), user data and network data to the held host, powered on."""
        def change(host: Object) -> None:
            spec = host["spec"]
            if not spec.get("image") and not spec.get("customDeploy"):
                spec["image"] = dict(image)
            if user_data:
                spec["userData"] = dict(user_data)
            spec["networkData"] = dict(network_data)
            spec["online"] = True

        ref = self.host_ref()
        if ref is None:
            raise NotFound(f"{self.ref} holds no host")
        return update_claimed_host(self.store, ref, self.consumer, change, self.dry_run)

    def provider_id(self, host: Object) -> None:
        """spec.providerID: ``metalstack://<machine ID>`` of the host, unless given (a pinned server)."""
        if not self.obj["spec"].get("providerID"):
            self.obj = self.store.patch(self.ref, {"spec": {"providerID": f"metalstack://{host_id(host)}"}},
                                        dry_run=self.dry_run)

    def release(self) -> str:
        """Deprovision and free the held host; '' once it is no longer ours."""
        ref = self.host_ref()
        if ref is None:
            return ""
        host = self.store.get_if_exists(ref)
        if host is None or not self.consumer.holds(host):
            return ""
        return release_host(self.store, ref, self.consumer, dry_run=self.dry_run)


def provisioned(host: Object) -> bool:
    return host_state(host) == PROVISIONED


def write_status(store: Store, server: Server, ready: bool, conditions: list[tuple[str, bool, str, str]],
                 addresses: list[dict[str, str]] | None = None, failure: str = "") -> bool:
    """status.ready, initialization.provisioned, the given conditions (type, status, reason, message), the
    addresses when given, failureMessage when the spec cannot be served; True when it changed."""
    def write() -> Object:
        current = store.get(server.ref)
        status = dict(current.get("status") or {})
        status["ready"] = ready
        status["initialization"] = {**(status.get("initialization") or {}), "provisioned": ready}
        for type_, value, reason, message in conditions:
            status["conditions"] = set_condition(status.get("conditions"), type_, value, reason, message)
        if addresses is not None:
            status["addresses"] = addresses
        if failure:
            status.update(failureReason="InvalidConfiguration", failureMessage=failure)
        else:
            status.pop("failureReason", None)
            status.pop("failureMessage", None)
        if status == current.get("status"):
            return current
        return store.update_status({**current, "status": status}, dry_run=server.dry_run)

    before = server.obj.get("status")
    server.obj = retry_on_conflict(write)
    return server.obj.get("status") != before


def claim_address(store: Store, owner: Object, suffix: str, pool: str, labels: dict[str, str],
                  dry_run: bool = False) -> tuple[Address | None, str]:
    """The address ``owner``'s IPClaim ``<name>-<suffix>`` holds in ``pool`` (the claim made first, owned by
    ``owner``); else (None, what it waits for)."""
    ref = Ref(IPAM_API, "IPClaim", f"{owner['metadata']['name']}-{suffix}", owner["metadata"]["namespace"])
    existing = store.get_if_exists(ref)
    if existing is None:
        claim = claim_object(ref.name, ref.namespace, pool, labels=labels)
        claim["metadata"]["ownerReferences"] = [owner_reference(owner, controller=True)]
        store.create(claim, dry_run=dry_run)
    elif not controlled_by(existing, owner):
        raise Invalid(f"IPClaim {ref.namespace}/{ref.name} exists and was not made by {Ref.of(owner)}; it is left "
                      "alone")
    allocation = reconcile_ip_claim(store, ref, dry_run)
    if allocation.error:
        raise Invalid(f"IPClaim {ref.namespace}/{ref.name}: {allocation.error}")
    if allocation.address is None:
        return None, f"waiting for an address from IPPool {pool}: {allocation.waiting or allocation.message}"
    return Address.of(allocation.address), ""


def release_addresses(store: Store, owner: Object, dry_run: bool = False) -> bool:
    """Delete the IPClaims ``owner`` made and release their addresses; True once none is left."""
    left = False
    for claim in store.list(IPAM_API, "IPClaim", owner["metadata"]["namespace"]):
        if not controlled_by(claim, owner):
            continue
        ref = Ref.of(claim)
        with contextlib.suppress(NotFound):
            if not claim["metadata"].get("deletionTimestamp"):
                store.delete(ref, dry_run=dry_run)
            left = reconcile_ip_claim(store, ref, dry_run).obj is not None or left
    return not left


def delete_server(store: Store, server: Server, finalizer: str, *secrets: str) -> ServerResult:
    """A deleted server, in upstream's order: the host deprovisioned and freed, then the addresses, then the
    Secrets it made and its finalizer."""
    waiting = server.release()
    if waiting:
        return ServerResult(server.obj, True, WAIT, waiting, host=server.host_name, phase="deprovisioning")
    if not release_addresses(store, server.obj, server.dry_run):
        return ServerResult(server.obj, True, WAIT, "releasing the addresses", phase="deleting")
    server.delete_own_secrets(*secrets)
    remove_finalizer(store, server.ref, finalizer, server.dry_run)
    return ServerResult(None, True, message="deleted", phase="deleted")


def waiting_step(store: Store, server: Server, before: Object, phase: str, message: str, requeue: float = WAIT,
                 waits_on: list[Ref] | None = None, created: bool = False) -> ServerResult:
    """A server that waits (for its cluster, a host, an address): said in its conditions."""
    write_status(store, server, False, [(MACHINE_CREATED, created, "Created" if created else "Waiting",
                                         "" if created else message),
                                        (MACHINE_READY, False, "Waiting", message)])
    return ServerResult(server.obj, server.obj != before, requeue, message, waits_on or [], host=server.host_name,
                        phase=phase)


def reconcile_server(store: Store, ref: Ref, dry_run: bool, finalizer: str, secrets: tuple[str, ...],
                     cluster_of: Callable[[Object], Object | None],
                     normal: Callable[[Server, Object | None], ServerResult]) -> ServerResult:
    """One step of a MetalStackMachine or MetalStackFirewall: gone, paused (with its cluster), deleted (the host,
    the addresses and ``secrets`` released, then ``finalizer``), or ``normal``; a spec that cannot be served is
    said in its status (failureMessage, MachineReady False) and the result's ``error``."""
    try:
        obj = store.get(ref)
    except NotFound:
        return ServerResult(None, message="gone", phase="deleted")
    server = Server(store, obj, dry_run)
    cluster = cluster_of(obj)
    if paused(store, obj, cluster):
        return ServerResult(obj, message="paused", phase="paused", host=server.host_name)
    if obj["metadata"].get("deletionTimestamp"):
        return delete_server(store, server, finalizer, *secrets)
    try:
        return normal(server, cluster)
    except Invalid as e:
        changed = write_status(store, server, False, [(MACHINE_READY, False, "InvalidConfiguration", str(e))],
                               failure=str(e))
        return ServerResult(server.obj, changed, None, str(e), phase="failed", host=server.host_name, error=str(e))


def paused(store: Store, obj: Object, cluster: Object | None) -> bool:
    """Cluster API's pause: the object's annotation, or its Cluster's spec.paused (clusterctl move sets both)."""
    if pause.paused(obj):
        return True
    name = (cluster or {}).get("metadata", {}).get("name") or (obj["metadata"].get("labels") or {}).get(
        CLUSTER_NAME_LABEL, "")
    return bool(((capi_cluster(store, name, obj["metadata"]["namespace"]) or {}).get("spec") or {}).get("paused"))
