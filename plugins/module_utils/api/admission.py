# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Admission: the rules upstream enforces in its validating webhooks, applied before an object is written.

There is no webhook server (the local backend has none, and a bastion's cluster may not run one), so the
engine checks here, on both backends, every create, update and patch made through a store that ``open_store``
returns (store/admitted.py; engine.py loads the domains that register the rules); status writes are not
admitted, as upstream's webhooks are not on status. As kube-apiserver runs a webhook only on an object its
schema accepts, the object is first held to its CRD's schema.

| kind | rules | upstream |
|---|---|---|
| IPPool (ipam.metal3.io) | ipam/allocation.py ``admit_ip_pool`` | ip-address-manager's IPPool webhook |
| IPPrefixPool (ipam.metal3.io) | ipam/prefixes.py ``admit_prefix_pool`` | ours: upstream has no such kind |
| BareMetalHost (metal3.io) | hosts/admission.py ``admit_host`` | baremetal-operator's BareMetalHost webhook |
| HostClaim (metal3.io) | hostclaims/admission.py ``admit_host_claim`` | baremetal-operator's HostClaim webhook |
| HostDeployPolicy (metal3.io) | hostclaims/admission.py ``admit_host_deploy_policy`` | ours: upstream has none |
| DataImage (metal3.io) | hosts/hardware_admission.py ``admit_data_image`` | baremetal-operator's webhook |
| HostFirmwareComponents (metal3.io) | hosts/hardware_admission.py ``admit_firmware_components`` | upstream's webhook |
| MachineType (metal3.io) | metalstack/machinetypes.py ``admit_machine_type`` | ours: upstream has no such kind |
| MetalStackCluster, MetalStackMachine, MetalStackFirewall | metalstack/admission.py | ours: the provider has none |
"""
from __future__ import annotations

from typing import Callable, Iterable, Protocol

from ansible_collections.metal3.baremetal.plugins.module_utils.api.kinds import lookup
from ansible_collections.metal3.baremetal.plugins.module_utils.api.validation import validate
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Metal3Error
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref, split_api_version


class Reader(Protocol):
    """What a rule may do with the store: read (a pool's neighbours, a host's Secret)."""

    def get(self, ref: Ref) -> Object: ...

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | Iterable[str] | None = None) -> list[Object]: ...


Rule = Callable[[Reader, Object, "Object | None"], None]

# The kinds upstream runs a validating webhook for, and HostDeployPolicy, IPPrefixPool, MachineType and the
# metal-stack kinds, whose rules are ours. Their rules live with their domain (the table above), which registers
# them when imported; writing one of these kinds before its rules are registered is a bug, and fails.
RULED_KINDS = frozenset({("ipam.metal3.io", "IPPool"), ("ipam.metal3.io", "IPPrefixPool"),
                         ("metal3.io", "BareMetalHost"), ("metal3.io", "HostClaim"), ("metal3.io", "HostDeployPolicy"),
                         ("metal3.io", "DataImage"), ("metal3.io", "HostFirmwareComponents"),
                         ("metal3.io", "MachineType"), ("infrastructure.cluster.x-k8s.io", "MetalStackCluster"),
                         ("infrastructure.cluster.x-k8s.io", "MetalStackMachine"),
                         ("infrastructure.cluster.x-k8s.io", "MetalStackFirewall")})
_RULES: dict[tuple[str, str], Rule] = {}


def register(group: str, kind: str, rule: Rule) -> None:
    """Make ``rule`` the admission of ``kind`` in ``group`` (a domain package calls this when imported)."""
    if (group, kind) not in RULED_KINDS:
        raise ValueError(f"{kind}.{group} has no admission rules; add it to RULED_KINDS first")
    _RULES[(group, kind)] = rule


def rule_for(api_version: str, kind: str) -> Rule | None:
    """The admission rule of a kind, or None when upstream admits its objects as they come."""
    key = (split_api_version(api_version)[0], kind)
    if key not in RULED_KINDS:
        return None
    if key not in _RULES:
        raise Metal3Error(f"internal error: the admission rules of {kind} are not loaded (open the store "
                          "through module_utils/engine.py)")
    return _RULES[key]


def admit(store: Reader, new: Object, old: Object | None) -> None:
    """Raise Invalid (BadRequest for an unknown field) when ``new`` (replacing ``old``, or created when None)
    breaks its kind's schema or rules. ``new`` is the object as it would be stored: its status the stored one
    for a kind with a status subresource."""
    rule = rule_for(str(new.get("apiVersion") or ""), str(new.get("kind") or ""))
    if rule is None:
        return
    validate(lookup(new["apiVersion"], new["kind"]), new)
    rule(store, new, old)
