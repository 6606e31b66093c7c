"""playbooks/metal_stack.yml as a bastion runs it (ansible-playbook, the local store, the real Ironic): a
MetalStackCluster with its firewall, three control-plane and two worker machines on a partition of seven
fake-hardware hosts, one machine and the firewall pinned; the tables show each machine's host, type and address and
each host's type; a second run changes nothing; metal_stack_state=absent frees and removes everything."""
from __future__ import annotations

import ipaddress
import re
import secrets
from pathlib import Path

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from tests.integration.playbook_runs import REPO, ansible_playbook

PLAYBOOK = REPO / "playbooks" / "metal_stack.yml"
# MACHINE KIND ROLE HOST TYPE ADDRESS READY PROVIDER ID
ROW = re.compile(r"^(\S+) +(MetalStack(?:Machine|Firewall)) +(\S+) +(\S+/ms-host-\d) +(\S+) +(.+?) +(True|False) +"
                 r"(metalstack://\S+)", re.MULTILINE)
HOST_ROW = re.compile(r"^(ms-host-\d) +vagrant +(\S+) +(\S+) +(.+)$", re.MULTILINE)
INFRA = "infrastructure.cluster.x-k8s.io"


def test_a_cluster_with_its_firewall_and_five_machines_then_gone(tmp_path: Path, ironic):
    namespace = f"ms-{secrets.token_hex(3)}"  # the node names on the session's Ironic are the hosts' own
    store = {"backend": "local", "store_path": str(tmp_path / "store.db")}
    extra = {"metal3_store": store, "metal3_ironic": {"ironic_cloud": ironic.cloud}, "metal_stack_ironic": False,
             "metal_stack_namespace": namespace, "metal_stack_wait_timeout": 300}

    run = ansible_playbook(PLAYBOOK, extra, env=ironic.env, timeout=900)
    assert run.ok, run.output
    assert "Traceback" not in run.output
    rows = {m[0]: m[1:] for m in ROW.findall(run.output)}
    assert sorted(rows) == ["control-plane-0", "control-plane-1", "control-plane-2", "metal-stack-cluster-firewall",
                            "worker-0", "worker-1"], run.output
    assert [r[1] for r in rows.values()].count("control-plane") == 3
    assert rows["metal-stack-cluster-firewall"][2].endswith("/ms-host-0")  # pinned by the firewallSpec
    assert rows["worker-1"][2].endswith("/ms-host-6") and rows["worker-1"][6] == "metalstack://ms-host-6"
    assert len({r[2] for r in rows.values()}) == 6  # six hosts, none twice
    assert {r[3] for r in rows.values()} == {"v1-small-x86"} and {r[5] for r in rows.values()} == {"True"}
    node = ipaddress.ip_network("10.8.0.0/22")
    for name, row in rows.items():
        addresses = [ipaddress.ip_address(a) for a in row[4].split(", ")]
        assert addresses[0] in node, (name, row)
    assert rows["metal-stack-cluster-firewall"][4].startswith("10.8.0.1, 203.0.113.")  # the gateway, public
    hosts = {h[0]: h[1:] for h in HOST_ROW.findall(run.output)}
    assert sorted(hosts) == [f"ms-host-{i}" for i in range(7)] and {h[0] for h in hosts.values()} == {"v1-small-x86"}
    with open_store(store) as reader:
        cluster = reader.get(Ref(f"{INFRA}/v1alpha3", "MetalStackCluster", "metal-stack-cluster", namespace))
        assert cluster["status"]["ready"] and cluster["status"]["nodeNetwork"] == "10.8.0.0/24"
        assert ipaddress.ip_address(cluster["spec"]["controlPlaneEndpoint"]["host"]) in ipaddress.ip_network(
            "203.0.113.0/24")
        assert [o["kind"] for o in cluster["metadata"]["ownerReferences"]] == ["Cluster"]
        machine = reader.get(Ref(f"{INFRA}/v1alpha3", "MetalStackMachine", "worker-0", namespace))
        assert [o["kind"] for o in machine["metadata"]["ownerReferences"]] == ["Machine"]
        assert machine["spec"]["userData"] == {"name": "worker-0-bootstrap", "namespace": namespace}

    again = ansible_playbook(PLAYBOOK, extra, env=ironic.env, timeout=900)
    assert again.ok, again.output
    assert re.search(r"localhost +: ok=\d+ +changed=0 ", again.output), again.output
    assert {m[0]: m[3] for m in ROW.findall(again.output)} == {name: row[2] for name, row in rows.items()}

    gone = ansible_playbook(PLAYBOOK, {**extra, "metal_stack_state": "absent"}, env=ironic.env, timeout=900)
    assert gone.ok, gone.output
    with open_store(store) as reader:
        for api, kind in ((f"{INFRA}/v1alpha3", "MetalStackCluster"), (f"{INFRA}/v1alpha3", "MetalStackMachine"),
                          (f"{INFRA}/v1alpha4", "MetalStackFirewall"), ("metal3.io/v1alpha1", "BareMetalHost"),
                          ("ipam.metal3.io/v1alpha1", "IPClaim"), ("ipam.metal3.io/v1alpha1", "IPAddress"),
                          ("ipam.metal3.io/v1alpha1", "IPPrefix"), ("ipam.metal3.io/v1alpha1", "IPPrefixClaim"),
                          ("ipam.metal3.io/v1alpha1", "IPPool"), ("ipam.metal3.io/v1alpha1", "IPPrefixPool")):
            assert reader.list(api, kind, namespace) == [], kind
