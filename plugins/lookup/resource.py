# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Objects of the store in a template; the read is resource_info's (module_utils/resources.py find)."""
from __future__ import annotations

DOCUMENTATION = r"""
name: resource
short_description: Read Metal3 objects from the store in a template
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - Reads objects of one kind from the store (the local SQLite file or a Kubernetes cluster), by name or label
    selector, as P(kubernetes.core.k8s#lookup) reads them from a cluster, with the same option names.
  - Returns the objects found, sorted by namespace and name. As every lookup, V(lookup) gives the object itself
    when one is found, and V(query) (or C(wantlist=true)) always a list; nothing found is an empty list.
  - A Secret is returned with its C(data) as stored (base64), and only when O(kind) is C(Secret); set C(no_log)
    on the task that uses it.
options:
  kind:
    description: Kind of the objects.
    type: str
    required: true
  api_version:
    description: apiVersion of the objects.
    type: str
    default: v1
  resource_name:
    description: Name of one object.
    type: str
  namespace:
    description: Namespace to look in; C(default) with O(resource_name), else every namespace when not set.
    type: str
  label_selector:
    description:
      - Label selectors, as C(kubectl -l) takes them, comma separated or as a list; all must match.
    type: list
    elements: str
extends_documentation_fragment:
  - metal3.baremetal.store
"""

EXAMPLES = r"""
- name: The hosts of failure domain az-a
  ansible.builtin.debug:
    msg: "{{ query('metal3.baremetal.resource', api_version='metal3.io/v1alpha1', kind='BareMetalHost',
             namespace='metal3', label_selector='infrastructure.cluster.x-k8s.io/failure-domain=az-a')
             | map(attribute='metadata.name') }}"

- name: One pool, from a cluster
  ansible.builtin.set_fact:
    pool: "{{ lookup('metal3.baremetal.resource', api_version='ipam.metal3.io/v1alpha1', kind='IPPool',
              resource_name='mgmt-az-a-pool', namespace='metal3', backend='kubernetes') }}"

- name: A machine's rendered network_data (a Secret, read on purpose)
  ansible.builtin.copy:
    dest: /srv/network_data.json
    content: "{{ (lookup('metal3.baremetal.resource', kind='Secret', namespace='metal3',
                          resource_name='my-cluster-controlplane-0-networkdata')).data.networkData | b64decode }}"
    mode: "0600"
  no_log: true
"""

RETURN = r"""
_list:
  description: The objects found, sorted by namespace and name.
  type: list
  elements: dict
"""

from typing import Any

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.metal3.baremetal.plugins.module_utils.args import STORE_ARG_SPEC, resolve_store_options
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Metal3Error
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import find


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: dict[str, Any] | None = None, **kwargs: Any) -> list[Any]:
        if terms:
            raise AnsibleLookupError("metal3.baremetal.resource takes options only (kind=..., resource_name=...), "
                                     f"not terms: {terms!r}")
        self.set_options(var_options=variables, direct=kwargs)
        kind, name = self.get_option("kind"), self.get_option("resource_name")
        if not kind:
            raise AnsibleLookupError("metal3.baremetal.resource: kind: required")
        namespace = self.get_option("namespace") or ("default" if name else None)
        try:
            options = resolve_store_options({option: self.get_option(option) for option in STORE_ARG_SPEC})
            with open_store(options) as store:
                return find(store, self.get_option("api_version"), kind, name, namespace,
                            self.get_option("label_selector") or [], secret_data=kind == "Secret")
        except Metal3Error as e:
            raise AnsibleLookupError(f"metal3.baremetal.resource: {e}") from None
