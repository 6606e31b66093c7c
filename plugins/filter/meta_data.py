# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
name: meta_data
short_description: Render a Metal3DataTemplate metaData into cloud-init meta_data
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - Renders the C(metaData) of a Metal3DataTemplate as CAPM3 does, into a flat map of strings - strings,
    objectNames, indexes, namespaces, ipAddressesFromIPPool, prefixesFromIPPool, gatewaysFromIPPool,
    dnsServersFromIPPool (rendered, comma-separated, unlike upstream's bug CAPM3#3363), fromHostInterfaces,
    fromLabels and fromAnnotations; the v1beta2 C(*FromPool) names too. C(strings) win over other sources.
  - Adds C(providerid) (C(<namespace>/<host>/<metal3machine>)) when both objects are given.
options:
  _input:
    description: The C(metaData) mapping of a Metal3DataTemplate.
    type: dict
    required: true
  index:
    description: The Metal3Data index (for C(indexes) sources).
    type: int
    required: true
  objects:
    description: C(machine), C(metal3machine) and C(baremetalhost) objects, for the sources that read them.
    type: dict
    required: true
  addresses:
    description:
      - Pool name to the address claimed from it, C({address, prefix, gateway, dns_servers}) - a registered
        M(metal3.baremetal.ip_claim) result as it is (its other keys are ignored).
      - C(dnsServers), the IPAddress spec's spelling, is read for C(dns_servers) too.
    type: dict
    required: true
  namespace:
    description: The namespace (for C(namespaces) sources and C(providerid)).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: meta_data of the third machine
  ansible.builtin.debug:
    msg: >-
      {{ {'indexes': [{'key': 'hostname', 'prefix': 'node-'}], 'ipAddressesFromIPPool': [{'key': 'ip', 'name': 'mgmt'}]}
         | metal3.baremetal.meta_data(2, {}, {'mgmt': {'address': '10.0.0.5', 'prefix': 24}}, 'metal3') }}
"""

RETURN = r"""
_value:
  description: The meta_data keys and their string values.
  type: dict
"""

from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Metal3Error
from ansible_collections.metal3.baremetal.plugins.module_utils.templating.render import render_meta_data


def meta_data(meta_data_spec: dict[str, Any], index: int, objects: dict[str, Any], addresses: dict[str, Any],
              namespace: str) -> dict[str, str]:
    # Values go to the renderer as given (None is "not set"): it names the argument or field of a bad one.
    try:
        return render_meta_data(meta_data_spec, index, objects, addresses, namespace)
    except Metal3Error as e:
        raise AnsibleFilterError(str(e)) from None


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"meta_data": meta_data}
