#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: metal3remediation
short_description: Reconcile a Metal3Remediation - reboot an unhealthy machine's host, or give the machine up
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - One reconcile step of a Metal3Remediation, strategy C(Reboot), as CAPM3's controller - made by a
    MachineHealthCheck from a Metal3RemediationTemplate for an unhealthy Machine, and owned by it.
  - Phase C(Running) powers the Machine's host off (annotation C(reboot.metal3.io/metal3-remediation-<uid>)),
    keeps the workload cluster's Node's labels and annotations on the remediation and deletes the Node; phase
    C(Waiting) powers the host on again and, once the Node is back, gives it what it lost.
  - A Node not back within C(spec.strategy.timeoutSeconds) (600 by default) is tried again, C(retryLimit) more
    times; then the Machine's C(OwnerRemediated) condition is set false (Cluster API deletes and replaces the
    Machine), the host is annotated C(capm3.metal3.io/unhealthy) (no machine chooses it again) and the phase is
    C(Deleting machine). A host with C(spec.online=false) makes the phase C(Failed).
  - The workload cluster is reached through the C(<cluster>-kubeconfig) Secret Cluster API keeps, checked as
    any kubeconfig a tenant writes (O(allowed_local_hosts)).
  - Where this differs from CAPM3 (the condition written among the Machine's v1beta2 conditions too; a deleted
    remediation powers its host on and goes; no out-of-service taint) is said in C(docs/machines.md).
extends_documentation_fragment:
  - metal3.baremetal.store
  - metal3.baremetal.outbound
  - metal3.baremetal.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
options:
  name:
    description: Name of the Metal3Remediation (its Machine's).
    type: str
    required: true
  namespace:
    description: Its namespace.
    type: str
    default: default
"""

EXAMPLES = r"""
- name: One step of a remediation
  metal3.baremetal.metal3remediation:
    name: my-cluster-workers-abc12
    namespace: metal3
"""

RETURN = r"""
phase:
  description: C(status.phase) after the step - C(Running), C(Waiting), C(Deleting machine), C(Failed), or empty.
  returned: always
  type: str
requeue_after:
  description: Seconds after which to look again; null when nothing is pending.
  returned: always
  type: float
message:
  description: What the step did or waits for.
  returned: always
  type: str
remediation:
  description: The Metal3Remediation after the step; empty once gone.
  returned: always
  type: dict
"""

from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.ansible_module import run_module
from ansible_collections.metal3.baremetal.plugins.module_utils.args import store_options, with_outbound, with_store
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import INFRA_API
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.remediation import KIND, reconcile_remediation
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    with open_store(store_options(params)) as store:
        step = reconcile_remediation(store, Ref(INFRA_API, KIND, params["name"], params["namespace"]), check_mode,
                                     OutboundPolicy.from_params(params))
    return {**step.fields(), "phase": step.phase, "remediation": step.obj or {}}


SPEC = ModuleSpec(
    argument_spec=with_outbound(with_store({
        "name": {"type": "str", "required": True},
        "namespace": {"type": "str", "default": "default"},
    })),
    run=run,
)


def main() -> None:
    run_module(SPEC)


if __name__ == "__main__":
    main()
