"""The provisioning timeline: bars from upstream's operationHistory and state transitions, as SVG and PNG."""
from __future__ import annotations

import datetime
import sys
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.timeline import (
    PHASES,
    PNG_MISSING,
    layout,
    png,
    svg,
    tick_step,
    timeline_rows,
)
from ansible_collections.metal3.baremetal.plugins.modules.table import table_lines
from ansible_collections.metal3.baremetal.plugins.modules.timeline import SPEC
from ansible_collections.metal3.baremetal.plugins.plugin_utils.engine_action import run_spec

SVG = "{http://www.w3.org/2000/svg}"


def t(seconds: int) -> str:
    """A timestamp ``seconds`` after 10:00:00, as upstream writes them."""
    moment = datetime.datetime(2024, 5, 1, 10, tzinfo=datetime.UTC) + datetime.timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def bmh(name: str, state: str, history: dict | None = None, ready: int | None = None, namespace: str = "metal3"):
    status: dict = {"provisioning": {"state": state}}
    if history is not None:
        status["operationHistory"] = history
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True", "reason": state, "lastTransitionTime": t(ready)}]
    return {"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
            "metadata": {"name": name, "namespace": namespace}, "status": status}


def op(start: int | None, end: int | None = None) -> dict:
    return {key: t(value) for key, value in (("start", start), ("end", end)) if value is not None}


FULL = {"register": op(0, 4), "inspect": op(6, 40), "provision": op(90, 200)}

# Each case: a host, the picture's end (seconds), its bars (phase, start, end in seconds), what the warnings say.
CASES = {
    "provisioned, full history": (
        bmh("h", "provisioned", FULL), 230,
        [("registering", 0, 4), ("inspecting", 4, 40), ("available", 40, 90), ("provisioning", 90, 200),
         ("provisioned", 200, 230)], []),
    "available: preparing until it entered available": (
        bmh("h", "available", {"register": op(0, 4), "inspect": op(4, 40)}, ready=52), 100,
        [("registering", 0, 4), ("inspecting", 4, 40), ("preparing", 40, 52), ("available", 52, 100)], []),
    "inspection disabled: available right after registering": (
        bmh("h", "available", {"register": op(0, 4)}, ready=5), 10,
        [("registering", 0, 4), ("preparing", 4, 5), ("available", 5, 10)], []),
    "still provisioning: the bar runs to the picture's end": (
        bmh("h", "provisioning", {"register": op(0, 4), "inspect": op(4, 40), "provision": op(60)}), 100,
        [("registering", 0, 4), ("inspecting", 4, 40), ("available", 40, 60), ("provisioning", 60, 100)], []),
    "deprovisioned and available again": (
        bmh("h", "available", {**FULL, "deprovision": op(300, 330)}, ready=331), 400,
        [("registering", 0, 4), ("inspecting", 4, 40), ("available", 40, 90), ("provisioning", 90, 200),
         ("provisioned", 200, 300), ("deprovisioning", 300, 330), ("available", 330, 400)], []),
    "being deleted": (
        bmh("h", "powering off before delete", {**FULL, "deprovision": op(300, 330)}), 340,
        [("registering", 0, 4), ("inspecting", 4, 40), ("available", 40, 90), ("provisioning", 90, 200),
         ("provisioned", 200, 300), ("deprovisioning", 300, 330), ("deleting", 330, 340)], []),
    "never provisioned: no history at all": (bmh("h", "", None), 50, [], []),
    "registering only": (bmh("h", "registering", {"register": op(10)}), 50, [("registering", 10, 50)], []),
    "out of order: the bar is left out, with a warning": (
        bmh("h", "provisioned", {"register": op(0, 4), "inspect": op(40, 6), "provision": op(90, 200)}), 200,
        [("registering", 0, 4), ("available", 4, 90), ("provisioning", 90, 200)],
        ["metal3/h: operationHistory.inspect ends (2024-05-01T10:00:06Z) before it starts (2024-05-01T10:00:40Z)"
         ": skipped"]),
    "an unreadable timestamp": (
        bmh("h", "provisioned", {"register": {"start": "yesterday", "end": t(4)}, "provision": op(90, 200)}), 200,
        [("provisioning", 90, 200)], ["metal3/h: operationHistory.register: Invalid isoformat string: 'yesterday'"
                                      ": skipped"]),
    "an end without a start": (
        bmh("h", "provisioned", {"register": {"end": t(4)}, "provision": op(90, 200)}), 200,
        [("provisioning", 90, 200)], ["metal3/h: operationHistory.register has an end but no start: skipped"]),
    "an operation left unfinished while the host moved on": (
        bmh("h", "available", {"register": op(0, 4), "inspect": op(5)}, ready=9), 20,
        [("registering", 0, 4), ("preparing", 4, 9), ("available", 9, 20)],
        ["metal3/h: operationHistory.inspect has no end and the host is available: skipped"]),
}


@pytest.mark.parametrize("case", CASES)
def test_a_hosts_bars(case):
    host, end, bars, warnings = CASES[case]
    rows, said = timeline_rows([host], now=datetime.datetime.fromisoformat(t(end)))
    got = [(b.phase, b.start, b.end) for b in rows[0].bars]
    want = [(phase, datetime.datetime.fromisoformat(t(a)), datetime.datetime.fromisoformat(t(b)))
            for phase, a, b in bars]
    assert got == want
    assert said == warnings
    # Whatever the history, the bars of a row run forward and never overlap.
    assert all(a.end <= b.start for a, b in zip(rows[0].bars, rows[0].bars[1:], strict=False))
    assert all(b.start <= b.end for b in rows[0].bars)


