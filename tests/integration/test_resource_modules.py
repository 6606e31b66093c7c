"""metal3.baremetal.resource and resource_info through ansible-playbook, on both backends."""
from __future__ import annotations

import base64
from pathlib import Path

from tests.integration.playbook_runs import ansible_playbook

# Two documents in one file, one of them a Secret whose value must never be shown.
MANIFESTS = """\
apiVersion: ipam.metal3.io/v1alpha1
kind: IPPool
metadata:
  name: storage
  labels:
    network: storage
spec:
  namePrefix: storage
  pools:
    - subnet: 10.20.0.0/24
  prefix: 24
---
apiVersion: v1
kind: Secret
metadata:
  name: bmc-credentials
type: Opaque
stringData:
  username: admin
  password: correct-horse-battery-staple
"""


def test_resource_and_resource_info_in_a_playbook(store_options, namespace, tmp_path: Path):
    manifests = tmp_path / "manifests.yaml"
    manifests.write_text(MANIFESTS)
    run = ansible_playbook("resource.yml", {"store": store_options, "ns": namespace, "manifests": str(manifests)},
                           "-v")
    assert run.ok, run.output
    assert "correct-horse-battery-staple" not in run.output
    # resource_info returned it on purpose (the playbook decodes it), under no_log: not even base64 is printed
    assert base64.b64encode(b"correct-horse-battery-staple").decode() not in run.output
    assert "Traceback" not in run.output


def test_bad_input_fails_clearly_and_writes_nothing(store_options, namespace, tmp_path: Path):
    if store_options["backend"] == "kubernetes":
        unreachable = {"backend": "kubernetes", "host": "https://127.0.0.1:9", "api_key": "not-a-token",
                       "expect": "cannot reach the Kubernetes API at https://127.0.0.1:9"}
    else:
        blocker = tmp_path / "a-file"
        blocker.write_text("")
        unreachable = {"backend": "local", "store_path": str(blocker / "store.db"),
                       "expect": f"cannot open the local store {blocker}/store.db"}
    run = ansible_playbook("bad_input.yml", {"store": store_options, "ns": namespace, "unreachable": unreachable})
    assert run.ok, run.output
    assert "Traceback" not in run.output
