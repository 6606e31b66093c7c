#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: ip_pool
short_description: Create, update, refresh or delete an IPPool
version_added: 0.1.0
author: Metal3 community (@metal3-io)
description:
  - Puts an C(ipam.metal3.io) IPPool into the store, with the checks upstream's webhook makes (valid addresses
    and CIDRs, start before end and inside the subnet, no overlapping entries, preAllocations inside the pool,
    one address family per entry, C(namePrefix) and C(allocationStrategy) immutable, no allocated address left
    outside), then rebuilds its status (C(allocations), the allocator's index) from its IPAddresses.
  - Without O(spec), an existing pool is only refreshed.
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
from ansible_collections.metal3.baremetal.plugins.module_utils.args import store_options, with_store
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import IPAM_API
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.claims import pool_absent, pool_present
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec
from ansible_collections.metal3.baremetal.plugins.module_utils.store.factory import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.objects import Ref


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    ref = Ref(IPAM_API, "IPPool", params["name"], params["namespace"])
    with open_store(store_options(params)) as store:
        if params["state"] == "absent":
            return pool_absent(store, ref, check_mode)
        definition = None
        if params["spec"] is not None or params["labels"] is not None:
            metadata: dict[str, Any] = {"name": ref.name, "namespace": ref.namespace}
            if params["labels"] is not None:
                metadata["labels"] = params["labels"]
            definition = {"apiVersion": IPAM_API, "kind": "IPPool", "metadata": metadata}
            if params["spec"] is not None:
                definition["spec"] = params["spec"]
        return pool_present(store, definition, ref, check_mode)


SPEC = ModuleSpec(
    argument_spec=with_store({
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "name": {"type": "str", "required": True},
        "namespace": {"type": "str", "default": "default"},
        "labels": {"type": "dict"},
        "spec": {"type": "dict"},
    }),
    run=run,
)


def main() -> None:
    run_module(SPEC)


if __name__ == "__main__":
    main()
