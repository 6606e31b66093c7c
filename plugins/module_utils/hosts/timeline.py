# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""A picture of the provisioning: each host's phases as horizontal bars over time, as SVG (and PNG).

The bars come from what a BareMetalHost records, upstream's fields only:

- ``status.operationHistory``: ``register``, ``inspect``, ``provision`` and ``deprovision``, each with the
  ``start`` and ``end`` of its last run - the registering, inspecting, provisioning and deprovisioning bars
  (an operation without an end lasts until the picture's end while the host is still in that state);
- between two operations the host waited in a state: ``inspecting`` from its registration to its inspection,
  ``available`` before a provisioning (or a new inspection), ``provisioned`` before a deprovisioning;
- after the last one, the host's current state, from the moment it entered it (the ``Ready`` condition's
  ``lastTransitionTime``, whose reason is the state): so a host that is now available shows ``preparing``
  from the end of its inspection to that moment, then ``available``. Upstream's history has no preparation
  entry: once a host has gone on to be provisioned, its preparing and available time show as ``available``.

Timestamps that cannot be read, or an end before its start, skip that bar with a warning; they never fail the
picture. The picture ends at ``now``: by default the latest time any host records, so the same hosts always
make the same picture (a second run of a playbook writing it changes nothing).

``layout`` places everything once (rectangles, lines, texts, one group per host); ``svg`` writes that layout
as SVG text with the standard library only, and ``png`` draws the same layout with Pillow, an optional
dependency (``PNG_MISSING`` says why not when it is not installed).
"""
from __future__ import annotations

import datetime
import io
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union, cast
from xml.sax.saxutils import escape, quoteattr

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, parse_time, rfc3339
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import host_state

if TYPE_CHECKING:
    from ansible_collections.metal3.baremetal.plugins.module_utils.api.types import BareMetalHost

# Phases, in the order a host goes through them, and their colours (the legend's order).
PHASES: tuple[tuple[str, str], ...] = (
    ("registering", "#7e57c2"),
    ("inspecting", "#1e88e5"),
    ("preparing", "#fb8c00"),
    ("available", "#b0bec5"),
    ("provisioning", "#43a047"),
    ("provisioned", "#a5d6a7"),
    ("deprovisioning", "#e53935"),
    ("deleting", "#6d4c41"),
)
COLOURS = dict(PHASES)
# operationHistory's operations and the phase each one is.
OPERATIONS = (("register", "registering"), ("inspect", "inspecting"), ("provision", "provisioning"),
              ("deprovision", "deprovisioning"))
# What a host's current state (status.provisioning.state) shows as, after its last operation.
STATE_PHASES = {"registering": "registering", "inspecting": "inspecting", "match profile": "preparing",
                "preparing": "preparing", "available": "available", "ready": "available",
                "provisioning": "provisioning", "provisioned": "provisioned",
                "externally provisioned": "provisioned", "deprovisioning": "deprovisioning",
                "powering off before delete": "deleting", "deleting": "deleting"}
# The state a host is in between an operation's end and the next one's start, by the next operation (and,
# for an inspection, the one before: registering goes on to inspecting at once).
REST_BEFORE = {"inspect": "available", "provision": "available", "deprovision": "provisioned"}
REST_BETWEEN = {("register", "inspect"): "inspecting"}

PNG_MISSING = "writing a PNG needs Pillow (pip install pillow); the SVG needs nothing"


@dataclass(frozen=True)
class Bar:
    phase: str
    start: datetime.datetime
    end: datetime.datetime

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


@dataclass
class HostRow:
    """One host's line of the picture."""

    label: str  # <namespace>/<name>
    state: str  # its provisioning state now
    bars: list[Bar] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        namespace, _slash, name = self.label.partition("/")
        return {"name": name, "namespace": namespace, "state": self.state,
                "phases": [{"phase": b.phase, "start": rfc3339(b.start), "end": rfc3339(b.end),
                            "seconds": int(b.seconds)} for b in self.bars]}


def _label(host: Object) -> str:
    metadata = host.get("metadata") or {}
    return f"{metadata.get('namespace') or 'default'}/{metadata.get('name') or '?'}"


