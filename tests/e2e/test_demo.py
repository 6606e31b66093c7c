"""`make demo`'s playbook on a fresh embedded store: the table, a second run that changes nothing, the clean-up."""
from __future__ import annotations

import re
from pathlib import Path

from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.integration.ansible import REPO, ansible_playbook

DEMO = REPO / "playbooks" / "demo.yml"


def test_the_demo_allocates_prints_a_table_is_idempotent_and_cleans_up(tmp_path: Path):
    env = {"METAL3_STORE_PATH": str(tmp_path / "store.db"), "ANSIBLE_CALLBACK_RESULT_FORMAT": "yaml"}
    first = ansible_playbook(DEMO, env=env)
    assert first.ok, first.output
    rows = re.findall(r"^\s+(\S+)\s+(\S+)\s+(\S+)\s+(\d+\.\d+\.\d+\.\d+)\s+(\d+)\s+(\S+)$", first.output, re.M)
    assert ("worker-0", "eth1", "storage", "192.168.12.10", "24", "-") in rows
    assert ("cp-0", "nic0", "mgmt", "192.168.11.10", "24", "192.168.11.1") in rows
    assert len(rows) == 7

    second = ansible_playbook(DEMO, env=env)
    assert second.ok, second.output
    assert re.search(r"localhost\s+: ok=\d+\s+changed=0\s", second.output), second.output

    clean = ansible_playbook(DEMO, {"demo_state": "absent"}, env=env)
    assert clean.ok, clean.output
    with LocalStore(str(tmp_path / "store.db")) as store:
        assert store._db.execute("SELECT count(*) FROM objects").fetchone()[0] == 0
