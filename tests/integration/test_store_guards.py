"""What the store refuses before any request is built, the same on both backends (issue 12).

Names become URL paths on the Kubernetes backend, where the HTTP library resolves '..': a name must be an
object name before it gets there. Objects are held to the size a Kubernetes API server stores.
"""
from __future__ import annotations

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest, Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import MAX_OBJECT_BYTES, Ref
from tests.integration.crd_schemas import SCHEMAS, set_path, shown, walk

TRAVERSALS = ["../../other/secrets/prod-bmc", "..", "a/b", "a%2Fb", "UPPER", "x" * 254]


# Lists whose items' name names no object: a failure domain's, a bond parameter's (a kernel bonding option), a RAID
# volume's, a host NIC's, a HostDeployPolicy's label (a label key), and HardwareData's NICs, VLANs and disks.
NOT_OBJECT_NAMES = ("failureDomains", "parameters", "hardwareRAIDVolumes", "networkInterfaces", "hasLabels", "nics",
                    "vlans", "storage")
# Fields named like an object's name that name none: a root device, and HardwareData's product and switch.
NOT_OBJECT_NAME_KEYS = ("deviceName", "productName", "switchSystemName")


def names_an_object(parts: list[str], node: dict) -> bool:
    key = parts[-1]
    return node.get("type") == "string" and (
        key in ("name", "namespace") or (key.endswith(("Name", "Namespace")) and key not in NOT_OBJECT_NAME_KEYS)) \
        and not (key == "name" and len(parts) > 2 and parts[-3] in NOT_OBJECT_NAMES)


# (apiVersion, kind, field path) of every spec field of the collection's CRDs that names an object.
NAME_FIELDS = [(api_version, kind, parts) for kind, (api_version, schema) in SCHEMAS.items()
               for parts, node in walk(schema["properties"]["spec"], ["spec"]) if names_an_object(parts, node)]


def test_every_object_naming_field_of_the_crds_is_found():
    paths = {(kind, ".".join(parts)) for _api, kind, parts in NAME_FIELDS}
    assert ("BareMetalHost", "spec.bmc.credentialsName") in paths
    assert ("BareMetalHost", "spec.userData.name") in paths
    assert ("Metal3Data", "spec.metaData.name") in paths
    assert ("IPClaim", "spec.pool.namespace") in paths
    assert len(NAME_FIELDS) >= 40


@pytest.mark.parametrize(("api_version", "kind", "parts"), NAME_FIELDS,
                         ids=[f"{k}:{'.'.join(p)}" for _a, k, p in NAME_FIELDS])
def test_a_traversal_in_any_field_that_names_an_object_is_refused_naming_the_field(
        store, namespace, api_version, kind, parts):
    obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "intruder", "namespace": namespace}}
    set_path(obj, parts, "../../other/secrets/prod-bmc")
    with pytest.raises(Invalid) as refused:
        store.create(obj)
    assert shown(parts) in str(refused.value) or ".".join(parts) in str(refused.value)
    assert store.get_if_exists(Ref(api_version, kind, "intruder", namespace)) is None


@pytest.mark.parametrize("name", TRAVERSALS)
def test_a_name_that_is_no_object_name_is_refused_before_any_request(store, namespace, name):
    store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "victim", "namespace": namespace},
                  "stringData": {"password": "victim-password"}})
    ref = Ref("v1", "Secret", name, namespace)
    operations = {
        "get": lambda: store.get(ref),
        "delete": lambda: store.delete(ref),
        "patch": lambda: store.patch(ref, {"metadata": {"labels": {"x": "y"}}}),
        "patch_status": lambda: store.patch_status(ref, {"status": {}}),
        "create": lambda: store.create({"apiVersion": "v1", "kind": "Secret",
                                        "metadata": {"name": name, "namespace": namespace}}),
        "update": lambda: store.update({"apiVersion": "v1", "kind": "Secret",
                                        "metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"}}),
    }
    for operation, call in operations.items():
        with pytest.raises(Invalid, match="name") as refused:
            call()
        assert "Invalid value" in str(refused.value) or "Required value" in str(refused.value), operation
    assert store.get(Ref("v1", "Secret", "victim", namespace))["metadata"].get("labels") is None


@pytest.mark.parametrize("bad_namespace", ["../other", "a/b", "UPPER", ""])
def test_a_namespace_that_is_no_namespace_name_is_refused(store, bad_namespace):
    with pytest.raises(Invalid, match="namespace"):
        store.get(Ref("v1", "Secret", "victim", bad_namespace))
    with pytest.raises(Invalid, match="namespace"):
        store.list("v1", "Secret", bad_namespace)


def test_a_traversal_never_reaches_another_namespace_on_either_backend(store, namespace, backend, request):
    other = request.getfixturevalue("kube_cluster").new_namespace("other") if backend == "kubernetes" else "other"
    store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "prod-bmc", "namespace": other},
                  "stringData": {"password": "other-password"}})
    traversal = Ref("v1", "Secret", f"../../{other}/secrets/prod-bmc", namespace)
    for call in (store.get, store.delete):
        with pytest.raises(Invalid):
            call(traversal)
    assert store.get(Ref("v1", "Secret", "prod-bmc", other))


def test_an_object_larger_than_an_api_server_stores_is_refused_on_both_backends(store, namespace):
    big = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": namespace},
           "data": {"blob": "x" * (MAX_OBJECT_BYTES + 1)}}
    with pytest.raises(BadRequest, match="Request entity too large"):
        store.create(big)
    assert store.get_if_exists(Ref("v1", "ConfigMap", "big", namespace)) is None
    small = store.create({**big, "data": {"blob": "x"}})
    with pytest.raises(BadRequest, match="Request entity too large"):
        store.update({**small, "data": big["data"]})
    assert store.get(Ref.of(small))["data"] == {"blob": "x"}


def test_host_and_api_key_given_on_a_task_win_over_the_kubeconfig(kube_cluster):
    """A kubeconfig's token refresh rewrites host and token before each request: the task's own must stay."""
    from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Forbidden, Unavailable
    from ansible_collections.metal3.baremetal.plugins.module_utils.store.kube import KubernetesStore

    with pytest.raises(Unavailable, match="cannot reach the Kubernetes API at https://127.0.0.1:9"):
        KubernetesStore(kubeconfig=str(kube_cluster.kubeconfig), host="https://127.0.0.1:9").list("v1", "Secret")
    with pytest.raises(Forbidden):
        KubernetesStore(kubeconfig=str(kube_cluster.kubeconfig), api_key="not-the-token").list("v1", "Secret")


def test_a_corrupted_local_store_is_unavailable_whichever_page_is_hit(tmp_path):
    from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Unavailable
    from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

    path = tmp_path / "store.db"
    with LocalStore(str(path)) as store:
        for i in range(200):
            store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}", "namespace": "d"},
                          "data": {"x": "y" * 500}})
    data = bytearray(path.read_bytes())
    data[len(data) // 2:len(data) // 2 + 8192] = b"\xa5" * 8192
    path.write_bytes(bytes(data))
    malformed = f"cannot open the local store {path}: database disk image is malformed"
    with pytest.raises(Unavailable, match=malformed), LocalStore(str(path)) as store:
        store.list("v1", "ConfigMap", "d")
        store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "new", "namespace": "d"}})