def hosts_of_a_demo() -> list[dict]:
    # host-4 was the last to be provisioned: the picture ends there, with no provisioned time after it.
    hosts = [bmh(f"host-{i}", "provisioned",
                 {"register": op(i, i + 4), "inspect": op(i + 4, i + 40), "provision": op(90 + 5 * i, 200 + 5 * i)})
             for i in range(5)]
    hosts.append(bmh("host-5", "available", {"register": op(2, 6), "inspect": op(6, 41)}, ready=45))
    hosts.append(bmh("spare", "", None, namespace="other"))
    return hosts


def test_the_picture_ends_at_the_latest_time_recorded_so_the_same_hosts_make_the_same_file():
    rows, _warnings = timeline_rows(hosts_of_a_demo())
    assert max(b.end for r in rows for b in r.bars) == datetime.datetime.fromisoformat(t(220))
    assert svg(layout(timeline_rows(hosts_of_a_demo())[0])) == svg(layout(rows))


def test_the_svg_parses_with_one_group_of_bars_per_host_a_legend_and_a_time_axis():
    rows, _warnings = timeline_rows(hosts_of_a_demo())
    root = ET.fromstring(svg(layout(rows, "Demo <&> timeline")))
    assert root.tag == f"{SVG}svg"
    groups = [g for g in root.iter(f"{SVG}g") if g.get("class") == "host"]
    assert [g.get("data-host") for g in groups] == [f"metal3/host-{i}" for i in range(6)] + ["other/spare"]
    bars = {g.get("data-host"): [r for r in g.findall(f"{SVG}rect") if r.find(f"{SVG}title") is not None]
            for g in groups}
    assert [len(bars[f"metal3/host-{i}"]) for i in range(6)] == [5, 5, 5, 5, 4, 4] and bars["other/spare"] == []
    assert "nothing recorded (none)" in [x.text for x in groups[-1].iter(f"{SVG}text")]
    texts = [x.text for x in root.iter(f"{SVG}text")]
    assert "Demo <&> timeline" in texts  # escaped in the file, the same text once parsed
    assert all(phase in texts for phase, _colour in PHASES)  # the legend
    assert len({colour for _phase, colour in PHASES}) == len(PHASES)
    assert {"0s", "1m", "2m", "3m"} <= set(texts)  # ticks of the axis: 220 s in steps of 30 s
    assert tick_step(220) == 30


TICKS = [(1, 1), (9, 1), (11, 2), (100, 10), (220, 30), (1200, 120), (1800, 300), (4 * 3600, 1800), (10 ** 7, 86400)]


@pytest.mark.parametrize(("span", "step"), TICKS)
def test_ticks_are_a_usual_step_and_at_most_ten(span, step):
    assert tick_step(span) == step


def test_the_png_is_the_same_picture_drawn_by_pillow():
    pytest.importorskip("PIL")
    placed = layout(timeline_rows(hosts_of_a_demo())[0])
    image = png(placed)
    assert image.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = int.from_bytes(image[16:20], "big"), int.from_bytes(image[20:24], "big")
    assert (width, height) == (int(placed.width * 2), int(placed.height * 2))
    assert png(placed) == image  # the same file each time


def test_without_pillow_the_png_says_what_it_needs(monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(Invalid, match="needs Pillow"):
        png(layout([]))
    assert "pip install pillow" in PNG_MISSING


def test_the_module_writes_once_then_changes_nothing_and_check_mode_writes_nothing(tmp_path, monkeypatch):
    from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

    with LocalStore(str(tmp_path / "store.db")) as store:
        for h in hosts_of_a_demo()[:6]:
            status = h.pop("status")
            created = store.create({**h, "spec": {"online": False}})
            store.update_status({**created, "status": status})
    args = {"path": str(tmp_path / "pic" / "t.svg"), "namespace": "metal3", "store_path": str(tmp_path / "store.db")}
    checked = run_spec(SPEC, args, True)
    assert checked["changed"] is True and not (tmp_path / "pic").exists()
    first = run_spec(SPEC, args, False)
    assert first["changed"] is True and len(first["hosts"]) == 6, first
    assert first["diff"]["before"] == "" and first["diff"]["after"] == (tmp_path / "pic" / "t.svg").read_text()
    assert run_spec(SPEC, args, False)["changed"] is False
    monkeypatch.setitem(sys.modules, "PIL", None)
    failed = run_spec(SPEC, {**args, "png": str(tmp_path / "t.png")}, False)
    assert failed["failed"] and "needs Pillow" in failed["msg"] and not (tmp_path / "t.png").exists()


@pytest.mark.parametrize(("columns", "rows", "title", "lines"), [
    (["A", "BB"], [["x", "long value"], ["longer", None]], None, ["A       BB", "x       long value", "longer  -"]),
    (["NAME", "STATE"], [["h"]], "Hosts:", ["Hosts:", "NAME  STATE", "h     -"]),
    (["ONE"], [], None, ["ONE"]),
])
def test_a_table_is_aligned_columns_without_trailing_blanks(columns, rows, title, lines):
    assert table_lines(columns, rows, title) == lines


def test_a_row_longer_than_the_header_is_refused():
    with pytest.raises(Invalid, match=r"rows\[0\]: 3 cells for 2 columns"):
        table_lines(["A", "B"], [[1, 2, 3]])
