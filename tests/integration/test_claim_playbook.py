"""playbooks/claim.yml as a user runs it (ansible-playbook, the store and Ironic as metal3_store / metal3_ironic),
against the real Ironic: two servers claimed for tenant-a from the demo's six hosts of an infrastructure namespace
whose HostDeployPolicy admits tenant-a, provisioned with the image and the user data, shown in a table; a second
run changes nothing; claim_state=absent deprovisions and frees the servers and removes the claims and the data. A
run without an image is refused before anything is written."""
from __future__ import annotations

import re
import secrets
from pathlib import Path
from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.compute.baremetal import copy_name
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref, secret_values
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import IronicOptions
from tests.integration.hostclaim_world import API, policy, seed_infrastructure
from tests.integration.playbook_runs import REPO, ansible_playbook

CLAIM = REPO / "playbooks" / "claim.yml"
TENANT = "tenant-a"
USER_DATA = "#cloud-config\nhostname: web\n"
# A row of the playbook's table: CLAIM HOST STATE POWER ADDRESSES.
ROW = re.compile(r"(web-\d+) +(\S+/host-\d+) +(\w+) +(on|off) ")


def everything(store_options: dict[str, Any], namespaces: tuple[str, ...]) -> dict[str, str]:
    """Every object of ``namespaces`` (kind/namespace/name) and its resourceVersion."""
    with open_store(store_options) as store:
        return {f"{obj['kind']}/{obj['metadata']['namespace']}/{obj['metadata']['name']}":
                obj["metadata"]["resourceVersion"]
                for namespace in namespaces
                for api, kind in ((API, "BareMetalHost"), (API, "HostClaim"), (API, "HardwareData"),
                                  (API, "HostDeployPolicy"), ("v1", "Secret"))
                for obj in store.list(api, kind, namespace)}


def test_claim_two_servers_run_again_and_release_them(tmp_path: Path, ironic, monkeypatch):
    for key, value in ironic.env.items():
        monkeypatch.setenv(key, value)
    infra = f"infra-{secrets.token_hex(3)}"  # the node names on the session's Ironic are the hosts' own
    store = {"backend": "local", "store_path": str(tmp_path / "store.db")}
    seed_infrastructure(store, IronicOptions(cloud=ironic.cloud), infra, [policy("tenants", infra, names=[TENANT])])
    extra = {"metal3_store": store, "metal3_ironic": {"ironic_cloud": ironic.cloud}, "claim_namespace": TENANT,
             "claim_name": "web", "claim_count": 2, "claim_image_url": "http://images.example/debian.qcow2",
             "claim_user_data": USER_DATA, "claim_wait_timeout": 300}

    run = ansible_playbook(CLAIM, extra, env=ironic.env)
    assert run.ok, run.output
    assert "Traceback" not in run.output
    rows = {claim: (host, state, power) for claim, host, state, power in ROW.findall(run.output)}
    assert sorted(rows) == ["web-0", "web-1"], run.output
    assert all(host.startswith(f"{infra}/") and state == "provisioned" and power == "on"
               for host, state, power in rows.values()), rows
    hosts = {claim: row[0] for claim, row in rows.items()}
    assert len(set(hosts.values())) == 2, rows
    with open_store(store) as reader:
        for claim, host_id in hosts.items():
            host = reader.get(Ref(API, "BareMetalHost", host_id.split("/")[1], infra))
            assert host["spec"]["consumerRef"]["name"] == claim
            assert host["spec"]["image"]["url"] == "http://images.example/debian.qcow2"
            assert host["status"]["provisioning"]["state"] == "provisioned"
            copied = reader.get(Ref("v1", "Secret", host["spec"]["userData"]["name"], infra))
            assert secret_values(copied) == {"userData": USER_DATA}
    before = everything(store, (infra, TENANT))

    again = ansible_playbook(CLAIM, extra, env=ironic.env)
    assert again.ok, again.output
    assert re.search(r"localhost +: ok=\d+ +changed=0 ", again.output), again.output
    assert {row[0]: row[1] for row in ROW.findall(again.output)} == hosts  # the same table
    assert everything(store, (infra, TENANT)) == before  # not one object written

    gone = ansible_playbook(CLAIM, {**extra, "claim_state": "absent"}, env=ironic.env)
    assert gone.ok, gone.output
    with open_store(store) as reader:
        for host_id in hosts.values():
            name = host_id.split("/")[1]
            host = reader.get(Ref(API, "BareMetalHost", name, infra))
            assert host["status"]["provisioning"]["state"] == "available" and "consumerRef" not in host["spec"]
            assert "image" not in host["spec"] and "userData" not in host["spec"]
            assert reader.get_if_exists(Ref("v1", "Secret", copy_name(name, "userData"), infra)) is None
        assert reader.list(API, "HostClaim", TENANT) == []
        assert reader.list(API, "HardwareData", TENANT) == []
        assert reader.get_if_exists(Ref("v1", "Secret", "web-user-data", TENANT)) is None
        assert not [h for h in reader.list(API, "BareMetalHost", infra) if h["spec"].get("consumerRef")]


def test_a_claim_without_an_image_is_refused_and_writes_nothing(tmp_path: Path):
    store_path = tmp_path / "store.db"
    run = ansible_playbook(CLAIM, {"metal3_store": {"backend": "local", "store_path": str(store_path)},
                                   "claim_namespace": TENANT, "claim_name": "web", "claim_count": 2,
                                   "claim_user_data": USER_DATA})
    assert not run.ok
    assert ("claim_name and (to claim) claim_image_url are required; claim_count is 0 or more; claim_state is "
            "present or absent") in run.output, run.output
    assert "Traceback" not in run.output
    assert not store_path.exists()  # refused before any task opened the store
