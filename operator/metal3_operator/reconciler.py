"""One reconcile of one object: its watch's role run on the cached object, and what follows from the run -
the finalizer, the status conditions, a failure's Event, and when to look at the object again.

Reading only the cache, writing only through an ``ObjectWriter`` and running roles only through a ``RoleRunner``,
it runs as well on an in-memory cache, a local store and a fake runner as on a cluster.

Status writes around a run, fewer than the Ansible Operator's two (issue 34): the Running condition is written
before a run (as the Ansible Operator does) only when the object's last run lasted ``running_after`` seconds or
longer (every run when 0), so an object whose runs are quick goes straight to its result; and the result is
written onto the object as the role left it, which ``settled`` gives from the cache once the watch has caught up
with the role's last write (the object is read from the API server only when it cannot say). Nothing is written
to the object while its role runs: the role reads and writes it too, and a second writer would make the role's
writes conflict, run after run.

When to look again, as controller-runtime decides from a reconcile's result:
- the run failed: after the rate limiter's wait (per object 5 ms doubling to 1000 s; 10 qps over all objects);
- the role asked ``requeue_after`` of a period: after that period;
- the role asked ``requeue_after`` of 0: at once, through the rate limiter, so a role that keeps asking backs off
  instead of looping;
- neither: after the reconcile period (the CR's annotation, the watch's, or the operator's), if any;
- the role's requeue_after named objects it waits on (``wait_on``) that an informer of the operator sees: when
  one of them changes (waiters.py), not after the period.
"""
from __future__ import annotations

import contextlib
import logging
import time
from typing import Any, Callable, Protocol, TypeVar

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from metal3_operator import status
from metal3_operator.cache import Cache, Key
from metal3_operator.metrics import Metrics
from metal3_operator.parameters import extra_vars
from metal3_operator.runner import Result
from metal3_operator.waiters import Waiter, Waiters, target_of
from metal3_operator.watches import Watch, parse_duration, parse_int
from metal3_operator.workqueue import WorkQueue
from metal3_operator.writes import EventRecorder, ObjectWriter, ref_of

log = logging.getLogger("metal3_operator.reconciler")
RECONCILE_PERIOD_ANNOTATION = "ansible.sdk.operatorframework.io/reconcile-period"
MAX_ARTIFACTS_ANNOTATION = "ansible.sdk.operatorframework.io/max-runner-artifacts"
VERBOSITY_ANNOTATION = "ansible.sdk.operatorframework.io/verbosity"
T = TypeVar("T")
# (key, the object as the operator last held it) -> the object as the role's run left it, as the cache holds it;
# a Ref when that cannot be told (the object is then read from the API server).
Settled = Callable[[Key, dict[str, Any]], dict[str, Any] | Ref]


class RoleRunner(Protocol):
    """What the reconciler needs of runner.Runner."""

    def run(self, watch: Watch, obj: dict[str, Any], variables: dict[str, Any], finalizer: bool = False,
            cancel: Callable[[], bool] | None = None, max_artifacts: int | None = None,
            verbosity: int = 0) -> Result:
        """Run the watch's role (its finalizer's, when ``finalizer``) for ``obj``."""

    def forget(self, watch: Watch, namespace: str, name: str) -> None:
        """Drop what the runs of an object that is gone left behind."""

    def objects(self, watch: Watch) -> list[tuple[str, str]]:
        """The objects of the kind whose runs left something behind."""


