"""Traversal and alias bombs through the modules, as a user's playbook meets them, on both backends (issue 12)."""
from __future__ import annotations

from pathlib import Path

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from tests.integration.playbook_runs import ansible_playbook
from tests.unit.module_utils.test_resources import laughs


def test_traversal_and_alias_bombs_are_refused_through_the_modules(
        store, store_options, namespace, backend, request, tmp_path: Path):
    other = request.getfixturevalue("kube_cluster").new_namespace("other") if backend == "kubernetes" else "other"
    store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "prod-bmc", "namespace": other},
                  "stringData": {"password": "other-password"}})
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(laughs())
    run = ansible_playbook("traversal.yml", {"store": store_options, "ns": namespace, "other": other,
                                             "bomb": str(bomb)})
    assert run.ok, run.output
    assert "Traceback" not in run.output
    assert "other-password" not in run.output
    assert store.list("metal3.io/v1alpha1", "BareMetalHost", namespace) == []
    assert store.get(Ref("v1", "Secret", "prod-bmc", other))
