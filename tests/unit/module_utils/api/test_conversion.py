"""CAPM3's objects between v1beta1 and v1beta2: upstream's conversion cases, and its fuzz idea - every field set,
converted there and back, equal - over objects generated from each version's CRD schema."""
from __future__ import annotations

import copy
import json
import random
import re
from typing import Any

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.api.conversion import (
    ANNOTATION,
    CONVERTED_GROUPS,
    convert,
    storage_version,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.api.kinds import lookup
from ansible_collections.metal3.baremetal.plugins.module_utils.api.validation import validate
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest, Invalid, UnknownKind

V1 = "infrastructure.cluster.x-k8s.io/v1beta1"
V2 = "infrastructure.cluster.x-k8s.io/v1beta2"
KINDS = ["Metal3Cluster", "Metal3ClusterTemplate", "Metal3Machine", "Metal3MachineTemplate", "Metal3DataTemplate",
         "Metal3DataClaim", "Metal3Data", "Metal3Remediation", "Metal3RemediationTemplate"]
V1_CONDITION = {"type": "Ready", "status": "False", "severity": "Warning", "reason": "Waiting",
                "message": "waiting", "lastTransitionTime": "2026-01-01T00:00:00Z"}
V2_CONDITION = {"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 2}
REF = {"name": "net", "namespace": "metal3"}


def obj(api_version: str, kind: str, spec: Any = None, status: Any = None, **metadata: Any) -> dict[str, Any]:
    made: dict[str, Any] = {"apiVersion": api_version, "kind": kind,
                            "metadata": {"name": "x", "namespace": "metal3", **metadata}}
    if spec is not None:
        made["spec"] = spec
    if status is not None:
        made["status"] = status
    return made


def annotation(converted: dict[str, Any]) -> dict[str, Any] | None:
    text = (converted.get("metadata", {}).get("annotations") or {}).get(ANNOTATION)
    return json.loads(text) if text else None


# -- upstream's cases: (kind, v1beta1 spec, v1beta1 status, v1beta2 spec, v1beta2 status), each the other's exactly
CLUSTER_SPEC_1 = {"controlPlaneEndpoint": {"host": "192.168.111.249", "port": 6443}, "cloudProviderEnabled": False,
                  "noCloudProvider": True,
                  "failureDomains": {"az-a": {"controlPlane": True, "attributes": {"rack": "r1"}}, "az-b": {}}}
CLUSTER_SPEC_2 = {"controlPlaneEndpoint": {"host": "192.168.111.249", "port": 6443}, "cloudProviderEnabled": False,
                  "failureDomains": [{"name": "az-a", "controlPlane": True, "attributes": {"rack": "r1"}},
                                     {"name": "az-b"}]}
MACHINE_SPEC_1 = {"image": {"url": "http://images/os.img", "checksum": "http://images/os.img.sha256",
                            "checksumType": "sha256", "format": "qcow2"},
                  "providerID": "metal3://metal3/host-0/x", "dataTemplate": REF, "failureDomain": "az-a",
                  "hostSelector": {"matchLabels": {"rack": "r1"}}, "automatedCleaningMode": "metadata",
                  "userData": {"name": "user-data"}, "customDeploy": {"method": "install_coreos"}}
MACHINE_SPEC_2 = {**MACHINE_SPEC_1, "image": {"url": "http://images/os.img", "checksum": "http://images/os.img.sha256",
                                              "checksumType": "sha256", "diskFormat": "qcow2"}}
ADDRESSES = [{"type": "InternalIP", "address": "192.168.11.10"}, {"type": "Hostname", "address": "node-0"}]
NETWORK_DATA_1 = {"links": {"bonds": [{"id": "bond0", "bondMode": "802.3ad", "bondLinks": ["eth0", "eth1"],
                                       "macAddress": {"fromHostInterface": "eth0"},
                                       "parameters": {"miimon": 100, "lacp_rate": "fast"}}],
                            "vlans": [{"id": "bond0.11", "vlanID": 11, "vlanLink": "bond0",
                                       "macAddress": {"string": "52:54:00:00:00:01"}}]},
                  "networks": {"ipv4": [{"id": "mgmt", "link": "bond0.11", "ipAddressFromIPPool": "mgmt",
                                         "routes": [{"network": "0.0.0.0", "prefix": 0,
                                                     "gateway": {"fromIPPool": "mgmt"}}]}]},
                  "services": {"dns": ["8.8.8.8"]}}
NETWORK_DATA_2 = copy.deepcopy(NETWORK_DATA_1)
NETWORK_DATA_2["links"]["bonds"][0]["parameters"] = [{"name": "lacp_rate", "value": "fast"},
                                                     {"name": "miimon", "value": 100}]
META_DATA_1 = {"ipAddressesFromIPPool": [{"key": "ip", "name": "mgmt"}],
               "prefixesFromIPPool": [{"key": "prefix", "name": "mgmt", "apiGroup": "ipam.metal3.io",
                                       "kind": "IPPool"}],
               "gatewaysFromIPPool": [{"key": "gateway", "name": "mgmt"}],
               "dnsServersFromIPPool": [{"key": "dns", "name": "mgmt"}],
               "indexes": [{"key": "index", "offset": 10, "step": 2, "prefix": "node-"}],
               "strings": [{"key": "role", "value": "worker"}]}
META_DATA_2 = {"ipAddressesFromPool": META_DATA_1["ipAddressesFromIPPool"],
               "prefixesFromPool": META_DATA_1["prefixesFromIPPool"],
               "gatewaysFromPool": META_DATA_1["gatewaysFromIPPool"],
               "dnsServersFromPool": META_DATA_1["dnsServersFromIPPool"],
               "indexes": META_DATA_1["indexes"], "strings": META_DATA_1["strings"]}
STRATEGY_1 = {"type": "Reboot", "retryLimit": 2, "timeout": "5m0s"}
STRATEGY_2 = {"type": "Reboot", "retryLimit": 2, "timeoutSeconds": 300}
REMEDIATION_STATUS = {"phase": "Running", "retryCount": 1, "lastRemediated": "2026-01-01T00:00:00Z"}

EXACT = [
    ("Metal3Cluster", CLUSTER_SPEC_1,
     {"ready": True, "failureReason": "InvalidConfiguration", "failureMessage": "no endpoint",
      "conditions": [V1_CONDITION], "v1beta2": {"conditions": [V2_CONDITION]},
      "failureDomains": CLUSTER_SPEC_1["failureDomains"], "lastUpdated": "2026-01-01T00:00:00Z"},
     CLUSTER_SPEC_2,
     {"initialization": {"provisioned": True}, "conditions": [V2_CONDITION],
      "deprecated": {"v1beta1": {"conditions": [V1_CONDITION], "failureReason": "InvalidConfiguration",
                                 "failureMessage": "no endpoint"}},
      "failureDomains": CLUSTER_SPEC_2["failureDomains"], "lastUpdated": "2026-01-01T00:00:00Z"}),
    ("Metal3Cluster", {"cloudProviderEnabled": True, "noCloudProvider": False}, {"ready": False},
     {"cloudProviderEnabled": True}, {"initialization": {"provisioned": False}}),
    ("Metal3ClusterTemplate", {"template": {"spec": CLUSTER_SPEC_1}}, None,
     {"template": {"spec": CLUSTER_SPEC_2}}, None),
    ("Metal3Machine", MACHINE_SPEC_1,
     {"ready": False, "addresses": ADDRESSES, "renderedData": REF, "metaData": {"name": "x-metadata"},
      "networkData": {"name": "x-networkdata"}, "userData": {"name": "user-data"}, "failureReason": "UpdateError",
      "failureMessage": "gone", "conditions": [V1_CONDITION], "v1beta2": {"conditions": [V2_CONDITION]}},
     MACHINE_SPEC_2,
     {"initialization": {"provisioned": False}, "addresses": ADDRESSES, "renderedData": REF,
      "metaData": {"name": "x-metadata"}, "networkData": {"name": "x-networkdata"}, "userData": {"name": "user-data"},
      "conditions": [V2_CONDITION],
      "deprecated": {"v1beta1": {"conditions": [V1_CONDITION], "failureReason": "UpdateError",
                                 "failureMessage": "gone"}}}),
    ("Metal3MachineTemplate",
     {"nodeReuse": True, "template": {"metadata": {"labels": {"a": "b"}}, "spec": MACHINE_SPEC_1},
      "failureDomainDataTemplates": [{"failureDomain": "az-a", "dataTemplate": REF}]}, None,
     {"nodeReuse": True, "template": {"metadata": {"labels": {"a": "b"}}, "spec": MACHINE_SPEC_2},
      "failureDomainDataTemplates": [{"failureDomain": "az-a", "dataTemplate": REF}]}, None),
    ("Metal3DataTemplate",
     {"clusterName": "c", "metaData": META_DATA_1, "networkData": NETWORK_DATA_1},
     {"indexes": {"m-1": 1, "m-0": 0}, "lastUpdated": "2026-01-01T00:00:00Z"},
     {"clusterName": "c", "metaData": META_DATA_2, "networkData": NETWORK_DATA_2},
     {"indexes": [{"name": "m-0", "index": 0}, {"name": "m-1", "index": 1}], "lastUpdated": "2026-01-01T00:00:00Z"}),
    ("Metal3DataTemplate",  # the seed's spelling, under spec.template, converts alike
     {"template": {"metaData": META_DATA_1, "networkData": NETWORK_DATA_1}}, None,
     {"template": {"metaData": META_DATA_2, "networkData": NETWORK_DATA_2}}, None),
    ("Metal3DataClaim", {"template": REF}, {"renderedData": {"name": "net-0", "namespace": "metal3"},
                                            "errorMessage": "none"},
     {"template": REF}, {"renderedData": {"name": "net-0", "namespace": "metal3"}, "errorMessage": "none"}),
    ("Metal3Data",
     {"index": 0, "claim": {"name": "x", "namespace": "metal3"}, "template": REF,
      "metaData": {"name": "x-metadata"}, "networkData": {"name": "x-networkdata"}},
     {"ready": True},
     {"index": 0, "claim": {"name": "x", "namespace": "metal3"}, "template": REF,
      "metaData": {"name": "x-metadata"}, "networkData": {"name": "x-networkdata"}},
     {"ready": True}),
    ("Metal3Data", {"index": 3, "claim": {}, "template": {}}, None, {"index": 3}, None),  # no reference is none
    ("Metal3Remediation", {"strategy": STRATEGY_1}, REMEDIATION_STATUS, {"strategy": STRATEGY_2}, REMEDIATION_STATUS),
    ("Metal3RemediationTemplate", {"template": {"spec": {"strategy": STRATEGY_1}}},
     {"status": REMEDIATION_STATUS}, {"template": {"spec": {"strategy": STRATEGY_2}}}, {"status": REMEDIATION_STATUS}),
]


@pytest.mark.parametrize(("kind", "spec1", "status1", "spec2", "status2"), EXACT,
                         ids=[f"{case[0]}-{i}" for i, case in enumerate(EXACT)])
def test_each_version_converts_to_the_other_exactly(kind, spec1, status1, spec2, status2):
    v1, v2 = obj(V1, kind, spec1, status1), obj(V2, kind, spec2, status2)
    assert convert(v1, V2) == v2
    assert convert(v2, V1) == v1


# (kind, object at one version) whose other version cannot hold all of it: the annotation keeps it
LOSSY = [
    obj(V1, "Metal3DataTemplate", {"templateReference": "old", "metaData": {"indexes": [{"key": "i", "step": 0}]}}),
    obj(V1, "Metal3Data", {"index": 0, "templateReference": "net", "claim": {"name": "x", "kind": "Metal3DataClaim"},
                           "template": {"name": "net", "apiVersion": V1, "uid": "1234"}}),
    obj(V1, "Metal3DataClaim", {"template": {"name": "net", "fieldPath": "spec"}}, {"renderedData": {}}),
    obj(V1, "Metal3Machine", {"dataTemplate": {"name": "net", "kind": "Metal3DataTemplate"}},
        {"phase": "Provisioned", "ready": True, "v1beta2": {}}),
    obj(V1, "Metal3Cluster", {"noCloudProvider": True, "failureDomains": {"az-a": {"controlPlane": False}}}),
    obj(V1, "Metal3Remediation", {"strategy": {"timeout": "300s"}}),
    obj(V1, "Metal3Remediation", {"strategy": {"timeout": "1.5h"}}),
    obj(V2, "Metal3Cluster", {"failureDomains": [{"name": "az-b"}, {"name": "az-a", "controlPlane": False}]},
        {"initialization": {}, "deprecated": {"v1beta1": {}}}),
    obj(V2, "Metal3ClusterTemplate", {"template": {"metadata": {"labels": {"tier": "infra"}}, "spec": {}}}),
    obj(V2, "Metal3DataTemplate",
        {"networkData": {"links": {"bonds": [{"id": "b", "bondMode": "802.3ad", "parameters": [{"name": "up"}]}]}}},
        {"indexes": [{"name": "m-1", "index": 1}, {"name": "m-0", "index": 0}]}),
    obj(V2, "Metal3Remediation", {"strategy": {"timeoutSeconds": 0}}),
    obj(V1, "Metal3Cluster", {"failureDomains": {}}, {"v1beta2": {"conditions": []}}, annotations={"a": "b"}),
]


@pytest.mark.parametrize("original", LOSSY,
                         ids=[f"{o['kind']}@{o['apiVersion'][-7:]}-{i}" for i, o in enumerate(LOSSY)])
def test_what_the_other_version_cannot_hold_survives_the_round_trip_in_the_annotation(original):
    other = V2 if original["apiVersion"] == V1 else V1
    converted = convert(original, other)
    kept = annotation(converted)
    assert kept is not None and kept["apiVersion"] == original["apiVersion"]
    assert convert(converted, original["apiVersion"]) == original


def test_the_annotation_is_upstreams_the_source_object_but_its_metadata_as_json():
    original = obj(V1, "Metal3Data", {"index": 0, "templateReference": "net", "claim": {"name": "x"},
                                      "template": {"name": "net"}})
    kept = annotation(convert(original, V2))
    assert kept == {key: value for key, value in original.items() if key != "metadata"}
    assert ANNOTATION == "cluster.x-k8s.io/conversion-data"


# (original, converted to the other version, edit made there, expected back at the original version)
EDITS = [
    # an edit of what both versions hold wins; what only the original holds is kept
    (obj(V2, "Metal3ClusterTemplate", {"template": {"metadata": {"labels": {"tier": "infra"}},
                                                    "spec": {"controlPlaneEndpoint": {"host": "a", "port": 1}}}}),
     lambda o: o["spec"]["template"]["spec"]["controlPlaneEndpoint"].update(port=6443),
     obj(V2, "Metal3ClusterTemplate", {"template": {"metadata": {"labels": {"tier": "infra"}},
                                                    "spec": {"controlPlaneEndpoint": {"host": "a", "port": 6443}}}})),
    (obj(V2, "Metal3Machine", {}, {"initialization": {"provisioned": True}}),
     lambda o: o["status"].update(ready=False),
     obj(V2, "Metal3Machine", {}, {"initialization": {"provisioned": False}})),
    (obj(V1, "Metal3Data", {"index": 0, "templateReference": "net", "claim": {"name": "x"}, "template": REF}),
     lambda o: o.update(status={"ready": True}),
     obj(V1, "Metal3Data", {"index": 0, "templateReference": "net", "claim": {"name": "x"}, "template": REF},
         {"ready": True})),
    (obj(V2, "Metal3Cluster", {"failureDomains": [{"name": "b"}, {"name": "a"}]}),
     lambda o: o["spec"]["failureDomains"].update(c={}),  # a new domain: the old order cannot be kept
     obj(V2, "Metal3Cluster", {"failureDomains": [{"name": "a"}, {"name": "b"}, {"name": "c"}]})),
    (obj(V1, "Metal3Remediation", {"strategy": {"type": "Reboot", "timeout": "300s"}}),
     lambda o: o["spec"]["strategy"].update(timeoutSeconds=600),
     obj(V1, "Metal3Remediation", {"strategy": {"type": "Reboot", "timeout": "10m0s"}})),
]


@pytest.mark.parametrize(("original", "edit", "expected"), EDITS, ids=[e[0]["kind"] for e in EDITS])
def test_an_edit_in_the_other_version_wins_over_the_annotation(original, edit, expected):
    other = convert(original, V2 if original["apiVersion"] == V1 else V1)
    edit(other)
    back = convert(other, original["apiVersion"])
    back.get("metadata", {}).pop("annotations", None)
    assert back == expected


def test_conversion_never_changes_its_input_and_returns_a_new_object():
    original = obj(V1, "Metal3Cluster", CLUSTER_SPEC_1, {"ready": True, "phase": "x"})
    before = copy.deepcopy(original)
    for target in (V1, V2):
        converted = convert(original, target)
        assert original == before
        assert converted is not original and converted["spec"] is not original["spec"]
    assert convert(original, V1) == original  # identity at its own version


def test_a_server_written_object_keeps_its_metadata():
    metadata = {"name": "x", "namespace": "metal3", "uid": "u-1", "resourceVersion": "7", "generation": 2,
                "labels": {"a": "b"}, "finalizers": ["f"], "ownerReferences": [{"apiVersion": "v1", "kind": "K",
                                                                                "name": "o", "uid": "u-0"}]}
    original = {"apiVersion": V1, "kind": "Metal3Machine", "metadata": metadata, "spec": MACHINE_SPEC_1}
    assert convert(original, V2)["metadata"] == metadata


def test_a_garbled_or_foreign_annotation_is_replaced_not_trusted():
    for text in ("not json", json.dumps({"apiVersion": V2, "kind": "Metal3Machine", "spec": {"providerID": "x"}})):
        original = obj(V2, "Metal3Cluster", {"cloudProviderEnabled": True}, annotations={ANNOTATION: text})
        converted = convert(original, V1)
        assert converted["spec"] == {"cloudProviderEnabled": True, "noCloudProvider": False}
        assert "annotations" not in converted["metadata"]


# (object, target, error, what the message names)
REFUSED = [
    (obj(V1, "Metal3Remediation", {"strategy": {"timeout": "five minutes"}}), V2, Invalid, "spec.strategy.timeout"),
    (obj(V1, "Metal3RemediationTemplate", {"template": {"spec": {"strategy": {"timeout": "5"}}}}), V2, Invalid,
     "spec.template.spec.strategy.timeout"),
    (obj(V1, "Metal3Machine"), "ipam.metal3.io/v1alpha1", BadRequest, "another API group"),
    (obj(V1, "Metal3Machine"), "infrastructure.cluster.x-k8s.io/v1alpha5", UnknownKind, "v1alpha5"),
    (obj("cluster.x-k8s.io/v1beta1", "Machine"), "cluster.x-k8s.io/v1beta2", BadRequest, "fields differ"),
    ("not an object", V2, BadRequest, "mapping"),
]


@pytest.mark.parametrize(("original", "target", "error", "named"), REFUSED, ids=[str(r[3]) for r in REFUSED])
def test_what_cannot_be_converted_is_refused_naming_why(original, target, error, named):
    with pytest.raises(error, match=re.escape(named)):
        convert(original, target)


def test_other_groups_convert_only_between_identical_shapes():
    pool = {"apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPPool", "metadata": {"name": "p"}}
    assert convert(pool, "ipam.metal3.io/v1alpha1") == pool
    assert sorted(CONVERTED_GROUPS) == ["infrastructure.cluster.x-k8s.io"]


# (apiVersion, kind, the apiVersion it is stored at)
STORAGE = [
    (V1, "Metal3Machine", V2),
    (V2, "Metal3DataTemplate", V2),
    (V1, "Metal3RemediationTemplate", V2),
    ("ipam.metal3.io/v1alpha1", "IPPool", "ipam.metal3.io/v1alpha1"),
    ("cluster.x-k8s.io/v1beta1", "Machine", "cluster.x-k8s.io/v1beta1"),  # stored as given
    ("v1", "Secret", "v1"),
]


@pytest.mark.parametrize(("api_version", "kind", "expected"), STORAGE)
def test_storage_version(api_version, kind, expected):
    assert storage_version(api_version, kind) == expected


# duration <-> seconds, as Cluster API's ConvertToSeconds / ConvertFromSeconds
DURATIONS = [("5m0s", 300, "5m0s"), ("300s", 300, "5m0s"), ("1h30m", 5400, "1h30m0s"), ("1.5h", 5400, "1h30m0s"),
             ("90m", 5400, "1h30m0s"), ("0", 0, None), ("2500ms", 2, "2s"), ("-1m", -60, "-1m0s")]


@pytest.mark.parametrize(("timeout", "seconds", "back"), DURATIONS)
def test_a_remediation_timeout_is_whole_seconds(timeout, seconds, back):
    converted = convert(obj(V1, "Metal3Remediation", {"strategy": {"timeout": timeout}}), V2)
    assert converted["spec"]["strategy"] == {"timeoutSeconds": seconds}
    plain = convert(obj(V2, "Metal3Remediation", {"strategy": {"timeoutSeconds": seconds}}), V1)
    assert plain["spec"]["strategy"] == ({"timeout": back} if back else {})


# -- upstream's fuzz idea: objects with every field of a version's schema set, and random subsets of them -------

SAMPLES = ["name-{n}", "52:54:00:00:00:{n:02x}", "192.168.0.{n}", "fd00::{n:x}", "10.{n}.0.0/16", "fd00:{n:x}::/64"]


class Filler:
    """Objects from a CRD schema: every field (``full``), or each optional one with even odds."""

    def __init__(self, seed: int | None):
        self.random = random.Random(seed)
        self.full = seed is None
        self.counter = 0

    def want(self) -> bool:
        return self.full or self.random.random() < 0.5

    def value(self, node: dict[str, Any], key: str) -> Any:
        self.counter += 1
        n = self.counter % 200 + 1
        if node.get("x-kubernetes-int-or-string") or (node.get("x-kubernetes-preserve-unknown-fields")
                                                      and "type" not in node):
            return self.random.choice([100, "fast"]) if not self.full else 100
        kind = node.get("type")
        if kind == "object":
            if node.get("x-kubernetes-preserve-unknown-fields") and "properties" not in node:
                return {"ok": n}
            if "properties" in node:
                required = set(node.get("required") or [])
                return {name: self.value(sub, name) for name, sub in node["properties"].items()
                        if name in required or self.want()}
            items = 2 if self.full else self.random.randint(0, 2)
            return {f"k{n}-{i}": self.value(node["additionalProperties"], key) for i in range(items)}
        if kind == "array":
            items = 2 if self.full else self.random.randint(0, 2)
            return [self.value(node["items"], key) for _item in range(items)]
        if kind == "boolean":
            return True if self.full else self.random.random() < 0.5
        if kind == "integer":
            low = node.get("minimum", 1)
            return self.random.randint(low, node.get("maximum", low + 1000)) if not self.full else low
        if node.get("enum"):
            return node["enum"][0] if self.full else self.random.choice(node["enum"])
        if key == "timeout":
            return "10m0s" if self.full else self.random.choice(["10m0s", "300s", "1h"])
        if "pattern" in node:
            for sample in SAMPLES:
                text = sample.format(n=n)
                if re.search(node["pattern"], text) and len(text) <= node.get("maxLength", 253):
                    return text
            raise AssertionError(f"no sample for the pattern {node['pattern']} of {key}")
        return f"{key}-{n}"


def generated(kind: str, api_version: str, seed: int | None) -> dict[str, Any]:
    schema = lookup(api_version, kind).schema_for(api_version.rpartition("/")[2])
    properties = {k: v for k, v in schema["properties"].items() if k in ("spec", "status")}
    body = Filler(seed).value({"type": "object", "properties": properties}, kind)
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "fuzzed", "namespace": "metal3"}, **body}


