# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The lab host's VLAN interfaces where the kernel has no 802.1Q (CONFIG_VLAN_8021Q unset).

Usage: vlan-tap.py BRIDGE TRUNK ID=ADDRESS/PREFIX=MAC...

Runs inside the lab's namespace. Creates a TAP port TRUNK on BRIDGE and, per VLAN, a TAP device BRIDGE.ID with
the address, as a VLAN sub-interface would be; then tags what each VLAN device sends and hands it to the
bridge, and untags what the bridge sends to the trunk on that VLAN. The devices go away when it stops.
"""
from __future__ import annotations

import fcntl
import os
import select
import signal
import struct
import subprocess
import sys

TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000
TPID = b"\x81\x00"


def tap(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    return fd


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True)


def main(bridge: str, trunk_name: str, vlans: list[str]) -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    trunk = tap(trunk_name)
    ip("link", "set", trunk_name, "master", bridge, "up")
    by_id: dict[int, int] = {}
    by_fd: dict[int, bytes] = {}
    for vlan in vlans:
        vid, address, mac = vlan.split("=")
        name = f"{bridge}.{vid}"
        fd = tap(name)
        ip("link", "set", name, "address", mac, "up")
        ip("addr", "add", address, "dev", name)
        by_id[int(vid)] = fd
        by_fd[fd] = TPID + struct.pack("!H", int(vid))
    print(f"tagging VLAN {', '.join(map(str, by_id))} onto {bridge} through {trunk_name}", flush=True)
    while True:
        ready = select.select([trunk, *by_fd], [], [])[0]
        for fd in ready:
            frame = os.read(fd, 65536)
            if fd == trunk:
                if frame[12:14] == TPID:
                    vlan_fd = by_id.get(struct.unpack("!H", frame[14:16])[0] & 0x0FFF)
                    if vlan_fd is not None:
                        os.write(vlan_fd, frame[:12] + frame[16:])
            else:
                os.write(trunk, frame[:12] + by_fd[fd] + frame[12:])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
