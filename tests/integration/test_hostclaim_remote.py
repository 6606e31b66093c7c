"""HostClaims served by the hosts of another cluster: claims in one store (a workload kube-apiserver, or a bastion's
local store) bind and drive BareMetalHosts of a management kube-apiserver through a kubeconfig Secret
(spec.identityRef). No BMC credential crosses; when the management API is down the claims say so and keep what
they have, and they go on when it is back."""
from __future__ import annotations

import time

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.hostclaims.hostclaim import (
    HOSTS_REACHABLE,
    reconcile_host_claim,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import remote
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import reconcile_hosts
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import IronicOptions
from ansible_collections.metal3.baremetal.plugins.plugin_utils.engine_action import run_spec
from tests.harness.odd_server import ODD, SECRET_WORDS, OddServer, odd_kubeconfig, serve_odd
from tests.integration.hostclaim_world import API, INFRA, policy, seed_infrastructure
from tests.integration.test_bad_input_generated import module_spec

# The management cluster of these tests is on the controller's loopback: the operator's option allows it.
LOCAL = OutboundPolicy.of(["127.0.0.1"])


def claim(name: str, namespace: str, identity: str = "management") -> dict:
    return {"apiVersion": API, "kind": "HostClaim", "metadata": {"name": name, "namespace": namespace},
            "spec": {"poweredOn": False, "identityRef": {"name": identity}, "userData": {"name": "tenant-data"},
                     "hostSelector": {"inNamespace": INFRA}}}


def secret(name: str, namespace: str, **values: str) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
            "stringData": values}


