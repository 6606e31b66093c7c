"""Seeds a scenario's empty store with what the CAPM3 roles need: a cluster over two failure domains, a
pool, a data template, a machine template and available hosts (status written as their reconcile would).
Idempotent (converge runs it twice). Usage: seed.py STORE_PATH [--associated]  (--associated: also a
Metal3Machine holding host-0, and its Metal3DataClaim)"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "build" / "collections"))

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import AlreadyExists  # noqa: E402
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref  # noqa: E402
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore  # noqa: E402

NS = "molecule"
INFRA = "infrastructure.cluster.x-k8s.io/v1beta1"


class _Once:
    """The store, creating only what is missing: converge runs twice (molecule's idempotence check)."""

    def __init__(self, store: LocalStore):
        self.store, self.created = store, 0

    def create(self, obj: dict) -> dict:
        try:
            created = self.store.create(obj)
        except AlreadyExists:
            return self.store.get(Ref.of(obj))
        self.created += 1
        return created

    def __getattr__(self, name: str):
        return getattr(self.store, name)


def main() -> None:
    with LocalStore(sys.argv[1]) as opened:
        store = _Once(opened)
        store.create({"apiVersion": INFRA, "kind": "Metal3Cluster", "metadata": {"name": "mol", "namespace": NS},
                      "spec": {"failureDomains": {"az-a": {"controlPlane": True}, "az-b": {"controlPlane": True}}}})
        store.create({"apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPPool",
                      "metadata": {"name": "mgmt", "namespace": NS},
                      "spec": {"namePrefix": "mgmt", "pools": [{"subnet": "10.50.0.0/24"}], "prefix": 24,
                               "gateway": "10.50.0.1"}})
        store.create({"apiVersion": INFRA, "kind": "Metal3DataTemplate",
                      "metadata": {"name": "net", "namespace": NS},
                      "spec": {"metaData": {"indexes": [{"key": "index"}]},
                               "networkData": {"links": {"ethernets": [{"id": "eth0", "type": "phy",
                                                                        "macAddress": {"fromHostInterface": "eno1"}}]},
                                               "networks": {"ipv4": [{"id": "mgmt", "link": "eth0",
                                                                      "ipAddressFromIPPool": "mgmt"}]}}}})
        store.create({"apiVersion": INFRA, "kind": "Metal3MachineTemplate",
                      "metadata": {"name": "mol", "namespace": NS},
                      "spec": {"template": {"spec": {"image": {"url": "http://images.example/os.img",
                                                               "checksum": "http://images.example/os.img.sha256"},
                                                     "dataTemplate": {"name": "net"}}}}})
        for i in range(3):
            host = store.create({"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
                                 "metadata": {"name": f"host-{i}", "namespace": NS, "labels": {
                                     "infrastructure.cluster.x-k8s.io/failure-domain": f"az-{'ab'[i % 2]}"}},
                                 "spec": {"online": False}})
            if not host.get("status"):
                store.update_status({**host, "status": {"provisioning": {"state": "available"}, "hardware": {
                    "nics": [{"name": "eno1", "mac": f"52:54:00:6d:00:0{i}"}]}}})
        if "--associated" in sys.argv and store.created:
            m3m = store.create({"apiVersion": INFRA, "kind": "Metal3Machine",
                                "metadata": {"name": "m-0", "namespace": NS,
                                             "annotations": {"metal3.io/BareMetalHost": f"{NS}/host-0"}},
                                "spec": {"dataTemplate": {"name": "net"}}})
            store.patch(Ref("metal3.io/v1alpha1", "BareMetalHost", "host-0", NS),
                        {"spec": {"consumerRef": {"apiVersion": INFRA, "kind": "Metal3Machine", "name": "m-0",
                                                  "namespace": NS}}})
            store.create({"apiVersion": INFRA, "kind": "Metal3DataClaim",
                          "metadata": {"name": "m-0", "namespace": NS, "ownerReferences": [
                              {"apiVersion": INFRA, "kind": "Metal3Machine", "name": "m-0",
                               "uid": m3m["metadata"]["uid"], "controller": True}]},
                          "spec": {"template": {"name": "net"}}})
        print(f"created {store.created}")


if __name__ == "__main__":
    main()
