#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: resource_info
short_description: Read Metal3 objects from the store
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - Reads objects of one kind from the store (the local SQLite file or a Kubernetes cluster), by name or by
    label selector.
  - Nothing found is an empty list, not a failure.
  - Argument names follow M(kubernetes.core.k8s_info).
  - A Secret is returned with its C(data) as stored (base64), as M(kubernetes.core.k8s_info) returns it, so a
    play can read a rendered C(network_data) or C(meta_data). Set C(no_log) to C(true) on a task that reads
    Secrets, or their values are printed with the result (C(-v)) and kept in whatever records the play's results.
  - Only this module and the P(metal3.baremetal.resource#lookup) lookup return a Secret's values, and only when
    asked for Secrets; M(metal3.baremetal.resource) hides them in its result and diff.
options:
  api_version:
    description: apiVersion of the objects.
    type: str
    default: v1
    aliases: [api, version]
  kind:
    description: Kind of the objects.
    type: str
    required: true
  name:
    description: Name of one object.
    type: str
  namespace:
    description: Namespace to look in; all namespaces when left out and O(name) is not given.
    type: str
  label_selectors:
    description:
      - Label selectors, as C(kubectl -l) takes them (C(key=value), C(key!=value), C(key in (a,b)),
        C(key notin (a,b)), C(key), C(!key)); all must match.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - metal3.baremetal.store
  - metal3.baremetal.attributes
attributes:
  check_mode:
    support: full
    details: Reads only.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: The network_data a machine's data template rendered (a Secret, read on purpose)
  metal3.baremetal.resource_info:
    kind: Secret
    name: my-cluster-controlplane-0-networkdata
    namespace: metal3
  register: rendered
  no_log: true

- name: Use it
  ansible.builtin.copy:
    dest: /srv/network_data.json
    content: "{{ rendered.resources[0].data.networkData | b64decode }}"
    mode: "0600"
  no_log: true

- name: Every host of rack a
  metal3.baremetal.resource_info:
    api_version: metal3.io/v1alpha1
    kind: BareMetalHost
    namespace: metal3
    label_selectors:
      - infrastructure.cluster.x-k8s.io/failure-domain=az-a
  register: hosts

- name: One pool from a cluster
  metal3.baremetal.resource_info:
    backend: kubernetes
    api_version: ipam.metal3.io/v1alpha1
    kind: IPPool
    name: provisioning
    namespace: metal3
"""

RETURN = r"""
resources:
  description: The objects found, sorted by namespace and name.
  returned: always
  type: list
  elements: dict
  sample: [{"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost", "metadata": {"name": "node-0"}}]
  contains:
    data:
      description:
        - Of a Secret, its values as stored (base64), as M(kubernetes.core.k8s_info) returns them. Set
          C(no_log) on the task.
      returned: for a Secret
      type: dict
"""

from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.ansible_module import run_module
from ansible_collections.metal3.baremetal.plugins.module_utils.args import store_options, with_store
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import find


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    namespace = params["namespace"] or ("default" if params["name"] else None)
    with open_store(store_options(params)) as store:
        resources = find(store, params["api_version"], params["kind"], params["name"], namespace,
                         params["label_selectors"], secret_data=True)
    return {"changed": False, "resources": resources}


SPEC = ModuleSpec(
    argument_spec=with_store({
        "api_version": {"type": "str", "default": "v1", "aliases": ["api", "version"]},
        "kind": {"type": "str", "required": True},
        "name": {"type": "str"},
        "namespace": {"type": "str"},
        "label_selectors": {"type": "list", "elements": "str", "default": []},
    }),
    run=run,
)


def main() -> None:
    run_module(SPEC)


if __name__ == "__main__":
    main()