def condition(obj: dict, kind: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def test_claims_bind_hosts_of_another_cluster_survive_its_api_going_down_and_release_them(
        management, ironic, store, store_options, namespace, tmp_path):
    mgmt_options = {"backend": "kubernetes", "kubeconfig": str(management.kubeconfig)}
    ironic_options = IronicOptions(cloud=ironic.cloud)
    seed_infrastructure(mgmt_options, ironic_options, INFRA, [policy("tenants", INFRA, names=[namespace])], hosts=2)
    store.create(secret("management", namespace, kubeconfig=management.inline_kubeconfig()))
    store.create(secret("tenant-data", namespace, userData="#cloud-config\n"))
    refs = [Ref.of(store.create(claim(f"claim-{i}", namespace))) for i in range(2)]

    steps = [reconcile_host_claim(store, ref, outbound=LOCAL) for ref in refs]
    assert all(s.phase == "bound" for s in steps), [s.summary() for s in steps]
    with open_store(mgmt_options) as mgmt:
        hosts = {h["metadata"]["name"]: h for h in mgmt.list(API, "BareMetalHost", INFRA)}
        held = {h["spec"]["consumerRef"]["name"]: name for name, h in hosts.items() if h["spec"].get("consumerRef")}
        assert sorted(held) == ["claim-0", "claim-1"]
        for name in held.values():  # the claim's user data, copied beside its host in the management cluster
            assert hosts[name]["spec"]["userData"]["namespace"] == INFRA
            assert mgmt.get_if_exists(Ref("v1", "Secret", hosts[name]["spec"]["userData"]["name"], INFRA))
    for ref in refs:
        bound = store.get(ref)
        assert bound["status"]["bareMetalHost"] == {"namespace": INFRA, "name": held[ref.name]}
        assert condition(bound, HOSTS_REACHABLE)["status"] == "True"
        assert store.get(Ref(API, "HardwareData", ref.name, namespace))["spec"]["hardware"]
    # Nothing of the hosts' crossed: the claims' store holds no BareMetalHost and no BMC Secret.
    assert store.list(API, "BareMetalHost", namespace) == []
    kept = sorted(s["metadata"]["name"] for s in store.list("v1", "Secret", namespace))
    assert kept == ["management", "tenant-data"]

    # A claim of the same namespace and name in another store (another workload cluster) is another consumer: it
    # does not get its namesake's host.
    with open_store({"backend": "local", "store_path": str(tmp_path / "another.db")}) as another:
        another.create(secret("management", namespace, kubeconfig=management.inline_kubeconfig()))
        another.create(secret("tenant-data", namespace, userData="#cloud-config\n"))
        twin = Ref.of(another.create(claim("claim-0", namespace)))
        step = reconcile_host_claim(another, twin, outbound=LOCAL)
        assert step.phase == "pending" and not step.host, step.summary()
    assert reconcile_host_claim(store, refs[0], outbound=LOCAL).host == f"{INFRA}/{held['claim-0']}"

    management.stop_api()
    try:
        for ref in refs:
            step = reconcile_host_claim(store, ref, outbound=LOCAL)
            assert step.phase == "unreachable" and step.requeue_after and not step.error
            waiting = store.get(ref)
            assert condition(waiting, HOSTS_REACHABLE)["status"] == "False"
            assert condition(waiting, HOSTS_REACHABLE)["reason"] == "HostsUnreachable"
            assert waiting["status"]["bareMetalHost"]["name"] == held[ref.name]  # nothing lost
    finally:
        management.start_api()

    for ref in refs:
        step = reconcile_host_claim(store, ref, outbound=LOCAL)
        assert step.phase == "bound" and step.host == f"{INFRA}/{held[ref.name]}"
        assert condition(store.get(ref), HOSTS_REACHABLE)["status"] == "True"

    # Release: the claims go, their hosts are freed in the management cluster (whose own reconcile steps them).
    for ref in refs:
        store.delete(ref)
    for _round in range(60):
        steps = [reconcile_host_claim(store, ref, outbound=LOCAL) for ref in refs]
        if all(s.obj is None for s in steps):
            break
        reconcile_hosts(lambda: open_store(mgmt_options), ironic_options,
                        [Ref(API, "BareMetalHost", name, INFRA) for name in held.values()], (), 0)
    assert all(s.obj is None for s in steps), [s.summary() for s in steps]
    with open_store(mgmt_options) as mgmt:
        assert not any(h["spec"].get("consumerRef") for h in mgmt.list(API, "BareMetalHost", INFRA))
        assert [s["metadata"]["name"] for s in mgmt.list("v1", "Secret", INFRA)] == ["demo-bmc"]


@pytest.mark.parametrize("user, field", [
    ({"exec": {"command": "/bin/sh", "apiVersion": "client.authentication.k8s.io/v1"}}, "exec"),
    ({"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}, "tokenFile"),
    ({"client-key": "/etc/ssl/private/key.pem"}, "client-key"),
])
def test_a_kubeconfig_that_would_run_a_command_or_read_a_file_is_refused_naming_the_field(
        management, store, namespace, user, field):
    store.create(secret("management", namespace, kubeconfig=management.inline_kubeconfig(**user)))
    ref = Ref.of(store.create(claim("claim", namespace)))
    step = reconcile_host_claim(store, ref, outbound=LOCAL)
    assert step.phase == "unreachable" and step.requeue_after is None
    assert f"user field {field!r}" in step.error and "spec.identityRef" in step.error
    refused = store.get(ref)
    assert condition(refused, HOSTS_REACHABLE)["reason"] == "IdentityRefInvalid"
    assert "bareMetalHost" not in refused["status"]


# -- identityRef servers that are not a Kubernetes API (issue 30, item 7) -------------------------------------

@pytest.fixture
def odd_server():
    with serve_odd() as server:
        yield server


def test_every_odd_answer_of_an_identity_ref_server_is_the_claims_condition_and_the_other_claims_go_on(
        odd_server, tmp_path, monkeypatch):
    """Through the module, as a bastion runs it: one converge over claims whose identityRef servers answer
    what no Kubernetes API answers (or nothing), and a good claim whose hosts are its own store's."""
    monkeypatch.setattr(remote, "REMOTE_TIMEOUT", (2.0, 2.0))  # the hanging server is given up on quickly
    store_path = str(tmp_path / "store.db")
    namespace = "tenant"
    with open_store({"backend": "local", "store_path": store_path}) as store:
        store.create(policy("tenants", INFRA, names=[namespace]))
        host = store.create({"apiVersion": API, "kind": "BareMetalHost",
                             "metadata": {"name": "server-0", "namespace": INFRA}, "spec": {"online": False}})
        store.update_status({**host, "status": {"provisioning": {"state": "available"}, "poweredOn": False}})
        for name, server, _reason in ODD:
            store.create(secret(f"{name}-kubeconfig", namespace,
                                kubeconfig=odd_kubeconfig(server.format(odd=odd_server))))
            store.create(claim(name, namespace, identity=f"{name}-kubeconfig"))
        store.create({"apiVersion": API, "kind": "HostClaim", "metadata": {"name": "good", "namespace": namespace},
                      "spec": {"poweredOn": False, "hostSelector": {"inNamespace": INFRA}}})

    started = time.monotonic()
    result = run_spec(module_spec("hostclaim"), {"backend": "local", "store_path": store_path,
                                                 "namespace": namespace, "allowed_local_hosts": ["127.0.0.1"]},
                      check_mode=False)
    assert time.monotonic() - started < 60
    assert "internal error" not in str(result.get("msg", "")) and "Traceback" not in str(result)
    claims = {c["name"]: c for c in result["claims"]}
    assert claims["good"]["host"] == f"{INFRA}/server-0" and claims["good"]["phase"] == "bound"
    with open_store({"backend": "local", "store_path": store_path}) as store:
        for name, _server, reason in ODD:
            reached = condition(store.get(Ref(API, "HostClaim", name, namespace)), HOSTS_REACHABLE)
            assert (reached.get("status"), reached.get("reason")) == ("False", reason), (name, reached)
            assert SECRET_WORDS not in reached["message"], (name, reached["message"])
            assert claims[name]["phase"] == "unreachable", claims[name]
        assert store.get(Ref(API, "BareMetalHost", "server-0", INFRA))["spec"]["consumerRef"]["name"] == "good"
    assert not [p for p in OddServer.requested if p.startswith("/followed")]  # a redirect is not followed


@pytest.mark.parametrize("server, words", [
    ("http://127.0.0.1:{port}/json", "names a loopback or link-local host"),
    ("http://localhost:{port}/json", "names a loopback or link-local host"),
    ("http://[::1]:{port}/json", "names a loopback or link-local host"),
    ("http://169.254.169.254/latest/meta-data", "names a loopback or link-local host"),
    ("file:///etc/passwd", "is not an http or https URL"),
])
def test_an_identity_ref_server_on_the_controllers_own_hosts_is_refused_unless_allowed(
        odd_server, tmp_path, server, words):
    server = server.format(port=odd_server.split(":")[1])
    with open_store({"backend": "local", "store_path": str(tmp_path / "store.db")}) as store:
        store.create(secret("hosts", "tenant", kubeconfig=odd_kubeconfig(server)))
        ref = Ref.of(store.create(claim("claim", "tenant", identity="hosts")))
        step = reconcile_host_claim(store, ref)  # the default policy: no local host
        assert step.phase == "unreachable" and step.requeue_after is None
        assert step.error.startswith("spec.identityRef: the kubeconfig of Secret tenant/hosts: its server "
                                     "(clusters[0].cluster.server)") and words in step.error
        assert condition(store.get(ref), HOSTS_REACHABLE)["reason"] == "IdentityRefInvalid"
        if "127.0.0.1" in server:  # allowed by name: the server is reached (and found to be no Kubernetes API)
            step = reconcile_host_claim(store, ref, outbound=OutboundPolicy.of(["127.0.0.1"]))
            assert step.requeue_after and "did not answer as a Kubernetes API server" in step.message
