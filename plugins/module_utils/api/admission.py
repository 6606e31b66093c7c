# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Admission: the rules upstream enforces in its webhooks, applied before the engine writes an object.

There is no webhook server (the local backend has none, and a bastion's cluster may not run one), so the
engine checks here, on both backends, whatever writes through it.
"""
from __future__ import annotations

from typing import Callable

from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.objects import Object, split_api_version

Rule = Callable[[Store, Object, "Object | None"], None]


def _rules() -> dict[tuple[str, str], Rule]:
    from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import admit_ip_pool

    return {("ipam.metal3.io", "IPPool"): admit_ip_pool}


def admit(store: Store, new: Object, old: Object | None) -> None:
    """Raise Invalid when ``new`` (replacing ``old``, or created when None) breaks its kind's rules."""
    rule = _rules().get((split_api_version(new.get("apiVersion", ""))[0], new.get("kind", "")))
    if rule:
        rule(store, new, old)
