#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: requeue_after
short_description: Ask the operator running the role to reconcile the object again after a while
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - Returns O(time) as C(period), in the form both the Ansible Operator and the collection's operator read. Each
    of them reconciles the object again after that period when a task of action C(requeue_after) (or
    C(operator_sdk.util.requeue_after)) returns C(period); this is the same interface as
    C(operator_sdk.util.requeue_after).
  - Both operators match the action by the name written in the task, so call it by its short name,
    C(requeue_after), from a role whose C(meta/main.yml) lists C(metal3.baremetal) under C(collections). The
    Ansible Operator runs a role by its path, not as a role of the collection, and would not find it otherwise.
  - The Ansible Operator ends the reconcile at this task, before it would remove the finalizer of an object being
    deleted, and does not mark the run C(Successful); make it the role's last task. A period of 0 or less asks
    for no requeue under the Ansible Operator, and for one at once, through the work queue's rate limiter, under
    the collection's operator (as controller-runtime's C(Requeue)); the collection's roles never send less
    than C(0.1s), so that they mean the same under both.
  - With O(wait_on), the collection's operator reconciles the object again when one of those objects changes
    rather than after the period, when it watches their kind in their namespace (else after the period, as the
    Ansible Operator, which ignores O(wait_on)). Of the objects that wait on one object, it wakes the one that
    has waited longest at each change; that one's own change, if it took what was freed, wakes the next.
  - Under C(ansible-playbook) it only returns C(period) (and C(wait_on)).
extends_documentation_fragment:
  - metal3.baremetal.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
options:
  time:
    description:
      - How long to wait, as a Go duration (C(30s), C(5m), C(1h30m), C(500ms)) or a number of seconds (C(10),
        C(0.5)), which becomes C(10s), C(0.5s).
    type: raw
    required: true
  wait_on:
    description:
      - The objects whose change may let the object go on, such as the pool of an exhausted claim.
    type: list
    elements: dict
    default: []
    suboptions:
      api_version:
        description: Their apiVersion (only its group counts).
        type: str
        required: true
      kind:
        description: Their kind.
        type: str
        required: true
      namespace:
        description: Their namespace.
        type: str
        required: true
      name:
        description: The object's name; empty for any object of the kind in the namespace.
        type: str
        default: ""
"""

EXAMPLES = r"""
- name: Look at the object again in 30 seconds
  requeue_after:  # noqa: fqcn[action] - the operators match the action's short name
    time: 30s

- name: When the reconcile module says so
  requeue_after:  # noqa: fqcn[action]
    time: "{{ reconciled.requeue_after }}"
  when: reconciled.requeue_after is not none

- name: Wait for the claim's pool to change (after 10s under the Ansible Operator)
  requeue_after:  # noqa: fqcn[action]
    time: 10s
    wait_on:
      - {api_version: ipam.metal3.io/v1alpha1, kind: IPPool, namespace: metal3, name: provisioning}
"""

RETURN = r"""
period:
  description: The period, as a Go duration.
  returned: always
  type: str
  sample: 30s
wait_on:
  description: O(wait_on), each with its name ("" for any).
  returned: always
  type: list
  elements: dict
  sample: [{api_version: ipam.metal3.io/v1alpha1, kind: IPPool, namespace: metal3, name: provisioning}]
"""

from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.ansible_module import run_module
from ansible_collections.metal3.baremetal.plugins.module_utils.core.duration import go_duration
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    waits = [{**target, "name": target.get("name") or ""} for target in params.get("wait_on") or []]
    return {"changed": False, "period": go_duration(params["time"], "time"), "wait_on": waits}


WAIT_TARGET = {"api_version": {"type": "str", "required": True}, "kind": {"type": "str", "required": True},
               "namespace": {"type": "str", "required": True}, "name": {"type": "str", "default": ""}}
SPEC = ModuleSpec(argument_spec={"time": {"type": "raw", "required": True},
                                 "wait_on": {"type": "list", "elements": "dict", "default": [],
                                             "options": WAIT_TARGET}},
                  run=run)


def main() -> None:
    run_module(SPEC)


if __name__ == "__main__":
    main()
