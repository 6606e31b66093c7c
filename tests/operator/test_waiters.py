"""Objects waiting on others: one change wakes the longest waiter, a waiter keeps its place while it waits
again, and a change during a waiter's reconcile is not lost."""
from __future__ import annotations

from metal3_operator.waiters import Waiter, Waiters, target_of

POOL = target_of("ipam.metal3.io/v1alpha1", "IPPool", "ns", "pool")
ANY_POOL = target_of("ipam.metal3.io/v1alpha1", "IPPool", "ns")
WATCHED = {("ipam.metal3.io", "IPPool", "ns")}


class World:
    def __init__(self) -> None:
        self.time = 0.0
        self.woken: list[str] = []
        self.waiters = Waiters(lambda *where: where in WATCHED, clock=self.clock)

    def clock(self) -> float:
        self.time += 1.0
        return self.time

    def wait(self, name: str, *targets, mark: int | None = None) -> str:
        """What a reconcile of ``name`` says at its end: started at ``mark``, or just now."""
        waiter = Waiter("ipclaim", ("ns", name), lambda key: self.woken.append(key[1]))
        if mark is not None:
            return self.waiters.wait(waiter, targets or (POOL,), mark)
        with self.waiters.reconciling() as now:
            return self.waiters.wait(waiter, targets or (POOL,), now)

    def change(self, name: str = "pool") -> None:
        self.waiters.changed("ipam.metal3.io", "IPPool", "ns", name)


def test_one_change_wakes_the_longest_waiter_and_the_next_change_the_next():
    world = World()
    for name in ("old", "middle", "new"):
        assert world.wait(name) == "waiting"
    world.change()
    assert world.woken == ["old"]
    world.change()  # what the oldest's allocation writes to the pool
    world.change()
    assert world.woken == ["old", "middle", "new"]
    world.change()
    assert world.woken == ["old", "middle", "new"]  # nobody waits any more


def test_a_woken_waiter_that_waits_again_keeps_its_place():
    world = World()
    world.wait("old")
    world.wait("new")
    world.change()
    assert world.wait("old") == "waiting"  # it could not be served: back where it was, ahead of "new"
    world.change()
    assert world.woken == ["old", "old"]
    assert world.waiters.waiting("ipclaim") == [("ns", "new")]


def test_a_waiter_that_is_served_or_gone_is_forgotten():
    world = World()
    world.wait("served")
    world.wait("waiting")
    world.waiters.forget("ipclaim", ("ns", "served"))
    world.change()
    assert world.woken == ["waiting"]


def test_a_waiter_on_any_object_of_a_kind_is_woken_by_each_of_them():
    world = World()
    world.wait("claim", ANY_POOL)
    world.change("another-pool")
    assert world.woken == ["claim"]


def test_a_change_of_another_object_wakes_nobody():
    world = World()
    world.wait("claim")
    world.change("another-pool")
    assert world.woken == []


def test_a_change_during_the_reconcile_is_not_lost():
    world = World()
    with world.waiters.reconciling() as mark:  # the reconcile starts, reads the pool: exhausted
        world.change()  # an address is freed meanwhile
        assert world.wait("claim", mark=mark) == "changed"  # so it goes again at once instead of waiting
    assert world.waiters.waiting("ipclaim") == []


def test_a_waiter_keeps_its_place_through_a_reconcile_that_met_a_change():
    world = World()
    world.wait("old")
    world.wait("new")
    with world.waiters.reconciling() as mark:
        world.change()  # wakes "old"; its reconcile meets another change
        assert world.wait("old", mark=mark) == "changed"
    assert world.wait("old") == "waiting"
    assert world.waiters.waiting("ipclaim") == [("ns", "old"), ("ns", "new")]


def test_what_no_informer_sees_is_not_waited_on():
    world = World()
    elsewhere = target_of("ipam.metal3.io/v1alpha1", "IPPool", "other", "pool")
    assert world.wait("claim", POOL, elsewhere) == "unwatched"
    assert world.waiters.waiting("ipclaim") == []


def test_what_the_registry_holds_is_bounded_by_what_waits_not_by_what_changed():
    world = World()
    for i in range(100):  # changes while no reconcile runs: nobody can ask about them
        world.change(f"pool-{i}")
    assert world.waiters.remembered() == 0
    world.wait("claim")
    world.change()  # wakes it: it no longer waits on anything
    world.waiters.forget("ipclaim", ("ns", "claim"))  # served
    assert world.waiters.remembered() == 0
