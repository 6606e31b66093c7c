"""One controller per watched kind: an informer listing and watching the kind into its cache, a work queue of
object keys, and workers that hand each key to the reconciler - level-based, as controller-runtime reconciles.

The parts meet only here: the informer knows the API and the cache; the reconciler knows the cache, the runner
and the store it writes through; the work queue, between them, knows keys and time.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Protocol

from kubernetes import client

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from metal3_operator.cache import Cache, Key, at_least
from metal3_operator.informer import Informer
from metal3_operator.metrics import Metrics
from metal3_operator.ratelimit import Clock
from metal3_operator.reconciler import Reconciler, RoleRunner
from metal3_operator.waiters import Waiters
from metal3_operator.watches import Watch
from metal3_operator.workqueue import WorkQueue
from metal3_operator.writes import EventRecorder, ObjectWriter, ref_of

log = logging.getLogger("metal3_operator.controller")
COMPONENT = "metal3-baremetal-operator"
# How long a reconcile waits, after its run, for the watch to bring what the role wrote (milliseconds, unless the
# API server is very busy); past it the object is read from the API server.
SETTLE_TIMEOUT = 2.0


class WriteLedger(Protocol):
    """The versions of objects written that the watch caches may not hold yet (the roles' proxy keeps it)."""

    def saw(self, obj: dict[str, Any], api_version: str, plural: str) -> None:
        """The operator wrote ``obj``: a role's read of it waits for the cache to hold that write."""

    def newest(self, api_version: str, plural: str, namespace: str | None, name: str) -> tuple[bool, str | None]:
        """What the roles wrote last of the object that the cache may not hold yet: (True, its version; None when
        the object went), or (False, None) when nothing."""


class Controller:
    def __init__(self, w: Watch, api: client.ApiClient, store: Store, runner: RoleRunner, metrics: Metrics,
                 workers: int, reconcile_period: float, namespaces: list[str], verbosity: int = 0,
                 clock: Clock | None = None, waiters: Waiters | None = None, running_after: float = 0.0,
                 ledger: WriteLedger | None = None) -> None:
        self.watch = w
        self.ledger = ledger
        self.runner = runner
        self.workers = max(1, workers)
        self.namespaces = namespaces or [""]
        self.stopping = threading.Event()
        self.cancelling = threading.Event()
        self.queue = WorkQueue(clock=clock)
        self.cache = Cache(w.api_version, w.kind)
        self.informer = Informer(w, api, self.cache, self.namespaces, self.queue.add, self._synced, self.stopping,
                                 self._observed)
        self.waiters = waiters
        self.reconciler = Reconciler(w, self.cache, runner, self.queue,
                                     ObjectWriter(store, self._wrote if ledger else None),
                                     EventRecorder(store, COMPONENT), metrics, reconcile_period, verbosity,
                                     self.cancelling.is_set, waiters, running_after,
                                     self._settled if ledger else None)
        self.synced = self.informer.synced
        self.threads: list[threading.Thread] = []
        metrics.track_queue(w.name, self.queue)

    # -- lifecycle --------------------------------------------------------------------------------------------

    def resolve(self) -> None:
        """Find the kind's resource on the cluster: a kind it does not serve is an error before any work."""
        self.informer.resolve()

    def start(self) -> None:
        if not self.informer.plural:
            self.resolve()
        for namespace in self.namespaces:
            self._thread(f"informer-{self.watch.name}-{namespace or 'all'}", self.informer.run, namespace)
        for i in range(self.workers):
            self._thread(f"worker-{self.watch.name}-{i}", self._work)

    def _thread(self, name: str, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def stop(self) -> None:
        """Take no new work; reconciles under way finish (``cancel`` ends them early)."""
        self.stopping.set()
        self.queue.shut_down()

    def cancel(self) -> None:
        self.cancelling.set()

    def join(self, deadline: float) -> bool:
        for thread in self.threads:
            if thread.name.startswith("worker-"):
                thread.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self.threads if t.name.startswith("worker-"))

    def healthy(self) -> bool:
        return self.stopping.is_set() or all(t.is_alive() for t in self.threads)

    def _synced(self) -> None:
        """Everything is listed: objects deleted while no operator ran left their runs' directories; they go now."""
        for key in self.runner.objects(self.watch):
            if (key[0] in self.namespaces or self.namespaces == [""]) and self.cache.get(*key) is None:
                self.queue.add(key)

    def _observed(self, key: Key) -> None:
        """An object of the kind changed: whatever waits on it may go on."""
        if self.waiters:
            self.waiters.changed(self.watch.group, self.watch.kind, *key)

    def watches(self, group: str, kind: str, namespace: str) -> bool:
        """Whether this controller's informer sees the changes of ``kind`` objects in ``namespace``."""
        return (group, kind) == (self.watch.group, self.watch.kind) and \
            (self.namespaces == [""] or namespace in self.namespaces)

    def _wrote(self, obj: dict[str, Any]) -> None:
        assert self.ledger is not None  # noqa: S101 - given whenever this is
        self.ledger.saw(obj, self.watch.api_version, self.informer.plural)

    def _settled(self, key: Key, held: dict[str, Any]) -> dict[str, Any] | Ref:
        """The object as a role's run left it: the cache's copy, once it holds what the run wrote of it through
        the proxy, or ``held`` (what the operator wrote last) when that is newer; a Ref (read it) when the object
        went or the watch is late."""
        assert self.ledger is not None  # noqa: S101 - given whenever this is
        known, version = self.ledger.newest(self.watch.api_version, self.informer.plural, key[0] or None, key[1])
        if not known:
            cached = self.cache.get(*key)
            if cached is None:
                return ref_of(held)
            return held if at_least(held, cached["metadata"].get("resourceVersion") or "") else cached
        cached = self.cache.wait_for(key, version, SETTLE_TIMEOUT) if version else None
        return cached if cached is not None else ref_of(held)

    # -- work -------------------------------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            key = self.queue.get()
            if key is None:
                return
            self.process(key)  # type: ignore[arg-type]

    def process(self, key: Key) -> None:
        """Reconcile one key handed out by the queue, and hand it back."""
        try:
            self.reconciler.reconcile(key)
        except Exception as e:  # noqa: BLE001 - one object's trouble must not stop the worker
            self.reconciler.failed(key, e)
        finally:
            self.queue.done(key)
