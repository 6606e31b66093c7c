"""The provisioning limit's count: shared by a process's reconciles, never exceeded between two listings."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import _BusyCount


def test_a_burst_of_reconciles_gets_no_more_slots_than_the_limit_leaves():
    listings = []
    count = _BusyCount(ttl=60)

    def listing() -> int:
        listings.append(1)
        return 3  # three nodes busy on Ironic

    with ThreadPoolExecutor(16) as pool:
        granted = list(pool.map(lambda _i: count.take(5, listing)[0], range(16)))
    assert granted.count(True) == 2  # 5 - 3
    assert len(listings) == 1  # one listing for the whole burst


def test_the_count_is_read_again_once_it_expires():
    count = _BusyCount(ttl=0)
    assert count.take(1, lambda: 0) == (True, 1)
    assert count.take(1, lambda: 0) == (True, 1)  # re-listed: the node before finished
    assert count.take(1, lambda: 1) == (False, 1)
