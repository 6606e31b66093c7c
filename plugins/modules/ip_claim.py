#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: ip_claim
short_description: Claim an IP address from an IPPool, or release it
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - Creates an C(ipam.metal3.io) IPClaim and allocates its address as the Metal3 IP address manager does
    (C(sequential) or C(random), preAllocations kept, the gateway never handed out), then returns it.
  - The same claim always gets its same address back. Two claimers, in one process or in many, never get one
    address - the IPAddress named after an address is created by one of them only.
  - The pool is O(pool), or is chosen by labels as the Cluster API ELF static-IP provider chooses it -
    O(ip_pool_name) (and O(ip_pool_namespace)), else O(ip_pool_group) and O(network_name), else the pool
    labelled C(ippool.cluster.x-k8s.io/is-default=true).
  - A pool of another namespace (O(pool_namespace), O(ip_pool_namespace), or the fallback to a pool of the
    C(default) namespace when the claim's namespace has none) serves the claim only when the pool's annotation
    C(ipam.metal3.io/allowed-namespaces) lists the claim's namespace or is C(*)
    (O(metal3.baremetal.ip_pool#module:allowed_namespaces) sets it). Otherwise the claim is refused - the task
    fails with a message naming the pool and the namespace, also written to the claim's status
    (C(errorMessage), C(Ready) false).
  - A claim holds one IPAddress at most, whatever point a claimer dies at (a crash, a killed job); the next
    run finds every address the claim owns and keeps one.
  - When no pool matches, the claim is left waiting with a clear message in its status; O(wait_timeout) waits
    for one to appear.
  - With O(state=absent) the claim is deleted and its address released.
options:
  state:
    description: Whether the claim should exist.
    type: str
    choices: [present, absent]
    default: present
  name:
    description: Name of the IPClaim.
    type: str
    required: true
  namespace:
    description: Namespace of the IPClaim.
    type: str
    default: default
  pool:
    description: Name of the IPPool to allocate from. Without it, the selection labels choose the pool.
    type: str
  pool_namespace:
    description: Namespace of O(pool); the claim's namespace when left out. A pool of another namespace must
      list the claim's namespace in its C(ipam.metal3.io/allowed-namespaces) annotation.
    type: str
  ip_pool_name:
    description: The C(cluster.x-k8s.io/ip-pool-name) label of the claim.
    type: str
  ip_pool_namespace:
    description: The C(cluster.x-k8s.io/ip-pool-namespace) label of the claim.
    type: str
  ip_pool_group:
    description: The C(cluster.x-k8s.io/ip-pool-group) label of the claim.
    type: str
  network_name:
    description: The C(cluster.x-k8s.io/network-name) label of the claim.
    type: str
  labels:
    description: Labels of the claim, copied to its IPAddress; selection labels may be given here too.
    type: dict
    default: {}
  address:
    description: The address to ask for (the C(ipAddress) annotation). Refused as upstream refuses it - with
      C(Requested IP not available) when another claim holds it or has it pre-allocated, C(Exhausted IP Pools)
      when no pool entry contains it - and, unlike upstream, when it is a gateway or an IPv4 broadcast address of
      the pool, which are never handed out (C(Invalid ipAddress annotation), naming the address and the entry).
    type: str
  wait_timeout:
    description: Seconds to wait for a pool to appear when none matches yet; 0 returns at once.
    type: int
    default: 0
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
- name: An address for the first NIC of node-0, from a named pool
  metal3.baremetal.ip_claim:
    name: node-0-0
    namespace: metal3
    pool: provisioning
  register: nic0

- name: An address from the pool of the storage network of group prod
  metal3.baremetal.ip_claim:
    name: node-0-1
    namespace: metal3
    ip_pool_group: prod
    network_name: storage

- name: A given address
  metal3.baremetal.ip_claim:
    name: vip
    namespace: metal3
    pool: provisioning
    address: 192.168.111.5

- name: Release it
  metal3.baremetal.ip_claim:
    name: vip
    namespace: metal3
    state: absent
"""

RETURN = r"""
allocated:
  description: Whether the claim holds an address.
  returned: always
  type: bool
address:
  description: The allocated address.
  returned: always
  type: str
  sample: 192.168.111.100
prefix:
  description: Prefix length of the address's network; null when the pool sets none (no prefix, no subnet).
  returned: always
  type: int
  sample: 24
gateway:
  description: Gateway of the address's network, when the pool has one.
  returned: always
  type: str
  sample: 192.168.111.1
dns_servers:
  description:
    - DNS servers of the address's network.
    - The result as a whole is the address record the P(metal3.baremetal.network_data#filter) and
      P(metal3.baremetal.meta_data#filter) filters read, given as the value of its pool's name.
  returned: always
  type: list
  elements: str
pool:
  description: The pool the address came from, as C(name) and C(namespace); empty when none.
  returned: always
  type: dict
  sample: {"name": "provisioning", "namespace": "metal3"}
ip_address:
  description: The IPAddress object.
  returned: always
  type: dict
claim:
  description: The IPClaim object.
  returned: always
  type: dict
"""

from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.ansible_module import run_module
from ansible_collections.metal3.baremetal.plugins.module_utils.args import store_options, with_store
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import IPAM_API
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.claims import (
    SELECTION_OPTIONS,
    claim_absent,
    claim_object,
    claim_present,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.pools import parse_ip
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    if params["address"]:  # refused before the claim is written, not after, as the annotation's error
        parse_ip(params["address"], "address")
    labels = dict(params["labels"])
    labels.update({label: params[option] for option, label in SELECTION_OPTIONS.items() if params[option]})
    with open_store(store_options(params)) as store:
        if params["state"] == "absent":
            return claim_absent(store, Ref(IPAM_API, "IPClaim", params["name"], params["namespace"]), check_mode)
        claim = claim_object(params["name"], params["namespace"], params["pool"], params["pool_namespace"], labels,
                             params["address"])
        return claim_present(store, claim, check_mode, params["wait_timeout"])


SPEC = ModuleSpec(
    argument_spec=with_store({
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "name": {"type": "str", "required": True},
        "namespace": {"type": "str", "default": "default"},
        "pool": {"type": "str"},
        "pool_namespace": {"type": "str"},
        "ip_pool_name": {"type": "str"},
        "ip_pool_namespace": {"type": "str"},
        "ip_pool_group": {"type": "str"},
        "network_name": {"type": "str"},
        "labels": {"type": "dict", "default": {}},
        "address": {"type": "str"},
        "wait_timeout": {"type": "int", "default": 0},
    }),
    run=run,
    mutually_exclusive=[["pool", "ip_pool_name"]],
    minimums={"wait_timeout": 0},
)


def main() -> None:
    run_module(SPEC)


if __name__ == "__main__":
    main()
