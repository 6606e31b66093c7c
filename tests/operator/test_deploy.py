"""The deployment: RBAC of least privilege covering what watches.yaml reconciles, and manifests the real
kube-apiserver accepts (server-side dry run)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes import client, utils
from kubernetes.client.exceptions import ApiException

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "operator" / "config"


def documents(*parts: str) -> list[dict]:
    return [doc for path in sorted((CONFIG.joinpath(*parts)).glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if doc]


def plurals() -> dict[tuple[str, str], str]:
    files = [*(REPO / "config" / "crd").glob("*.yaml"), *(REPO / "tests" / "fixtures" / "crd").glob("*.yaml")]
    return {(crd["spec"]["group"], crd["spec"]["names"]["kind"]): crd["spec"]["names"]["plural"]
            for path in files for crd in yaml.safe_load_all(path.read_text()) if crd}


def granted(rules: list[dict], group: str, resource: str) -> set[str]:
    return {verb for rule in rules if group in rule["apiGroups"] and resource in rule["resources"]
            for verb in rule["verbs"]}


CLUSTER_ROLE = next(d for d in documents("rbac") if d["kind"] == "ClusterRole")
WATCHED = [(w["group"], w["kind"]) for w in yaml.safe_load((REPO / "operator" / "watches.yaml").read_text())]


@pytest.mark.parametrize("group, kind", WATCHED)
def test_every_watched_kind_is_granted_what_a_reconcile_needs(group, kind):
    plural = plurals()[(group, kind)]
    rules = CLUSTER_ROLE["rules"]
    assert {"get", "list", "watch", "update", "patch"} <= granted(rules, group, plural)
    assert {"update", "patch"} <= granted(rules, group, f"{plural}/status")
    assert {"update", "patch"} <= granted(rules, group, f"{plural}/finalizers")


def test_no_wildcards_and_leases_only_in_the_operators_namespace():
    for doc in documents("rbac"):
        for rule in doc.get("rules", []):
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], rule
    assert not granted(CLUSTER_ROLE["rules"], "coordination.k8s.io", "leases")
    role = next(d for d in documents("rbac") if d["kind"] == "Role")
    assert role["metadata"]["namespace"] == "metal3-system"
    assert {"get", "create", "update"} <= granted(role["rules"], "coordination.k8s.io", "leases")


def test_the_deployment_runs_the_operator_as_the_service_account_with_probes():
    deployment = next(d for d in documents("manager") if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["serviceAccountName"] == next(d for d in documents("rbac")
                                             if d["kind"] == "ServiceAccount")["metadata"]["name"]
    assert "--leader-elect" in container["args"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    kustomization = yaml.safe_load((CONFIG / "kustomization.yaml").read_text())
    listed = {str((CONFIG / r).resolve()) for r in kustomization["resources"]}
    assert {str(p) for p in CONFIG.glob("*/*.yaml")} <= listed


@pytest.mark.kubernetes
def test_the_apiserver_accepts_every_manifest(kube_cluster):
    api = kube_cluster.api_client()
    objects = documents("manager") + documents("rbac")
    namespace = next(d for d in objects if d["kind"] == "Namespace")
    try:
        client.CoreV1Api(api).create_namespace(namespace)
    except ApiException as e:
        assert e.status == 409
    for obj in objects:
        if obj["kind"] == "Namespace":
            continue
        try:
            utils.create_from_dict(api, obj, dry_run="All")
        except utils.FailToCreateError as e:
            raise AssertionError(f"{obj['kind']} {obj['metadata']['name']}: {e}") from None
