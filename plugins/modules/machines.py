#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: machines
short_description: Keep N Cluster API Machines and their Metal3Machines, spread over failure domains
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - What a KubeadmControlPlane or a MachineDeployment does, for bastions without Cluster API - keeps O(replicas)
    C(cluster.x-k8s.io/v1beta1) Machines named C(<name>-<i>), each with a Metal3Machine
    (C(infrastructure.cluster.x-k8s.io/v1beta2)) cloned from O(template) (annotation
    C(cluster.x-k8s.io/cloned-from-name)) and owned by its Machine. The template and the Metal3Cluster may have
    been written at either CAPM3 version.
  - Each new machine gets the failure domain of the Metal3Cluster with the fewest machines of the set (ties -
    the first by name); a control plane only uses domains marked C(controlPlane).
  - Machines beyond O(replicas) are deleted, their Metal3Machines with them (which releases their hosts).
  - The machines are provisioned by M(metal3.baremetal.metal3machine).
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
    description: Name of the set; machines are C(<name>-<i>) and carry the label C(metal3.baremetal/machine-set).
    type: str
    required: true
  namespace:
    description: Namespace of the set, its template and its cluster.
    type: str
    default: default
  cluster:
    description: The Metal3Cluster (and Cluster API cluster name) the machines belong to.
    type: str
    required: true
  template:
    description: The Metal3MachineTemplate to clone.
    type: str
    required: true
  replicas:
    description: How many machines; 0 or more.
    type: int
    required: true
  control_plane:
    description: A control plane - labels C(cluster.x-k8s.io/control-plane), only control-plane failure domains.
    type: bool
    default: false
  bootstrap_secret:
    description: The Secret with the machines' bootstrap (cloud-init user) data, C(spec.bootstrap.dataSecretName).
    type: str
  kind:
    description:
      - The class of compute that serves the machines - C(baremetal) or C(libvirt) (virtual machines) - written to
        each new Metal3Machine's C(spec.kind) over the template's, so that one template serves a set of servers
        and a set of virtual machines (a hybrid cluster). Machines made before keep theirs.
    type: str
    choices: [baremetal, libvirt]
  args:
    description: The machines' C(spec.args) over the template's (kind C(libvirt) - C(cpus), C(memory), C(disk),
      C(nics)).
    type: dict
"""

EXAMPLES = r"""
- name: Three control-plane machines, spread over the cluster's failure domains
  metal3.baremetal.machines:
    name: demo-controlplane
    namespace: metal3
    cluster: demo
    template: demo-controlplane
    replicas: 3
    control_plane: true
    bootstrap_secret: demo-controlplane-userdata
"""

RETURN = r"""
machines:
  description: The set's Machines, each with C(name) and C(failure_domain).
  returned: always
  type: list
  elements: dict
"""

from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.ansible_module import run_module
from ansible_collections.metal3.baremetal.plugins.module_utils.args import store_options, with_store
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import CAPI_API
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.machines import (
    SET_LABEL,
    MachineSet,
    ensure_machines,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.compute import registry
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    machine_set = MachineSet(params["name"], params["namespace"], params["cluster"], params["template"],
                             params["replicas"], params["control_plane"], params["bootstrap_secret"], params["kind"],
                             {k: str(v) for k, v in params["args"].items()} if params["args"] is not None else None)
    with open_store(store_options(params)) as store:
        listed = store.list(CAPI_API, "Machine", params["namespace"], f"{SET_LABEL}={params['name']}")
        before = {m["metadata"]["name"] for m in listed}
        machines = ensure_machines(store, machine_set, check_mode)
    names = [m["metadata"]["name"] for m in machines]
    return {"changed": set(names) != before,
            "machines": [{"name": m["metadata"]["name"], "failure_domain": (m.get("spec") or {}).get("failureDomain")}
                         for m in machines]}


SPEC = ModuleSpec(
    argument_spec=with_store({
        "name": {"type": "str", "required": True},
        "namespace": {"type": "str", "default": "default"},
        "cluster": {"type": "str", "required": True},
        "template": {"type": "str", "required": True},
        "replicas": {"type": "int", "required": True},
        "control_plane": {"type": "bool", "default": False},
        "bootstrap_secret": {"type": "str", "no_log": False},  # the name of a Secret, not a secret
        "kind": {"type": "str", "choices": list(registry.kinds())},  # DOCUMENTATION's: validate-modules holds it
        "args": {"type": "dict"},
    }),
    run=run,
    minimums={"replicas": 0},
)


def main() -> None:
    run_module(SPEC)


if __name__ == "__main__":
    main()
