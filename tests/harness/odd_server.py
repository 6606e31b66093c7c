"""A server that answers what no Kubernetes API answers, for identityRef kubeconfigs a tenant writes (issue 30,
item 7): each claim whose server it is must say so in its condition, and nothing it answered may be echoed."""
from __future__ import annotations

import http.server
import json
import threading
import time
from contextlib import contextmanager
from typing import Iterator

import yaml

SECRET_WORDS = "do-not-echo-this-server-content"


class OddServer(http.server.BaseHTTPRequestHandler):
    """Answers every GET as its path's first part says: /json (200, JSON that is no discovery), /404, /401, /500,
    /garbage (200, no JSON), /redirect (302 to /followed), /hang (never answers)."""

    requested: list[str] = []

    def do_GET(self):  # noqa: N802 - http.server's name
        self.requested.append(self.path)
        mode = self.path.split("/")[1]
        if mode == "hang":
            time.sleep(30)
            return
        if mode == "redirect":
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{self.server.server_port}/followed/version")
            self.end_headers()
            return
        code = {"404": 404, "401": 401, "500": 500}.get(mode, 200)
        body = b"<html>" + SECRET_WORDS.encode() + b"</html>" if mode == "garbage" else json.dumps(
            {"foo": 1, "kind": "Status", "message": SECRET_WORDS} if code != 200 else {"foo": 1}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextmanager
def serve_odd() -> Iterator[str]:
    """An OddServer on loopback for the block: its ``host:port``."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), OddServer)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def odd_kubeconfig(server: str) -> str:
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "m", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t0ken"}}],
        "contexts": [{"name": "c", "context": {"cluster": "m", "user": "u"}}]})


# claim name, server (http://<odd server>/<mode> or another URL), the condition's reason
ODD = [
    ("not-discovery", "http://{odd}/json", "HostsUnreachable"),
    ("not-found", "http://{odd}/404", "HostsUnreachable"),
    ("server-error", "http://{odd}/500", "HostsUnreachable"),
    ("unauthorized", "http://{odd}/401", "IdentityRefInvalid"),
    ("no-json", "http://{odd}/garbage", "HostsUnreachable"),
    ("redirected", "http://{odd}/redirect", "HostsUnreachable"),
    ("hanging", "http://{odd}/hang", "HostsUnreachable"),
    ("no-tls", "https://{odd}/json", "HostsUnreachable"),
]
