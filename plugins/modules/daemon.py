#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: daemon
short_description: Run a command as a supervised background process, where systemd does not run
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - Starts a command detached from Ansible, in its own session, with its output in a log file and its pid in a
    pid file; stops it with SIGTERM, then SIGKILL. Used by the P(metal3.baremetal.ironic#role) and
    P(metal3.baremetal.redfish_emulator#role) roles on hosts without systemd (containers, CI, laptops).
  - A process counts as running when the pid in O(pid_file) is alive and started when the pid file says.
  - With O(ports), the ports are checked before anything starts and after. A port another process listens on
    fails the task, naming the port and that process (pid and command line), and nothing is started; once
    started, the module waits until the command - or a process of its session, one of its children - listens
    on each port. The listening sockets are found in C(/proc/net/tcp) and the processes' C(/proc/<pid>/fd).
  - The log file and the pid file are created mode 0600.
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
  umask:
    description:
      - The umask the command runs with, in octal, for example C("0077") so that the files it creates (a
        database, logs) are readable by its user only. Unset, it inherits the module's.
    type: str
  ports:
    description:
      - TCP ports the command listens on (on any address). Before it starts, another process listening on one
        of them fails the task; after, the task waits until the command listens on all of them, and fails when
        another process does, or after O(wait_timeout) seconds.
      - When the command already runs, its ports are checked the same way.
      - In check mode, what listens on them now is checked, without waiting; a role can check the ports of all
        its processes so, before it starts any of them.
    type: list
    elements: int
    default: []
  wait_timeout:
    description: Seconds to wait for the command to listen on O(ports).
    type: int
    default: 60
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
    ports: [8000]

- name: Run a web server whose files are private
  metal3.baremetal.daemon:
    command: [/usr/bin/python3, -m, http.server, "8088", --bind, 127.0.0.1]
    chdir: /srv/httpboot
    pid_file: /srv/http.pid
    log_file: /srv/http.log
    umask: "0077"
    ports: [8088]
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


def _umask(value: str | None) -> int | None:
    """The umask option as a number; ValueError when it is not octal, from 0 to 0777."""
    if value is None:
        return None
    umask = int(value, 8)
    if not 0 <= umask <= 0o777:
        raise ValueError(value)
    return umask


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["started", "stopped", "restarted"], "default": "started"},
            "command": {"type": "list", "elements": "str"},
            "pid_file": {"type": "path", "required": True},
            "log_file": {"type": "path"},
            "env": {"type": "dict", "default": {}},
            "chdir": {"type": "path"},
            "umask": {"type": "str"},
            "ports": {"type": "list", "elements": "int", "default": []},
            "wait_timeout": {"type": "int", "default": 60},
        },
        required_if=[("state", "started", ["command", "log_file"]), ("state", "restarted", ["command", "log_file"])],
        supports_check_mode=True,
    )
    params = module.params
    if params["wait_timeout"] < 0:
        module.fail_json(msg=f"wait_timeout: Invalid value: {params['wait_timeout']}: must be greater than or equal "
                             "to 0")
    try:
        umask = _umask(params["umask"])
    except ValueError:
        module.fail_json(msg=f"umask: Invalid value: {params['umask']!r}: must be an octal number from 0 to 0777")
    for port in params["ports"]:
        if not 0 < port < 65536:
            module.fail_json(msg=f"ports: Invalid value: {port}: must be a TCP port, from 1 to 65535")
    daemon = Daemon(params["command"] or [""], params["pid_file"], params["log_file"] or os.devnull,
                    {k: str(v) for k, v in params["env"].items()}, params["chdir"], umask)
    name, ports = (params["command"] or [""])[0], params["ports"]
    running = daemon.pid()
    if params["state"] == "stopped":
        if running and not module.check_mode:
            daemon.stop()
        module.exit_json(changed=running is not None)
    if running and params["state"] == "started":
        # Ours runs: the ports must be its own (another process may have taken one it could not bind).
        problem = daemon.port_conflict(ports) if module.check_mode else \
            daemon.wait_listening(ports, params["wait_timeout"])
        if problem:
            module.fail_json(msg=problem, pid=running)
        module.exit_json(changed=False, pid=running)
    # Before anything starts or stops: a port another process holds is reported, and nothing is started.
    problem = daemon.port_conflict(ports)
    if problem:
        module.fail_json(msg=problem)
    if module.check_mode:
        module.exit_json(changed=True)
    if running:
        daemon.stop()
    try:
        pid = daemon.start()
    except OSError as e:
        module.fail_json(msg=f"cannot start {name}: {e.strerror}")
    if ports:
        problem = daemon.wait_listening(ports, params["wait_timeout"])
        if problem:
            daemon.stop()  # not serving its ports, it is of no use, and it is not left behind
            module.fail_json(msg=problem)
    else:
        time.sleep(0.5)  # a command that dies at once (bad option, port taken) is reported here, with its log
        if daemon.pid() is None:
            module.fail_json(msg=f"{name} exited at once; the end of {params['log_file']}:\n{daemon.log_tail()}")
    module.exit_json(changed=True, pid=pid)


if __name__ == "__main__":
    main()
