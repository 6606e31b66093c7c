"""One reconcile, driven with an in-memory cache, the collection's local store and a fake runner: the
finalizer, the status conditions the Ansible Operator writes, the failure Event, when the object comes back
(requeue_after, the reconcile period, the rate limiter), and deletion. No cluster, no Ansible; exact time."""
from __future__ import annotations

import time
from typing import Any

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Unavailable
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from metal3_operator.cache import Cache
from metal3_operator.metrics import Metrics
from metal3_operator.reconciler import RECONCILE_PERIOD_ANNOTATION, Reconciler, Settled
from metal3_operator.runner import Result
from metal3_operator.waiters import Waiters
from metal3_operator.watches import Finalizer, Watch
from metal3_operator.workqueue import WorkQueue
from metal3_operator.writes import EventRecorder, ObjectWriter
from tests.operator.fakes import FakeClock, FakeRunner

START = 1000.0
FINALIZER = "ipam.metal3.io/ipclaim"
WATCH = Watch("ipam.metal3.io", "v1alpha1", "IPClaim", role="r", finalizer=Finalizer(FINALIZER, role="r"),
              reconcile_period=600.0)
KEY = ("ns", "claim")
REF = Ref("ipam.metal3.io/v1alpha1", "IPClaim", "claim", "ns")
OK = Result(True, stats={"ok": 2, "changed": 1})


class CountingStore(LocalStore):
    """The local store, counting its reads of one object and its status writes."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.reads = 0
        self.status_writes = 0

    def get(self, ref: Ref) -> Any:
        self.reads += 1
        return super().get(ref)

    def update_status(self, obj: Any, dry_run: bool = False) -> Any:
        self.status_writes += 1
        return super().update_status(obj, dry_run=dry_run)


class World:
    """A reconciler over a local store, with the informer's part played by ``sync``."""

    def __init__(self, tmp_path, *results: Result, watch: Watch = WATCH, waiters: Waiters | None = None,
                 running_after: float = 0.0, settled: Settled | None = None) -> None:
        self.store = CountingStore(str(tmp_path / "store.db"))
        self.clock = FakeClock(START)
        self.queue = WorkQueue(clock=self.clock)
        self.cache = Cache(watch.api_version, watch.kind)
        self.runner = FakeRunner(*results)
        self.events = EventRecorder(self.store, "test")
        self.reconciler = Reconciler(watch, self.cache, self.runner, self.queue, ObjectWriter(self.store),
                                     self.events, Metrics(), 3600.0, waiters=waiters, running_after=running_after,
                                     settled=settled)

    def create(self, **metadata: Any) -> None:
        self.store.create({"apiVersion": REF.api_version, "kind": REF.kind,
                           "metadata": {"name": "claim", "namespace": "ns", **metadata},
                           "spec": {"pool": {"name": "pool"}}})
        self.sync()

    def sync(self) -> None:
        """What the watch would have told the cache by now."""
        obj = self.store.get_if_exists(REF)
        if obj is None:
            self.cache.remove(KEY)
        else:
            self.cache.put(obj)

    def reconcile(self) -> None:
        self.reconciler.reconcile(KEY)
        self.sync()

    def next_due(self) -> float | None:
        """When the queue hands the key out again (seconds from now), None if it does not."""
        if not self.queue._delayed and not len(self.queue):
            return None
        before = self.clock.now()
        assert self.queue.get() == KEY
        self.queue.done(KEY)
        return round(self.clock.now() - before, 6)

    def conditions(self) -> dict[str, dict[str, Any]]:
        return {c["type"]: c for c in (self.store.get(REF).get("status") or {}).get("conditions", [])}

    def failure_events(self) -> list[dict[str, Any]]:
        return self.store.list("v1", "Event", "ns")


def test_a_new_object_gets_the_finalizer_and_the_ansible_operators_conditions(tmp_path):
    world = World(tmp_path, OK)
    world.create()
    world.reconcile()
    claim = world.store.get(REF)
    assert claim["metadata"]["finalizers"] == [FINALIZER]
    (run,) = world.runner.runs
    assert run["obj"]["metadata"]["finalizers"] == [FINALIZER] and run["finalizer"] is False
    assert run["obj"]["status"]["conditions"][0]["message"] == "Running reconciliation"  # written before the run
    conditions = world.conditions()
    assert conditions["Successful"]["status"] == "True" and conditions["Failure"]["status"] == "False"
    assert conditions["Running"]["ansibleResult"]["changed"] == 1
    assert world.failure_events() == []
    assert world.next_due() == 600.0  # the watch's reconcile period


def test_a_run_that_ends_before_running_after_goes_straight_to_its_result_in_one_status_write(tmp_path):
    world = World(tmp_path, OK, running_after=60.0)
    world.create()
    world.reconcile()
    (run,) = world.runner.runs
    assert "status" not in run["obj"]  # no Running condition before the run
    assert world.store.status_writes == 1
    conditions = world.conditions()
    assert conditions["Successful"]["status"] == "True" and conditions["Running"]["reason"] == "Successful"


