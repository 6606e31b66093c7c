"""The ``ansible-playbook`` that ansible-runner starts: hands its arguments, environment, directory and
terminal to the prefork server (prefork.py) and exits as the run does.

It starts once per reconcile, so it imports only C modules (``_socket``, ``_signal``, ``array``): with
``python -IS`` that is about 15 ms, where ``socket``, ``signal`` and ``json`` would double it. The request
is the ``repr`` of a dict of strings, read back with ``ast.literal_eval``; the server answers ``pid N``, then
``rc N``. When the server cannot be reached it execs the real ansible-playbook, named by
METAL3_PREFORK_ANSIBLE_PLAYBOOK.
"""
import _signal
import _socket
import array
import os
import sys


def main() -> None:
    fallback = os.environ["METAL3_PREFORK_ANSIBLE_PLAYBOOK"]
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    pid = 0
    try:
        conn.connect(os.environ["METAL3_PREFORK_SOCKET"])
        request = repr({"argv": sys.argv, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
        conn.sendmsg([request], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
        word, _space, value = conn.recv(64).decode().partition(" ")
        pid = int(value) if word == "pid" else 0
    except (OSError, KeyError, ValueError):
        pid = 0
    if not pid:
        conn.close()
        os.execv(sys.executable, [sys.executable, fallback, *sys.argv[1:]])

    def forward(signum: int, _frame: object) -> None:
        try:  # noqa: SIM105 - contextlib would cost an import
            os.killpg(pid, signum)
        except OSError:
            pass

    for sig in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP):
        _signal.signal(sig, forward)
    word, _space, value = conn.recv(64).decode().partition(" ")
    sys.exit(int(value) if word == "rc" else 255)


if __name__ == "__main__":
    main()
