"""A fixture hypervisor for claims of kind libvirt (unit tests, and integration tests whose real parts are the
store, Ironic and cloud-init): machines in a dict, every call recorded. And ``VirshlessMachines``: the real
``LibvirtMachines`` - its image fetch and checks, qemu-img, genisoimage, the files it makes - with only virsh
answered from a dict, for tests of what it makes on a machine without libvirt."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from ansible_collections.metal3.baremetal.plugins.module_utils.compute.libvirt import (
    LibvirtMachines,
    MachineLimits,
    MachineSize,
    VirtualMachine,
    check_image_urls,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Unavailable
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy


@dataclass
class Made:
    owner: str
    size: MachineSize
    macs: list[str]
    image: dict[str, Any]
    config_drive: dict[str, Any]
    running: bool = False


@dataclass
class FixtureMachines:
    machines: dict[str, Made] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    down: bool = False  # the hypervisor does not answer
    limits: MachineLimits = field(default_factory=MachineLimits)
    policy: OutboundPolicy = field(default_factory=OutboundPolicy)

    def check_image(self, image: dict[str, Any]) -> None:
        check_image_urls(image, self.policy)  # the real check: it asks the hypervisor nothing

    def _answer(self, call: str, name: str) -> None:
        if self.down:
            raise Unavailable("libvirt at qemu:///system: failed to connect to the hypervisor")
        self.calls.append((call, name))

    def get(self, name: str) -> VirtualMachine | None:
        self._answer("get", name)
        made = self.machines.get(name)
        return VirtualMachine(name, made.owner, made.running) if made else None

    def create(self, name: str, owner: str, size: MachineSize, macs: list[str], image: dict[str, Any],
               config_drive: dict[str, Any]) -> None:
        self._answer("create", name)
        self.machines[name] = Made(owner, size, macs, image, config_drive)

    def power(self, name: str, on: bool) -> None:
        self._answer("power-on" if on else "power-off", name)
        self.machines[name].running = on

    def reboot(self, name: str) -> None:
        self._answer("reboot", name)

    def delete(self, name: str) -> None:
        self._answer("delete", name)
        self.machines.pop(name, None)

    def writes(self) -> list[tuple[str, str]]:
        return [c for c in self.calls if c[0] != "get"]


class VirshlessMachines(LibvirtMachines):
    """LibvirtMachines whose virsh is a dict of defined domains (name -> XML); all else is real."""

    defined: dict[str, str]

    def _virsh(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        if not hasattr(self, "defined"):
            self.defined = {}
        out, err, code = "", "", 0
        if argv[0] == "define":
            xml = Path(argv[1]).read_text()
            self.defined[str(ElementTree.fromstring(xml).findtext("name"))] = xml
        elif argv[0] == "dumpxml":
            if argv[1] in self.defined:
                out = self.defined[argv[1]]
            else:
                err, code = f"error: failed to get domain '{argv[1]}'", 1
        elif argv[0] == "domstate":
            out = "shut off"
        elif argv[0] == "undefine":
            self.defined.pop(argv[1], None)
        return subprocess.CompletedProcess(["virsh", *argv], code, out, err)
