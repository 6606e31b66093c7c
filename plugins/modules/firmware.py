#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: firmware
short_description: Read and ask for a host's BIOS settings and firmware updates (its firmware kinds)
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - Each registered BareMetalHost has a C(metal3.io) HostFirmwareSettings of its name, which this module reconciles
    as baremetal-operator's controller does. It reads the host's current BIOS settings from Ironic into
    C(status.settings), and their registry into a FirmwareSchema that hosts of one model share. It then judges
    C(spec.settings) against them, in the conditions C(ChangeDetected) (the spec differs from the host) and
    C(Valid) (it fits the schema; False names each setting that does not, and why).
  - With O(settings), those settings are first merged into C(spec.settings); a value of null takes a setting out.
    Nothing is applied here. An available host applies a valid change when it is next reconciled
    (M(metal3.baremetal.baremetal_host), or the operator), by Ironic's manual cleaning, and its next read here
    shows the new values.
  - A setting whose name holds C(Password) is never read nor asked for, as upstream.
  - A registered host whose BMC lists firmware components also has a HostFirmwareComponents of its name, reconciled
    here too - its components (C(bios), C(bmc), C(nic:<id>)) and their versions read from Ironic into
    C(status.components), and C(spec.updates) judged - each update must name one of those components, and a URL
    that is not the controller's own loopback or link-local host (unless O(allowed_local_hosts) names it).
  - With O(updates), those updates replace C(spec.updates). An available host sends the valid ones not sent yet in
    a manual cleaning (Ironic's C(firmware.update) step, which boots the agent ramdisk); a provisioned one by
    servicing as it reboots, when its HostUpdatePolicy has C(firmwareUpdates) C(onReboot). C(status.updates) then
    lists them, and the next read here shows the new versions.
  - Without O(name), every host of O(namespace) is reconciled - a fleet's firmware in one task.
options:
  name:
    description: The host (its HostFirmwareSettings and HostFirmwareComponents have its name). Without it, every
      one of O(namespace).
    type: str
  kind:
    description:
      - Only this kind of each host (the operator reconciles one object at a time). Without it, both.
    type: str
    choices: [HostFirmwareSettings, HostFirmwareComponents]
  namespace:
    description: Their namespace.
    type: str
    default: default
  settings:
    description:
      - BIOS settings to ask for, name to value (a string or an integer; quote C(true) or C(1.5)), merged into
        C(spec.settings); null takes a setting out. Only with O(name).
    type: dict
  updates:
    description:
      - Firmware updates to ask for, replacing C(spec.updates), as upstream's list is replaced (an empty list asks
        for none). Only with O(name).
    type: list
    elements: dict
    suboptions:
      component:
        description: C(bios), C(bmc) or C(nic:<id>).
        type: str
        required: true
      url:
        description: Where the BMC (or Ironic) fetches the firmware image.
        type: str
        required: true
extends_documentation_fragment:
  - metal3.baremetal.store
  - metal3.baremetal.ironic
  - metal3.baremetal.outbound
  - metal3.baremetal.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: Turn turbo off on one host; it is applied when the host is next reconciled while available
  metal3.baremetal.firmware:
    name: node-0
    namespace: metal3
    settings:
      ProcTurboMode: Disabled

- name: Apply it (available, it goes preparing and comes back)
  metal3.baremetal.baremetal_host:
    name: node-0
    namespace: metal3
    wait_for: available

- name: Update the BIOS of a provisioned host as it next reboots (its HostUpdatePolicy has firmwareUpdates onReboot)
  metal3.baremetal.firmware:
    name: node-1
    namespace: metal3
    updates:
      - component: bios
        url: http://images.example.com/firmware/bios-2.1.bin

- name: Every host's settings and firmware, read again
  metal3.baremetal.firmware:
    namespace: metal3
  register: fleet

- name: Which hosts still differ from what they were asked
  ansible.builtin.debug:
    msg: "{{ fleet.hosts | selectattr('change_detected') | map(attribute='name') }}"
