"""Files served over HTTP on 127.0.0.1: from a dict (path -> bytes), each GET (and HEAD) recorded - what a claim's
image and checksum URLs name in tests of the real fetch (the policy in those tests allows 127.0.0.1 by name), and
the images Ironic checks before a direct deploy; or a directory's, unrecorded - manifests as a CMDB or a Git forge
serves them, and a live ISO."""
from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path
from typing import Any


class ServedFiles:
    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[str] = []
        served = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                body = self._head()
                if body is not None:
                    self.wfile.write(body)

            def do_HEAD(self) -> None:  # noqa: N802 - http.server's name; Ironic checks an image URL so
                self._head()

            def _head(self) -> bytes | None:
                served.requests.append(self.path)
                body = served.files.get(self.path)
                if body is None:
                    self.send_error(404, "no such file here")
                    return None
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                return body

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


class ServedDirectory:
    """``directory`` served over HTTP on 127.0.0.1 until closed (a context manager closes it)."""

    def __init__(self, directory: Path) -> None:
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                      functools.partial(_Quiet, directory=str(directory)))
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> ServedDirectory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


LIVE_ISO = "live.iso"


def live_iso(directory: Path) -> ServedDirectory:
    """A small live ISO (a MiB) written into ``directory`` and served from it, at ``.url + '/' + LIVE_ISO``: what
    Ironic's ramdisk deploy inserts as virtual media with no agent to wait for."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / LIVE_ISO).write_bytes(b"\0" * 1024 * 1024)
    return ServedDirectory(directory)
