"""The metal3.baremetal.metal3 inventory through the real ansible-inventory and ansible-playbook, on both backends,
over the demo's five machines provisioned on a real Ironic (fake-hardware): three control plane over az-a/az-b,
two workers, each under its cluster, failure-domain, role and state groups with its mgmt address as ansible_host.
The play on control_plane reads each machine's rendered network_data with the metal3.baremetal.resource lookup."""
from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import INFRA_API
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.machines import (
    MachineSet,
    converge,
    ensure_machines,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import reconcile_hosts
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import IronicOptions
from tests.harness.demo import demo_objects
from tests.integration.playbook_runs import ansible_inventory, ansible_playbook

CONTROL_PLANE = [f"my-cluster-controlplane-{i}" for i in range(3)]
WORKERS = [f"my-cluster-workers-{i}" for i in range(2)]

PLAY = """\
- name: The control plane only
  hosts: control_plane
  gather_facts: false
  connection: local
  tasks:
    - name: Where am I
      ansible.builtin.debug:
        msg: "{{ inventory_hostname }} at {{ ansible_host }} in {{ metal3_failure_domain }}"

    - name: My rendered network_data, read with the lookup (a Secret, on purpose)
      ansible.builtin.set_fact:
        network_data: "{{ (lookup('metal3.baremetal.resource', kind='Secret', namespace=metal3_namespace,
                                  resource_name=inventory_hostname ~ '-networkdata', **store)).data.networkData
                          | b64decode | from_yaml }}"
      no_log: true

    - name: It holds my address
      ansible.builtin.assert:
        that: ansible_host in (network_data.networks | map(attribute='ip_address'))
"""


def provision_the_demo(store_options: dict[str, str], ironic: Any, ns: str) -> None:
    """The demo's six hosts and cluster in ``ns``, its three control-plane machines and two workers made and
    provisioned on Ironic, as the demo's playbook does."""
    with open_store(store_options) as store:
        for obj in demo_objects(ns, 6):
            store.create(obj)
        hosts = [Ref.of(h) for h in store.list("metal3.io/v1alpha1", "BareMetalHost", ns)]
    options = IronicOptions(cloud=ironic.cloud)
    results = reconcile_hosts(lambda: open_store(store_options), options, hosts, ("settled",), 180)
    assert all(reached for _step, reached in results), [step.summary() for step, _r in results]
    with open_store(store_options) as store:
        for name, replicas, control_plane in (("my-cluster-controlplane", 3, True), ("my-cluster-workers", 2, False)):
            ensure_machines(store, MachineSet(name, ns, "my-cluster", name, replicas, control_plane,
                                              "my-cluster-userdata"))
    steps, ready = converge(lambda: open_store(store_options), options, ns, None, ("ready",), 300)
    assert ready, [s.summary() for s in steps]


def graph(text: str) -> dict[str, set[str]]:
    """``ansible-inventory --graph`` as {group: the hosts listed under it, at any depth}."""
    groups: dict[str, set[str]] = {}
    stack: list[tuple[int, str]] = []
    for line in text.splitlines():
        found = re.match(r"^([ |]*)--(@?)([^:\s]+):?$", line) or re.match(r"^(@)(all):$", line)
        if not found:
            continue
        depth = len(found.group(1)) if line.startswith(" ") or line.startswith("|") else 0
        is_group = bool(found.group(2)) if found.re.groups == 3 else True
        name = found.group(found.re.groups)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if is_group:
            groups.setdefault(name, set())
            stack.append((depth, name))
        else:
            for _depth, group in stack:
                groups[group].add(name)
    return groups


def write_source(tmp_path: Path, name: str, settings: dict[str, Any]) -> Path:
    path = tmp_path / f"{name}.metal3.yml"
    path.write_text(yaml.safe_dump({"plugin": "metal3.baremetal.metal3", **settings}))
    return path


def listed(source: Path) -> dict[str, Any]:
    """``ansible-inventory --list``, values as they are (ansible-core marks what an inventory plugin read as
    ``{"__ansible_unsafe": value}``: data from the store is never templated)."""
    run = ansible_inventory(source, "--list")
    assert run.ok and "Traceback" not in run.output, run.output
    return json.loads(run.output[run.output.index("{"):],
                      object_hook=lambda d: d["__ansible_unsafe"] if set(d) == {"__ansible_unsafe"} else d)


@pytest.fixture
def demo_store(backend: str, store_options: dict[str, str], ironic, monkeypatch, request) -> tuple[dict[str, str], str]:
    for key, value in ironic.env.items():
        monkeypatch.setenv(key, value)
    # A namespace of its own: the Ironic of this worker names its nodes <namespace>~<host>
    ns = request.getfixturevalue("kube_namespace") if backend == "kubernetes" else f"inv-{uuid.uuid4().hex[:8]}"
    provision_the_demo(store_options, ironic, ns)
    return store_options, ns


def test_inventory_groups_hosts_options_and_a_play_on_the_control_plane(demo_store, tmp_path: Path):
    store_options, ns = demo_store
    with open_store(store_options) as store:
        machines = {m["metadata"]["name"]: m for m in store.list(INFRA_API, "Metal3Machine", ns)}
    mgmt = {name: next(a["address"] for a in m["status"]["addresses"] if a["type"] == "InternalIP")
            for name, m in machines.items()}
    domain = {name: m["spec"]["failureDomain"] for name, m in machines.items()}
    base = write_source(tmp_path, "demo", {**store_options, "namespace": ns})

    # --graph: the five machines under their cluster, failure-domain, role and state groups
    run = ansible_inventory(base, "--graph")
    assert run.ok and "Traceback" not in run.output, run.output
    groups = graph(run.output)
    assert groups["cluster_my_cluster"] == set(CONTROL_PLANE + WORKERS), run.output
    assert groups["control_plane"] == set(CONTROL_PLANE) and groups["workers"] == set(WORKERS), run.output
    assert groups["state_provisioned"] == set(CONTROL_PLANE + WORKERS), run.output
    for zone in ("az_a", "az_b"):
        assert groups[f"failure_domain_{zone}"] == {n for n, d in domain.items() if d == zone.replace("_", "-")}
    assert sorted(domain[n] for n in CONTROL_PLANE) in (["az-a", "az-a", "az-b"], ["az-a", "az-b", "az-b"])

    # --list: ansible_host is each machine's mgmt address (its domain's pool), with the machine's facts
    hostvars = listed(base)["_meta"]["hostvars"]
    assert set(hostvars) == set(CONTROL_PLANE + WORKERS)
    for name, facts in hostvars.items():
        assert facts["ansible_host"] == mgmt[name]
        assert facts["ansible_host"].startswith("192.168.11." if domain[name] == "az-a" else "192.168.21.")
        assert facts["metal3_provider_id"] == f"metal3://{ns}/{facts['metal3_host'].split('/')[1]}/{name}"
        assert facts["metal3_cluster"] == "my-cluster" and facts["metal3_namespace"] == ns
        storage = facts["metal3_networks"][f"storage-{domain[name]}-pool"]
        assert storage.startswith("192.168.12." if domain[name] == "az-a" else "192.168.22.")
    assert len({f["metal3_host"] for f in hostvars.values()}) == 5

    # network, filter, compose, keyed_groups, groups
    shaped = write_source(tmp_path, "shaped", {
        **store_options, "namespace": ns, "network": ["storage-*"], "filter": "[?metal3_role=='worker']",
        "compose": {"ansible_user": "'debian'", "zone": "metal3_failure_domain | upper"},
        "keyed_groups": [{"key": "metal3_role", "prefix": "role"}],
        "groups": {"zone_a": "metal3_failure_domain == 'az-a'"}})
    inventory = listed(shaped)
    hostvars = inventory["_meta"]["hostvars"]
    assert set(hostvars) == set(WORKERS)
    for name, facts in hostvars.items():
        assert facts["ansible_host"] == facts["metal3_networks"][f"storage-{domain[name]}-pool"]
        assert facts["ansible_user"] == "debian" and facts["zone"] == domain[name].upper()
    assert set(inventory["role_worker"]["hosts"]) == set(WORKERS)
    assert set(inventory.get("zone_a", {}).get("hosts", [])) == {n for n in WORKERS if domain[n] == "az-a"}

    # A play limited to control_plane runs on exactly three, each reading its network_data through the lookup
    play = tmp_path / "control-plane.yml"
    play.write_text(PLAY)
    run = ansible_playbook(play, {"store": store_options}, "-i", str(base))
    assert run.ok, run.output
    recap = re.findall(r"^(\S+)\s+: ok=(\d+)\s+changed=0\s+unreachable=0\s+failed=0", run.output, re.M)
    assert sorted(recap) == sorted((name, "3") for name in CONTROL_PLANE), run.output
    with open_store(store_options) as store:
        secret = store.get(Ref("v1", "Secret", f"{CONTROL_PLANE[0]}-networkdata", ns))
    assert secret["data"]["networkData"] not in run.output  # read under no_log


def test_inventory_bad_options_fail_naming_the_option(backend: str, store_options: dict[str, str], namespace: str,
                                                      tmp_path: Path):
    with open_store(store_options) as store:  # one host that runs, so that a network can be missing
        store.create({"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
                      "metadata": {"name": "lonely", "namespace": namespace},
                      "spec": {"online": True, "externallyProvisioned": True, "bootMACAddress": "52:54:00:00:00:01"}})
        host = store.get(Ref("metal3.io/v1alpha1", "BareMetalHost", "lonely", namespace))
        host["status"] = {"provisioning": {"state": "externally provisioned"}, "hardware": {"hostname": "lonely"}}
        store.update_status(host)
    if backend == "kubernetes":
        unreachable = {"backend": "kubernetes", "host": "https://127.0.0.1:9", "api_key": "not-a-token"}
        unreachable_message = "cannot reach the Kubernetes API at https://127.0.0.1:9"
    else:
        blocker = tmp_path / "a-file"
        blocker.write_text("")
        unreachable = {"backend": "local", "store_path": str(blocker / "store.db")}
        unreachable_message = f"cannot open the local store {blocker}/store.db"
    good = {**store_options, "namespace": namespace}
    # (inventory settings, what the error says)
    cases = [
        ({**good, "network": ["nowhere"]}, "network: no host has an address on nowhere"),
        ({**good, "filter": "[?metal3_role=="}, "filter: not a JMESPath expression: '[?metal3_role=='"),
        ({**good, "filter": "[].metal3_name"}, "filter: must keep some of the hosts"),
        (unreachable, unreachable_message),
    ]
    for index, (settings, message) in enumerate(cases):
        source = write_source(tmp_path, f"bad-{index}", settings)
        run = ansible_inventory(source, "--list", env={"ANSIBLE_INVENTORY_UNPARSED_FAILED": "true"})
        assert not run.ok, run.output
        assert message in " ".join(run.output.split()), run.output
        assert "Traceback" not in run.output, run.output
    # the good one still reads: the lonely host, by name, with no address
    hostvars = listed(write_source(tmp_path, "good", good))["_meta"]["hostvars"]
    assert list(hostvars) == ["lonely"] and "ansible_host" not in hostvars["lonely"]
    assert hostvars["lonely"]["metal3_state"] == "externally provisioned"