class RoleWritingItsObject(FakeRunner):
    """A role that reads its object, works for ``lasting`` seconds and writes the status it read back, as the
    engine's status writes do (resourceVersion-checked); what it saw of the Running condition is kept."""

    def __init__(self, world: World, lasting: float, *results: Result) -> None:
        super().__init__(*results)
        self.world, self.lasting = world, lasting
        self.seen_running: list[str] = []

    def run(self, watch, obj, variables, **kwargs):  # noqa: ANN001, ANN003, ANN201 - FakeRunner's
        read = self.world.store.get(REF)
        conditions = {c["type"]: c for c in (read.get("status") or {}).get("conditions", [])}
        self.seen_running.append(conditions.get("Running", {}).get("message", ""))
        time.sleep(self.lasting)
        self.world.store.update_status({**read, "status": {**(read.get("status") or {}), "errorMessage": "worked"}})
        return super().run(watch, obj, variables, **kwargs)


def test_an_object_whose_last_run_lasted_past_running_after_shows_running_while_the_next_runs(tmp_path):
    world = World(tmp_path, running_after=0.05)
    world.runner = world.reconciler.runner = RoleWritingItsObject(world, 0.1, OK, OK)
    world.create()
    world.reconcile()  # no mark: its last run is not known to be long
    world.reconcile()
    assert world.runner.seen_running == ["", "Running reconciliation"]
    assert world.conditions()["Running"]["message"] == "Awaiting next reconciliation"
    assert world.store.status_writes == 2 + 3  # the role's two, the first result, the mark and the second result


def test_nothing_is_written_to_the_object_while_its_role_runs(tmp_path):
    """The role's own write, made with what it read at its start, must not meet a write of the operator's."""
    world = World(tmp_path, running_after=0.05)
    world.runner = world.reconciler.runner = RoleWritingItsObject(world, 0.2, OK)
    world.create()
    world.reconcile()  # a Conflict in the role's write would fail the run (FakeRunner raises it)
    assert world.store.get(REF)["status"]["errorMessage"] == "worked"
    assert world.conditions()["Successful"]["status"] == "True"


def test_a_run_whose_result_is_the_last_ones_again_writes_no_status(tmp_path):
    world = World(tmp_path, OK, OK, Result(True, stats={"ok": 2, "changed": 0}), running_after=60.0)
    world.create()
    world.reconcile()
    first = world.conditions()["Running"]["ansibleResult"]
    world.reconcile()  # the same result, at another time: nothing written
    assert world.store.status_writes == 1 and world.conditions()["Running"]["ansibleResult"] == first
    world.reconcile()  # another result: written
    assert world.store.status_writes == 2 and world.conditions()["Running"]["ansibleResult"]["changed"] == 0


def test_the_result_is_written_onto_the_object_settled_gives_without_reading_it(tmp_path):
    asked: list[tuple[Any, Any]] = []

    def settled(key, held):  # noqa: ANN001, ANN202 - Settled
        asked.append((key, held["metadata"]["resourceVersion"]))
        return LocalStore.get(world.store, REF)  # what the cache would hold once caught up (a read not counted)

    world = World(tmp_path, OK, running_after=60.0, settled=settled)
    world.create()
    reads = world.store.reads
    world.reconciler.reconcile(KEY)
    assert [key for key, _run in asked] == [KEY]
    assert world.store.reads == reads  # the result's write read nothing
    assert world.conditions()["Successful"]["status"] == "True"


def test_each_write_of_the_operators_is_told_so_that_a_roles_read_waits_for_it(tmp_path):
    told: list[str] = []
    world = World(tmp_path, OK, OK, running_after=60.0)
    world.reconciler.writer = ObjectWriter(world.store, lambda obj: told.append(obj["metadata"]["resourceVersion"]))
    world.create()
    world.reconcile()  # the finalizer, then the result
    assert len(told) == 2 and told[-1] == world.store.get(REF)["metadata"]["resourceVersion"]
    world.reconcile()  # the same result: nothing written, nothing told
    assert len(told) == 2


def test_a_finalizer_is_added_even_when_the_cached_copy_is_stale(tmp_path):
    world = World(tmp_path, OK)
    world.create()
    world.store.patch(REF, {"metadata": {"labels": {"moved": "on"}}})  # the watch has not said so yet
    world.reconcile()
    claim = world.store.get(REF)
    assert claim["metadata"]["finalizers"] == [FINALIZER] and claim["metadata"]["labels"] == {"moved": "on"}


def test_a_failure_is_written_counted_on_one_event_and_backed_off(tmp_path):
    failed = Result(False, ["spec.pool: no such pool"], {"failures": 1})
    world = World(tmp_path, failed, failed, Result(False, ["another failure"]), OK)
    world.create()
    delays = []
    for _reconcile in range(3):
        world.reconcile()
        delays.append(world.next_due())
    assert delays == [0.005, 0.01, 0.02]  # per object, doubling
    conditions = world.conditions()
    assert conditions["Failure"]["status"] == "True" and conditions["Failure"]["message"] == "another failure"
    events = sorted(world.failure_events(), key=lambda e: e["count"])
    assert [(e["message"], e["count"]) for e in events] == [("another failure", 1), ("spec.pool: no such pool", 2)]
    assert {e["type"] for e in events} == {"Warning"} and events[0]["involvedObject"]["name"] == "claim"
    world.reconcile()  # and success forgets the backoff
    assert world.queue.failures(KEY) == 0 and world.next_due() == 600.0


