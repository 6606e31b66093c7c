"""Kubelet, as far as Cluster API and the operator can tell (issue 32): for each node of one namespace that Ironic
(fake-hardware) has deployed, the Node kubeadm's kubelet would register in the workload cluster, made from the
meta_data of the config drive Ironic holds for it - named by its ``local-hostname``, labelled ``metal3.io/uuid``
with its ``uuid`` (CAPM3's templates pass ``node-labels: metal3.io/uuid={{ ds.meta_data.uuid }}`` to kubelet),
with ``provider_id`` its ``spec.providerID`` ``metal3://`` and its ``providerid`` (as the templates pass
``provider-id: metal3://{{ ds.meta_data.providerid }}``; without, kubelet sets none: ``provider_id``, for all
machines or those whose meta_data it accepts) - and Ready while Ironic has it powered on (with no memory, disk
or PID pressure), NotReady while it is off, as the node controller would mark it. A Node deleted is registered
again once its machine is on (kubelet starts with it). A Node named in ``broken`` stays NotReady, on or off (a
kubelet that fails). A thread of the test; nothing in the collection knows it is not a kubelet."""
from __future__ import annotations

import datetime
import json
import sqlite3
from typing import Any, Callable

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.harness.cluster import KubeCluster
from tests.harness.ironic import Ironic
from tests.harness.looping import Looping

UUID_LABEL = "metal3.io/uuid"
# The conditions kubelet reports besides Ready, as it words them when all is well.
PRESSURES = {"MemoryPressure": ("KubeletHasSufficientMemory", "sufficient memory available"),
             "DiskPressure": ("KubeletHasNoDiskPressure", "no disk pressure"),
             "PIDPressure": ("KubeletHasSufficientPID", "sufficient PID available")}


class NodeAgent(Looping):
    def __init__(self, ironic: Ironic, workload: KubeCluster, namespace: str,
                 provider_id: bool | Callable[[dict[str, Any]], bool] = False, interval: float = 1.0) -> None:
        super().__init__("node-agent", interval)
        self.ironic, self.namespace = ironic, namespace
        self.provider_id = provider_id
        self.meta_data: dict[str, dict[str, Any]] = {}  # by Node name: the meta_data each was registered from
        self.user_data: dict[str, str] = {}  # by Node name: the user_data its machine was deployed with
        self.nodes = client.CoreV1Api(workload.api_client())
        self.registered: dict[str, str] = {}  # Node name by Ironic node name, as registered
        self.broken: set[str] = set()  # Nodes reported NotReady whatever their machine's power

    def _deployed(self) -> list[tuple[str, str, dict[str, Any], str]]:
        """(Ironic node name, power state, meta_data, user_data) of each active node of the namespace."""
        with sqlite3.connect(self.ironic.base_dir / "ironic.sqlite") as db:
            rows = db.execute("SELECT name, power_state, instance_info FROM nodes WHERE name LIKE ? AND "
                              "provision_state = 'active'", (f"{self.namespace}~%",)).fetchall()
        deployed = []
        for name, power, info in rows:
            drive = json.loads(info or "{}").get("configdrive") or {}
            meta = drive.get("meta_data") or {}
            if meta.get("local-hostname") and meta.get("uuid"):
                deployed.append((name, power or "", meta, str(drive.get("user_data") or "")))
        return deployed

    def step(self) -> None:
        for ironic_name, power, meta, user_data in self._deployed():
            name, on = meta["local-hostname"], power == "power on"
            if self.registered.get(ironic_name) != name:
                if not on:
                    continue
                self._register(name, meta)
                self.user_data[name] = user_data
                self.registered[ironic_name] = name
            self._report(name, on and name not in self.broken)

    def _register(self, name: str, meta: dict[str, Any]) -> None:
        labels = {UUID_LABEL: meta["uuid"], "kubernetes.io/hostname": name}
        body: dict[str, Any] = {"metadata": {"name": name, "labels": labels}}
        given = self.provider_id(meta) if callable(self.provider_id) else self.provider_id
        if given and meta.get("providerid"):
            body["spec"] = {"providerID": f"metal3://{meta['providerid']}"}
        self.meta_data[name] = meta
        try:
            self.nodes.create_node(body)
        except ApiException as e:
            if e.status != 409:
                raise

    def _report(self, name: str, ready: bool) -> None:
        try:
            node = self.nodes.read_node_status(name)
        except ApiException as e:
            if e.status == 404:  # deleted (Cluster API deletes a machine's Node): registered again next pass
                self.registered = {k: v for k, v in self.registered.items() if v != name}
                return
            raise
        status = "True" if ready else "False"
        reported = {c.type: c.status for c in node.status.conditions or []}
        if reported.get("Ready") == status and all(kind in reported for kind in PRESSURES):
            return
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        # Conditions merge by type: Ready as it is now, and the pressures kubelet reported once healthy (Cluster
        # API's Machine is healthy, and so available to a MachineDeployment's rollout, only with all of them).
        conditions = [{"type": "Ready", "status": status, "reason": "KubeletReady" if ready else "KubeletNotReady",
                       "message": "kubelet is posting ready status" if ready else "kubelet is not ready",
                       "lastHeartbeatTime": now, "lastTransitionTime": now}]
        conditions += [{"type": kind, "status": "False", "reason": reason, "message": f"kubelet has {what}",
                        "lastHeartbeatTime": now, "lastTransitionTime": now}
                       for kind, (reason, what) in PRESSURES.items() if kind not in reported]
        self.nodes.patch_node_status(name, {"status": {"conditions": conditions}})
