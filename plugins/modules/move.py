#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: move
short_description: Move one cluster's objects from one store to another (a pivot), as clusterctl move does
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - Moves the object graph of the Cluster API cluster O(cluster) in O(namespace) from the store O(source) to the
    store O(target) - a local SQLite file or a Kubernetes cluster on either side.
  - What moves is what C(clusterctl move) discovers - the objects of the workload kinds labelled
    C(cluster.x-k8s.io/cluster-name=<cluster>), the Cluster, whatever they own (ownerReferences, transitively) and
    whatever they name (data templates, user data Secrets, the IPPools a data template takes addresses from) -
    Cluster API's kinds, CAPM3's, metal-stack's, IPAM's (C(ipam.metal3.io) and Cluster API IPAM), HostClaims and
    their HardwareData, and the Secrets and ConfigMaps they own.
  - BareMetalHosts, their BMC credential Secrets and Ironic stay where they are, unless O(include_hosts) - then
    the hosts the cluster's machines consume move too, with their BMC Secrets, each carrying its status in the
    C(baremetalhost.metal3.io/status) annotation so that the target adopts it instead of provisioning it again.
    A host to move must be in a steady state (provisioned, externally provisioned, available, ready, unmanaged).
  - The move pauses everything in the source (C(cluster.x-k8s.io/paused), the Cluster's C(spec.paused), the host
    pause annotation), creates each object in the target owners first with its status, deletes it from the source
    with its finalizers removed (no reconcile acts on the deletion), then unpauses in the target what it paused.
  - A move interrupted at any point finishes when run again; a move of a cluster already moved changes nothing.
  - It moves one cluster, never what belongs to or is used by the rest of the namespace. An object labelled
    C(cluster.x-k8s.io/cluster-name) for another cluster (or an IP pool whose C(spec.clusterName) names another)
    never moves. A Secret or ConfigMap that objects outside the move also use (another cluster's objects, a host
    that stays) stays in the source untouched, and RV(stayed) lists it with why (check mode too); the moved
    objects that name it need a copy in the target.
  - The move is refused, naming the object and why and writing nothing, when the cluster is in neither store,
    when the target holds an object of the same name that the move did not make, when a host is busy, or when it
    would split an object of another kind from its users - an IPPool another cluster takes addresses from (each
    store would give out the other's addresses), another cluster's pool or template that this cluster needs, a
    Secret another cluster uses but that an object of the move owns, or the BMC credentials of a moving host that
    another host uses.
options:
  cluster:
    description: Name of the Cluster to move.
    type: str
    required: true
  namespace:
    description: Its namespace, in both stores.
    type: str
    default: default
  source:
    description:
      - The store the cluster is in, with the options of the other modules' store (no environment variable fills
        them in).
    type: dict
    required: true
    suboptions: &store
      backend:
        description: C(local), an embedded SQLite file on the controller, or C(kubernetes), a cluster.
        type: str
        choices: [local, kubernetes]
      store_path:
        description: The SQLite file of the C(local) backend.
        type: path
      kubeconfig:
        description: Path to a kubeconfig file, or its content as a mapping, for the C(kubernetes) backend.
        type: raw
      context:
        description: The kubeconfig context to use.
        type: str
      host:
        description: URL of the Kubernetes API.
        type: str
      api_key:
        description: Bearer token for the Kubernetes API.
        type: str
      validate_certs:
        description: Whether to verify the API server's certificate.
        type: bool
        aliases: [verify_ssl]
      ca_cert:
        description: CA certificate of the API server.
        type: path
        aliases: [ssl_ca_cert]
      client_cert:
        description: Client certificate.
        type: path
        aliases: [cert_file]
      client_key:
        description: Key of the client certificate.
        type: path
        aliases: [key_file]
  target:
    description: The store the cluster moves to, with the same options as O(source).
    type: dict
    required: true
    suboptions: *store
  claims_identity_ref:
    description:
      - The Secret, in the target's O(namespace), holding a kubeconfig (key C(kubeconfig), inline credentials)
        that reaches the cluster whose hosts the moved HostClaims are bound to. Each bound HostClaim whose host
        stays in the source gets it as its C(spec.identityRef), and keeps its host.
      - Not needed for claims that already have an C(identityRef) (the Secret it names moves with them), nor for
        claims moved back into the store that holds their hosts (their C(identityRef) is then dropped).
    type: str
  include_hosts:
    description: Move the BareMetalHosts the cluster consumes, with their BMC Secrets (the single-tenant move).
    type: bool
    default: false
