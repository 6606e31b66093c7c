"""Hostile tenant input through the operator, on the real kube-apiserver, where no webhook checks HostClaims or
IPPools: what a tenant writes is refused by the reconcile naming the field, and nothing it asked fetched reaches
the claim's status (issue 30). The operator serves claims of kind libvirt here (its libvirt options set), and no
claim gets as far as asking the hypervisor anything; bare-metal claims whose image the controller's Ironic would
fetch from the controller's own hosts bind nothing; claims whose identityRef server answers what no Kubernetes API
answers say so in their HostsReachable condition, echoing nothing of it. The operator allows 127.0.0.1 (the odd
server's): the refused loopback URLs are written as localhost and [::1]."""
from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.harness.odd_server import ODD, SECRET_WORDS, odd_kubeconfig, serve_odd
from tests.operator.conftest import condition, eventually

pytestmark = pytest.mark.kubernetes

METAL3 = ("metal3.io", "v1alpha1")
IPAM = ("ipam.metal3.io", "v1alpha1")
IMAGE = "http://images.example/debian.qcow2"

# name -> (spec, the field the claim's status names, what the status must never hold)
VM_CLAIMS: dict[str, tuple[dict[str, Any], str, str]] = {
    "checksum-reads-a-file": ({"image": {"url": IMAGE, "checksum": "file:///etc/passwd", "format": "qcow2"}},
                              "spec.image.checksum", "root:"),
    "image-on-loopback": ({"image": {"url": "http://localhost:6443/api", "checksum": "0" * 64, "format": "qcow2"}},
                          "spec.image.url", ""),
    "image-on-link-local": ({"image": {"url": "http://169.254.169.254/latest/user-data", "checksum": "0" * 64,
                                       "format": "qcow2"}}, "spec.image.url", ""),
    "memory-of-5000-digits": ({"image": {"url": IMAGE, "checksum": "0" * 64, "format": "qcow2"},
                               "args": {"memory": "1e5000"}}, "spec.args.memory", "Traceback"),
    "more-than-the-operator-allows": ({"image": {"url": IMAGE, "checksum": "0" * 64, "format": "qcow2"},
                                       "args": {"memory": "1Ti"}}, "spec.args.memory", ""),
}
# Bare-metal claims: the Ironic the controller runs would check and fetch these for the host (upstream admits ftp).
BM_CLAIMS: dict[str, tuple[dict[str, Any], str, str]] = {
    "host-image-on-ironics-loopback": ({"image": {"url": "http://localhost:6385/v1/nodes", "checksum": "0" * 64,
                                                  "checksumType": "sha256"}}, "spec.image.url", ""),
    "host-checksum-on-link-local": ({"image": {"url": "ftp://images.example/os.img",
                                               "checksum": "http://169.254.169.254/latest/user-data"}},
                                    "spec.image.checksum", ""),
}


# The odd answers of an identityRef server (tests/harness/odd_server.py) but a hanging one: the module's test has
# it, with the reconcile's timeout made short.
ODD_ANSWERS = [odd for odd in ODD if "/hang" not in odd[1]]


def _claim(custom: client.CustomObjectsApi, ns: str, name: str) -> dict[str, Any]:
    return custom.get_namespaced_custom_object(*METAL3, ns, "hostclaims", name)


@pytest.fixture
def odd_server():
    with serve_odd() as server:
        yield server


