# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""MetalStackFirewall: the cluster's firewall machine, provisioned like any machine, holding its node network's
gateway and an address of the public network, with its nftables rule set (default deny in, the node network
allowed out, the spec's rules and those of an attached rule set) written by cloud-init on first boot."""
from __future__ import annotations

import ipaddress

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import CLUSTER_NAME_LABEL
from ansible_collections.metal3.baremetal.plugins.module_utils.core.address import Address
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (
    API as BMH_API,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (
    KIND as BMH_KIND,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import host_state
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import IPAM_API
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.common import (
    FIREWALL_FINALIZER,
    MACHINE_CREATED,
    MACHINE_READY,
    cluster_for,
    machine_type,
    pinned_id,
    resolve_image,
    rules_of,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.firewall_rules import (
    firewall_user_data,
    parse_rule_object,
    parse_rules,
    render_ruleset,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.server import (
    NO_HOST_WAIT,
    WAIT,
    Attachment,
    Server,
    ServerResult,
    provisioned,
    reconcile_server,
    waiting_step,
    write_status,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.writes import ensure_finalizer

KIND = "MetalStackFirewall"


def reconcile_metalstack_firewall(store: Store, ref: Ref, dry_run: bool = False) -> ServerResult:
    """One step of the MetalStackFirewall named by ``ref``."""
    return reconcile_server(store, ref, dry_run, FIREWALL_FINALIZER, ("network-data", "user-data"),
                            lambda obj: cluster_for(store, obj),
                            lambda server, cluster: _normal(store, server, cluster))


def node_address(pool: Object) -> tuple[str, Address]:
    """The node network of an IPPool (its first entry's subnet) and the firewall's address in it: the gateway."""
    spec = pool.get("spec") or {}
    entry = (spec.get("pools") or [{}])[0]
    gateway = entry.get("gateway") or spec.get("gateway")
    subnet = entry.get("subnet")
    if not gateway or not subnet:
        raise Invalid(f"IPPool {pool['metadata']['namespace']}/{pool['metadata']['name']}: the node network needs "
                      "a subnet and a gateway (the firewall's address) in spec.pools[0]")
    network = ipaddress.ip_network(subnet, strict=False)
    dns = tuple(entry.get("dnsServers") or spec.get("dnsServers") or ())
    return str(network), Address(str(gateway), network.prefixlen, None, dns)


def _normal(store: Store, server: Server, cluster: Object | None) -> ServerResult:
    before = server.obj
    server.obj = ensure_finalizer(store, server.ref, FIREWALL_FINALIZER, server.dry_run)
    spec = server.obj["spec"]

    def waiting(phase: str, message: str, requeue: float = WAIT, waits_on: list[Ref] | None = None,
                created: bool = False) -> ServerResult:
        return waiting_step(store, server, before, phase, message, requeue, waits_on, created)

    if cluster is None:
        return waiting("pending", "no MetalStackCluster: the label cluster.x-k8s.io/cluster-name names none")
    cluster_name = cluster["metadata"]["name"]
    pool_name = (cluster.get("status") or {}).get("nodeNetworkPool")
    pool = store.get_if_exists(Ref(IPAM_API, "IPPool", pool_name, server.ref.namespace)) if pool_name else None
    if pool is None:
        return waiting("pending", f"waiting for the node network of MetalStackCluster {cluster_name}",
                       waits_on=[Ref.of(cluster)])
    network, inside = node_address(pool)
    rules = parse_rules(spec, "spec")
    extra = parse_rule_object(rules_of(store, server.ref.namespace, spec, "spec"),
                              f"ConfigMap {server.ref.namespace}/{(spec.get('ruleSetRef') or {}).get('name')} "
                              "data.rules")
    user_data = server.own_secret("user-data", "value",
                                  firewall_user_data(render_ruleset(network, rules, extra), server.ref.name))
    image = resolve_image(store, server.ref.namespace, spec["image"])
    host, why = server.take_host(machine_type(spec), cluster["spec"].get("partition") or "", pinned_id(spec),
                                 cluster_name)
    if host is None:
        return waiting("pending", why, NO_HOST_WAIT, [Ref(BMH_API, BMH_KIND, "", server.ref.namespace)])
    attachments = [Attachment(str(pool_name), inside)]
    public_pool = cluster["spec"].get("publicNetworkID")
    if public_pool:
        outside, why = server.claim_address("public", public_pool, {CLUSTER_NAME_LABEL: cluster_name})
        if outside is None:
            return waiting("associated", why, created=True)
        attachments.append(Attachment(public_pool, outside, default_route=True, second_nic=True))
    host = server.provision(image, user_data, server.network_data(host, attachments))
    addresses = [{"type": "InternalIP", "address": inside.address}]
    addresses += [{"type": "ExternalIP", "address": a.address.address} for a in attachments[1:]]
    addresses += [{"type": "Hostname", "address": server.ref.name}]
    ready = provisioned(host)
    state = f"host {server.host_name} is {host_state(host) or 'new'}"
    if ready:
        server.provider_id(host)
    write_status(store, server, ready, [(MACHINE_CREATED, True, "Created", ""),
                                        (MACHINE_READY, ready, "Ready" if ready else "Provisioning",
                                         "" if ready else state)], addresses)
    return ServerResult(server.obj, server.obj != before, None if ready else WAIT, "ready" if ready else state,
                        ready=ready, host=server.host_name, phase="provisioned" if ready else "provisioning")
