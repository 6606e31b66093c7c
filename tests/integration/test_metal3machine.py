"""The Metal3Machine flow end to end on the demo's manifests, against a real Ironic (fake-hardware): as the demo
writes them (CAPM3's v1beta1), and as a user writes them at today's v1beta2."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import INFRA_API
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.machines import converge
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref, secret_values
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import IronicOptions
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import load_definitions
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.harness.demo import ensure_demo_machines, provision_demo_machines, settle_demo_hosts
from tests.integration.playbook_runs import REPO

DEMO = REPO / "playbooks" / "files" / "demo"
NS = "metal3"
V2 = "infrastructure.cluster.x-k8s.io/v1beta2"

# The demo's CAPM3 documents that v1beta2 spells otherwise, written as a v1beta2 user writes them. The data
# templates are the seed's and read the same in both versions: they only change apiVersion.
V1BETA2 = {(doc["kind"], doc["metadata"]["name"]): doc for doc in yaml.safe_load_all("""
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: Metal3Cluster
metadata: {name: my-cluster, labels: {metal3.baremetal/demo: "true"}}
spec:
  controlPlaneEndpoint: {host: 192.168.11.5, port: 6443}
  cloudProviderEnabled: false
  failureDomains:
  - {name: az-a, controlPlane: true}
  - {name: az-b, controlPlane: true}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: Metal3MachineTemplate
metadata: {name: my-cluster-controlplane, labels: {metal3.baremetal/demo: "true"}}
spec:
  template:
    spec:
      image:
        url: http://images.example/ubuntu-24.04.qcow2
        checksum: http://images.example/ubuntu-24.04.qcow2.sha256sum
        checksumType: sha256
        diskFormat: qcow2
      hostSelector: {matchLabels: {metal3.baremetal/demo: "true"}}
      dataTemplate: {name: cp-net-az-a}
      dataTemplatesByFailureDomain:
        az-a: {name: cp-net-az-a}
        az-b: {name: cp-net-az-b}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: Metal3MachineTemplate
metadata: {name: my-cluster-workers, labels: {metal3.baremetal/demo: "true"}}
spec:
  template:
    spec:
      image:
        url: http://images.example/ubuntu-24.04.qcow2
        checksum: http://images.example/ubuntu-24.04.qcow2.sha256sum
        checksumType: sha256
        diskFormat: qcow2
      hostSelector: {matchLabels: {metal3.baremetal/demo: "true"}}
      dataTemplate: {name: cp-net-az-a}
  failureDomainDataTemplates:
  - {failureDomain: az-a, dataTemplate: {name: cp-net-az-a}}
  - {failureDomain: az-b, dataTemplate: {name: cp-net-az-b}}
""")}


def at_version(obj: dict, version: str) -> dict:
    """A demo document as written at ``version`` of CAPM3's API (other groups' as they are)."""
    if version == "v1beta1" or not obj["apiVersion"].startswith("infrastructure.cluster.x-k8s.io/"):
        return obj
    return copy.deepcopy(V1BETA2.get((obj["kind"], obj["metadata"]["name"])) or {**obj, "apiVersion": V2})


@pytest.fixture(params=["v1beta1", "v1beta2"])
def lab(tmp_path: Path, ironic, monkeypatch, request):
    for key, value in ironic.env.items():
        monkeypatch.setenv(key, value)
    path = str(tmp_path / "store.db")
    objects = []
    for manifest in ("hosts.yaml", "cluster.yaml"):
        for obj in load_definitions(src=str(DEMO / manifest)):
            obj = at_version(obj, request.param)
            obj["metadata"]["namespace"] = NS
            objects.append(obj)
    options = IronicOptions(cloud=ironic.cloud)
    settle_demo_hosts(lambda: LocalStore(path), options, NS, objects)
    return path, options


def test_machines_spread_claim_render_provision_and_release(lab):
    path, options = lab
    steps = provision_demo_machines(lambda: LocalStore(path), options, NS)
    machines = {s.summary()["name"]: s.summary() for s in steps}
    assert sorted(m["failure_domain"] for n, m in machines.items() if n.startswith("cp")) == ["az-a", "az-a", "az-b"]
    assert len({m["host"] for m in machines.values()}) == 5  # five machines, five hosts
    with LocalStore(path) as store:
        for name, machine in machines.items():
            host = store.get(Ref("metal3.io/v1alpha1", "BareMetalHost", machine["host"].split("/")[1], NS))
            domain = host["metadata"]["labels"]["infrastructure.cluster.x-k8s.io/failure-domain"]
            assert machine["provider_id"] == f"metal3://{NS}/{host['metadata']['name']}/{name}"
            assert host["status"]["provisioning"]["state"] == "provisioned"
            assert host["spec"]["consumerRef"]["name"] == name
            assert host["spec"]["userData"]["name"] == "my-cluster-userdata"
            network = secret_values(store.get(Ref("v1", "Secret", f"{name}-networkdata", NS)))["networkData"]
            octet = "11" if domain == "az-a" else "21"  # the template of the host's own failure domain
            assert f"vlan_link: bond1\n  vlan_id: {octet}" in network and "bond_miimon: 100" in network
            ips = [a["address"] for a in machine["addresses"] if a["type"] == "InternalIP"]
            assert ips[0].startswith(f"192.168.{octet}.") and ips[1].startswith(f"192.168.{int(octet) + 1}.")

    again, ready = converge(lambda: LocalStore(path), options, NS, None, ("ready",), 60)
    assert ready and not any(s.changed for s in again)

    with LocalStore(path) as store:
        ensure_demo_machines(store, NS, control_plane=0, workers=0)
    steps, gone = converge(lambda: LocalStore(path), options, NS, None, ("deleted",), 300)
    assert gone, [s.summary() for s in steps]
    with LocalStore(path) as store:
        for api, kind in ((INFRA_API, "Metal3Machine"), (INFRA_API, "Metal3DataClaim"), (INFRA_API, "Metal3Data"),
                          ("ipam.metal3.io/v1alpha1", "IPClaim"), ("ipam.metal3.io/v1alpha1", "IPAddress")):
            assert store.list(api, kind, NS) == [], kind
        secrets = [s["metadata"]["name"] for s in store.list("v1", "Secret", NS)]
        assert sorted(secrets) == ["demo-bmc", "my-cluster-userdata"]
        for host in store.list("metal3.io/v1alpha1", "BareMetalHost", NS):
            assert "consumerRef" not in host["spec"] and "image" not in host["spec"]
            assert host["status"]["provisioning"]["state"] == "available"