def test_hostile_claims_and_a_risky_pool_through_the_operator(
        operators, custom, kube_namespace, odd_server, tmp_path: Path):
    for name, (spec, _field, _never) in VM_CLAIMS.items():
        custom.create_namespaced_custom_object(*METAL3, kube_namespace, "hostclaims", {
            "apiVersion": "metal3.io/v1alpha1", "kind": "HostClaim", "metadata": {"name": name},
            "spec": {"kind": "libvirt", "poweredOn": True, **spec}})
    for name, (spec, _field, _never) in BM_CLAIMS.items():
        custom.create_namespaced_custom_object(*METAL3, kube_namespace, "hostclaims", {
            "apiVersion": "metal3.io/v1alpha1", "kind": "HostClaim", "metadata": {"name": name},
            "spec": {"poweredOn": True, **spec}})
    # A kubeconfig whose server is the controller's own loopback (the API proxy's port, say): never connected to.
    kubeconfig = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
                  "clusters": [{"name": "c", "cluster": {"server": "https://[::1]:6443"}}],
                  "users": [{"name": "u", "user": {"token": "t"}}],
                  "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}
    client.CoreV1Api(custom.api_client).create_namespaced_secret(kube_namespace, {
        "metadata": {"name": "hosts-elsewhere"},
        "data": {"kubeconfig": base64.b64encode(json.dumps(kubeconfig).encode()).decode()}})
    custom.create_namespaced_custom_object(*METAL3, kube_namespace, "hostclaims", {
        "apiVersion": "metal3.io/v1alpha1", "kind": "HostClaim", "metadata": {"name": "identity-on-loopback"},
        "spec": {"poweredOn": True, "identityRef": {"name": "hosts-elsewhere"},
                 "image": {"url": IMAGE, "checksum": "0" * 64, "format": "qcow2"}}})
    # identityRef servers on a loopback host the operator allows, which answer what no Kubernetes API answers.
    for name, server, _reason in ODD_ANSWERS:
        client.CoreV1Api(custom.api_client).create_namespaced_secret(kube_namespace, {
            "metadata": {"name": f"{name}-kubeconfig"},
            "stringData": {"kubeconfig": odd_kubeconfig(server.format(odd=odd_server))}})
        custom.create_namespaced_custom_object(*METAL3, kube_namespace, "hostclaims", {
            "apiVersion": "metal3.io/v1alpha1", "kind": "HostClaim", "metadata": {"name": name},
            "spec": {"poweredOn": True, "identityRef": {"name": f"{name}-kubeconfig"},
                     "image": {"url": IMAGE, "checksum": "0" * 64, "format": "qcow2"}}})
    # Upstream's webhook accepts a gateway off its entry's network: so do we, with a warning (item 13).
    custom.create_namespaced_custom_object(*IPAM, kube_namespace, "ippools", {
        "apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPPool", "metadata": {"name": "on-link-gateway"},
        "spec": {"namePrefix": "on-link", "pools": [{"subnet": "192.168.1.0/25", "gateway": "192.168.1.254"}],
                 "prefix": 25}})
    operators(env={"METAL3_ALLOWED_LOCAL_HOSTS": "127.0.0.1",
                   "METAL3_LIBVIRT_BRIDGE": "br-none", "METAL3_LIBVIRT_STORAGE_DIR": str(tmp_path / "vms"),
                   # nothing may fetch through virsh: none is there to answer
                   "METAL3_LIBVIRT_URI": "qemu+unix:///system?socket=/nonexistent"})

    for name, (_spec, field, never) in {**VM_CLAIMS, **BM_CLAIMS}.items():
        ready = eventually(lambda name=name: (c := condition(_claim(custom, kube_namespace, name), "Ready"))
                           and c.get("status") == "False" and c, f"claim {name} refused", timeout=300)
        assert ready["message"].startswith(f"{field}: "), (name, ready)
        shown = json.dumps(_claim(custom, kube_namespace, name))
        assert "Traceback" not in shown
        if never:
            assert never not in shown, name
    reachable = eventually(lambda: (c := condition(_claim(custom, kube_namespace, "identity-on-loopback"),
                                                   "HostsReachable")) and c, "the identityRef refused", timeout=300)
    assert (reachable["status"], reachable["reason"]) == ("False", "IdentityRefInvalid"), reachable
    assert "names a loopback or link-local host" in reachable["message"], reachable
    for name, _server, reason in ODD_ANSWERS:
        reached = eventually(lambda name=name: (c := condition(_claim(custom, kube_namespace, name),
                                                               "HostsReachable")) and c, f"claim {name}", timeout=300)
        assert (reached["status"], reached["reason"]) == ("False", reason), (name, reached)
        shown = json.dumps(_claim(custom, kube_namespace, name))
        assert SECRET_WORDS not in shown and "Traceback" not in shown, (name, shown)
    assert not (tmp_path / "vms").exists() or not any((tmp_path / "vms").iterdir())  # nothing made, nothing fetched

    pool = eventually(lambda: condition(custom.get_namespaced_custom_object(
        *IPAM, kube_namespace, "ippools", "on-link-gateway"), "PoolWarning"), "the pool's warning", timeout=300)
    assert pool["status"] == "True" and "gateway" in pool["message"], pool
    events = client.CoreV1Api(custom.api_client).list_namespaced_event(kube_namespace).items
    assert any(e.involved_object.name == "on-link-gateway" and e.type == "Warning" for e in events), \
        [(e.involved_object.name, e.reason) for e in events]
