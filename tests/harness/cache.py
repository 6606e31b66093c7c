"""What a hack/ script builds once per machine and caches outside git (kube binaries, Cluster API's managers, the
Ansible Operator): the script builds on a cold machine and prints the cached path at once on a warm one."""
from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def cached(script: str, error: type[Exception] = RuntimeError) -> Path:
    """The path ``hack/<script>`` prints last, after building what it caches if need be; ``error`` when it fails,
    with the end of its log."""
    built = subprocess.run(["bash", str(REPO / "hack" / script)], capture_output=True, text=True, check=False)
    if built.returncode != 0:
        raise error(f"hack/{script} failed:\n{built.stderr[-3000:]}")
    return Path(built.stdout.strip().splitlines()[-1])
