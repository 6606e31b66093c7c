"""The operator process: flags, one controller per watch, leader election, probes and metrics, shutdown.

Flag names and defaults are the Ansible Operator's where it has one (``internal/ansible/flags/flag.go``).
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import ssl
import sys
import tempfile
import threading
import time
import uuid
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kubernetes import client, config

from metal3_operator import collection

# The process's entry: the engine is imported from the collection, where the roles' Ansible finds it.
collection.make_importable()

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Metal3Error  # noqa: E402
from ansible_collections.metal3.baremetal.plugins.module_utils.store.kube import KubernetesStore  # noqa: E402
from metal3_operator import conversion_webhook  # noqa: E402
from metal3_operator.cache import Cache  # noqa: E402
from metal3_operator.controller import Controller  # noqa: E402
from metal3_operator.leader import LeaderElector  # noqa: E402
from metal3_operator.lists import DEFAULT_LIST_CACHE, ListCaches, parse_kinds  # noqa: E402
from metal3_operator.metrics import Metrics, metrics_route, probe, serve  # noqa: E402
from metal3_operator.prefork import UntestedAnsibleCore, check_ansible_core  # noqa: E402
from metal3_operator.proxy import Proxy  # noqa: E402
from metal3_operator.runner import Runner  # noqa: E402
from metal3_operator.waiters import Waiters  # noqa: E402
from metal3_operator.watches import Watch, WatchesError, load, parse_duration, parse_int  # noqa: E402

log = logging.getLogger("metal3_operator")


def _kind_setting(watch: Watch, prefixes: tuple[str, ...], default: int, valid: range) -> int:
    """A per-kind setting from the environment, spelt as the Ansible Operator spells it:
    ``<PREFIX>_<KIND>_<GROUP>``, upper-cased, dots and dashes as underscores."""
    suffix = f"{watch.kind}_{watch.group}".upper().replace(".", "_").replace("-", "_")
    for name in (f"{prefix}_{suffix}" for prefix in prefixes):
        value = os.environ.get(name)
        if value:
            return parse_int(value, valid, name)
    return default


def workers_for(watch: Watch, default: int) -> int:
    """MAX_CONCURRENT_RECONCILES_<KIND>_<GROUP> (or the legacy WORKER_<KIND>_<GROUP>), else ``default``."""
    return _kind_setting(watch, ("MAX_CONCURRENT_RECONCILES", "WORKER"), default, range(1, 10_000))


def verbosity_for(watch: Watch, default: int) -> int:
    """ANSIBLE_VERBOSITY_<KIND>_<GROUP>, else ``default`` (a CR's verbosity annotation overrides both)."""
    return _kind_setting(watch, ("ANSIBLE_VERBOSITY",), default, range(8))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="metal3_operator", description=__doc__)
    p.add_argument("--watches-file", default=os.environ.get("WATCHES_FILE", "./watches.yaml"))
    p.add_argument("--kubeconfig", default=None, help="default: KUBECONFIG, ~/.kube/config, or in-cluster")
    p.add_argument("--leader-elect", action="store_true")
    p.add_argument("--leader-election-id", default="metal3-baremetal-operator")
    p.add_argument("--leader-election-namespace", default=None)
    p.add_argument("--metrics-bind-address", default=":8080", help="'0' turns it off")
    p.add_argument("--health-probe-bind-address", default=":6789", help="'0' turns it off")
    p.add_argument("--webhook-bind-address", default="0",
                   help="the CAPM3 conversion webhook over TLS, e.g. ':9443'; '0' (the default) turns it off")
    p.add_argument("--webhook-cert-dir", default="/tmp/k8s-webhook-server/serving-certs",  # noqa: S108
                   help="holds the webhook's tls.crt and tls.key")
    p.add_argument("--max-concurrent-reconciles", type=int, default=os.cpu_count() or 1)
    p.add_argument("--reconcile-period", default="10h")
    # 0, not the Ansible Operator's 2: the runs' output is not read, and each -v costs display work.
    p.add_argument("--ansible-verbosity", type=int, default=0, choices=range(8))
    p.add_argument("--runner-dir", default=os.path.join(tempfile.gettempdir(), "ansible-operator", "runner"))
    p.add_argument("--graceful-shutdown-timeout", default="30s")
    # Not the Ansible Operator's: it writes Running before every run ("0s" does that here too).
    p.add_argument("--running-condition-after", default="30s",
                   help="write a CR's Running condition before its run when its last run lasted this long or "
                        "longer; a CR whose runs are quicker goes straight to its result, one status write fewer")
    p.add_argument("--no-prefork", action="store_true", help="start ansible-playbook afresh for every run")
    # proxy: the roles reach the API through the operator, which answers their reads of watched kinds from its cache
    p.add_argument("--proxy", action=argparse.BooleanOptionalAction, default=True,
                   help="the roles reach the API through a proxy that reads watched objects from the operator's cache")
    p.add_argument("--list-cache", default=DEFAULT_LIST_CACHE, metavar="GROUP/VERSION/KIND,...",
                   help="kinds the proxy answers the roles' lists of from a watch cache, besides the watched kinds "
                        "('' for none)")
    p.add_argument("--proxy-port", type=int, default=0,
                   help="the proxy's loopback port; 0 (the default) picks a free one (the Ansible Operator's is 8888)")
    return p.parse_args(argv)


