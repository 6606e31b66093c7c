"""The roles' way to the API: an HTTP proxy on loopback that answers reads of watched objects from the operator's
watch cache and forwards everything else to the API server with the operator's credentials.

This is what the Ansible Operator does (``internal/ansible/proxy``): its roles get a kubeconfig naming the proxy,
a GET of an object of a kind it watches is answered from its informer cache (``X-Cache: HIT``), and every other
request - writes, lists, watches, discovery, kinds it does not watch, objects not (yet) cached - goes to the API
server, whose answer (404 and 409 included) the role gets unchanged.

Lists too, as the Ansible Operator's proxy answers them from its informers: a list of a kind whose objects a watch
cache holds (``lister``: a watched kind, or one the operator caches for the roles' lists, such as IPAddress) with at
most a label selector of equalities is answered from the cache, so that a role's list of a pool's addresses costs
the API server nothing and does not grow with the pool (issue 34). Anything else (another selector, a field
selector, paging, a namespace the cache does not watch) goes to the API server.

One difference: the Ansible Operator serves whatever its cache holds, even right after a role wrote a newer
version through it, so the role's next read-modify-write fails with a conflict until the watch catches up. Here
the proxy remembers the resourceVersion of each object it last saw written or read through the API, and serves
the cached copy only once the cache holds that version (``saw`` lets the operator's own writes count too).

The proxy counts what it did, by verb, resource and source (``cache`` or ``api``): ``counts()`` for the
benchmark, and ``metal3_operator_proxy_requests_total`` when it is given a metrics registry.
"""
from __future__ import annotations

import json
import logging
import threading
import urllib.parse
from collections import Counter as Tally
from collections import OrderedDict
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Callable

import urllib3
import yaml
from kubernetes import client

from metal3_operator.cache import at_least
from metal3_operator.serving import BoundedHandler, BoundedServer, Limits, MiB

log = logging.getLogger("metal3_operator.proxy")

# (api_version, plural, namespace or None for cluster-scoped kinds, name) -> the cached object, or None when the
# cache does not hold it (the request then goes to the API server).
Lookup = Callable[[str, str, str | None, str], dict[str, Any] | None]
# (api_version, plural, namespace or None for every namespace) -> the kind and the cached objects, or None when no
# synced cache holds all of them (the list then goes to the API server).
Lister = Callable[[str, str, str | None], "tuple[str, list[dict[str, Any]]] | None"]
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
              "transfer-encoding", "upgrade", "host", "authorization", "content-length"}
# Reads wait at most this long; a watch waits as long as its client does (it asks for timeoutSeconds itself).
TIMEOUT = urllib3.Timeout(connect=10, read=120)
WATCH_TIMEOUT = urllib3.Timeout(connect=10, read=None)
# Versions remembered at most (the oldest go first): a forgotten one only lets a stale read through.
REMEMBERED = 10_000
VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
# What one client may hold of the proxy: it listens on loopback, but every process of the pod reaches it, and a URL
# a tenant names could be fetched from there. 8 MiB of body (kube-apiserver refuses any over 3 MiB), 512
# connections at once (a role's module keeps one; watches hold theirs while they stream), 60 s for a kept-alive
# connection's next request and 60 s from a request's first byte to the end of its body.
LIMITS = Limits(connections=512, idle=60.0, read=60.0, body=8 * MiB, wait=1.0)


@dataclass(frozen=True)
class Request:
    """What a request asks the API, parsed from its path as kube-apiserver parses it (its RequestInfo)."""

    verb: str  # get, list, watch, create, update, patch, delete, deletecollection; the method's name otherwise
    api_version: str = ""  # "" for a non-resource request (discovery, /version, /openapi ...)
    plural: str = ""
    namespace: str | None = None
    name: str = ""
    subresource: str = ""
    path: str = ""

    @property
    def resource(self) -> str:
        """A metric label: ``group/plural[/subresource]`` (``core`` for the legacy group), or what a
        non-resource request reads."""
        if not self.plural:
            return "discovery" if self.path.startswith(("/api", "/apis")) else self.path.split("/")[1] or "/"
        group = self.api_version.rpartition("/")[0] or "core"
        return f"{group}/{self.plural}" + (f"/{self.subresource}" if self.subresource else "")

    @property
    def key(self) -> tuple[str, str, str | None, str]:
        return self.api_version, self.plural, self.namespace, self.name


