#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: metal3cluster
short_description: Reconcile a Metal3Cluster - provisioned with its control-plane endpoint, failure domains in status
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - One reconcile step of a Metal3Cluster, as CAPM3's controller - the finalizer,
    C(status.initialization.provisioned) once C(spec.controlPlaneEndpoint) has a host and a port,
    C(status.failureDomains) copied from the spec, the C(BaremetalInfrastructureReady) condition.
  - The cluster is read and written at C(infrastructure.cluster.x-k8s.io/v1beta2), the CRDs' storage version; one
    written at C(v1beta1) is converted (a v1beta1 reader sees C(status.ready) and a failure domain map).
  - A deleted Metal3Cluster goes once none of its Metal3Machines (label C(cluster.x-k8s.io/cluster-name)) is left.
extends_documentation_fragment:
  - metal3.baremetal.store
  - metal3.baremetal.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
options:
  name:
    description: Name of the Metal3Cluster.
    type: str
    required: true
  namespace:
    description: Its namespace.
    type: str
    default: default
"""

EXAMPLES = r"""
- name: One step of a cluster
  metal3.baremetal.metal3cluster:
    name: my-cluster
    namespace: metal3
"""

RETURN = r"""
ready:
  description: C(status.initialization.provisioned) (v1beta1's C(status.ready)).
  returned: always
  type: bool
requeue_after:
  description: Seconds after which to look again; null when nothing is pending.
  returned: always
  type: float
message:
  description: What the step found.
  returned: always
  type: str
cluster:
  description: The Metal3Cluster after the step; empty once gone.
  returned: always
  type: dict
"""

from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.ansible_module import run_module
from ansible_collections.metal3.baremetal.plugins.module_utils.args import store_options, with_store
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.cluster import reconcile_metal3cluster
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import INFRA_API
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    with open_store(store_options(params)) as store:
        step = reconcile_metal3cluster(store, Ref(INFRA_API, "Metal3Cluster", params["name"], params["namespace"]),
                                       check_mode)
    return {**step.fields(), "ready": step.ready, "cluster": step.obj or {}}


SPEC = ModuleSpec(
    argument_spec=with_store({
        "name": {"type": "str", "required": True},
        "namespace": {"type": "str", "default": "default"},
    }),
    run=run,
)


def main() -> None:
    run_module(SPEC)


if __name__ == "__main__":
    main()
