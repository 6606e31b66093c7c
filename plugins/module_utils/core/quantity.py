# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Kubernetes quantities (apimachinery's ``resource.Quantity``): ``16Gi``, ``500G``, ``1.5Ti``, ``1e9``, ``128974848``.

The grammar is apimachinery's: a signed decimal number, then one suffix - binary SI (``Ki Mi Gi Ti Pi Ei``),
decimal SI (``n u m k M G T P E``, or none) or a decimal exponent (``e3``, ``E-2``). A quantity that names bytes
is read as Kubernetes reads it into an integer (``Quantity.Value()``): a fraction of a byte rounds up.

A quantity's size is bounded before anything is computed: at most 40 digits before the point and a decimal exponent
of at most 30 either way, so ``1e999999`` costs nothing to refuse and no caller ever turns a thousands-of-digits
number into an int. What is read may still pass apimachinery's int64 (``16Ei``): each caller bounds what it reads
(and says so in its own words: "more than 9223372036854775807 bytes", "more than 16Ti").
"""
from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, DecimalException
from typing import Any

_QUANTITY = re.compile(r"([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|n|u|m|k|M|G|T|P|E|)")
BINARY = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60}
DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1), "k": Decimal(10) ** 3,
           "M": Decimal(10) ** 6, "G": Decimal(10) ** 9, "T": Decimal(10) ** 12, "P": Decimal(10) ** 15,
           "E": Decimal(10) ** 18}
# A decimal exponent (``e30``) beyond this, either way, and more digits than this before the point, are refused
# before anything is computed: what is read stays a number of at most some 70 digits.
MAX_EXPONENT = 30
MAX_INTEGER_DIGITS = 40
RULE = ("a number with an optional suffix: Ki, Mi, Gi, Ti, Pi, Ei (powers of 1024), k, M, G, T, P, E (of 1000) or "
        f"an exponent of at most {MAX_EXPONENT} (e3)")


def parse_quantity(value: Any) -> Decimal | None:
    """The value of a quantity (an int, or a string in apimachinery's grammar), or None when it is none."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value) if len(str(abs(value))) <= MAX_INTEGER_DIGITS else None
    if not isinstance(value, str):
        return None
    found = _QUANTITY.fullmatch(value.strip())
    if found is None:
        return None
    sign, number, suffix = found.groups()
    if len(number.split(".")[0].lstrip("0")) > MAX_INTEGER_DIGITS:
        return None
    exponent = 0
    scaled = suffix not in BINARY and suffix not in DECIMAL  # e3, E-2
    if scaled:
        digits = suffix[1:].lstrip("+-").lstrip("0")  # its length first: int() of 5000 digits raises
        if len(digits) > len(str(MAX_EXPONENT)) or int(digits or "0") > MAX_EXPONENT:
            return None
        exponent = -int(digits or "0") if suffix[1] == "-" else int(digits or "0")
    try:
        amount = Decimal(number)
        if suffix in BINARY:
            amount *= BINARY[suffix]
        elif scaled:
            amount = amount.scaleb(exponent)
        else:
            amount *= DECIMAL[suffix]
    except (DecimalException, ValueError):
        return None
    return -amount if sign == "-" else amount


def whole(amount: Decimal) -> int:
    """A quantity's value as an integer, as Kubernetes' ``Quantity.Value()``: a fraction rounds up."""
    return int(amount.to_integral_value(rounding=ROUND_CEILING))


def format_bytes(count: int) -> str:
    """``count`` bytes in the shortest exact quantity: ``16Gi``, ``500G``, ``1536Mi``, ``1000`` -> ``1k``;
    a binary suffix wins a tie."""
    if count == 0:
        return "0"
    best = str(count)
    for suffix, factor in [*reversed(list(BINARY.items())),
                           *((s, int(f)) for s, f in reversed(list(DECIMAL.items())) if f >= 1000)]:
        if count % factor == 0:
            shown = f"{count // factor}{suffix}"
            if len(shown) < len(best):
                best = shown
    return best
