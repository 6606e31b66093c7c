"""watches.yaml: the Ansible Operator's schema and defaults, and a clear error for each mistake."""
from __future__ import annotations

from pathlib import Path

import pytest

from metal3_operator.watches import WatchesError, load, parse_duration

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def collections(monkeypatch):
    monkeypatch.setenv("ANSIBLE_COLLECTIONS_PATH", str(REPO / "build" / "collections"))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "watches.yaml"
    path.write_text(text)
    return path


def test_the_shipped_watches_load_with_the_ansible_operators_defaults():
    watches = {w.kind: w for w in load(REPO / "operator" / "watches.yaml")}
    assert set(watches) == {"IPPool", "IPClaim", "IPAddressClaim", "BareMetalHost", "Metal3Cluster", "Metal3Machine",
                            "Metal3DataClaim", "Metal3Data"}
    claim = watches["IPClaim"]
    assert (claim.group, claim.version, claim.role) == ("ipam.metal3.io", "v1alpha1",
                                                        "metal3.baremetal.ipam_reconcile")
    assert claim.vars == {"ipam_reconcile_kind": "IPClaim"}
    assert claim.finalizer.name == "ipclaim.ipam.metal3.io"
    assert claim.max_runner_artifacts == 20 and claim.manage_status and claim.snake_case_parameters
    assert claim.reconcile_period == 0
    assert all(w.mark_unsafe for w in watches.values())


def test_every_key_of_the_schema_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("PERIOD", "90s")
    (tmp_path / "site.yml").write_text("- hosts: localhost\n")
    watch, = load(write(tmp_path, """
- group: example.com
  version: v1
  kind: Thing
  playbook: site.yml
  vars: {a: 1}
  maxRunnerArtifacts: 3
  reconcilePeriod: ${PERIOD}
  manageStatus: false
  snakeCaseParameters: false
  watchAnnotationsChanges: true
  markUnsafe: true
  watchDependentResources: false
  selector: {matchLabels: {tier: gold}, matchExpressions: [{key: zone, operator: In, values: [a, b]}]}
  finalizer: {name: example.com/cleanup, vars: {state: absent}}
"""))
    assert watch.playbook == str(tmp_path / "site.yml") and watch.role is None
    assert (watch.max_runner_artifacts, watch.reconcile_period) == (3, 90.0)
    assert not watch.manage_status and not watch.snake_case_parameters
    assert watch.watch_annotations_changes and watch.mark_unsafe
    assert watch.label_selector() == "tier=gold,zone in (a,b)"
    assert watch.finalizer.name == "example.com/cleanup" and watch.finalizer.vars == {"state": "absent"}
    assert watch.name == "thing.example.com" and watch.api_version == "example.com/v1"


@pytest.mark.parametrize("text, message", [
    ("- {group: g, kind: K, role: metal3.baremetal.ipam}", "entry 0 (K): version is required"),
    ("- {group: g, version: v1, role: metal3.baremetal.ipam}", "kind is required"),
    ("- {version: v1, kind: K}", "one of role or playbook is required"),
    ("- {version: v1, kind: K, role: metal3.baremetal.ipam, playbook: x.yml}", "mutually exclusive"),
    ("- {version: v1, kind: K, role: metal3.baremetal.nope}", "role metal3.baremetal.nope not found"),
    ("- {version: v1, kind: K, playbook: missing.yml}", "playbook missing.yml not found"),
    ("- {version: v1, kind: K, role: metal3.baremetal.ipam, reconcilPeriod: 1m}", "unknown field(s) reconcilPeriod"),
    ("- {version: v1, kind: K, role: metal3.baremetal.ipam, reconcilePeriod: soon}", "not a duration"),
    ("- {version: v1, kind: K, role: metal3.baremetal.ipam, maxRunnerArtifacts: 0}", "positive integer"),
    ("- {version: v1, kind: K, role: metal3.baremetal.ipam, manageStatus: 'no'}", "manageStatus must be true"),
    ("- {version: v1, kind: K, role: metal3.baremetal.ipam, finalizer: {vars: {}}}", "finalizer.name is required"),
    ("- {version: v1, kind: K, role: metal3.baremetal.ipam}\n- {version: v1, kind: K, role: metal3.baremetal.ipam}",
     "watched twice"),
    ("{version: v1}", "must be a list"),
    ("- [", "not valid YAML"),
])
def test_mistakes_are_named(tmp_path, text, message):
    with pytest.raises(WatchesError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load(write(tmp_path, text))


@pytest.mark.parametrize("value, seconds", [("10h", 36000), ("1m30s", 90), ("500ms", 0.5), ("0", 0), (15, 15)])
def test_durations_are_go_durations(value, seconds):
    assert parse_duration(value, "f") == seconds
