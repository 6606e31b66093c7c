"""Prometheus metrics and the liveness/readiness endpoints.

Names follow the Ansible Operator (``ansible_operator_reconciles``: a histogram per GVK) and
controller-runtime (``controller_runtime_reconcile_total``, ``workqueue_depth``,
``leader_election_master_status``), so existing dashboards read them.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from metal3_operator.serving import BoundedHandler, BoundedServer, Limits

if TYPE_CHECKING:
    from metal3_operator.watches import Watch
    from metal3_operator.workqueue import WorkQueue

BUCKETS = (0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600)
# Probes and scrapes are GETs without a body, a few at a time: a connection that does not send its request within
# 10 s is closed, and idle ones never stop a probe (kubelet would restart the operator).
LIMITS = Limits(connections=32, idle=10.0, read=10.0, body=0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.reconciles = Histogram("ansible_operator_reconciles", "How long each reconcile's run took, by kind",
                                    ["GVK"], buckets=BUCKETS, registry=self.registry)
        self.results = Counter("controller_runtime_reconcile_total", "Reconciles by controller and result",
                               ["controller", "result"], registry=self.registry)
        self.depth = Gauge("workqueue_depth", "Keys waiting in each controller's work queue", ["name"],
                           registry=self.registry)
        self.leader = Gauge("leader_election_master_status", "1 while this replica leads", ["name"],
                            registry=self.registry)

    def track_queue(self, name: str, queue: WorkQueue) -> None:
        self.depth.labels(name=name).set_function(lambda: len(queue))

    def reconciled(self, watch: Watch, result: str, seconds: float) -> None:
        self.results.labels(controller=watch.name, result=result).inc()
        if result != "error" or seconds:
            self.reconciles.labels(GVK=f"{watch.api_version}, Kind={watch.kind}").observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def _address(bind: str) -> tuple[str, int]:
    host, _colon, port = bind.rpartition(":")
    return host or "0.0.0.0", int(port)


def serve(bind: str, routes: dict[str, Callable[[], tuple[int, str, bytes]]],
          limits: Limits | None = None) -> BoundedServer:
    """An HTTP server for ``routes`` (path -> (status, content type, body)) on a daemon thread."""

    class Handler(BoundedHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            route = routes.get(self.path.split("?")[0])
            code, content_type, body = route() if route else (404, "text/plain", b"not found\n")
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = BoundedServer(_address(bind), Handler, limits or LIMITS)
    threading.Thread(target=server.serve_forever, name=f"http-{bind}", daemon=True).start()
    return server


def probe(check: Callable[[], bool]) -> Callable[[], tuple[int, str, bytes]]:
    return lambda: (200, "text/plain", b"ok\n") if check() else (500, "text/plain", b"not ok\n")


def metrics_route(metrics: Metrics) -> Callable[[], tuple[int, str, bytes]]:
    return lambda: (200, CONTENT_TYPE_LATEST, metrics.exposition())
