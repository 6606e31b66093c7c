# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Admission of the metal-stack kinds (ours: the provider's design runs no webhook), so a spec the reconcile could
never serve is refused when it is written, naming the field, not found later in a condition: a machine type
given twice differently (the design's machineType and upstream's size), a providerID that names no machine, and
firewall rules that do not parse."""
from __future__ import annotations

from ansible_collections.metal3.baremetal.plugins.module_utils.api import admission
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.common import GROUP, machine_type, pinned_id
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.firewall_rules import parse_rules


def _server(spec: dict[str, object], field: str) -> None:
    machine_type(spec, field)
    pinned_id(spec, f"{field}.providerID")


def admit_cluster(store: admission.Reader, new: Object, old: Object | None) -> None:
    firewall = (new.get("spec") or {}).get("firewallSpec")
    if firewall:
        _server(firewall, "spec.firewallSpec")
        parse_rules(firewall, "spec.firewallSpec")


def admit_machine(store: admission.Reader, new: Object, old: Object | None) -> None:
    _server(new.get("spec") or {}, "spec")


def admit_firewall(store: admission.Reader, new: Object, old: Object | None) -> None:
    spec = new.get("spec") or {}
    _server(spec, "spec")
    parse_rules(spec, "spec")


admission.register(GROUP, "MetalStackCluster", admit_cluster)
admission.register(GROUP, "MetalStackMachine", admit_machine)
admission.register(GROUP, "MetalStackFirewall", admit_firewall)
