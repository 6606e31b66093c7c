"""Bounded serving for the operator's listeners (conversion webhook, metrics, health probes, the roles' proxy).

``http.server`` as it comes trusts its clients: a TLS socket wrapped at the listener does each handshake inside
``accept()`` on the one serving thread, with no timeout, so one connection that never speaks stops every other; and
with plain HTTP each connection gets a thread that waits for its request forever, with no bound on how many, and
reads whatever body length the client names. ``BoundedServer`` closes each of these:

- ``accept()`` only accepts: the TLS handshake runs on the connection's own thread, under the read timeout;
- at most ``Limits.connections`` connections are served at once; a connection beyond them waits at most
  ``Limits.wait`` seconds for a free slot (the serving thread never waits longer) and is closed otherwise;
- a connection has ``Limits.idle`` seconds to start its request (the first, or the next on a kept-alive one) and
  ``Limits.read`` seconds from its first byte to the end of its body (a deadline, not a per-read timeout: a client
  that sends a byte at a time is dropped too); each write has ``Limits.read`` seconds;
- ``BoundedHandler.read_body`` refuses a body over ``Limits.body`` with 413 without keeping it, and a body of no
  stated length (chunked) with 411.
"""
from __future__ import annotations

import io
import logging
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

log = logging.getLogger("metal3_operator.serving")

MiB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    connections: int = 64  # served at once
    idle: float = 10.0  # seconds to wait for a request to start (TLS handshake included)
    read: float = 10.0  # seconds from a request's first byte to the end of its body; also each write's timeout
    body: int = 8 * MiB  # bytes of a request body
    wait: float = 0.25  # seconds a connection beyond ``connections`` may wait for a slot before it is closed


class _Deadline(io.RawIOBase):
    """The reading side of a connection, against a deadline: ``idle`` seconds for a request's first byte, then
    ``read`` seconds for the rest of it; ``arm()`` before each request."""

    def __init__(self, sock: socket.socket, limits: Limits) -> None:
        super().__init__()
        self.sock = sock
        self.limits = limits
        self.deadline = 0.0
        self.started = False

    def arm(self) -> None:
        self.deadline = time.monotonic() + self.limits.idle
        self.started = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the request was not read in time")
        self.sock.settimeout(remaining)
        try:
            n = self.sock.recv_into(buffer)
        finally:
            self.sock.settimeout(self.limits.read)  # writes keep their own timeout
        if n and not self.started:
            self.started = True
            self.deadline = time.monotonic() + self.limits.read
        return n


class BoundedServer(ThreadingHTTPServer):
    """A ``ThreadingHTTPServer`` under ``limits``, over TLS when given ``tls`` (a server-side context)."""

    daemon_threads = True
    request_queue_size = 128  # socketserver's 5 drops connections in a burst before accept() sees them

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], limits: Limits | None = None,
                 tls: ssl.SSLContext | None = None) -> None:
        self.limits = limits or Limits()
        self.tls = tls
        self._slots = threading.BoundedSemaphore(self.limits.connections)
        super().__init__(address, handler)

    # On the serving thread: never longer than ``limits.wait``.
    def verify_request(self, request: Any, client_address: Any) -> bool:
        if self._slots.acquire(timeout=self.limits.wait):
            return True
        log.warning("%s: %d connections served already; closing one from %s", self.server_address,
                    self.limits.connections, client_address)
        return False

    def process_request(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()  # no thread started to release it
            raise

    # On the connection's own thread.
    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def finish_request(self, request: Any, client_address: Any) -> None:
        request.settimeout(self.limits.idle)
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        conn = self.tls.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
        try:
            conn.do_handshake()  # one deadline for the whole handshake: the socket's timeout
        except (OSError, ValueError) as e:  # SSLError and TimeoutError are OSErrors
            log.debug("TLS handshake with %s failed: %s", client_address, e)
            conn.close()
            return
        try:
            super().finish_request(conn, client_address)
        finally:
            self.shutdown_request(conn)  # the accepted socket was detached into ``conn``

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that went away or was too slow is not the operator's error: no traceback on stderr.
        log.debug("connection from %s ended with an error", client_address, exc_info=True)


class BoundedHandler(BaseHTTPRequestHandler):
    """The handler side of ``BoundedServer``: requests read against its deadlines, bodies through ``read_body``."""

    server: BoundedServer
    _reader: _Deadline

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.limits.read)  # for writes; reads have their deadline
        self.rfile.close()  # reads go through the deadline instead
        self._reader = _Deadline(self.connection, self.server.limits)
        self.rfile = io.BufferedReader(self._reader)

    def handle_one_request(self) -> None:
        self._reader.arm()
        super().handle_one_request()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
        log.debug("%s: " + format, self.client_address, *args)  # a line per request would drown the log

    def read_body(self, required: bool = True) -> bytes | None:
        """The request's body; None once the request has been refused (411, 413, 400) or its client went away, and
        the connection is to be closed. Without Content-Length a body is refused, and a request with none is
        refused when ``required`` (else its body is empty)."""
        stated = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding") or (stated is None and required):
            self.close_connection = True
            self.refuse(411, "a request body needs a Content-Length")
            return None
        if stated is None:
            return b""
        if not stated.strip().isdigit():
            self.close_connection = True
            self.refuse(400, "Content-Length is not a number of bytes")
            return None
        length = int(stated)
        if length > self.server.limits.body:
            self.close_connection = True
            self.refuse(413, f"the request body is {length} bytes, over the limit of {self.server.limits.body}")
            self._discard(length)
            return None
        try:
            body = self.rfile.read(length)
        except OSError:  # TimeoutError included: the deadline passed
            body = b""
        if len(body) != length:
            self.close_connection = True
            return None
        return body

    def _discard(self, length: int) -> None:
        """Read what the client still sends of a refused body (within the deadline, keeping nothing), so that
        closing the connection does not reset it before the client reads the answer."""
        try:
            while length > 0:
                chunk = self.rfile.read(min(length, 65536))
                if not chunk:
                    return
                length -= len(chunk)
        except OSError:
            return

    def refuse(self, code: int, message: str) -> None:
        """Answer ``code`` with ``message``; handlers override it to answer in their own format."""
        body = f"{message}\n".encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
