"""watches.yaml: the Ansible Operator's schema and defaults, its verdict on every file, and a clear error for each
mistake.

ACCEPTED and REFUSED are the Ansible Operator's rules (``internal/ansible/watches/watches.go``, its testdata, and
what its ``run`` refuses when it starts), one rule a case, in a directory laid out by ``lay_out`` and read from
there. tests/operator/test_real_ansible_operator.py runs every case through the real ``ansible-operator`` too, so
this table is its verdict, not our reading of it.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.prefixes import (
    PREFIX_CLAIM_FINALIZER,
    PREFIX_POOL_FINALIZER,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack.common import (
    CLUSTER_FINALIZER,
    FIREWALL_FINALIZER,
    MACHINE_FINALIZER,
)
from metal3_operator.watches import WatchesError, load, parse_duration

REPO = Path(__file__).resolve().parents[2]
ROLE = "- name: Nothing\n  ansible.builtin.debug:\n    msg: reconciled\n"
PLAY = "- hosts: localhost\n  gather_facts: false\n  tasks: []\n"
ENV = {"WATCH_VERSION": "v2", "WATCH_ROLE": "probe"}


def lay_out(directory: Path) -> Path:
    """The working directory of a case: a role ``probe`` under roles/, a playbook site.yml; returns the
    watches file's path (the file is the case's)."""
    (directory / "roles" / "probe" / "tasks").mkdir(parents=True, exist_ok=True)
    (directory / "roles" / "probe" / "tasks" / "main.yml").write_text(ROLE)
    (directory / "site.yml").write_text(PLAY)
    return directory / "watches.yaml"


def entry(extra: str = "", kind: str = "Thing") -> str:
    return f"- {{version: v1, group: example.com, kind: {kind}, role: probe{', ' + extra if extra else ''}}}\n"


# (what, watches.yaml): files the Ansible Operator starts with.
ACCEPTED = [
    ("a role by name, from roles/ of the working directory", entry()),
    ("a role of an installed collection, by its FQCN",
     "- {version: v1, group: example.com, kind: Thing, role: metal3.baremetal.ipam_reconcile}"),
    ("a role by its path from the working directory", "- {version: v1, kind: Thing, role: roles/probe}"),
    ("a playbook, from the working directory", "- {version: v1, kind: Thing, playbook: site.yml}"),
    ("a playbook wins over a role, even a missing one", "- {version: v1, kind: Thing, role: nope, playbook: site.yml}"),
    ("no group: the core API group", "- {version: v1, kind: ConfigMap, role: probe}"),
    ("a version or a group written as a number is its text", "- {version: 1, group: 5, kind: Thing, role: probe}"),
    ("${VAR} is the environment's", "- {version: '${WATCH_VERSION}', kind: Thing, role: '${WATCH_ROLE}'}"),
    ("a finalizer naming a role", entry("finalizer: {name: example.com/cleanup, role: probe}")),
    ("a finalizer naming a playbook", entry("finalizer: {name: example.com/cleanup, playbook: site.yml}")),
    ("a finalizer with vars only: the watch's role runs with them",
     entry("finalizer: {name: example.com/cleanup, vars: {state: absent}}")),
    ("a finalizer with vars and a role that does not exist (the run fails, not the file)",
     entry("finalizer: {name: example.com/cleanup, role: nope, vars: {state: absent}}")),
    ("a finalizer with vars and a playbook that does not exist",
     entry("finalizer: {name: example.com/cleanup, playbook: missing.yml, vars: {state: absent}}")),
    ("finalizer: null is no finalizer", entry("finalizer: null")),
    ("unknown keys are ignored", entry("maxWorkers: 5, ansibleVerbosity: 5, watches: invalid")),
    ("keys match whatever their case",
     entry("ReconcilePeriod: 5s, MANAGESTATUS: false, Vars: {a: 1}, selector: {matchlabels: {tier: gold}}")),
    ("null is the default of an optional key",
     entry("group: null, vars: null, manageStatus: null, reconcilePeriod: null, maxRunnerArtifacts: null, "
           "selector: null, blacklist: null")),
    ("maxRunnerArtifacts: 0 is the default, fewer keeps every run's artifacts",
     entry("maxRunnerArtifacts: 0") + entry("maxRunnerArtifacts: -1", kind="Other")),
    ("reconcilePeriod in Go's units, signed or fractional",
     "".join(entry(f"reconcilePeriod: '{period}'", kind=f"K{i}")
             for i, period in enumerate(["1h30m", "1.5h", "300ms", "2us", "0s", "0", "-5s", ".5m"]))),
    ("YAML 1.1 booleans", entry("manageStatus: yes, markUnsafe: on, snakeCaseParameters: no, "
                                "watchAnnotationsChanges: off")),
    ("every boolean of the schema", entry("watchDependentResources: false, watchClusterScopedResources: true, "
                                          "watchAnnotationsChanges: true, markUnsafe: true, snakeCaseParameters: "
                                          "false, manageStatus: false")),
    ("a selector: labels (a number is its text) and each operator",
     entry("selector: {matchLabels: {tier: 1, example.com/zone: a}, matchExpressions: ["
           "{key: a, operator: In, values: [x, y]}, {key: b, operator: NotIn, values: [z]}, "
           "{key: c, operator: Exists}, {key: d, operator: DoesNotExist}]}")),
    ("a blacklist of kinds", entry("blacklist: [{group: example.com, version: v1, kind: Secret}]")),
    ("an empty file: nothing to watch", ""),
]

# (what, watches.yaml, what our error says): files the Ansible Operator refuses to start with.
REFUSED = [
    ("no version", "- {group: example.com, kind: Thing, role: probe}", "entry 0 (Thing): version is required"),
    ("no kind", "- {group: example.com, version: v1, role: probe}", "kind is required"),
    ("a version that is a mapping", "- {version: {v: 1}, kind: Thing, role: probe}", "version must be a string"),
    ("neither a role nor a playbook", "- {version: v1, kind: Thing}", "one of role or playbook is required"),
    ("a role that does not exist", entry().replace("probe", "nope"), "role nope not found"),
    ("a collection's role not installed", "- {version: v1, kind: Thing, role: nameSpace.collection.someRole}",
     "role nameSpace.collection.someRole not found"),
    ("a playbook that does not exist", "- {version: v1, kind: Thing, playbook: missing.yml}",
     "playbook missing.yml not found"),
    ("a playbook that does not exist, with a role that does",
     "- {version: v1, kind: Thing, role: probe, playbook: invalid/playbook.yaml}",
     "playbook invalid/playbook.yaml not found"),
    ("a finalizer without a name", entry("finalizer: {vars: {state: absent}}"), "finalizer.name is required"),
    ("a finalizer whose name is empty", entry("finalizer: {name: null, role: probe}"), "finalizer.name is required"),
    ("a finalizer with only a name", entry("finalizer: {name: example.com/cleanup}"),
     "finalizer needs a role, a playbook or vars"),
    ("a finalizer with a name and empty vars", entry("finalizer: {name: example.com/cleanup, vars: {}}"),
     "finalizer needs a role, a playbook or vars"),
    ("a finalizer whose role does not exist, without vars", entry("finalizer: {name: f, role: ansible/role}"),
     "finalizer role ansible/role not found"),
    ("a finalizer whose playbook does not exist, without vars", entry("finalizer: {name: f, playbook: x.yml}"),
     "finalizer playbook x.yml not found"),
    ("the same kind twice", entry() + entry(), "Thing.example.com/v1 is watched twice"),
    ("a reconcilePeriod that is no duration", entry("reconcilePeriod: invalid"), "not a duration"),
    ("a reconcilePeriod in days", entry("reconcilePeriod: 1d"), "not a duration"),
    ("a reconcilePeriod written as a number", entry("reconcilePeriod: 15"), "reconcilePeriod must be a duration"),
    ("maxRunnerArtifacts written as text", entry("maxRunnerArtifacts: '5'"), "maxRunnerArtifacts must be an integer"),
    ("a boolean written as text", entry("manageStatus: 'yes'"), "manageStatus must be true or false"),
    ("a boolean written as a number", entry("markUnsafe: 1"), "markUnsafe must be true or false"),
    ("vars that are not a mapping", entry("vars: [1]"), "vars must be a mapping"),
    ("a blacklist that is not a list", entry("blacklist: {a: 1}"), "blacklist must be a list"),
    ("a selector operator that is none", entry("selector: {matchExpressions: [{key: a, operator: Bogus, "
                                               "values: [x]}]}"), "'Bogus' is not one of"),
    ("In without values", entry("selector: {matchExpressions: [{key: a, operator: In}]}"),
     "values: must not be empty for In"),
    ("Exists with values", entry("selector: {matchExpressions: [{key: a, operator: Exists, values: [x]}]}"),
     "values: must be empty for Exists"),
    ("a label key that is none", entry("selector: {matchLabels: {'bad key!': x}}"), "'bad key!' is not a label key"),
    ("a label value that is none", entry("selector: {matchLabels: {tier: 'gold!'}}"),
     "'gold!' is not a label value"),
    ("a file that is not a list", "version: v1\nkind: Thing\nrole: probe\n", "must be a list of watches"),
    ("a file that is not YAML", "- version: v1\n  kind: [Thing\n", "not valid YAML"),
    ("an entry that is not a mapping", "- invalid file layout\n", "entry 0: must be a mapping"),
]


@pytest.fixture
def cwd(tmp_path, monkeypatch) -> Path:
    """A case's directory, as the working directory (the Ansible Operator resolves roles and playbooks there)."""
    monkeypatch.setenv("ANSIBLE_COLLECTIONS_PATH", str(REPO / "build" / "collections"))
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("ANSIBLE_ROLES_PATH", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(directory: Path, text: str) -> Path:
    path = lay_out(directory)
    path.write_text(text)
    return path


@pytest.mark.parametrize("text", [text for _what, text in ACCEPTED], ids=[what for what, _text in ACCEPTED])
def test_what_the_ansible_operator_accepts_is_accepted(cwd, text):
    load(write(cwd, text))


@pytest.mark.parametrize("text, message", [(text, message) for _what, text, message in REFUSED],
                         ids=[what for what, _text, _message in REFUSED])
def test_what_the_ansible_operator_refuses_is_refused_naming_the_mistake(cwd, text, message):
    with pytest.raises(WatchesError) as refused:
        load(write(cwd, text))
    assert message in str(refused.value)


def test_a_file_that_does_not_exist_is_refused(tmp_path):
    with pytest.raises(WatchesError, match="cannot read"):
        load(tmp_path / "watches.yaml")


def test_the_shipped_watches_load_with_the_ansible_operators_defaults(cwd):
    watches = {w.kind: w for w in load(REPO / "operator" / "watches.yaml")}
    assert set(watches) == {"IPPool", "IPClaim", "IPAddressClaim", "IPPrefixPool", "IPPrefixClaim", "BareMetalHost",
                            "HostClaim", "Metal3Cluster", "Metal3Machine", "Metal3Remediation", "Metal3DataClaim",
                            "Metal3Data", "MetalStackCluster", "MetalStackMachine", "MetalStackFirewall",
                            "HostFirmwareSettings", "HostFirmwareComponents", "DataImage",
                            "PreprovisioningImage"}
    claim = watches["IPClaim"]
    assert (claim.group, claim.version, claim.role) == ("ipam.metal3.io", "v1alpha1",
                                                        "metal3.baremetal.ipam_reconcile")
    assert claim.vars == {"ipam_reconcile_kind": "IPClaim"}
    assert (claim.finalizer.name, claim.finalizer.role) == ("ipclaim.ipam.metal3.io", "metal3.baremetal.ipam_reconcile")
    assert claim.max_runner_artifacts == 20 and claim.manage_status and claim.snake_case_parameters
    # No reconcilePeriod: the --reconcile-period flag's, in both operators.
    assert all(w.reconcile_period is None for w in watches.values())
    assert all(w.mark_unsafe for w in watches.values())
    # Each kind's finalizer names its role; a host's firmware kinds have none, as upstream's: the host owns them.
    firmware = {"HostFirmwareSettings", "HostFirmwareComponents"}
    assert all(w.finalizer.role == w.role for w in watches.values() if w.kind not in firmware)
    assert all(watches[kind].finalizer is None and watches[kind].role == "metal3.baremetal.firmware"
               and watches[kind].vars == {"firmware_kind": kind} for kind in firmware)
    # The metal-stack kinds at the one version each serves, with the finalizers the engine puts on them (the
    # provider's); the kind is the watch's.
    for kind, version, finalizer in (("MetalStackCluster", "v1alpha3", CLUSTER_FINALIZER),
                                     ("MetalStackMachine", "v1alpha3", MACHINE_FINALIZER),
                                     ("MetalStackFirewall", "v1alpha4", FIREWALL_FINALIZER)):
        watch = watches[kind]
        assert (watch.group, watch.version, watch.role) == ("infrastructure.cluster.x-k8s.io", version,
                                                            "metal3.baremetal.metalstack")
        assert watch.vars == {"metalstack_kind": kind}
        assert watch.finalizer.name == finalizer
    # A host's PreprovisioningImage, with the finalizer of upstream's image controller (the host puts its own).
    image = watches["PreprovisioningImage"]
    assert (image.group, image.version, image.role, image.finalizer.name) == (
        "metal3.io", "v1alpha1", "metal3.baremetal.preprovisioning_image", "preprovisioningimage.metal3.io")
    for kind, finalizer in (("IPPrefixPool", PREFIX_POOL_FINALIZER), ("IPPrefixClaim", PREFIX_CLAIM_FINALIZER)):
        assert watches[kind].vars == {"ipam_reconcile_kind": kind} and watches[kind].finalizer.name == finalizer


def test_every_key_of_the_schema_is_read(cwd, monkeypatch):
    monkeypatch.setenv("PERIOD", "90s")
    watch, = load(write(cwd, """
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
    assert watch.playbook == str(cwd / "site.yml") and watch.role is None
    assert (watch.max_runner_artifacts, watch.reconcile_period) == (3, 90.0)
    assert not watch.manage_status and not watch.snake_case_parameters
    assert watch.watch_annotations_changes and watch.mark_unsafe
    assert watch.label_selector() == "tier=gold,zone in (a,b)"
    assert watch.finalizer.name == "example.com/cleanup" and watch.finalizer.vars == {"state": "absent"}
    assert watch.finalizer.role is None and watch.finalizer.playbook is None  # the watch's playbook runs
    assert watch.name == "thing.example.com" and watch.api_version == "example.com/v1"


def test_keys_in_another_case_and_nulls_read_as_the_ansible_operator_reads_them(cwd, caplog):
    text = (entry("ReconcilePeriod: 5s, MANAGESTATUS: false, maxWorkers: 5, "
                  "selector: {matchlabels: {tier: 1}}, maxRunnerArtifacts: 0")
            + entry("manageStatus: null, maxRunnerArtifacts: -1, finalizer: null", kind="Other"))
    first, second = load(write(cwd, text))
    assert (first.reconcile_period, first.manage_status, first.max_runner_artifacts) == (5.0, False, 20)
    assert first.label_selector() == "tier=1"
    assert "ignoring unknown field(s) maxWorkers" in caplog.text
    assert (second.manage_status, second.max_runner_artifacts, second.finalizer) == (True, -1, None)


def test_a_role_is_kept_by_fqcn_when_a_collection_has_it_and_by_path_otherwise(cwd):
    fqcn, by_name, by_path = load(write(cwd, "- {version: v1, kind: A, role: metal3.baremetal.ipam_reconcile}\n"
                                             "- {version: v1, kind: B, role: probe}\n"
                                             "- {version: v1, kind: C, role: roles/probe}\n"))
    assert fqcn.role == "metal3.baremetal.ipam_reconcile"
    assert by_name.role == by_path.role == str(cwd / "roles" / "probe")


def test_a_playbook_beside_the_watches_file_is_found_from_elsewhere(tmp_path, monkeypatch):
    path = write(tmp_path, "- {version: v1, kind: Thing, playbook: site.yml}")
    monkeypatch.chdir(REPO)
    watch, = load(path)
    assert watch.playbook == str(tmp_path / "site.yml")


@pytest.mark.parametrize("value, seconds", [("10h", 36000), ("1m30s", 90), ("500ms", 0.5), ("0", 0), (15, 15),
                                            ("1.5h", 5400), (".5m", 30), ("-5s", -5), ("+2s", 2), ("3us", 3e-6),
                                            ("0s", 0)])
def test_durations_are_go_durations(value, seconds):
    assert parse_duration(value, "f") == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["soon", "1d", "", "s", "1.2.3s", "5 s", "-", "1h-5m"])
def test_what_is_no_go_duration_is_refused(value):
    with pytest.raises(WatchesError, match="not a duration"):
        parse_duration(value, "f")
