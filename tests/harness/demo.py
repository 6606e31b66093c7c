"""The demo's manifests for tests that share one Ironic: each host with MAC addresses of its own; its hosts
settled and its machines made and provisioned, as the tests of the machines' flow need them."""
from __future__ import annotations

import copy
import json
import uuid
from typing import Any, Callable, Iterable

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.machine import MachineResult
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.machines import (
    MachineSet,
    converge,
    ensure_machines,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import API as BMH_API
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import reconcile_hosts
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import IronicOptions
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import load_definitions
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from tests.harness.operator_process import REPO

DEMO = REPO / "playbooks" / "files" / "demo"


def mac() -> str:
    return "52:54:00:" + ":".join(f"{b:02x}" for b in uuid.uuid4().bytes[:3])


def demo_objects(ns: str, hosts: int,
                 manifests: tuple[str, ...] = ("hosts.yaml", "cluster.yaml")) -> list[dict[str, Any]]:
    """The demo's objects (its hosts and BMC Secret, its cluster) in ``ns``, with its first ``hosts`` hosts only
    (past the demo's six, copies of its last one named on: host-6, ...), each with MAC addresses of its own (Ironic
    refuses a port whose MAC another node has)."""
    objects: list[dict[str, Any]] = []
    last_host: dict[str, Any] = {}
    made = 0
    for manifest in manifests:
        for obj in load_definitions(src=str(DEMO / manifest)):
            obj = copy.deepcopy(obj)
            obj["metadata"]["namespace"] = ns
            if obj["kind"] == "BareMetalHost":
                last_host = obj
                if made == hosts:
                    continue
                made += 1
                with_own_macs(obj)
            objects.append(obj)
    for index in range(made, hosts):
        more = copy.deepcopy(last_host)
        more["metadata"]["name"] = f"host-{index}"
        more["spec"]["bmc"]["address"] = f"fake://host-{index}"
        objects.append(with_own_macs(more))
    return objects


def with_own_macs(host: dict[str, Any]) -> dict[str, Any]:
    annotations = host["metadata"]["annotations"]
    details = json.loads(annotations["inspect.metal3.io/hardwaredetails"])
    for nic in details["nics"]:
        nic["mac"] = mac()
    details["hostname"] = host["metadata"]["name"]
    annotations["inspect.metal3.io/hardwaredetails"] = json.dumps(details)
    host["spec"]["bootMACAddress"] = details["nics"][0]["mac"]
    return host


def settle_demo_hosts(open_store: Callable[[], Store], ironic: IronicOptions, ns: str,
                      objects: Iterable[Object]) -> None:
    """``objects`` (the demo's) created in ``ns``, and its BareMetalHosts reconciled on Ironic until settled."""
    with open_store() as store:
        for obj in objects:
            store.create(obj)
        hosts = [Ref.of(h) for h in store.list(BMH_API, "BareMetalHost", ns)]
    results = reconcile_hosts(open_store, ironic, hosts, ("settled",), 120)
    assert all(reached for _step, reached in results), [step.summary() for step, _reached in results]


def ensure_demo_machines(store: Store, ns: str, control_plane: int = 3, workers: int = 2) -> None:
    """The demo cluster's two machine sets in ``ns``: ``control_plane`` machines cp-<i> (template
    my-cluster-controlplane, control-plane failure domains) and ``workers`` machines wk-<i> (my-cluster-workers),
    with the demo's user data; 0 deletes them."""
    ensure_machines(store, MachineSet("cp", ns, "my-cluster", "my-cluster-controlplane", control_plane, True,
                                      "my-cluster-userdata"))
    ensure_machines(store, MachineSet("wk", ns, "my-cluster", "my-cluster-workers", workers, False,
                                      "my-cluster-userdata"))


def provision_demo_machines(open_store: Callable[[], Store], ironic: IronicOptions, ns: str) -> list[MachineResult]:
    """The demo's machines (ensure_demo_machines) made in ``ns`` on its settled hosts and converged until every one
    is ready; the converge's last steps."""
    with open_store() as store:
        ensure_demo_machines(store, ns)
    steps, ready = converge(open_store, ironic, ns, None, ("ready",), 300)
    assert ready, [s.summary() for s in steps]
    return steps
