"""A supervised background process: started once, known by its pid and start time, stopped cleanly."""
from __future__ import annotations

import sys
from pathlib import Path

from ansible_collections.metal3.baremetal.plugins.module_utils.daemon import Daemon


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
