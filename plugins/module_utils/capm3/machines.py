# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""What a control plane or machine deployment does, for bastions without Cluster API, and the loop that
provisions machines from a playbook.

``ensure_machines`` keeps N Cluster API Machines (and their Metal3Machines, cloned
from a Metal3MachineTemplate) named ``<set>-<i>``, spread over the Metal3Cluster's
failure domains fewest-first, as KubeadmControlPlane spreads its machines.
``converge`` steps every Metal3Machine of a selection, their data and their hosts,
until all are ready (or gone): what the operator's reconciles would do over time.
"""
from __future__ import annotations

import contextlib
import copy
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import (
    CAPI_API,
    CLONED_FROM_NAME,
    CLUSTER_NAME_LABEL,
    INFRA_API,
    owner_reference,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.machine import (
    MachineResult,
    reconcile_metal3machine,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.compute.libvirt import VirtualMachines
from ansible_collections.metal3.baremetal.plugins.module_utils.compute.registry import (
    CLASSES,
    class_for,
    served_kinds,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import AlreadyExists, Invalid, NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import (
    Object,
    Ref,
    check_name,
    check_namespace,
    dns_label_problem,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.core.progress import report
from ansible_collections.metal3.baremetal.plugins.module_utils.core.waiting import wait_until
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import reconcile_hosts
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import IronicOptions
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store

SET_LABEL = "metal3.baremetal/machine-set"  # which set (control plane, deployment) a Machine belongs to
CONTROL_PLANE_LABEL = "cluster.x-k8s.io/control-plane"
DEPLOYMENT_LABEL = "cluster.x-k8s.io/deployment-name"


@dataclass
class MachineSet:
    """N machines of one template in one cluster: a control plane (control-plane domains only) or workers."""

    name: str
    namespace: str
    cluster: str
    template: str
    replicas: int
    control_plane: bool = False
    bootstrap_secret: str | None = None
    # The class of compute that serves the set's machines, over the template's (spec.kind, spec.args): one
    # template serves a set of servers and a set of virtual machines.
    kind: str | None = None
    args: dict[str, str] | None = None

    def __post_init__(self) -> None:
        """Invalid naming the first option that cannot name what it names, before anything is read or written."""
        if self.kind is not None and self.kind not in CLASSES:
            raise Invalid(f"kind: {self.kind!r} is not a class of compute served here ({served_kinds()})")
        if self.args and self.kind:  # the template's kind is not known here: its args are checked with its claim
            problems = [p for p in CLASSES[self.kind].admit({"args": self.args}) if p[0].startswith("spec.args")]
            if problems:
                raise Invalid("; ".join(f"{field.replace('spec.', '')}: {why}" for field, why in problems))
        check_namespace(self.namespace, "namespace")
        # The set's name is its Machines' label value and the prefix of their names (<name>-<index>).
        name_problem = dns_label_problem(self.name)
        if name_problem:
            raise Invalid(f"name: {name_problem}")
        for field, value in (("cluster", self.cluster), ("template", self.template),
                             ("bootstrap_secret", self.bootstrap_secret)):
            if value is not None:
                check_name(value, field)


def spread(domains: list[str], taken: list[str | None]) -> str | None:
    """The failure domain with the fewest machines (ties: the first by name), as KCP chooses."""
    if not domains:
        return None
    counts = Counter(d for d in taken if d in domains)
    return min(sorted(domains), key=lambda d: counts[d])


def ensure_machines(store: Store, machine_set: MachineSet, dry_run: bool = False) -> list[Object]:
    """Create the set's missing Machines and Metal3Machines; delete those beyond ``replicas``."""
    ns = machine_set.namespace
    listed = store.list(CAPI_API, "Machine", ns, f"{SET_LABEL}={machine_set.name}")
    existing = {m["metadata"]["name"]: m for m in listed}
    wanted = [f"{machine_set.name}-{i}" for i in range(machine_set.replicas)]
    for name, machine in existing.items():
        if name not in wanted and not machine["metadata"].get("deletionTimestamp"):
            store.delete(Ref.of(machine), dry_run=dry_run)  # its Metal3Machine goes with it, by ownership
    machines = [existing[name] for name in wanted if name in existing]
    if len(machines) == len(wanted):
        return machines
    try:
        template = store.get(Ref(INFRA_API, "Metal3MachineTemplate", machine_set.template, ns))
    except NotFound:
        raise Invalid(f"template: Metal3MachineTemplate {ns}/{machine_set.template} not found") from None
    try:
        cluster = store.get(Ref(INFRA_API, "Metal3Cluster", machine_set.cluster, ns))
    except NotFound:
        raise Invalid(f"cluster: Metal3Cluster {ns}/{machine_set.cluster} not found") from None
    domains = [fd["name"] for fd in (cluster.get("spec") or {}).get("failureDomains") or []  # v1beta2: a list
               if fd.get("controlPlane") or not machine_set.control_plane]
    for name in wanted:
        if name in existing:
            continue
        domain = spread(domains, [(m.get("spec") or {}).get("failureDomain") for m in machines])
        machines.append(_create(store, machine_set, name, domain, template, dry_run))
    return machines


