# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The metal-stack kinds stepped one reconcile each (the operator's way), or, from a bastion, stepped with the
hosts they hold until each is ready or deleted."""
from __future__ import annotations

import time
from typing import Any, Callable, Union

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref, split_reference
from ansible_collections.metal3.baremetal.plugins.module_utils.core.progress import report
from ansible_collections.metal3.baremetal.plugins.module_utils.core.waiting import wait_until
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (
    API as BMH_API,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (
    KIND as BMH_KIND,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import reconcile_hosts
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import IronicOptions
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.cluster import (
    ClusterResult,
    reconcile_metalstack_cluster,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.common import (
    CLUSTER_API,
    FIREWALL_API,
    MACHINE_API,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.firewall import (
    reconcile_metalstack_firewall,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.machine import reconcile_metalstack_machine
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.server import ServerResult
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store

Step = Union[ClusterResult, ServerResult]  # noqa: UP007 - a runtime alias, for Python 3.9's pylint
# kind -> (the apiVersion the engine reads it at, its reconcile)
KINDS: dict[str, tuple[str, Callable[[Store, Ref, bool], Any]]] = {
    "MetalStackCluster": (CLUSTER_API, reconcile_metalstack_cluster),
    "MetalStackMachine": (MACHINE_API, reconcile_metalstack_machine),
    "MetalStackFirewall": (FIREWALL_API, reconcile_metalstack_firewall),
}
TARGETS = ("ready", "deleted")


def converge(store_factory: Callable[[], Store], ironic: IronicOptions, kind: str, refs: list[Ref],
             target: str | None = None, timeout: float = 0, dry_run: bool = False,
             sleep: Callable[[float], None] = time.sleep) -> tuple[list[Step], bool]:
    """Step the objects named by ``refs`` (and the hosts they hold) until each reaches ``target`` (ready,
    deleted), or time is up, or one cannot go on (its ``error``). No target: one step of each."""
    reconcile = KINDS[kind][1]
    one_step = target is None or dry_run

    def step() -> list[Step]:
        with store_factory() as store:
            steps: list[Step] = [reconcile(store, ref, dry_run) for ref in refs]
        for ref, result in zip(refs, steps, strict=True):
            report(kind, f"{ref.namespace}/{ref.name}", result.phase, changed=result.changed)
        hosts = sorted({s.host for s in steps if isinstance(s, ServerResult) and s.host})
        if hosts and not one_step:  # from a bastion nobody else reconciles the hosts, so this loop does
            reconcile_hosts(store_factory, ironic, [Ref(BMH_API, BMH_KIND, name, namespace)
                                                    for namespace, name in (split_reference(h, "") for h in hosts)])
        return steps

    def verdict(steps: list[Step]) -> bool | None:
        if one_step:
            return True
        if all(reached(s, str(target)) for s in steps):
            return True
        return False if any(s.error for s in steps) else None

    return wait_until(step, verdict, timeout, lambda steps: min(
        [s.requeue_after for s in steps if s.requeue_after] or [0.5]), sleep)


def reached(step: Step, target: str) -> bool:
    if target == "deleted":
        return step.obj is None
    return step.ready and not step.error
