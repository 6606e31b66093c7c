"""One controller per watched kind: list and watch into a cache, a work queue of object keys, and workers
that reconcile a key by running the watch's role - level-based, as controller-runtime reconciles.

An object is reconciled when it appears, when its generation changes (spec edits; status writes do not
count), when it starts being deleted, when a reconcile asked to be requeued, and every reconcilePeriod.
"""
from __future__ import annotations

import copy
import logging
import threading
import time
from typing import Any, Callable, NamedTuple, TypeVar

import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from metal3_operator import status
from metal3_operator.metrics import Metrics
from metal3_operator.parameters import extra_vars
from metal3_operator.runner import Runner
from metal3_operator.watches import Watch, parse_duration, parse_int
from metal3_operator.workqueue import WorkQueue

log = logging.getLogger("metal3_operator.controller")
RECONCILE_PERIOD_ANNOTATION = "ansible.sdk.operatorframework.io/reconcile-period"
MAX_ARTIFACTS_ANNOTATION = "ansible.sdk.operatorframework.io/max-runner-artifacts"
VERBOSITY_ANNOTATION = "ansible.sdk.operatorframework.io/verbosity"
WATCH_TIMEOUT = 300
COMPONENT = "metal3-baremetal-operator"
Key = tuple[str, str]
T = TypeVar("T")


class FailureEvent(NamedTuple):
    """The Event a failing object got last: the same failure again counts on it."""
    namespace: str
    name: str
    message: str
    count: int


def _key(obj: dict[str, Any]) -> Key:
    return obj["metadata"].get("namespace") or "", obj["metadata"]["name"]


def wants_reconcile(old: dict[str, Any] | None, new: dict[str, Any], annotations: bool) -> bool:
    """controller-runtime's GenerationChanged-or-NoGeneration predicate, plus the start of a deletion."""
    if old is None:
        return True
    o, n = old["metadata"], new["metadata"]
    if "generation" not in n or o.get("generation") != n.get("generation"):
        return True
    if bool(o.get("deletionTimestamp")) != bool(n.get("deletionTimestamp")):
        return True
    return annotations and o.get("annotations") != n.get("annotations")


