"""A HostClaim's identityRef: the kubeconfig it names is the tenant's input, used only with inline credentials."""
from __future__ import annotations

import pytest
import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.remote import RemoteRefused, remote_kubeconfig

NS = "tenant"


def config(cluster: dict | None = None, user: dict | None = None, context: dict | None = None) -> str:
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "m", "cluster": cluster or {
            "server": "https://192.0.2.1:6443", "certificate-authority-data": "Q0E="}}],
        "users": [{"name": "u", "user": user or {"token": "t0ken"}}],
        "contexts": [{"name": "c", "context": context or {"cluster": "m", "user": "u"}}]})


CLAIM = {"apiVersion": "metal3.io/v1alpha1", "kind": "HostClaim", "metadata": {"name": "c", "namespace": NS},
         "spec": {"poweredOn": False, "identityRef": {"name": "hosts", "context": "c"}}}

# (what the Secret holds, what the refusal says; None: the kubeconfig is used)
CASES = [
    ("inline token", {"kubeconfig": config()}, None),
    ("inline client certificate", {"kubeconfig": config(user={"client-certificate-data": "Q0U=",
                                                              "client-key-data": "S0VZ"})}, None),
    ("no such key", {"other": "x"}, "has no 'kubeconfig' key"),
    ("not YAML", {"kubeconfig": "clusters: [unclosed"}, "is not YAML"),
    ("not a mapping", {"kubeconfig": "- a\n- b\n"}, "is not a kubeconfig"),
    ("a command", {"kubeconfig": config(user={"exec": {"command": "sh"}})}, "user field 'exec'"),
    ("an auth provider", {"kubeconfig": config(user={"auth-provider": {"name": "oidc"}})},
     "user field 'auth-provider'"),
    ("a token file", {"kubeconfig": config(user={"tokenFile": "/run/token"})}, "user field 'tokenFile'"),
    ("a CA file", {"kubeconfig": config(cluster={"server": "https://192.0.2.1", "certificate-authority": "/ca"})},
     "cluster field 'certificate-authority'"),
    ("a proxy", {"kubeconfig": config(cluster={"server": "https://192.0.2.1", "proxy-url": "http://192.0.2.9"})},
     "cluster field 'proxy-url'"),
    # The server is a URL the tenant wrote (core/outbound.py): http(s), never the controller's own hosts.
    ("a loopback server", {"kubeconfig": config(cluster={"server": "http://127.0.0.1:8001/x?"})},
     "its server (clusters[0].cluster.server): 'http://127.0.0.1:8001/x?' names a loopback or link-local host"),
    ("localhost", {"kubeconfig": config(cluster={"server": "https://localhost:6443"})},
     "names a loopback or link-local host"),
    ("an IPv6 loopback", {"kubeconfig": config(cluster={"server": "https://[::1]:6443"})},
     "names a loopback or link-local host"),
    ("a link-local server", {"kubeconfig": config(cluster={"server": "http://169.254.169.254/latest"})},
     "names a loopback or link-local host"),
    ("an unspecified address", {"kubeconfig": config(cluster={"server": "https://0.0.0.0:6443"})},
     "names a loopback or link-local host"),
    ("a file URL", {"kubeconfig": config(cluster={"server": "file:///etc/kubernetes/admin.conf"})},
     "is not an http or https URL"),
    ("no scheme", {"kubeconfig": config(cluster={"server": "192.0.2.1:6443"})}, "is not an http or https URL"),
    ("no server", {"kubeconfig": config(cluster={"certificate-authority-data": "Q0E="})},
     "its server (clusters[0].cluster.server) is required"),
]


@pytest.mark.parametrize("values, refusal", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_kubeconfig_of_an_identity_ref(tmp_path, values, refusal):
    with open_store({"backend": "local", "store_path": str(tmp_path / "store.db")}) as store:
        store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hosts", "namespace": NS},
                      "stringData": values})
        if refusal is None:
            loaded, context = remote_kubeconfig(store, CLAIM)
            assert context == "c" and loaded["clusters"][0]["cluster"]["server"].startswith("https://")
            return
        with pytest.raises(RemoteRefused, match="spec.identityRef") as refused:
            remote_kubeconfig(store, CLAIM)
        assert refusal in str(refused.value)


def test_a_loopback_server_is_used_when_the_operator_allows_that_host(tmp_path):
    with open_store({"backend": "local", "store_path": str(tmp_path / "store.db")}) as store:
        store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hosts", "namespace": NS},
                      "stringData": {"kubeconfig": config(cluster={"server": "https://127.0.0.1:6443"})}})
        loaded, _context = remote_kubeconfig(store, CLAIM, OutboundPolicy.of(["127.0.0.1"]))
        assert loaded["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
        with pytest.raises(RemoteRefused, match="loopback"):  # another spelling of it is not named
            store.patch(Ref("v1", "Secret", "hosts", NS), {"stringData": {
                "kubeconfig": config(cluster={"server": "https://localhost:6443"})}})
            remote_kubeconfig(store, CLAIM, OutboundPolicy.of(["127.0.0.1"]))


def test_a_missing_secret_is_named(tmp_path):
    with open_store({"backend": "local", "store_path": str(tmp_path / "store.db")}) as store, \
            pytest.raises(RemoteRefused, match=f"Secret {NS}/hosts not found"):
        remote_kubeconfig(store, CLAIM)
