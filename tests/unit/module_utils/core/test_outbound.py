# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Where the controller connects on a tenant's say: http(s) only, never its own hosts unless allowed."""
from __future__ import annotations

import http.server
import threading

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import (
    Deadline,
    OutboundPolicy,
    Refused,
    read_bounded,
)


@pytest.mark.parametrize("url, why", [
    ("file:///etc/passwd", "not an http or https URL"),
    ("ftp://example.com/x", "not an http or https URL"),
    ("gopher://example.com/", "not an http or https URL"),
    ("http:///nohost", "names no host"),
    ("http://example.com:99999/", "not a URL"),
    ("http://127.0.0.1:8080/img", "loopback or link-local"),
    ("http://127.1.2.3/img", "loopback or link-local"),
    ("http://localhost/img", "loopback or link-local"),
    ("http://LOCALHOST./img", "loopback or link-local"),
    ("http://foo.localhost/img", "loopback or link-local"),
    ("http://[::1]/img", "loopback or link-local"),
    ("http://[::ffff:127.0.0.1]/img", "loopback or link-local"),
    ("http://169.254.169.254/latest/meta-data", "loopback or link-local"),
    ("http://[fe80::1%25eth0]/img", "loopback or link-local"),
    ("http://0.0.0.0:6443/", "loopback or link-local"),
])
def test_a_tenant_url_is_refused_naming_the_field(url: str, why: str) -> None:
    with pytest.raises(Refused, match=f"^spec.image.url: .*{why}"):
        OutboundPolicy().check(url, "spec.image.url")


@pytest.mark.parametrize("url", ["http://192.0.2.10/image.qcow2", "https://images.example.com/a.img",
                                 "http://[2001:db8::1]:8080/x"])
def test_other_hosts_pass(url: str) -> None:
    OutboundPolicy().check(url, "spec.image.url", resolve=False)


def test_a_name_that_resolves_to_loopback_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("socket.getaddrinfo", lambda *a, **k: [(2, 1, 6, "", ("127.0.0.1", 0))])
    with pytest.raises(Refused, match="resolves to a loopback"):
        OutboundPolicy().check("http://images.example.com/a", "spec.image.url")


def test_the_operator_allows_named_local_hosts() -> None:
    policy = OutboundPolicy.of("127.0.0.1, localhost,[::1]")
    for url in ("http://127.0.0.1:8080/img", "http://localhost/x", "http://[::1]/x"):
        policy.check(url, "spec.image.url")
    with pytest.raises(Refused):
        policy.check("http://127.0.0.2/img", "spec.image.url")
    with pytest.raises(Refused, match="not an http or https URL"):
        policy.check("file:///etc/passwd", "spec.image.url")  # no option makes another scheme fetchable
    assert OutboundPolicy.from_params({"allowed_local_hosts": ["127.0.0.1"]}) == OutboundPolicy.of(["127.0.0.1"])


class _Redirecting(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/away":
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.2/secret")
            self.end_headers()
            return
        body = b"x" * 5000
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> object:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Redirecting)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd
    httpd.shutdown()


def test_every_redirect_is_checked(server: http.server.HTTPServer) -> None:
    policy = OutboundPolicy.of(["127.0.0.1"])
    url = f"http://127.0.0.1:{server.server_address[1]}"
    with policy.open(url + "/file", "spec.image.url", timeout=5) as answer:
        assert answer.read() == b"x" * 5000
    with pytest.raises(Refused, match=r"^spec.image.url \(redirected\): 'http://127.0.0.2/secret'"):
        policy.open(url + "/away", "spec.image.url", timeout=5)


def test_a_download_is_bounded(server: http.server.HTTPServer) -> None:
    policy = OutboundPolicy.of(["127.0.0.1"])
    url = f"http://127.0.0.1:{server.server_address[1]}/file"
    with policy.open(url, "spec.image.url", timeout=5) as answer:
        assert b"".join(read_bounded(answer, 5000, Deadline(60), "spec.image.url", url, chunk=1000)) == b"x" * 5000
    with policy.open(url, "spec.image.url", timeout=5) as answer, \
            pytest.raises(Refused, match=r"larger than this controller allows \(4999 bytes\)"):
        b"".join(read_bounded(answer, 4999, Deadline(60), "spec.image.url", url, chunk=1000))
    with policy.open(url, "spec.image.url", timeout=5) as answer, pytest.raises(Refused, match="took longer"):
        b"".join(read_bounded(answer, 5000, Deadline(0), "spec.image.url", url))


class _Trickle:
    """An answer that has one byte ready at a time (read1), and would block for a whole chunk (read)."""

    def __init__(self, size: int) -> None:
        self.left = size

    def read1(self, size: int) -> bytes:
        if not self.left:
            return b""
        self.left -= 1
        return b"x"

    def read(self, size: int) -> bytes:
        raise AssertionError("read() waits for a whole chunk: a trickling server would outlive the deadline")


def test_a_trickling_server_meets_the_deadline_between_two_bytes() -> None:
    assert b"".join(read_bounded(_Trickle(3), 10, Deadline(60), "spec.image.url", "http://x/")) == b"xxx"
    with pytest.raises(Refused, match="took longer"):
        b"".join(read_bounded(_Trickle(10**9), 10**10, Deadline(0.05), "spec.image.url", "http://x/"))
