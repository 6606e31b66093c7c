"""Where a machine landed, not where it asked to be (issue 30, item 15): the failure domain is a preference, and a
machine that finds no free host in its domain takes one of another. On the local store, no Ironic: the one step
that claims a host and writes its status is enough. The table is the demo's own task (playbooks/demo.yml)."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import INFRA_API
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.integration.playbook_runs import REPO, ansible_inventory, ansible_playbook
from tests.integration.test_inventory_plugin import graph

NS = "metal3"
BMH_API = "metal3.io/v1alpha1"
FD_LABEL = "infrastructure.cluster.x-k8s.io/failure-domain"


def host(name: str, domain: str, consumer: str | None = None) -> dict:
    spec = {"online": False, "bootMACAddress": f"52:54:00:00:00:0{name[-1]}",
            "bmc": {"address": f"fake://{name}", "credentialsName": "bmc"}}
    if consumer:
        spec["consumerRef"] = {"apiVersion": INFRA_API, "kind": "Metal3Machine", "name": consumer, "namespace": NS}
    return {"apiVersion": BMH_API, "kind": "BareMetalHost",
            "metadata": {"name": name, "namespace": NS, "labels": {FD_LABEL: domain}}, "spec": spec}


def machine(name: str, domain: str) -> dict:
    return {"apiVersion": INFRA_API, "kind": "Metal3Machine", "metadata": {"name": name, "namespace": NS},
            "spec": {"failureDomain": domain, "userData": {"name": "user-data"},
                     "image": {"url": "http://images.example/os.qcow2", "checksumType": "sha256",
                               "checksum": "http://images.example/os.qcow2.sha256sum", "diskFormat": "qcow2"}}}


def the_demos_table_task() -> dict:
    plays = yaml.safe_load((REPO / "playbooks" / "demo.yml").read_text())
    task = next(t for play in plays for t in play.get("tasks", []) if t.get("name") == "Show the machines")
    return {k: v for k, v in task.items() if k != "when"}


def test_a_machine_whose_domain_is_full_lands_in_another_and_every_view_says_where(tmp_path: Path):
    store_path = tmp_path / "store.db"
    with LocalStore(str(store_path)) as store:
        store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bmc", "namespace": NS},
                      "stringData": {"username": "admin", "password": "pw"}})
        store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "user-data", "namespace": NS},
                      "stringData": {"value": "#cloud-config\n"}})
        # az-a's only host is taken; az-b has two free ones.
        for obj in (host("host-a0", "az-a", consumer="someone-else"), host("host-b1", "az-b"),
                    host("host-b2", "az-b")):
            created = store.create(obj)
            store.update_status({**created, "status": {"provisioning": {"state": "available"},
                                                       "operationalStatus": "OK", "poweredOn": False}})
        store.create(machine("asks-a", "az-a"))
        store.create(machine("asks-b", "az-b"))
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": "localhost", "gather_facts": False,
        "vars": {"metal3_store": {"backend": "local", "store_path": str(store_path)}},
        "tasks": [
            {"name": "One step of each machine",
             "ansible.builtin.include_role": {"name": "metal3.baremetal.metal3machine"},
             "vars": {"metal3machine_namespace": NS}},
            the_demos_table_task(),
        ]}]))

    run = ansible_playbook(playbook)
    assert run.ok, run.output

    with LocalStore(str(store_path)) as store:
        placed = {name: store.get(Ref(INFRA_API, "Metal3Machine", name, NS)) for name in ("asks-a", "asks-b")}
        hosts = {name: m["metadata"]["annotations"]["metal3.io/BareMetalHost"].split("/")[1]
                 for name, m in placed.items()}
    assert hosts["asks-a"] in ("host-b1", "host-b2") and hosts["asks-b"] in ("host-b1", "host-b2")
    # The table: the domain each machine landed in (its host's), not the one it asked for.
    assert re.search(rf"^asks-a\s+{NS}/{hosts['asks-a']}\s+az-b\s", run.output, re.MULTILINE), run.output
    assert re.search(rf"^asks-b\s+{NS}/{hosts['asks-b']}\s+az-b\s", run.output, re.MULTILINE), run.output
    # The progress line, when the machine was placed.
    assert f"{NS}/asks-a: asked az-a, placed in az-b: no free host in az-a" in run.output, run.output
    assert f"{NS}/asks-b: asked" not in run.output
    # The status: a condition that says it fell back, and one that says it did not.
    conditions = {name: {c["type"]: c for c in m["status"]["conditions"]} for name, m in placed.items()}
    fell_back = conditions["asks-a"]["FailureDomainPlaced"]
    assert (fell_back["status"], fell_back["reason"]) == ("False", "PlacedInAnotherFailureDomain")
    assert fell_back["message"] == "asked az-a, placed in az-b: no free host in az-a"
    in_domain = conditions["asks-b"]["FailureDomainPlaced"]
    assert (in_domain["status"], in_domain["reason"], in_domain["message"]) == \
        ("True", "InRequestedFailureDomain", "placed in az-b")

    # The inventory groups each machine by the domain it landed in.
    source = tmp_path / "placed.metal3.yml"
    source.write_text(yaml.safe_dump({"plugin": "metal3.baremetal.metal3", "namespace": NS,
                                      "store_path": str(store_path)}))
    inventory = ansible_inventory(source, "--graph")
    assert inventory.ok, inventory.output
    groups = graph(inventory.output)
    assert {"asks-a", "asks-b"} <= groups.get("failure_domain_az_b", set()), inventory.output
    assert "asks-a" not in groups.get("failure_domain_az_a", set()), inventory.output

    # A second step changes nothing, and says nothing of the placement again.
    again = ansible_playbook(playbook)
    assert again.ok, again.output
    assert "placed in az-b: no free host" not in again.output.split("TASK [Show the machines]")[0], again.output
