"""Progress you can watch: the lines a wait prints as hosts and machines change state, and the one wait loop."""
from __future__ import annotations

import threading

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core import progress
from ansible_collections.metal3.baremetal.plugins.module_utils.core.progress import (
    Progress,
    format_elapsed,
    format_line,
    report,
    watching,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.waiting import wait_until
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import baremetalhost as bmh
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.timeline import timeline_rows
from tests.unit.module_utils.hosts.test_baremetalhost import ScriptedIronic, host, reconcile


class Clock:
    def __init__(self, now: float = 100.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (0.9, "0s"), (7, "7s"), (59.99, "59s"), (60, "1m00s"), (72, "1m12s"), (600, "10m00s"),
    (3599, "59m59s"), (3600, "1h00m00s"), (3725, "1h02m05s"), (90061, "25h01m01s"), (-3, "0s"),
])
def test_elapsed_time_as_a_line_shows_it(seconds, text):
    assert format_elapsed(seconds) == text


@pytest.mark.parametrize(("before", "after", "line"), [
    ("inspecting", "available", "metal3/host-0: inspecting -> available (1m12s)"),
    ("", "registering", "metal3/host-0: none -> registering (1m12s)"),
    ("provisioned", "", "metal3/host-0: provisioned -> none (1m12s)"),
    (None, "provisioning", "metal3/host-0: provisioning (1m12s)"),  # no state known before
])
def test_a_line_names_the_object_its_states_and_the_time_since_the_task_started(before, after, line):
    assert format_line("metal3/host-0", before, after, 72) == line


# Each case: observations (kind, label, state, before, changed, seconds since the start) and the lines printed.
CASES = {
    "a change is told once, not once a poll": (
        [("H", "ns/a", "inspecting", "registering", True, 1), ("H", "ns/a", "inspecting", "inspecting", False, 2),
         ("H", "ns/a", "inspecting", "inspecting", False, 3), ("H", "ns/a", "available", "inspecting", True, 72)],
        ["ns/a: registering -> inspecting (1s)", "ns/a: inspecting -> available (1m12s)"]),
    "nothing changes: nothing is printed": (
        [("H", "ns/a", "provisioned", "provisioned", False, 0), ("H", "ns/a", "provisioned", "provisioned", False, 9)],
        []),
    "the state seen last counts, not the step's own before": (
        [("H", "ns/a", "inspecting", "", True, 0), ("H", "ns/a", "available", "preparing", True, 5)],
        ["ns/a: none -> inspecting (0s)", "ns/a: inspecting -> available (5s)"]),
    "unknown before: silent unless the step changed something": (
        [("M", "ns/m", "provisioning", None, False, 0), ("M", "ns/n", "associating", None, True, 1),
         ("M", "ns/m", "provisioned", None, True, 61)],
        ["ns/n: associating (1s)", "ns/m: provisioning -> provisioned (1m01s)"]),
    "a host and a machine of one name are two objects": (
        [("H", "ns/x", "provisioning", "available", True, 0), ("M", "ns/x", "provisioning", None, False, 0),
         ("M", "ns/x", "provisioned", None, True, 3)],
        ["ns/x: available -> provisioning (0s)", "ns/x: provisioning -> provisioned (3s)"]),
    "gone": (
        [("H", "ns/a", "deprovisioning", "provisioned", True, 0), ("H", "ns/a", "deleted", "deleting", True, 20)],
        ["ns/a: provisioned -> deprovisioning (0s)", "ns/a: deprovisioning -> deleted (20s)"]),
}


@pytest.mark.parametrize("case", CASES)
def test_progress_prints_a_line_only_when_a_state_changes(case):
    observations, expected = CASES[case]
    clock, lines = Clock(), []
    watched = Progress(lines.append, clock)
    for kind, label, state, before, changed, seconds in observations:
        clock.now = 100.0 + seconds
        watched.observe(kind, label, state, before, changed)
    assert lines == expected


