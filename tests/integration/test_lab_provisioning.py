"""Machines that really boot: the lab's virtual server enrolled by Redfish virtual media (no DHCP), inspected by the
agent (booting the one its PreprovisioningImage serves), provisioned by playbooks/lab-demo.yml with the seed's
per-failure-domain bond + VLAN templates, and checked from inside the booted guest; then deprovisioned (cleaned)
and deleted.

The virtual-media server gets no DHCP answer at all: the agent's network is its preprovisioning network data.
It has two disks, and gets a software RAID-1 over them while it prepares: its image boots from the array, seen
in the guest's /proc/mdstat.

Then, day 2 on the virtual-media server, provisioned: a BIOS setting applied by servicing under a HostUpdatePolicy
(the guest not reprovisioned), and a DataImage's ISO seen as a CD inside the guest, and gone once deleted.

That much runs in make test. With METAL3_LAB_FULL=1 (`make lab-test-full`), too long for make test:

A second server, enrolled by IPMI and booted by PXE (legacy BIOS, the agent from the lab's DHCP and iPXE), is
provisioned beside the first, and checked the same way.

The demo's cluster is hybrid: its control plane is the servers, its two workers virtual machines of the lab's
libvirt (HostClaims of kind libvirt, one per failure domain), from the same data templates; inside each, cloud-init
applied the network data on its config drive; scaled down, the machines are deleted with their disks.

Beside the demo, at the same time, a third server becomes a metal-stack firewall (playbooks/lab-metal-stack.yml):
a MetalStackCluster's MetalStackFirewall, pinned to it, boots the lab's Debian image with its nftables rule set,
which is read back from inside the guest; deleting the cluster deprovisions and frees the host and releases the
firewall's addresses.

Slow (every machine runs under emulation where KVM cannot boot it): one test, one lab at a time."""
from __future__ import annotations

import ipaddress
import json
import os
import re
import sqlite3
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import secret_values
from tests.harness import guest
from tests.harness.nft import Applied
from tests.harness.virtual_lab import LAB_PLAYBOOK, lab_first, lab_images, one_lab_at_a_time, without_leftovers
from tests.integration.playbook_runs import REPO, ansible_playbook

DEMO_PLAYBOOK = REPO / "playbooks" / "lab-demo.yml"
IRONIC_PLAYBOOK = REPO / "playbooks" / "lab-ironic.yml"
METAL_STACK_PLAYBOOK = REPO / "playbooks" / "lab-metal-stack.yml"
BASE = REPO / "build" / "lab-provisioning"
NETNS = "metal3-lab-prov"
# make test runs the demo on its virtual-media server; METAL3_LAB_FULL=1 (`make lab-test-full`) adds its IPMI
# server, makes the demo's cluster hybrid (two workers on libvirt VMs) and adds the metal-stack firewall's server
# beside it: five guests under emulation, over an hour on two busy cores. Every guest is a core while it boots
# or writes its disk: make test, which runs this beside everything else, boots one.
FULL = os.environ.get("METAL3_LAB_FULL") == "1"
# One vCPU each: under emulation each is a host thread, and make test's other worker shares the machine's cores.
VM_WORKERS = 2 if FULL else 0
# The virtual-media server has two disks: the demo gives it a software RAID-1 over them (Ironic's agent, while
# it prepares), which its image is written to and boots from. UEFI: the agent installs no BIOS boot loader.
VIRTUAL_MEDIA_SERVER = {"name": "lab-prov-1", "firmware": "uefi", "memory_mib": 2048, "vcpus": 1, "dhcp": False,
                        "disks": 2}
IPMI_SERVER = {"name": "lab-prov-0", "firmware": "bios", "memory_mib": 2048, "vcpus": 1}
DEMO_SERVERS = [*([IPMI_SERVER] if FULL else []), VIRTUAL_MEDIA_SERVER]
RAID_SERVER = VIRTUAL_MEDIA_SERVER["name"]
# The metal-stack firewall's server (IPMI and PXE), which the demo leaves alone.
FIREWALL_SERVER = "lab-prov-2"
FIREWALL_SERVER_SPEC = {"name": FIREWALL_SERVER, "firmware": "bios", "memory_mib": 2048, "vcpus": 1}
SERVERS = [*DEMO_SERVERS, *([FIREWALL_SERVER_SPEC] if FULL else [])]
LAB = {"virtual_lab_base_dir": str(BASE), "virtual_lab_netns": NETNS, "virtual_lab_bridge": "labpbr0",
       "virtual_lab_servers": SERVERS}
