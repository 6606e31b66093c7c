# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
name: ip_claims
short_description: One IP claim per network device of each requester
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - Expands requesters (machines, hosts) into the options of one M(metal3.baremetal.ip_claim) per network
    device; the claim of device I(i) of requester I(r) is named C(r-i). The P(metal3.baremetal.ipam#role) role uses it.
options:
  _input:
    description: Requesters, each with C(name), optional C(namespace), C(labels) and C(devices) (each with
      optional C(name), C(network_name), C(pool), C(pool_namespace), C(address), C(labels)).
    type: list
    elements: dict
    required: true
  namespace:
    description: Namespace of requesters that name none.
    type: str
    default: default
  names:
    description: More requesters, by name only, as an AWX survey gives them (a list or a comma-separated string).
    type: raw
  networks:
    description: For the requesters of O(names), one device per network named here (list or comma-separated).
    type: raw
  pool:
    description: For the requesters of O(names), the pool of every device.
    type: str
"""

EXAMPLES = r"""
- name: Two NICs of one machine
  ansible.builtin.debug:
    msg: "{{ [{'name': 'worker-0', 'devices': [{'network_name': 'mgmt'}, {'network_name': 'storage'}]}]
             | metal3.baremetal.ip_claims('metal3') }}"
"""

RETURN = r"""
_value:
  description: The claims, each with C(name), C(namespace), C(requester), C(device), C(network), C(pool),
    C(pool_namespace), C(address) and C(labels).
  type: list
  elements: dict
"""

from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Metal3Error
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.requesters import expand, requesters_from_survey


def _check_arguments(requesters: Any, namespace: Any, names: Any, networks: Any, pool: Any) -> None:
    """Refuse what the expansion would trip over (a string iterated as a list, a list as a mapping), naming it."""
    if requesters is not None and not isinstance(requesters, list):
        raise AnsibleFilterError(f"ipam_requesters: must be a list of mappings, not {requesters!r}")
    for i, requester in enumerate(requesters or []):
        if not isinstance(requester, dict):
            raise AnsibleFilterError(f"ipam_requesters[{i}]: must be a mapping, not {requester!r}")
        for field, kind, what in (("labels", dict, "a mapping"), ("devices", list, "a list")):
            if requester.get(field) is not None and not isinstance(requester[field], kind):
                raise AnsibleFilterError(f"ipam_requesters[{i}].{field}: must be {what}")
        for j, device in enumerate(requester.get("devices") or []):
            if isinstance(device, dict) and device.get("labels") is not None \
                    and not isinstance(device["labels"], dict):
                raise AnsibleFilterError(f"ipam_requesters[{i}].devices[{j}].labels: must be a mapping")
    if not isinstance(namespace, str) or not namespace:
        raise AnsibleFilterError(f"namespace: must be a non-empty string, not {namespace!r}")
    for name, value in (("names", names), ("networks", networks)):
        if value is not None and not isinstance(value, (str, list)):
            raise AnsibleFilterError(f"{name}: must be a list or a comma-separated string, not {value!r}")
    if pool is not None and not isinstance(pool, str):
        raise AnsibleFilterError(f"pool: must be a string, not {pool!r}")


def ip_claims(requesters: list[dict[str, Any]], namespace: str = "default", names: Any = None,
              networks: Any = None, pool: str | None = None) -> list[dict[str, Any]]:
    _check_arguments(requesters, namespace, names, networks, pool)
    try:
        return expand([*(requesters or []), *requesters_from_survey(names, networks, pool)], namespace)
    except Metal3Error as e:
        raise AnsibleFilterError(str(e)) from None


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"ip_claims": ip_claims}
