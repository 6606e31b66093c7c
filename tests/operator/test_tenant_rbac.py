"""The shipped HostClaim tenant role (operator/config/tenant) on the real kube-apiserver: a tenant bound to it in its
own namespace by the sample RoleBinding works with its HostClaims, Secrets and HardwareData there, and is
refused (403) everything of the infrastructure's namespace - its BareMetalHosts, their BMC Secrets, its
HostClaims and HostDeployPolicies - and anything it should only read or not see at all."""
from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from tests.harness.cluster import KubeCluster

pytestmark = pytest.mark.kubernetes

REPO = Path(__file__).resolve().parents[2]
TENANT = REPO / "operator" / "config" / "tenant"
GROUP, VERSION = "metal3.io", "v1alpha1"
API = f"{GROUP}/{VERSION}"


def manifests(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def host(name: str) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "BareMetalHost", "metadata": {"name": name},
            "spec": {"online": False, "bmc": {"address": "redfish://bmc.example.com/redfish/v1/Systems/1",
                                              "credentialsName": f"{name}-bmc"}}}


def host_claim(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "HostClaim", "metadata": {"name": name},
            "spec": {"poweredOn": True, "hostSelector": {"matchLabels": {"rack": "r1"}}, **spec}}


class Tenancy:
    """The namespaces, and an API client for the cluster admin and one for the tenant (its own token)."""

    def __init__(self, admin: Any, tenant: Any, infra_ns: str, tenant_ns: str) -> None:
        self.admin, self.tenant = admin, tenant
        self.infra_ns, self.tenant_ns = infra_ns, tenant_ns
        self.custom = client.CustomObjectsApi(tenant)
        self.core = client.CoreV1Api(tenant)


@pytest.fixture
def tenancy(kube_cluster: KubeCluster) -> Iterator[Tenancy]:
    admin = kube_cluster.api_client()
    core, rbac, custom = client.CoreV1Api(admin), client.RbacAuthorizationV1Api(admin), client.CustomObjectsApi(admin)
    suffix = secrets.token_hex(3)
    infra_ns, tenant_ns = f"infra-{suffix}", f"tenant-{suffix}"
    for ns in (infra_ns, tenant_ns):
        core.create_namespace({"metadata": {"name": ns}})
    # The shipped ClusterRole, as `kubectl apply -k operator/config/tenant` makes it.
    [role] = [o for o in manifests(TENANT / "role.yaml") if o["kind"] == "ClusterRole"]
    name = role["metadata"]["name"]
    try:
        rbac.create_cluster_role(role)
    except ApiException as e:
        assert e.status == 409, e.body
        rbac.replace_cluster_role(name, {**role, "metadata": {
            **role["metadata"], "resourceVersion": rbac.read_cluster_role(name).metadata.resource_version}})
    # The sample RoleBinding, in the tenant's namespace instead of tenant-a.
    [binding] = manifests(TENANT / "role_binding.sample.yaml")
    binding["metadata"]["namespace"] = tenant_ns
    for subject in binding["subjects"]:
        subject["namespace"] = tenant_ns
    account = binding["subjects"][0]["name"]
    core.create_namespaced_service_account(tenant_ns, {"metadata": {"name": account}})
    rbac.create_namespaced_role_binding(tenant_ns, binding)
    token = core.create_namespaced_service_account_token(
        account, tenant_ns, {"spec": {"expirationSeconds": 3600}}).status.token
    configuration = client.Configuration()
    configuration.host = kube_cluster.server
    configuration.api_key = {"authorization": f"Bearer {token}"}
    configuration.ssl_ca_cert = str(kube_cluster.ca_cert)
    # The infrastructure: a host, its BMC Secret and a policy letting the tenant's namespace in; a claim of another
    # tenant beside them; the HardwareData the operator made for the tenant's claim.
    core.create_namespaced_secret(infra_ns, {"metadata": {"name": "node-0-bmc"},
                                             "stringData": {"username": "admin", "password": "infra-only"}})
    custom.create_namespaced_custom_object(GROUP, VERSION, infra_ns, "baremetalhosts", host("node-0"))
    custom.create_namespaced_custom_object(GROUP, VERSION, infra_ns, "hostdeploypolicies", {
        "apiVersion": API, "kind": "HostDeployPolicy", "metadata": {"name": "tenants"},
        "spec": {"hostClaimNamespaces": {"names": [tenant_ns]}}})
    custom.create_namespaced_custom_object(GROUP, VERSION, infra_ns, "hostclaims", host_claim("infra-claim"))
    custom.create_namespaced_custom_object(GROUP, VERSION, tenant_ns, "hardwaredata", {
        "apiVersion": API, "kind": "HardwareData", "metadata": {"name": "claim-0"},
        "spec": {"hardware": {"hostname": "node-0", "ramMebibytes": 4096, "cpu": {"arch": "x86_64", "count": 4}}}})
    with client.ApiClient(configuration) as tenant:
        yield Tenancy(admin, tenant, infra_ns, tenant_ns)
    for ns in (infra_ns, tenant_ns):
        core.delete_namespace(ns)
    rbac.delete_cluster_role(name)


