#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: metalstack
short_description: Reconcile the metal-stack provider's kinds - clusters with their network and firewall, machines
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - The metal-stack Cluster API provider's model on the collection's own hosts, IPAM and Ironic (there is no
    metal-api), for C(MetalStackCluster), C(MetalStackMachine) (C(infrastructure.cluster.x-k8s.io/v1alpha3)) and
    C(MetalStackFirewall) (C(v1alpha4)), the versions the provider's design writes them at.
  - A MetalStackCluster gets its own node network - a prefix of the IPPrefixPool of its C(partition), made an
    IPPool whose first address is the gateway (the firewall's) - written back as C(spec.nodeNetworkID) as
    upstream does (or uses the IPPool C(spec.nodeNetworkID) names); an empty C(spec.controlPlaneEndpoint.host)
    gets C(spec.controlPlaneIP) or an address of the IPPool C(spec.publicNetworkID); C(spec.firewallSpec) makes
    the MetalStackFirewall C(<cluster>-firewall). Ready once network and endpoint are there; its owner reference
    to its Cluster API Cluster is added. Deleted, it waits for its machines to go, then deletes the firewall,
    releases the control-plane address, then the network.
  - A MetalStackMachine or MetalStackFirewall takes a free host of its C(machineType) (upstream's C(size)), a
    MachineType of the namespace matched against the host's inspected hardware, in its partition (the host label
    C(infrastructure.cluster.x-k8s.io/failure-domain)), with the race-free claim every consumer uses; a
    C(providerID) (C(metalstack://<id>) or upstream's C(metal://<partition>/<id>), the id a host's Ironic node UUID
    or its name) pins it to that host, and it waits, saying why, while that host is taken or missing. The image
    is looked up in the ConfigMap C(metal-stack-images) of the namespace. A machine gets an address of the node
    network (default route via the firewall) and its Machine's bootstrap data (written to C(spec.userData)); the
    firewall gets the gateway and an address of the public network, and its nftables rule set as its user data.
  - Without O(wait_for), one step of each object - what the operator runs for an event. With it - from a
    bastion - the objects and the hosts they hold are stepped until each is ready or deleted, or
    O(wait_timeout) passes, or one cannot go on.
extends_documentation_fragment:
  - metal3.baremetal.store
  - metal3.baremetal.ironic
  - metal3.baremetal.attributes
attributes:
  check_mode:
    support: partial
    details: One step is computed and nothing is written; hosts are not reconciled.
  diff_mode:
    support: none
options:
  kind:
    description: The kind to reconcile.
    type: str
    required: true
    choices: [MetalStackCluster, MetalStackMachine, MetalStackFirewall]
  name:
    description: Name of the object. Without it, every object of the kind in O(namespace) matching O(label_selectors).
    type: str
  namespace:
    description: Namespace of the objects.
    type: str
    default: default
  label_selectors:
    description: Label selectors choosing the objects when O(name) is not given.
    type: list
    elements: str
    default: []
  wait_for:
    description: C(ready) - until every object is ready; C(deleted) - until every object is gone.
    type: str
    choices: [ready, deleted]
  wait_timeout:
    description: Seconds to wait for O(wait_for); 0 or more.
    type: int
    default: 1800
"""

EXAMPLES = r"""
- name: The cluster of the provider's design, with its network, endpoint and firewall
  metal3.baremetal.metalstack:
    kind: MetalStackCluster
    name: metal-stack-cluster
    namespace: metal-stack
    wait_for: ready

- name: Its machines, provisioned
  metal3.baremetal.metalstack:
    kind: MetalStackMachine
    namespace: metal-stack
    label_selectors: ["cluster.x-k8s.io/cluster-name=metal-stack-cluster"]
    wait_for: ready

- name: One reconcile step of a firewall (under the operator)
  metal3.baremetal.metalstack:
    kind: MetalStackFirewall
    name: metal-stack-cluster-firewall
    namespace: metal-stack
"""

RETURN = r"""
objects:
  description: Each object after the last step (one gone is left out).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Its name.
      type: str
    phase:
      description: pending, associated, provisioning, provisioned, ready, deleting or failed.
      type: str
    ready:
      description: Whether it is ready (C(status.ready)).
      type: bool
    host:
      description: A machine's or firewall's BareMetalHost, C(<namespace>/<name>); empty while it has none.
      type: str
    addresses:
      description: A machine's or firewall's C(status.addresses).
      type: list
      elements: dict
    node_network:
      description: A cluster's node network prefix.
      type: str
    control_plane_endpoint:
      description: A cluster's C(spec.controlPlaneEndpoint).
      type: dict
    message:
      description: What the last step did or waits for.
      type: str
    requeue_after:
      description: Seconds after which to look again; null when nothing is awaited.
      type: float
    waits_on:
      description: The objects whose change may let it go on, as M(metal3.baremetal.requeue_after) takes them.
      type: list
      elements: dict
"""

from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.ansible_module import run_module
from ansible_collections.metal3.baremetal.plugins.module_utils.args import IRONIC_MINIMUMS, store_options, with_ironic
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref, check_name, check_namespace
from ansible_collections.metal3.baremetal.plugins.module_utils.core.selector import parse_selector
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import IronicOptions
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.converge import KINDS, TARGETS, converge
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    options = store_options(params)
    kind = params["kind"]
    api_version = KINDS[kind][0]
    namespace = check_namespace(params["namespace"], "namespace")
    if params["name"]:
        refs = [Ref(api_version, kind, check_name(params["name"], "name"), namespace)]
    else:
        with open_store(options) as store:
            selector = str(parse_selector(params["label_selectors"])) or None
            refs = sorted((Ref.of(o) for o in store.list(api_version, kind, namespace, selector)),
                          key=lambda r: r.name)
    wait_for = params["wait_for"]
    steps, reached = converge(lambda: open_store(options), IronicOptions.from_params(params), kind, refs, wait_for,
                              params["wait_timeout"] if wait_for else 0, check_mode)
    result: dict[str, Any] = {"changed": any(s.changed for s in steps),
                              "objects": [{**s.summary(), "namespace": namespace} for s in steps if s.obj is not None]}
    failing = [s for s in steps if s.error]
    if failing or wait_for and not reached:
        late = failing or [s for s in steps if s.obj is not None]
        result.update(failed=True, msg="; ".join(
            f"{kind} {namespace}/{s.summary()['name']} is {s.phase}: {s.error or s.message}" for s in late)
            or f"not {wait_for}")
    return result


SPEC = ModuleSpec(
    argument_spec=with_ironic({
        "kind": {"type": "str", "required": True, "choices": list(KINDS)},
        "name": {"type": "str"},
        "namespace": {"type": "str", "default": "default"},
        "label_selectors": {"type": "list", "elements": "str", "default": []},
        "wait_for": {"type": "str", "choices": list(TARGETS)},
        "wait_timeout": {"type": "int", "default": 1800},
    }),
    run=run,
    mutually_exclusive=[["name", "label_selectors"]],
    minimums={"wait_timeout": 0, **IRONIC_MINIMUMS},
)


def main() -> None:
    run_module(SPEC)


if __name__ == "__main__":
    main()
