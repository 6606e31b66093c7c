"""ansible-playbook imported once, forked for each run.

Starting ansible-playbook spends about 0.45 s of CPU importing Ansible before it reads the playbook: more
than the rest of a one-task reconcile. The server here imports it once, then forks a child per run that calls
ansible-playbook's entry point with the run's arguments, environment, working directory and terminal (the
file descriptors of the client that ansible-runner started, passed over a Unix socket). ansible-runner sees an
ordinary ansible-playbook process: the client (prefork_client.py) is its ``binary``.

Ansible reads its configuration when it is imported, so a fork is only used when the run's environment is the
one the server imported Ansible with (the first run's) and its directory has no ansible.cfg; for any other run
the child starts the real ansible-playbook, which is slower and otherwise the same.

The server is single-threaded (forking a threaded process is unsafe) and exits when its standard input, a pipe
from the operator, closes. A run ends with its client: when the client goes away before the run has ended
(ansible-runner cancelled it, or timed it out, and killed it), the server ends the run's whole process tree - the
fork, its task workers (Ansible puts each in a session of its own, out of reach of a process group signal) and what
their tasks started (``end_process_tree``); when the server exits, it ends every run still going the same way.

Resetting ansible-playbook's per-process state between forks (``_reset_run_state``) and rebinding ansible-runner's
event callback reach into internals of both: their versions are pinned exactly (operator/requirements.txt says why),
and the server (and the operator, before it starts one) refuses an ansible-core outside TESTED_ANSIBLE_CORE
(``check_ansible_core``) rather than fork runs that would inherit the previous run's command line or vault secrets.
"""
from __future__ import annotations

import ast
import contextlib
import gc
import importlib
import os
import pkgutil
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from typing import Any

from packaging.version import InvalidVersion, Version

# Set per run by ansible-runner and read only while the run goes (by its event callback), never at import.
PER_RUN_ENV = frozenset({"AWX_ISOLATED_DATA_DIR", "PWD", "OLDPWD"})
MAX_REQUEST = 1 << 20
# Seconds a run has to exit once its client has gone: one that has told the client its outcome is exiting already.
RUN_EXIT_GRACE = 0.2
# The ansible-core releases whose private per-process state _reset_run_state is tested to reset: the lowest and the
# highest, both included (operator/requirements.txt pins the one the tests run). Widen an edge only once
# tests/operator/test_runner.py passes on the release at that edge. The collection's own requirement
# (meta/runtime.yml) is wider: its modules and roles use no internals.
TESTED_ANSIBLE_CORE = ("2.19.14", "2.19.14")


class UntestedAnsibleCore(RuntimeError):
    """The installed ansible-core is not one the prefork server is tested with."""


def tested_ansible_core() -> str:
    low, high = TESTED_ANSIBLE_CORE
    return low if low == high else f"{low} to {high}"


def installed_ansible_core() -> str:
    """The version of the ansible-core this Python imports."""
    from ansible.release import __version__

    return str(__version__)


def check_ansible_core(found: str | None = None) -> str:
    """The installed ansible-core's version (or ``found``), if it is within TESTED_ANSIBLE_CORE; else
    UntestedAnsibleCore, naming both. A pre-release or post-release of an edge is outside it."""
    found = installed_ansible_core() if found is None else found
    low, high = (Version(edge) for edge in TESTED_ANSIBLE_CORE)
    try:
        inside = low <= Version(found) <= high
    except InvalidVersion:
        inside = False
    if not inside:
        raise UntestedAnsibleCore(
            f"ansible-core {found} is installed, and the prefork server is tested with ansible-core "
            f"{tested_ansible_core()} only: it resets ansible-playbook's private per-process state between runs, "
            f"which another release may keep elsewhere. Install ansible-core {tested_ansible_core()} "
            "(operator/requirements.txt), or start the operator with --no-prefork")
    return found


