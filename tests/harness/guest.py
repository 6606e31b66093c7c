"""What a lab guest shows from inside, read through its QEMU guest agent (libvirt's qemu-agent-command): the
tests check the network cloud-init made of the rendered network_data where it lives, in the booted machine."""
from __future__ import annotations

import base64
import json
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Callable

LIBVIRT_URI = "qemu:///system"


class GuestUnavailable(Exception):
    """The guest agent does not answer (yet): the machine is still booting, or has no agent."""


def agent(domain: str, command: str, arguments: dict[str, Any] | None = None, timeout: int = 10) -> Any:
    request = json.dumps({"execute": command, **({"arguments": arguments} if arguments else {})})
    done = subprocess.run(["virsh", "-c", LIBVIRT_URI, "qemu-agent-command", domain, request, "--timeout",
                           str(timeout)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise GuestUnavailable(done.stderr.strip() or done.stdout.strip())
    return json.loads(done.stdout)["return"]


@dataclass
class Executed:
    rc: int
    out: str
    err: str


def execute(domain: str, argv: list[str], timeout: float = 30) -> Executed:
    """Run a command in the guest and wait for it (guest-exec, then guest-exec-status)."""
    pid = agent(domain, "guest-exec", {"path": argv[0], "arg": argv[1:], "capture-output": True})["pid"]
    deadline = time.monotonic() + timeout
    while True:
        status = agent(domain, "guest-exec-status", {"pid": pid})
        if status.get("exited"):
            return Executed(status.get("exitcode", -1),
                            base64.b64decode(status.get("out-data", "")).decode(errors="replace"),
                            base64.b64decode(status.get("err-data", "")).decode(errors="replace"))
        if time.monotonic() > deadline:
            raise GuestUnavailable(f"{argv} did not finish in {timeout}s")
        time.sleep(0.5)


def wait_for_agent(domain: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            agent(domain, "guest-ping")
            return
        except GuestUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(3)


def wait_for_cloud_init(domain: str, timeout: float = 1800) -> None:
    """Wait until cloud-init has run all its stages (`cloud-init status --wait`). The agent answers early in the
    boot (sysinit), long before cloud-init's last stage on an emulated machine sharing busy cores. Fails with
    cloud-init's status, the end of its log and systemd's pending jobs when it reports an error or is not done in
    ``timeout`` seconds."""
    try:
        done = execute(domain, ["/usr/bin/cloud-init", "status", "--wait", "--long"], timeout=timeout)
    except GuestUnavailable as error:
        raise AssertionError(f"cloud-init in {domain}: {error}\n{_cloud_init_story(domain)}") from None
    if done.rc != 0:
        raise AssertionError(f"cloud-init in {domain}: {done.out}{done.err}\n{_cloud_init_story(domain)}")


def _cloud_init_story(domain: str) -> str:
    """What the guest says of cloud-init and its boot, for a failure's message."""
    said = []
    for argv in (["/usr/bin/cloud-init", "status", "--long"], ["/usr/bin/systemctl", "list-jobs", "--no-pager"],
                 ["/usr/bin/tail", "-n", "40", "/var/log/cloud-init.log"],
                 ["/usr/bin/tail", "-n", "40", "/var/log/cloud-init-output.log"]):
        try:
            done = execute(domain, argv)
            said.append(f"$ {' '.join(argv)}\n{done.out}{done.err}")
        except GuestUnavailable as error:
            said.append(f"$ {' '.join(argv)}: {error}")
    return "\n".join(said)


@dataclass
class GuestNetwork:
    """The guest's network as `ip -j` and the bonding driver show it."""

    hostname: str
    addresses: dict[str, list[str]]  # interface → its IPv4 addresses (address/prefix)
    bonds: dict[str, list[str]]  # bond → its member interfaces
    default_gateway: str | None
    links: list[dict[str, Any]]


def network(domain: str) -> GuestNetwork:
    hostname = execute(domain, ["/bin/hostname"]).out.strip()
    addresses_json = json.loads(execute(domain, ["/sbin/ip", "-j", "-4", "address", "show"]).out or "[]")
    addresses = {a["ifname"]: [f"{i['local']}/{i['prefixlen']}" for i in a.get("addr_info", [])]
                 for a in addresses_json}
    links = json.loads(execute(domain, ["/sbin/ip", "-j", "-d", "link", "show"]).out or "[]")
    bonds: dict[str, list[str]] = {}
    for link in links:
        master = link.get("master")
        if master and (link.get("linkinfo") or {}).get("info_slave_kind") == "bond":
            bonds.setdefault(master, []).append(link["ifname"])
    routes = json.loads(execute(domain, ["/sbin/ip", "-j", "-4", "route", "show", "default"]).out or "[]")
    gateway = routes[0].get("gateway") if routes else None
    return GuestNetwork(hostname, addresses, bonds, gateway, links)


def settled_network(domain: str, settled: Callable[[GuestNetwork], bool], timeout: float = 300) -> GuestNetwork:
    """The guest's network once cloud-init is done and `settled` holds of it: systemd-networkd makes bonds and
    VLANs as their links appear, after the agent answers and possibly after cloud-init's last stage. Past the
    timeout, the last network seen (the caller's assertions then say what differs), after printing what
    networkd says of each link."""
    wait_for_cloud_init(domain)
    deadline = time.monotonic() + timeout
    while True:
        seen = network(domain)
        if settled(seen):
            return seen
        if time.monotonic() > deadline:
            print(f"{domain}: networkctl says\n{execute(domain, ['/usr/bin/networkctl', 'list']).out}")
            return seen
        time.sleep(5)