FUZZ = [(kind, version, seed) for kind in KINDS for version in (V1, V2) for seed in (None, *range(12))]


@pytest.mark.parametrize(("kind", "api_version", "seed"), FUZZ,
                         ids=[f"{k}@{v[-7:]}-{'full' if s is None else s}" for k, v, s in FUZZ])
def test_every_field_set_converted_there_and_back_is_equal(kind, api_version, seed):
    original = generated(kind, api_version, seed)
    other = V2 if api_version == V1 else V1
    converted = convert(original, other)
    try:  # the conversion writes only fields the other version has (values may break its own rules)
        validate(lookup(other, kind), converted)
    except Invalid:
        pass
    except BadRequest as e:
        raise AssertionError(f"{kind} at {other} has fields it does not know: {e}") from None
    assert convert(converted, api_version) == original
    assert convert(convert(converted, api_version), other) == converted


def schema_paths(node: dict[str, Any], path: str) -> set[str]:
    if "properties" in node:
        return set().union(*(schema_paths(sub, f"{path}.{key}") for key, sub in node["properties"].items()))
    if node.get("type") == "array":
        return schema_paths(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        return schema_paths(node["additionalProperties"], f"{path}{{}}")
    return {path}


def object_paths(value: Any, node: dict[str, Any], path: str) -> set[str]:
    if "properties" in node and isinstance(value, dict):
        return set().union(set(), *(object_paths(value[key], sub, f"{path}.{key}")
                                    for key, sub in node["properties"].items() if key in value))
    if node.get("type") == "array" and isinstance(value, list):
        return set().union(set(), *(object_paths(item, node["items"], f"{path}[]") for item in value))
    if isinstance(node.get("additionalProperties"), dict) and isinstance(value, dict):
        return set().union(set(), *(object_paths(item, node["additionalProperties"], f"{path}{{}}")
                                    for item in value.values()))
    return {path}


@pytest.mark.parametrize("kind", KINDS)
def test_a_fully_set_object_sets_every_field_of_its_version(kind):
    for api_version in (V1, V2):
        schema = lookup(api_version, kind).schema_for(api_version.rpartition("/")[2])
        full = generated(kind, api_version, None)
        for part in ("spec", "status"):
            if part in schema["properties"]:
                assert schema_paths(schema["properties"][part], part) == \
                    object_paths(full[part], schema["properties"][part], part)