def forbidden(call: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    with pytest.raises(ApiException) as refused:
        call(*args, **kwargs)
    assert refused.value.status == 403, refused.value.body


def test_the_tenant_works_with_its_hostclaims_secrets_and_hardwaredata(tenancy):
    custom, core, ns = tenancy.custom, tenancy.core, tenancy.tenant_ns
    core.create_namespaced_secret(ns, {"metadata": {"name": "user-data"},
                                       "stringData": {"userData": "#cloud-config\n"}})
    assert core.read_namespaced_secret("user-data", ns).metadata.name == "user-data"
    created = custom.create_namespaced_custom_object(GROUP, VERSION, ns, "hostclaims",
                                                     host_claim("claim-0", userData={"name": "user-data"}))
    assert created["spec"]["userData"] == {"name": "user-data"}
    got = custom.get_namespaced_custom_object(GROUP, VERSION, ns, "hostclaims", "claim-0")
    listed = custom.list_namespaced_custom_object(GROUP, VERSION, ns, "hostclaims")
    assert [o["metadata"]["name"] for o in listed["items"]] == ["claim-0"]
    seen = []
    for event in watch.Watch().stream(custom.list_namespaced_custom_object, GROUP, VERSION, ns, "hostclaims",
                                      timeout_seconds=2):
        seen.append((event["type"], event["object"]["metadata"]["name"]))
        break
    assert seen == [("ADDED", "claim-0")]
    got["spec"]["poweredOn"] = False
    updated = custom.replace_namespaced_custom_object(GROUP, VERSION, ns, "hostclaims", "claim-0", got)
    assert updated["spec"]["poweredOn"] is False
    patched = custom.patch_namespaced_custom_object(GROUP, VERSION, ns, "hostclaims", "claim-0",
                                                    {"spec": {"failureDomain": "az-a"}})
    assert patched["spec"]["failureDomain"] == "az-a"
    # The status is the operator's: read, never written, by the tenant.
    assert custom.get_namespaced_custom_object_status(GROUP, VERSION, ns, "hostclaims", "claim-0")
    forbidden(custom.patch_namespaced_custom_object_status, GROUP, VERSION, ns, "hostclaims", "claim-0",
              {"status": {"state": "provisioned"}})
    hardware = custom.get_namespaced_custom_object(GROUP, VERSION, ns, "hardwaredata", "claim-0")
    assert hardware["spec"]["hardware"]["hostname"] == "node-0"
    assert len(custom.list_namespaced_custom_object(GROUP, VERSION, ns, "hardwaredata")["items"]) == 1
    custom.delete_namespaced_custom_object(GROUP, VERSION, ns, "hostclaims", "claim-0")
    core.delete_namespaced_secret("user-data", ns)


def test_the_tenant_is_refused_hosts_policies_and_the_infrastructures_namespace(tenancy):
    custom, core, infra, ns = tenancy.custom, tenancy.core, tenancy.infra_ns, tenancy.tenant_ns
    # BareMetalHosts: in the infrastructure's namespace, in its own, and across the cluster.
    forbidden(custom.get_namespaced_custom_object, GROUP, VERSION, infra, "baremetalhosts", "node-0")
    forbidden(custom.list_namespaced_custom_object, GROUP, VERSION, infra, "baremetalhosts")
    forbidden(custom.list_namespaced_custom_object, GROUP, VERSION, ns, "baremetalhosts")
    forbidden(custom.create_namespaced_custom_object, GROUP, VERSION, ns, "baremetalhosts", host("mine"))
    forbidden(custom.list_custom_object_for_all_namespaces, GROUP, VERSION, "baremetalhosts")
    # The BMC Secret, and any Secret of the infrastructure's namespace.
    forbidden(core.read_namespaced_secret, "node-0-bmc", infra)
    forbidden(core.list_namespaced_secret, infra)
    forbidden(core.create_namespaced_secret, infra, {"metadata": {"name": "planted"}, "stringData": {"k": "v"}})
    forbidden(core.list_secret_for_all_namespaces)
    # HostClaims of the infrastructure's namespace (another tenant's), and across the cluster.
    forbidden(custom.get_namespaced_custom_object, GROUP, VERSION, infra, "hostclaims", "infra-claim")
    forbidden(custom.list_namespaced_custom_object, GROUP, VERSION, infra, "hostclaims")
    forbidden(custom.create_namespaced_custom_object, GROUP, VERSION, infra, "hostclaims", host_claim("mine"))
    forbidden(custom.delete_namespaced_custom_object, GROUP, VERSION, infra, "hostclaims", "infra-claim")
    forbidden(custom.list_custom_object_for_all_namespaces, GROUP, VERSION, "hostclaims")
    # HostDeployPolicies, anywhere: which namespaces may bind which hosts is the infrastructure's business.
    forbidden(custom.get_namespaced_custom_object, GROUP, VERSION, infra, "hostdeploypolicies", "tenants")
    forbidden(custom.list_namespaced_custom_object, GROUP, VERSION, ns, "hostdeploypolicies")
    forbidden(custom.create_namespaced_custom_object, GROUP, VERSION, ns, "hostdeploypolicies", {
        "apiVersion": API, "kind": "HostDeployPolicy", "metadata": {"name": "mine"},
        "spec": {"hostClaimNamespaces": {"names": [ns]}}})
    # HardwareData is the operator's to make; the tenant reads it in its own namespace only.
    forbidden(custom.create_namespaced_custom_object, GROUP, VERSION, ns, "hardwaredata", {
        "apiVersion": API, "kind": "HardwareData", "metadata": {"name": "forged"}, "spec": {"hardware": {}}})
    forbidden(custom.delete_namespaced_custom_object, GROUP, VERSION, ns, "hardwaredata", "claim-0")
    forbidden(custom.list_namespaced_custom_object, GROUP, VERSION, infra, "hardwaredata")
    # Nothing cluster-scoped: not even the namespaces.
    forbidden(core.list_namespace)
    forbidden(core.read_namespace, ns)
