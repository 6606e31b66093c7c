#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: metal3machine
short_description: Reconcile Metal3Machines - host claim, rendered data, provisioning - one step or until ready
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - Runs CAPM3's Metal3Machine flow for each selected Metal3Machine - choose and claim a BareMetalHost (its
    C(hostSelector), the machine's failure domain preferred, node-reuse hosts first), claim a Metal3Data from the
    data template of the claimed host's failure domain (C(dataTemplatesByFailureDomain) or the template's
    C(failureDomainDataTemplates), else C(dataTemplate)), render C(<machine>-metadata) and
    C(<machine>-networkdata) with addresses from the IP pools, write the host's spec, and once the host is
    provisioned set C(providerID) (C(metal3://<namespace>/<host>/<machine>)), the addresses and
    C(status.initialization.provisioned).
  - Metal3Machines and the objects they lead to are read and written at C(infrastructure.cluster.x-k8s.io/v1beta2),
    the CRDs' storage version; those written at C(v1beta1) are converted (C(image.format) is v1beta2's
    C(image.diskFormat), which the host gets as its C(image.format); C(status.ready) is
    C(status.initialization.provisioned)).
  - A deleted Metal3Machine clears and powers off its host, waits for it to deprovision, releases it (or keeps it
    for node reuse), releases its data and addresses, then lets the Metal3Machine go.
  - A host is claimed by a resourceVersion-checked update, so two claimers never get one host.
  - Without O(wait_for), one step of each machine - what the operator runs for an event; the hosts are reconciled
    by their own reconciles (M(metal3.baremetal.baremetal_host)). With it - from a bastion - the machines and
    their hosts are stepped until every machine is ready (or deleted), or O(wait_timeout) passes.
extends_documentation_fragment:
  - metal3.baremetal.store
  - metal3.baremetal.ironic
  - metal3.baremetal.libvirt
  - metal3.baremetal.outbound
  - metal3.baremetal.attributes
attributes:
  check_mode:
    support: partial
    details: One step is computed and nothing is written; hosts are not reconciled.
  diff_mode:
    support: none
options:
  name:
    description: Name of the Metal3Machine. Without it, every Metal3Machine of O(namespace) matching O(label_selectors).
    type: str
  namespace:
    description: Namespace of the Metal3Machines.
    type: str
    default: default
  label_selectors:
    description: Label selectors choosing the Metal3Machines when O(name) is not given.
    type: list
    elements: str
    default: []
  wait_for:
    description: C(ready) - until every machine is provisioned and ready; C(deleted) - until every one is gone.
    type: str
    choices: [ready, deleted]
  wait_timeout:
    description: Seconds to wait for O(wait_for); 0 or more.
    type: int
    default: 1800
  strict_failure_domain:
    description:
      - Only claim a host labelled with the machine's failure domain. By default the failure domain is a
        preference, as upstream - with no free host in it, any free host is claimed.
    type: bool
    default: false
  host_claim_mode:
    description:
      - HostClaim mode (upstream's design for multi-tenancy) - each machine makes a HostClaim named after it in
        its namespace, which binds a host of a namespace whose HostDeployPolicy admits the machine's; its data are
        rendered from the host as the claim shows it (labels, boot MAC and hardware - not its annotations), and
        its image and data go to the host through the claim. Node reuse is not done in this mode. Default from
        E(METAL3_HOST_CLAIM_MODE), else false.
      - A machine whose C(spec.kind) names a class of compute (upstream's hybrid-cluster design) is in HostClaim
        mode whatever this says - its HostClaim has that kind and the machine's C(spec.args); C(libvirt) - a
        virtual machine of its own, defined as the O(libvirt_bridge) and other libvirt options say.
    type: bool
    default: false
  fast_track:
    description:
      - How a released host is powered, as upstream's fast-track matrix - C(disablePowerOff) keeps it on; with
        fast track a host that will be cleaned (C(automatedCleaningMode) not C(disabled)) stays on; otherwise it is
        powered off. Default from E(CAPM3_FAST_TRACK), else false.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Provision every machine of a cluster and wait
  metal3.baremetal.metal3machine:
    namespace: metal3
    label_selectors: ["cluster.x-k8s.io/cluster-name=demo"]
    wait_for: ready

- name: One reconcile step of one machine (under the operator)
  metal3.baremetal.metal3machine:
    name: demo-controlplane-0
    namespace: metal3
"""

RETURN = r"""
machines:
  description: Each machine after the last step.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Name of the Metal3Machine.
      type: str
    phase:
      description: pending, associated, provisioning, provisioned, deprovisioning, deleting, deleted or paused.
      type: str
    ready:
      description: Whether the machine is provisioned and ready.
      type: bool
    host:
      description: The claimed BareMetalHost, C(<namespace>/<name>) (the virtual machine, for a machine of kind
        C(libvirt)).
      type: str
    host_class:
      description: The class of compute that serves the machine - C(baremetal) or C(libvirt) (C(spec.kind)).
      type: str
    provider_id:
      description: C(spec.providerID).
      type: str
    failure_domain:
      description:
        - Where the machine landed, the failure domain of the host it holds (its label
          C(infrastructure.cluster.x-k8s.io/failure-domain)); before it holds one, the domain it asked for.
        - The asked domain is a preference (unless O(strict_failure_domain)), so the two may differ.
      type: str
    requested_failure_domain:
      description: The failure domain the machine asked for, C(spec.failureDomain) (else its Machine's).
      type: str
    placement:
      description:
        - 'When the machine landed outside the domain it asked for, that and why
          (C(asked az-a, placed in az-b: no free host in az-a)), as its condition C(FailureDomainPlaced) says;
          empty otherwise.'
      type: str
    addresses:
      description: C(status.addresses).
      type: list
      elements: dict
    network_data:
      description: The secret holding the rendered network_data.
      type: dict
    meta_data:
      description: The secret holding the rendered meta_data.
      type: dict
    message:
      description: What the last step did or waits for.
      type: str
    requeue_after:
      description: Seconds after which to look again; null when nothing is awaited.
      type: float
    waits_on:
      description:
        - The objects whose change may let the machine go on (the hosts of its namespace,
          its HostClaim, or the IPClaim of its data), in the form
          M(metal3.baremetal.requeue_after) takes as O(metal3.baremetal.requeue_after#module:wait_on); a name
          of C("") is any object of the kind in the namespace.
      type: list
      elements: dict
"""

from typing import Any

from ansible.module_utils.basic import env_fallback

from ansible_collections.metal3.baremetal.plugins.module_utils.ansible_module import run_module
from ansible_collections.metal3.baremetal.plugins.module_utils.args import IRONIC_MINIMUMS, store_options, with_compute
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.machines import converge
from ansible_collections.metal3.baremetal.plugins.module_utils.compute.libvirt import libvirt_machines
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.core.selector import parse_selector
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import IronicOptions
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    selector = str(parse_selector(params["label_selectors"])) or None
    if params["name"]:
        selector = None
    options = store_options(params)
    wait_for = params["wait_for"]
    steps, reached = converge(lambda: open_store(options), IronicOptions.from_params(params), params["namespace"],
                              selector, (wait_for,) if wait_for else (), params["wait_timeout"] if wait_for else 0,
                              check_mode, params["strict_failure_domain"], name=params["name"],
                              fast_track=params["fast_track"], host_claim_mode=params["host_claim_mode"],
                              machines=libvirt_machines(params), outbound=OutboundPolicy.from_params(params))
    result: dict[str, Any] = {"changed": any(s.changed for s in steps),
                              "machines": [s.summary() for s in steps if s.obj is not None]}
    if wait_for and not reached:
        late = [s for s in steps if not s.ready]
        result.update(failed=True, msg="; ".join(f"Metal3Machine {s.summary()['namespace']}/{s.summary()['name']} "
                                                 f"is {s.phase}: {s.message}" for s in late) or "not reached")
    return result


SPEC = ModuleSpec(
    argument_spec=with_compute({
        "name": {"type": "str"},
        "namespace": {"type": "str", "default": "default"},
        "label_selectors": {"type": "list", "elements": "str", "default": []},
        "wait_for": {"type": "str", "choices": ["ready", "deleted"]},
        "wait_timeout": {"type": "int", "default": 1800},
        "strict_failure_domain": {"type": "bool", "default": False},
        "fast_track": {"type": "bool", "default": False, "fallback": (env_fallback, ["CAPM3_FAST_TRACK"])},
        "host_claim_mode": {"type": "bool", "default": False,
                            "fallback": (env_fallback, ["METAL3_HOST_CLAIM_MODE"])},
    }),
    run=run,
    mutually_exclusive=[["name", "label_selectors"]],
    minimums={"wait_timeout": 0, **IRONIC_MINIMUMS},
)


def main() -> None:
    run_module(SPEC)


if __name__ == "__main__":
    main()
