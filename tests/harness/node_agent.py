"""Kubelet, as far as Cluster API and the operator can tell (issue 32): for each node of one namespace that Ironic
(fake-hardware) has deployed, the Node kubeadm's kubelet would register in the workload cluster, made from the
meta_data of the config drive Ironic holds for it - named by its ``local-hostname``, labelled ``metal3.io/uuid``
with its ``uuid`` (CAPM3's templates pass ``node-labels: metal3.io/uuid={{ ds.meta_data.uuid }}`` to kubelet),
with ``provider_id`` its ``spec.providerID`` ``metal3://`` and its ``providerid`` (as the templates pass
``provider-id: metal3://{{ ds.meta_data.providerid }}``; without, kubelet sets none: ``provider_id``, for all
machines or those whose meta_data it accepts) - and Ready while Ironic has it powered on (with no memory, disk
or PID pressure), NotReady while it is off, as the node controller would mark it. A Node deleted is registered
again once its machine is on (kubelet starts with it). A Node named in ``broken`` stays NotReady, on or off (a
kubelet that fails). A machine whose user_data is kubeadm's ``init`` or a join with ``controlPlane`` (the kubeadm
bootstrap provider's cloud-init) is a control plane node, and its kubelet and kubeadm write what they would: the
Node labelled and tainted control-plane, the mirror Pods of its static pods (kube-apiserver,
kube-controller-manager, kube-scheduler) Running and Ready, and - once, when the init node comes up, as ``kubeadm
init`` uploads it - the ``kube-system/kubeadm-config`` ConfigMap with the ClusterConfiguration of its
``/run/kubeadm/kubeadm.yaml`` (Cluster API reads the control plane initialized from it: written earlier, the first
machine would be joined instead). A thread of the test; nothing in the collection knows it is not a kubelet."""
from __future__ import annotations

import datetime
import json
import sqlite3
from dataclasses import dataclass
from typing import Any, Callable

import yaml
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
CONTROL_PLANE = "node-role.kubernetes.io/control-plane"
STATIC_PODS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")  # etcd is external here
INIT_CONFIG = "/run/kubeadm/kubeadm.yaml"  # the kubeadm bootstrap provider's paths (its cloudinit package)
JOIN_CONFIG = "/run/kubeadm/kubeadm-join-config.yaml"


@dataclass(frozen=True)
class Kubeadm:
    """What a machine's user_data asks of kubeadm: ``control_plane`` (init, or a join with ``controlPlane``), and
    for an init the ClusterConfiguration it uploads (YAML)."""
    control_plane: bool = False
    cluster_configuration: str | None = None


def kubeadm_of(user_data: str) -> Kubeadm:
    """The kubeadm role of a cloud-config the kubeadm bootstrap provider wrote; a plain worker's (or anything else,
    unparsed) is not control plane."""
    try:
        config = yaml.safe_load(user_data)
    except yaml.YAMLError:
        return Kubeadm()
    if not isinstance(config, dict):
        return Kubeadm()
    files = {f.get("path"): str(f.get("content") or "") for f in config.get("write_files") or []
             if isinstance(f, dict)}
    try:
        if INIT_CONFIG in files:
            documents = [d for d in yaml.safe_load_all(files[INIT_CONFIG]) if d]
            cluster_configuration = next((d for d in documents if d.get("kind") == "ClusterConfiguration"), {})
            return Kubeadm(True, yaml.safe_dump(cluster_configuration))
        if JOIN_CONFIG in files:
            join = yaml.safe_load(files[JOIN_CONFIG]) or {}
            return Kubeadm("controlPlane" in join)
    except yaml.YAMLError:
        pass
    return Kubeadm()


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
                self._register(name, meta, kubeadm_of(user_data))
                self.user_data[name] = user_data
                self.registered[ironic_name] = name
            self._report(name, on and name not in self.broken)

    def _register(self, name: str, meta: dict[str, Any], kubeadm: Kubeadm) -> None:
        labels = {UUID_LABEL: meta["uuid"], "kubernetes.io/hostname": name}
        body: dict[str, Any] = {"metadata": {"name": name, "labels": labels}, "spec": {}}
        given = self.provider_id(meta) if callable(self.provider_id) else self.provider_id
        if given and meta.get("providerid"):
            body["spec"]["providerID"] = f"metal3://{meta['providerid']}"
        if kubeadm.control_plane:  # kubeadm's mark-control-plane phase
            labels[CONTROL_PLANE] = ""
            body["spec"]["taints"] = [{"key": CONTROL_PLANE, "effect": "NoSchedule"}]
        self.meta_data[name] = meta
        self._created(lambda: self.nodes.create_node(body))
        if kubeadm.control_plane:
            for component in STATIC_PODS:
                self._mirror_pod(name, component)
        if kubeadm.cluster_configuration is not None:  # kubeadm init's upload-config phase
            self._created(lambda: self.nodes.create_namespaced_config_map("kube-system", {
                "metadata": {"name": "kubeadm-config"},
                "data": {"ClusterConfiguration": kubeadm.cluster_configuration}}))

    @staticmethod
    def _created(create: Callable[[], Any]) -> None:
        """``create()``, an object already there (registered before) taken as made."""
        try:
            create()
        except ApiException as e:
            if e.status != 409:
                raise

    def _mirror_pod(self, node: str, component: str) -> None:
        """The mirror Pod kubelet posts for a static pod of ``node``, its status Running and Ready."""
        name = f"{component}-{node}"
        self._created(lambda: self.nodes.create_namespaced_pod("kube-system", {
            "metadata": {"name": name, "labels": {"tier": "control-plane", "component": component},
                         "annotations": {"kubernetes.io/config.mirror": name}},
            "spec": {"nodeName": node,
                     "containers": [{"name": component, "image": f"registry.k8s.io/{component}:v1.34.4"}]}}))
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.nodes.patch_namespaced_pod_status(name, "kube-system", {"status": {
            "phase": "Running", "startTime": now,
            "conditions": [{"type": kind, "status": "True", "lastTransitionTime": now}
                           for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]}})

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
