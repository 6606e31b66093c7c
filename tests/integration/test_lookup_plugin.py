"""The metal3.baremetal.resource lookup through ansible-playbook, on both backends: the objects resource_info reads,
one object or a list as lookups give them, a Secret's data only when a Secret is asked for, clear errors."""
from __future__ import annotations

import base64
from pathlib import Path

from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import ensure_present
from tests.integration.playbook_runs import ansible_playbook

PASSWORD = "correct-horse-battery-staple"


def pool(name: str, subnet: str, labels: dict[str, str], ns: str) -> dict:
    return {"apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPPool",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"namePrefix": name, "pools": [{"subnet": subnet}], "prefix": 24}}


def test_the_lookup_reads_the_store(store_options, namespace, tmp_path: Path):
    with open_store(store_options) as store:
        for obj in (pool("provisioning", "10.10.0.0/24", {"network": "provisioning", "tier": "a"}, namespace),
                    pool("storage", "10.20.0.0/24", {"network": "storage"}, namespace),
                    {"apiVersion": "v1", "kind": "Secret",
                     "metadata": {"name": "bmc-credentials", "namespace": namespace},
                     "stringData": {"username": "admin", "password": PASSWORD}}):
            ensure_present(store, obj)
    if store_options["backend"] == "kubernetes":
        unreachable = {"backend": "kubernetes", "host": "https://127.0.0.1:9", "api_key": "not-a-token"}
        message = "cannot reach the Kubernetes API at https://127.0.0.1:9"
    else:
        blocker = tmp_path / "a-file"
        blocker.write_text("")
        unreachable = {"backend": "local", "store_path": str(blocker / "store.db")}
        message = f"cannot open the local store {blocker}/store.db"
    run = ansible_playbook("lookup.yml", {"store": store_options, "ns": namespace, "unreachable": unreachable,
                                          "unreachable_message": message}, "-v")
    assert run.ok, run.output
    assert "Traceback" not in run.output
    assert PASSWORD not in run.output and base64.b64encode(PASSWORD.encode()).decode() not in run.output
