"""Every module through its own AnsibleModule path, as Ansible runs a module that no action plugin shadows: a new
Python process, ``python -m <module>``, its arguments as ``{"ANSIBLE_MODULE_ARGS": ...}`` on stdin, its result as
JSON on stdout. The action plugins run the same SPEC on the controller, so playbooks never reach ``main()``.

One meaningful case per module, on the local store; a module that needs Ironic fails cleanly without one.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store

REPO = Path(__file__).resolve().parents[2]
MODULES = REPO / "plugins" / "modules"
PACKAGE = "ansible_collections.metal3.baremetal.plugins.modules"
NS = "direct"
INFRA = "infrastructure.cluster.x-k8s.io/v1beta2"
IPAM = "ipam.metal3.io/v1alpha1"
CLOSED_PORT_URL = "http://127.0.0.1:9"  # discard: nothing answers there


@dataclass
class Outcome:
    rc: int
    result: dict[str, Any]
    stderr: str


def run_module(name: str, args: dict[str, Any]) -> Outcome:
    collections = REPO / "build" / "collections"
    stdin = json.dumps({"ANSIBLE_MODULE_ARGS": args})
    completed = subprocess.run([sys.executable, "-m", f"{PACKAGE}.{name}"], input=stdin, capture_output=True,
                               text=True, timeout=120, check=False, cwd=REPO,
                               env={**os.environ, "PYTHONPATH": os.pathsep.join([str(collections), *sys.path])})
    try:
        result = json.loads(completed.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"{name}: no JSON result (rc {completed.returncode}):\n{completed.stdout}\n{completed.stderr}")
    return Outcome(completed.returncode, result, completed.stderr)


def seed(store_path: str) -> None:
    """What the cases read: a pool, a cluster with a control-plane endpoint, a machine template, a machine, a data
    claim of a template that does not exist, a Metal3Remediation no Machine owns, a host (not available) and its
    BMC credentials, a HostClaim (no HostDeployPolicy admits its namespace), a MetalStackCluster whose partition has
    no super-network."""
    with open_store({"backend": "local", "store_path": store_path}) as store:
        store.create({"apiVersion": IPAM, "kind": "IPPool", "metadata": {"name": "mgmt", "namespace": NS},
                      "spec": {"namePrefix": "mgmt", "pools": [{"start": "10.0.0.10", "end": "10.0.0.20"}],
                               "prefix": 24, "gateway": "10.0.0.1", "dnsServers": ["10.0.0.53"]}})
        store.create({"apiVersion": INFRA, "kind": "Metal3Cluster", "metadata": {"name": "c", "namespace": NS},
                      "spec": {"controlPlaneEndpoint": {"host": "192.168.111.249", "port": 6443}}})
        store.create({"apiVersion": INFRA, "kind": "Metal3MachineTemplate",
                      "metadata": {"name": "workers", "namespace": NS},
                      "spec": {"template": {"spec": {"image": {"url": "http://images/os.qcow2",
                                                               "checksum": "http://images/os.qcow2.sha256sum"}}}}})
        store.create({"apiVersion": INFRA, "kind": "Metal3Machine", "metadata": {"name": "m-0", "namespace": NS},
                      "spec": {"image": {"url": "http://images/os.qcow2",
                                         "checksum": "http://images/os.qcow2.sha256sum"}}})
        store.create({"apiVersion": INFRA, "kind": "Metal3Remediation", "metadata": {"name": "m-0", "namespace": NS},
                      "spec": {"strategy": {"type": "Reboot", "retryLimit": 1, "timeoutSeconds": 300}}})
        store.create({"apiVersion": INFRA, "kind": "Metal3DataClaim", "metadata": {"name": "dc", "namespace": NS},
                      "spec": {"template": {"name": "no-such-template"}}})
        store.create({"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
                      "metadata": {"name": "host-0", "namespace": NS},
                      "spec": {"online": False, "bootMACAddress": "52:54:00:00:00:01",
                               "bmc": {"address": "ipmi://192.168.111.1:6230", "credentialsName": "bmc"}}})
        store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bmc", "namespace": NS},
                      "stringData": {"username": "admin", "password": "password"}})
        store.create({"apiVersion": "metal3.io/v1alpha1", "kind": "HostClaim",
                      "metadata": {"name": "web-0", "namespace": NS},
                      "spec": {"poweredOn": True, "image": {"url": "http://images/os.qcow2",
                                                            "checksum": "http://images/os.qcow2.sha256sum"}}})
        store.create({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha3", "kind": "MetalStackCluster",
                      "metadata": {"name": "ms", "namespace": NS},
                      "spec": {"partition": "rack-1", "controlPlaneEndpoint": {"host": "203.0.113.9", "port": 6443}}})


@dataclass
class Case:
    module: str
    args: dict[str, Any]
    expect: Callable[[dict[str, Any]], bool]
    failed: bool = False  # the module fails (cleanly: a message, no traceback)
    store: bool = True  # the module takes the store options
    files: dict[str, str] = field(default_factory=dict)  # path option -> file name under tmp_path


CASES = [
    Case("ip_claim", {"name": "node-0", "namespace": NS, "pool": "mgmt"},
         lambda r: r["changed"] and r["allocated"] and (r["address"], r["prefix"], r["gateway"], r["dns_servers"])
         == ("10.0.0.10", 24, "10.0.0.1", ["10.0.0.53"])),
    Case("ip_pool", {"name": "mgmt", "namespace": NS},
         lambda r: r["pool"]["metadata"]["name"] == "mgmt" and r["allocations"] == {}),
    Case("ipam_reconcile", {"kind": "IPPool", "name": "mgmt", "namespace": NS},
         lambda r: r["ready"] and r["requeue_after"] is None and r["object"]["metadata"]["name"] == "mgmt"),
    Case("metal3cluster", {"name": "c", "namespace": NS},
         lambda r: r["changed"] and r["ready"] and r["cluster"]["status"]["initialization"] == {"provisioned": True}),
    Case("metal3data", {"kind": "Metal3DataClaim", "name": "dc", "namespace": NS},
         lambda r: not r["ready"] and r["requeue_after"] > 0
         and r["message"] == f"Metal3DataTemplate {NS}/no-such-template not found"),
    Case("machines", {"name": "workers", "namespace": NS, "cluster": "c", "template": "workers", "replicas": 2},
         lambda r: r["changed"] and [m["name"] for m in r["machines"]] == ["workers-0", "workers-1"]),
    Case("metal3machine", {"name": "m-0", "namespace": NS},
         lambda r: r["changed"] and [(m["name"], m["phase"], m["message"]) for m in r["machines"]]
         == [("m-0", "pending", "no host: no available host matches")]
         and r["machines"][0]["waits_on"] == [{"api_version": "metal3.io/v1alpha1", "kind": "BareMetalHost",
                                               "namespace": NS, "name": ""}]),
    Case("metal3remediation", {"name": "m-0", "namespace": NS},  # made by hand: owned by no Machine
         lambda r: not r["changed"] and r["phase"] == "" and r["requeue_after"] == 5.0
         and r["message"] == f"Metal3Remediation {NS}/m-0: no owner Machine (a MachineHealthCheck makes it owned "
         "by the Machine it remediates)"),
    Case("hostclaim", {"name": "web-0", "namespace": NS},
         lambda r: r["changed"] and [(c["name"], c["phase"], c["host"], c["message"]) for c in r["claims"]]
         == [("web-0", "pending", "", f"no HostDeployPolicy admits namespace {NS}")]),
    Case("machine_type", {"name": "small", "namespace": NS,
                          "definition": {"apiVersion": "metal3.io/v1alpha1", "kind": "MachineType",
                                         "metadata": {"name": "small"},
                                         "spec": {"constraints": [{"type": "cores", "min": 2}]}}},
         lambda r: r["changed"] and r["hosts"] == [] and r["ready"]),  # host-0 is not inspected
    # STORE_PATH: the seeded store's path, filled in by the test. The seed has a Metal3Cluster but no Cluster c.
    Case("move", {"cluster": "absent", "namespace": NS, "source": {"backend": "local", "store_path": "STORE_PATH"},
                  "target": {"backend": "local", "store_path": "STORE_PATH-target"}},
         lambda r: r["msg"] == f"Cluster {NS}/absent: not found in the source (nor moved to the target)", failed=True,
         store=False),
    Case("metalstack", {"kind": "MetalStackCluster", "name": "ms", "namespace": NS},
         lambda r: r["changed"] and [(o["name"], o["ready"], o["message"]) for o in r["objects"]]
         == [("ms", False, f"no IPPrefixPool of partition rack-1 (nor one without a partition) in namespace {NS}")]),
    Case("resource", {"definition": {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "cm", "namespace": NS}, "data": {"k": "v"}}},
         lambda r: r["changed"] and r["result"]["data"] == {"k": "v"}),
    Case("resource_info", {"api_version": IPAM, "kind": "IPPool", "namespace": NS},
         lambda r: [p["metadata"]["name"] for p in r["resources"]] == ["mgmt"]),
    Case("baremetal_host", {"name": "host-0", "namespace": NS, "ironic_url": CLOSED_PORT_URL, "ironic_timeout": 2},
         lambda r: "Ironic at http://127.0.0.1:9 did not answer" in r["msg"], failed=True),
    Case("firmware", {"namespace": NS, "settings": {"ProcTurboMode": "Disabled"}},
         lambda r: r["msg"] == "settings: only with name (the host whose settings they are)", failed=True),
    Case("data_image", {"name": "host-0", "namespace": NS, "url": "http://127.0.0.1:8080/data.iso"},
         lambda r: r["changed"] and r["data_image"]["error_message"].startswith(
             "spec.url: 'http://127.0.0.1:8080/data.iso' names a loopback")),
    Case("preprovisioning_image", {"name": "host-0", "namespace": NS},  # host-0 asked for none
         lambda r: not r["changed"] and r["images"] == [] and r["message"].endswith("/host-0: not found")),
    Case("timeline", {"namespace": NS}, lambda r: r["changed"] and [h["name"] for h in r["hosts"]] == ["host-0"],
         files={"path": "timeline.svg"}),
    Case("table", {"columns": ["HOST", "STATE"], "rows": [["host-0", None]]},
         lambda r: r["lines"] == ["HOST    STATE", "host-0  -"], store=False),
    Case("requeue_after", {"time": 90}, lambda r: r["period"] == "90s", store=False),
    Case("htpasswd", {"path": "htpasswd", "name": "ironic", "password": "secret"},
         lambda r: r["changed"], store=False, files={"path": "htpasswd"}),
    Case("daemon", {"state": "stopped", "pid_file": "daemon.pid"},
         lambda r: not r["changed"] and "pid" not in r, store=False, files={"pid_file": "daemon.pid"}),
]


def test_every_module_has_a_case():
    assert sorted(case.module for case in CASES) == sorted(p.stem for p in MODULES.glob("*.py"))


@pytest.mark.parametrize("case", CASES, ids=[case.module for case in CASES])
def test_a_module_runs_through_its_ansible_module_path(case: Case, tmp_path: Path):
    store_path = str(tmp_path / "store.db")
    seed(store_path)
    args = json.loads(json.dumps(case.args).replace("STORE_PATH", store_path))
    args.update({option: str(tmp_path / name) for option, name in case.files.items()})
    if case.store:
        args.update(backend="local", store_path=store_path)
    outcome = run_module(case.module, args)
    assert "Traceback" not in outcome.stderr + json.dumps(outcome.result), outcome
    assert bool(outcome.result.get("failed")) == case.failed, outcome
    assert outcome.rc == (1 if case.failed else 0), outcome
    assert case.expect(outcome.result), outcome.result