def parse(method: str, target: str) -> Request:
    url = urllib.parse.urlsplit(target)
    query = urllib.parse.parse_qs(url.query)
    parts = [p for p in url.path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        api_version, rest = parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        api_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    else:
        return Request(method.lower(), path=url.path)
    if not rest:
        return Request(method.lower(), path=url.path)  # a group version's discovery document
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 2:
        namespace = rest[1]
        # /api/v1/namespaces/NAME is the Namespace object itself.
        rest = rest[2:] if len(rest) > 2 else ["namespaces", rest[1]]
        if rest[0] == "namespaces":
            namespace = None
    plural, name, subresource = (rest + ["", ""])[:3]
    if method == "GET":
        verb = "get" if name else ("watch" if query.get("watch", [""])[0] in ("true", "1") else "list")
    else:
        verb = VERBS.get(method, method.lower())
        if verb == "delete" and not name:
            verb = "deletecollection"
    return Request(verb, api_version, plural, namespace, name, subresource, url.path)


def equalities(selector: str) -> dict[str, str] | None:
    """A label selector of equalities only (``a=b,c==d``) as a dict; None for any other (``!=``, ``in``, ``!a``,
    ``a``), which the API server answers."""
    wanted: dict[str, str] = {}
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!" in term or "(" in term or "=" not in term:
            return None
        key, _equals, value = term.replace("==", "=", 1).partition("=")
        wanted[key.strip()] = value.strip()
    return wanted


def _version(obj: Any) -> str | None:
    return ((obj.get("metadata") or {}).get("resourceVersion") or None) if isinstance(obj, dict) else None


class Proxy:
    """``Proxy(api, lookup).start()``; ``url``, ``write_kubeconfig(path)``, ``counts()``, ``shutdown()``."""

    def __init__(self, api: client.ApiClient, lookup: Lookup | None = None, host: str = "127.0.0.1", port: int = 0,
                 registry: Any = None, limits: Limits | None = None, lister: Lister | None = None) -> None:
        self.api = api
        self.upstream = api.configuration.host.rstrip("/")
        self.lookup = lookup
        self.lister = lister
        self._pool = api.rest_client.pool_manager
        self._tally: Tally[tuple[str, str, str]] = Tally()
        self._versions: OrderedDict[tuple[str, str, str | None, str], str | None] = OrderedDict()
        self._lock = threading.Lock()
        self._counter = None
        if registry is not None:
            from prometheus_client import Counter

            self._counter = Counter("metal3_operator_proxy_requests_total",
                                    "Requests of the roles through the proxy, by verb, resource and source "
                                    "(cache: answered from the watch cache; api: forwarded)",
                                    ["verb", "resource", "source"], registry=registry)
        self.server = BoundedServer((host, port), _handler(self), limits or LIMITS)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        # A bound socket names its host as str; the socket types allow bytes too.
        return f"http://{host if isinstance(host, str) else host.decode()}:{port}"

    def start(self) -> Proxy:
        threading.Thread(target=self.server.serve_forever, name="proxy", daemon=True).start()
        log.info("serving the roles' API requests on %s", self.url)
        return self

    def shutdown(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def write_kubeconfig(self, path: Path) -> Path:
        """A kubeconfig naming the proxy (no credentials: the proxy adds the operator's), readable by the
        operator's user only."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "proxy",
            "clusters": [{"name": "proxy", "cluster": {"server": self.url}}],
            "users": [{"name": "proxy", "user": {}}],
            "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "proxy"}}]}))
        path.chmod(0o600)
        return path

    # -- counting ---------------------------------------------------------------------------------------------

    def counts(self) -> dict[tuple[str, str, str], int]:
        """(verb, resource, source) -> requests so far; source is ``cache`` or ``api``."""
        with self._lock:
            return dict(self._tally)

    def _count(self, request: Request, source: str) -> None:
        with self._lock:
            self._tally[request.verb, request.resource, source] += 1
        if self._counter is not None:
            self._counter.labels(verb=request.verb, resource=request.resource, source=source).inc()

    # -- what the cache may answer ----------------------------------------------------------------------------

    def saw(self, obj: dict[str, Any], api_version: str, plural: str) -> None:
        """Remember ``obj``'s resourceVersion as the newest: its cached copy is served again once the cache holds
        that version. For writes made elsewhere than through the proxy (the operator's own)."""
        meta = obj.get("metadata") or {}
        self._remember((api_version, plural, meta.get("namespace"), meta.get("name", "")), _version(obj))

    def newest(self, api_version: str, plural: str, namespace: str | None, name: str) -> tuple[bool, str | None]:
        """What went through here last of an object that the cache had not caught up with when it did: (True,
        its version; None when the object went), or (False, None) when there is none."""
        key = (api_version, plural, namespace, name)
        with self._lock:
            return (key in self._versions), self._versions.get(key)

    def _remember(self, key: tuple[str, str, str | None, str], version: str | None) -> None:
        with self._lock:
            self._versions[key] = version
            self._versions.move_to_end(key)
            while len(self._versions) > REMEMBERED:
                self._versions.popitem(last=False)

    def cached(self, request: Request, query: str) -> dict[str, Any] | None:
        """The cached object that answers ``request``, or None when the API server must."""
        if self.lookup is None or request.verb != "get" or request.subresource not in ("", "status") or query:
            return None
        obj = self.lookup(*request.key)
        with self._lock:
            newest = self._versions.get(request.key, "")
            if obj is not None and newest != "" and (newest is None or not at_least(obj, newest)):
                return None  # the cache has not caught up with what went through here: ask the API server
            self._versions.pop(request.key, None)  # caught up (or gone from the cache too): nothing to wait for
        return obj

    def cached_list(self, request: Request, query: str) -> dict[str, Any] | None:
        """The answer to ``request``, a list, from the watch caches, as kube-apiserver words it (with no
        resourceVersion: nothing can watch from it); None when the API server must answer."""
        if self.lister is None or request.verb != "list" or request.subresource:
            return None
        params = urllib.parse.parse_qs(query, keep_blank_values=True)
        if set(params) - {"labelSelector"}:
            return None
        wanted = equalities(params.get("labelSelector", [""])[0])
        if wanted is None:
            return None
        listed = self.lister(request.api_version, request.plural, request.namespace)
        if listed is None or not self._caught_up(request, listed[1]):
            return None
        kind, objects = listed
        labelled = [o for o in objects if wanted.items() <= ((o.get("metadata") or {}).get("labels") or {}).items()]
        return {"apiVersion": request.api_version, "kind": f"{kind}List", "metadata": {"resourceVersion": ""},
                "items": labelled}

    def _caught_up(self, request: Request, objects: list[dict[str, Any]]) -> bool:
        """Whether the cached ``objects`` hold every object of the list's kind and namespace that went through
        here since (at the version written, or gone when deleted); what they hold is forgotten."""
        held = {((o["metadata"].get("namespace")), o["metadata"]["name"]): o for o in objects}
        with self._lock:
            pending = [key for key in self._versions if key[:2] == (request.api_version, request.plural)
                       and (request.namespace is None or key[2] == request.namespace)]
            for key in pending:
                version, obj = self._versions[key], held.get(key[2:])
                if (obj is not None and (version is None or not at_least(obj, version))) or \
                        (obj is None and version is not None):
                    return False
            for key in pending:
                del self._versions[key]
        return True

    def _learn(self, request: Request, status: int, body: bytes) -> None:
        """Remember the version a forwarded request read or wrote (a deletion: that the object is gone)."""
        one_object = request.name or request.verb == "create"  # a create names its object in the answer
        if not one_object or request.verb not in ("get", "create", "update", "patch", "delete"):
            return
        if status == 404:
            self._remember(request.key, None)
        if not 200 <= status < 300:
            return
        try:
            answer = json.loads(body)
        except ValueError:
            return  # not JSON (an encoding the role asked for): nothing learnt, the cache stays in use
        if not isinstance(answer, dict):
            return
        # A deletion is answered with the object while its finalizers hold it, with a Status once it went.
        gone = request.verb == "delete" and answer.get("kind") == "Status"
        name = request.name or (answer.get("metadata") or {}).get("name", "")
        self._remember((request.api_version, request.plural, request.namespace, name),
                       None if gone else _version(answer))


def _handler(proxy: Proxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BoundedHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: a role's module makes its requests on one connection
        # Headers and body are two writes: with Nagle's algorithm the body would wait for the client's delayed
        # ACK, 40 ms a request.
        disable_nagle_algorithm = True

        def do_GET(self) -> None:  # noqa: N802 - http.server's names
            self._serve()

        do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET  # noqa: N815

        def _serve(self) -> None:
            request = parse(self.command, self.path)
            query = urllib.parse.urlsplit(self.path).query
            obj = proxy.cached(request, query) or proxy.cached_list(request, query)
            if obj is not None:
                obj = {"apiVersion": request.api_version, **obj}
                proxy._count(request, "cache")  # before the answer: whoever got it finds it counted
                self._answer(200, json.dumps(obj).encode(), {"Content-Type": "application/json", "X-Cache": "HIT"})
                return
            body = self.read_body(required=False)
            if body is None:
                return  # refused (411, 413), or the role went away
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            proxy.api.update_params_for_auth(headers, [], ["BearerToken"], self.path, self.command, None)
            try:
                answer = proxy._pool.urlopen(self.command, proxy.upstream + self.path, body=body or None,
                                             headers=headers,
                                             redirect=False, retries=False, preload_content=request.verb != "watch",
                                             decode_content=False,
                                             timeout=WATCH_TIMEOUT if request.verb == "watch" else TIMEOUT)
            except urllib3.exceptions.HTTPError as e:
                self._unavailable(e)
                return
            proxy._count(request, "api")
            passed = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_BY_HOP}
            if request.verb != "watch":
                proxy._learn(request, answer.status, answer.data)
                self._answer(answer.status, answer.data, passed)
                return
            self._stream(answer, passed)

        def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _stream(self, answer: Any, headers: dict[str, str]) -> None:
            """A watch: each event as it comes, in chunks, until either side ends it."""
            ended = False
            try:
                self.send_response(answer.status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                chunks = answer.read_chunked(decode_content=False) if answer.chunked else answer.stream(65536)
                for chunk in chunks:
                    if chunk:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.write(b"0\r\n\r\n")
                ended = True
            except (OSError, urllib3.exceptions.HTTPError):
                self.close_connection = True  # the role went away, or the API server did
            finally:
                if not ended:  # the rest of the watch is still on its way: its connection can serve nothing else
                    answer.close()
                answer.release_conn()

        def _unavailable(self, error: Exception) -> None:
            self._status(503, "ServiceUnavailable",
                         f"the operator's proxy cannot reach the API server at {proxy.upstream}: {error}")

        def refuse(self, code: int, message: str) -> None:
            reasons = {411: "LengthRequired", 413: "RequestEntityTooLarge"}
            self._status(code, reasons.get(code, "BadRequest"), message)

        def _status(self, code: int, reason: str, message: str) -> None:
            """A Status, as kube-apiserver answers a failure."""
            status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": message, "reason": reason, "code": code}
            headers = {"Content-Type": "application/json"}
            if self.close_connection:
                headers["Connection"] = "close"
            self._answer(code, json.dumps(status).encode(), headers)

    return Handler
