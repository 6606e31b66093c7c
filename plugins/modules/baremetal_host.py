#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: baremetal_host
short_description: Reconcile BareMetalHosts against Ironic, one step or until they reach a state
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - Drives C(metal3.io) BareMetalHosts through baremetal-operator's state machine against Ironic, with upstream's
    state strings (C(registering), C(inspecting), C(preparing), C(available), C(provisioning), C(provisioned),
    C(deprovisioning), C(externally provisioned), C(powering off before delete), C(deleting)), error types and
    annotations (C(baremetalhost.metal3.io/paused), C(baremetalhost.metal3.io/detached), C(reboot.metal3.io),
    C(inspect.metal3.io)).
  - The Ironic node of host C(<name>) in namespace C(<namespace>) is named C(<namespace>~<name>). A boot MAC
    address another node has is a C(registration error).
  - The image is deployed with a config drive built from the C(userData), C(metaData) and C(networkData) secrets;
    C(meta_data) carries upstream's default keys (C(uuid), C(metal3-namespace), C(metal3-name), C(local-hostname),
    C(local_hostname), C(name)). A C(live-iso) image is booted with Ironic's ramdisk deploy.
  - Without O(wait_for), one reconcile step of each host - what the operator runs. With it, steps are repeated
    until each host is in that state, fails for good, or O(wait_timeout) passes.
  - A failure Ironic reports becomes C(status.errorType), C(errorMessage) (Ironic's C(last_error)) and
    C(errorCount); the host is tried again after a backoff and recovers once the cause is gone.
  - Deleting a host (the resource module with O(ignore:state=absent)) deprovisions it first; its Ironic node is
    removed before the finalizer C(baremetalhost.metal3.io) is.
  - BMC credentials come from the Secret named by C(spec.bmc.credentialsName) and never appear in the result.
  - When Ironic does not answer, the task fails and nothing is written to the store.
  - With O(build_preprov_image) and O(wait_for), a host waiting for its PreprovisioningImage has it served while
    waiting, as M(metal3.baremetal.preprovisioning_image) serves it (from O(deploy_kernel_url),
    O(deploy_ramdisk_url), O(deploy_iso_url) and their per-architecture options), since on a bastion nothing
    else would. One step (no O(wait_for)) leaves it to the image's own reconcile, as the operator does.
  - A DataImage's URL, which Ironic fetches as the host powers on, is judged by O(allowed_local_hosts).
extends_documentation_fragment:
  - metal3.baremetal.store
  - metal3.baremetal.ironic
  - metal3.baremetal.outbound
  - metal3.baremetal.attributes
attributes:
  check_mode:
    support: full
    details: Ironic is read but not changed; the step's status is computed but not written.
  diff_mode:
    support: none
options:
  name:
    description: Name of the BareMetalHost. Without it, every host in O(namespace) that matches O(label_selectors).
    type: str
  namespace:
    description: Namespace of the hosts.
    type: str
    default: default
  label_selectors:
    description: Label selectors (C(key=value), C(key!=value), C(key in (a,b)), C(key), C(!key)) choosing hosts.
    type: list
    elements: str
    default: []
  wait_for:
    description:
      - A provisioning state to reach, for example C(available) or C(provisioned); C(settled) for any state in
        which nothing is left to do; C(deleted) for a host being deleted to be gone.
      - Not set - one step only.
    type: str
  wait_timeout:
    description: Seconds to wait for O(wait_for); 0 or more.
    type: int
    default: 600
  concurrency:
    description: How many hosts are reconciled at once; 1 or more.
    type: int
    default: 20
"""

EXAMPLES = r"""
- name: One reconcile step of a host (what the operator does for each event)
  metal3.baremetal.baremetal_host:
    name: node-0
    namespace: metal3

- name: Provision every host of a rack and wait for all of them
  metal3.baremetal.baremetal_host:
    namespace: metal3
    label_selectors: ["rack=r1"]
    wait_for: provisioned
    wait_timeout: 1800

- name: Against an Ironic given by URL instead of clouds.yaml
  metal3.baremetal.baremetal_host:
    name: node-0
    namespace: metal3
    ironic_url: https://ironic.example.com:6385
    ironic_username: metal3
    ironic_password: "{{ ironic_password }}"
    wait_for: available
"""

RETURN = r"""
hosts:
  description: Each host after the last step.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Name of the host.
      type: str
    namespace:
      description: Namespace of the host.
      type: str
    state:
      description: C(status.provisioning.state).
      type: str
      sample: provisioned
    operational_status:
      description: C(status.operationalStatus).
      type: str
      sample: OK
    error_type:
      description: C(status.errorType); empty when healthy.
      type: str
    error_message:
      description: C(status.errorMessage), Ironic's C(last_error) when Ironic failed.
      type: str
    error_count:
      description: C(status.errorCount).
      type: int
    powered_on:
      description: C(status.poweredOn).
      type: bool
    node:
      description: The Ironic node's UUID (C(status.provisioning.ID)).
      type: str
    requeue_after:
      description:
        - Seconds after which the host should be looked at again; null when nothing is pending.
        - While Ironic works on the host, a quarter of the time the host's status has shown no change, from 0.5 s
          up to 10 s (baremetal-operator's delay for inspecting, cleaning, deploying), so that a caller that comes
          back for each look (the operator, a run of the role each) looks less often the longer an operation
          lasts. With O(wait_for), the module's own wait looks every 0.5 s.
      type: float
    message:
      description: What the last step did.
      type: str
    waits_on:
      description:
        - The objects whose change may let the host go on (its HostFirmwareSettings, while it is available or waits
          for them to be validated), in the form M(metal3.baremetal.requeue_after) takes as
          O(metal3.baremetal.requeue_after#module:wait_on).
      type: list
      elements: dict
host:
  description: The BareMetalHost object after the last step, when O(name) was given and it exists.
  returned: when O(name) is set
  type: dict
"""

from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.ansible_module import run_module
from ansible_collections.metal3.baremetal.plugins.module_utils.args import (
    IRONIC_MINIMUMS,
    store_options,
    with_ironic,
    with_outbound,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import preprovisioning_image as ppi
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (
    API,
    KIND,
    STATES,
    reconcile_hosts,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import IronicOptions
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import find

WAIT_TARGETS = (*(s for s in STATES if s), "settled", "deleted")


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    wait_for = params["wait_for"]
    if wait_for is not None and wait_for not in WAIT_TARGETS:
        raise BadRequest(f"wait_for: must be one of {', '.join(WAIT_TARGETS)}, not {wait_for!r}")
    options = store_options(params)
    if params["name"]:
        refs = [Ref(API, KIND, params["name"], params["namespace"])]
    else:
        with open_store(options) as store:
            hosts = find(store, API, KIND, namespace=params["namespace"], label_selectors=params["label_selectors"])
        refs = [Ref.of(host) for host in hosts]
    ironic = IronicOptions.from_params(params)
    results = reconcile_hosts(lambda: open_store(options), ironic, refs,
                              (wait_for,) if wait_for else (), params["wait_timeout"], params["concurrency"],
                              check_mode, OutboundPolicy.from_params(params),
                              ppi.ImageProvider.from_params(params) if ironic.build_preprov_image else None)
    result: dict[str, Any] = {"changed": any(step.changed for step, _reached in results),
                              "hosts": [step.summary() for step, _reached in results if step.obj is not None]}
    if params["name"]:
        result["host"] = results[0][0].obj or {}
    missed = [(step, ref) for (step, reached), ref in zip(results, refs, strict=True) if not reached]
    if missed:
        result["failed"] = True
        result["msg"] = "; ".join(
            f"{ref} did not reach {wait_for}: it is {step.state or 'new'}"
            + (f" ({step.error})" if step.error else "") + ("" if step.error else f" after {params['wait_timeout']} s")
            for step, ref in missed)
    elif params["name"] and results[0][0].obj is None and wait_for != "deleted":
        result.update(failed=True, msg=f"{refs[0]} not found")
    return result


SPEC = ModuleSpec(
    argument_spec=with_outbound(with_ironic({
        "name": {"type": "str"},
        "namespace": {"type": "str", "default": "default"},
        "label_selectors": {"type": "list", "elements": "str", "default": []},
        "wait_for": {"type": "str"},
        "wait_timeout": {"type": "int", "default": 600},
        "concurrency": {"type": "int", "default": 20},
    })),
    run=run,
    mutually_exclusive=[["name", "label_selectors"]],
    minimums={"wait_timeout": 0, "concurrency": 1, **IRONIC_MINIMUMS},
)


def main() -> None:
    run_module(SPEC)


if __name__ == "__main__":
    main()