def _entered(host: Object, state: str, warnings: list[str]) -> datetime.datetime | None:
    """When the host entered its current ``state``: the Ready condition's last transition, whose reason it is."""
    for condition in (cast("BareMetalHost", host).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("reason") == state:
            try:
                return parse_time(condition.get("lastTransitionTime"))
            except ValueError:
                warnings.append(f"{_label(host)}: condition Ready: unreadable lastTransitionTime "
                                f"{condition.get('lastTransitionTime')!r}: ignored")
    return None


def latest_time(hosts: list[Object]) -> datetime.datetime | None:
    """The latest moment any of ``hosts`` records (operation edges, condition transitions): the picture's end."""
    moments: list[datetime.datetime] = []
    for host in hosts:
        status = cast("BareMetalHost", host).get("status") or {}
        values = [edge for entry in (status.get("operationHistory") or {}).values() if isinstance(entry, dict)
                  for edge in (entry.get("start"), entry.get("end"))]
        values += [c.get("lastTransitionTime") for c in status.get("conditions") or []]
        for value in values:
            try:
                moments.append(parse_time(value))
            except ValueError:
                continue
    return max(moments) if moments else None


def host_bars(host: Object, now: datetime.datetime, warnings: list[str]) -> HostRow:
    """The bars of one host, in time order and not overlapping; what could not be read goes to ``warnings``."""
    label, state = _label(host), host_state(host)
    history = (host.get("status") or {}).get("operationHistory") or {}
    operations: list[tuple[str, str, datetime.datetime, datetime.datetime | None]] = []
    for operation, phase in OPERATIONS:
        entry = history.get(operation) or {}
        if not entry.get("start"):
            if entry.get("end"):
                warnings.append(f"{label}: operationHistory.{operation} has an end but no start: skipped")
            continue
        try:
            start = parse_time(entry["start"])
            end = parse_time(entry["end"]) if entry.get("end") else None
        except ValueError as e:
            warnings.append(f"{label}: operationHistory.{operation}: {e}: skipped")
            continue
        if end is not None and end < start:
            warnings.append(f"{label}: operationHistory.{operation} ends ({entry['end']}) before it starts "
                            f"({entry['start']}): skipped")
            continue
        operations.append((operation, phase, start, end))
    operations.sort(key=lambda o: o[2])

    bars: list[Bar] = []
    cursor: datetime.datetime | None = None  # where the last bar ended
    previous = ""  # the operation before
    for index, (operation, op_phase, start, end) in enumerate(operations):
        following = operations[index + 1][2] if index + 1 < len(operations) else None
        if end is None and following is None and STATE_PHASES.get(state) != op_phase:
            warnings.append(f"{label}: operationHistory.{operation} has no end and the host is {state or 'none'}"
                            ": skipped")
            continue
        rest = REST_BETWEEN.get((previous, operation), REST_BEFORE.get(operation))
        if cursor is not None and start > cursor and rest:
            bars.append(Bar(rest, cursor, start))
        begin = max(start, cursor) if cursor is not None else start
        if end is None:  # still under way while the host is in that phase; else until the next one starts
            end = following or max(now, begin)
        bars.append(Bar(op_phase, begin, max(end, begin)))
        cursor, previous = max(end, begin), operation
    # After the last operation: the current state, from when the host entered it.
    current = STATE_PHASES.get(state)
    if cursor is not None and current and bars[-1].phase != current and now > cursor:
        entered = _entered(host, state, warnings)
        if entered is not None and cursor < entered < now and previous in ("register", "inspect"):
            bars.append(Bar("preparing", cursor, entered))
            cursor = entered
        bars.append(Bar(current, cursor, now))
    return HostRow(label, state, _merged(bars))


def _merged(bars: list[Bar]) -> list[Bar]:
    """Bars of one phase that touch made one (the wait before an inspection and the inspection itself)."""
    merged: list[Bar] = []
    for segment in bars:
        if merged and merged[-1].phase == segment.phase and merged[-1].end >= segment.start:
            merged[-1] = Bar(segment.phase, merged[-1].start, max(merged[-1].end, segment.end))
        else:
            merged.append(segment)
    return merged


def timeline_rows(hosts: list[Object], now: datetime.datetime | None = None) -> tuple[list[HostRow], list[str]]:
    """One row per host (sorted by namespace and name), and warnings for the bars skipped."""
    warnings: list[str] = []
    end = now or latest_time(hosts) or datetime.datetime.now(datetime.UTC)
    rows = [host_bars(h, end, warnings) for h in sorted(hosts, key=_label)]
    return rows, warnings


# -- layout: where everything goes, once, for both renderers ---------------------------------------------------

@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    width: float
    height: float
    fill: str
    title: str = ""
    stroke: str = ""


@dataclass(frozen=True)
class Line:
    x1: float
    y1: float
    x2: float
    y2: float
    stroke: str
    width: float = 1.0


@dataclass(frozen=True)
class Text:
    x: float
    y: float  # the vertical middle of the text
    text: str
    size: float = 12.0
    anchor: str = "start"  # start, middle, end
    fill: str = "#263238"
    bold: bool = False


Shape = Union[Rect, Line, Text]  # noqa: UP007 - a runtime alias: pylint's targets read no X | Y there


@dataclass
class Layout:
    width: float
    height: float
    shapes: list[Shape]  # the frame: title, legend, axis, grid
    rows: list[tuple[str, list[Shape]]]  # each host's label and shapes


WIDTH, LABEL_WIDTH, RIGHT, ROW, BAR = 1000.0, 190.0, 30.0, 28.0, 18.0
TOP = 92.0  # title and legend above the rows
TICK_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


def tick_step(span: float, most: int = 10) -> int:
    """Seconds between ticks: the smallest usual step that puts at most ``most`` intervals on ``span``."""
    return next((s for s in TICK_STEPS if span / s <= most), TICK_STEPS[-1])


def elapsed_label(seconds: float) -> str:
    total = int(round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{secs}s" if secs else ""]
    return "".join(parts) or "0s"


def layout(rows: list[HostRow], title: str = "Provisioning timeline") -> Layout:
    """Place the title, the legend, one row of bars per host and the time axis with its ticks."""
    starts = [b.start for r in rows for b in r.bars]
    ends = [b.end for r in rows for b in r.bars]
    origin = min(starts) if starts else datetime.datetime.now(datetime.UTC)
    span = max(1.0, (max(ends) - origin).total_seconds()) if ends else 1.0
    step = tick_step(span)
    span = max(span, step * -(-span // step))  # the axis ends on a tick
    plot_left, plot_right = LABEL_WIDTH, WIDTH - RIGHT
    scale = (plot_right - plot_left) / span
    height = TOP + ROW * max(1, len(rows)) + 56

    def x_of(moment: datetime.datetime) -> float:
        return plot_left + (moment - origin).total_seconds() * scale

    shapes: list[Shape] = [Rect(0, 0, WIDTH, height, "#ffffff")]
    subtitle = f"{len(rows)} host{'s' if len(rows) != 1 else ''}, from {rfc3339(origin)}" if starts else \
        f"{len(rows)} host{'s' if len(rows) != 1 else ''}, nothing recorded yet"
    shapes += [Text(16, 20, title, 17, bold=True), Text(16, 42, subtitle, 12, fill="#546e7a")]
    # The legend, one swatch per phase, on one line.
    x = 16.0
    for phase, colour in PHASES:
        shapes += [Rect(x, 58, 14, 14, colour, stroke="#455a64"), Text(x + 19, 65, phase, 12)]
        x += 19 + 7.2 * len(phase) + 22
    # Grid and axis with ticks, elapsed time from the first bar.
    top, bottom = TOP - 6, TOP + ROW * max(1, len(rows)) + 2
    tick = 0.0
    while tick <= span + 1e-6:
        tx = plot_left + tick * scale
        shapes += [Line(tx, top, tx, bottom, "#eceff1"), Line(tx, bottom, tx, bottom + 5, "#455a64"),
                   Text(tx, bottom + 16, elapsed_label(tick), 11, anchor="middle", fill="#455a64")]
        tick += step
    shapes += [Line(plot_left, bottom, plot_right, bottom, "#455a64"),
               Text((plot_left + plot_right) / 2, bottom + 36, "time since the first operation", 11,
                    anchor="middle", fill="#546e7a")]

    placed: list[tuple[str, list[Shape]]] = []
    for index, row in enumerate(rows):
        middle = TOP + ROW * index + ROW / 2
        row_shapes: list[Shape] = [Text(plot_left - 10, middle, row.label, 12, anchor="end")]
        if index % 2:
            row_shapes.insert(0, Rect(0, middle - ROW / 2, WIDTH, ROW, "#f7f9fa"))
        for segment in row.bars:
            left, right = x_of(segment.start), x_of(segment.end)
            row_shapes.append(Rect(left, middle - BAR / 2, max(2.0, right - left), BAR, COLOURS[segment.phase],
                                   title=f"{row.label} {segment.phase} {rfc3339(segment.start)} - "
                                         f"{rfc3339(segment.end)} ({elapsed_label(segment.seconds)})"))
        if not row.bars:
            row_shapes.append(Text(plot_left + 6, middle, f"nothing recorded ({row.state or 'none'})", 11,
                                   fill="#78909c"))
        placed.append((row.label, row_shapes))
    return Layout(WIDTH, height, shapes, placed)


# -- SVG ------------------------------------------------------------------------------------------------------

def _svg_shape(shape: Shape) -> str:
    if isinstance(shape, Rect):
        stroke = f' stroke={quoteattr(shape.stroke)} stroke-width="0.5"' if shape.stroke else ""
        body = f"<title>{escape(shape.title)}</title>" if shape.title else ""
        attrs = (f'x="{shape.x:.1f}" y="{shape.y:.1f}" width="{shape.width:.1f}" height="{shape.height:.1f}" '
                 f'fill={quoteattr(shape.fill)}{stroke}')
        return f"<rect {attrs}>{body}</rect>" if body else f"<rect {attrs}/>"
    if isinstance(shape, Line):
        return (f'<line x1="{shape.x1:.1f}" y1="{shape.y1:.1f}" x2="{shape.x2:.1f}" y2="{shape.y2:.1f}" '
                f'stroke={quoteattr(shape.stroke)} stroke-width="{shape.width:g}"/>')
    weight = ' font-weight="bold"' if shape.bold else ""
    # y is the middle of the text; SVG places the baseline, about a third of the size below it.
    return (f'<text x="{shape.x:.1f}" y="{shape.y + shape.size * 0.35:.1f}" font-size="{shape.size:g}" '
            f'text-anchor="{shape.anchor}" fill={quoteattr(shape.fill)}{weight}>{escape(shape.text)}</text>')


def svg(placed: Layout) -> str:
    """The layout as a standalone SVG document; each host's shapes in a ``<g class="host">``."""
    lines = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{placed.width:g}" height="{placed.height:g}" '
             f'viewBox="0 0 {placed.width:g} {placed.height:g}" font-family="DejaVu Sans, Helvetica, Arial, '
             'sans-serif">']
    lines += [_svg_shape(s) for s in placed.shapes]
    for label, shapes in placed.rows:
        lines.append(f'<g class="host" data-host={quoteattr(label)}>')
        lines += [f"  {_svg_shape(s)}" for s in shapes]
        lines.append("</g>")
    lines.append("</svg>")
    return "\n".join(lines) + "\n"


# -- PNG (Pillow, optional) -----------------------------------------------------------------------------------

def png(placed: Layout, scale: float = 2.0) -> bytes:
    """The same layout drawn with Pillow at ``scale`` (2: sharp on most screens); Invalid without Pillow."""
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError:
        raise Invalid(PNG_MISSING) from None
    image = Image.new("RGB", (int(placed.width * scale), int(placed.height * scale)), "#ffffff")
    draw = ImageDraw.Draw(image)
    fonts: dict[float, Any] = {}

    def font(size: float) -> Any:
        if size not in fonts:
            try:
                fonts[size] = ImageFont.load_default(size=size * scale)
            except TypeError:  # Pillow before 10.1: one bitmap size
                fonts[size] = ImageFont.load_default()
        return fonts[size]

    anchors = {"start": "lm", "middle": "mm", "end": "rm"}
    for shape in [*placed.shapes, *(s for _label, shapes in placed.rows for s in shapes)]:
        if isinstance(shape, Rect):
            box = [shape.x * scale, shape.y * scale, (shape.x + shape.width) * scale,
                   (shape.y + shape.height) * scale]
            draw.rectangle(box, fill=shape.fill, outline=shape.stroke or None, width=1 if shape.stroke else 0)
        elif isinstance(shape, Line):
            draw.line([shape.x1 * scale, shape.y1 * scale, shape.x2 * scale, shape.y2 * scale], fill=shape.stroke,
                      width=max(1, int(shape.width * scale)))
        else:
            draw.text((shape.x * scale, shape.y * scale), shape.text, fill=shape.fill, font=font(shape.size),
                      anchor=anchors[shape.anchor],
                      stroke_width=1 if shape.bold else 0, stroke_fill=shape.fill)
    out = io.BytesIO()
    image.save(out, "PNG", optimize=True)
    return out.getvalue()
