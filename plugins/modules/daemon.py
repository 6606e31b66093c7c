#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: daemon
short_description: Run a command as a supervised background process, where systemd does not run
version_added: 0.1.0
author: Metal3 community (@metal3-io)
description:
  - Starts a command detached from Ansible, in its own session, with its output in a log file and its pid in a
    pid file; stops it with SIGTERM, then SIGKILL. Used by the M(metal3.baremetal.ironic) and
    M(metal3.baremetal.redfish_emulator) roles on hosts without systemd (containers, CI, laptops).
  - A process counts as running when the pid in O(pid_file) is alive and runs O(command)'s executable.
options:
  state:
    description: C(started) starts the command unless it runs; C(stopped) stops it; C(restarted) does both.
    type: str
    choices: [started, stopped, restarted]
    default: started
  command:
    description: The command and its arguments. Required to start.
    type: list
    elements: str
  pid_file:
    description: Where the pid is kept.
    type: path
    required: true
  log_file:
    description: Where the output goes (appended).
    type: path
  env:
    description: Environment variables added to the command's.
    type: dict
    default: {}
  chdir:
    description: Working directory of the command.
    type: path
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
extends_documentation_fragment:
  - metal3.baremetal.attributes
"""

EXAMPLES = r"""
- name: Run the Redfish emulator
  metal3.baremetal.daemon:
    command: [/opt/venv/bin/sushy-emulator, --config, /etc/sushy.conf]
    pid_file: /run/user/1000/sushy.pid
    log_file: /var/log/sushy.log
"""

RETURN = r"""
pid:
  description: The pid of the running process; absent once stopped.
  returned: when running
  type: int
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.metal3.baremetal.plugins.module_utils.daemon import Daemon


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["started", "stopped", "restarted"], "default": "started"},
            "command": {"type": "list", "elements": "str"},
            "pid_file": {"type": "path", "required": True},
            "log_file": {"type": "path"},
            "env": {"type": "dict", "default": {}},
            "chdir": {"type": "path"},
        },
        required_if=[("state", "started", ["command", "log_file"]), ("state", "restarted", ["command", "log_file"])],
        supports_check_mode=True,
    )
    params = module.params
    daemon = Daemon(params["command"] or [""], params["pid_file"], params["log_file"] or os.devnull,
                    {k: str(v) for k, v in params["env"].items()}, params["chdir"])
    running = daemon.pid()
    if params["state"] == "stopped":
        if running and not module.check_mode:
            daemon.stop()
        module.exit_json(changed=running is not None)
    if running and params["state"] == "started":
        module.exit_json(changed=False, pid=running)
    if module.check_mode:
        module.exit_json(changed=True)
    if running:
        daemon.stop()
    try:
        pid = daemon.start()
    except OSError as e:
        module.fail_json(msg=f"cannot start {params['command'][0]}: {e.strerror}")
    time.sleep(0.5)  # a command that dies at once (bad option, port taken) is reported here, with its log
    if daemon.pid() is None:
        module.fail_json(msg=f"{params['command'][0]} exited at once; the end of {params['log_file']}:\n"
                             f"{daemon.log_tail()}")
    module.exit_json(changed=True, pid=pid)


if __name__ == "__main__":
    main()
