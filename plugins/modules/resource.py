#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: resource
short_description: Create, update or delete Metal3 objects in the store
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - Puts Kubernetes-style objects (BareMetalHost, IPPool, Metal3DataTemplate, Secret, ...) into the store,
    or removes them. The store is a local SQLite file on the bastion or a Kubernetes cluster; the same
    manifests work on both.
  - With O(state=present), an object that does not exist is created; one that exists is updated by merging
    the definition into it (a JSON merge patch), and nothing is written when nothing would change.
  - A definition that carries C(metadata.resourceVersion) is applied only if the stored object still has that
    version; otherwise the task fails with a Conflict.
  - Argument names follow M(kubernetes.core.k8s) where the two overlap.
  - The values of a Secret's C(data) are never returned.
options:
  state:
    description: Whether the objects should exist.
    type: str
    choices: [present, absent]
    default: present
  definition:
    description:
      - The objects, as a mapping, a list of mappings, or YAML text with one or more documents.
      - A document of kind C(List) stands for its items.
    type: raw
    aliases: [resource_definition, inline]
  src:
    description: Path of a YAML file with one or more documents. Mutually exclusive with O(definition).
    type: path
  api_version:
    description: apiVersion of the object, when the definition leaves it out or with O(state=absent) and no definition.
    type: str
    default: v1
    aliases: [api, version]
  kind:
    description: Kind of the object, when the definition leaves it out.
    type: str
  name:
    description: Name of the object, when the definition leaves it out.
    type: str
  namespace:
    description: Namespace of the objects whose definition names none.
    type: str
    default: default
extends_documentation_fragment:
  - metal3.baremetal.store
  - metal3.baremetal.attributes
attributes:
  check_mode:
    support: full
    details: On the kubernetes backend check mode is a server-side dry run; on the local backend the write is
      made in a transaction that is rolled back.
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: Put a pool into the local store
  metal3.baremetal.resource:
    definition:
      apiVersion: ipam.metal3.io/v1alpha1
      kind: IPPool
      metadata:
        name: provisioning
        namespace: metal3
      spec:
        namePrefix: provisioning
        pools:
          - start: 192.168.111.100
            end: 192.168.111.200
        prefix: 24
        gateway: 192.168.111.1

- name: Apply every manifest of a file to a cluster
  metal3.baremetal.resource:
    backend: kubernetes
    kubeconfig: ~/.kube/config
    src: hosts.yaml

- name: Set the store once for a whole play
  hosts: localhost
  module_defaults:
    group/metal3.baremetal.all:
      backend: local
      store_path: /var/lib/metal3/store.db
  tasks:
    - name: Remove a host
      metal3.baremetal.resource:
        state: absent
        api_version: metal3.io/v1alpha1
        kind: BareMetalHost
        name: node-0
        namespace: metal3
"""

RETURN = r"""
result:
  description: The object as stored after the task (empty when it was removed). Only when there is one document.
  returned: when one object was given
  type: dict
  sample: {"apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPPool", "metadata": {"name": "provisioning"}}
method:
  description: What was done (or would be, in check mode) to the object; C(none) when nothing needed doing.
  returned: when one object was given
  type: str
  sample: create
results:
  description: One entry per document, in order.
  returned: always
  type: list
  elements: dict
  contains:
    result:
      description: The object as stored after the task (empty when it was removed).
      type: dict
    method:
      description: One of C(create), C(update), C(delete), C(none).
      type: str
    changed:
      description: Whether this object changed.
      type: bool
"""

from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.ansible_module import run_module
from ansible_collections.metal3.baremetal.plugins.module_utils.args import store_options, with_store
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.claims import applied_pool_warnings
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import (
    apply,
    check_one_source,
    complete,
    load_definitions,
)


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    check_one_source(params["definition"], params["src"], params["kind"], params["name"], params["state"])
    documents = load_definitions(params["definition"], params["src"]) or [{}]
    where = params["src"] or "definition"
    objects = [complete(doc, params["api_version"], params["kind"], params["name"], params["namespace"],
                        f"{where} (document {i + 1})" if len(documents) > 1 else where)
               for i, doc in enumerate(documents)]
    with open_store(store_options(params)) as store:
        outcomes = apply(store, objects, params["state"], dry_run=check_mode)
    result: dict[str, Any] = {
        "changed": any(o["changed"] for o in outcomes),
        "results": [{k: o[k] for k in ("result", "method", "changed")} for o in outcomes],
        "diff": [o["diff"] for o in outcomes] if len(outcomes) > 1 else outcomes[0]["diff"],
    }
    if len(outcomes) == 1:
        result.update(result=outcomes[0]["result"], method=outcomes[0]["method"])
    warnings = applied_pool_warnings(objects) if params["state"] == "present" else []
    if warnings:
        result["warnings"] = warnings
    return result


SPEC = ModuleSpec(
    argument_spec=with_store({
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "definition": {"type": "raw", "aliases": ["resource_definition", "inline"]},
        "src": {"type": "path"},
        "api_version": {"type": "str", "default": "v1", "aliases": ["api", "version"]},
        "kind": {"type": "str"},
        "name": {"type": "str"},
        "namespace": {"type": "str", "default": "default"},
    }),
    run=run,
    mutually_exclusive=[["definition", "src"]],
)


def main() -> None:
    run_module(SPEC)


if __name__ == "__main__":
    main()
