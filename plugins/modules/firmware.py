#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: firmware
short_description: Read and ask for a host's BIOS settings (HostFirmwareSettings and FirmwareSchema)
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
  - Without O(name), every HostFirmwareSettings of O(namespace) is reconciled - a fleet's settings in one task.
options:
  name:
    description: The host (its HostFirmwareSettings has its name). Without it, every one of O(namespace).
    type: str
  namespace:
    description: Their namespace.
    type: str
    default: default
  settings:
    description:
      - BIOS settings to ask for, name to value (a string or an integer; quote C(true) or C(1.5)), merged into
        C(spec.settings); null takes a setting out. Only with O(name).
    type: dict
extends_documentation_fragment:
  - metal3.baremetal.store
  - metal3.baremetal.ironic
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

- name: Every host's settings, read again
  metal3.baremetal.firmware:
    namespace: metal3
  register: fleet

- name: Which hosts still differ from what they were asked
  ansible.builtin.debug:
    msg: "{{ fleet.hosts | selectattr('change_detected') | map(attribute='name') }}"
"""

RETURN = r"""
hosts:
  description: Each HostFirmwareSettings after its reconcile.
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
    requeue_after:
      description: Seconds after which the settings should be read again.
      type: float
    waits_on:
      description:
        - The objects whose change may let the settings be read (the host, while it is not registered, detached or
          paused), in the form M(metal3.baremetal.requeue_after) takes as
          O(metal3.baremetal.requeue_after#module:wait_on).
      type: list
      elements: dict
message:
  description: What the reconciles did, one line per host.
  returned: always
  type: str
"""

from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.ansible_module import run_module
from ansible_collections.metal3.baremetal.plugins.module_utils.args import IRONIC_MINIMUMS, store_options, with_ironic
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest, NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref, check_name, check_namespace
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.firmware import API, SETTINGS_KIND
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.firmware_settings import (
    ask_settings,
    reconcile_firmware_settings,
    summary,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import Ironic, IronicOptions
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.provisioner import ironic_provisioners
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    namespace = check_namespace(params["namespace"], "namespace")
    if params["settings"] is not None and not params["name"]:
        raise BadRequest("settings: only with name (the host whose settings they are)")
    options = IronicOptions.from_params(params)
    provisioners = ironic_provisioners(Ironic(options, dry_run=check_mode), options.provisioning_limit)
    result: dict[str, Any] = {"changed": False, "hosts": [], "diff": {"before": {}, "after": {}}}
    messages = []
    with open_store(store_options(params)) as store:
        if params["name"]:
            refs = [Ref(API, SETTINGS_KIND, check_name(params["name"], "name"), namespace)]
        else:
            refs = [Ref.of(obj) for obj in store.list(API, SETTINGS_KIND, namespace)]
        for ref in refs:
            if params["settings"] is not None:
                try:
                    before = store.get(ref)
                except NotFound:
                    raise BadRequest(f"name: {ref} not found (a host has it once registered)") from None
                after, changed = ask_settings(store, ref, params["settings"], check_mode)
                if changed:
                    result["changed"] = True
                    result["diff"]["before"][ref.name] = (before.get("spec") or {}).get("settings") or {}
                    result["diff"]["after"][ref.name] = after["spec"]["settings"]
            step = reconcile_firmware_settings(store, provisioners, ref, check_mode)
            if step.obj is None:
                raise BadRequest(f"name: {ref} not found (a host has it once registered)")
            result["changed"] = result["changed"] or step.changed
            result["hosts"].append({**summary(step.obj), "requeue_after": step.requeue_after,
                                    "waits_on": step.wait_targets()})
            messages.append(f"{ref}: {step.message}")
    result["message"] = "\n".join(messages)
    return result


SPEC = ModuleSpec(
    argument_spec=with_ironic({
        "name": {"type": "str"},
        "namespace": {"type": "str", "default": "default"},
        "settings": {"type": "dict"},
    }),
    run=run,
    minimums=IRONIC_MINIMUMS,
)


def main() -> None:
    run_module(SPEC)


if __name__ == "__main__":
    main()
