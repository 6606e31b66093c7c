"""The virtual_lab role: KVM (or TCG) virtual servers that really start, their Redfish and IPMI BMCs, DHCP and
TFTP, all inside a network namespace; and nothing of it left, nor routable from the host, once removed.

Everything is reached from inside the lab's namespace (``ip netns exec``), as the network rule asks."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import eventually
from tests.harness.virtual_lab import LAB_PLAYBOOK, lab_first, one_lab_at_a_time
from tests.integration.playbook_runs import REPO, ansible_playbook

# Kept between runs (absent keeps them): the BMCs' virtualenv and the accelerator probe's results.
BASE = REPO / "build" / "virtual-lab-test"
NETNS = "metal3-lab-test"
BRIDGE = "labtbr0"
HOST = "172.22.0.1"
LAB = {
    "virtual_lab_base_dir": str(BASE),
    "virtual_lab_netns": NETNS,
    "virtual_lab_bridge": BRIDGE,
    "virtual_lab_servers": [
        {"name": "lab-test-0", "firmware": "bios", "memory_mib": 1024, "vcpus": 1, "disk_gib": 2},
        {"name": "lab-test-1", "firmware": "uefi", "memory_mib": 1024, "vcpus": 1, "disk_gib": 2, "disks": 2},
    ],
}
# What each firmware writes to the serial console first: SeaBIOS, or OVMF's iPXE (an EFI build).
FIRMWARE_SAYS = {"bios": "SeaBIOS", "uefi": "Features: DNS HTTP iSCSI NFS TFTP AoE EFI"}


def in_lab(*command: str, check: bool = True, timeout: float = 60,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", NETNS, *command], capture_output=True, text=True, check=check,
                          timeout=timeout, env={**os.environ, **env} if env else None)


def virsh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["virsh", "-q", "-c", "qemu:///system", *args], capture_output=True, text=True,
                          check=check, timeout=60)


# Runs in the namespace: one HTTP request with the BMC's basic auth; prints the status and the JSON body.
REQUEST = """
import base64, json, sys, urllib.request, urllib.error
method, url, user, password, body = sys.argv[1:6]
request = urllib.request.Request(url, method=method, data=body.encode() or None,
                                 headers={"Content-Type": "application/json", "Authorization": "Basic "
                                          + base64.b64encode(f"{user}:{password}".encode()).decode()})
try:
    with urllib.request.urlopen(request, timeout=30) as answer:
        status, text = answer.status, answer.read().decode()
except urllib.error.HTTPError as e:
    status, text = e.code, e.read().decode()
print(json.dumps({"status": status, "body": json.loads(text) if text.strip() else None}))
"""


# Runs in a probe namespace cabled to the lab's bridge: a tagged ARP request for the lab host's address on a VLAN;
# prints the VLAN and sender of the answer, or nothing. Packet sockets get the VLAN tag as auxiliary data.
ARP_ON_VLAN = """
import socket, struct, sys, time
device, vid, target, me = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
SOL_PACKET, PACKET_AUXDATA, TP_STATUS_VLAN_VALID = 263, 8, 0x10
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
s.bind((device, 0))
s.settimeout(0.5)
mac = bytes.fromhex("02aabbccdd01")
arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, mac, socket.inet_aton(me), bytes(6), socket.inet_aton(target))
request = b"\\xff" * 6 + mac + struct.pack("!HH", 0x8100, vid) + b"\\x08\\x06" + arp
deadline = time.monotonic() + 5
s.send(request)
while time.monotonic() < deadline:
    try:
        frame, ancillary, _, _ = s.recvmsg(2048, 1024)
    except socket.timeout:
        s.send(request)
        continue
    tci = None
    for level, kind, data in ancillary:
        if (level, kind) == (SOL_PACKET, PACKET_AUXDATA) and struct.unpack_from("I", data)[0] & TP_STATUS_VLAN_VALID:
            tci = struct.unpack_from("H", data, 16)[0]
    if frame[12:14] == b"\\x08\\x06" and frame[21] == 2 and frame[6:12] != mac:
        print(tci & 0xFFF if tci is not None else "untagged", socket.inet_ntoa(frame[28:32]))
        break