@pytest.mark.parametrize("requeue_after, annotations, due", [
    (30.0, {}, 30.0),  # the role's period wins over the reconcile period
    (None, {RECONCILE_PERIOD_ANNOTATION: "90s"}, 90.0),  # the CR's own period
    (None, {RECONCILE_PERIOD_ANNOTATION: "0"}, None),  # none at all
    (0.0, {}, 0.005),  # at once: through the rate limiter
])
def test_when_the_object_comes_back(tmp_path, requeue_after, annotations, due):
    world = World(tmp_path, Result(True, requeue_after=requeue_after))
    world.create(annotations=annotations)
    world.reconcile()
    assert world.next_due() == due


POOL = ("ipam.metal3.io/v1alpha1", "IPPool", "ns", "pool")


def test_a_claim_waiting_on_a_watched_pool_comes_back_when_the_pool_changes_not_after_the_period(tmp_path):
    waiters = Waiters(lambda group, kind, namespace: (group, kind) == ("ipam.metal3.io", "IPPool"))
    world = World(tmp_path, Result(True, requeue_after=10.0, wait_on=[POOL]), OK, waiters=waiters)
    world.create()
    world.reconcile()
    assert world.next_due() is None  # no run while nothing changed
    waiters.changed("ipam.metal3.io", "IPPool", "ns", "pool")
    assert world.next_due() == 0.0
    world.reconcile()  # served: it waits no more
    assert waiters.waiting(WATCH.name) == []
    assert world.next_due() == 600.0  # the watch's period


def test_a_claim_waiting_on_what_no_informer_sees_comes_back_after_the_period(tmp_path):
    waiters = Waiters(lambda group, kind, namespace: False)
    world = World(tmp_path, Result(True, requeue_after=10.0, wait_on=[POOL]), waiters=waiters)
    world.create()
    world.reconcile()
    assert world.next_due() == 10.0


def test_a_role_that_keeps_asking_to_come_back_at_once_backs_off(tmp_path):
    world = World(tmp_path, Result(True, requeue_after=0.0))
    world.create()
    delays = []
    for _reconcile in range(12):
        world.reconcile()
        delays.append(world.next_due())
    assert delays == [round(0.005 * 2 ** n, 6) for n in range(12)]  # 5 ms .. 10 s, not a hot loop


def test_deletion_runs_the_finalizer_role_then_lets_the_object_go(tmp_path):
    world = World(tmp_path, OK)
    world.create(finalizers=[FINALIZER])
    world.store.delete(REF)
    world.sync()
    world.reconcile()
    assert world.runner.runs[0]["finalizer"] is True
    assert world.store.get_if_exists(REF) is None and world.cache.get(*KEY) is None
    world.reconcile()  # the deletion's event: gone, so its runs' directory goes
    assert world.runner.forgotten == [KEY] and world.next_due() is None


def test_a_finalizer_role_that_asks_to_come_back_keeps_the_object(tmp_path):
    world = World(tmp_path, Result(True, requeue_after=5.0))
    world.create(finalizers=[FINALIZER])
    world.store.delete(REF)
    world.sync()
    world.reconcile()
    assert world.store.get(REF)["metadata"]["finalizers"] == [FINALIZER]
    assert world.next_due() == 5.0


def test_an_object_being_deleted_without_our_finalizer_is_left_alone(tmp_path):
    world = World(tmp_path, OK)
    world.create(finalizers=["someone.else/finalizer"])
    world.store.delete(REF)
    world.sync()
    world.reconcile()
    assert world.runner.runs == [] and world.next_due() is None


def test_a_kind_without_managed_status_or_finalizer_is_only_run(tmp_path):
    watch = Watch("ipam.metal3.io", "v1alpha1", "IPClaim", role="r", manage_status=False)
    world = World(tmp_path, OK, watch=watch)
    world.create()
    world.reconcile()
    claim = world.store.get(REF)
    assert len(world.runner.runs) == 1 and "status" not in claim and not claim["metadata"].get("finalizers")


def test_a_reconcile_that_raises_is_retried_through_the_rate_limiter(tmp_path):
    world = World(tmp_path, OK)
    world.create()

    def unreachable(*_args: Any, **_kwargs: Any) -> Any:
        raise Unavailable("cannot reach the Kubernetes API")

    world.store.update = unreachable
    with pytest.raises(Unavailable):
        world.reconciler.reconcile(KEY)
    world.reconciler.failed(KEY, Unavailable("cannot reach the Kubernetes API"))
    assert world.runner.runs == [] and world.next_due() == 0.005
