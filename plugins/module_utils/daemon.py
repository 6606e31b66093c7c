# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""A supervised background process where systemd does not run: a pid file, a log file, a clean stop.

Used by the ironic and redfish_emulator roles. The pid file holds the pid and the process's start time, so a
recycled pid is never taken for ours (and the command line cannot tell: Ironic retitles its process).

The process runs in a session of its own, so it and its children are known by their session id: a port it
should listen on is ours only when a process of that session holds the listening socket (read from
/proc/net/tcp and the processes' /proc/<pid>/fd, no other tool needed).
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import IO, Any, Iterator

PRIVATE = 0o600
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's "st" column


@dataclass(frozen=True)
class Holder:
    """A process that listens on a port; pid None when it belongs to a user whose processes we cannot read."""

    pid: int | None
    command: str = ""

    def __str__(self) -> str:
        if self.pid is None:
            return "a process of another user (its pid cannot be read)"
        return f"pid {self.pid} ({self.command})" if self.command else f"pid {self.pid}"


@dataclass(frozen=True)
class Daemon:
    command: list[str]
    pid_file: str
    log_file: str
    env: dict[str, str] | None = None
    cwd: str | None = None
    umask: int | None = None

    def pid(self) -> int | None:
        """The pid of the running process, or None."""
        try:
            with open(self.pid_file, encoding="ascii") as f:
                pid_text, _space, started = f.read().strip().partition(" ")
            pid = int(pid_text)
        except (OSError, ValueError):
            return None
        return pid if pid > 0 and _start_time(pid) == started else None

    def start(self) -> int:
        """Start the process detached, in its own session; return its pid. Its log and pid file are private."""
        for path in (self.pid_file, self.log_file):
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with _private(self.log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, "ab") as log, \
                open(os.devnull, "rb") as null:
            process = subprocess.Popen(self.command, stdin=null, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True, close_fds=True, cwd=self.cwd,
                                       env={**os.environ, **(self.env or {})},
                                       umask=-1 if self.umask is None else self.umask)
        with _private(self.pid_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "w") as f:
            f.write(f"{process.pid} {_start_time(process.pid)}\n")
        return process.pid

    def stop(self, timeout: float = 20.0) -> bool:
        """SIGTERM to the session, then SIGKILL after ``timeout``; True when a process was stopped.

        Returns once no process of the session is left, so that the ports it held are free again.
        """
        pid = self.pid()
        if pid is None:
            return False
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            _signal_session(pid, sig)
            if _gone(pid, wait):
                break
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.pid_file)
        return True

    def log_tail(self, lines: int = 20) -> str:
        try:
            with open(self.log_file, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def owns(self, holder: Holder) -> bool:
        """Whether ``holder`` is the running process or one of its session (its children, theirs...)."""
        pid = self.pid()
        return pid is not None and holder.pid is not None and _session(holder.pid) == pid

    def foreign_holders(self, port: int) -> list[Holder]:
        """The processes other than ours that listen on ``port``."""
        return [holder for holder in port_holders(port) if not self.owns(holder)]

    def port_conflict(self, ports: list[int]) -> str | None:
        """In words, another process listening on one of ``ports``: the port and its pid and command line."""
        for port in ports:
            foreign = ", ".join(map(str, self.foreign_holders(port)))
            if foreign:
                pid = self.pid()
                if pid is None:
                    return f"cannot start {self.command[0]}: port {port} is already in use by {foreign}"
                return f"{self.command[0]} (pid {pid}) does not serve port {port}: {foreign} listens on it"
        return None

    def wait_listening(self, ports: list[int], timeout: float) -> str | None:
        """Wait until the running process listens on every port; None then, else what went wrong.

        Wrong is: another process listens on one of them, the process exited, or ``timeout`` seconds passed.
        """
        deadline = time.monotonic() + timeout
        while True:
            pid = self.pid()
            if pid is None:
                return f"{self.command[0]} exited; the end of {self.log_file}:\n{self.log_tail()}"
            conflict = self.port_conflict(ports)
            if conflict:
                return conflict
            waiting = [str(port) for port in ports if not port_holders(port)]
            if not waiting:
                return None
            if time.monotonic() > deadline:
                return (f"{self.command[0]} (pid {pid}) did not listen on port {', '.join(waiting)} within "
                        f"{timeout:g}s; the end of {self.log_file}:\n{self.log_tail()}")
            time.sleep(0.1)


def port_holders(port: int) -> list[Holder]:
    """The processes listening on TCP ``port`` (any address, IPv4 or IPv6)."""
    inodes = _listening_inodes(port)
    if not inodes:
        return []
    holders = [Holder(pid, _command_line(pid)) for pid in _socket_pids(inodes)]
    return holders or [Holder(None)]


def _listening_inodes(port: int) -> set[str]:
    """Inodes of the listening TCP sockets on ``port``, from /proc/net/tcp and /proc/net/tcp6."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()  # sl local_address rem_address st ... uid timeout inode
            if len(fields) > 9 and fields[3] == _LISTEN and int(fields[1].rpartition(":")[2], 16) == port:
                inodes.add(fields[9])
    return inodes


def _socket_pids(inodes: set[str]) -> list[int]:
    """The pids that hold one of these socket inodes open (among the processes we may read)."""
    links = {f"socket:[{inode}]" for inode in inodes}
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue
        for fd in fds:
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{entry}/fd/{fd}") in links:
                    pids.append(int(entry))
                    break
    return sorted(pids)


def _command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _stat(pid: int) -> list[str] | None:
    """Fields 3 and on of /proc/<pid>/stat (state, ppid, pgrp, session, ...); None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()  # the command name may hold spaces; it ends at the last ')'


def _start_time(pid: int) -> str | None:
    """When the process started, in clock ticks since boot (field 22 of /proc/<pid>/stat); None if it is gone."""
    fields = _stat(pid)
    return None if fields is None or fields[0] == "Z" else fields[19]


def _session(pid: int) -> int | None:
    fields = _stat(pid)
    return None if fields is None else int(fields[3])


def _session_members(session: int) -> list[int]:
    """The live (not zombie) processes of a session."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None and fields[0] != "Z" and int(fields[3]) == session:
                members.append(int(entry))
    return members


@contextlib.contextmanager
def _private(path: str, flags: int, mode: str) -> Iterator[IO[Any]]:
    """``open(path, mode)``, a file created mode 0600 whatever the umask."""
    descriptor = os.open(path, flags, PRIVATE)
    with open(descriptor, mode) as f:
        yield f


def _signal_session(session: int, sig: int) -> None:
    """``sig`` to the process group of the session's leader and to every process of the session."""
    for send, target in ((os.killpg, session), *((os.kill, member) for member in _session_members(session))):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            send(target, sig)


def _gone(session: int, timeout: float) -> bool:
    """Wait until no process of the session is left (reaping its leader when it is our child)."""
    deadline = time.monotonic() + timeout
    while True:
        _reap(session)
        if not _session_members(session):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def _reap(pid: int) -> bool:
    """Collect the process when it is our child; True when it has exited."""
    try:
        done, _status = os.waitpid(pid, os.WNOHANG)
        return done == pid
    except ChildProcessError:
        return False
