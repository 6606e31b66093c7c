"""A fixture hypervisor for claims of kind libvirt (unit tests, and integration tests whose real parts are the
store, Ironic and cloud-init): machines in a dict, every call recorded."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Unavailable
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.virtual_machine import (
    MachineSize,
    VirtualMachine,
)


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
