"""The conversion webhook: kube-apiserver converts CAPM3 objects between v1beta1 and v1beta2 through it, with the
engine's own conversion, so an object written at one version reads back at the other on the real cluster."""
from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client, dynamic

from metal3_operator.conversion_webhook import LIMITS, MAX_REQUEST_BYTES, crd_conversion, review

INFRA = "infrastructure.cluster.x-k8s.io"


def conversion_review(desired: str, *objects: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "u-1", "desiredAPIVersion": desired, "objects": list(objects)}}


def machine(version: str, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": f"{INFRA}/{version}", "kind": "Metal3Machine",
            "metadata": {"name": "m-0", "namespace": "ns"},
            "spec": {"image": {"url": "http://images/os.img", "checksum": "http://images/os.img.sha256",
                               "checksumType": "sha256"}},
            **({"status": status} if status is not None else {})}


def test_a_review_converts_every_object_and_echoes_the_uid():
    answer = review(conversion_review(f"{INFRA}/v1beta2", machine("v1beta1", {"ready": True})))
    assert answer["kind"] == "ConversionReview"
    response = answer["response"]
    assert response["uid"] == "u-1" and response["result"] == {"status": "Success"}
    [converted] = response["convertedObjects"]
    assert converted["apiVersion"] == f"{INFRA}/v1beta2"
    assert converted["status"]["initialization"] == {"provisioned": True}


def test_a_review_that_cannot_convert_fails_whole_and_says_why():
    response = review(conversion_review(f"{INFRA}/v9", machine("v1beta1")))["response"]
    assert response["uid"] == "u-1" and "convertedObjects" not in response
    assert response["result"]["status"] == "Failure" and f"{INFRA}/v9" in response["result"]["message"]


CRD_CONVERSION = [
    ("several versions of a converted group", INFRA, ["v1beta1", "v1beta2"], True),
    ("one version", INFRA, ["v1beta1"], False),
    ("another group", "ipam.metal3.io", ["v1alpha1", "v1beta1"], False),
]


@pytest.mark.parametrize(("case", "group", "versions", "converted"), CRD_CONVERSION, ids=[c[0] for c in CRD_CONVERSION])
def test_only_crds_serving_several_versions_of_a_converted_group_convert_through_the_webhook(case, group, versions,
                                                                                             converted):
    crd = {"metadata": {"name": "x"}, "spec": {"group": group, "versions": [{"name": v} for v in versions]}}
    config = {"url": "https://127.0.0.1:1/convert", "caBundle": "Q0E="}
    spec = crd_conversion(crd, config)["spec"]
    if converted:
        assert spec["conversion"] == {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                                                                         "clientConfig": config}}
    else:
        assert "conversion" not in spec
    assert "conversion" not in crd["spec"]  # the given CRD is left as it was


@pytest.mark.kubernetes
def test_the_cluster_reads_an_object_at_either_version_whichever_it_was_written_at(kube_cluster, kube_namespace):
    api = dynamic.DynamicClient(kube_cluster.api_client())
    v1beta1 = api.resources.get(api_version=f"{INFRA}/v1beta1", kind="Metal3Machine")
    v1beta2 = api.resources.get(api_version=f"{INFRA}/v1beta2", kind="Metal3Machine")
    old = machine("v1beta1")
    old["metadata"]["namespace"] = kube_namespace
    v1beta1.create(body=old, namespace=kube_namespace)
    v1beta1.status.patch(body={"status": {"ready": True}}, name="m-0", namespace=kube_namespace,
                         content_type="application/merge-patch+json")

    read = v1beta2.get(name="m-0", namespace=kube_namespace).to_dict()
    assert read["apiVersion"] == f"{INFRA}/v1beta2"
    assert read["status"]["initialization"] == {"provisioned": True}
    assert read["spec"]["image"]["checksum"] == "http://images/os.img.sha256"

    back = v1beta1.get(name="m-0", namespace=kube_namespace).to_dict()
    assert back["status"]["ready"] is True and back["spec"] == old["spec"]


@pytest.mark.kubernetes
def test_reinstalling_the_crds_without_a_webhook_keeps_the_conversion_they_have(kube_cluster):
    from metal3_operator.crds import install
    from tests.harness.cluster import CRD_FILES

    install(kube_cluster.api_client(), [p for p in CRD_FILES if p.name.startswith(INFRA)])
    crd = client.ApiextensionsV1Api(kube_cluster.api_client()).read_custom_resource_definition(
        f"metal3machines.{INFRA}")
    assert crd.spec.conversion.strategy == "Webhook"
    assert crd.spec.conversion.webhook.client_config.url == kube_cluster.conversion["url"]


@pytest.mark.kubernetes
def test_the_operator_serves_the_webhook_over_tls_when_asked(kube_cluster, tmp_path):
    import requests

    from metal3_operator.manager import Manager, parse_args
    from tests.harness.cluster import REPO, free_port

    port = free_port()
    manager = Manager(parse_args([
        f"--watches-file={REPO / 'operator' / 'watches.yaml'}", f"--kubeconfig={kube_cluster.kubeconfig}",
        "--metrics-bind-address=0", "--health-probe-bind-address=0", "--no-prefork",
        f"--runner-dir={tmp_path / 'runner'}", f"--webhook-bind-address=127.0.0.1:{port}",
        f"--webhook-cert-dir={kube_cluster.workdir / 'webhook'}"]))
    [server] = manager.serve()
    try:
        answer = requests.post(f"https://127.0.0.1:{port}/convert", verify=str(kube_cluster.ca_cert), timeout=10,
                               json=conversion_review(f"{INFRA}/v1beta2", machine("v1beta1", {"ready": True})))
        assert answer.status_code == 200
        assert answer.json()["response"]["result"] == {"status": "Success"}
    finally:
        server.shutdown()


