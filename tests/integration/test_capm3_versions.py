"""CAPM3's two API versions on both backends: v1beta2 stored, v1beta1 served beside it, converted both ways (the
local store by api/conversion.py, kube-apiserver through the conversion webhook serving the same function); and a
Metal3DataTemplate's metaData / networkData checked against upstream's schema at apply time."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.api.conversion import ANNOTATION, convert
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest, Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import load_definitions
from tests.unit.module_utils.api.test_conversion import EXACT
from tests.unit.module_utils.templating import test_network_data_fidelity as fidelity
from tests.unit.module_utils.templating import test_render as rendering

V1 = "infrastructure.cluster.x-k8s.io/v1beta1"
V2 = "infrastructure.cluster.x-k8s.io/v1beta2"
DEMO = Path(__file__).resolve().parents[2] / "playbooks" / "files" / "demo" / "cluster.yaml"
STATUS_SUBRESOURCE = {"Metal3Cluster", "Metal3Machine", "Metal3DataTemplate", "Metal3DataClaim", "Metal3Data",
                      "Metal3Remediation", "Metal3RemediationTemplate"}


def make(api_version: str, kind: str, namespace: str, spec: Any = None, name: str = "x") -> dict[str, Any]:
    made: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name,
                                                                                  "namespace": namespace}}
    if spec is not None:
        made["spec"] = copy.deepcopy(spec)
    return made


def conversion_data(obj: dict[str, Any]) -> dict[str, Any] | None:
    text = (obj["metadata"].get("annotations") or {}).get(ANNOTATION)
    return json.loads(text) if text else None


def with_namespace(value: Any, namespace: str) -> Any:
    """Upstream's cases name the namespace metal3: here, the test's."""
    text = json.dumps(value).replace('"namespace": "metal3"', f'"namespace": "{namespace}"')
    return json.loads(text)


@pytest.mark.parametrize(("kind", "spec1", "status1", "spec2", "status2"), EXACT,
                         ids=[f"{case[0]}-{i}" for i, case in enumerate(EXACT)])
def test_an_object_written_at_either_version_is_read_at_both(store, namespace, kind, spec1, status1, spec2, status2):
    spec1, status1, spec2, status2 = with_namespace((spec1, status1, spec2, status2), namespace)
    store.create(make(V1, kind, namespace, spec1, "old"))
    store.create(make(V2, kind, namespace, spec2, "new"))
    for name in ("old", "new"):
        assert store.get(Ref(V1, kind, name, namespace))["spec"] == spec1
        assert store.get(Ref(V2, kind, name, namespace))["spec"] == spec2
    if kind in STATUS_SUBRESOURCE and status1 is not None:
        old = store.get(Ref(V1, kind, "old", namespace))
        store.update_status({**old, "status": status1})
        assert store.get(Ref(V2, kind, "old", namespace))["status"] == status2
        new = store.get(Ref(V2, kind, "new", namespace))
        store.update_status({**new, "status": status2})
        assert store.get(Ref(V1, kind, "new", namespace))["status"] == status1
    assert sorted(o["metadata"]["name"] for o in store.list(V1, kind, namespace)) == ["new", "old"]
    assert {o["apiVersion"] for o in store.list(V2, kind, namespace)} == {V2}


def test_what_v1beta2_cannot_hold_is_kept_for_v1beta1_readers(store, namespace):
    template = make(V1, "Metal3DataTemplate", namespace, {"templateReference": "legacy", "metaData": {
        "ipAddressesFromIPPool": [{"key": "ip", "name": "mgmt"}], "indexes": [{"key": "i", "step": 0}]}})
    store.create(template)
    ref2 = Ref(V2, "Metal3DataTemplate", "x", namespace)
    stored = store.get(ref2)
    assert stored["spec"] == {"metaData": {"ipAddressesFromPool": [{"key": "ip", "name": "mgmt"}],
                                           "indexes": [{"key": "i"}]}}
    assert conversion_data(stored)["spec"]["templateReference"] == "legacy"
    store.patch(ref2, {"metadata": {"labels": {"seen": "v1beta2"}}})  # a v1beta2 writer keeps the annotation
    back = store.get(Ref(V1, "Metal3DataTemplate", "x", namespace))
    assert back["spec"] == template["spec"] and back["metadata"]["labels"] == {"seen": "v1beta2"}
    assert ANNOTATION not in (back["metadata"].get("annotations") or {})


def test_an_edit_at_v1beta1_keeps_what_only_v1beta2_holds(store, namespace):
    store.create(make(V2, "Metal3ClusterTemplate", namespace, {"template": {
        "metadata": {"labels": {"tier": "infra"}},
        "spec": {"controlPlaneEndpoint": {"host": "10.0.0.5", "port": 6443},
                 "failureDomains": [{"name": "az-b"}, {"name": "az-a", "controlPlane": True}]}}}))
    old = store.get(Ref(V1, "Metal3ClusterTemplate", "x", namespace))
    assert old["spec"]["template"] == {"spec": {"controlPlaneEndpoint": {"host": "10.0.0.5", "port": 6443},
                                                "failureDomains": {"az-a": {"controlPlane": True}, "az-b": {}}}}
    store.patch(Ref(V1, "Metal3ClusterTemplate", "x", namespace),
                {"spec": {"template": {"spec": {"controlPlaneEndpoint": {"port": 7443}}}}})
    assert store.get(Ref(V2, "Metal3ClusterTemplate", "x", namespace))["spec"]["template"] == {
        "metadata": {"labels": {"tier": "infra"}},
        "spec": {"controlPlaneEndpoint": {"host": "10.0.0.5", "port": 7443},
                 "failureDomains": [{"name": "az-b"}, {"name": "az-a", "controlPlane": True}]}}


def test_status_written_at_v1beta2_reads_as_v1beta1s(store, namespace):
    store.create(make(V1, "Metal3Machine", namespace, {"image": {"url": "http://images/os.img", "format": "raw"}}))
    machine = store.get(Ref(V2, "Metal3Machine", "x", namespace))
    assert machine["spec"]["image"] == {"url": "http://images/os.img", "diskFormat": "raw"}
    condition = {"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}
    store.update_status({**machine, "status": {"initialization": {"provisioned": True}, "conditions": [condition]}})
    old = store.get(Ref(V1, "Metal3Machine", "x", namespace))
    assert old["status"] == {"ready": True, "v1beta2": {"conditions": [condition]}}
    store.update_status({**old, "status": {**old["status"], "failureReason": "UpdateError"}})
    assert store.get(Ref(V2, "Metal3Machine", "x", namespace))["status"] == {
        "initialization": {"provisioned": True}, "conditions": [condition],
        "deprecated": {"v1beta1": {"failureReason": "UpdateError"}}}


# -- Metal3DataTemplate metaData / networkData: upstream's schema at apply time --------------------------------

V2_ONLY = ("ipAddressesFromPool", "prefixesFromPool", "gatewaysFromPool", "dnsServersFromPool")
V1_ONLY = ("ipAddressesFromIPPool", "prefixesFromIPPool", "gatewaysFromIPPool", "dnsServersFromIPPool")


def versions_of(spec: dict[str, Any]) -> tuple[str, ...]:
    """The versions whose spelling a template uses: *FromPool and parameters lists are v1beta2's, *FromIPPool and
    parameters maps v1beta1's; everything else (the seed's spellings included) is the same in both."""
    text = json.dumps(spec)
    parameters = [bond.get("parameters") for part in (spec, spec.get("template") or {})
                  for bond in ((part.get("networkData") or {}).get("links") or {}).get("bonds") or []]
    if any(f'"{name}"' in text for name in V2_ONLY) or any(isinstance(p, list) for p in parameters):
        return (V2,)
    if any(f'"{name}"' in text for name in V1_ONLY) or any(isinstance(p, dict) for p in parameters):
        return (V1,)
    return (V1, V2)


def demo_templates() -> list[tuple[str, dict[str, Any]]]:
    return [(f"demo {o['metadata']['name']}", o["spec"]) for o in load_definitions(src=str(DEMO))
            if o["kind"] == "Metal3DataTemplate"]


# (what, spec) of every template the renderer's tests render, the seed's and the demo's: all must apply
GOOD = [
    *demo_templates(),
    ("seed az-a", rendering.SEED),
    ("upstream spelling of the seed", rendering.UPSTREAM),
    *((f"metaData {i}", {"metaData": spec}) for i, (spec, _expected) in enumerate(rendering.META)),
    *((f"networkData {i}", {"networkData": spec}) for i, (spec, _expected) in enumerate(rendering.NETWORK)),
    ("bond parameters as v1beta1's map", {"networkData": {"links": {"bonds": [
        {"id": "b", "bondMode": "balance-rr", "bondLinks": ["e"], "parameters": {"miimon": 100}}]}}}),
    ("seed links", {"networkData": {"links": fidelity.SEED_LINKS}}),
    *((f"vlan mac {case.id}", {"networkData": {"links": case.values[0]}}) for case in fidelity.VLAN_MAC),
]


@pytest.mark.parametrize(("what", "spec"), GOOD, ids=[what for what, _spec in GOOD])
def test_the_templates_the_renderer_renders_apply(store, namespace, what, spec):
    for api_version in versions_of(spec):
        name = f"t-{api_version[-7:]}"
        store.create(make(api_version, "Metal3DataTemplate", namespace, spec, name))
        assert store.get(Ref(api_version, "Metal3DataTemplate", name, namespace))["spec"] == spec


def bond(**fields: Any) -> dict[str, Any]:
    return {"networkData": {"links": {"bonds": [{"id": "b", "bondMode": "802.3ad", "bondLinks": ["e"], **fields}]}}}


def ethernet(**fields: Any) -> dict[str, Any]:
    return {"networkData": {"links": {"ethernets": [{"id": "e", "type": "phy", "name": "eth0", **fields}]}}}


def route(**fields: Any) -> dict[str, Any]:
    return {"networkData": {"networks": {"ipv4": [{"id": "n", "link": "e", "ipAddressFromIPPool": "mgmt",
                                                   "routes": [{"to": "0.0.0.0/0", "via": "10.0.0.1", **fields}]}]}}}


BONDS = "spec.networkData.links.bonds[0]"
ROUTE = "spec.networkData.networks.ipv4[0].routes[0]"
# (the field the refusal names, spec, versions): each bad field is refused at apply time, on both backends
BAD = [
    (f"{BONDS}.bondMode", bond(bondMode="fastest"), (V1, V2)),
    (f"{BONDS}.bondXmitHashPolicy", bond(bondXmitHashPolicy="layer9"), (V1, V2)),
    (f"{BONDS}.bondMode", {"networkData": {"links": {"bonds": [{"id": "b", "bondLinks": ["e"]}]}}}, (V1, V2)),
    (f"{BONDS}.type", bond(type="vlan"), (V1, V2)),
    (f"{BONDS}.bondMood", bond(bondMood="802.3ad"), (V1, V2)),
    (f"{BONDS}.parameters", bond(parameters={"miimon": 100}), (V2,)),
    (f"{BONDS}.parameters", bond(parameters=[{"name": "miimon", "value": 100}]), (V1,)),
    (f"{BONDS}.bondMiimon", bond(bondMiimon=[100]), (V1, V2)),
    ("spec.networkData.links.ethernets[0].type", ethernet(type="wifi"), (V1, V2)),
    ("spec.networkData.links.ethernets[0].mtu", ethernet(mtu=100), (V1, V2)),
    ("spec.networkData.links.ethernets[0].name", ethernet(name="a-name-far-too-long"), (V1, V2)),
    ("spec.networkData.links.ethernets[0].macAddress.string", ethernet(macAddress={"string": "not-a-mac"}), (V1, V2)),
    ("spec.networkData.links.vlans[0].vlanID",
     {"networkData": {"links": {"vlans": [{"id": "v", "vlanID": 5000, "vlanLink": "b"}]}}}, (V1, V2)),
    (f"{ROUTE}.to", route(to="nonsense"), (V1, V2)),
    (f"{ROUTE}.via", route(via="300.1.1.1"), (V1, V2)),
    (f"{ROUTE}.prefix", route(prefix=33), (V1, V2)),
    (f"{ROUTE}.gateway.string", route(gateway={"string": "fd00::1"}), (V1, V2)),
    (f"{ROUTE}.services.dns[0]", route(services={"dns": ["not-an-ip"]}), (V1, V2)),
    ("spec.networkData.networks.ipv4[0].ipAddressFromIPPool",
     {"networkData": {"networks": {"ipv4": [{"id": "n", "link": "e", "ipAddressFromIPPool": "../pool"}]}}}, (V1, V2)),
    ("spec.networkData.services.dns[0]", {"networkData": {"services": {"dns": ["dns.example"]}}}, (V1, V2)),
    ("spec.metaData.fromLabels[0].object",
     {"metaData": {"fromLabels": [{"key": "k", "object": "cluster", "label": "l"}]}}, (V1, V2)),
    ("spec.metaData.indexes[0].step", {"metaData": {"indexes": [{"key": "k", "step": 0}]}}, (V2,)),
    ("spec.metaData.ipAddressesFromPool", {"metaData": {"ipAddressesFromPool": [{"key": "k", "name": "p"}]}}, (V1,)),
    ("spec.metaData.ipAddressesFromIPPool",
     {"metaData": {"ipAddressesFromIPPool": [{"key": "k", "name": "p"}]}}, (V2,)),
    ("spec.template.networkData.links.bonds[0].bondMode", {"template": bond(bondMode="fastest")}, (V1, V2)),
]


@pytest.mark.parametrize(("field", "spec", "versions"), BAD, ids=[f"{field}@{len(v)}" for field, _s, v in BAD])
def test_a_bad_template_field_is_refused_at_apply_time_naming_it(store, namespace, field, spec, versions):
    for api_version in versions:
        with pytest.raises((Invalid, BadRequest)) as refused:
            store.create(make(api_version, "Metal3DataTemplate", namespace, spec, "bad"))
        assert field in str(refused.value), str(refused.value)
        assert store.get_if_exists(Ref(api_version, "Metal3DataTemplate", "bad", namespace)) is None


def test_the_seed_feature_requests_template_applies_as_written(store, namespace):
    """The YAML of seed 000 (its indentation restored), at the version it names and at v1beta2."""
    text = """
    apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
    kind: Metal3DataTemplate
    metadata: {name: cp-net-az-a}
    spec:
      template:
        networkData:
          links:
            ethernets:
            - {id: nic0, type: phy, macAddress: { fromHostInterface: eno1 }}
            - {id: nic1, type: phy, macAddress: { fromHostInterface: eno2 }}
            bonds:
            - id: bond1
              type: bond
              interfaces: ["nic0","nic1"]
              bondMode: "802.3ad"
              bondMiimon: 100
              bondLACPRate: "fast"
              bondXmitHashPolicy: "layer3+4"
            vlans:
            - {id: bond1.11, type: vlan, link: bond1, vlanID: 11, mtu: 9000}
            - {id: bond1.12, type: vlan, link: bond1, vlanID: 12}
          networks:
            ipv4:
            - id: mgmt-a
              link: bond1.11
              ipAddressFromIPPool: mgmt-az-a-pool
              routes:
              - to: 0.0.0.0/0
                via: 192.168.11.1
            - {id: storage-a, link: bond1.12, ipAddressFromIPPool: storage-az-a-pool}
    """
    template = yaml.safe_load(text)
    template["metadata"]["namespace"] = namespace
    store.create(template)
    store.create({**convert(template, V2), "metadata": {"name": "cp-net-az-a-v2", "namespace": namespace}})
    read = store.get(Ref(V2, "Metal3DataTemplate", "cp-net-az-a", namespace))
    twin = store.get(Ref(V2, "Metal3DataTemplate", "cp-net-az-a-v2", namespace))
    assert read["spec"] == template["spec"] == twin["spec"]
