"""Two playbook runs at once, each making 5 machines against 10 hosts, 20 times: a host never gets two
consumers and a machine never gets two hosts."""
from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import HOST_ANNOTATION, INFRA_API
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.integration.playbook_runs import PLAYBOOKS, REPO

NS = "race"
ROUNDS = 20


def seed(path: Path) -> None:
    with LocalStore(str(path)) as store:
        store.create({"apiVersion": INFRA_API, "kind": "Metal3Cluster", "metadata": {"name": "race", "namespace": NS},
                      "spec": {"failureDomains": [{"name": "az-a", "controlPlane": True},
                                                  {"name": "az-b", "controlPlane": True}]}})
        store.create({"apiVersion": INFRA_API, "kind": "Metal3MachineTemplate",
                      "metadata": {"name": "race", "namespace": NS},
                      "spec": {"template": {"spec": {"image": {"url": "http://images.example/os.img",
                                                               "checksum": "http://images.example/os.img.sha256"},
                                                     "hostSelector": {"matchLabels": {"race": "yes"}}}}}})
        for i in range(10):
            host = store.create({"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
                                 "metadata": {"name": f"host-{i}", "namespace": NS, "labels": {
                                     "race": "yes",
                                     "infrastructure.cluster.x-k8s.io/failure-domain": f"az-{'ab'[i % 2]}"}},
                                 "spec": {"online": False}})
            store.update_status({**host, "status": {"provisioning": {"state": "available"}}})


def test_two_runs_racing_for_ten_hosts_never_share_one(tmp_path: Path):
    env = {"ANSIBLE_COLLECTIONS_PATH": str(REPO / "build" / "collections"), "ANSIBLE_PYTHON_INTERPRETER":
           sys.executable, "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
           "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"}
    for round_ in range(ROUNDS):
        path = tmp_path / f"round-{round_}.db"
        seed(path)
        runs = [subprocess.Popen([str(Path(sys.executable).parent / "ansible-playbook"),
                                  str(PLAYBOOKS / "machines_race.yml"), "-e", f"set=set-{side} ns={NS}"],
                                 env={**env, "METAL3_STORE_PATH": str(path)}, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True) for side in "ab"]
        for run in runs:
            output, _errors = run.communicate(timeout=300)
            assert run.returncode == 0, output
        with LocalStore(str(path)) as store:
            hosts = store.list("metal3.io/v1alpha1", "BareMetalHost", NS)
            machines = store.list(INFRA_API, "Metal3Machine", NS)
        consumers = [h["spec"]["consumerRef"]["name"] for h in hosts if h["spec"].get("consumerRef")]
        held = [(m["metadata"].get("annotations") or {}).get(HOST_ANNOTATION) for m in machines]
        assert len(machines) == 10 and len(consumers) == 10, (round_, consumers, held)
        assert not [c for c, n in Counter(consumers).items() if n > 1], round_  # no machine holds two hosts
        assert len(set(held)) == 10 and None not in held, round_  # no host has two machines
        for m in machines:  # and each machine's record agrees with the host's
            host = next(h for h in hosts if f"{NS}/{h['metadata']['name']}" == m["metadata"]["annotations"][
                HOST_ANNOTATION])
            assert host["spec"]["consumerRef"]["name"] == m["metadata"]["name"]
