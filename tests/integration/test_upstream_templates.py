"""Whole upstream cluster templates apply through the resource module, on both backends (issue 13 §3).

CAPM3's clusterctl template and e2e templates (tests/fixtures/upstream-templates/, each naming the upstream file
it mirrors) hold, beside CAPM3's own kinds, Namespace, KubeadmControlPlane(Template), KubeadmConfigTemplate,
ClusterClass, MachineDeployment, MachineHealthCheck, ClusterResourceSet, ConfigMap and IPPool documents, at
Cluster API v1beta1 or v1beta2 and CAPM3 v1beta1 or v1beta2. Each file applies whole: in check mode nothing is
written (a Kubernetes API server cannot dry-run into the namespace the file creates; the store is not asked to),
then every document is stored as given, and a second apply changes nothing.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref, merge_patch
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import cluster_scoped, load_definitions
from tests.integration.playbook_runs import REPO, ansible_playbook

TEMPLATES = sorted((REPO / "tests" / "fixtures" / "upstream-templates").glob("*.yaml"))


def contains(stored: Any, given: Any, path: str = "") -> None:
    """Every field ``given`` has is in ``stored`` with its value (the store may add defaults and its own fields)."""
    if isinstance(given, dict):
        assert isinstance(stored, dict), f"{path}: {stored!r} is not a mapping"
        for key, value in given.items():
            assert key in stored, f"{path}.{key} was not stored"
            contains(stored[key], value, f"{path}.{key}")
    elif isinstance(given, list):
        assert isinstance(stored, list) and len(stored) == len(given), f"{path}: {stored!r} is not {given!r}"
        for i, (item_stored, item_given) in enumerate(zip(stored, given, strict=True)):
            contains(item_stored, item_given, f"{path}[{i}]")
    else:
        assert stored == given, f"{path}: {stored!r} was stored for {given!r}"


def test_the_templates_cover_both_versions_of_cluster_api_and_capm3():
    api_versions = {doc["apiVersion"] for template in TEMPLATES for doc in load_definitions(src=str(template))}
    for group in ("cluster.x-k8s.io", "controlplane.cluster.x-k8s.io", "bootstrap.cluster.x-k8s.io",
                  "addons.cluster.x-k8s.io", "infrastructure.cluster.x-k8s.io"):
        assert {f"{group}/v1beta1", f"{group}/v1beta2"} <= api_versions, group
    kinds = {doc["kind"] for template in TEMPLATES for doc in load_definitions(src=str(template))}
    assert {"Namespace", "KubeadmControlPlane", "KubeadmControlPlaneTemplate", "KubeadmConfigTemplate", "ClusterClass",
            "MachineDeployment", "MachineHealthCheck", "ClusterResourceSet", "Metal3ClusterTemplate",
            "Metal3RemediationTemplate", "BareMetalHost"} <= kinds


@pytest.mark.parametrize("template", TEMPLATES, ids=[t.stem for t in TEMPLATES])
def test_a_whole_upstream_template_applies_as_given_and_again_unchanged(
        store_options, store, template: Path, tmp_path: Path):
    documents = load_definitions(src=str(template))
    namespace = next(d["metadata"]["name"] for d in documents if d["kind"] == "Namespace")
    results = tmp_path / "results.json"
    run = ansible_playbook("upstream_template.yml", {"store": store_options, "template": str(template),
                                                     "ns": namespace, "results": str(results)})
    assert run.ok, run.output
    outcome = json.loads(results.read_text())
    for step, method in (("checked", "create"), ("applied", "create"), ("again", "none")):
        assert [r["method"] for r in outcome[step]["results"]] == [method] * len(documents), step
    assert outcome["checked"]["changed"] and outcome["applied"]["changed"] and not outcome["again"]["changed"]
    for document in documents:
        metadata = document["metadata"]
        ref = Ref(document["apiVersion"], document["kind"], metadata["name"],
                  "default" if cluster_scoped(document) else metadata.get("namespace") or namespace)
        given = merge_patch({}, document)  # null is no value, as in a merge patch
        contains(store.get(ref), given, f"{document['kind']} {metadata['name']}")
