"""A supervised background process: started once, known by its pid and start time, stopped cleanly."""
from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.daemon import Daemon, port_holders


def test_start_find_and_stop_a_process_that_retitles_itself(tmp_path: Path):
    # The child rewrites its own command line, as Ironic does; it must still be recognised.
    script = "import ctypes, time; open('/proc/self/comm', 'w').write('renamed'); time.sleep(60)"
    daemon = Daemon([sys.executable, "-c", script], str(tmp_path / "run" / "d.pid"), str(tmp_path / "d.log"))
    assert daemon.pid() is None
    pid = daemon.start()
    assert daemon.pid() == pid
    assert daemon.stop()
    assert daemon.pid() is None
    assert not (tmp_path / "run" / "d.pid").exists()
    assert not daemon.stop()


def test_a_recycled_pid_is_not_taken_for_the_process(tmp_path: Path):
    pid_file = tmp_path / "d.pid"
    pid_file.write_text("1 12345\n")  # pid 1 runs, but did not start at that time
    assert Daemon(["x"], str(pid_file), str(tmp_path / "d.log")).pid() is None


# -- ports: who listens on them, and whether that is ours ------------------------------------------------------
LISTEN = ("import socket, sys, time; s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen();"
          " print('listening', flush=True); time.sleep(60)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def listener() -> Iterator[tuple[int, subprocess.Popen]]:
    """A plain process listening on a port: someone else's server."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-c", LISTEN, str(port)], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "listening\n"
    yield port, process
    process.kill()
    process.wait()


def test_the_holder_of_a_port_is_named_by_pid_and_command_line(listener, tmp_path: Path):
    port, process = listener
    [holder] = port_holders(port)
    assert holder.pid == process.pid
    assert holder.command.startswith(f"{sys.executable} -c import socket")
    daemon = Daemon(["ironic"], str(tmp_path / "d.pid"), str(tmp_path / "d.log"))
    assert daemon.port_conflict([free_port(), port]) == (f"cannot start ironic: port {port} is already in use by "
                                                         f"pid {process.pid} ({holder.command})")
    assert daemon.port_conflict([free_port()]) is None


def test_a_port_nobody_listens_on_has_no_holder():
    with socket.socket() as s:  # bound, not listening: a client's port
        s.bind(("127.0.0.1", 0))
        assert port_holders(s.getsockname()[1]) == []


def test_a_port_held_by_the_daemon_or_its_child_is_its_own(tmp_path: Path):
    port = free_port()
    # The parent forks; the child listens, as a server's worker would.
    script = f"import os, time\nif os.fork() == 0:\n    exec({LISTEN!r})\ntime.sleep(60)"
    daemon = Daemon([sys.executable, "-c", script, str(port)], str(tmp_path / "d.pid"), str(tmp_path / "d.log"))
    pid = daemon.start()
    try:
        assert daemon.wait_listening([port], timeout=30) is None
        [holder] = port_holders(port)
        assert holder.pid != pid and daemon.owns(holder)
        assert daemon.foreign_holders(port) == []
    finally:
        daemon.stop()
    assert port_holders(port) == []  # stop() returns once the child is gone as well


def test_a_daemon_that_cannot_have_its_port_names_the_process_that_has_it(tmp_path: Path, listener):
    port, process = listener
    # It does not exit when the port is taken: it waits, as a server retrying its bind would.
    daemon = Daemon([sys.executable, "-c", "import time; time.sleep(60)"], str(tmp_path / "d.pid"),
                    str(tmp_path / "d.log"))
    assert daemon.foreign_holders(port) == port_holders(port)
    daemon.start()
    try:
        problem = daemon.wait_listening([port], timeout=30)
    finally:
        daemon.stop()
    assert problem is not None
    assert f"does not serve port {port}: pid {process.pid} (" in problem


def test_a_daemon_that_exits_instead_of_listening_is_reported_with_its_log(tmp_path: Path):
    daemon = Daemon([sys.executable, "-c", "print('no such option'); raise SystemExit(2)"], str(tmp_path / "d.pid"),
                    str(tmp_path / "d.log"))
    daemon.start()
    problem = daemon.wait_listening([free_port()], timeout=30)
    assert problem is not None and "exited" in problem and "no such option" in problem


def test_the_log_and_the_pid_file_are_private_and_the_umask_is_the_processes(tmp_path: Path):
    script = "open('created', 'w').close(); import time; time.sleep(60)"
    daemon = Daemon([sys.executable, "-c", script], str(tmp_path / "d.pid"), str(tmp_path / "log" / "d.log"),
                    cwd=str(tmp_path), umask=0o077)
    old = os.umask(0o022)
    try:
        daemon.start()
    finally:
        os.umask(old)
    try:
        created = tmp_path / "created"
        for _attempt in range(300):
            if created.exists():
                break
            time.sleep(0.1)
        assert stat.S_IMODE(created.stat().st_mode) == 0o600
    finally:
        daemon.stop()
    assert stat.S_IMODE((tmp_path / "log" / "d.log").stat().st_mode) == 0o600
