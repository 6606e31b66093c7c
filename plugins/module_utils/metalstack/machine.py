# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""MetalStackMachine, as the metal-stack provider's machine controller: a raw machine of its machine type in
its partition (or the one host its providerID pins), in its cluster's node network, with its Cluster API
Machine's bootstrap data; ready once the host is provisioned. Deleted, it gives back host and address."""
from __future__ import annotations

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import (
    CAPI_API,
    CLUSTER_NAME_LABEL,
    owner_named,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (
    API as BMH_API,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (
    KIND as BMH_KIND,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import host_state
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.common import (
    MACHINE_CREATED,
    MACHINE_FINALIZER,
    MACHINE_READY,
    capi_owner,
    cluster_for,
    machine_type,
    owner_patch,
    pinned_id,
    resolve_image,
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

KIND = "MetalStackMachine"


def reconcile_metalstack_machine(store: Store, ref: Ref, dry_run: bool = False) -> ServerResult:
    """One step of the MetalStackMachine named by ``ref``."""
    machines: list[Object | None] = []  # its Cluster API Machine, found with its cluster

    def cluster_of(obj: Object) -> Object | None:
        machines.append(capi_machine_of(store, obj))
        return cluster_for(store, obj, machines[-1])

    return reconcile_server(store, ref, dry_run, MACHINE_FINALIZER, ("network-data",), cluster_of,
                            lambda server, cluster: _normal(store, server, machines[-1], cluster))


def capi_machine_of(store: Store, obj: Object) -> Object | None:
    """The Cluster API Machine of a MetalStackMachine: its owner, else the Machine whose infrastructureRef names it."""
    owner = owner_named(obj, "Machine")
    if owner:
        return store.get_if_exists(Ref(CAPI_API, "Machine", owner["name"], obj["metadata"]["namespace"]))
    return capi_owner(store, obj, "Machine")


def _step(server: Server, phase: str, requeue: float | None, message: str, changed: bool,
          ready: bool = False, waits_on: list[Ref] | None = None) -> ServerResult:
    return ServerResult(server.obj, changed, requeue, message, waits_on or [], ready=ready, host=server.host_name,
                        phase=phase)


def _normal(store: Store, server: Server, capi_machine: Object | None, cluster: Object | None) -> ServerResult:
    before = server.obj
    server.obj = ensure_finalizer(store, server.ref, MACHINE_FINALIZER, server.dry_run)
    patch = owner_patch(server.obj, capi_machine)
    if patch:
        server.obj = store.patch(server.ref, patch, dry_run=server.dry_run)
    spec = server.obj["spec"]

    def waiting(phase: str, message: str, requeue: float = WAIT, waits_on: list[Ref] | None = None,
                created: bool = False) -> ServerResult:
        return waiting_step(store, server, before, phase, message, requeue, waits_on, created)

    if cluster is None:
        return waiting("pending", "no MetalStackCluster: neither the label cluster.x-k8s.io/cluster-name nor "
                                  "its Machine's spec.clusterName names one")
    pool = (cluster.get("status") or {}).get("nodeNetworkPool")
    if not pool:
        return waiting("pending", f"waiting for the node network of MetalStackCluster {cluster['metadata']['name']}",
                       waits_on=[Ref.of(cluster)])
    user_data = _user_data(store, server, capi_machine)
    if user_data is None:
        return waiting("pending", "waiting for bootstrap data (Machine spec.bootstrap.dataSecretName)")
    image = resolve_image(store, server.ref.namespace, spec["image"])
    partition = spec.get("partition") or cluster["spec"].get("partition") or ""
    host, why = server.take_host(machine_type(spec), partition, pinned_id(spec), cluster["metadata"]["name"])
    if host is None:
        return waiting("pending", why, NO_HOST_WAIT, [Ref(BMH_API, BMH_KIND, "", server.ref.namespace)])
    address, why = server.claim_address("node", pool, {CLUSTER_NAME_LABEL: cluster["metadata"]["name"]})
    if address is None:
        return waiting("associated", why, created=True)
    network_data = server.network_data(host, [Attachment(pool, address, default_route=True)])
    host = server.provision(image, user_data or None, network_data)
    name = server.ref.name  # the node's name, as upstream tags the machine with it
    addresses = [{"type": "InternalIP", "address": address.address}, {"type": "Hostname", "address": name},
                 {"type": "InternalDNS", "address": name}]
    if not provisioned(host):
        write_status(store, server, False, [(MACHINE_CREATED, True, "Created", ""),
                                            (MACHINE_READY, False, "Provisioning",
                                             f"host {server.host_name} is {host_state(host) or 'new'}")], addresses)
        return _step(server, "provisioning", WAIT, f"host {server.host_name} is {host_state(host) or 'new'}",
                     server.obj != before)
    server.provider_id(host)
    write_status(store, server, True, [(MACHINE_CREATED, True, "Created", ""), (MACHINE_READY, True, "Ready", "")],
                 addresses)
    return _step(server, "provisioned", None, "ready", server.obj != before, ready=True)


def _user_data(store: Store, server: Server, capi_machine: Object | None) -> dict[str, str] | None:
    """The bootstrap data Secret: the Cluster API Machine's, written to spec.userData as the provider's design
    shows it; without Cluster API, spec.userData as given ({} for none). None while the Machine has none yet."""
    spec = server.obj["spec"]
    if capi_machine is not None:
        name = ((capi_machine.get("spec") or {}).get("bootstrap") or {}).get("dataSecretName")
        if not name:
            return None
        wanted = {"name": name, "namespace": server.ref.namespace}
        if spec.get("userData") != wanted:
            server.obj = store.patch(server.ref, {"spec": {"userData": wanted}}, dry_run=server.dry_run)
        return wanted
    ref = spec.get("userData")
    if not ref:
        return {}
    if (ref.get("namespace") or server.ref.namespace) != server.ref.namespace:
        raise Invalid(f"spec.userData.namespace: {ref['namespace']} is not the machine's namespace; the host reads "
                      "Secrets of its own namespace only")
    return {"name": ref["name"], "namespace": server.ref.namespace}
