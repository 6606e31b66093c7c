"""Kubernetes quantities, as apimachinery's resource.ParseQuantity reads them, and bytes shown as the shortest."""
from __future__ import annotations

import time
from decimal import Decimal

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.quantity import (
    format_bytes,
    parse_quantity,
    whole,
)


@pytest.mark.parametrize(("text", "value"), [
    ("16Gi", 16 * 2**30), ("500G", 500 * 10**9), ("1.5Ti", 3 * 2**39), ("128974848", 128974848),
    (" 3 ", 3), (".5Ki", 512), ("5.", 5), ("+1k", 1000), ("-1Mi", -(2**20)), ("1e9", 10**9), ("1E3", 1000),
    ("2e-3", Decimal("0.002")), ("100m", Decimal("0.1")), ("1u", Decimal("0.000001")), ("1n", Decimal("1e-9")),
    ("1P", 10**15), ("1Ei", 2**60), (17179869184, 17179869184), (0, 0),
])
def test_a_quantity_is_read_as_apimachinery_reads_it(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["16Xi", "", "Gi", "16 Gi", "16gi", "1.2.3", "1e", "1e1.5", "0x10", "16GiB",
                                  "1e99999999999", True, None, 1.5, ["16Gi"], {"a": 1}])
def test_anything_else_is_no_quantity(text):
    assert parse_quantity(text) is None


# A decimal exponent beyond 30, or more than 40 digits before the point, is no quantity here, refused before
# anything is computed (issue 30: 1e5000 raised ValueError turning into an int, 1e999999 took 76 s).
@pytest.mark.parametrize("text", ["1e5000", "1e999999", "1E-999999", "1e" + "0" * 5000 + "40", "9" * 100000,
                                  "1e31", "1e-31", 10**41, "1" + "0" * 41 + "e-30"])
def test_an_absurd_quantity_is_none_and_costs_nothing(text):
    started = time.process_time()
    assert parse_quantity(text) is None
    assert time.process_time() - started < 0.1


# Beyond apimachinery's int64 a quantity is still read: its caller bounds it, naming its own limit.
@pytest.mark.parametrize(("text", "value"), [("9223372036854775807", 2**63 - 1), ("7Ei", 7 * 2**60),
                                             ("9.2e18", 92 * 10**17), ("1e30e", None), ("1e-30", Decimal("1e-30")),
                                             ("1e" + "0" * 5000 + "3", 1000), ("16Ei", 16 * 2**60),
                                             ("9223372036854775808", 2**63), ("-9223372036854775808", -(2**63)),
                                             ("1e30", 10**30), (10**19, 10**19)])
def test_the_largest_quantities_are_still_read(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize(("amount", "value"), [(Decimal("0.1"), 1), (Decimal("1.5"), 2), (Decimal(7), 7),
                                               (Decimal("1E+3"), 1000)])
def test_a_fraction_rounds_up_as_kubernetes_value(amount, value):
    assert whole(amount) == value


@pytest.mark.parametrize(("count", "shown"), [
    (0, "0"), (1, "1"), (123, "123"), (1000, "1k"), (1024, "1Ki"), (16 * 2**30, "16Gi"), (500 * 10**9, "500G"),
    (1536 * 2**20, "1536Mi"), (10**12, "1T"), (2**40, "1Ti"), (16383 * 2**20, "16383Mi"), (1025, "1025"),
])
def test_bytes_are_shown_as_the_shortest_exact_quantity(count, shown):
    assert format_bytes(count) == shown
    assert parse_quantity(shown) == count
