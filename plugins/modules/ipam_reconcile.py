#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: ipam_reconcile
short_description: Reconcile an IPPool, IPClaim, IPAddressClaim, IPPrefixPool or IPPrefixClaim that already exists
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - One step of the Metal3 IP address manager for one object, by kind and name - what the operator runs for an
    event, through the role C(metal3.baremetal.ipam_reconcile). The object is read from the store, never
    written from options; M(metal3.baremetal.ip_claim) and M(metal3.baremetal.ip_pool) put claims and pools
    in place.
  - An IPClaim (C(ipam.metal3.io)) or a Cluster API IPAddressClaim (C(ipam.cluster.x-k8s.io), read and answered
    at v1beta2, the contract's version; a v1beta1 claim reads the same) gets its address and a C(Ready)
    condition; deleted, it releases it. An IPAddressClaim's answer is a C(ipam.cluster.x-k8s.io/v1beta2)
    IPAddress named after it. Allocation errors are in the claim's status. Those only a change of the pool can
    cure (C(Exhausted IP Pools), C(Requested IP not available)) do not fail the task; the claim waits, with
    RV(requeue_after) set and its pool in RV(waits_on); the others (C(Pre-allocated IP out of bounds), a pool that
    does not serve the claim's namespace, ...) fail it with that message.
  - An IPPool gets its status rebuilt from its IPAddresses, after releasing the addresses (and finalizers) of
    its claims that are being deleted and the addresses whose claim no longer exists; deleted, it goes once
    nothing is allocated from it.
  - A claim is refused a pool of another namespace unless the pool's C(ipam.metal3.io/allowed-namespaces)
    annotation lists the claim's namespace (or is C(*)).
  - An IPPrefixClaim gets a child prefix of its IPPrefixPool (of its namespace), the lowest free one, held by an
    IPPrefix named after the pool and the prefix, and its C(Ready) condition (C(PrefixAllocated)); deleted, it
    gives it back. A claim that waits - its pool exhausted (C(PoolExhausted)), not found (C(PoolNotFound)) or being
    deleted (C(PoolDeleting)) - does not fail the task; it says why in RV(reason) and RV(message), with
    RV(requeue_after) set and its pool in RV(waits_on). A pool that cannot work (a malformed CIDR, a
    C(prefixLength) that does not fit a parent) fails it, naming the field, with nothing written.
  - An IPPrefixPool gets its C(allocated) and C(free) counts written, after giving back the prefixes of its claims
    that are gone or being deleted; deleted, it goes once no prefix is allocated from it.
extends_documentation_fragment:
  - metal3.baremetal.store
  - metal3.baremetal.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
options:
  kind:
    description: The kind to reconcile.
    type: str
    choices: [IPPool, IPClaim, IPAddressClaim, IPPrefixPool, IPPrefixClaim]
    default: IPClaim
  name:
    description: Its name.
    type: str
    required: true
  namespace:
    description: Its namespace.
    type: str
    default: default
"""

EXAMPLES = r"""
- name: One step of an IPClaim
  metal3.baremetal.ipam_reconcile:
    kind: IPClaim
    name: node-0-provisioning
    namespace: metal3

- name: One step of a cluster's node network claim
  metal3.baremetal.ipam_reconcile:
    kind: IPPrefixClaim
    name: cluster-a-nodes
    namespace: metal3
  register: node_network

- name: Its prefix, once it has one
  ansible.builtin.debug:
    msg: "{{ node_network.prefix if node_network.ready else node_network.reason }}"
"""

RETURN = r"""
ready:
  description: Whether the claim holds its address (its prefix, for an IPPrefixClaim; for an IPPool or an
    IPPrefixPool, whether it is in place and not being deleted).
  returned: always
  type: bool
requeue_after:
  description: Seconds after which to look again (no pool matches yet, the pool is exhausted, a pool still has
    allocations); null otherwise.
  returned: always
  type: float
waits_on:
  description:
    - The objects whose change may let the claim go on (its pool; with a name of C("") any pool of the
      namespace), in the form M(metal3.baremetal.requeue_after) takes as
      O(metal3.baremetal.requeue_after#module:wait_on).
  returned: when the claim waits for a pool
  type: list
  elements: dict
  sample: [{api_version: ipam.metal3.io/v1alpha1, kind: IPPool, namespace: metal3, name: provisioning}]
address:
  description: The claim's address, when it has one.
  returned: always
  type: str
prefix:
  description: The IPPrefixClaim's prefix, as a CIDR, when it has one.
  returned: always
  type: str
  sample: 10.8.4.0/24
reason:
  description: Why the IPPrefixClaim holds no prefix yet (C(PoolExhausted), C(PoolNotFound), C(PoolDeleting)); empty
    otherwise.
  returned: always
  type: str
allocated:
  description: How many child prefixes are allocated from the IPPrefixPool.
  returned: when kind is IPPrefixPool
  type: int
  sample: 3
free:
  description: How many child prefixes of the IPPrefixPool are free (at most 2^63 - 1).
  returned: when kind is IPPrefixPool
  type: int
  sample: 5
message:
  description: What the claim waits for, or why it has no address.
  returned: always
  type: str
object:
  description: The object after the step; empty once gone.
  returned: always
  type: dict
"""

from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.ansible_module import run_module
from ansible_collections.metal3.baremetal.plugins.module_utils.args import store_options, with_store
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import (
    CAPI_IPAM_API,
    IPAM_API,
    WAITING_REQUEUE,
    reconcile_ip_address_claim,
    reconcile_ip_claim,
    reconcile_ip_pool,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.prefixes import (
    reconcile_prefix_claim,
    reconcile_prefix_pool,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec

API = {"IPPool": IPAM_API, "IPClaim": IPAM_API, "IPAddressClaim": CAPI_IPAM_API, "IPPrefixPool": IPAM_API,
       "IPPrefixClaim": IPAM_API}


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    kind = params["kind"]
    ref = Ref(API[kind], kind, params["name"], params["namespace"])
    with open_store(store_options(params)) as store:
        if kind == "IPPrefixPool":
            state = reconcile_prefix_pool(store, ref, check_mode)
            return {**state.fields(), "ready": state.obj is not None and not state.removed and not state.waiting,
                    "address": None, "prefix": None, "reason": "", "object": state.obj or {},
                    "allocated": state.allocated, "free": state.free}
        if kind == "IPPrefixClaim":
            claim = reconcile_prefix_claim(store, ref, check_mode)
            return {**claim.fields(), "ready": claim.prefix is not None, "address": None, "prefix": claim.prefix,
                    "reason": claim.reason, "object": claim.obj or {}}
        if kind == "IPPool":
            pool = reconcile_ip_pool(store, ref, check_mode)
            return {**pool.fields(), "ready": pool.obj is not None and not pool.removed and not pool.waiting,
                    "address": None, "prefix": None, "reason": "", "object": pool.obj or {}}
        reconcile = reconcile_ip_claim if kind == "IPClaim" else reconcile_ip_address_claim
        allocation = reconcile(store, ref, check_mode)
    result = {**allocation.fields(), "ready": allocation.address is not None,
              "address": allocation.summary()["address"], "prefix": None, "reason": "", "object": allocation.obj or {}}
    if allocation.error and allocation.waits_on:
        # Not a failure: the claim waits for its pool to change (an address freed), as upstream's claims do.
        result["requeue_after"] = WAITING_REQUEUE
    elif allocation.error:
        result.update(failed=True, msg=f"{kind} {ref.namespace}/{ref.name}: {allocation.error}")
    return result


SPEC = ModuleSpec(
    argument_spec=with_store({
        "kind": {"type": "str", "choices": list(API), "default": "IPClaim"},
        "name": {"type": "str", "required": True},
        "namespace": {"type": "str", "default": "default"},
    }),
    run=run,
)


def main() -> None:
    run_module(SPEC)


if __name__ == "__main__":
    main()
