# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Admission: the rules upstream enforces in its validating webhooks, applied before an object is written.

There is no webhook server (the local backend has none, and a bastion's cluster may not run one), so the
engine checks here, on both backends, every create, update and patch made through a store that ``open_store``
returns (store/admitted.py); status writes are not admitted, as upstream's webhooks are not on status. As
kube-apiserver runs a webhook only on an object its schema accepts, the object is first held to its CRD's schema.

| kind | rules | upstream |
|---|---|---|
| IPPool (ipam.metal3.io) | ipam/allocation.py ``admit_ip_pool`` | ip-address-manager's IPPool webhook |
| BareMetalHost (metal3.io) | hosts/admission.py ``admit_host`` | baremetal-operator's BareMetalHost webhook |
"""
from __future__ import annotations

from functools import lru_cache
from typing import Callable

from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.objects import Object, split_api_version

Rule = Callable[[Store, Object, "Object | None"], None]


@lru_cache(maxsize=1)
def _rules() -> dict[tuple[str, str], Rule]:
    from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.admission import admit_host
    from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import admit_ip_pool

    return {
        ("ipam.metal3.io", "IPPool"): admit_ip_pool,
        ("metal3.io", "BareMetalHost"): admit_host,
    }


def rule_for(api_version: str, kind: str) -> Rule | None:
    """The admission rule of a kind, or None when upstream admits its objects as they come."""
    return _rules().get((split_api_version(api_version)[0], kind))


def admit(store: Store, new: Object, old: Object | None) -> None:
    """Raise Invalid (BadRequest for an unknown field) when ``new`` (replacing ``old``, or created when None)
    breaks its kind's schema or rules. ``new`` is the object as it would be stored: its status the stored one
    for a kind with a status subresource."""
    rule = rule_for(str(new.get("apiVersion") or ""), str(new.get("kind") or ""))
    if rule is None:
        return
    from ansible_collections.metal3.baremetal.plugins.module_utils.api.kinds import lookup
    from ansible_collections.metal3.baremetal.plugins.module_utils.api.validation import validate

    validate(lookup(new["apiVersion"], new["kind"]), new)
    rule(store, new, old)
