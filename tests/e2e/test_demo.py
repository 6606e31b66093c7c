"""`make demo`'s playbook on a fresh embedded store: the table, a second run that changes nothing, the clean-up."""
from __future__ import annotations

import re
from pathlib import Path

from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.harness.ironic import VENV, free_port
from tests.integration.ansible import REPO, ansible_playbook

DEMO = REPO / "playbooks" / "demo.yml"



def test_the_demo_provisions_allocates_prints_tables_is_idempotent_and_cleans_up(tmp_path: Path, ironic):
    clouds = tmp_path / "clouds.yaml"
    env = {"METAL3_STORE_PATH": str(tmp_path / "store.db"), "ANSIBLE_CALLBACK_RESULT_FORMAT": "yaml",
           "OS_CLIENT_CONFIG_FILE": str(clouds)}
    # The demo's own Ironic, as on a fresh machine, but in tmp_path, on free ports, from the lab's virtualenv.
    lab = ["-e", f"ironic_base_dir={tmp_path / 'ironic'}", "-e", f"ironic_venv={VENV}", "-e",
           f"ironic_clouds_yaml={clouds}", "-e", f"ironic_api_port={free_port()}", "-e",
           f"ironic_http_port={free_port()}", "-e", "ironic_supervisor=process"]
    first = ansible_playbook(DEMO, None, *lab, env=env)
    assert first.ok, first.output
    hosts = re.findall(r"^\s+(host-\d)\s+(az-[ab])\s+(provisioned)\s+(on)\s+([0-9a-f-]{36})$", first.output, re.M)
    assert len(hosts) == 6, first.output
    assert {domain for _host, domain, *_rest in hosts} == {"az-a", "az-b"}
    rows = re.findall(r"^\s+(\S+)\s+(\S+)\s+(\S+)\s+(\d+\.\d+\.\d+\.\d+)\s+(\d+)\s+(\S+)$", first.output, re.M)
    assert ("worker-0", "eth1", "storage", "192.168.12.10", "24", "-") in rows
    assert ("cp-0", "nic0", "mgmt", "192.168.11.10", "24", "192.168.11.1") in rows
    assert len(rows) == 7

    second = ansible_playbook(DEMO, None, *lab, env=env)
    assert second.ok, second.output
    assert re.search(r"localhost\s+: ok=\d+\s+changed=0\s", second.output), second.output

    clean = ansible_playbook(DEMO, {"demo_state": "absent"}, *lab, env=env)
    assert clean.ok, clean.output
    assert not (tmp_path / "ironic").exists()
    with LocalStore(str(tmp_path / "store.db")) as store:
        assert store._db.execute("SELECT count(*) FROM objects").fetchone()[0] == 0
