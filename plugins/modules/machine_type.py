#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: machine_type
short_description: Create, update, refresh or delete a MachineType, and list the hosts that fit it
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - A C(metal3.io) MachineType (metal-stack's size) is a named set of hardware constraints - C(cores),
    C(memory), C(storage) (all disks together), C(disks) (how many), C(nics) (how many), each with a C(min) and a
    C(max) - matched against the inspected hardware (C(status.hardware)) of the BareMetalHosts of its namespace.
  - Memory and storage bounds are bytes, as integers or Kubernetes quantities (C(16Gi), C(500G)); the others are
    whole numbers. C(min) defaults to 0 and C(max) to no bound; both ends are included.
  - With O(definition), the MachineType is created, or the definition is merged into it (a JSON merge patch);
    nothing is written when nothing would change. A malformed spec (a C(type) not among the five, a bound that
    is no quantity, C(min) above C(max), a type given twice) fails the task naming the field, and nothing is
    written.
  - Then the MachineType is reconciled - C(status.hosts) (the names of the hosts that fit, sorted),
    C(status.matched) and the C(Ready) condition are written when they change. Without O(definition), an
    existing MachineType is only reconciled; one that does not exist is an error.
  - A host that has not been inspected (no C(status.hardware)) fits no type. Types may overlap; a host may fit
    several.
  - With O(state=absent) the MachineType is deleted (the hosts are left as they are).
options:
  state:
    description: Whether the MachineType should exist.
    type: str
    choices: [present, absent]
    default: present
  name:
    description: Name of the MachineType.
    type: str
    required: true
  namespace:
    description: Its namespace, the namespace of the hosts it classifies.
    type: str
    default: default
  definition:
    description:
      - The MachineType to apply, as a manifest; C(apiVersion), C(kind), C(metadata.name) and
        C(metadata.namespace) may be left out (they are O(name)'s and O(namespace)'s) and, given, must agree with
        them.
      - Its C(spec) has C(constraints), a list of C(type) (C(cores), C(memory), C(storage), C(disks), C(nics)),
        C(min) and C(max), and an optional C(description).
    type: dict
extends_documentation_fragment:
  - metal3.baremetal.store
  - metal3.baremetal.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: A small x86 machine type
  metal3.baremetal.machine_type:
    name: v1-small-x86
    namespace: metal3
    definition:
      spec:
        description: 4 to 8 cores, 16 to 32 GiB, at least 500 GB of disk
        constraints:
          - {type: cores, min: 4, max: 8}
          - {type: memory, min: 16Gi, max: 32Gi}
          - {type: storage, min: 500G}
  register: small

- name: Which hosts are small ones
  ansible.builtin.debug:
    msg: "{{ small.hosts }}"

- name: Refresh it after an inspection, and see why the other hosts do not fit
  metal3.baremetal.machine_type:
    name: v1-small-x86
    namespace: metal3
  register: small

- name: Remove it
  metal3.baremetal.machine_type:
    name: v1-small-x86
    namespace: metal3
    state: absent
"""

RETURN = r"""
hosts:
  description: The names of the BareMetalHosts of the namespace that fit the type, sorted (C(status.hosts)).
  returned: always
  type: list
  elements: str
  sample: ["node-0", "node-2"]
mismatches:
  description: Each other host of the namespace, and why it does not fit.
  returned: always
  type: dict
  sample: {"node-1": "has 2 cores, v1-small-x86 wants 4 to 8", "node-3": "not inspected: no status.hardware"}
ready:
  description: Whether the spec is usable (the C(Ready) condition); false for a malformed one stored before
    admission refused it.
  returned: always
  type: bool
message:
  description: How many hosts fit, or what is wrong with the spec.
  returned: always
  type: str
requeue_after:
  description: Always null - a MachineType is reconciled again when a host changes, not after a time.
  returned: always
  type: float
machine_type:
  description: The MachineType after the task; empty once deleted.
  returned: always
  type: dict
"""

from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.ansible_module import run_module
from ansible_collections.metal3.baremetal.plugins.module_utils.args import store_options, with_store
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref, check_name, check_namespace
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.machinetypes import (
    API,
    KIND,
    machine_type_absent,
    machine_type_present,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import complete


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    ref = Ref(API, KIND, check_name(params["name"], "name"), check_namespace(params["namespace"], "namespace"))
    definition = None
    if params["definition"] is not None:
        if params["state"] == "absent":
            raise BadRequest("definition: only with state=present")
        definition = complete(params["definition"], API, KIND, ref.name, ref.namespace, "definition")
        if Ref.of(definition) != ref:
            raise BadRequest(f"definition: names {Ref.of(definition)} ({definition['apiVersion']}), not the "
                             f"{ref} that name and namespace give")
    with open_store(store_options(params)) as store:
        if params["state"] == "absent":
            step = machine_type_absent(store, ref, check_mode)
        else:
            step = machine_type_present(store, definition, ref, check_mode)
    return {**step.fields(), "hosts": step.hosts, "mismatches": step.mismatches, "ready": step.ready,
            "machine_type": step.obj or {}, "diff": step.diff}


SPEC = ModuleSpec(
    argument_spec=with_store({
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "name": {"type": "str", "required": True},
        "namespace": {"type": "str", "default": "default"},
        "definition": {"type": "dict"},
    }),
    run=run,
)


def main() -> None:
    run_module(SPEC)


if __name__ == "__main__":
    main()
