#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: ip_pool
short_description: Create, update, refresh or delete an IPPool
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - Puts an C(ipam.metal3.io) IPPool into the store, with the checks upstream's webhook makes (entries by
    C(start) and C(end), C(start) alone, C(end) alone or C(subnet), with or without a prefix; valid addresses,
    CIDRs, gateways and DNS servers; start not after end; no address pre-allocated twice; preAllocations inside
    the pool; C(allocationStrategy=random) only over entries it can index; C(namePrefix) and
    C(allocationStrategy) immutable; no allocated address left outside), then rebuilds its status
    (C(indexes), as upstream names it, the same map as C(allocations), and the allocator's index) from its
    IPAddresses.
  - It also refuses what upstream lets through and what then fails later - a C(namePrefix) that cannot start an
    IPAddress name (C(<namePrefix>-<address>) must be a lowercase RFC 1123 subdomain of at most 253
    characters), an entry whose range does not fit in the network its prefix defines, overlapping entries, a
    gateway outside the network of an entry it serves (except an IPv6 link-local gateway, and /32 or /128
    prefixes), and a preAllocation of a gateway or an IPv4 broadcast address, which are never handed out.
  - Without O(spec), an existing pool is only refreshed; a pool that does not exist is an error.
  - The pool is checked against the IPPool CRD schema before anything else reads it, so a value of the wrong
    type (C(prefix) given as C(abc), say) fails the task with kube-apiserver's message, which names the field,
    and nothing is written.
  - A pool serves the claims of its own namespace only. O(allowed_namespaces) lets claims of other namespaces
    allocate from it (through the claim's C(spec.pool.namespace), its C(cluster.x-k8s.io/ip-pool-namespace)
    label, or the fallback to a pool of the C(default) namespace); it is kept on the pool as the annotation
    C(ipam.metal3.io/allowed-namespaces), a comma-separated list or C(*). A claim of a namespace the pool does
    not serve is refused with a message naming the pool and the namespace. Addresses already allocated stay
    when a namespace is taken off the list; new ones are refused.
  - The status rebuild also releases the addresses of the pool's claims that are being deleted (and their
    finalizers), as the claim's own reconcile would - a claim deleted with M(metal3.baremetal.resource), say -
    and addresses whose claim no longer exists.
  - With O(state=absent) a pool with allocations is refused and left alone.
options:
  state:
    description: Whether the pool should exist.
    type: str
    choices: [present, absent]
    default: present
  name:
    description: Name of the IPPool.
    type: str
    required: true
  namespace:
    description: Namespace of the IPPool.
    type: str
    default: default
  labels:
    description: Labels of the pool (for example C(cluster.x-k8s.io/network-name) or
      C(ippool.cluster.x-k8s.io/is-default)).
    type: dict
  allowed_namespaces:
    description:
      - Namespaces, besides the pool's own, whose claims may allocate from it; C(*) for every namespace.
        Set as the annotation C(ipam.metal3.io/allowed-namespaces). An empty list removes it (own namespace only).
      - Left out, the annotation is left as it is.
    type: list
    elements: str
  spec:
    description: The IPPool spec, with upstream's field names (C(namePrefix), C(pools), C(prefix), C(gateway),
      C(dnsServers), C(preAllocations), C(allocationStrategy), C(clusterName)).
    type: dict
extends_documentation_fragment:
  - metal3.baremetal.store
  - metal3.baremetal.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: The default pool of the provisioning network
  metal3.baremetal.ip_pool:
    name: provisioning
    namespace: metal3
    labels:
      ippool.cluster.x-k8s.io/is-default: "true"
    spec:
      namePrefix: provisioning
      pools:
        - start: 192.168.111.100
          end: 192.168.111.200
      prefix: 24
      gateway: 192.168.111.1

- name: A pool that also serves the claims of the tenant-a and tenant-b namespaces
  metal3.baremetal.ip_pool:
    name: shared
    namespace: metal3
    allowed_namespaces: [tenant-a, tenant-b]
    spec:
      namePrefix: shared
      pools:
        - subnet: 10.50.0.0/24
      gateway: 10.50.0.1

- name: Who holds what
  metal3.baremetal.ip_pool:
    name: provisioning
    namespace: metal3
  register: pool
"""

RETURN = r"""
pool:
  description: The IPPool object.
  returned: always
  type: dict
allocations:
  description: Claim name to its address.
  returned: always
  type: dict
  sample: {"node-0-0": "192.168.111.100"}
"""

from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.ansible_module import run_module
from ansible_collections.metal3.baremetal.plugins.module_utils.args import (
    store_options,
    validate_definition,
    with_store,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import (
    ALLOWED_NAMESPACES_ANNOTATION,
    IPAM_API,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.claims import pool_absent, pool_present
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    ref = Ref(IPAM_API, "IPPool", params["name"], params["namespace"])
    with open_store(store_options(params)) as store:
        if params["state"] == "absent":
            return pool_absent(store, ref, check_mode)
        existing = store.get_if_exists(ref)
        if existing is None and params["spec"] is None:
            raise NotFound(f"IPPool {ref.namespace}/{ref.name} does not exist and no spec was given")
        definition = None
        if params["spec"] is not None or params["labels"] is not None or params["allowed_namespaces"] is not None:
            metadata: dict[str, Any] = {"name": ref.name, "namespace": ref.namespace}
            if params["labels"] is not None:
                metadata["labels"] = params["labels"]
            if params["allowed_namespaces"] is not None:
                # None removes the annotation (a merge patch); pool_present leaves it out of a new pool.
                listed = ",".join(n.strip() for n in params["allowed_namespaces"] if n.strip())
                metadata["annotations"] = {ALLOWED_NAMESPACES_ANNOTATION: listed or None}
            definition = {"apiVersion": IPAM_API, "kind": "IPPool", "metadata": metadata}
            if params["spec"] is not None:
                definition["spec"] = params["spec"]
            validate_definition(definition, existing)
        return pool_present(store, definition, ref, check_mode)


SPEC = ModuleSpec(
    argument_spec=with_store({
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "name": {"type": "str", "required": True},
        "namespace": {"type": "str", "default": "default"},
        "labels": {"type": "dict"},
        "allowed_namespaces": {"type": "list", "elements": "str"},
        "spec": {"type": "dict"},
    }),
    run=run,
)


def main() -> None:
    run_module(SPEC)


if __name__ == "__main__":
    main()
