"""The Metal3Machine flow end to end on the demo's manifests, against a real Ironic (fake-hardware)."""
from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import INFRA_API
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.machines import (
    MachineSet,
    converge,
    ensure_machines,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import reconcile_hosts
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import IronicOptions
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import load_definitions
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from ansible_collections.metal3.baremetal.plugins.module_utils.store.objects import Ref, secret_values
from tests.integration.playbook_runs import REPO

DEMO = REPO / "playbooks" / "files" / "demo"
NS = "metal3"


@pytest.fixture
def lab(tmp_path: Path, ironic, monkeypatch):
    for key, value in ironic.env.items():
        monkeypatch.setenv(key, value)
    path = str(tmp_path / "store.db")
    with LocalStore(path) as store:
        for manifest in ("hosts.yaml", "cluster.yaml"):
            for obj in load_definitions(src=str(DEMO / manifest)):
                obj["metadata"]["namespace"] = NS
                obj["metadata"]["name"] = obj["metadata"]["name"]
                store.create(obj)
        hosts = [Ref.of(h) for h in store.list("metal3.io/v1alpha1", "BareMetalHost", NS)]
    options = IronicOptions(cloud=ironic.cloud)
    results = reconcile_hosts(lambda: LocalStore(path), options, hosts, ("settled",), 120)
    assert all(reached for _step, reached in results), results
    return path, options


def test_machines_spread_claim_render_provision_and_release(lab):
    path, options = lab
    with LocalStore(path) as store:
        ensure_machines(store, MachineSet("cp", NS, "my-cluster", "my-cluster-controlplane", 3, True,
                                          "my-cluster-userdata"))
        ensure_machines(store, MachineSet("wk", NS, "my-cluster", "my-cluster-workers", 2, False,
                                          "my-cluster-userdata"))
    steps, ready = converge(lambda: LocalStore(path), options, NS, None, ("ready",), 300)
    assert ready, [s.summary() for s in steps]
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
        ensure_machines(store, MachineSet("cp", NS, "my-cluster", "my-cluster-controlplane", 0, True))
        ensure_machines(store, MachineSet("wk", NS, "my-cluster", "my-cluster-workers", 0))
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
