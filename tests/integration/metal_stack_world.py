"""What the metal-stack tests start from: a partition's hosts, machine types, a super-network, a public network
and the image catalogue, written to a store; and the seed's manifests. Hosts change state here by status
writes (their own reconcile is hosts/baremetalhost.py's, tested apart)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref

SEEDS = Path(__file__).resolve().parents[1] / "fixtures" / "metal-stack"
BMH_API = "metal3.io/v1alpha1"
IPAM_API = "ipam.metal3.io/v1alpha1"
CAPI_API = "cluster.x-k8s.io/v1beta1"
FAILURE_DOMAIN_LABEL = "infrastructure.cluster.x-k8s.io/failure-domain"
PINNED_FIREWALL = "2294c949-88f6-5390-8154-fa53d93a3313"  # the seed's firewall providerID
PINNED_MACHINE = "e0ab02d2-27cd-5a5e-8efc-080ba80cf258"  # the seed's machine providerID
SMALL = {"cpu": {"count": 2}, "ramMebibytes": 4096, "storage": [{"sizeBytes": 50 * 2**30}],
         "nics": [{"name": "enp1s0", "mac": "52:54:00:00:00:00"}]}
TINY = {"cpu": {"count": 1}, "ramMebibytes": 1024, "storage": [{"sizeBytes": 10 * 2**30}],
        "nics": [{"name": "enp1s0", "mac": "52:54:00:00:00:00"}]}


def seed(name: str, namespace: str | None = None) -> Object:
    """A seed manifest (tests/fixtures/metal-stack/seed-<name>.yaml) as written; in ``namespace`` if given."""
    obj: Object = yaml.safe_load((SEEDS / f"seed-{name}.yaml").read_text())
    if namespace:
        obj["metadata"]["namespace"] = namespace
    return obj


def host(store: Any, name: str, namespace: str, partition: str = "vagrant", hardware: dict[str, Any] | None = None,
         node_id: str | None = None, index: int = 0) -> Object:
    mac = f"52:54:00:10:00:{index:02x}"
    created = store.create({"apiVersion": BMH_API, "kind": "BareMetalHost",
                            "metadata": {"name": name, "namespace": namespace,
                                         "labels": {FAILURE_DOMAIN_LABEL: partition}},
                            "spec": {"online": False, "bootMACAddress": mac}})
    hardware = json.loads(json.dumps(hardware or SMALL))
    hardware["nics"][0]["mac"] = mac
    return set_state(store, Ref.of(created), "available", hardware=hardware, node_id=node_id)


def set_state(store: Any, ref: Ref, state: str, hardware: dict[str, Any] | None = None,
              node_id: str | None = None) -> Object:
    current = store.get(ref)
    status = {**(current.get("status") or {}), "provisioning": {
        **((current.get("status") or {}).get("provisioning") or {}), "state": state}}
    if node_id:
        status["provisioning"]["ID"] = node_id
    if hardware:
        status["hardware"] = hardware
    return store.update_status({**current, "status": status})


def partition(store: Any, namespace: str, hosts: int = 6, prefixes: tuple[str, ...] = ("10.8.0.0/22",),
              prefix_length: int = 24) -> list[Object]:
    """``hosts`` small hosts in partition vagrant (the first two pinned by the seed's IDs), a tiny one, the machine
    types, the super-network, the public network and the image catalogue."""
    made = [host(store, f"server-{i}", namespace, node_id=[PINNED_FIREWALL, PINNED_MACHINE][i] if i < 2 else None,
                 index=i) for i in range(hosts)]
    made.append(host(store, "tiny-0", namespace, hardware=TINY, index=hosts))
    for name, cores in (("v1-small-x86", 2), ("c1-large-x86", 32)):
        store.create({"apiVersion": BMH_API, "kind": "MachineType", "metadata": {"name": name, "namespace": namespace},
                      "spec": {"constraints": [{"type": "cores", "min": cores, "max": cores},
                                               {"type": "memory", "min": "2Gi", "max": "64Gi"}]}})
    store.create({"apiVersion": IPAM_API, "kind": "IPPrefixPool",
                  "metadata": {"name": "vagrant-super", "namespace": namespace},
                  "spec": {"prefixes": list(prefixes), "prefixLength": prefix_length, "partition": "vagrant"}})
    store.create({"apiVersion": IPAM_API, "kind": "IPPool",
                  "metadata": {"name": "internet-vagrant-lab", "namespace": namespace},
                  "spec": {"namePrefix": "internet-vagrant-lab", "prefix": 24, "gateway": "100.255.254.254",
                           "pools": [{"start": "100.255.254.1", "end": "100.255.254.200"}]}})
    images = {name: json.dumps({"url": f"http://images.example/{name}.qcow2",
                                "checksum": f"http://images.example/{name}.qcow2.sha256sum",
                                "checksumType": "sha256", "diskFormat": "qcow2"})
              for name in ("ubuntu-cloud-init-20.04", "firewall-ubuntu-2.0")}
    store.create({"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "metal-stack-images", "namespace": namespace}, "data": images})
    return made


def capi_cluster(store: Any, name: str, namespace: str, infra: str | None = None) -> Object:
    return store.create({"apiVersion": CAPI_API, "kind": "Cluster", "metadata": {"name": name, "namespace": namespace},
                         "spec": {"infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha3",
                                                        "kind": "MetalStackCluster", "name": infra or name}}})


def capi_machine(store: Any, name: str, namespace: str, cluster: str, infra: str, bootstrap: str) -> Object:
    store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": bootstrap, "namespace": namespace},
                  "stringData": {"value": "#cloud-config\n"}})
    return store.create({"apiVersion": CAPI_API, "kind": "Machine", "metadata": {
        "name": name, "namespace": namespace, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
        "spec": {"clusterName": cluster, "bootstrap": {"dataSecretName": bootstrap},
                 "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha3",
                                       "kind": "MetalStackMachine", "name": infra}}})
