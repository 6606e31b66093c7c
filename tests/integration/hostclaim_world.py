"""What the HostClaim tests start from: an infrastructure namespace with the demo's hosts, registered on the real
Ironic and available, and HostDeployPolicies saying which tenants' claims they serve."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import reconcile_hosts
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import IronicOptions
from tests.harness.cluster import KubeCluster
from tests.harness.demo import demo_objects

API = "metal3.io/v1alpha1"
INFRA = "infra"


@pytest.fixture
def management(tmp_path: Path, ironic, monkeypatch):
    """A second kube-apiserver, the management cluster, with the namespace ``infra``; the test's process reaches
    the real Ironic."""
    from kubernetes import client

    for key, value in ironic.env.items():
        monkeypatch.setenv(key, value)
    with KubeCluster(tmp_path / "management") as cluster:
        cluster.install_crds()
        client.CoreV1Api(cluster.api_client()).create_namespace({"metadata": {"name": INFRA}})
        yield cluster


def policy(name: str, namespace: str, **constraints: Any) -> dict[str, Any]:
    """A HostDeployPolicy of ``namespace`` admitting the tenants ``constraints`` (spec.hostClaimNamespaces) say."""
    return {"apiVersion": API, "kind": "HostDeployPolicy", "metadata": {"name": name, "namespace": namespace},
            "spec": {"hostClaimNamespaces": constraints}}


def seed_infrastructure(store_options: dict[str, Any], ironic_options: IronicOptions, namespace: str,
                        policies: list[dict[str, Any]], hosts: int = 6, timeout: float = 180) -> list[Ref]:
    """The demo's first ``hosts`` hosts (and their BMC Secret) in ``namespace`` and ``policies``, written to the
    store; the hosts then reconciled on Ironic until they settle, available. The process must reach that Ironic
    (its OS_CLIENT_CONFIG_FILE and OS_CLOUD, ``ironic.env``). The hosts, by name."""
    with open_store(store_options) as store:
        for obj in [*demo_objects(namespace, hosts, ("hosts.yaml",)), *policies]:
            store.create(obj)
        refs = sorted((Ref.of(h) for h in store.list(API, "BareMetalHost", namespace)), key=lambda r: r.name)
    results = reconcile_hosts(lambda: open_store(store_options), ironic_options, refs, ("settled",), timeout)
    steps = [step for step, _reached in results]
    assert all(reached for _step, reached in results), [step.summary() for step in steps]
    assert [step.state for step in steps] == ["available"] * len(refs), [step.summary() for step in steps]
    return refs
