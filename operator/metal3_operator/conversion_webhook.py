"""The conversion webhook: kube-apiserver asks it to convert CAPM3 objects between the versions the CRDs serve.

CAPM3 stores v1beta2 and serves v1beta1 beside it; on a cluster only a webhook can convert between versions whose
fields differ. This one serves the engine's own conversion (``api/conversion.py``, which the local store uses
too), so both backends convert alike. ``python -m metal3_operator.conversion_webhook`` runs it alone (the test
harness does, beside its kube-apiserver); the operator serves it with ``--webhook-bind-address``.
"""
from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from metal3_operator.serving import BoundedHandler, BoundedServer, Limits, MiB

PATH = "/convert"
# What one client may hold of the webhook. A ConversionReview holds whole objects, each at most what etcd stores
# (kube-apiserver's 3 MiB request limit, etcd's 1.5 MiB value limit); 8 MiB takes several of the largest, or a
# list of thousands of CAPM3 objects, and a bigger body is answered 413. 64 connections at once (each a thread, and
# at most one body in memory); 10 s for a connection to finish its TLS handshake and start its request, and 10 s
# from there to the end of its body: a connection that never speaks, or dribbles, is closed, and never holds up
# another (the handshake runs on the connection's thread, not in accept()).
LIMITS = Limits(connections=64, idle=10.0, read=10.0, body=8 * MiB)
MAX_REQUEST_BYTES = LIMITS.body


def _conversion() -> ModuleType:
    """The engine's conversion, from the collection where Ansible finds it (the operator never imports the engine
    otherwise: its roles run it)."""
    for entry in os.environ.get("ANSIBLE_COLLECTIONS_PATH", "~/.ansible/collections").split(os.pathsep):
        path = os.path.expanduser(entry)
        if path and path not in sys.path:
            sys.path.append(path)
    from ansible_collections.metal3.baremetal.plugins.module_utils.api import conversion

    return conversion


def review(request: dict[str, Any]) -> dict[str, Any]:
    """The ConversionReview (apiextensions.k8s.io/v1) answering ``request``; every object converted, or none."""
    body = request.get("request") or {}
    uid, desired = body.get("uid", ""), body.get("desiredAPIVersion", "")
    try:
        convert = _conversion().convert
        converted = [convert(obj, desired) for obj in body.get("objects") or []]
        response = {"uid": uid, "convertedObjects": converted, "result": {"status": "Success"}}
    except Exception as e:  # noqa: BLE001 - any refusal is the review's failure, told to kube-apiserver
        response = {"uid": uid, "result": {"status": "Failure", "message": f"converting to {desired}: {e}"}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response}


class _Handler(BoundedHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        if self.path.split("?")[0] != PATH:
            self.close_connection = True  # its body is not read
            self._reply(404, {"error": "POST a ConversionReview"})
            return
        body = self.read_body()
        if body is None:
            return  # refused (411, 413) or the client went away
        if not body:
            self._reply(400, {"error": "POST a ConversionReview"})
            return
        try:
            request = json.loads(body)
        except ValueError:
            self._reply(400, {"error": "the body is not JSON"})
            return
        self._reply(200, review(request if isinstance(request, dict) else {}))

    def refuse(self, code: int, message: str) -> None:
        self._reply(code, {"error": message})

    def _reply(self, code: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _address(bind: str) -> tuple[str, int]:
    host, _colon, port = bind.rpartition(":")
    return host or "0.0.0.0", int(port)


def serve(bind: str, cert_file: Path, key_file: Path, limits: Limits = LIMITS) -> BoundedServer:
    """The webhook over TLS on ``bind`` ('host:port'), on a daemon thread; kube-apiserver only speaks HTTPS to it."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(cert_file), str(key_file))
    server = BoundedServer(_address(bind), _Handler, limits, tls=context)
    threading.Thread(target=server.serve_forever, name=f"conversion-{bind}", daemon=True).start()
    return server


def crd_conversion(crd: dict[str, Any], client_config: dict[str, Any]) -> dict[str, Any]:
    """``crd`` with its conversion through this webhook when it serves several versions of a converted group."""
    spec = crd.get("spec") or {}
    if spec.get("group") not in _conversion().CONVERTED_GROUPS or len(spec.get("versions") or []) < 2:
        return crd
    webhook = {"conversionReviewVersions": ["v1"], "clientConfig": client_config}
    return {**crd, "spec": {**spec, "conversion": {"strategy": "Webhook", "webhook": webhook}}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m metal3_operator.conversion_webhook", description=__doc__)
    p.add_argument("--bind-address", default=":9443")
    p.add_argument("--cert-dir", type=Path, default=Path("/tmp/k8s-webhook-server/serving-certs"),  # noqa: S108
                   help="holds tls.crt and tls.key, as controller-runtime's webhook server reads them")
    args = p.parse_args(argv)
    try:
        serve(args.bind_address, args.cert_dir / "tls.crt", args.cert_dir / "tls.key")
    except (OSError, ssl.SSLError, ValueError) as e:
        print(f"conversion webhook not started: {e}", file=sys.stderr)
        return 1
    print(f"conversion webhook on https://{args.bind_address}{PATH}", flush=True)
    threading.Event().wait()  # until a signal ends the process
    return 0


if __name__ == "__main__":
    sys.exit(main())
