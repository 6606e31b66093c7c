"""The work queue: keyed by object, deduplicated, never two workers on one key, backoff per key."""
from __future__ import annotations

import threading
import time

from metal3_operator.workqueue import WorkQueue


def test_a_key_added_many_times_waits_once():
    queue = WorkQueue()
    for key in ["a", "b", "a", "a", "b"]:
        queue.add(key)
    assert len(queue) == 2
    assert [queue.get(), queue.get()] == ["a", "b"]


def test_a_key_being_processed_is_not_handed_out_again_until_done():
    queue = WorkQueue()
    queue.add("a")
    assert queue.get() == "a"
    queue.add("a")  # an event while it is being reconciled
    assert len(queue) == 0
    got: list = []
    waiter = threading.Thread(target=lambda: got.append(queue.get()))
    waiter.start()
    waiter.join(0.2)
    assert got == []  # still processing: nobody else gets it
    queue.done("a")
    waiter.join(2)
    assert got == ["a"]  # and it comes back once, after


def test_many_workers_never_hold_one_key_at_once():
    queue, holders, overlaps = WorkQueue(), set(), []
    lock = threading.Lock()

    def work():
        while (key := queue.get()) is not None:
            with lock:
                if key in holders:
                    overlaps.append(key)
                holders.add(key)
            time.sleep(0.001)
            with lock:
                holders.discard(key)
            queue.done(key)

    workers = [threading.Thread(target=work) for _worker in range(4)]
    for w in workers:
        w.start()
    for i in range(2000):
        queue.add(f"k{i % 5}")
    time.sleep(0.3)
    queue.shut_down()
    for w in workers:
        w.join(5)
    assert overlaps == []


def test_failures_back_off_exponentially_per_key_until_forgotten():
    queue = WorkQueue(base_delay=0.01, max_delay=0.05)
    assert [queue.add_rate_limited("a") for _failure in range(5)] == [0.01, 0.02, 0.04, 0.05, 0.05]
    assert queue.failures("a") == 5 and queue.failures("b") == 0
    queue.forget("a")
    assert queue.add_rate_limited("a") == 0.01


def test_add_after_hands_the_key_out_once_due():
    queue = WorkQueue()
    queue.add_after("later", 0.2)
    queue.add("now")
    assert queue.get() == "now"
    started = time.monotonic()
    assert queue.get() == "later"
    assert time.monotonic() - started >= 0.15


def test_a_key_delayed_many_times_waits_once_for_the_earliest():
    queue = WorkQueue()
    for delay in (0.3, 0.05, 0.2):
        queue.add_after("a", delay)
    assert queue.get() == "a"
    queue.done("a")
    queue.add_after("b", 0.4)
    assert queue.get() == "b"  # not "a" again at 0.2 or 0.3 s


def test_shut_down_releases_waiting_workers():
    queue = WorkQueue()
    got: list = []
    waiter = threading.Thread(target=lambda: got.append(queue.get()))
    waiter.start()
    queue.shut_down()
    waiter.join(2)
    assert got == [None]
    queue.add("a")
    assert len(queue) == 0
