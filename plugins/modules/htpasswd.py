#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: htpasswd
short_description: Keep one user's bcrypt entry in an htpasswd file
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - Writes C(user:bcrypt(password)) into an htpasswd file (created mode 0600), unless the file already holds that
    password for the user at that O(cost). Ironic's C(http_basic) auth and sushy-tools read such files.
  - They check the password against it on every request, so the bcrypt cost is paid by the server for each
    request. The default is Apache C(htpasswd -B)'s, which Metal3's ironic-image runs for its JSON-RPC file.
options:
  path:
    description: The htpasswd file.
    type: path
    required: true
  name:
    description: The user; no C(:) nor line breaks.
    type: str
    required: true
  password:
    description: The password, at most 72 bytes (all bcrypt reads); never shown.
    type: str
    required: true
  cost:
    description:
      - The bcrypt cost (C(htpasswd -C)), from 4 to 17. Each step doubles the CPU time of every check, on every
        request to the server that reads the file.
      - An entry of another cost is written again.
    type: int
    default: 5
requirements:
  - bcrypt
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
extends_documentation_fragment:
  - metal3.baremetal.attributes
"""

EXAMPLES = r"""
- name: The API user of a standalone Ironic
  metal3.baremetal.htpasswd:
    path: /var/lib/ironic/htpasswd
    name: metal3
    password: "{{ ironic_password }}"
"""

RETURN = r"""
"""

import os

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.metal3.baremetal.plugins.module_utils.core.htpasswd import (
    BCRYPT_ERROR,
    DEFAULT_COST,
    digest_for,
    invalid_cost,
    invalid_entry,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={"path": {"type": "path", "required": True}, "name": {"type": "str", "required": True},
                       "password": {"type": "str", "required": True, "no_log": True},
                       "cost": {"type": "int", "default": DEFAULT_COST}},
        supports_check_mode=True,
    )
    if BCRYPT_ERROR:
        module.fail_json(msg=missing_required_lib("bcrypt"), exception=BCRYPT_ERROR)
    path, name = module.params["path"], module.params["name"]
    password = module.params["password"].encode()
    refusal = invalid_entry(name, password) or invalid_cost(module.params["cost"])
    if refusal:
        module.fail_json(msg=refusal)
    try:
        with open(path, encoding="ascii") as f:
            entries = dict(line.rstrip("\n").split(":", 1) for line in f if ":" in line)
    except FileNotFoundError:
        entries = {}
    digest = digest_for(entries.get(name), password, module.params["cost"])
    if digest is None:
        module.exit_json(changed=False)
    if not module.check_mode:
        entries[name] = digest
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="ascii") as f:
            f.writelines(f"{user}:{entry}\n" for user, entry in entries.items())
    module.exit_json(changed=True)


if __name__ == "__main__":
    main()
