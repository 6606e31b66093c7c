"""The watch caches the proxy answers the roles' lists from (issue 34): each watched kind's, and those of the
kinds the roles list but the operator reconciles none of (``--list-cache``: an IPClaim's run lists its pool's
IPAddresses), each kept by an informer of its own that wakes no reconcile.

A cache answers for a namespace only once it has listed every namespace it watches, and only for one it watches
(all of them when the operator watches every namespace), and never when its watch selects by label (it holds only
some of the kind's objects): anything else goes to the API server.
"""
from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Any

from kubernetes import client

from metal3_operator.cache import Cache
from metal3_operator.informer import Informer
from metal3_operator.watches import Watch, WatchesError

log = logging.getLogger("metal3_operator.lists")
# What an IPClaim's and an IPAddressClaim's runs list: the addresses of a pool, by its label.
DEFAULT_LIST_CACHE = "ipam.metal3.io/v1alpha1/IPAddress"


@dataclasses.dataclass
class Listed:
    kind: str
    cache: Cache
    informer: Informer

    def answers(self, namespace: str | None) -> bool:
        watched = self.informer.namespaces
        return self.informer.synced.is_set() and not self.informer.watch.label_selector() and \
            (watched == [""] or (namespace is not None and namespace in watched))


def parse_kinds(text: str) -> list[Watch]:
    """``group/version/Kind`` entries, comma-separated (``v1/Kind`` for the core group), as watches of no role."""
    kinds = []
    for entry in filter(None, (e.strip() for e in text.split(","))):
        parts = entry.split("/")
        if len(parts) == 2:
            parts.insert(0, "")
        if len(parts) != 3 or not all(parts[1:]) or not parts[2][:1].isupper():
            raise WatchesError(f"--list-cache: {entry!r} is not group/version/Kind (such as {DEFAULT_LIST_CACHE})")
        if (parts[0], parts[2]) == ("", "Secret"):
            raise WatchesError("--list-cache: Secrets are never cached (their data would stay in the operator)")
        kinds.append(Watch(parts[0], parts[1], parts[2]))
    return kinds


class ListCaches:
    """(api_version, plural, namespace) -> the kind and its cached objects, for the proxy (``proxy.Lister``)."""

    def __init__(self) -> None:
        self._by_resource: dict[tuple[str, str], Listed] = {}
        self._own: list[Informer] = []
        self.stopping = threading.Event()

    def add(self, informer: Informer, cache: Cache) -> None:
        """A kind's cache, once its informer knows the kind's resource."""
        self._by_resource[informer.watch.api_version, informer.plural] = Listed(informer.watch.kind, cache, informer)

    def follow(self, w: Watch, api: client.ApiClient, namespaces: list[str]) -> None:
        """Keep a cache of ``w``'s kind for the lists alone, with an informer that wakes no reconcile. A kind the
        cluster does not serve (its CRDs are not installed) is logged and left to the API server."""
        if any((listed.informer.watch.group, listed.kind) == (w.group, w.kind)
               for listed in self._by_resource.values()):
            return  # watched already
        informer = Informer(w, api, Cache(w.api_version, w.kind), namespaces, lambda key: None, lambda: None,
                            self.stopping)
        try:
            informer.resolve()
        except ValueError as e:
            log.warning("not caching the lists of %s: %s", w.name, e)
            return
        self.add(informer, informer.cache)
        self._own.append(informer)

    def start(self) -> None:
        for informer in self._own:
            for namespace in informer.namespaces:
                threading.Thread(target=informer.run, args=(namespace,), name=f"list-cache-{informer.watch.name}",
                                 daemon=True).start()

    def stop(self) -> None:
        self.stopping.set()

    def __call__(self, api_version: str, plural: str, namespace: str | None) -> tuple[str, list[dict[str, Any]]] | None:
        listed = self._by_resource.get((api_version, plural))
        if listed is None or not listed.answers(namespace):
            return None
        return listed.kind, listed.cache.list(namespace)
