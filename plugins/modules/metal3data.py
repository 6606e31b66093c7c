#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: metal3data
short_description: Reconcile a Metal3DataClaim or a Metal3Data - index, addresses, rendered secrets
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - A Metal3DataClaim gets the Metal3Data with the lowest free index of its Metal3DataTemplate, named
    C(<template>-<index>); two claims racing for an index never share it (the name is the lock).
  - A Metal3Data claims one address per pool its template references (IPClaim C(<data>-<pool>)), renders the
    template's metaData and networkData (the engine of the P(metal3.baremetal.meta_data#filter) and
    P(metal3.baremetal.network_data#filter) filters) and writes the secrets C(<metal3machine>-metadata) and
    C(<metal3machine>-networkdata), which are never rendered again once they exist.
  - Deleted, they release their addresses and secrets. One step - what the operator runs for an event;
    M(metal3.baremetal.metal3machine) runs it too, for its own claim.
  - Read and written at C(infrastructure.cluster.x-k8s.io/v1beta2) (Metal3Data get no C(templateReference),
    v1beta1's only); the template's metaData and networkData are rendered in either version's spelling.
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
    choices: [Metal3DataClaim, Metal3Data]
    default: Metal3DataClaim
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
- name: One step of a data claim
  metal3.baremetal.metal3data:
    kind: Metal3DataClaim
    name: demo-controlplane-0
    namespace: metal3
"""

RETURN = r"""
ready:
  description: Whether the data is rendered.
  returned: always
  type: bool
requeue_after:
  description: Seconds after which to look again; null when nothing is pending.
  returned: always
  type: float
waits_on:
  description:
    - The objects whose change may let the data go on (the IPClaim of an address it waits for), in the form
      M(metal3.baremetal.requeue_after) takes as O(metal3.baremetal.requeue_after#module:wait_on).
  returned: when the data waits for an address
  type: list
  elements: dict
message:
  description: What the step did or waits for.
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
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import INFRA_API
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.data import reconcile_data, reconcile_data_claim
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    reconcile = reconcile_data_claim if params["kind"] == "Metal3DataClaim" else reconcile_data
    with open_store(store_options(params)) as store:
        step = reconcile(store, Ref(INFRA_API, params["kind"], params["name"], params["namespace"]), check_mode)
    return {**step.fields(), "ready": step.ready, "object": step.obj or {}}


SPEC = ModuleSpec(
    argument_spec=with_store({
        "kind": {"type": "str", "choices": ["Metal3DataClaim", "Metal3Data"], "default": "Metal3DataClaim"},
        "name": {"type": "str", "required": True},
        "namespace": {"type": "str", "default": "default"},
    }),
    run=run,
)


def main() -> None:
    run_module(SPEC)


if __name__ == "__main__":
    main()
