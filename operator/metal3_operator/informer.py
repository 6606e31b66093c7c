"""List and watch one kind into its cache, and say which objects changed in a way that wants a reconcile.

An object wants one when it appears, when its generation changes (spec edits; status writes do not count), when
it starts being deleted, when it is deleted, and - for a watch with watchAnnotationsChanges - when its
annotations change. A watch whose resourceVersion is too old (410 Gone) is followed by a fresh list.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable

import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from metal3_operator.cache import Cache, Key, key_of
from metal3_operator.watches import Watch

log = logging.getLogger("metal3_operator.informer")
WATCH_TIMEOUT = 300


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


def _version(obj: dict[str, Any] | None) -> str | None:
    return obj["metadata"].get("resourceVersion") if obj else None


class Informer:
    """Keeps ``cache`` in step with the cluster for each of ``namespaces`` ("" for all), calling ``changed`` with
    the key of each object that wants a reconcile, ``observed`` with the key of each object that changed in any
    way (its status too: what waiters wait on), and ``synced`` once every namespace was listed."""

    def __init__(self, w: Watch, api: client.ApiClient, cache: Cache, namespaces: list[str],
                 changed: Callable[[Key], None], synced: Callable[[], None], stopping: threading.Event,
                 observed: Callable[[Key], None] = lambda key: None) -> None:
        self.watch = w
        self.api = api
        self.custom = client.CustomObjectsApi(api)
        self.cache = cache
        self.namespaces = namespaces or [""]
        self.changed = changed
        self.observed = observed
        self.on_synced = synced
        self.stopping = stopping
        self.synced = threading.Event()
        self._synced_namespaces: set[str] = set()
        self.plural = ""

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

    def _list(self, namespace: str, **kwargs: Any) -> Any:
        g, v, p = self.watch.group, self.watch.version, self.plural
        selector = self.watch.label_selector()
        if selector:
            kwargs["label_selector"] = selector
        if namespace:
            return self.custom.list_namespaced_custom_object(g, v, namespace, p, **kwargs)
        return self.custom.list_cluster_custom_object(g, v, p, **kwargs)

    def run(self, namespace: str) -> None:
        """List and watch ``namespace`` until stopped, listing again after any failure (backed off)."""
        backoff = 0.5
        while not self.stopping.is_set():
            try:
                version: str | None = self.relist(namespace)
                backoff = 0.5
                # None: 410 Gone, what we knew is too old - list again
                while version is not None and not self.stopping.is_set():
                    version = self.watch_from(namespace, version)
            except (ApiException, OSError, ValueError) as e:
                log.warning("%s: list/watch failed, retrying in %.1fs: %s", self.watch.name, backoff, e)
                self.stopping.wait(backoff)
                backoff = min(backoff * 2, 30.0)
            except Exception:  # noqa: BLE001 - the loop must outlive anything the client raises
                log.exception("%s: list/watch failed", self.watch.name)
                self.stopping.wait(backoff)

    def relist(self, namespace: str) -> str:
        """List ``namespace`` into the cache; the list's resourceVersion, to watch from."""
        listed = self._list(namespace)
        items = listed.get("items", [])
        gone, replaced = self.cache.replace(namespace, items)
        annotations = self.watch.watch_annotations_changes
        changed = [key_of(o) for o in items if wants_reconcile(replaced[key_of(o)], o, annotations)]
        for key in [*gone, *changed]:
            self.changed(key)
        for key in [*gone, *(key_of(o) for o in items if _version(replaced[key_of(o)]) != _version(o))]:
            self.observed(key)
        self._synced_namespaces.add(namespace)
        if len(self._synced_namespaces) == len(self.namespaces) and not self.synced.is_set():
            self.on_synced()
            self.synced.set()
        return str(listed["metadata"]["resourceVersion"])

    def watch_from(self, namespace: str, version: str) -> str | None:
        """Follow changes from ``version`` until the watch times out (the last version seen) or the version is
        too old (None: list again)."""
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
                key = key_of(obj)
                if kind == "DELETED":
                    self.cache.remove(key)
                    self.changed(key)
                elif wants_reconcile(self.cache.put(obj), obj, self.watch.watch_annotations_changes):
                    self.changed(key)
                self.observed(key)
        except ApiException as e:
            if e.status == 410:
                return None
            raise
        finally:
            stream.stop()
        return version
