# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""A supervised background process where systemd does not run: a pid file, a log file, a clean stop.

Used by the ironic and redfish_emulator roles. The pid file holds the pid and the process's start time, so a
recycled pid is never taken for ours (and the command line cannot tell: Ironic retitles its process).
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Daemon:
    command: list[str]
    pid_file: str
    log_file: str
    env: dict[str, str] | None = None
    cwd: str | None = None

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
        """Start the process detached, in its own session; return its pid."""
        for path in (self.pid_file, self.log_file):
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(self.log_file, "ab") as log, open(os.devnull, "rb") as null:
            process = subprocess.Popen(self.command, stdin=null, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True, close_fds=True, cwd=self.cwd,
                                       env={**os.environ, **(self.env or {})})
        with open(self.pid_file, "w", encoding="ascii") as f:
            f.write(f"{process.pid} {_start_time(process.pid)}\n")
        return process.pid

    def stop(self, timeout: float = 20.0) -> bool:
        """SIGTERM, then SIGKILL after ``timeout``; True when a process was stopped."""
        pid = self.pid()
        if pid is None:
            return False
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.pid() is not None:
            if _reap(pid):
                break
            time.sleep(0.1)
        if self.pid() is not None:
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.pid_file)
        return True

    def log_tail(self, lines: int = 20) -> str:
        try:
            with open(self.log_file, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""


def _start_time(pid: int) -> str | None:
    """When the process started, in clock ticks since boot (field 22 of /proc/<pid>/stat); None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # the command name may hold spaces; it ends at the last ')'
    state, start = fields[0], fields[19]
    return None if state == "Z" else start


def _reap(pid: int) -> bool:
    """Collect the process when it is our child; True when it has exited."""
    try:
        done, _status = os.waitpid(pid, os.WNOHANG)
        return done == pid
    except ChildProcessError:
        return False
