# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Requesters (machines, hosts, anything with network devices) → one IP claim per device.

A requester is given as AWX-friendly data: a name, optional labels (as a machine template carries them) and
optional devices, each of which may name a network, a pool or an address. A requester with no devices has
one. The claim of device i of requester r is named ``r-i`` (ELF names it ``<ns>-<machine>-<i>``).
"""
from __future__ import annotations

from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import NETWORK_NAME_LABEL

OWNER_LABEL = "cluster.x-k8s.io/ip-owner-name"
DEVICE_FIELDS = ("name", "network_name", "pool", "pool_namespace", "address", "labels")


def _names(value: Any) -> list[str]:
    """A list, or a comma-separated string as an AWX survey gives it."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


def requesters_from_survey(names: Any, networks: Any = None, pool: str | None = None) -> list[dict[str, Any]]:
    """Requesters from flat survey variables: each name gets one device per network (or one device)."""
    devices = [{"network_name": n} for n in _names(networks)] or [{}]
    if pool:
        devices = [{**d, "pool": pool} for d in devices]
    return [{"name": name, "devices": devices} for name in _names(names)]


def expand(requesters: list[dict[str, Any]], namespace: str = "default") -> list[dict[str, Any]]:
    """One claim (the ip_claim module's options, plus requester and device) per device of each requester."""
    claims = []
    for i, requester in enumerate(requesters or []):
        if not isinstance(requester, dict) or not requester.get("name"):
            raise BadRequest(f"ipam_requesters[{i}].name: Required value")
        requester_ns = requester.get("namespace") or namespace
        devices = requester.get("devices") or [{}]
        for j, device in enumerate(devices):
            if not isinstance(device, dict):
                raise BadRequest(f"ipam_requesters[{i}].devices[{j}]: must be a mapping")
            unknown = sorted(set(device) - set(DEVICE_FIELDS))
            if unknown:
                raise BadRequest(f"ipam_requesters[{i}].devices[{j}]: unknown field {unknown[0]!r}; "
                                 f"known: {', '.join(DEVICE_FIELDS)}")
            labels = {**(requester.get("labels") or {}), **(device.get("labels") or {}),
                      OWNER_LABEL: f"{requester_ns}-{requester['name']}"}
            if device.get("network_name"):
                labels[NETWORK_NAME_LABEL] = device["network_name"]
            claims.append({
                "name": f"{requester['name']}-{j}",
                "namespace": requester_ns,
                "requester": requester["name"],
                "device": device.get("name") or f"nic{j}",
                "network": labels.get(NETWORK_NAME_LABEL) or device.get("pool") or "",
                "pool": device.get("pool"),
                "pool_namespace": device.get("pool_namespace"),
                "address": device.get("address"),
                "labels": labels,
            })
    return claims
