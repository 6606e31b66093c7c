"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

A replica leads while it holds the Lease and renews it; the others try every retry_period and take it over
once it has not been renewed for leaseDurationSeconds - measured on their own clock, from when they last saw
the record change, so clocks need not agree. Every write carries the resourceVersion it read: of two
replicas racing for the Lease, one gets a Conflict and stays a follower.
"""
from __future__ import annotations

import datetime
import logging
import threading
import time
from typing import Any, Callable

from kubernetes import client
from kubernetes.client.exceptions import ApiException

log = logging.getLogger("metal3_operator.leader")


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class LeaderElector:
    def __init__(self, api_client: client.ApiClient, namespace: str, name: str, identity: str,
                 lease_duration: float = 15.0, renew_deadline: float = 10.0, retry_period: float = 2.0,
                 on_started_leading: Callable[[], None] | None = None,
                 on_stopped_leading: Callable[[], None] | None = None) -> None:
        self.api = client.CoordinationV1Api(api_client)
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self._renewed = 0.0  # monotonic time of our last successful acquire or renew
        self._observed: tuple[Any, float] = (None, 0.0)  # (the holder's record, when we saw it change)

    @property
    def is_leader(self) -> bool:
        return self._renewed > 0 and time.monotonic() - self._renewed < self.renew_deadline

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set() and not self._try():
            stop.wait(self.retry_period)
        if stop.is_set():
            return
        log.info("%s became the leader of %s/%s", self.identity, self.namespace, self.name)
        if self.on_started_leading:
            self.on_started_leading()
        while not stop.wait(self.retry_period):
            if self._try():
                continue
            if not self.is_leader:
                log.error("%s could not renew %s/%s within %.0fs", self.identity, self.namespace, self.name,
                          self.renew_deadline)
                break
        if stop.is_set():
            self._release()
        self._renewed = 0.0
        if self.on_stopped_leading:
            self.on_stopped_leading()

    def _spec(self, previous: client.V1LeaseSpec | None) -> client.V1LeaseSpec:
        """Our record, in place of ``previous`` (None: a new Lease): a renewal keeps its acquire time, a
        takeover from another holder counts a transition."""
        now = _now()
        acquired: datetime.datetime | None = now
        transitions = 0
        if previous is not None:
            transitions = previous.lease_transitions or 0
            if previous.holder_identity == self.identity:
                acquired = previous.acquire_time
            elif previous.holder_identity:
                transitions += 1
        return client.V1LeaseSpec(
            holder_identity=self.identity, lease_duration_seconds=max(1, round(self.lease_duration)),
            acquire_time=acquired, renew_time=now, lease_transitions=transitions)

    def _try(self) -> bool:
        """Acquire or renew the Lease; False when another replica holds it or a write lost a race."""
        try:
            try:
                lease = self.api.read_namespaced_lease(self.name, self.namespace)
            except ApiException as e:
                if e.status != 404:
                    raise
                self.api.create_namespaced_lease(self.namespace, client.V1Lease(
                    metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace), spec=self._spec(None)))
                self._renewed = time.monotonic()
                return True
            spec = lease.spec or client.V1LeaseSpec()  # a Lease without a spec is held by no one
            record = (spec.holder_identity, spec.renew_time, spec.lease_duration_seconds)
            if record != self._observed[0]:
                self._observed = (record, time.monotonic())
            held_by_other = spec.holder_identity and spec.holder_identity != self.identity
            expired = time.monotonic() > self._observed[1] + (spec.lease_duration_seconds or self.lease_duration)
            if held_by_other and not expired:
                return False
            lease.spec = self._spec(spec)
            self.api.replace_namespaced_lease(self.name, self.namespace, lease)
            self._renewed = time.monotonic()
            return True
        except ApiException as e:
            if e.status not in (409,):
                log.warning("lease %s/%s: %s %s", self.namespace, self.name, e.status, e.reason)
            return False
        except Exception as e:  # noqa: BLE001 - an unreachable API is a failed round, retried
            log.warning("lease %s/%s: %s", self.namespace, self.name, e)
            return False

    def _release(self) -> None:
        """Hand the Lease back at once on a clean stop, so a follower need not wait for it to expire."""
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace)
            spec = lease.spec
            if spec is None or spec.holder_identity != self.identity:
                return
            spec.holder_identity = ""
            spec.lease_duration_seconds = 1
            spec.renew_time = _now()
            self.api.replace_namespaced_lease(self.name, self.namespace, lease)
            log.info("%s released %s/%s", self.identity, self.namespace, self.name)
        except Exception as e:  # noqa: BLE001 - the lease then expires on its own
            log.warning("could not release lease %s/%s: %s", self.namespace, self.name, e)