def _api_client(kubeconfig: str | None) -> client.ApiClient:
    configuration = client.Configuration()
    if kubeconfig or os.environ.get("KUBECONFIG") or not os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    else:
        config.load_incluster_config(client_configuration=configuration)
    configuration.connection_pool_maxsize = 32  # workers, informers and the elector share it
    return client.ApiClient(configuration)


def _namespace(explicit: str | None) -> str:
    if explicit:
        return explicit
    try:
        return Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read_text().strip()
    except OSError:
        return os.environ.get("POD_NAMESPACE") or "default"


class Manager:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        if not args.no_prefork:
            # The prefork server resets ansible-core's internals: an untested ansible-core stops the operator here,
            # before anything starts, rather than fork runs that inherit another's state.
            check_ansible_core()
        self.watches = load(args.watches_file)
        self.api = _api_client(args.kubeconfig)
        self.metrics = Metrics()
        self.stop = threading.Event()
        self.started = threading.Event()
        self.lost = threading.Event()
        # Every setting is read before anything starts: a bad one is an error, not a half-started operator.
        namespaces = [n.strip() for n in os.environ.get("WATCH_NAMESPACE", "").split(",") if n.strip()]
        period = parse_duration(args.reconcile_period, "--reconcile-period")
        self.grace = parse_duration(args.graceful_shutdown_timeout, "--graceful-shutdown-timeout")
        running_after = parse_duration(args.running_condition_after, "--running-condition-after")
        kinds = [(w, workers_for(w, args.max_concurrent_reconciles), verbosity_for(w, args.ansible_verbosity))
                 for w in self.watches]
        envvars = {"METAL3_BACKEND": "kubernetes"}
        if args.kubeconfig or os.environ.get("KUBECONFIG"):
            envvars["K8S_AUTH_KUBECONFIG"] = os.path.abspath(args.kubeconfig or os.environ["KUBECONFIG"])
        # The operator's own writes (finalizers, status, Events) go through the collection's store, as the roles'
        # do: one client stack, one conflict retry. It finds the cluster as _api_client does. The backend itself,
        # not open_store's admitting one: the operator touches only metadata and status, and must be able to put its
        # finalizer and a Failure condition on an object whose spec the domain's admission rules refuse.
        self.store = KubernetesStore(kubeconfig=args.kubeconfig)
        # proxy: started with the controllers; the roles are given a kubeconfig naming it.
        self.lists = ListCaches()
        self.list_cache = parse_kinds(args.list_cache) if args.proxy else []
        self.proxy = Proxy(self.api, self._cached, port=args.proxy_port, registry=self.metrics.registry,
                           lister=self.lists) if args.proxy else None
        self._caches: dict[tuple[str, str], Cache] = {}
        if self.proxy:
            envvars["K8S_AUTH_KUBECONFIG"] = str(self.proxy.write_kubeconfig(Path(args.runner_dir) / "kubeconfig"))
        self.runner = Runner(Path(args.runner_dir), envvars, prefork=not args.no_prefork)
        # Objects waiting on others (an exhausted claim on its pool) come back when an informer sees those change.
        self.waiters = Waiters(lambda group, kind, namespace: any(c.watches(group, kind, namespace)
                                                                  for c in self.controllers))
        self.controllers = [Controller(w, self.api, self.store, self.runner, self.metrics, workers, period, namespaces,
                                       verbosity, waiters=self.waiters, running_after=running_after,
                                       ledger=self.proxy)
                            for w, workers, verbosity in kinds]

    def _lead(self) -> None:
        log.info("starting %d controllers", len(self.controllers))
        self.metrics.leader.labels(name=self.args.leader_election_id).set(1)
        for c in self.controllers:
            c.start()
        self.lists.start()
        self.started.set()

    def _lose(self) -> None:
        self.metrics.leader.labels(name=self.args.leader_election_id).set(0)
        if not self.stop.is_set():
            # As controller-runtime does: a replica that lost its lease exits, and comes back as a follower.
            log.error("leadership lost; exiting")
            self.lost.set()
            self.stop.set()

    def healthy(self) -> bool:
        return all(c.healthy() for c in self.controllers) if self.started.is_set() else True

    def ready(self) -> bool:
        return not self.started.is_set() or all(c.synced.is_set() for c in self.controllers)

    def serve(self) -> list[ThreadingHTTPServer]:
        servers: list[ThreadingHTTPServer] = []
        for flag, bind, routes in (
                ("--health-probe-bind-address", self.args.health_probe_bind_address,
                 {"/healthz": probe(self.healthy), "/readyz": probe(self.ready)}),
                ("--metrics-bind-address", self.args.metrics_bind_address, {"/metrics": metrics_route(self.metrics)})):
            if bind == "0":
                continue
            try:
                servers.append(serve(bind, routes))
            except (OSError, ValueError) as e:
                raise ValueError(f"{flag} {bind}: {e}") from None
        if self.args.webhook_bind_address != "0":
            certs = Path(self.args.webhook_cert_dir)
            try:
                servers.append(conversion_webhook.serve(self.args.webhook_bind_address, certs / "tls.crt",
                                                        certs / "tls.key"))
            except (OSError, ssl.SSLError, ValueError) as e:
                raise ValueError(f"--webhook-bind-address {self.args.webhook_bind_address}: {e}") from None
        return servers

    def run(self) -> int:
        for c in self.controllers:
            c.resolve()
        # proxy: each watched kind's cache, by the apiVersion and resource a role's request names
        self._caches = {(c.watch.api_version, c.informer.plural): c.cache for c in self.controllers}
        for c in self.controllers:
            self.lists.add(c.informer, c.cache)
        namespaces = self.controllers[0].namespaces if self.controllers else [""]
        for w in self.list_cache:
            self.lists.follow(w, self.api, namespaces)
        if self.proxy:
            self.proxy.start()
        servers = self.serve()
        elector = None
        # The lease is handed back only once the reconciles under way are over: a new leader never runs
        # a role for an object this replica still runs one for.
        release = threading.Event()
        if self.args.leader_elect:
            identity = f"{socket.gethostname()}_{uuid.uuid4()}"
            elector = LeaderElector(self.api, _namespace(self.args.leader_election_namespace),
                                    self.args.leader_election_id, identity,
                                    on_started_leading=self._lead, on_stopped_leading=self._lose)
            elector_thread = threading.Thread(target=elector.run, args=(release,), name="leader-election", daemon=True)
            elector_thread.start()
            log.info("waiting for leadership of %s as %s", self.args.leader_election_id, identity)
        else:
            self._lead()
        self.stop.wait()
        self.shutdown(self.grace)
        release.set()
        if elector:
            elector_thread.join(10)
        for server in servers:
            server.shutdown()
        if self.proxy:  # proxy
            self.proxy.shutdown()
        return 1 if self.lost.is_set() else 0

    def _cached(self, api_version: str, plural: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """proxy: the watch cache's copy of an object, None when no controller's cache holds it."""
        cache = self._caches.get((api_version, plural))
        return cache.get(namespace or "", name) if cache else None

    def shutdown(self, timeout: float) -> None:
        """Stop taking work, let runs under way finish for ``timeout``, cancel the rest."""
        log.info("shutting down: waiting up to %.0fs for reconciles under way", timeout)
        for c in self.controllers:
            c.stop()
        self.lists.stop()
        deadline = time.monotonic() + timeout
        if not all(c.join(deadline) for c in self.controllers):
            for c in self.controllers:
                c.cancel()
            for c in self.controllers:
                c.join(time.monotonic() + 10)
        self.runner.close()
        self.store.close()


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO").upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    manager = None
    try:
        manager = Manager(args)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: manager.stop.set())
        return manager.run()
    except (WatchesError, ValueError, OSError, config.ConfigException, Metal3Error, UntestedAnsibleCore) as e:
        print(f"metal3_operator: {e}", file=sys.stderr)
        return 2
    finally:
        if manager:
            manager.runner.close()