# The gateway of each failure domain's management VLAN (playbooks/files/lab/cluster.yaml.j2).
GATEWAYS = {"az-a": "192.168.11.1", "az-b": "192.168.21.1"}
# playbooks/lab-metal-stack.yml's cluster and firewall; the lab's provisioning network, which holds both the
# firewall's node network and its public network (playbooks/files/lab/metal-stack.yaml.j2).
METAL_STACK_CLUSTER = "metal-stack-lab"
FIREWALL = f"{METAL_STACK_CLUSTER}-firewall"
LAB_NETWORK = ipaddress.ip_network("172.22.0.0/24")
LAB_HOST = "172.22.0.1"
LAB_HTTP = f"http://{LAB_HOST}:8088"  # Ironic's HTTP server (playbooks/vars/lab.yml)
# Day 2 (tests/integration/playbooks/lab_day2.yml) on the virtual-media server: virtual media is how a DataImage
# reaches a host, and its Redfish BMC (sushy-tools) emulates a BIOS.
DAY2_PLAYBOOK = REPO / "tests" / "integration" / "playbooks" / "lab_day2.yml"
DAY2_SERVER = VIRTUAL_MEDIA_SERVER["name"]
DAY2_SETTING, DAY2_VALUE = "ProcTurboMode", "Disabled"
DAY2_LABEL = "METAL3DAY2"


def demo(images: Path, state: str = "present") -> str:
    run = ansible_playbook(DEMO_PLAYBOOK, {"lab_base_dir": str(BASE), "lab_images_dir": str(images),
                                           "lab_state": state, "lab_wait_timeout": 3000,
                                           "lab_demo_excluded_servers": [FIREWALL_SERVER],
                                           "lab_vm_workers": VM_WORKERS, "lab_bridge": LAB["virtual_lab_bridge"],
                                           "lab_preprovisioning_images": True},
                           timeout=4000, netns=NETNS)
    assert run.ok, run.output[-8000:]
    return run.output


def metal_stack(images: Path, state: str = "present") -> str:
    run = ansible_playbook(METAL_STACK_PLAYBOOK, {"lab_base_dir": str(BASE), "lab_images_dir": str(images),
                                                  "lab_state": state, "lab_wait_timeout": 3000,
                                                  "lab_firewall_server": FIREWALL_SERVER},
                           timeout=4000, netns=NETNS)
    assert run.ok, run.output[-8000:]
    return run.output


def side_by_side(images: Path, state: str = "present") -> tuple[str, str]:
    """The demo and (FULL) the metal-stack firewall at once, each its own ansible-playbook on the lab's one Ironic
    and store, as two users would: the servers are enrolled, inspected, cleaned, deployed and deprovisioned
    together. Ironic is started first (both playbooks' first play then finds it running). Without FULL, the
    firewall's output is ''."""
    if state == "present":
        ironic = ansible_playbook(IRONIC_PLAYBOOK, {"lab_base_dir": str(BASE), "lab_images_dir": str(images)},
                                  timeout=900, netns=NETNS)
        assert ironic.ok, ironic.output[-5000:]
    with ThreadPoolExecutor(max_workers=2) as pool:
        ours = pool.submit(demo, images, state)
        theirs = pool.submit(metal_stack, images, state) if FULL else None
        return ours.result(), theirs.result() if theirs else ""


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


IRONIC_LOG = BASE / "ironic" / "log" / "ironic.log"


def ironic_log_size() -> int:
    return IRONIC_LOG.stat().st_size if IRONIC_LOG.exists() else 0


def erase_steps_run(since: int) -> list[str]:
    """The erase steps Ironic's conductor ran (its log from offset ``since``), in order: automated cleaning's
    (``{'step': ...``) and manual cleaning's (``{'interface': ..., 'step': ...``)."""
    with IRONIC_LOG.open("rb") as log:
        log.seek(since)
        return re.findall(r"Executing \{(?:'interface': '\w+', )?'step': '(erase_devices\w*)'",
                          log.read().decode(errors="replace"))


def bonds(seen: guest.GuestNetwork) -> list[list[str]]:
    """Each bond's members (cloud-init names bonds bond0, bond1... in its own order, not by the link id)."""
    return sorted(sorted(members) for members in seen.bonds.values())


