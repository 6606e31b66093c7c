"""make test's scheduling (``pytest -n 2 --dist loadgroup``): the tests of one xdist group run on one worker, as
tests/conftest.py arranges, whatever pytest's node ids look like (pytest-dev/pytest-xdist#1386)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GROUPED = '''
import os
import pytest

pytestmark = pytest.mark.xdist_group("{group}")


@pytest.mark.parametrize("n", range(3))
def test_grouped(n):
    with open(os.environ["SEEN"], "a") as seen:
        seen.write(f"{{__name__}} {{os.environ['PYTEST_XDIST_WORKER']}}\\n")
'''
LAB = '''
import os
import pytest


@pytest.mark.virtual_lab
def test_lab():
    with open(os.environ["SEEN"], "a") as seen:
        seen.write(f"{__name__} {os.environ['PYTEST_XDIST_WORKER']}\\n")
'''


def test_the_tests_of_each_group_and_the_labs_run_each_on_one_worker(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    # The project's collection hook, alone: the rest of tests/conftest.py (its fixtures and plugins) is not needed.
    (suite / "conftest.py").write_text("import pytest\n\n"
                                       "from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n\n\n"
                                       "def pytest_configure(config):\n"
                                       "    config.addinivalue_line('markers', 'virtual_lab: the lab')\n")
    for name, group in (("test_a", "one"), ("test_b", "one"), ("test_c", "two")):
        (suite / f"{name}.py").write_text(GROUPED.format(group=group))
    for name in ("test_lab_x", "test_lab_y"):
        (suite / f"{name}.py").write_text(LAB)
    path = os.pathsep.join(p for p in sys.path if p)  # pyproject.toml's pythonpath too (the engine, the operator)
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q", "-p",
                           "no:cacheprovider", "--basetemp", str(tmp_path / "run"), "--rootdir", str(suite),
                           str(suite)], capture_output=True, text=True, timeout=300, cwd=suite, check=False,
                          env={**os.environ, "PYTHONPATH": path, "SEEN": str(tmp_path / "seen")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen: dict[str, set[str]] = {}
    for line in (tmp_path / "seen").read_text().splitlines():
        module, worker = line.split()
        seen.setdefault(module, set()).add(worker)
    assert all(len(workers) == 1 for workers in seen.values()), seen
    assert seen["test_a"] == seen["test_b"]  # group "one", across two modules
    assert seen["test_lab_x"] == seen["test_lab_y"]  # the lab's group