"""

RETURN = r"""
hosts:
  description: Each host's HostFirmwareSettings and HostFirmwareComponents after their reconcile.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The host's name (and its HostFirmwareSettings').
      type: str
    namespace:
      description: Their namespace.
      type: str
    settings:
      description: The host's current BIOS settings (C(status.settings)), name to value.
      type: dict
      sample: {"ProcTurboMode": "Enabled", "BootMode": "Uefi"}
    wanted:
      description: The settings asked for (C(spec.settings)).
      type: dict
    schema:
      description: The name of the FirmwareSchema that describes them.
      type: str
      sample: schema-a6620998
    change_detected:
      description: Whether what is asked for differs from the host's settings (the C(ChangeDetected) condition).
      type: bool
    valid:
      description: Whether what is asked for fits the schema (the C(Valid) condition).
      type: bool
    message:
      description: Why what is asked for is not valid, naming each setting; empty when it is.
      type: str
    components:
      description: The host's firmware components (C(status.components)); empty when it has no HostFirmwareComponents.
      type: list
      elements: dict
      sample: [{"component": "bios", "initialVersion": "1.0.0", "currentVersion": "1.1.0",
                "lastVersionFlashed": "1.1.0", "updatedAt": "2025-06-01T10:00:00+00:00"},
               {"component": "bmc", "initialVersion": "1.00", "currentVersion": "1.00"}]
    updates:
      description: The firmware updates asked for (C(spec.updates)).
      type: list
      elements: dict
    updates_sent:
      description: The updates the host sent to its BMC (C(status.updates)).
      type: list
      elements: dict
    updates_change_detected:
      description: Whether updates are asked for that were not sent (the C(ChangeDetected) condition).
      type: bool
    updates_valid:
      description: Whether the updates asked for are valid (the C(Valid) condition).
      type: bool
    updates_message:
      description: Why they are not, naming each field (C(spec.updates[0].url)); empty when they are.
      type: str
    requeue_after:
      description: Seconds after which the settings and firmware should be read again.
      type: float
    waits_on:
      description:
        - The objects whose change may let the settings and firmware be read (the host, while it is not registered,
          detached or paused), in the form M(metal3.baremetal.requeue_after) takes as
          O(metal3.baremetal.requeue_after#module:wait_on).
      type: list
      elements: dict
message:
  description: What the reconciles did, one line per host.
  returned: always
  type: str
"""

from typing import Any, Callable

from ansible_collections.metal3.baremetal.plugins.module_utils.ansible_module import run_module
from ansible_collections.metal3.baremetal.plugins.module_utils.args import (
    IRONIC_MINIMUMS,
    store_options,
    with_ironic,
    with_outbound,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import (
    Object,
    Ref,
    check_namespace,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.core.reconcile import Result
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import firmware_components as hfc
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import firmware_settings as hfs
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.firmware import API, COMPONENTS_KIND, SETTINGS_KIND
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import Ironic, IronicOptions
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.provisioner import ironic_provisioners
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import names_to_reconcile

KINDS = (SETTINGS_KIND, COMPONENTS_KIND)
# What each kind asks for: the module's option, the spec field it goes in, and the function that puts it there.
ASKS: dict[str, tuple[str, Callable[..., tuple[Object, bool]]]] = {
    SETTINGS_KIND: ("settings", hfs.ask_settings), COMPONENTS_KIND: ("updates", hfc.ask_updates)}


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    namespace = check_namespace(params["namespace"], "namespace")
    kinds = (params["kind"],) if params["kind"] else KINDS
    for kind, (option, _ask) in ASKS.items():
        if params[option] is not None and not params["name"]:
            raise BadRequest(f"{option}: only with name (the host whose {option} they are)")
        if params[option] is not None and kind not in kinds:
            raise BadRequest(f"{option}: not with kind {params['kind']} (they are a {kind}'s)")
    options = IronicOptions.from_params(params)
    provisioners = ironic_provisioners(Ironic(options, dry_run=check_mode), options.provisioning_limit)
    outbound = OutboundPolicy.from_params(params)
    result: dict[str, Any] = {"changed": False, "hosts": [], "diff": {"before": {}, "after": {}}}
    messages = []
    with open_store(store_options(params)) as store:
        for name in names_to_reconcile(store, params["name"], API, kinds, namespace):
            refs = {kind: Ref(API, kind, name, namespace) for kind in kinds}
            found = {kind: store.get_if_exists(ref) for kind, ref in refs.items()}
            if not any(found.values()):
                raise BadRequest(f"name: {name} has no {' nor '.join(kinds)} in {namespace} (a host has them once "
                                 "registered, its firmware components when its BMC lists some)")
            steps: dict[str, Result] = {}
            for kind, ref in refs.items():
                option, ask = ASKS[kind]
                before = found[kind]
                if params[option] is not None:
                    if before is None:
                        raise BadRequest(f"{option}: {name} has no {kind} in {namespace} (a host has it once "
                                         "registered" + (", when its BMC lists firmware components)"
                                                         if kind == COMPONENTS_KIND else ")"))
                    after, changed = ask(store, ref, params[option], check_mode)
                    if changed:
                        result["changed"] = True
                        diff = result["diff"]
                        diff["before"].setdefault(name, {})[option] = (before.get("spec") or {}).get(option)
                        diff["after"].setdefault(name, {})[option] = after["spec"][option]
                if before is None:
                    continue
                steps[kind] = (hfs.reconcile_firmware_settings(store, provisioners, ref, check_mode)
                               if kind == SETTINGS_KIND else
                               hfc.reconcile_firmware_components(store, provisioners, ref, check_mode, outbound))
                result["changed"] = result["changed"] or steps[kind].changed
                messages.append(f"{ref}: {steps[kind].message}")
            settings, components = (steps[kind].obj if kind in steps else None for kind in KINDS)
            requeues = [step.requeue_after for step in steps.values() if step.requeue_after is not None]
            result["hosts"].append({
                "name": name, "namespace": namespace,
                **hfs.summary(settings), **hfc.summary(components),
                "requeue_after": min(requeues) if requeues else None,
                "waits_on": [target for step in steps.values() for target in step.wait_targets()]})
    result["message"] = "\n".join(messages)
    return result


SPEC = ModuleSpec(
    argument_spec=with_outbound(with_ironic({
        "name": {"type": "str"},
        "namespace": {"type": "str", "default": "default"},
        "kind": {"type": "str", "choices": list(KINDS)},
        "settings": {"type": "dict"},
        "updates": {"type": "list", "elements": "dict",
                    "options": {"component": {"type": "str", "required": True},
                                "url": {"type": "str", "required": True}}},
    })),
    run=run,
    minimums=IRONIC_MINIMUMS,
)


def main() -> None:
    run_module(SPEC)


if __name__ == "__main__":
    main()
