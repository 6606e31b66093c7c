"""Machines that really boot: the lab's virtual servers enrolled by IPMI (PXE) and by Redfish virtual media (no
DHCP), inspected by the agent, provisioned by playbooks/lab-demo.yml with the seed's per-failure-domain bond +
VLAN templates, and checked from inside each booted guest; then deprovisioned (cleaned) and deleted.

The virtual-media server gets no DHCP answer at all: the agent's network is its preprovisioning network data.
Slow (every machine runs under emulation where KVM cannot boot it): one test, one lab at a time."""
from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.harness import guest
from tests.harness.virtual_lab import LAB_PLAYBOOK, lab_images, one_lab_at_a_time, without_leftovers
from tests.integration.playbook_runs import REPO, ansible_playbook

DEMO_PLAYBOOK = REPO / "playbooks" / "lab-demo.yml"
BASE = REPO / "build" / "lab-provisioning"
NETNS = "metal3-lab-prov"
# One vCPU each: under emulation each is a host thread, and make test's other worker shares the machine's cores.
SERVERS = [{"name": "lab-prov-0", "firmware": "bios", "memory_mib": 2048, "vcpus": 1},
           {"name": "lab-prov-1", "firmware": "uefi", "memory_mib": 2048, "vcpus": 1, "dhcp": False}]
LAB = {"virtual_lab_base_dir": str(BASE), "virtual_lab_netns": NETNS, "virtual_lab_bridge": "labpbr0",
       "virtual_lab_servers": SERVERS}
# The gateway of each failure domain's management VLAN (playbooks/files/lab/cluster.yaml.j2).
GATEWAYS = {"az-a": "192.168.11.1", "az-b": "192.168.21.1"}


def demo(images: Path, state: str = "present") -> str:
    run = ansible_playbook(DEMO_PLAYBOOK, {"lab_base_dir": str(BASE), "lab_images_dir": str(images),
                                           "lab_state": state, "lab_wait_timeout": 3000},
                           timeout=4000, netns=NETNS)
    assert run.ok, run.output[-8000:]
    return run.output


def stored(kind: str) -> dict[str, dict[str, Any]]:
    with sqlite3.connect(BASE / "store.db") as db:
        return {name: json.loads(body) for name, body in
                db.execute("select name, body from objects where kind = ?", (kind,))}


def ironic_nodes() -> list[str]:
    """The names of Ironic's nodes, asked from inside the lab."""
    script = ("import openstack, sys; c = openstack.connect(auth_type='http_basic', load_yaml_config=False, "
              "load_envvars=False, auth={'endpoint': 'http://172.22.0.1:6385', 'username': 'metal3', "
              "'password': open(sys.argv[1]).read().strip()}); print('\\n'.join(n.name for n in c.baremetal.nodes()))")
    done = subprocess.run(["ip", "netns", "exec", NETNS, str(REPO / ".venv" / "bin" / "python"), "-c", script,
                           str(BASE / "ironic" / "password")], capture_output=True, text=True, check=True, timeout=60)
    return done.stdout.split()


def domain_state(name: str) -> str:
    return subprocess.run(["virsh", "-c", guest.LIBVIRT_URI, "domstate", name], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.mark.virtual_lab
def test_servers_enrolled_by_ipmi_and_by_virtual_media_boot_the_rendered_network():
    images = lab_images()
    with one_lab_at_a_time():
        without_leftovers(LAB)
        started = time.monotonic()
        run = ansible_playbook(LAB_PLAYBOOK, LAB, timeout=1800)
        try:
            assert run.ok, run.output[-5000:]
            print(f"lab started in {time.monotonic() - started:.0f}s")
            provision_check_and_release(images)
        finally:
            removed = ansible_playbook(LAB_PLAYBOOK, {**LAB, "virtual_lab_state": "absent"}, timeout=900)
        assert removed.ok, removed.output[-5000:]


def provision_check_and_release(images: Path) -> None:
    started = time.monotonic()
    output = demo(images)
    print(f"provisioned and booted in {time.monotonic() - started:.0f}s")
    servers = {s["name"]: s for s in json.loads((BASE / "servers.json").read_text())}
    hosts = stored("BareMetalHost")
    assert sorted(hosts) == sorted(servers)
    for name, host in hosts.items():
        status = host["status"]
        assert status["provisioning"]["state"] == "provisioned", status
        # The agent's inventory: the server's real NICs (its two MACs) and its disk.
        assert {nic["mac"] for nic in status["hardware"]["nics"]} >= set(servers[name]["macs"])
        assert any(disk["name"].endswith("vda") for disk in status["hardware"]["storage"])
    assert hosts[SERVERS[0]["name"]]["spec"]["bmc"]["address"].startswith("ipmi://")
    assert hosts[SERVERS[1]["name"]]["spec"]["bmc"]["address"].startswith("redfish-virtualmedia+http://")
    # PXE for the IPMI server; not one DHCP answer to the virtual-media one.
    acked = set(re.findall(r"DHCPACK\(labpbr0\) \S+ (\S+)", (BASE / "dnsmasq.log").read_text()))
    assert servers[SERVERS[0]["name"]]["macs"][0] in acked
    assert not acked & set(servers[SERVERS[1]["name"]]["macs"])
    assert "Seen from inside the guests" in output

    machines = stored("Metal3Machine")
    assert len(machines) == len(SERVERS)
    for machine in machines.values():
        host_name = machine["metadata"]["annotations"]["metal3.io/BareMetalHost"].split("/")[-1]
        domain = hosts[host_name]["metadata"]["labels"]["infrastructure.cluster.x-k8s.io/failure-domain"]
        # The rendered networks' addresses (the NICs' own, seen by the agent while it ran, come after them).
        inspected = {nic.get("ip") for nic in hosts[host_name]["status"]["hardware"]["nics"]}
        addresses = sorted(a["address"] for a in machine["status"]["addresses"]
                           if a["type"] == "InternalIP" and a["address"] not in inspected)
        guest.wait_for_agent(host_name, 600)
        seen = guest.network(host_name)
        assert seen.hostname == host_name  # meta_data's local-hostname
        # One bond of the two NICs (cloud-init names bonds bond0, bond1... in its own order, not by the link id).
        nics = sorted(nic["name"] for nic in hosts[host_name]["status"]["hardware"]["nics"]
                      if nic["mac"] in servers[host_name]["macs"])
        assert sorted(sorted(members) for members in seen.bonds.values()) == [nics]
        vlan_ids = {"az-a": (".11", ".12"), "az-b": (".21", ".22")}[domain]
        on_vlans = [address.split("/")[0] for name, held in seen.addresses.items() if name.endswith(vlan_ids)
                    for address in held]
        assert sorted(on_vlans) == addresses
        assert len(addresses) == 2
        assert seen.default_gateway == GATEWAYS[domain]

    # A second run changes nothing.
    again = demo(images)
    assert re.search(r"changed=0\s", again), again[-3000:]

    # Deprovision (metadata cleaning, power off) and delete: no Ironic node is left.
    demo(images, "absent")
    assert stored("BareMetalHost") == {}
    assert ironic_nodes() == []
    assert {domain_state(name) for name in servers} == {"shut off"}