# -- a client cannot hold the webhook up (issue 30 item 5) ------------------------------------------------------
# Real sockets against the real server, over TLS with the test's own CA. Each test converts once before it
# attacks (the first conversion imports the engine), then opens what would hold the server up, then converts with
# a client timeout well under the server's own timeouts: a server that waits out the attacker fails the test.

CLIENT_TIMEOUT = 8.0  # seconds; under LIMITS.idle, far over what a conversion takes


@pytest.fixture
def webhook(tmp_path):
    """The conversion webhook as the operator serves it, with its default limits, on a loopback port."""
    from metal3_operator.conversion_webhook import serve
    from tests.harness.cluster import _write_pki

    _write_pki(tmp_path)
    server = serve("127.0.0.1:0", tmp_path / "server.crt", tmp_path / "server.key")
    hooked = Webhook(server.server_address[1], tmp_path / "ca.crt")
    assert hooked.convert() == {"status": "Success"}
    yield hooked
    for sock in hooked.opened:
        sock.close()
    server.shutdown()
    server.server_close()


class Webhook:
    def __init__(self, port: int, ca: Any) -> None:
        self.port, self.ca, self.opened = port, ca, []

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/convert"

    def convert(self) -> dict[str, Any]:
        """A real ConversionReview's result; fails the test if the webhook does not answer in CLIENT_TIMEOUT."""
        import requests

        answer = requests.post(self.url, verify=str(self.ca), timeout=CLIENT_TIMEOUT,
                               json=conversion_review(f"{INFRA}/v1beta2", machine("v1beta1", {"ready": True})))
        assert answer.status_code == 200, answer.text
        return answer.json()["response"]["result"]

    def idle(self) -> Any:
        """A TCP connection that never speaks."""
        import socket

        sock = socket.create_connection(("127.0.0.1", self.port))
        self.opened.append(sock)
        return sock

    def stalled_handshake(self) -> Any:
        """A TLS client that sends half its ClientHello and stops."""
        import ssl

        context = ssl.create_default_context(cafile=str(self.ca))
        outgoing = ssl.MemoryBIO()
        tls = context.wrap_bio(ssl.MemoryBIO(), outgoing, server_hostname="127.0.0.1")
        with pytest.raises(ssl.SSLWantReadError):
            tls.do_handshake()
        hello = outgoing.read()
        sock = self.idle()
        sock.sendall(hello[:len(hello) // 2])
        return sock


def test_a_connection_that_never_speaks_does_not_stop_a_conversion(webhook):
    webhook.idle()
    assert webhook.convert() == {"status": "Success"}


def test_many_idle_and_stalled_connections_at_once_do_not_stop_a_conversion(webhook):
    for _attempt in range(20):
        webhook.idle()
        webhook.stalled_handshake()
    assert webhook.convert() == {"status": "Success"}
    assert webhook.convert() == {"status": "Success"}


def test_a_tls_client_that_stalls_mid_handshake_is_dropped(webhook):
    sock = webhook.stalled_handshake()
    sock.settimeout(LIMITS.idle * 3)  # far over the server's timeout: what it detects is that the server never drops
    try:
        leftover = sock.recv(65536)  # the server's close (or its TLS alert, then its close)
        while leftover:
            leftover = sock.recv(65536)
    except ConnectionResetError:
        pass
    except TimeoutError:
        pytest.fail("the webhook kept a stalled TLS handshake open")
    assert webhook.convert() == {"status": "Success"}


REFUSED = [
    # case, headers, body, status
    ("a body over the cap", {"Content-Type": "application/json"}, b" " * (MAX_REQUEST_BYTES + 1), 413),
    ("a body of no stated length", {"Transfer-Encoding": "chunked"}, b"1\r\n{\r\n0\r\n\r\n", 411),
    ("no body", {"Content-Length": "0"}, b"", 400),
    ("a body that is not JSON", {}, b"not json", 400),
]


@pytest.mark.parametrize(("case", "headers", "body", "status"), REFUSED, ids=[c[0] for c in REFUSED])
def test_a_request_the_webhook_refuses_gets_its_status_and_the_webhook_keeps_serving(webhook, case, headers, body,
                                                                                     status):
    import http.client
    import ssl

    context = ssl.create_default_context(cafile=str(webhook.ca))
    conn = http.client.HTTPSConnection("127.0.0.1", webhook.port, context=context, timeout=CLIENT_TIMEOUT * 4)
    conn.putrequest("POST", "/convert")
    for name, value in headers.items():
        conn.putheader(name, value)
    if "Transfer-Encoding" not in headers and "Content-Length" not in headers:
        conn.putheader("Content-Length", str(len(body)))
    conn.endheaders()
    conn.send(body)
    answer = conn.getresponse()
    assert answer.status == status
    assert "error" in json.loads(answer.read())
    conn.close()
    assert webhook.convert() == {"status": "Success"}


def test_a_review_as_large_as_the_cap_is_converted(webhook):
    import requests

    assert MAX_REQUEST_BYTES > 3 * 1024 * 1024  # over kube-apiserver's largest object
    body = json.dumps(conversion_review(f"{INFRA}/v1beta2", machine("v1beta1"))).encode()
    answer = requests.post(webhook.url, verify=str(webhook.ca), timeout=CLIENT_TIMEOUT * 4,
                           data=body.ljust(MAX_REQUEST_BYTES), headers={"Content-Type": "application/json"})
    assert answer.status_code == 200
    assert answer.json()["response"]["result"] == {"status": "Success"}
