"""The operator provisioning through a real Ironic (fake-hardware): a BareMetalHost's life, and the
Metal3Machine flow from Cluster API Machines (the test-only minimal CRDs) to a ready machine."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.machines import MachineSet, ensure_machines
from ansible_collections.metal3.baremetal.plugins.module_utils.store.kube import KubernetesStore
from tests.harness.demo import demo_objects, mac
from tests.operator.conftest import condition, eventually

pytestmark = pytest.mark.kubernetes

BMH = ("metal3.io", "v1alpha1", "baremetalhosts")
INFRA = ("infrastructure.cluster.x-k8s.io", "v1beta1")


def host_state(custom: client.CustomObjectsApi, ns: str, name: str) -> str | None:
    try:
        host = custom.get_namespaced_custom_object(*BMH[:2], ns, BMH[2], name)
    except ApiException as e:
        if e.status == 404:
            return "gone"
        raise
    return ((host.get("status") or {}).get("provisioning") or {}).get("state")


def test_a_host_is_provisioned_then_deleted_deprovisioned_and_its_node_gone(operators, custom, kube_cluster,
                                                                            kube_namespace, ironic, ironic_client):
    operator = operators(env=ironic.env)
    client.CoreV1Api(kube_cluster.api_client()).create_namespaced_secret(kube_namespace, {
        "metadata": {"name": "host-0-bmc"}, "stringData": {"username": "admin", "password": "Bmc-0p3rator"}})
    custom.create_namespaced_custom_object(*BMH[:2], kube_namespace, BMH[2], {
        "apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost", "metadata": {"name": "host-0"},
        "spec": {"online": True, "bootMACAddress": mac(), "bmc": {"address": "fake://host-0",
                                                                  "credentialsName": "host-0-bmc"},
                 "image": {"url": "http://images.example/os.img", "checksum": "0" * 64, "checksumType": "sha256"}}})
    eventually(lambda: host_state(custom, kube_namespace, "host-0") == "provisioned", "host-0 provisioned",
               timeout=240)
    node_name = f"{kube_namespace}~host-0"
    assert ironic_client.get_node(node_name)["provision_state"] == "active"

    def succeeded() -> dict[str, Any] | None:
        host = custom.get_namespaced_custom_object(*BMH[:2], kube_namespace, BMH[2], "host-0")
        return host if condition(host, "Successful").get("status") == "True" else None

    host = eventually(succeeded, "a successful reconcile")
    assert "baremetalhost.metal3.io" in host["metadata"]["finalizers"]
    assert "Bmc-0p3rator" not in json.dumps(host)

    # The BMC password is nowhere the operator writes: its log, the runs' extra vars, output and events.
    def written() -> list[Path]:
        # os.walk, not rglob: the operator rotates its runs' artifacts while this walks, and os.walk passes over
        # a directory that went meanwhile where rglob raises
        paths = (Path(top, name) for top, _dirs, names in os.walk(operator.workdir) for name in names)
        return [p for p in paths if p.is_file() and not p.is_socket()]

    def leaked() -> list[Path]:
        found = []
        for path in written():
            try:
                if "Bmc-0p3rator" in path.read_text(errors="replace"):
                    found.append(path)
            except FileNotFoundError:  # a run's directory the operator removed meanwhile
                continue
        return found

    assert any(p.name == "stdout" for p in written())
    assert not leaked()

    custom.delete_namespaced_custom_object(*BMH[:2], kube_namespace, BMH[2], "host-0")
    eventually(lambda: host_state(custom, kube_namespace, "host-0") == "gone", "host-0 deleted", timeout=240)
    assert ironic_client.get_node(node_name) is None
    assert not leaked()
    # Its runs' directory went with it.
    runs = operator.workdir / "runner" / "metal3.io" / "v1alpha1" / "BareMetalHost" / kube_namespace / "host-0"
    eventually(lambda: not runs.exists(), "host-0's run directory removed")


def test_a_machine_of_the_metal3machine_flow_becomes_ready_with_a_provider_id(operators, custom, kube_cluster,
                                                                              kube_namespace, ironic, ironic_client):
    ns = kube_namespace
    with KubernetesStore(kubeconfig=str(kube_cluster.kubeconfig)) as store:
        for obj in demo_objects(ns, 2):
            store.create(obj)
        operators(env=ironic.env)
        ensure_machines(store, MachineSet("wk", ns, "my-cluster", "my-cluster-workers", 1, False,
                                          "my-cluster-userdata"))

    def ready() -> dict[str, Any] | None:
        machine = custom.get_namespaced_custom_object(*INFRA, ns, "metal3machines", "wk-0")
        return machine if (machine.get("status") or {}).get("ready") else None

    machine = eventually(ready, "Metal3Machine wk-0 ready", timeout=300)
    host_name = machine["metadata"]["annotations"]["metal3.io/BareMetalHost"].split("/")[1]
    assert machine["spec"]["providerID"] == f"metal3://{ns}/{host_name}/wk-0"
    eventually(lambda: condition(custom.get_namespaced_custom_object(*INFRA, ns, "metal3machines", "wk-0"),
                                 "Successful").get("status") == "True", "a successful reconcile")
    host = custom.get_namespaced_custom_object(*BMH[:2], ns, BMH[2], host_name)
    assert host["status"]["provisioning"]["state"] == "provisioned"
    assert host["spec"]["consumerRef"]["name"] == "wk-0"
    assert ironic_client.get_node(f"{ns}~{host_name}")["provision_state"] == "active"
    secrets = {s.metadata.name for s in client.CoreV1Api(kube_cluster.api_client()).list_namespaced_secret(ns).items}
    assert {"wk-0-metadata", "wk-0-networkdata"} <= secrets
