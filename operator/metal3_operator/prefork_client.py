"""The ``ansible-playbook`` that ansible-runner starts: hands its arguments, environment, directory and
terminal to the prefork server (prefork.py) and exits as the run does.

Standard library only, so that ``python -I -S`` starts it in milliseconds. When the server cannot be
reached it execs the real ansible-playbook, named by METAL3_PREFORK_ANSIBLE_PLAYBOOK.
"""
import contextlib
import json
import os
import signal
import socket
import sys


def main() -> None:
    fallback = os.environ["METAL3_PREFORK_ANSIBLE_PLAYBOOK"]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(os.environ["METAL3_PREFORK_SOCKET"])
        request = {"argv": sys.argv, "env": dict(os.environ), "cwd": os.getcwd()}
        socket.send_fds(conn, [json.dumps(request).encode()], [0, 1, 2])
        started = json.loads(conn.recv(4096) or b"{}")
    except (OSError, KeyError, ValueError):
        started = {}
    if "pid" not in started:
        conn.close()
        os.execv(sys.executable, [sys.executable, fallback, *sys.argv[1:]])
    pid = started["pid"]

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(OSError):
            os.killpg(pid, signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    while True:
        try:
            message = conn.recv(4096)
            break
        except InterruptedError:
            continue
    ended = json.loads(message) if message else {}
    sys.exit(ended.get("rc", 255))


if __name__ == "__main__":
    main()