class Controller:
    def __init__(self, w: Watch, api: client.ApiClient, runner: Runner, metrics: Metrics, workers: int,
                 reconcile_period: float, namespaces: list[str], verbosity: int = 0) -> None:
        self.watch = w
        self.api = api
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.runner = runner
        self.metrics = metrics
        self.workers = max(1, workers)
        self.verbosity = verbosity
        # A watch's 0 (or none) is the flag's period, as in the Ansible Operator.
        self.reconcile_period = w.reconcile_period or reconcile_period
        self.namespaces = namespaces or [""]
        self.queue = WorkQueue()
        self.cache: dict[Key, dict[str, Any]] = {}
        # Each failing object's last Event: a repeat of the same failure counts on it, as client-go's event
        # recorder does, instead of adding an Event per retry.
        self.failure_events: dict[Key, FailureEvent] = {}
        self.cache_lock = threading.Lock()
        self.stopping = threading.Event()
        self.cancelling = threading.Event()
        self.synced = threading.Event()
        self._synced_namespaces: set[str] = set()
        self.threads: list[threading.Thread] = []
        self.plural = ""
        metrics.track_queue(w.name, self.queue)

    # -- lifecycle --------------------------------------------------------------------------------------------

    def resolve(self) -> None:
        """Find the kind's resource on the cluster: a kind it does not serve is an error before any work."""
        try:
            resource = DynamicClient(self.api).resources.get(api_version=self.watch.api_version,
                                                             kind=self.watch.kind)
        except ResourceNotFoundError:
            raise ValueError(f"{self.watch.kind} {self.watch.api_version}: the cluster does not serve it "
                             "(are the CRDs installed? make operator installs them)") from None
        except (ApiException, urllib3.exceptions.HTTPError) as e:
            raise ValueError(f"cannot reach the cluster: {getattr(e, 'reason', None) or e}") from None
        if not resource.namespaced:
            raise ValueError(f"{self.watch.kind}: only namespaced kinds can be watched")
        self.plural = resource.name

    def start(self) -> None:
        if not self.plural:
            self.resolve()
        for namespace in self.namespaces:
            self._thread(f"informer-{self.watch.name}-{namespace or 'all'}", self._inform, namespace)
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

    # -- list and watch ---------------------------------------------------------------------------------------

    def _list(self, namespace: str, **kwargs: Any) -> Any:
        g, v, p = self.watch.group, self.watch.version, self.plural
        selector = self.watch.label_selector()
        if selector:
            kwargs["label_selector"] = selector
        if namespace:
            return self.custom.list_namespaced_custom_object(g, v, namespace, p, **kwargs)
        return self.custom.list_cluster_custom_object(g, v, p, **kwargs)

    def _inform(self, namespace: str) -> None:
        backoff = 0.5
        while not self.stopping.is_set():
            try:
                version = self._relist(namespace)
                backoff = 0.5
                while not self.stopping.is_set():
                    version = self._watch(namespace, version)
                    if version is None:
                        break  # 410 Gone: what we knew is too old, list again
            except (ApiException, OSError, ValueError) as e:
                log.warning("%s: list/watch failed, retrying in %.1fs: %s", self.watch.name, backoff, e)
                self.stopping.wait(backoff)
                backoff = min(backoff * 2, 30.0)
            except Exception:  # noqa: BLE001 - the loop must outlive anything the client raises
                log.exception("%s: list/watch failed", self.watch.name)
                self.stopping.wait(backoff)

    def _relist(self, namespace: str) -> str:
        listed = self._list(namespace)
        items = {_key(o): o for o in listed.get("items", [])}
        for o in items.values():
            o.setdefault("apiVersion", self.watch.api_version)
            o.setdefault("kind", self.watch.kind)
        with self.cache_lock:
            gone = [k for k in self.cache if (not namespace or k[0] == namespace) and k not in items]
            for k in gone:
                del self.cache[k]
            changed = [k for k, o in items.items()
                       if wants_reconcile(self.cache.get(k), o, self.watch.watch_annotations_changes)]
            self.cache.update(items)
        for k in [*gone, *changed]:
            self.queue.add(k)
        self._synced_namespaces.add(namespace)
        if len(self._synced_namespaces) == len(self.namespaces) and not self.synced.is_set():
            # Objects deleted while no operator ran left their runs' directories: they go now.
            on_disk = [k for k in self.runner.objects(self.watch) if k[0] in self.namespaces or self.namespaces == [""]]
            with self.cache_lock:
                stale = [k for k in on_disk if k not in self.cache]
            for k in stale:
                self.queue.add(k)
            self.synced.set()
        return listed["metadata"]["resourceVersion"]

    def _watch(self, namespace: str, version: str) -> str | None:
        stream = watch.Watch()
        try:
            for event in stream.stream(self._list, namespace, resource_version=version, allow_watch_bookmarks=True,
                                       timeout_seconds=WATCH_TIMEOUT):
                if self.stopping.is_set():
                    break
                obj, kind = event["object"], event["type"]
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        return None
                    raise ValueError(f"watch error: {obj.get('message')}")
                version = obj["metadata"]["resourceVersion"]
                if kind == "BOOKMARK":
                    continue
                key = _key(obj)
                with self.cache_lock:
                    old = self.cache.get(key)
                    if kind == "DELETED":
                        self.cache.pop(key, None)
                    else:
                        self.cache[key] = obj
                if kind == "DELETED" or wants_reconcile(old, obj, self.watch.watch_annotations_changes):
                    self.queue.add(key)
        except ApiException as e:
            if e.status == 410:
                return None
            raise
        finally:
            stream.stop()
        return version

    # -- reconcile --------------------------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            key = self.queue.get()
            if key is None:
                return
            try:
                self.reconcile(key)
            except Exception as e:  # noqa: BLE001 - one object's trouble must not stop the worker
                log.exception("%s %s/%s: reconcile error", self.watch.kind, *key)
                self.metrics.reconciled(self.watch, "error", 0.0)
                if not isinstance(e, ApiException) or e.status != 404:
                    self.queue.add_rate_limited(key)
            finally:
                self.queue.done(key)

    def reconcile(self, key: Key) -> None:
        with self.cache_lock:
            obj = self.cache.get(key)
        if obj is None:
            self.queue.forget(key)
            self.failure_events.pop(key, None)
            self.runner.forget(self.watch, *key)  # gone: its runs' directory goes too
            return
        meta = obj["metadata"]
        finalizer = self.watch.finalizer.name if self.watch.finalizer else None
        deleting = bool(meta.get("deletionTimestamp"))
        if deleting and (not finalizer or finalizer not in (meta.get("finalizers") or [])):
            self.queue.forget(key)
            return  # being deleted and nothing of ours holds it: nothing to do, as the Ansible Operator does
        if not deleting and finalizer and finalizer not in (meta.get("finalizers") or []):
            obj = self._update(key, lambda o: o["metadata"].setdefault("finalizers", []).append(finalizer)
                               if finalizer not in (o["metadata"].get("finalizers") or []) else None, obj) or obj
        if self.watch.manage_status:
            self._write_status(key, status.running(), obj)
        started = time.monotonic()
        annotations = meta.get("annotations") or {}
        result = self.runner.run(self.watch, obj, extra_vars(self.watch, obj, finalizer=deleting), finalizer=deleting,
                                 cancel=self.cancelling.is_set, verbosity=verbosity(annotations, self.verbosity),
                                 max_artifacts=max_artifacts(annotations))
        elapsed = time.monotonic() - started
        if self.watch.manage_status:
            self._write_status(key, status.done(result.ok, result.stats, result.message()))
        if not result.ok:
            self.metrics.reconciled(self.watch, "error", elapsed)
            log.warning("%s %s/%s: reconcile failed: %s", self.watch.kind, *key, result.message())
            self._event(key, obj, result.message())
            self.queue.add_rate_limited(key)
            return
        self.queue.forget(key)
        self.failure_events.pop(key, None)
        if deleting and result.requeue_after is None:
            # The finalizer role finished its work: let the deletion go on.
            self._update(key, lambda o: o["metadata"]["finalizers"].remove(finalizer)
                         if finalizer in (o["metadata"].get("finalizers") or []) else None)
            self.metrics.reconciled(self.watch, "success", elapsed)
            return
        self.metrics.reconciled(self.watch, "requeue_after" if result.requeue_after is not None else "success",
                                elapsed)
        period = annotated(annotations, RECONCILE_PERIOD_ANNOTATION, parse_duration, self.reconcile_period)
        if result.requeue_after is not None:
            if result.requeue_after > 0:  # 0s asks for no requeue, as under the Ansible Operator
                self.queue.add_after(key, result.requeue_after)
        elif period > 0:
            self.queue.add_after(key, period)

    # -- writes -----------------------------------------------------------------------------------------------

    def _get(self, key: Key) -> dict[str, Any]:
        return self.custom.get_namespaced_custom_object(self.watch.group, self.watch.version, key[0], self.plural,
                                                        key[1])

    def _update(self, key: Key, change: Any, seen: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """Apply ``change`` to the object and replace it, on ``seen`` (the cached copy) first and a fresh one
        after a conflict; None when it is gone."""
        for _attempt in range(10):
            try:
                obj, seen = copy.deepcopy(seen) if seen else self._get(key), None
                before = repr(obj["metadata"].get("finalizers"))
                change(obj)
                if repr(obj["metadata"].get("finalizers")) == before:
                    return obj
                return self.custom.replace_namespaced_custom_object(
                    self.watch.group, self.watch.version, key[0], self.plural, key[1], obj)
            except ApiException as e:
                if e.status == 404:
                    return None
                if e.status != 409:
                    raise
        raise RuntimeError(f"{self.watch.kind} {key[0]}/{key[1]}: gave up after 10 write conflicts")

    def _write_status(self, key: Key, conditions: list[dict[str, Any]], seen: dict[str, Any] | None = None) -> None:
        for _attempt in range(10):
            try:
                obj, seen = copy.deepcopy(seen) if seen else self._get(key), None
                current = obj.get("status") or {}
                obj["status"] = {**current, "conditions": status.merge(current.get("conditions") or [], conditions)}
                self.custom.replace_namespaced_custom_object_status(
                    self.watch.group, self.watch.version, key[0], self.plural, key[1], obj)
                return
            except ApiException as e:
                if e.status == 404:
                    return
                if e.status != 409:
                    raise
        log.warning("%s %s/%s: status not written after 10 conflicts", self.watch.kind, *key)

    def _event(self, key: Key, obj: dict[str, Any], message: str) -> None:
        last = self.failure_events.get(key)
        try:
            if last and last.message == message:
                self.core.patch_namespaced_event(last.name, last.namespace,
                                                 {"count": last.count + 1, "lastTimestamp": status.now()})
                self.failure_events[key] = last._replace(count=last.count + 1)
                return
        except ApiException as e:
            if e.status != 404:  # an Event that expired is posted again
                log.warning("could not count the failure Event: %s", e.reason)
                return
        event = status.failure_event(obj, message, COMPONENT)
        namespace = event["metadata"]["namespace"]
        try:
            created = self.core.create_namespaced_event(namespace, event)
            self.failure_events[key] = FailureEvent(namespace, created.metadata.name, message, 1)
        except ApiException as e:
            log.warning("could not post the failure Event: %s", e.reason)


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