"""


def says(path: Path, text: str) -> bool:
    return path.exists() and text in path.read_text(errors="replace")


def dhcp_acked(mac: str) -> bool:
    """dnsmasq gave this MAC an address on the provisioning network."""
    log = BASE / "dnsmasq.log"
    return log.exists() and re.search(rf"DHCPACK\({BRIDGE}\) 172\.22\.0\.\d+ {mac}", log.read_text()) is not None


def domain_is(name: str, state: str) -> bool:
    return virsh("domstate", name).stdout.strip() == state


class Lab:
    def __init__(self, servers: list[dict[str, Any]]):
        self.servers = servers
        self.password = Path(servers[0]["password_file"]).read_text()

    def redfish(self, method: str, path: str, body: dict[str, Any] | None = None,
                password: str | None = None) -> tuple[int, Any]:
        answer = json.loads(in_lab(sys.executable, "-c", REQUEST, method, f"http://{HOST}:8000{path}", "admin",
                                   self.password if password is None else password,
                                   json.dumps(body) if body else "").stdout)
        return answer["status"], answer["body"]


def lab_processes() -> list[str]:
    """Command lines of the processes of the lab: its daemons (their files are under BASE) and its QEMUs."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(BASE) in command or "guest=lab-test-" in command:
                found.append(f"{entry}: {command}")
    return found


def read_servers() -> list[dict[str, Any]]:
    """The role's virtual_lab_servers_info, as a playbook that starts nothing new reads it (a second run)."""
    playbook = BASE / "info.yml"
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"ansible.builtin.include_role": {"name": "metal3.baremetal.virtual_lab"}},
        {"ansible.builtin.copy": {"dest": str(BASE / "info.json"), "mode": "0600",
                                  "content": "{{ virtual_lab_servers_info | to_json }}"}}]}]))
    run = ansible_playbook(playbook, {**LAB, "virtual_lab_install_packages": False}, timeout=600)
    assert run.ok, run.output[-5000:]
    # The second run of the role changed nothing (the copy of info.json is the one change).
    assert re.search(r"changed=1\s", run.output), run.output[-3000:]
    return json.loads((BASE / "info.json").read_text())


@pytest.mark.virtual_lab
def test_a_lab_of_a_bios_and_a_uefi_server_boots_answers_its_bmcs_and_leaves_nothing(tmp_path: Path):
    """One test, and one lab at a time: there is one libvirtd per machine."""
    with one_lab_at_a_time():
        lab_lifecycle(tmp_path)


def lab_lifecycle(tmp_path: Path) -> None:
    started = time.monotonic()
    run = ansible_playbook(LAB_PLAYBOOK, LAB, timeout=1200)
    print(f"lab started in {time.monotonic() - started:.0f}s")
    try:
        assert run.ok, run.output[-5000:]
        lab_first(BASE)
        boot_and_use(Lab(read_servers()), tmp_path)
    finally:
        removed = ansible_playbook(LAB_PLAYBOOK, {**LAB, "virtual_lab_state": "absent"}, timeout=600)
    assert removed.ok, removed.output[-5000:]
    assert_nothing_left()
    # A second removal changes nothing.
    again = ansible_playbook(LAB_PLAYBOOK, {**LAB, "virtual_lab_state": "absent"}, timeout=600)
    assert again.ok and re.search(r"changed=0\s", again.output), again.output[-3000:]


