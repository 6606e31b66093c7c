"""`make demo`'s playbook on a fresh embedded store and its own Ironic: the main job end to end."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.harness.ironic import VENV, free_port
from tests.integration.playbook_runs import REPO, ansible_inventory, ansible_playbook

DEMO = REPO / "playbooks" / "demo.yml"
INVENTORY = REPO / "playbooks" / "files" / "demo.metal3.yml"  # the demo's machines, as an inventory source
ROW = re.compile(r"^\s*(my-cluster-\S+)\s+(metal3/host-\d)\s+(az-[ab])\s+(\d+\.\d+\.\d+\.\d+)\s+(\d+\.\d+\.\d+\.\d+)\s+"
                 r"(provisioned)\s+(metal3://\S+)$", re.M)
# What a wait prints as it goes (core/progress.py): a host's or machine's state change, with the time elapsed.
STATE_LINE = re.compile(r"^(metal3/[\w-]+): ([\w ]+) -> ([\w ]+) \((?:\d+h)?(?:\d+m)?\d+s\)$", re.M)
SVG = "{http://www.w3.org/2000/svg}"


def unsafe(value: Any) -> Any:
    """A value of ``ansible-inventory --list``: what an inventory plugin read is marked {"__ansible_unsafe": ...}."""
    return value["__ansible_unsafe"] if isinstance(value, dict) and set(value) == {"__ansible_unsafe"} else value


def test_the_demo_spreads_provisions_renders_is_idempotent_and_cleans_up(tmp_path: Path, ironic):
    clouds = tmp_path / "clouds.yaml"
    env = {"METAL3_STORE_PATH": str(tmp_path / "store.db"), "ANSIBLE_CALLBACK_RESULT_FORMAT": "yaml",
           "OS_CLIENT_CONFIG_FILE": str(clouds)}
    # The demo's own Ironic, as on a fresh machine, but in tmp_path, on free ports, from the lab's virtualenv.
    lab = ["-e", f"ironic_base_dir={tmp_path / 'ironic'}", "-e", f"ironic_venv={VENV}", "-e",
           f"ironic_clouds_yaml={clouds}", "-e", f"ironic_api_port={free_port()}", "-e",
           f"ironic_http_port={free_port()}", "-e", "ironic_supervisor=process",
           "-e", f"demo_timeline={tmp_path / 'timeline.svg'}"]
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
        assert re.search(r"^my-cluster-controlplane-0\s+metal3/my-cluster-controlplane-0-networkdata$", first.output,
                         re.M), first.output
        # The waits printed each host's progress as it went, before the table: every host became available,
        # the five machines' hosts were provisioned.
        changes = STATE_LINE.findall(first.output[:first.output.index("MACHINE ")])
        assert {h for h, _before, after in changes if h.startswith("metal3/host-") and after == "available"} == \
            {f"metal3/host-{i}" for i in range(6)}, first.output
        provisioned = {h for h, _before, after in changes if h.startswith("metal3/host-") and after == "provisioned"}
        assert provisioned == {host for _m, host, *_rest in rows}, first.output
        # The timeline: an SVG that parses, one row (group) per host, and the PNG beside it.
        root = ET.parse(tmp_path / "timeline.svg").getroot()
        groups = [g for g in root.iter(f"{SVG}g") if g.get("class") == "host"]
        assert len(groups) == 6 and all(g.findall(f"{SVG}rect") for g in groups)
        assert (tmp_path / "timeline.png").read_bytes().startswith(b"\x89PNG")
        assert re.search(rf"^SVG\s+{re.escape(str(tmp_path / 'timeline.svg'))}$", first.output, re.M), first.output

        # The shipped inventory source shows the five machines under their cluster, failure domain and role
        # groups, each at its mgmt address (the table's), and a play on control_plane runs on three of them.
        for group, members in (("cluster_my_cluster", [r[0] for r in rows]),
                               ("control_plane", [r[0] for r in control_plane]),
                               ("workers", [r[0] for r in rows if r not in control_plane]),
                               ("failure_domain_az_a", [r[0] for r in rows if r[2] == "az-a"]),
                               ("failure_domain_az_b", [r[0] for r in rows if r[2] == "az-b"])):
            shown = ansible_inventory(INVENTORY, "--graph", group, env=env)
            assert shown.ok and "Traceback" not in shown.output, shown.output
            assert sorted(re.findall(r"--(my-cluster-\S+)$", shown.output, re.M)) == sorted(members), shown.output
        listed = ansible_inventory(INVENTORY, "--list", env=env)
        hostvars = json.loads(listed.output[listed.output.index("{"):])["_meta"]["hostvars"]
        assert {name: unsafe(facts["ansible_host"]) for name, facts in hostvars.items()} == \
            {machine: mgmt for machine, _host, _domain, mgmt, *_rest in rows}, listed.output
        play = tmp_path / "control-plane.yml"
        play.write_text("- {hosts: control_plane, gather_facts: false, connection: local,\n"
                        "   tasks: [{ansible.builtin.debug: {msg: '{{ ansible_host }}'}}]}\n")
        on_control_plane = ansible_playbook(play, None, "-i", str(INVENTORY), env=env)
        assert on_control_plane.ok, on_control_plane.output
        assert sorted(re.findall(r"^(my-cluster-\S+)\s+: ok=1 ", on_control_plane.output, re.M)) == \
            sorted(r[0] for r in control_plane), on_control_plane.output

        second = ansible_playbook(DEMO, None, *lab, env=env)
        assert second.ok, second.output
        assert re.search(r"localhost\s+: ok=\d+\s+changed=0\s", second.output), second.output
        assert not STATE_LINE.search(second.output), second.output  # nothing changed: no progress lines
    finally:
        clean = ansible_playbook(DEMO, {"demo_state": "absent"}, *lab, env=env)
    assert clean.ok, clean.output
    assert not (tmp_path / "ironic").exists()
    with LocalStore(str(tmp_path / "store.db")) as store:
        left = store._db.execute("SELECT kind, name FROM objects").fetchall()
    assert left == []
