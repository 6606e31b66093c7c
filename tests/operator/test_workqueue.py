"""The work queue: keyed by object, deduplicated, never two workers on one key; requeues rate-limited per key
and over all keys as client-go's default controller rate limiter limits them. Delays run on a fake clock:
exact and instant."""
from __future__ import annotations

import threading
import time

import pytest

from metal3_operator.ratelimit import ItemExponential, MaxOf, TokenBucket, controller_rate_limiter
from metal3_operator.workqueue import WorkQueue
from tests.operator.fakes import FakeClock

START = 1000.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


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


def test_failures_back_off_exponentially_per_key_until_forgotten(clock):
    queue = WorkQueue(ItemExponential(base=0.01, cap=0.05), clock)
    assert [queue.add_rate_limited("a") for _failure in range(5)] == [0.01, 0.02, 0.04, 0.05, 0.05]
    assert queue.failures("a") == 5 and queue.failures("b") == 0
    queue.forget("a")
    assert queue.add_rate_limited("a") == 0.01


def test_the_default_limiter_backs_one_key_off_from_5ms_to_1000s(clock):
    queue = WorkQueue(clock=clock)
    delays = [queue.add_rate_limited("hot") for _requeue in range(22)]
    assert delays[:4] == [0.005, 0.01, 0.02, 0.04]
    assert delays[17] == pytest.approx(655.36) and delays[18:] == [1000.0] * 4  # 5 ms * 2^18 > 1000 s
    queue.forget("hot")
    assert queue.add_rate_limited("hot") == 0.005


@pytest.mark.parametrize("requeues, wait_before, expected", [
    (100, 0.0, 0.005),  # the burst: each of 100 keys waits only its own first backoff
    (101, 0.0, 0.1),  # the 101st waits for the next token, 1/10 s away
    (105, 0.0, 0.5),  # and those after it queue up behind, a token each
    (110, 1.0, 0.005),  # a second later, 10 tokens came back
    (111, 1.0, 0.1),
])
def test_the_default_limiter_holds_all_keys_to_10_qps_after_a_burst_of_100(clock, requeues, wait_before, expected):
    queue = WorkQueue(clock=clock)
    for i in range(requeues - 1):
        if i == 100:
            clock.advance(wait_before)
        queue.add_rate_limited(f"key-{i}")
    assert queue.add_rate_limited("last") == pytest.approx(expected)


def test_each_limiter_is_consulted_on_every_requeue(clock):
    bucket = TokenBucket(qps=1.0, burst=1, clock=clock)
    limiter = MaxOf(ItemExponential(0.5, 10.0), bucket)
    assert [limiter.when("a") for _requeue in range(4)] == [0.5, 1.0, 2.0, 4.0]  # per key wins...
    assert limiter.when("b") == 4.0  # ...but the bucket's debt was taken all along: b waits behind a's 3 tokens
    assert limiter.requeues("a") == 4
    limiter.forget("a")
    assert limiter.requeues("a") == 0


def test_add_after_hands_the_key_out_once_due(clock):
    queue = WorkQueue(clock=clock)
    queue.add_after("later", 0.2)
    queue.add("now")
    assert queue.get() == "now"
    assert clock.now() == START  # nothing waited
    assert queue.get() == "later"
    assert clock.now() == START + 0.2


def test_a_key_delayed_many_times_waits_once_for_the_earliest(clock):
    queue = WorkQueue(clock=clock)
    for delay in (0.3, 0.05, 0.2):
        queue.add_after("a", delay)
    assert queue.get() == "a"
    assert clock.now() == START + 0.05
    queue.done("a")
    queue.add_after("b", 0.4)
    assert queue.get() == "b"  # not "a" again at 0.2 or 0.3 s
    assert clock.now() == pytest.approx(START + 0.45)


def test_a_rate_limited_requeue_is_delayed_never_added_at_once(clock):
    queue = WorkQueue(controller_rate_limiter(clock), clock)
    handed_out = []
    for _reconcile in range(10):  # a reconcile that keeps asking to come back at once
        queue.add_rate_limited("hot")
        key = queue.get()
        handed_out.append(round(clock.now() - START, 6))
        queue.done(key)
    assert handed_out == [0.005, 0.015, 0.035, 0.075, 0.155, 0.315, 0.635, 1.275, 2.555, 5.115]


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