def test_report_reaches_the_watcher_of_the_block_only():
    lines: list[str] = []
    report("H", "ns/a", "available", "inspecting")  # nobody watches: nothing, no error
    with watching(Progress(lines.append)):
        report("H", "ns/a", "available", "inspecting")
        inner: list[str] = []
        with watching(Progress(inner.append)):
            report("H", "ns/b", "provisioned", "provisioning")
        report("H", "ns/c", "provisioned", "provisioning")
    report("H", "ns/d", "provisioned", "provisioning")
    assert [line.split(" (")[0] for line in lines] == ["ns/a: inspecting -> available",
                                                       "ns/c: provisioning -> provisioned"]
    assert [line.split(" (")[0] for line in inner] == ["ns/b: provisioning -> provisioned"]
    assert progress._watching is None


def test_a_line_that_cannot_be_printed_does_not_fail_the_wait():
    def broken(line: str) -> None:
        raise OSError("stdout closed")

    with watching(Progress(broken)):
        report("H", "ns/a", "available", "inspecting")  # no exception


def test_threads_reporting_at_once_tell_each_change_once():
    lines: list[str] = []
    watched = Progress(lines.append)
    states = ["registering", "inspecting", "preparing", "available"]

    def worker(host: int) -> None:
        for _repeat in range(50):
            for before, after in zip(states, states[1:], strict=False):
                watched.observe("H", f"ns/h{host}", after, before, True)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Each host: three changes on the first pass, then available -> inspecting -> ... again on each repeat.
    assert sorted({line.split(" (")[0] for line in lines}) == sorted(
        f"ns/h{i}: {a} -> {b}" for i in range(8)
        for a, b in [("registering", "inspecting"), ("inspecting", "preparing"), ("preparing", "available"),
                     ("available", "inspecting")])
    assert len(lines) == 8 * (3 + 49 * 3)


def test_a_host_driven_through_its_states_reports_each_change_and_its_history_makes_a_timeline(tmp_path):
    from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

    lines: list[str] = []
    with LocalStore(str(tmp_path / "store.db")) as store, watching(Progress(lines.append)):
        ironic = ScriptedIronic()
        ref = host(store, image={"url": "http://i/os.img"})
        states = []
        for _step in range(30):
            step = reconcile(store, ironic, ref)
            bmh.report_host(ref, step)
            states.append(step.state)
            if step.state == "provisioned" and step.requeue_after is None:
                break
        again = reconcile(store, ironic, ref)  # at rest: no line
        bmh.report_host(ref, again)
        final = store.get(ref)
    changes = [line.split(" (")[0] for line in lines]
    assert changes[0].startswith("ns/h: none -> ")
    assert changes[-1].endswith(" -> provisioned")
    assert len(changes) == len(set(changes)) and all("->" in c for c in changes)
    # The history the steps recorded draws as bars in the order the host went.
    rows, warnings = timeline_rows([final])
    assert warnings == []
    phases = [b.phase for b in rows[0].bars]
    assert phases[0] == "registering" and "provisioning" in phases and phases.index("inspecting") < phases.index(
        "provisioning")


# -- the one wait loop -------------------------------------------------------------------------------------------

def script(*results):
    it = iter(results)
    return lambda: next(it)


@pytest.mark.parametrize(("results", "timeout", "expected", "pauses"), [
    ([None, None, True], 10, (3, True), [0.5, 0.5]),  # reached after two pauses
    ([None, False], 10, (2, False), [0.5]),  # given up
    ([True], 0, (1, True), []),  # reached at once, even with no time
    ([None, None, None], 0, (1, False), []),  # no time to wait
])
def test_wait_until_steps_until_reached_given_up_or_out_of_time(results, timeout, expected, pauses):
    steps = [(index + 1, verdict) for index, verdict in enumerate(results)]
    slept: list[float] = []
    result = wait_until(script(*steps), lambda r: r[1], timeout, sleep=slept.append)
    assert (result[0][0], result[1]) == expected and slept == pauses


def test_wait_until_pauses_as_the_step_asks_but_never_past_the_deadline():
    slept: list[float] = []
    wait_until(script(5.0, 0.25, 1.0), lambda r: True if r == 1.0 else None, 2, pause=lambda r: r,
               sleep=slept.append)
    assert slept[0] <= 2 and slept[1] == 0.25