def _children() -> dict[int, list[int]]:
    """Each live process's children, read from /proc (a zombie has none, and is nobody's to stop)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        state, ppid = _state(int(entry.name))
        if state and state not in "ZX":
            children.setdefault(ppid, []).append(int(entry.name))
    return children


def _state(pid: int) -> tuple[str, int]:
    """A process's state letter and parent, or ("", 0) once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()  # the command name, in parentheses, may hold anything
    except OSError:
        return "", 0
    return fields[0].decode(), int(fields[1])


def _wait_stopped(pid: int, deadline: float) -> None:
    """Until pid is stopped (it can no longer fork, nor exit and leave its children to init), gone, or deadline."""
    while _state(pid)[0] not in ("T", "t", "Z", "X", "") and time.monotonic() < deadline:
        time.sleep(0.001)


def end_process_tree(root: int, timeout: float = 2.0) -> list[int]:
    """Kill root and every process descended from it, whatever session or process group each is in, and return
    their pids. Top-down, each process is stopped (SIGSTOP) before its children are read, so that none forks a
    child unseen or exits and leaves one to init; then all are killed (SIGKILL: nothing of the run may go on, nor
    decide not to). A process still not stopped after ``timeout`` (in uninterruptible sleep) is killed as found."""
    deadline = time.monotonic() + timeout
    found: list[int] = []
    frontier = [root]
    while frontier:
        for pid in frontier:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
                found.append(pid)
        for pid in frontier:
            _wait_stopped(pid, deadline)
        children = _children()
        frontier = [child for pid in frontier for child in children.get(pid, []) if child not in found]
    for pid in found:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return found


def _ansible_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in PER_RUN_ENV}


