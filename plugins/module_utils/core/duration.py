# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Durations as Go writes and reads them (``time.ParseDuration``): ``30s``, ``1m30s``, ``1.5h``, ``500ms``.

The Ansible Operator reads a requeue period with Go's parser, so a period the collection hands it must be one.
"""
from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid

_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_UNITS = {"ns": Decimal("1e-9"), "us": Decimal("1e-6"), "µs": Decimal("1e-6"), "μs": Decimal("1e-6"),
          "ms": Decimal("1e-3"), "s": Decimal(1), "m": Decimal(60), "h": Decimal(3600)}
RULE = "a duration such as 30s, 5m, 1h30m or 500ms (Go's units: ns, us, ms, s, m, h), or a number of seconds"


def parse(text: str) -> Decimal | None:
    """Seconds in a Go duration (a sign, then numbers each with a unit; ``0`` alone), or None when it is none."""
    sign, rest = (-1, text[1:]) if text[:1] == "-" else (1, text[1:] if text[:1] == "+" else text)
    if rest == "0":
        return Decimal(0)
    total, position = Decimal(0), 0
    while position < len(rest):
        part = _PART.match(rest, position)
        if part is None:
            return None
        try:
            total += Decimal(part[1]) * _UNITS[part[2]]
        except InvalidOperation:
            return None
        position = part.end()
    return sign * total if rest else None


def go_duration(value: Any, field: str) -> str:
    """``value`` as a Go duration: a duration is kept as written, a number of seconds gets the unit ``s``
    (``10`` -> ``10s``, ``0.5`` -> ``0.5s``). Invalid names ``field`` for anything else."""
    if not isinstance(value, bool):
        text = str(value).strip()
        if parse(text) is not None:
            return text
        try:
            seconds = Decimal(text)
        except InvalidOperation:
            seconds = None
        if seconds is not None and seconds.is_finite():
            return f"{seconds.normalize():f}s"
    raise Invalid(f"{field}: Invalid value: {value!r}: must be {RULE}")
