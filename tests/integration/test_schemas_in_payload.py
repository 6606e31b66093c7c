"""The CRD schemas reach a module run by AnsiballZ: ansible-playbook packs ``metal3.baremetal.resource`` with the
module_utils it imports (Python files only, never data files), runs it in a new Python process, and the local
store there refuses what the IPPool schema refuses, as the action plugin does on the controller."""
from __future__ import annotations

import base64
import io
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.integration.playbook_runs import Run, ansible_playbook

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ansiballz"
API = "ipam.metal3.io/v1alpha1"
NS = "payload"
SPEC = {"namePrefix": "p", "prefix": 24, "pools": [{"start": "10.0.0.10", "end": "10.0.0.20"}]}
# (case, the pool's spec, a substring of the message: "" for one the store takes)
CASES = [
    ("wrong-type", {**SPEC, "prefix": "abc"}, "spec.prefix: Invalid value: 'abc': must be of type integer"),
    ("unknown-field", {**SPEC, "mask": "255.255.255.0"}, 'strict decoding error: unknown field "spec.mask"'),
    ("valid", SPEC, ""),
]


def _pool(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "IPPool", "metadata": {"name": name, "namespace": NS}, "spec": spec}


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, dict[str, Any], Path, Path]:
    """The run, each case's result, the store, and where Ansible left the modules it ran."""
    tmp = tmp_path_factory.mktemp("payload")
    store, results, remote = tmp / "store.db", tmp / "results.json", tmp / "remote"
    tasks: list[dict[str, Any]] = [
        {"name": case, "through_ansiballz": {"module": "metal3.baremetal.resource", "args": {
            "backend": "local", "store_path": str(store), "definition": _pool(case, spec)}},
         "register": f"case_{i}", "ignore_errors": True}
        for i, (case, spec, _message) in enumerate(CASES)]
    every = "{" + ", ".join(f"'{case}': case_{i}" for i, (case, _spec, _message) in enumerate(CASES)) + "}"
    tasks.append({"name": "Write what each case returned", "ansible.builtin.copy": {
        "dest": str(results), "content": "{{ " + every + " | to_json }}", "mode": "0600"}})
    playbook = tmp / "playbook.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}],
                                       sort_keys=False))
    run = ansible_playbook(playbook, env={"ANSIBLE_ACTION_PLUGINS": str(FIXTURE / "action_plugins"),
                                          "ANSIBLE_KEEP_REMOTE_FILES": "1", "ANSIBLE_REMOTE_TMP": str(remote),
                                          "PYTHONPATH": ""})
    return run, json.loads(results.read_text()) if results.exists() else {}, store, remote


@pytest.mark.parametrize(("case", "message"), [(c[0], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_the_module_holds_the_schema(outcome, case, message):
    run, results, _store, _remote = outcome
    assert run.ok, run.output
    result = results[case]
    if message:
        assert result["failed"], result
        assert message in result["msg"], result["msg"]
        assert "Traceback" not in json.dumps(result)
    else:
        assert result["changed"] and not result.get("failed"), result


def test_only_the_valid_pool_is_stored(outcome):
    _run, _results, store, _remote = outcome
    with LocalStore(str(store)) as local:
        assert [p["metadata"]["name"] for p in local.list(API, "IPPool", NS)] == ["valid"]
        assert local.get(Ref(API, "IPPool", "valid", NS))["spec"] == SPEC


def test_the_schemas_travel_as_python_in_the_payload(outcome):
    """What Ansible ran: a payload holding api/crds.py (the schemas) and no file that is not Python."""
    _run, _results, _store, remote = outcome
    wrappers = sorted(remote.rglob("AnsiballZ_resource.py"))
    assert wrappers, f"no module kept under {remote}"
    encoded = re.search(r"^zip_data='([A-Za-z0-9+/=]+)'", wrappers[0].read_text(), re.M)
    assert encoded, "no zip_data in the AnsiballZ wrapper"
    names = zipfile.ZipFile(io.BytesIO(base64.b64decode(encoded.group(1)))).namelist()
    assert "ansible_collections/metal3/baremetal/plugins/module_utils/api/crds.py" in names
    assert not [n for n in names if not n.endswith(".py") and not n.endswith("/")], names
