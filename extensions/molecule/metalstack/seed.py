"""Seeds the metalstack scenario's store with partition vagrant's hosts: inspected (status.hardware) and available,
as their reconcile would leave them, the first two with the Ironic node UUIDs the seed's providerIDs pin (the
firewall's, the machine's). Idempotent (converge runs it twice). Usage: seed.py STORE_PATH"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "build" / "collections"))

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import AlreadyExists  # noqa: E402
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore  # noqa: E402

NS = "metal-stack"  # the seed cluster's namespace
PINNED = ("2294c949-88f6-5390-8154-fa53d93a3313", "e0ab02d2-27cd-5a5e-8efc-080ba80cf258")  # firewall, machine


def main() -> None:
    created = 0
    with LocalStore(sys.argv[1]) as store:
        for i in range(3):
            macs = [f"52:54:00:5e:0{i}:01", f"52:54:00:5e:0{i}:02"]
            try:
                host = store.create({"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
                                     "metadata": {"name": f"server-{i}", "namespace": NS, "labels": {
                                         "infrastructure.cluster.x-k8s.io/failure-domain": "vagrant"}},
                                     "spec": {"online": False, "bootMACAddress": macs[0]}})
            except AlreadyExists:
                continue
            provisioning = {"state": "available", **({"ID": PINNED[i]} if i < len(PINNED) else {})}
            store.update_status({**host, "status": {"provisioning": provisioning, "hardware": {
                "cpu": {"arch": "x86_64", "count": 2}, "ramMebibytes": 4096,
                "storage": [{"name": "/dev/sda", "sizeBytes": 50 * 2**30}],
                "nics": [{"name": f"enp{n + 1}s0", "mac": mac} for n, mac in enumerate(macs)]}}})
            created += 1
    print(f"created {created}")


if __name__ == "__main__":
    main()