class Reconciler:
    def __init__(self, w: Watch, cache: Cache, runner: RoleRunner, queue: WorkQueue, writer: ObjectWriter,
                 events: EventRecorder, metrics: Metrics, reconcile_period: float, verbosity: int = 0,
                 cancelled: Callable[[], bool] = lambda: False, waiters: Waiters | None = None,
                 running_after: float = 0.0, settled: Settled | None = None) -> None:
        self.watch = w
        self.running_after = running_after
        self._long_runs: set[Key] = set()  # the objects whose last run lasted running_after or longer
        self.settled = settled
        self.waiters = waiters
        self.cache = cache
        self.runner = runner
        self.queue = queue
        self.writer = writer
        self.events = events
        self.metrics = metrics
        # A watch's 0 (or none) is the flag's period, as in the Ansible Operator.
        self.reconcile_period = w.reconcile_period or reconcile_period
        self.verbosity = verbosity
        self.cancelled = cancelled

    def reconcile(self, key: Key) -> None:
        with self.waiters.reconciling() if self.waiters else contextlib.nullcontext(0) as mark:
            self._reconcile(key, mark)

    def _reconcile(self, key: Key, mark: int) -> None:
        obj = self.cache.get(*key)
        if obj is None:
            if self.waiters:
                self.waiters.forget(self.watch.name, key)
            self.queue.forget(key)
            self.events.forget(key)
            self._long_runs.discard(key)
            self.runner.forget(self.watch, *key)  # gone: its runs' directory goes too
            return
        meta = obj["metadata"]
        finalizer = self.watch.finalizer.name if self.watch.finalizer else None
        deleting = bool(meta.get("deletionTimestamp"))
        if deleting and (not finalizer or finalizer not in (meta.get("finalizers") or [])):
            self.queue.forget(key)
            return  # being deleted and nothing of ours holds it: nothing to do, as the Ansible Operator does
        if not deleting and finalizer and finalizer not in (meta.get("finalizers") or []):
            obj = self.writer.add_finalizer(obj, finalizer)
            if obj is None:
                return  # gone meanwhile: its deletion event brings it back
        if self.watch.manage_status and (self.running_after <= 0 or key in self._long_runs):
            obj = self.writer.write_conditions(obj, status.running()) or obj
        started = time.monotonic()
        annotations = meta.get("annotations") or {}
        result = self.runner.run(self.watch, obj, extra_vars(self.watch, obj, finalizer=deleting),
                                 finalizer=deleting, cancel=self.cancelled,
                                 verbosity=verbosity(annotations, self.verbosity),
                                 max_artifacts=max_artifacts(annotations))
        elapsed = time.monotonic() - started
        if elapsed >= self.running_after:
            self._long_runs.add(key)
        else:
            self._long_runs.discard(key)
        if self.watch.manage_status:
            # The role may well have written the object since: onto the version it left.
            after = self.settled(key, obj) if self.settled else ref_of(obj)
            obj = self.writer.write_conditions(after, status.done(result.ok, result.stats, result.message())) or obj
        if not result.ok:
            self.metrics.reconciled(self.watch, "error", elapsed)
            log.warning("%s %s/%s: reconcile failed: %s", self.watch.kind, *key, result.message())
            self.events.failed(key, obj, result.message())
            self.queue.add_rate_limited(key)
            return
        self.events.forget(key)
        if deleting and result.requeue_after is None:
            # The finalizer role finished its work: let the deletion go on.
            self.queue.forget(key)
            self.writer.remove_finalizer(ref_of(obj), str(finalizer))
            self.metrics.reconciled(self.watch, "success", elapsed)
            return
        self.metrics.reconciled(self.watch, "requeue_after" if result.requeue_after is not None else "success",
                                elapsed)
        if self.wait(key, result, mark):
            return
        self.requeue(key, result.requeue_after, annotations)

    def wait(self, key: Key, result: Result, mark: int) -> bool:
        """Wait for what the role named to change, when the operator sees it change; False: it does not."""
        if not self.waiters:
            return False
        if not result.wait_on:
            self.waiters.forget(self.watch.name, key)  # served: it waits no more, and keeps no place
            return False
        targets = [target_of(*target) for target in result.wait_on]
        waited = self.waiters.wait(Waiter(self.watch.name, key, self.queue.add), targets, mark)
        if waited == "unwatched":
            return False
        if waited == "changed":
            self.queue.add_rate_limited(key)  # what it waits on changed while it ran: once more, now
            return True
        self.queue.forget(key)
        return True

    def requeue(self, key: Key, requeue_after: float | None, annotations: dict[str, str]) -> None:
        if requeue_after is not None and requeue_after <= 0:
            self.queue.add_rate_limited(key)  # at once, as far as the rate limiter lets it: never a hot loop
            return
        self.queue.forget(key)
        period = requeue_after if requeue_after is not None else \
            annotated(annotations, RECONCILE_PERIOD_ANNOTATION, parse_duration, self.reconcile_period)
        if period > 0:
            self.queue.add_after(key, period)

    def failed(self, key: Key, error: Exception) -> None:
        """A reconcile that raised (the API unreachable, a write refused): logged, and tried again later."""
        log.error("%s %s/%s: reconcile error: %s", self.watch.kind, *key, error, exc_info=error)
        self.metrics.reconciled(self.watch, "error", 0.0)
        self.queue.add_rate_limited(key)


def annotated(annotations: dict[str, str], name: str, parse: Callable[[str, str], T], default: T) -> T:
    """A CR's annotation overriding a setting of its kind: its value parsed, else ``default`` (a value that does
    not parse is logged and ignored, as the Ansible Operator ignores it)."""
    value = annotations.get(name)
    if value is None:
        return default
    try:
        return parse(value, name)
    except ValueError as e:
        log.warning("ignoring the annotation: %s", e)
        return default


def verbosity(annotations: dict[str, str], default: int) -> int:
    """The CR's verbosity annotation, when it is one (0 to 7), else the kind's."""
    return annotated(annotations, VERBOSITY_ANNOTATION, lambda v, name: parse_int(v, range(8), name), default)


def max_artifacts(annotations: dict[str, str]) -> int | None:
    """The CR's max-runner-artifacts annotation, when it is one, else None (the watch's maxRunnerArtifacts)."""
    return annotated(annotations, MAX_ARTIFACTS_ANNOTATION, lambda v, name: parse_int(v, range(1, 10_000), name), None)
