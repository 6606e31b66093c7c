"""The deployment: RBAC of least privilege covering what watches.yaml reconciles, and manifests the real
kube-apiserver accepts (server-side dry run) - cluster-wide (operator/config) and namespaced
(operator/config/namespaced)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, dynamic, utils
from kubernetes.client.exceptions import ApiException

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "operator" / "config"
WATCHED_NAMESPACE = "metal3"  # the namespace operator/config/namespaced watches


def documents(*parts: str) -> list[dict]:
    return [doc for path in sorted((CONFIG.joinpath(*parts)).glob("*.yaml")) if path.name != "kustomization.yaml"
            for doc in yaml.safe_load_all(path.read_text()) if doc]


def kustomize(directory: Path, files: set[Path] | None = None) -> list[dict]:
    """The objects ``kubectl kustomize directory`` builds, for the part of kustomize operator/config uses:
    resources (files, or directories with a kustomization) and strategic-merge patches (lists of named items
    merged by name, ``$patch: delete``). Anything else fails here rather than build differently. The manifest
    files read are added to ``files``."""
    path = next(p for p in (directory / "kustomization.yaml", directory / "kustomization.yml") if p.exists())
    kustomization = yaml.safe_load(path.read_text())
    assert set(kustomization) <= {"apiVersion", "kind", "resources", "patches"}, f"{path}: {kustomization}"
    objects: list[dict] = []
    for resource in kustomization.get("resources", []):
        target = (directory / resource).resolve()
        if target.is_dir():
            objects += kustomize(target, files)
        else:
            objects += [doc for doc in yaml.safe_load_all(target.read_text()) if doc]
            if files is not None:
                files.add(target)
    for entry in kustomization.get("patches", []):
        assert set(entry) in ({"patch"}, {"patch", "target"}), f"{path}: only inline strategic-merge patches: {entry}"
        patch = yaml.safe_load(entry["patch"])
        if "target" in entry:  # every object of the kind whose name matches the regex; the patch's name is ignored
            target = entry["target"]
            assert set(target) == {"kind", "name"}, f"{path}: a target by kind and name only: {target}"
            matched = [o for o in objects if o["kind"] == target["kind"]
                       and re.fullmatch(target["name"], o["metadata"]["name"])]
            assert matched, f"{path}: the target {target} matches nothing"
            for obj in matched:
                merge(obj, {**patch, "metadata": {k: v for k, v in patch["metadata"].items() if k != "name"}})
            continue
        [obj] = [o for o in objects if o["kind"] == patch["kind"] and all(
            o["metadata"].get(key) == value for key, value in patch["metadata"].items())]
        if patch.pop("$patch", None) == "delete":
            objects.remove(obj)
        else:
            merge(obj, patch)
    return objects


def merge(target: dict, patch: dict) -> None:
    for key, value in patch.items():
        current = target.get(key)
        if isinstance(value, dict) and isinstance(current, dict):
            merge(current, value)
        elif isinstance(value, list) and isinstance(current, list) and all(
                isinstance(item, dict) and "name" in item for item in value + current):
            by_name = {item["name"]: item for item in current}
            for item in value:
                if item["name"] in by_name:
                    merge(by_name[item["name"]], item)
                else:
                    current.append(item)
        else:
            target[key] = value


def find(objects: list[dict], kind: str, **metadata: str) -> dict[str, Any]:
    [found] = [o for o in objects if o["kind"] == kind and all(o["metadata"].get(k) == v for k, v in metadata.items())]
    return found


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
    for doc in documents("rbac") + documents("namespaced"):
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
    listed: set[Path] = set()
    kustomize(CONFIG, listed)
    manifests = {p.resolve() for part in ("manager", "rbac", "webhook") for p in (CONFIG / part).glob("*.yaml")
                 if p.name != "kustomization.yaml"}
    assert manifests <= listed


def test_secrets_are_read_by_name_never_listed_or_watched():
    # The reconciles get a Secret by name (BMC credentials, user data, network data), create Metal3Data's
    # rendered ones and delete those again, and copy a HostClaim's data Secrets beside its host (made, brought
    # up to date, deleted on release): a list or a watch would read every Secret of the cluster.
    assert granted(CLUSTER_ROLE["rules"], "", "secrets") == {"get", "create", "update", "delete"}


def test_configmaps_are_read_by_name_only():
    # The metal-stack image catalogue (ConfigMap metal-stack-images) and the firewalls' rule sets, got by name.
    assert granted(CLUSTER_ROLE["rules"], "", "configmaps") == {"get"}


def test_what_a_metal_stack_cluster_makes_it_may_create_and_delete():
    # Its node network (an IPPool, from an IPPrefixClaim), its MetalStackFirewall, and its servers' IPClaims.
    rules = CLUSTER_ROLE["rules"]
    assert {"create", "delete"} <= granted(rules, "ipam.metal3.io", "ippools")
    assert {"create", "delete"} <= granted(rules, "ipam.metal3.io", "ipprefixclaims")
    assert {"create", "delete"} <= granted(rules, "ipam.metal3.io", "ipclaims")
    assert {"create", "delete"} <= granted(rules, "infrastructure.cluster.x-k8s.io", "metalstackfirewalls")


# baremetal-operator's day-2 hardware kinds (issue 33), not watched yet: (kind, verbs on it, on its status and
# finalizers). What upstream's controllers do with them: a host's settings, components and agent image made beside
# it and reconciled; the schema a model's hosts share made and its ownerReferences updated; the user's DataImage
# reconciled; the host's update policy read and owned. Never deleted (the garbage collector does it).
RECONCILED = {"get", "list", "watch", "update", "patch"}
DAY2_KINDS = [
    ("HostFirmwareSettings", RECONCILED | {"create"}, {"get", "update", "patch"}),
    ("HostFirmwareComponents", RECONCILED | {"create"}, {"get", "update", "patch"}),
    ("PreprovisioningImage", RECONCILED | {"create"}, {"get", "update", "patch"}),
    ("FirmwareSchema", RECONCILED | {"create"}, set()),
    ("DataImage", RECONCILED, {"get", "update", "patch"}),
    ("HostUpdatePolicy", RECONCILED, set()),
]


@pytest.mark.parametrize(("kind", "verbs", "subresource_verbs"), DAY2_KINDS, ids=[k[0] for k in DAY2_KINDS])
def test_the_day2_hardware_kinds_are_granted_what_their_reconciles_need_and_no_more(kind, verbs, subresource_verbs):
    plural = plurals()[("metal3.io", kind)]
    rules = CLUSTER_ROLE["rules"]
    assert granted(rules, "metal3.io", plural) == verbs
    assert granted(rules, "metal3.io", f"{plural}/status") == subresource_verbs
    assert granted(rules, "metal3.io", f"{plural}/finalizers") == subresource_verbs


TENANT_ROLE = "metal3-baremetal-hostclaim-tenant"


def test_the_tenant_role_grants_hostclaims_hardwaredata_and_secrets_and_nothing_else():
    [role] = kustomize(CONFIG / "tenant")
    assert (role["kind"], role["metadata"]["name"]) == ("ClusterRole", TENANT_ROLE)
    rules = role["rules"]
    assert {(group, resource) for rule in rules for group in rule["apiGroups"] for resource in rule["resources"]} \
        == {("metal3.io", "hostclaims"), ("metal3.io", "hostclaims/status"), ("metal3.io", "hardwaredata"),
            ("", "secrets")}
    assert granted(rules, "metal3.io", "hostclaims") == {"get", "list", "watch", "create", "update", "patch", "delete"}
    assert granted(rules, "metal3.io", "hostclaims/status") == {"get"}
    assert granted(rules, "metal3.io", "hardwaredata") == {"get", "list", "watch"}
    for rule in rules:
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], rule
    # The sample binds it in one namespace, with a RoleBinding.
    [binding] = [d for d in yaml.safe_load_all((CONFIG / "tenant" / "role_binding.sample.yaml").read_text()) if d]
    assert binding["kind"] == "RoleBinding" and binding["metadata"]["namespace"] == "tenant-a"
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": TENANT_ROLE}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "tenant", "namespace": "tenant-a"}]


def test_the_namespaced_kustomization_grants_the_same_rules_in_the_watched_namespace_only():
    objects = kustomize(CONFIG / "namespaced")
    assert not [o for o in objects if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    role = find(objects, "Role", name=CLUSTER_ROLE["metadata"]["name"])
    assert role["metadata"]["namespace"] == WATCHED_NAMESPACE
    assert role["rules"] == CLUSTER_ROLE["rules"]
    binding = find(objects, "RoleBinding", namespace=WATCHED_NAMESPACE)
    account = find(objects, "ServiceAccount")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                    "namespace": account["metadata"]["namespace"]}]
    container = find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["WATCH_NAMESPACE"] == {"name": "WATCH_NAMESPACE", "value": WATCHED_NAMESPACE}
    assert {"POD_NAMESPACE", "OS_CLIENT_CONFIG_FILE", "OS_CLOUD"} <= set(env)  # merged, not replaced
    # The leader-election Role stays, in the operator's namespace.
    assert find(objects, "Role", name="metal3-baremetal-operator-leader-election")["metadata"]["namespace"] == \
        account["metadata"]["namespace"]


def create_namespace(api: Any, name: str) -> None:
    try:
        client.CoreV1Api(api).create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    except ApiException as e:
        assert e.status == 409


def dry_run(api: Any, objects: list[dict]) -> None:
    """Each object, server-side dry run; the Namespaces for real (first, as kustomize orders them), and the CRDs
    the harness installed skipped."""
    for obj in sorted(objects, key=lambda o: o["kind"] != "Namespace"):
        if obj["kind"] == "Namespace":
            create_namespace(api, obj["metadata"]["name"])
            continue
        if obj["kind"] == "CustomResourceDefinition":
            continue
        if "." in obj["apiVersion"].split("/")[0]:  # a custom resource (cert-manager's): the dynamic client
            resource = dynamic.DynamicClient(api).resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            try:
                resource.create(body=obj, namespace=obj["metadata"].get("namespace"), query_params=[("dryRun", "All")])
            except ApiException as e:
                raise AssertionError(f"{obj['kind']} {obj['metadata']['name']}: {e.body}") from None
            continue
        try:
            utils.create_from_dict(api, obj, dry_run="All")
        except utils.FailToCreateError as e:
            raise AssertionError(f"{obj['kind']} {obj['metadata']['name']}: {e}") from None


@pytest.mark.kubernetes
def test_the_apiserver_accepts_every_manifest(kube_cluster):
    dry_run(kube_cluster.api_client(), kustomize(CONFIG))


@pytest.mark.kubernetes
def test_the_apiserver_accepts_the_tenant_role_and_its_sample_binding(kube_cluster):
    api = kube_cluster.api_client()
    dry_run(api, kustomize(CONFIG / "tenant"))
    create_namespace(api, "tenant-a")  # the sample's namespace: the tenant's, not the kustomization's
    dry_run(api, [d for d in yaml.safe_load_all((CONFIG / "tenant" / "role_binding.sample.yaml").read_text()) if d])


@pytest.mark.kubernetes
def test_the_apiserver_accepts_the_namespaced_kustomization(kube_cluster):
    api = kube_cluster.api_client()
    create_namespace(api, WATCHED_NAMESPACE)  # the watched namespace is the user's, not the kustomization's
    dry_run(api, kustomize(CONFIG / "namespaced"))


def test_capm3_kinds_convert_through_the_operators_webhook_with_a_certificate_from_cert_manager():
    objects = kustomize(CONFIG)
    service = find(objects, "Service", name="metal3-baremetal-webhook-service")
    certificate = find(objects, "Certificate", name="metal3-baremetal-serving-cert")
    container = find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    webhook_port = next(p for p in container["ports"] if p["name"] == "webhook")["containerPort"]
    assert f"--webhook-bind-address=:{webhook_port}" in container["args"]
    assert service["spec"]["ports"][0]["targetPort"] == "webhook"
    assert f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc" in certificate["spec"]["dnsNames"]
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == "/tmp/k8s-webhook-server/serving-certs")
    volume = next(v for v in find(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]
                  if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == certificate["spec"]["secretName"]
    crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    # Only the CRDs serving several versions of the converted group: the metal-stack kinds of the same group
    # serve one version each, nothing to convert, and neither a webhook nor cert-manager's CA injection.
    metal_stack = ("metalstackclusters", "metalstackmachines", "metalstackfirewalls")
    assert {crd["metadata"]["name"] for crd in crds} >= {f"{plural}.infrastructure.cluster.x-k8s.io"
                                                         for plural in metal_stack}
    for crd in crds:
        several = len(crd["spec"]["versions"]) > 1 and crd["spec"]["group"] == "infrastructure.cluster.x-k8s.io"
        conversion = crd["spec"].get("conversion")
        assert bool(conversion) == several, crd["metadata"]["name"]
        injected = "cert-manager.io/inject-ca-from" in (crd["metadata"].get("annotations") or {})
        assert injected == several, crd["metadata"]["name"]
        if several:
            assert conversion["webhook"]["clientConfig"]["service"] == {
                "namespace": service["metadata"]["namespace"], "name": service["metadata"]["name"],
                "path": "/convert", "port": 443}
            assert crd["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == \
                f"{certificate['metadata']['namespace']}/{certificate['metadata']['name']}"


def test_capm3_kinds_carry_cluster_apis_contract_labels():
    # Cluster API's controllers find the version of a kind a v1beta2 reference names (group and kind) from these
    # labels, as they do for CAPM3's CRDs; every CAPM3 kind serves both versions.
    crds = [o for o in kustomize(CONFIG) if o["kind"] == "CustomResourceDefinition"
            and o["spec"]["names"]["kind"].startswith("Metal3")]
    assert len(crds) == 9
    for crd in crds:
        assert {v["name"] for v in crd["spec"]["versions"] if v["served"]} == {"v1beta1", "v1beta2"}
        assert crd["metadata"]["labels"] == {"cluster.x-k8s.io/v1beta1": "v1beta1",
                                             "cluster.x-k8s.io/v1beta2": "v1beta2"}, crd["metadata"]["name"]
