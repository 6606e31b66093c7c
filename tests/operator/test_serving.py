"""The operator's plain-HTTP listeners under their limits: the health probes and metrics, and the proxy the roles
reach the API through. A connection that never speaks, or dribbles its request, is closed after the listener's
timeout; connections beyond its bound are closed rather than queued forever; the proxy refuses a body over its cap
(413) or of no stated length (411) without forwarding it. (The conversion webhook's TLS listener: in
test_conversion_webhook.py.) Real sockets against the real servers; short limits keep the tests quick."""
from __future__ import annotations

import http.server
import select
import socket
import threading
import time
from typing import Any, Iterator

import pytest
import requests
from kubernetes import client

from metal3_operator import metrics, proxy
from metal3_operator.serving import Limits

DETECT = 30.0  # seconds a client waits before it calls the server stuck: far over every limit below


def closed_by_server(sock: socket.socket, dribble: bytes = b"") -> bool:
    """Whether the server closes ``sock`` within DETECT seconds; with ``dribble``, one byte of it is sent every
    0.1 s meanwhile (a request that never ends)."""
    deadline = time.monotonic() + DETECT
    sent = 0
    while time.monotonic() < deadline:
        if select.select([sock], [], [], 0.1)[0]:
            try:
                if not sock.recv(65536):
                    return True
            except ConnectionResetError:
                return True
        if dribble:
            try:
                sock.send(dribble[sent % len(dribble):][:1])
            except (BrokenPipeError, ConnectionResetError):
                return True
            sent += 1
    return False


class Opened:
    def __init__(self, port: int) -> None:
        self.port, self.sockets = port, []

    def connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=DETECT)
        self.sockets.append(sock)
        return sock

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


# -- health probes and metrics --------------------------------------------------------------------------------

@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[Opened]:
    limits = getattr(request, "param", Limits(connections=8, idle=0.5, read=0.5, body=0, wait=0.1))
    monkeypatch.setattr(metrics, "LIMITS", limits, raising=False)  # read when it starts
    server = metrics.serve("127.0.0.1:0", {"/healthz": metrics.probe(lambda: True)})
    opened = Opened(server.server_address[1])
    yield opened
    opened.close()
    server.shutdown()
    server.server_close()


def healthz(port: int) -> int:
    return requests.get(f"http://127.0.0.1:{port}/healthz", timeout=DETECT).status_code


def test_a_connection_to_the_probes_that_never_speaks_is_closed(probes: Opened) -> None:
    assert closed_by_server(probes.connect())
    assert healthz(probes.port) == 200


def test_a_client_that_dribbles_its_request_to_the_probes_is_closed(probes: Opened) -> None:
    sock = probes.connect()
    sock.sendall(b"GET /healthz HTTP/1.1\r\n")
    assert closed_by_server(sock, dribble=b"X-Slow: y\r\n")  # each byte in time, the whole request never
    assert healthz(probes.port) == 200


def test_idle_connections_under_the_bound_do_not_stop_a_probe(probes: Opened) -> None:
    for _attempt in range(7):
        probes.connect()
    assert healthz(probes.port) == 200


@pytest.mark.parametrize("probes", [Limits(connections=4, idle=DETECT * 2, read=DETECT * 2, body=0, wait=0.1)],
                         indirect=True)
def test_connections_beyond_the_bound_are_closed_and_the_probes_answer_once_the_others_go(probes: Opened) -> None:
    held = [probes.connect() for _count in range(4)]
    time.sleep(0.2)  # the server has taken them
    assert closed_by_server(probes.connect())
    for sock in held:
        sock.close()
    time.sleep(0.2)  # their slots are free again
    assert healthz(probes.port) == 200


# -- the roles' proxy -------------------------------------------------------------------------------------------

class Upstream(http.server.BaseHTTPRequestHandler):
    """Stands for the API server: answers every request with an empty object, and keeps the bodies it got."""

    bodies: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.bodies.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_POST  # noqa: N815

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def roles_proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[proxy.Proxy, Opened, list[bytes]]]:
    """The proxy, with a small body cap and short timeouts, in front of an upstream that keeps what it gets."""
    monkeypatch.setattr(proxy, "LIMITS", Limits(connections=8, idle=0.5, read=0.5, body=1024, wait=0.1),
                        raising=False)
    got: list[bytes] = []
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), type("Kept", (Upstream,), {"bodies": got}))
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    api = client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{upstream.server_address[1]}"))
    started = proxy.Proxy(api).start()
    opened = Opened(started.server.server_address[1])
    yield started, opened, got
    opened.close()
    started.shutdown()
    upstream.shutdown()
    upstream.server_close()


CONFIGMAPS = "/api/v1/namespaces/ns/configmaps"
REFUSED = [
    # case, body (None: a body sent chunked, with no Content-Length), code, reason
    ("a body over the cap", b"x" * 1025, 413, "RequestEntityTooLarge"),
    ("a body of no stated length", None, 411, "LengthRequired"),
]


@pytest.mark.parametrize(("case", "body", "code", "reason"), REFUSED, ids=[c[0] for c in REFUSED])
def test_a_body_the_proxy_refuses_is_not_forwarded_and_the_proxy_keeps_serving(roles_proxy, case, body, code,
                                                                               reason) -> None:
    started, _proxy, forwarded = roles_proxy
    data = body if body is not None else (chunk for chunk in [b"{}"])
    answer = requests.post(started.url + CONFIGMAPS, data=data, timeout=DETECT)
    assert answer.status_code == code
    assert {k: v for k, v in answer.json().items() if k in ("code", "reason")} == {"code": code, "reason": reason}
    assert forwarded == []
    within = requests.post(started.url + CONFIGMAPS, data=b"x" * 1024, timeout=DETECT)  # at the cap
    assert within.status_code == 201 and forwarded == [b"x" * 1024]


def test_a_connection_to_the_proxy_that_never_speaks_is_closed(roles_proxy) -> None:
    _started, opened, _forwarded = roles_proxy
    assert closed_by_server(opened.connect())


def test_a_kept_alive_connection_to_the_proxy_is_closed_once_idle(roles_proxy) -> None:
    _started, opened, _forwarded = roles_proxy
    sock = opened.connect()
    sock.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
    answer = b""
    while b"{}" not in answer:
        answer += sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 201")  # answered, and kept alive ...
    assert closed_by_server(sock)  # ... until it idles
