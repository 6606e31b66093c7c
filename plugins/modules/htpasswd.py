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
    password for the user. Ironic's C(http_basic) auth and sushy-tools read such files.
options:
  path:
    description: The htpasswd file.
    type: path
    required: true
  name:
    description: The user.
    type: str
    required: true
  password:
    description: The password; never shown.
    type: str
    required: true
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
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

try:
    import bcrypt

    BCRYPT_ERROR = None
except ImportError:
    BCRYPT_ERROR = traceback.format_exc()


def main() -> None:
    module = AnsibleModule(
        argument_spec={"path": {"type": "path", "required": True}, "name": {"type": "str", "required": True},
                       "password": {"type": "str", "required": True, "no_log": True}},
        supports_check_mode=True,
    )
    if BCRYPT_ERROR:
        module.fail_json(msg=missing_required_lib("bcrypt"), exception=BCRYPT_ERROR)
    path, name = module.params["path"], module.params["name"]
    password = module.params["password"].encode()
    try:
        with open(path, encoding="ascii") as f:
            entries = dict(line.rstrip("\n").split(":", 1) for line in f if ":" in line)
    except FileNotFoundError:
        entries = {}
    current = entries.get(name)
    if current and bcrypt.checkpw(password, current.encode()):
        module.exit_json(changed=False)
    if not module.check_mode:
        entries[name] = bcrypt.hashpw(password, bcrypt.gensalt(rounds=12)).decode()
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="ascii") as f:
            f.writelines(f"{user}:{digest}\n" for user, digest in entries.items())
    module.exit_json(changed=True)


if __name__ == "__main__":
    main()