def boot_and_use(lab: Lab, tmp_path: Path) -> None:
    assert [s["firmware"] for s in lab.servers] == ["bios", "uefi"]
    # Each server's disks, the first at <name>.qcow2, on virtio.
    assert [s["disks"] for s in lab.servers] == [1, 2]
    assert [virsh("domblklist", s["name"]).stdout.split() for s in lab.servers] == [
        ["vda", str(BASE / "lab-test-0.qcow2")],
        ["vda", str(BASE / "lab-test-1.qcow2"), "vdb", str(BASE / "lab-test-1-disk1.qcow2")]]
    for server in lab.servers:
        assert server["redfish_address"] == f"redfish-virtualmedia+http://{HOST}:8000/redfish/v1/Systems/" \
                                            f"{server['uuid']}"
        assert server["accel"] in ("kvm", "tcg")
        assert Path(server["password_file"]).stat().st_mode & 0o777 == 0o600
    assert [s["ipmi_address"] for s in lab.servers] == [f"ipmi://{HOST}:6230", f"ipmi://{HOST}:6231"]

    # The lab host answers on each VLAN, tagged, from a port of the bridge (and not on another VLAN).
    probe = f"{NETNS}-probe"
    subprocess.run(["ip", "netns", "add", probe], check=True)
    try:
        subprocess.run(["ip", "link", "add", "probe0", "netns", NETNS, "type", "veth", "peer", "name", "probe1",
                        "netns", probe], check=True)
        in_lab("ip", "link", "set", "probe0", "master", BRIDGE, "up")
        subprocess.run(["ip", "-n", probe, "link", "set", "probe1", "up"], check=True)
        answers = {vid: subprocess.run(["ip", "netns", "exec", probe, sys.executable, "-c", ARP_ON_VLAN, "probe1",
                                        str(vid), target, target.rsplit(".", 1)[0] + ".50"],
                                       capture_output=True, text=True, check=True, timeout=30).stdout.split()
                   for vid, target in ((11, "192.168.11.1"), (22, "192.168.22.1"), (300, "192.168.11.1"))}
    finally:
        in_lab("ip", "link", "del", "probe0", check=False)
        subprocess.run(["ip", "netns", "del", probe], check=False)
    assert answers == {11: ["11", "192.168.11.1"], 22: ["22", "192.168.22.1"], 300: []}

    # Redfish lists both systems, behind the BMC password.
    status, systems = lab.redfish("GET", "/redfish/v1/Systems")
    assert status == 200
    assert sorted(m["@odata.id"].rsplit("/", 1)[1] for m in systems["Members"]) == \
        sorted(s["uuid"] for s in lab.servers)
    assert lab.redfish("GET", "/redfish/v1/Systems", password="wrong")[0] == 401

    # Powered on through Redfish, each runs its firmware, which PXE boots: dnsmasq answers its MAC.
    for server in lab.servers:
        status = lab.redfish("POST", f"/redfish/v1/Systems/{server['uuid']}/Actions/ComputerSystem.Reset",
                             {"ResetType": "On"})[0]
        assert status == 204
    for server in lab.servers:
        assert virsh("domstate", server["name"]).stdout.strip() == "running"
        firmware_says = partial(says, Path(server["serial_log"]), FIRMWARE_SAYS[server["firmware"]])
        assert eventually(firmware_says, 120, 1), f"{server['name']}'s firmware on its serial console"
        assert eventually(partial(dhcp_acked, server["macs"][0]), 120, 1), f"a DHCP answer to {server['name']}"

    # IPMI answers for the first server, with the same credentials. IPMI is UDP, and vbmc asks libvirtd for the
    # power state: on a loaded machine a whole ipmitool run can go unanswered, so the test asks as Ironic does,
    # again until an answer comes.
    asked: list[subprocess.CompletedProcess[str]] = []

    def ipmi_answers() -> bool:
        # -E: the password from the environment, so that no failure prints it in the command line.
        asked.append(in_lab("ipmitool", "-I", "lanplus", "-H", HOST, "-p", "6230", "-U", "admin", "-E",
                            "-N", "5", "-R", "3", "power", "status", check=False,
                            env={"IPMI_PASSWORD": lab.password}))
        return asked[-1].returncode == 0
    assert eventually(ipmi_answers, 120, 2), asked[-1].stderr
    assert asked[-1].stdout.strip() == "Chassis Power is on"

    # Power off, then virtual media: an ISO served in the namespace becomes the domain's CD-ROM.
    for server in lab.servers:
        status = lab.redfish("POST", f"/redfish/v1/Systems/{server['uuid']}/Actions/ComputerSystem.Reset",
                             {"ResetType": "ForceOff"})[0]
        assert status == 204
        assert eventually(partial(domain_is, server["name"], "shut off"), 30, 1), f"{server['name']} off"
    iso_dir = tmp_path / "iso"
    (iso_dir / "content").mkdir(parents=True)
    (iso_dir / "content" / "hello.txt").write_text("hello\n")
    subprocess.run(["genisoimage", "-quiet", "-V", "LABTEST", "-o", str(iso_dir / "test.iso"),
                    str(iso_dir / "content")], check=True)
    http = subprocess.Popen(["ip", "netns", "exec", NETNS, sys.executable, "-m", "http.server", "8099", "--bind",
                             HOST, "--directory", str(iso_dir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert eventually(lambda: in_lab("ss", "-Hltn", "sport = :8099").stdout, 30, 1), "the ISO's HTTP server"
        for server in lab.servers:
            status = lab.redfish(
                "POST", f"/redfish/v1/Systems/{server['uuid']}/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia",
                {"Image": f"http://{HOST}:8099/test.iso", "Inserted": True})[0]
            assert status == 204
            assert "device='cdrom'" in virsh("dumpxml", "--inactive", server["name"]).stdout
    finally:
        http.terminate()
        http.wait()


def assert_nothing_left() -> None:
    assert NETNS not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert lab_processes() == []
    for server in LAB["virtual_lab_servers"]:
        assert not Path("/etc/libvirt/qemu", f"{server['name']}.xml").exists()
        assert not (BASE / f"{server['name']}.serial.log").exists()
        assert not list(BASE.glob(f"{server['name']}*.qcow2"))
    assert not (BASE / "bmc-password").exists()
    # Nothing of 172.22.0.0/24 in the host's namespace: no route to it through a lab device.
    route = subprocess.run(["ip", "route", "get", HOST], capture_output=True, text=True, check=False).stdout
    assert BRIDGE not in route
    assert not Path("/sys/class/net", BRIDGE).exists()
