"""Bad options through ansible-playbook: each task fails with a message naming the option or field, never a
Python error, and the store is left exactly as it was. One playbook runs every case (a run costs ~1 s)."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.harness.ironic import free_port
from tests.integration.playbook_runs import Run, ansible_playbook

NS = "test"
POOL_ENTRY = [{"start": "10.0.0.10", "end": "10.0.0.20"}]
EXISTING_POOL = {"apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPPool",
                 "metadata": {"name": "existing", "namespace": NS},
                 "spec": {"namePrefix": "existing", "prefix": 24, "pools": POOL_ENTRY}}

# (module, options, a substring of the message)
CASES: list[tuple[str, dict[str, Any], str]] = [
    ("ip_pool", {"name": "new", "spec": {"namePrefix": "p", "prefix": "abc", "pools": POOL_ENTRY}},
     "spec.prefix: Invalid value: 'abc': must be of type integer"),
    ("ip_pool", {"name": "new", "spec": {"namePrefix": "p", "pools": "x"}},
     "spec.pools: Invalid value: 'x': must be of type array"),
    ("ip_pool", {"name": "new", "spec": {"namePrefix": "p", "prefix": 24, "pools": POOL_ENTRY, "preAllocations": [1]}},
     "spec.preAllocations: Invalid value: [1]: must be of type object"),
    ("ip_pool", {"name": "existing", "spec": {"prefix": "abc"}},  # a partial spec, merged into the stored one
     "spec.prefix: Invalid value: 'abc': must be of type integer"),
    ("ip_pool", {"name": "existing", "spec": {"pools": [{"start": "10.0.0.10", "end": "10.0.0.20", "prefix": [24]}]}},
     "spec.pools[0].prefix: Invalid value: [24]: must be of type integer"),
    ("ip_pool", {"name": "new", "spec": {"namePrefix": "Pool_A", "prefix": 24, "pools": POOL_ENTRY}},
     "spec.namePrefix: Invalid value: 'Pool_A': makes IPAddress names such as 'Pool_A-255-255-255-255'"),
    ("ip_pool", {"name": "new", "spec": {"namePrefix": "p" * 240, "prefix": 24, "pools": POOL_ENTRY}},
     "too long: the IPAddress name of 255.255.255.255 would have 256 characters, more than 253"),
    # A gateway off its entry's network and a range beyond its prefix's network are upstream's to accept: they
    # are, with a warning (tests/unit/module_utils/ipam/test_pool_warnings.py).
    ("ip_pool", {"name": "nowhere"}, f"IPPool {NS}/nowhere does not exist and no spec was given"),
    ("ip_pool", {"name": "nowhere", "labels": {"a": "b"}}, f"IPPool {NS}/nowhere does not exist and no spec was given"),
    ("ip_claim", {"name": "c", "pool": "existing", "wait_timeout": -5},
     "wait_timeout: Invalid value: -5: must be greater than or equal to 0"),
    ("metal3.baremetal.htpasswd", {"path": "/nonexistent/htpasswd", "name": "a:b", "password": "secret"},
     "name: must be a non-empty user name without ':' or line breaks"),
    ("metal3.baremetal.htpasswd", {"path": "/nonexistent/htpasswd", "name": "metal3", "password": "x" * 73},
     "password: must be at most 72 bytes"),
    ("metal3.baremetal.htpasswd", {"path": "/nonexistent/htpasswd", "name": "metal3", "password": "secret", "cost": 3},
     "cost: must be from 4 to 17"),
    ("ip_claim", {"name": "c", "pool": "existing", "address": "10.0.0.300"},
     "address: Invalid value: '10.0.0.300': not an IP address"),
    ("baremetal_host", {"wait_for": "settled", "wait_timeout": -5},
     "wait_timeout: Invalid value: -5: must be greater than or equal to 0"),
    ("baremetal_host", {"concurrency": 0}, "concurrency: Invalid value: 0: must be greater than or equal to 1"),
    ("baremetal_host", {"name": "h", "provisioning_limit": -1},
     "provisioning_limit: Invalid value: -1: must be greater than or equal to 0"),
    ("baremetal_host", {"name": "h", "max_provisioning_retries": -1},
     "max_provisioning_retries: Invalid value: -1: must be greater than or equal to 0"),
    ("metal3machine", {"wait_for": "ready", "wait_timeout": -5},
     "wait_timeout: Invalid value: -5: must be greater than or equal to 0"),
    ("machines", {"name": "m", "cluster": "c", "template": "t", "replicas": -1},
     "replicas: Invalid value: -1: must be greater than or equal to 0"),
    ("resource", {"definition": {**EXISTING_POOL, "metadata": {"name": "other", "namespace": NS},
                                 "spec": {"namePrefix": "other", "prefix": "abc", "pools": POOL_ENTRY}}},
     "spec.prefix: Invalid value: 'abc': must be of type integer"),
    ("resource", {"definition": {**EXISTING_POOL, "spec": "x"}}, "spec: Invalid value: 'x': must be of type object"),
    ("resource_info", {"kind": "IPPool", "api_version": "ipam.metal3.io/v1alpha1", "backend": "kubernetes",
                       "kubeconfig": 5}, "kubeconfig: must be the path of a kubeconfig file or its content"),
    ("metal3.baremetal.daemon", {"command": ["sleep", "60"], "pid_file": "/nonexistent/d.pid",
                                 "log_file": "/nonexistent/d.log", "ports": [9], "wait_timeout": -5},
     "wait_timeout: Invalid value: -5: must be greater than or equal to 0"),
    # the filters, in a template
    ("ansible.builtin.debug", {"msg": "{{ 'abc' | metal3.baremetal.network_data({}) }}"},
     "networkData: must be a mapping"),
    ("ansible.builtin.debug", {"msg": "{{ {} | metal3.baremetal.network_data(['x']) }}"},
     "addresses: must be a mapping"),
    ("ansible.builtin.debug", {"msg": "{{ ['x'] | metal3.baremetal.meta_data(0, {}, {}, 'ns') }}"},
     "metaData: must be a mapping"),
    ("ansible.builtin.debug", {"msg": "{{ {} | metal3.baremetal.meta_data('abc', {}, {}, 'ns') }}"},
     "index: must be an integer"),
    ("ansible.builtin.debug", {"msg": "{{ {} | metal3.baremetal.meta_data(0, 'x', {}, 'ns') }}"},
     "objects: must be a mapping"),
]


def _store_rows(path: Path) -> list[str]:
    """Everything the SQLite file holds (the WAL included), as SQL."""
    with sqlite3.connect(path) as db:
        return list(db.iterdump())


def _playbook(store_path: Path, results: Path) -> list[dict[str, Any]]:
    tasks: list[dict[str, Any]] = []
    for i, (module, options, _message) in enumerate(CASES):
        name = module if "." in module else f"metal3.baremetal.{module}"
        args = dict(options) if "." in module else {"namespace": NS, **options}
        tasks.append({"name": f"case {i}", name: args, "register": f"case_{i}", "ignore_errors": True})
    every = "{" + ", ".join(f"'{i}': case_{i}" for i in range(len(CASES))) + "}"
    tasks.append({"name": "Write what each case returned", "ansible.builtin.copy": {
        "dest": str(results), "content": "{{ " + every + " | to_json }}", "mode": "0600"}})
    return [{"name": "Bad options", "hosts": "localhost", "gather_facts": False,
             "module_defaults": {"group/metal3.baremetal.all": {"backend": "local", "store_path": str(store_path)}},
             "tasks": tasks}]


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, dict[str, Any], list[str], list[str]]:
    """The run, each case's result, and the store's rows before and after."""
    tmp = tmp_path_factory.mktemp("module-errors")
    store_path = tmp / "store.db"
    with LocalStore(str(store_path)) as store:
        store.create(EXISTING_POOL)
    before = _store_rows(store_path)
    playbook, results = tmp / "playbook.yml", tmp / "results.json"
    playbook.write_text(yaml.safe_dump(_playbook(store_path, results), sort_keys=False))
    run = ansible_playbook(playbook)
    return run, json.loads(results.read_text()) if results.exists() else {}, before, _store_rows(store_path)


@pytest.mark.parametrize(("index", "module", "message"), [(i, c[0], c[2]) for i, c in enumerate(CASES)],
                         ids=[f"{i}-{c[0]}" for i, c in enumerate(CASES)])
def test_each_bad_option_fails_naming_it(outcome, index, module, message):
    run, results, _before, _after = outcome
    result = results.get(str(index))
    assert result is not None, run.output
    assert result.get("failed"), result
    assert message in result["msg"], result["msg"]
    # ansible-core registers "exception": "(traceback unavailable)" with any failure; an engine bug has one
    assert "internal error" not in result["msg"] and "Traceback" not in json.dumps(result), result


def test_no_traceback_and_nothing_written(outcome):
    run, _results, before, after = outcome
    assert run.ok, run.output
    assert "Traceback" not in run.output and "internal error" not in run.output
    assert after == before


def test_a_bmc_address_that_cannot_be_read_is_a_registration_error_recorded_once(tmp_path: Path):
    """Not a Python error, not retried with backoff: the host's status says what is wrong until the spec changes.
    Ironic is never asked (its address here answers nothing): an unreadable address stops before any call."""
    store_path = tmp_path / "store.db"
    with LocalStore(str(store_path)) as store:
        store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "h-bmc", "namespace": NS},
                      "stringData": {"username": "admin", "password": "pw"}})
        store.create({"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
                      "metadata": {"name": "h", "namespace": NS},
                      "spec": {"online": False, "bmc": {"address": "ipmi://[::1", "credentialsName": "h-bmc"}}})
    playbook = tmp_path / "host.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [{
        "metal3.baremetal.baremetal_host": {"name": "h", "namespace": NS, "wait_for": "settled", "wait_timeout": 60,
                                            "backend": "local", "store_path": str(store_path),
                                            "ironic_url": f"http://127.0.0.1:{free_port()}"},
        "register": "step", "ignore_errors": True}, {"ansible.builtin.copy": {
            "dest": str(tmp_path / "step.json"), "content": "{{ step | to_json }}", "mode": "0600"}}]}]))
    for _attempt in range(2):  # the second run finds the error recorded and leaves it as it is
        run = ansible_playbook(playbook)
        assert run.ok and "Traceback" not in run.output, run.output
        step = json.loads((tmp_path / "step.json").read_text())
        assert step["failed"] and "registration error: spec.bmc.address: Invalid value: 'ipmi://[::1'" in step["msg"]
    with LocalStore(str(store_path)) as store:
        status = store.get(Ref("metal3.io/v1alpha1", "BareMetalHost", "h", NS))["status"]
    assert status["errorType"] == "registration error"
    assert status["errorMessage"].startswith("spec.bmc.address: Invalid value: 'ipmi://[::1': not a URL")
    assert status["errorCount"] == 1 and status["operationalStatus"] == "error"
