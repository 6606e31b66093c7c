"""Cluster API's scenario under either operator, side by side: the test
tests/operator/test_cluster_api_under_ansible_operator.py (Cluster API's core and kubeadm bootstrap managers, a
v1beta2 Cluster of a control plane Machine and a MachineDeployment of two workers, scaled down, remediated,
deleted) run under the real Ansible Operator and under the collection's operator, each ``--runs`` times, one run
at a time. The figure is pytest's duration of the test's call (the scenario, not the managers' start), the
fastest and the slowest run of each. make test runs the Ansible Operator's side only.

    .venv/bin/python benchmarks/operator/under_cluster_api.py             # figures into docs/benchmarks.md
    .venv/bin/python benchmarks/operator/under_cluster_api.py --print     # printed only
"""
from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO)]

from benchmarks.report import machine, write_section  # noqa: E402

TEST = "tests/operator/test_cluster_api_under_ansible_operator.py"
SIDES = {"ansible-operator": "the Ansible Operator (shipped watches.yaml)",
         "metal3_operator": "the collection's operator"}


def call_durations(runs: int) -> dict[str, list[float]]:
    """Each side's call durations over ``runs`` pytest runs of the test (both sides in each run)."""
    env = {**os.environ, "METAL3_COMPARE_OPERATORS": "1", "PYTHONPATH": str(REPO / "operator"),
           "ANSIBLE_COLLECTIONS_PATH": str(REPO / "build" / "collections"),
           "PATH": f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    durations: dict[str, list[float]] = {side: [] for side in SIDES}
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(runs):
            report = Path(tmp) / f"run{run}.xml"
            subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o",
                            "junit_duration_report=call", f"--junitxml={report}", TEST], cwd=REPO, env=env,
                           check=True)
            for case in ET.parse(report).getroot().iter("testcase"):
                side = case.get("name", "").rsplit("[", 1)[-1].rstrip("]")
                durations[side].append(float(case.get("time", "0")))
    return durations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--print", action="store_true", help="print the figures, leave docs/benchmarks.md alone")
    args = parser.parse_args()
    durations = call_durations(args.runs)
    lines = ["## Cluster API's scenario under either operator (`benchmarks/operator/under_cluster_api.py`)", "",
             f"Machine: {machine()}. Run: {datetime.date.today()}, "
             f"`.venv/bin/python benchmarks/operator/under_cluster_api.py --runs {args.runs}`.", "",
             "| operator | runs | fastest call | slowest call |", "|---|---|---|---|"]
    lines += [f"| {SIDES[side]} | {len(times)} | {min(times):.0f} s | {max(times):.0f} s |"
              for side, times in durations.items() if times]
    if args.print:
        print("\n".join(lines))
    else:
        write_section("under-cluster-api", lines)


if __name__ == "__main__":
    main()
