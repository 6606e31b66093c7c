#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: hostclaim
short_description: Reconcile HostClaims - bind a BareMetalHost a policy admits, provision it, release it
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - Runs the HostClaim flow (C(metal3.io/v1alpha1), baremetal-operator's kind) for each selected claim - bind a free
    BareMetalHost that matches the claim's C(hostSelector) (its C(failureDomain) preferred) in a namespace whose
    HostDeployPolicy admits the claim's namespace (C(names), C(nameMatches), C(hasLabels)), with the same
    resourceVersion-checked claim the Metal3Machine flow uses, so two claims never get one host.
  - The host gets the claim's C(image) or C(customDeploy), its C(userData), C(metaData) and C(networkData) (the
    Secrets, of the claim's own namespace only, are copied beside the host as C(<host>-claim-user-data) and so on,
    owned by the host), C(online) from C(poweredOn), and a C(reboot.metal3.io) annotation made on the claim. A
    HardwareData named after the claim, in its namespace, shows the host's hardware; the claim's status shows the
    host, its state, power and addresses. The tenant never needs to read the host or its BMC credentials.
  - A deleted claim clears and powers off its host, waits until it is deprovisioned (cleaned as the host's
    C(automatedCleaningMode) says), deletes the copies, frees the host for the next claim of any tenant, deletes
    the HardwareData, and lets the claim go.
  - Without O(wait_for), one step of each claim - what the operator runs for an event; the hosts are reconciled by
    their own reconciles (M(metal3.baremetal.baremetal_host)). With it - from a bastion - the claims and their
    hosts are stepped until every claim is bound, provisioned or deleted, or O(wait_timeout) passes, or a claim
    cannot go on (its data cannot be read).
  - A claim of C(spec.kind=libvirt) (upstream's hybrid-cluster design; C(baremetal), the default, is all the above)
    is served by a virtual machine of its own, C(<namespace>.<name>), on the libvirt the O(libvirt_bridge) and
    other libvirt options describe, with no Ironic - its size from C(spec.args) (C(cpus), C(memory), C(disk),
    C(nics)), its HardwareData (NICs named and with MACs) known as soon as it is bound, its disk a copy-on-write
    layer over C(spec.image) (fetched once per checksum and verified), its C(userData), C(metaData) and
    C(networkData) on an OpenStack config drive, powered as C(poweredOn) says; deleted with its disk on release.
    Its status is a bare-metal claim's, with C(virtualMachine) for C(bareMetalHost).
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
    description: Name of the HostClaim. Without it, every HostClaim of O(namespace) matching O(label_selectors).
    type: str
  namespace:
    description: Namespace of the HostClaims.
    type: str
    default: default
  label_selectors:
    description: Label selectors choosing the HostClaims when O(name) is not given.
    type: list
    elements: str
    default: []
  wait_for:
    description:
      - C(bound) - until every claim holds a host; C(provisioned) - until every claim's host is provisioned with
        its image and powered as asked; C(deleted) - until every claim is gone.
    type: str
    choices: [bound, provisioned, deleted]
  wait_timeout:
    description: Seconds to wait for O(wait_for); 0 or more.
    type: int
    default: 1800
"""

EXAMPLES = r"""
- name: Claim a server for a workload and wait until it runs it
  metal3.baremetal.resource:
    namespace: tenant-a
    definition:
      apiVersion: metal3.io/v1alpha1
      kind: HostClaim
      metadata: {name: web-0}
      spec:
        poweredOn: true
        image: {url: "http://images.example/debian.qcow2", checksum: "http://images.example/debian.qcow2.sha256",
                checksumType: sha256, format: qcow2}
        userData: {name: web-cloud-init}
        hostSelector: {matchLabels: {size: large}}

- name: Provision it
  metal3.baremetal.hostclaim:
    name: web-0
    namespace: tenant-a
    wait_for: provisioned
  register: claimed

- name: One reconcile step of every claim of a namespace (under the operator)
  metal3.baremetal.hostclaim:
    namespace: tenant-a
"""

RETURN = r"""
claims:
  description: Each claim after the last step (a claim gone is left out).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Name of the HostClaim.
      type: str
    namespace:
      description: Its namespace.
      type: str
    phase:
      description: pending, bound, provisioned, deleting, or failed (a claim of kind C(libvirt) whose machine
        cannot be made).
      type: str
    host:
      description: The bound BareMetalHost, C(<namespace>/<name>) (the virtual machine for kind C(libvirt));
        empty while pending.
      type: str
    state:
      description: The bound host's provisioning state.
      type: str
    powered_on:
      description: Whether the host is powered on (C(status.poweredOn)).
      type: bool
    addresses:
      description: C(status.addresses) - InternalIP of each NIC the inspection found with one, Hostname, InternalDNS.
      type: list
      elements: dict
    hardware_data:
      description: The HardwareData showing the host's hardware (C(status.hardwareData)), once inspected.
      type: dict
    error:
      description: Why the claim cannot go on until its spec changes; empty otherwise.
      type: str
    message:
      description: What the last step did or waits for.
      type: str
    requeue_after:
      description: Seconds after which to look again; null when nothing is awaited.
      type: float
    waits_on:
      description:
        - The objects whose change may let the claim go on (the hosts of the namespaces
          that admit it, while none is bound), in the form
          M(metal3.baremetal.requeue_after) takes as O(metal3.baremetal.requeue_after#module:wait_on); a name
          of C("") is any object of the kind in the namespace.
      type: list
      elements: dict
"""

from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.ansible_module import run_module
from ansible_collections.metal3.baremetal.plugins.module_utils.args import IRONIC_MINIMUMS, store_options, with_compute
from ansible_collections.metal3.baremetal.plugins.module_utils.compute.libvirt import libvirt_machines
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref, check_name, check_namespace
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.core.selector import parse_selector
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.hostclaims.hostclaim import API, KIND, converge_claims
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import IronicOptions
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    options = store_options(params)
    namespace = check_namespace(params["namespace"], "namespace")
    if params["name"]:
        refs = [Ref(API, KIND, check_name(params["name"], "name"), namespace)]
    else:
        with open_store(options) as store:
            selector = str(parse_selector(params["label_selectors"])) or None
            refs = [Ref.of(c) for c in store.list(API, KIND, namespace, selector)]
    wait_for = params["wait_for"]
    steps, reached = converge_claims(lambda: open_store(options), IronicOptions.from_params(params), refs, wait_for,
                                     params["wait_timeout"] if wait_for else 0, check_mode,
                                     machines=libvirt_machines(params), outbound=OutboundPolicy.from_params(params))
    result: dict[str, Any] = {"changed": any(s.changed for s in steps),
                              "claims": [s.summary() for s in steps if s.obj is not None]}
    failing = [s for s in steps if s.error]
    if failing or wait_for and not reached:
        late = failing or [s for s in steps if s.obj is not None]
        result.update(failed=True, msg="; ".join(
            f"HostClaim {s.summary()['namespace']}/{s.summary()['name']} is {s.phase}: {s.error or s.message}"
            for s in late) or f"not {wait_for}")
    return result


SPEC = ModuleSpec(
    argument_spec=with_compute({
        "name": {"type": "str"},
        "namespace": {"type": "str", "default": "default"},
        "label_selectors": {"type": "list", "elements": "str", "default": []},
        "wait_for": {"type": "str", "choices": ["bound", "provisioned", "deleted"]},
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