extends_documentation_fragment:
  - metal3.baremetal.attributes
attributes:
  check_mode:
    support: full
    details: Lists what would move, and changed as it would be; nothing is written.
  diff_mode:
    support: none
notes:
  - The task runs on the controller, where the stores are, through an action plugin of the same name.
  - Unlike C(clusterctl move), the hosts stay by default (a tenant's cluster must not take the BMC credentials
    along), and the move is resumable - C(clusterctl move) interrupted leaves the objects half moved.
  - Delete or stop the source's Ironic first when the hosts move, so that two Ironic instances do not manage them.
  - Not a member of the action group C(group/metal3.baremetal.all), whose members each work on one store; the
    move works on two, each given as its own option (O(source), O(target)), so a play's C(module_defaults) for the
    group leave it alone.
"""

EXAMPLES = r"""
- name: Pivot the cluster from the bastion's local store to the cluster itself
  metal3.baremetal.move:
    cluster: c1
    namespace: metal3
    source:
      backend: local
    target:
      backend: kubernetes
      kubeconfig: ~/c1.kubeconfig
  register: pivot

- name: What would move, with the hosts, back to the bastion
  metal3.baremetal.move:
    cluster: c1
    namespace: metal3
    source: {backend: kubernetes, kubeconfig: ~/c1.kubeconfig}
    target: {backend: local}
    include_hosts: true
  check_mode: true
"""

RETURN = r"""
moved:
  description: The objects the move carried (or, in check mode, would carry), owners first; empty when the
    cluster had been moved already.
  returned: always
  type: list
  elements: dict
  sample: [{"kind": "Cluster", "namespace": "metal3", "name": "c1"}]
stayed:
  description:
    - The objects of the cluster's graph that stay in the source (or, in check mode, would stay), with why - a
      Secret or ConfigMap used outside the move, or one of another cluster's that the moved objects name.
      Nothing of them is written.
  returned: always
  type: list
  elements: dict
  sample: [{"kind": "Secret", "namespace": "metal3", "name": "shared-user-data",
            "reason": "used outside the move by Metal3Machine metal3/other-0 too"}]
message:
  description: How many objects moved, or that the cluster had been moved already; how many stayed.
  returned: always
  type: str
"""

from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.ansible_module import run_module
from ansible_collections.metal3.baremetal.plugins.module_utils.args import STORE_ARG_SPEC, store_options
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec
from ansible_collections.metal3.baremetal.plugins.module_utils.pivot.move import move_cluster

# The store options, without their environment fallbacks: the source and the target are always said.
STORE_SUBOPTIONS = {name: {k: v for k, v in option.items() if k != "fallback"}
                    for name, option in STORE_ARG_SPEC.items()}


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    with open_store(store_options(params["source"])) as source, open_store(store_options(params["target"])) as target:
        result = move_cluster(source, target, params["cluster"], params["namespace"], params["include_hosts"],
                              dry_run=check_mode, claims_identity_ref=params["claims_identity_ref"])
    return {"changed": result.changed, "message": result.message, "moved": result.moved, "stayed": result.stayed}


SPEC = ModuleSpec(
    argument_spec={
        "cluster": {"type": "str", "required": True},
        "namespace": {"type": "str", "default": "default"},
        "source": {"type": "dict", "required": True, "options": STORE_SUBOPTIONS},
        "target": {"type": "dict", "required": True, "options": STORE_SUBOPTIONS},
        "include_hosts": {"type": "bool", "default": False},
        "claims_identity_ref": {"type": "str"},
    },
    run=run,
)


def main() -> None:
    run_module(SPEC)


if __name__ == "__main__":
    main()