def _create(store: Store, machine_set: MachineSet, name: str, domain: str | None, template: Object,
            dry_run: bool) -> Object:
    ns = machine_set.namespace
    labels = {CLUSTER_NAME_LABEL: machine_set.cluster, SET_LABEL: machine_set.name,
              **({CONTROL_PLANE_LABEL: ""} if machine_set.control_plane else {DEPLOYMENT_LABEL: machine_set.name})}
    spec: dict[str, Any] = {"clusterName": machine_set.cluster, "bootstrap": {},
                            "infrastructureRef": {"apiVersion": INFRA_API, "kind": "Metal3Machine", "name": name,
                                                  "namespace": ns}}
    if machine_set.bootstrap_secret:
        spec["bootstrap"]["dataSecretName"] = machine_set.bootstrap_secret
    if domain:
        spec["failureDomain"] = domain
    machine: Object = {"apiVersion": CAPI_API, "kind": "Machine",
                       "metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": spec}
    try:
        machine = store.create(machine, dry_run=dry_run)
    except AlreadyExists:
        machine = store.get(Ref(CAPI_API, "Machine", name, ns))
    if dry_run:
        machine["metadata"].setdefault("uid", "")
    m3m_spec = copy.deepcopy(template["spec"]["template"].get("spec") or {})
    if domain:
        m3m_spec["failureDomain"] = domain
    if machine_set.kind:
        m3m_spec["kind"] = machine_set.kind
    if machine_set.args is not None:
        m3m_spec["args"] = dict(machine_set.args)
    m3m = {"apiVersion": INFRA_API, "kind": "Metal3Machine",
           "metadata": {"name": name, "namespace": ns, "labels": labels,
                        "annotations": {CLONED_FROM_NAME: machine_set.template},
                        "ownerReferences": [owner_reference(machine, controller=True)]},
           "spec": m3m_spec}
    with contextlib.suppress(AlreadyExists):
        store.create(m3m, dry_run=dry_run)
    return machine


def converge(store_factory: Callable[[], Store], ironic: IronicOptions, namespace: str, selector: str | None,
             targets: tuple[str, ...] = ("ready",), timeout: float = 0, dry_run: bool = False,
             strict_failure_domain: bool = False, concurrency: int = 20, name: str | None = None,
             fast_track: bool = False, host_claim_mode: bool = False, machines: VirtualMachines | None = None,
             sleep: Callable[[float], None] = time.sleep,
             outbound: OutboundPolicy | None = None) -> tuple[list[MachineResult], bool]:
    """Step the selected Metal3Machines (``name``, else ``selector``) and their hosts until every one is ready
    (or deleted) or time is up. No target: one step."""
    one_step = not targets or dry_run

    def step() -> list[MachineResult]:
        with store_factory() as store:
            if name:
                refs = [Ref(INFRA_API, "Metal3Machine", name, namespace)]
            else:
                refs = [Ref.of(m) for m in store.list(INFRA_API, "Metal3Machine", namespace, selector)]
            steps = [reconcile_metal3machine(store, ref, dry_run, strict_failure_domain, fast_track, host_claim_mode,
                                             machines, outbound) for ref in refs]
        for ref, result in zip(refs, steps, strict=True):
            report("Metal3Machine", f"{ref.namespace}/{ref.name}", result.phase, changed=result.changed)
            if result.placement:  # told once, when the step that placed it changed something
                report("Metal3Machine placement", f"{ref.namespace}/{ref.name}", result.placement,
                       changed=result.changed)
        if one_step:  # the hosts have reconciles of their own (the operator's)
            return steps
        # Waiting from a bastion: nobody else reconciles the hosts, so this loop does.
        host_refs = _hosts_to_reconcile(steps, namespace)
        if host_refs:
            reconcile_hosts(store_factory, ironic, host_refs, (), 0, concurrency)
        return steps

    def verdict(steps: list[MachineResult]) -> bool | None:
        if one_step:
            return True
        present = [s for s in steps if s.obj is not None]
        if all(s.ready for s in present) if "ready" in targets else not present:
            return True
        stuck = [s for s in present if s.requeue_after is None and not s.ready]
        return False if stuck else None

    return wait_until(step, verdict, timeout, sleep=sleep)


def _hosts_to_reconcile(steps: list[MachineResult], namespace: str) -> list[Ref]:
    """The BareMetalHosts whose own reconcile moves the machines on, as their classes of compute say, once each."""
    refs: dict[Ref, None] = {}
    for step in sorted(steps, key=lambda s: s.host):
        compute_class = class_for(step.host_class)
        if step.host and compute_class is not None:
            refs.update(dict.fromkeys(compute_class.hosts_to_reconcile(None, step.host, namespace)))
    return list(refs)