class Server:
    def __init__(self, socket_path: str, ansible_playbook: str, preload: list[str]) -> None:
        self.socket_path = socket_path
        self.ansible_playbook = ansible_playbook
        self.preload = preload
        self.imported_env: dict[str, str] | None = None
        self.event_modules: list[Any] = []
        # Each run's pid and the server's end of its client's connection, until the run is reaped. The server
        # reaps its runs itself (not the kernel, with SIGCHLD ignored): a pid here is never one reused by
        # another process.
        self.runs: dict[int, socket.socket] = {}

    def serve(self) -> None:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)
        listener.bind(self.socket_path)
        os.chmod(self.socket_path, 0o600)
        listener.listen(128)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the operator decides when we stop
        try:
            while True:
                # A run that ended is a zombie until reaped: the timeout reaps one whose client lingers.
                readable = select.select([listener, sys.stdin, *self.runs.values()], [], [], 5)[0]
                self._reap()
                if sys.stdin in readable and not os.read(sys.stdin.fileno(), 4096):
                    return
                for pid, conn in list(self.runs.items()):
                    if conn in readable:
                        self._client_gone(pid, conn)
                if listener in readable:
                    self._accept(listener)
        finally:
            self._end_runs()
            listener.close()
            os.unlink(self.socket_path)

    def _reap(self) -> None:
        """Reap the runs that have exited; each one's client has its outcome from the run itself."""
        for pid in list(self.runs):
            if self._reaped(pid):
                self.runs.pop(pid).close()

    @staticmethod
    def _reaped(pid: int) -> bool:
        try:
            return os.waitpid(pid, os.WNOHANG)[0] != 0
        except ChildProcessError:
            return True

    def _client_gone(self, pid: int, conn: socket.socket) -> None:
        """The client sends nothing after its request: its end readable means it has gone - as it does once it has
        the run's outcome, the run exiting. A run that does not exit within RUN_EXIT_GRACE is one whose client
        was killed out of it (a cancel, a timeout): the whole run ends."""
        with contextlib.suppress(OSError):
            if conn.recv(16):
                return
        deadline = time.monotonic() + RUN_EXIT_GRACE
        while not self._reaped(pid):
            if time.monotonic() >= deadline:
                end_process_tree(pid)
                os.waitpid(pid, 0)
                break
            time.sleep(0.002)
        self.runs.pop(pid)
        conn.close()

    def _end_runs(self) -> None:
        """On the server's way out: end every run still going, and reap them."""
        for pid in self.runs:
            if not self._reaped(pid):
                end_process_tree(pid)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
        for conn in self.runs.values():
            conn.close()
        self.runs.clear()

    def _accept(self, listener: socket.socket) -> None:
        conn = listener.accept()[0]
        fds: list[int] = []
        try:
            message, fds = socket.recv_fds(conn, MAX_REQUEST, 3)[:2]
            request = ast.literal_eval(message.decode())
            if len(fds) != 3:
                raise ValueError("expected stdin, stdout and stderr")
            if self.imported_env is None:
                self._import(request["env"])
            warm = self._warm(request)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
        except (OSError, ValueError, KeyError, TypeError, SyntaxError) as e:
            print(f"prefork: refused a run: {e}", file=sys.stderr, flush=True)
            conn.close()
            for fd in fds:
                os.close(fd)
            return
        if pid == 0:
            log = os.dup(2)
            try:
                # Not the run's: the server's listener, the other runs' connections (whose clients would
                # otherwise not see their run end while this one lives).
                listener.close()
                for other in self.runs.values():
                    other.close()
                _run(conn, fds, request, warm, self.ansible_playbook, self.event_modules)
            except BaseException:  # noqa: BLE001 - said where the operator's log shows it, then gone
                os.write(log, f"prefork: run failed to start:\n{traceback.format_exc()}".encode())
            finally:
                os._exit(70)
        self.runs[pid] = conn  # watched: the client going away ends the run
        for fd in fds:
            os.close(fd)

    def _warm(self, request: dict[str, Any]) -> bool:
        """Whether the run can use what was imported: the same environment, no ansible.cfg of its own."""
        env = _ansible_env(request["env"])
        differ = sorted(k for k in env.keys() | (self.imported_env or {}).keys()
                        if env.get(k) != (self.imported_env or {}).get(k))
        if os.path.exists(os.path.join(request["cwd"], "ansible.cfg")):
            differ.append("ansible.cfg")
        if differ:
            print(f"prefork: a run differs in {', '.join(differ)}: it starts cold", file=sys.stderr, flush=True)
        return not differ

    def _import(self, env: dict[str, str]) -> None:
        """Import Ansible under the first run's environment, from a directory with no ansible.cfg."""
        os.environ.clear()
        os.environ.update(env)
        self.imported_env = _ansible_env(env)
        importlib.import_module("ansible.cli.playbook")
        # Collection content is importable once the warm-up has installed Ansible's collection loader.
        collections = [n for n in self.preload if n.startswith("ansible_collections.")]
        self._preload([n for n in self.preload if n not in collections])
        self._warm_up()
        self.event_modules = _runner_event_modules()
        self._preload(collections)
        # Objects made so far are never collected: a fork's collector does not touch (and copy) their pages.
        gc.collect()
        gc.freeze()

    def _preload(self, names: list[str]) -> None:
        """Import each module (``package.*``: each module of the package; ``module:function``: the module, then
        call its function, which fills the module's caches), so that no run does it."""
        for name in names:
            module_name, _colon, function = name.partition(":")
            try:
                if module_name.endswith(".*"):
                    package = importlib.import_module(module_name[:-2])
                    for info in pkgutil.iter_modules(package.__path__):
                        importlib.import_module(f"{package.__name__}.{info.name}")
                else:
                    module = importlib.import_module(module_name)
                    if function:
                        getattr(module, function)()
            except Exception as e:  # noqa: BLE001 - a module left out is imported by the run that needs it
                print(f"prefork: cannot preload {name}: {e}", file=sys.stderr, flush=True)

    def _warm_up(self) -> None:
        """Run a one-task play here, once: what Ansible caches per process on its first run (the parsed
        ansible.builtin routing metadata, plugins and their option definitions: a third of a run's CPU) is then
        inherited by every fork instead of rebuilt by each."""
        from ansible.cli.playbook import PlaybookCLI

        scratch = tempfile.mkdtemp(prefix="prefork-warm-up-")
        playbook = os.path.join(scratch, "warm-up.yml")
        with open(playbook, "w") as f:
            f.write("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                    "    - ansible.builtin.set_fact: {warm: true}\n")
        os.environ["AWX_ISOLATED_DATA_DIR"] = scratch
        saved = [os.dup(1), os.dup(2)]
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            PlaybookCLI([self.ansible_playbook, "-i", "localhost,", "-c", "local", playbook]).run()
        except Exception as e:  # noqa: BLE001 - a cold fork is slower, never wrong
            warning = f"prefork: warm-up failed, runs start cold: {e}"
        else:
            warning = ""
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for target, fd in enumerate(saved, start=1):
                os.dup2(fd, target)
                os.close(fd)
            os.close(devnull)
            os.environ.pop("AWX_ISOLATED_DATA_DIR", None)
            shutil.rmtree(scratch, ignore_errors=True)
        if warning:
            print(warning, file=sys.stderr, flush=True)


def _run(conn: socket.socket, fds: list[int], request: dict[str, Any], warm: bool, ansible_playbook: str,
         event_modules: list[Any]) -> None:
    """In the forked child: become the run's ansible-playbook, and tell the client how it ended. When the client
    goes away first, the server ends the run."""
    os.setsid()  # signals to the server's group are not the run's
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    argv = [ansible_playbook, *request["argv"][1:]]
    conn.sendall(f"pid {os.getpid()}".encode())
    if not warm:
        _report(conn, subprocess.call([sys.executable, *argv]))
    # The warm-up configured the collection loader already, for the same paths: that is the point.
    warnings.filterwarnings("ignore", message="AnsibleCollectionFinder has already been configured")
    sys.argv = argv
    from ansible.cli.playbook import main

    _reset_run_state()
    _rebind_runner_events(event_modules)

    try:
        main(argv)
        rc = 0
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    _report(conn, rc)


def _reset_run_state() -> None:
    """What a run sets once per process (its parsed command line, the variables made from it - ansible_verbosity,
    ansible_check_mode... - and its extra vars, its vault secrets) is the warm-up's until reset: each run sets its
    own. These are ansible-core's internals, as TESTED_ANSIBLE_CORE has them (the server checked it at start)."""
    from ansible import context
    from ansible.parsing.vault import VaultSecretsContext
    from ansible.utils import vars as ansible_vars
    from ansible.utils.context_objects import CLIArgs, GlobalCLIArgs

    GlobalCLIArgs._Singleton__instance = None
    context.CLIARGS = CLIArgs({})
    ansible_vars.load_options_vars.__dict__.pop("options_vars", None)
    ansible_vars.load_extra_vars.__dict__.pop("extra_vars", None)
    VaultSecretsContext._current = None


def _report(conn: socket.socket, rc: int) -> None:
    """Tell the client how the run ended, and end."""
    sys.stdout.flush()
    sys.stderr.flush()
    with contextlib.suppress(OSError):
        conn.sendall(f"rc {rc}".encode())
    os._exit(rc)


def _runner_event_modules() -> list[Any]:
    """The modules of ansible-runner's event callback that the warm-up imported (the callback is loaded by path,
    under a name of Ansible's plugin loader)."""
    return [module for module in list(sys.modules.values())
            if getattr(module, "event_context", None) is not None and hasattr(module, "IsolatedFileWrite")
            and hasattr(module.event_context, "cache")]


def _rebind_runner_events(modules: list[Any]) -> None:
    """ansible-runner's event callback binds the directory it writes events to (AWX_ISOLATED_DATA_DIR) when it
    is imported - by the warm-up, here: bind it again to this run's."""
    for module in modules:
        module.event_context.cache = module.IsolatedFileWrite()


def main() -> int:
    socket_path, ansible_playbook, *preload = sys.argv[1:]
    try:
        check_ansible_core()
    except UntestedAnsibleCore as e:
        print(f"prefork: {e}", file=sys.stderr, flush=True)
        return 2
    Server(socket_path, ansible_playbook, preload).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
