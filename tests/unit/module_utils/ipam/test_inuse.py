"""The in-use index finds the first free offset, wraps around, and skips reserved ones."""
from __future__ import annotations

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.inuse import InUse

# used offsets, size, start, skip, first free
CASES = [
    ([], 10, 0, [], 0),
    ([0, 1, 2], 10, 0, [], 3),
    ([0, 1, 2], 10, 0, [3], 4),
    (list(range(10)), 10, 0, [], None),
    (list(range(64)), 100, 0, [], 64),
    ([5], 10, 5, [], 6),
    ([5, 6, 7, 8, 9], 10, 5, [], 0),
    ([0, 5, 6, 7, 8, 9], 10, 5, [], 1),
    (list(range(8, 16)), 20, 8, [], 16),
    ([1], 3, 2, [2], 0),
]


@pytest.mark.parametrize(("used", "size", "start", "skip", "expected"), CASES)
def test_first_free(used, size, start, skip, expected):
    assert InUse.of(used).first_free(size, start, skip) == expected
