"""What every benchmark shares: the machine it ran on, and its section of docs/benchmarks.md."""
from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REPORT = REPO / "docs" / "benchmarks.md"
HEADER = "# Benchmarks\n\nFigures measured by `benchmarks/`; never part of `make test`.\n"


def machine() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    cpu = "unknown CPU"
    with contextlib.suppress(OSError, StopIteration), open("/proc/cpuinfo") as info:
        cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    return f"{os.cpu_count()} cores ({cpu}), {memory:.0f} GiB, {platform.system()} {platform.release()}, " \
           f"Python {platform.python_version()}"


def write_section(name: str, lines: list[str]) -> None:
    """Replace (or append) the section between the markers ``<!-- name:start -->`` and ``<!-- name:end -->``."""
    text = REPORT.read_text() if REPORT.exists() else HEADER
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = "\n".join([start, *lines, end])
    if start in text:
        text = text[:text.index(start)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text(text)
