"""`make demo`'s playbook on a fresh embedded store and its own Ironic: the main job end to end."""
from __future__ import annotations

import re
from pathlib import Path

from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.harness.ironic import VENV, free_port
from tests.integration.playbook_runs import REPO, ansible_playbook

DEMO = REPO / "playbooks" / "demo.yml"
ROW = re.compile(r"^\s+(my-cluster-\S+)\s+(metal3/host-\d)\s+(az-[ab])\s+(\d+\.\d+\.\d+\.\d+)\s+(\d+\.\d+\.\d+\.\d+)\s+"
                 r"(provisioned)\s+(metal3://\S+)$", re.M)


def test_the_demo_spreads_provisions_renders_is_idempotent_and_cleans_up(tmp_path: Path, ironic):
    clouds = tmp_path / "clouds.yaml"
    env = {"METAL3_STORE_PATH": str(tmp_path / "store.db"), "ANSIBLE_CALLBACK_RESULT_FORMAT": "yaml",
           "OS_CLIENT_CONFIG_FILE": str(clouds)}
    # The demo's own Ironic, as on a fresh machine, but in tmp_path, on free ports, from the lab's virtualenv.
    lab = ["-e", f"ironic_base_dir={tmp_path / 'ironic'}", "-e", f"ironic_venv={VENV}", "-e",
           f"ironic_clouds_yaml={clouds}", "-e", f"ironic_api_port={free_port()}", "-e",
           f"ironic_http_port={free_port()}", "-e", "ironic_supervisor=process"]
    try:
        first = ansible_playbook(DEMO, None, *lab, env=env)
        assert first.ok, first.output
        rows = ROW.findall(first.output)
        assert len(rows) == 5, first.output
        control_plane = [r for r in rows if "controlplane" in r[0]]
        assert sorted(r[2] for r in control_plane) in (["az-a", "az-a", "az-b"], ["az-a", "az-b", "az-b"])
        for machine, host, domain, mgmt, storage, _state, provider_id in rows:
            assert provider_id == f"metal3://metal3/{host.split('/')[1]}/{machine}"
            third = "11" if domain == "az-a" else "21"  # each domain's own pools
            assert mgmt.startswith(f"192.168.{third}.") and storage.startswith(f"192.168.{int(third) + 1}.")
        assert len({host for _m, host, *_rest in rows}) == 5
        assert re.search(r"my-cluster-controlplane-0: metal3/my-cluster-controlplane-0-networkdata", first.output)

        second = ansible_playbook(DEMO, None, *lab, env=env)
        assert second.ok, second.output
        assert re.search(r"localhost\s+: ok=\d+\s+changed=0\s", second.output), second.output
    finally:
        clean = ansible_playbook(DEMO, {"demo_state": "absent"}, *lab, env=env)
    assert clean.ok, clean.output
    assert not (tmp_path / "ironic").exists()
    with LocalStore(str(tmp_path / "store.db")) as store:
        left = store._db.execute("SELECT kind, name FROM objects").fetchall()
    assert left == []