def on_vlans(seen: guest.GuestNetwork, vlan_ids: tuple[str, ...]) -> list[str]:
    """The addresses the guest holds on the VLAN interfaces whose names end with ``vlan_ids``."""
    return sorted(address.split("/")[0] for name, held in seen.addresses.items() if name.endswith(vlan_ids)
                  for address in held)


def domain_state(name: str) -> str:
    """The domain's state; '' when there is no such domain."""
    done = subprocess.run(["virsh", "-c", guest.LIBVIRT_URI, "domstate", name], capture_output=True, text=True,
                          check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


@pytest.mark.virtual_lab
def test_lab_servers_provisioned_through_ironic_boot_the_rendered_network():
    images = lab_images()
    with one_lab_at_a_time():
        without_leftovers(LAB)
        started = time.monotonic()
        run = ansible_playbook(LAB_PLAYBOOK, LAB, timeout=1800)
        try:
            assert run.ok, run.output[-5000:]
            print(f"lab started in {time.monotonic() - started:.0f}s")
            lab_first(BASE)
            provision_check_and_release(images)
        finally:
            removed = ansible_playbook(LAB_PLAYBOOK, {**LAB, "virtual_lab_state": "absent"}, timeout=900)
        assert removed.ok, removed.output[-5000:]


def provision_check_and_release(images: Path) -> None:
    log_start = ironic_log_size()
    started = time.monotonic()
    output, metal_stack_output = side_by_side(images)
    print(f"provisioned and booted (the demo's machines and the firewall) in {time.monotonic() - started:.0f}s")
    servers = {s["name"]: s for s in json.loads((BASE / "servers.json").read_text())}
    demo_servers = {name: server for name, server in servers.items() if name != FIREWALL_SERVER}
    hosts = {name: host for name, host in stored("BareMetalHost").items()
             if (host["metadata"].get("labels") or {}).get("metal3.baremetal/lab") == "true"}
    assert sorted(hosts) == sorted(demo_servers)
    for name, host in hosts.items():
        status = host["status"]
        assert status["provisioning"]["state"] == "provisioned", status
        # The agent's inventory: the server's real NICs (its two MACs) and its disk.
        assert {nic["mac"] for nic in status["hardware"]["nics"]} >= set(servers[name]["macs"])
        assert any(disk["name"].endswith("vda") for disk in status["hardware"]["storage"])
    if FULL:
        assert hosts[IPMI_SERVER["name"]]["spec"]["bmc"]["address"].startswith("ipmi://")
    # The RAID as upstream records it once applied; the agent saw both disks.
    raid_host = hosts[RAID_SERVER]
    raid = {"hardwareRAIDVolumes": None, "softwareRAIDVolumes": [{"level": "1"}]}
    assert raid_host["status"]["provisioning"]["raid"] == raid, raid_host["status"]
    disks = sorted(disk["name"].rsplit("/", 1)[-1] for disk in raid_host["status"]["hardware"]["storage"])
    assert [name for name in disks if name.startswith("vd")] == ["vda", "vdb"], disks
    # Each booted the agent its PreprovisioningImage served (initrd: the lab's kernel and initramfs; the
    # virtual-media server accepts an ISO first, which the lab serves none of, and Ironic builds its ISO from them).
    agent_images = stored("PreprovisioningImage")
    assert sorted(agent_images) == sorted(demo_servers)
    for name, image in agent_images.items():
        ready = {c["type"]: c["status"] for c in image["status"]["conditions"]}
        assert ready == {"Ready": "True", "Error": "False"}, image["status"]
        assert image["spec"]["acceptFormats"] == (["initrd"] if name == IPMI_SERVER["name"] else ["iso", "initrd"])
        assert (image["status"]["format"], image["status"]["kernelUrl"]) == ("initrd", f"{LAB_HTTP}/images/ipa.kernel")
        assert image["status"]["imageUrl"] == f"{LAB_HTTP}/images/ipa.initramfs"
    assert hosts[VIRTUAL_MEDIA_SERVER["name"]]["spec"]["bmc"]["address"].startswith("redfish-virtualmedia+http://")
    # Not one DHCP answer to the virtual-media server; PXE for the IPMI one and the firewall's agent.
    acked = set(re.findall(r"DHCPACK\(labpbr0\) \S+ (\S+)", (BASE / "dnsmasq.log").read_text()))
    assert not acked & set(servers[VIRTUAL_MEDIA_SERVER["name"]]["macs"])
    if FULL:
        assert servers[IPMI_SERVER["name"]]["macs"][0] in acked
        assert servers[FIREWALL_SERVER]["macs"][0] in acked
    assert "Seen from inside the guests" in output

    machines = stored("Metal3Machine")
    assert len(machines) == len(DEMO_SERVERS) + VM_WORKERS
    on_vms = {name: m for name, m in machines.items() if m["spec"].get("kind") == "libvirt"}
    assert len(on_vms) == VM_WORKERS
    assert {m["spec"]["failureDomain"] for m in on_vms.values()} == ({"az-a", "az-b"} if VM_WORKERS else set())
    assert all(name.startswith("my-cluster-workers-") for name in on_vms)
    # The table (a debug message: its lines are escaped) says which class serves each machine.
    for name in machines:
        assert re.search(rf"{name}\s+{'libvirt' if name in on_vms else 'baremetal'}\s", output), output[-3000:]
    hardware_data = stored("HardwareData")
    for name, machine in machines.items():
        if name in on_vms:  # a virtual machine of its own, named after its HostClaim
            host_name = f"{machine['metadata']['namespace']}.{name}"
            domain = machine["spec"]["failureDomain"]
            nics_seen = hardware_data[name]["spec"]["hardware"]["nics"]
            hostname = name  # meta_data's local-hostname: the claim's name
            assert stored("HostClaim")[name]["status"]["virtualMachine"]["name"] == host_name
            assert domain_state(host_name) == "running"
        else:
            host_name = machine["metadata"]["annotations"]["metal3.io/BareMetalHost"].split("/")[-1]
            domain = hosts[host_name]["metadata"]["labels"]["infrastructure.cluster.x-k8s.io/failure-domain"]
            nics_seen = [nic for nic in hosts[host_name]["status"]["hardware"]["nics"]
                         if nic["mac"] in servers[host_name]["macs"]]
            hostname = host_name  # meta_data's local-hostname: the host's name
        # The rendered networks' addresses (the NICs' own, seen by the agent while it ran, come after them).
        inspected = {nic.get("ip") for nic in nics_seen}
        addresses = sorted(a["address"] for a in machine["status"]["addresses"]
                           if a["type"] == "InternalIP" and a["address"] not in inspected)
        # One bond of the two NICs, and the rendered addresses on the failure domain's VLANs over it.
        nics = sorted(nic["name"] for nic in nics_seen)
        vlan_ids = {"az-a": (".11", ".12"), "az-b": (".21", ".22")}[domain]
        expected = ([nics], addresses)
        guest.wait_for_agent(host_name, 900)
        seen = guest.settled_network(
            host_name, lambda seen, v=vlan_ids, e=expected: (bonds(seen), on_vlans(seen, v)) == e)
        assert seen.hostname == hostname
        assert bonds(seen) == [nics], seen.links
        assert on_vlans(seen, vlan_ids) == addresses, seen.addresses
        assert len(addresses) == 2
        assert seen.default_gateway == GATEWAYS[domain]
        if host_name == RAID_SERVER:
            booted_from_raid_1(host_name)

    if FULL:
        started = time.monotonic()
        check_firewall(servers[FIREWALL_SERVER], metal_stack_output)
        print(f"firewall checked from inside its guest in {time.monotonic() - started:.0f}s")

    # A second run changes nothing, in either playbook.
    again, metal_stack_again = side_by_side(images)
    assert re.search(r"changed=0\s", again), again[-3000:]
    assert not FULL or re.search(r"changed=0\s", metal_stack_again), metal_stack_again[-3000:]

    started = time.monotonic()
    serviced_with_a_data_image(hosts[DAY2_SERVER]["metadata"]["namespace"])
    print(f"serviced, with a DataImage attached and detached, in {time.monotonic() - started:.0f}s")

    # Deprovision (metadata cleaning, power off) and delete: no Ironic node is left. The firewall goes with its
    # cluster: its host deprovisioned (cleaned) and freed - still enrolled, available, held by no one, without
    # the image - and its addresses released, before the host itself is deleted.
    started = time.monotonic()
    _demo_output, metal_stack_output = side_by_side(images, "absent")
    print(f"deprovisioned and deleted in {time.monotonic() - started:.0f}s")
    assert not FULL or re.search(rf"^{FIREWALL_SERVER}\s+available\s+-\s+-\s*$", metal_stack_output,
                                 re.MULTILINE), metal_stack_output[-5000:]
    for kind in ("MetalStackCluster", "MetalStackFirewall", "IPPrefixClaim", "IPPrefixPool", "MachineType"):
        assert stored(kind) == {}, kind
    pools = {"lab-public", f"{METAL_STACK_CLUSTER}-node-network"}
    for kind in ("IPPool", "IPClaim", "IPAddress"):
        left = {name for name, obj in stored(kind).items()
                if name in pools or ((obj.get("spec") or {}).get("pool") or {}).get("name") in pools}
        assert left == set(), (kind, left)
    assert stored("BareMetalHost") == {}
    assert stored("PreprovisioningImage") == {}
    assert ironic_nodes() == []
    assert {domain_state(name) for name in servers} == {"shut off"}
    # The workers' virtual machines are gone, with their disks and config drives (the images they started from
    # stay, for the next ones).
    assert [domain_state(f"metal3.{name}") for name in on_vms] == [""] * len(on_vms)
    assert stored("HostClaim") == {} and stored("HardwareData") == {}
    if VM_WORKERS:  # without workers the lab's libvirt made no storage directory
        assert sorted(p.name for p in (BASE / "vms").iterdir()) == ["images"]
    # Automated cleaning in metadata mode, before each server was first available and when it was deprovisioned,
    # and the RAID server's manual cleaning between its RAID's removal and creation (upstream's steps): the agent
    # erased its disks' metadata, never a whole disk (Metal3's Ironic's configuration).
    steps = erase_steps_run(log_start)
    assert steps == ["erase_devices_metadata"] * (2 * len(servers) + 1), steps


def booted_from_raid_1(domain: str) -> None:
    """The guest's root filesystem is on a partition of a RAID-1 md device mirrored over both its disks, in sync."""
    root = guest.execute(domain, ["/usr/bin/findmnt", "-n", "-o", "SOURCE", "/"]).out.strip()
    mdstat = guest.execute(domain, ["/usr/bin/cat", "/proc/mdstat"]).out
    array = re.fullmatch(r"/dev/(md\d+)p\d+", root)
    assert array, (root, mdstat)
    line = re.search(rf"^{array.group(1)} : active raid1 (.*)$", mdstat, re.MULTILINE)
    assert line, mdstat
    assert sorted(re.sub(r"\d*\[\d+\]$", "", member) for member in line.group(1).split()) == ["vda", "vdb"], mdstat
    assert re.search(rf"^{array.group(1)} : .*\n.*\[2/2\] \[UU\]", mdstat, re.MULTILINE), mdstat


def day2(namespace: str, **lab_vars: Any) -> None:
    run = ansible_playbook(DAY2_PLAYBOOK, {"lab_base_dir": str(BASE), "lab_namespace": namespace,
                                           "lab_server": DAY2_SERVER, **lab_vars}, timeout=2400, netns=NETNS)
    assert run.ok, run.output[-8000:]


def firmware_condition(kind: str) -> dict[str, Any]:
    return {c["type"]: c for c in stored("HostFirmwareSettings")[DAY2_SERVER]["status"]["conditions"]}[kind]


def boot_id() -> str:
    return guest.execute(DAY2_SERVER, ["/usr/bin/cat", "/proc/sys/kernel/random/boot_id"]).out.strip()


def cd_labels() -> list[str | None]:
    """The label of the medium in each of the guest's CD drives (None: an empty drive), as lsblk sees them."""
    seen = guest.execute(DAY2_SERVER, ["/usr/bin/lsblk", "-J", "-o", "NAME,TYPE,LABEL"])
    assert seen.rc == 0, seen.err
    return [d["label"] for d in json.loads(seen.out)["blockdevices"] if d["type"] == "rom"]


def rebooted_guest(before: str) -> str:
    """The guest's boot id once it answers again after a reboot (its agent answers before the reboot is seen)."""
    deadline = time.monotonic() + 900
    while True:
        guest.wait_for_agent(DAY2_SERVER, 900)
        try:
            now = boot_id()
        except guest.GuestUnavailable:
            now = before
        if now != before:
            return now
        assert time.monotonic() < deadline, f"{DAY2_SERVER} did not reboot"
        time.sleep(5)


def serviced_with_a_data_image(namespace: str) -> None:
    """Day 2 on the provisioned virtual-media server, through the bastion's modules (tests/integration/playbooks/
    lab_day2.yml). A BIOS setting asked for waits, saying why, until a HostUpdatePolicy allows servicing; then a
    reboot services the host: Redfish shows the new value, and inside the guest the hostname and a file written
    before are as they were (it was not reprovisioned). A DataImage's ISO, put in the host's virtual CD drive as it
    next reboots, is a CD inside the guest with the ISO's label; deleted, it is gone after the reboot after."""
    guest.wait_for_agent(DAY2_SERVER, 900)
    hostname = guest.execute(DAY2_SERVER, ["/bin/hostname"]).out.strip()
    token = os.urandom(8).hex()
    written = guest.execute(DAY2_SERVER, ["/bin/sh", "-c", f"echo {token} > /var/lib/metal3-day2 && sync"])
    assert written.rc == 0, written.err
    first_boot = boot_id()
    assert lab_bios()[DAY2_SETTING] != DAY2_VALUE

    day2(namespace, lab_settings={DAY2_SETTING: DAY2_VALUE})
    waits = firmware_condition("ChangeDetected")
    assert waits["status"] == "True" and "HostUpdatePolicy" in waits["message"], waits

    day2(namespace, lab_update_policy=True, lab_reboot=True)
    second_boot = rebooted_guest(first_boot)
    host = stored("BareMetalHost")[DAY2_SERVER]
    assert host["status"]["provisioning"]["state"] == "provisioned" and host["status"]["operationalStatus"] == "OK"
    assert lab_bios()[DAY2_SETTING] == DAY2_VALUE
    assert firmware_condition("ChangeDetected")["status"] == "False"
    assert guest.execute(DAY2_SERVER, ["/bin/hostname"]).out.strip() == hostname
    assert guest.execute(DAY2_SERVER, ["/usr/bin/cat", "/var/lib/metal3-day2"]).out.strip() == token
    assert DAY2_LABEL not in cd_labels()

    iso = BASE / "ironic" / "httpboot" / "images" / "day2.iso"
    content = BASE / "day2-iso"
    content.mkdir(exist_ok=True)
    (content / "token").write_text(token)
    subprocess.run(["xorriso", "-as", "mkisofs", "-quiet", "-V", DAY2_LABEL, "-o", str(iso), str(content)],
                   check=True, capture_output=True, timeout=120)
    day2(namespace, lab_data_image=f"{LAB_HTTP}/images/day2.iso", lab_reboot=True)
    third_boot = rebooted_guest(second_boot)
    attached = stored("DataImage")[DAY2_SERVER]
    assert attached["status"]["attachedImage"]["url"].endswith("/day2.iso"), attached["status"]
    assert DAY2_LABEL in cd_labels()

    day2(namespace, lab_data_image="absent", lab_reboot=True)
    rebooted_guest(third_boot)
    assert DAY2_SERVER not in stored("DataImage")
    assert DAY2_LABEL not in cd_labels()
    assert guest.execute(DAY2_SERVER, ["/usr/bin/cat", "/var/lib/metal3-day2"]).out.strip() == token


def lab_bios() -> dict[str, Any]:
    """The server's BIOS attributes, as its Redfish BMC (sushy-tools) shows them, asked from inside the lab."""
    server = next(s for s in json.loads((BASE / "servers.json").read_text()) if s["name"] == DAY2_SERVER)
    url = server["redfish_address"].split("+", 1)[1] + "/BIOS"
    script = ("import base64, json, sys, urllib.request; user, url, secret = sys.argv[1:]; "
              "token = base64.b64encode(f'{user}:{open(secret).read().strip()}'.encode()).decode(); "
              "request = urllib.request.Request(url, headers={'Authorization': 'Basic ' + token}); "
              "print(json.dumps(json.load(urllib.request.urlopen(request, timeout=30))['Attributes']))")
    done = subprocess.run(["ip", "netns", "exec", NETNS, str(REPO / ".venv" / "bin" / "python"), "-c", script,
                           server["username"], url, server["password_file"]],
                          capture_output=True, text=True, check=True, timeout=60)
    return json.loads(done.stdout)


def check_firewall(server: dict[str, Any], output: str) -> None:
    """The MetalStackFirewall holds its pinned server, provisioned; inside the booted guest, cloud-init applied
    the rule set of the firewall's user data: nft lists it, /etc/nftables.conf is the user data's file, IPv4
    forwarding is on, and the guest holds the node network's gateway and its public address."""
    firewall = stored("MetalStackFirewall")[FIREWALL]
    cluster = stored("MetalStackCluster")[METAL_STACK_CLUSTER]
    host = stored("BareMetalHost")[FIREWALL_SERVER]
    assert firewall["status"]["ready"], firewall["status"]
    assert firewall["spec"]["providerID"] == f"metalstack://{FIREWALL_SERVER}"
    assert host["status"]["provisioning"]["state"] == "provisioned", host["status"]
    assert host["spec"]["consumerRef"]["name"] == FIREWALL
    assert host["spec"]["bmc"]["address"].startswith("ipmi://")
    assert "metal3.baremetal/lab" not in host["metadata"]["labels"]  # none of the demo's
    assert {nic["mac"] for nic in host["status"]["hardware"]["nics"]} >= set(server["macs"])
    # The node network: a part of the lab's own network, whose first address the firewall holds.
    node_network = ipaddress.ip_network(cluster["status"]["nodeNetwork"])
    assert node_network.subnet_of(LAB_NETWORK), node_network
    addresses = {a["type"]: a["address"] for a in firewall["status"]["addresses"]}
    assert addresses["InternalIP"] == str(next(node_network.hosts()))
    assert ipaddress.ip_address(addresses["ExternalIP"]) in LAB_NETWORK
    assert re.search(rf"^{FIREWALL}\s+{FIREWALL_SERVER}\s+{node_network}\s", output, re.MULTILINE), output[-3000:]
    user_data = yaml.safe_load(secret_values(stored("Secret")[f"{FIREWALL}-user-data"])["value"])
    written = {f["path"]: f["content"] for f in user_data["write_files"]}

    guest.wait_for_agent(FIREWALL_SERVER, 900)
    # runcmd (sysctl, nft -f) is cloud-init's last stage, after the agent answers.
    guest.wait_for_cloud_init(FIREWALL_SERVER)
    seen = guest.network(FIREWALL_SERVER)
    assert seen.hostname == FIREWALL  # the user data's hostname
    held = {address for addresses_of in seen.addresses.values() for address in addresses_of}
    assert f"{addresses['InternalIP']}/{node_network.prefixlen}" in held, seen.addresses
    assert f"{addresses['ExternalIP']}/{LAB_NETWORK.prefixlen}" in held, seen.addresses
    assert seen.default_gateway == LAB_HOST

    listed = guest.execute(FIREWALL_SERVER, ["/usr/sbin/nft", "list", "ruleset"])
    as_json = guest.execute(FIREWALL_SERVER, ["/usr/sbin/nft", "-j", "list", "ruleset"])
    assert listed.rc == 0 and as_json.rc == 0, listed.err + as_json.err
    applied = Applied(listed.out, json.loads(as_json.out))
    print(f"the firewall's rule set, from inside {FIREWALL_SERVER}:\n{applied.text}")
    assert {("inet", "metal3-firewall"), ("ip", "metal3-firewall-nat")} <= applied.tables(), applied.text
    assert applied.chain("inet", "metal3-firewall", "input")["policy"] == "drop"
    assert applied.chain("inet", "metal3-firewall", "forward")["policy"] == "drop"
    node_match = {"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}},
                            "right": {"prefix": {"addr": str(node_network.network_address),
                                                 "len": node_network.prefixlen}}}}
    forward = [item["rule"]["expr"] for item in applied.json["nftables"] if "rule" in item
               and (item["rule"]["family"], item["rule"]["table"], item["rule"]["chain"])
               == ("inet", "metal3-firewall", "forward")]
    assert [node_match, {"accept": None}] in forward, applied.text
    conf = guest.execute(FIREWALL_SERVER, ["/usr/bin/cat", "/etc/nftables.conf"])
    assert conf.rc == 0 and conf.out == written["/etc/nftables.conf"], conf.out
    forwarding = guest.execute(FIREWALL_SERVER, ["/usr/sbin/sysctl", "-n", "net.ipv4.ip_forward"])
    assert forwarding.out.strip() == "1", forwarding.out + forwarding.err
