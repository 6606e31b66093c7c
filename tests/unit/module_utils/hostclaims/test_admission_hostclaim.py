"""Admission of HostClaims (baremetal-operator's webhook rules, with upstream's own test cases among the rows) and
of HostDeployPolicies (ours: upstream has no webhook), as tables: each row is admitted, or refused naming its
field with the text given."""
from __future__ import annotations

import time
from typing import Any

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils import engine
from ansible_collections.metal3.baremetal.plugins.module_utils.api.admission import RULED_KINDS, admit, rule_for
from ansible_collections.metal3.baremetal.plugins.module_utils.api.kinds import lookup
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest, Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.hostclaims.admission import (
    OPERATORS,
    admit_host_claim,
    admit_host_deploy_policy,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.store.admitted import admitted
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

API = "metal3.io/v1alpha1"
NS = "tenant-a"
CHECKSUM = "be254ebfd73e66ca91f6d91f5050aa2ee1ec4813ee65ba472f608ed340cbff09"
IMAGE = {"url": "http://images/os.qcow2", "checksum": CHECKSUM, "checksumType": "sha256", "format": "qcow2"}
# apimachinery's words, as upstream's webhook reports them.
NAME_PART = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
             "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
             "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
LABEL_VALUE = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
               "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
               "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
SUPPORTED = ', supported are "=", "==", "!=", "in", "notin", "exists", "!", "In", "NotIn", "Exists", "DoesNotExist"'


def claim(annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "claim-0", "namespace": NS}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"apiVersion": API, "kind": "HostClaim", "metadata": metadata, "spec": {"poweredOn": True, **spec}}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"hostSelector": {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}}


def policy(**namespaces: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "HostDeployPolicy", "metadata": {"name": "tenants", "namespace": "infra"},
            "spec": {"hostClaimNamespaces": namespaces}}


E0 = "spec.hostSelector.matchExpressions[0]"

# (case, the claim, (field, text) or None when it is admitted)
CLAIM_CASES = [
    ("upstream valid", claim(**expr("key", "=", "value")), None),
    ("no selector at all", claim(), None),
    ("matchLabels, prefixed key", claim(hostSelector={"matchLabels": {"example.com/rack": "r1", "zone": ""}}), None),
    ("upstream bad label key", claim(hostSelector={"matchLabels": {"-key-": "value"}}),
     ("spec.hostSelector.matchLabels[-key-]", f"-key-=value: {NAME_PART}")),
    ("upstream bad label value", claim(hostSelector={"matchLabels": {"key": "-value-"}}),
     ("spec.hostSelector.matchLabels[key]", f"key=-value-: {LABEL_VALUE}")),
    ("label value too long", claim(hostSelector={"matchLabels": {"key": "v" * 64}}),
     ("spec.hostSelector.matchLabels[key]", f"key={'v' * 64}: must be no more than 63 characters")),
    ("label key with an empty prefix", claim(hostSelector={"matchLabels": {"/rack": "r1"}}),
     ("spec.hostSelector.matchLabels[/rack]", "/rack=r1: prefix part must be non-empty")),
    ("upstream bad expression key", claim(**expr("-key-", "=", "value")), (f"{E0}.key", f"matchExpr 1: {NAME_PART}")),
    ("upstream = with two values", claim(**expr("key", "=", "v1", "v2")),
     (f"{E0}.values", "matchExpr 1: exactly one value for operator = in match expression on label key key")),
    ("== with no value", claim(**expr("key", "==")),
     (f"{E0}.values", "matchExpr 1: exactly one value for operator == in match expression on label key key")),
    ("!= with one value", claim(**expr("key", "!=", "v")), None),
    ("upstream bad value of =", claim(**expr("key", "=", "-vvv-")),
     (f"{E0}.values[0]", f'matchExpr 1 (value "-vvv-"): {LABEL_VALUE}')),
    ("upstream exists with a value", claim(**expr("key", "exists", "v")),
     (f"{E0}.values", "matchExpr 1: values not authorized for operator exists in match expression on label key key")),
    ("exists without values", claim(**expr("key", "exists")), None),
    ("! without values", claim(**expr("key", "!")), None),
    ("upstream bad value of in", claim(**expr("key", "in", "good", "-bad-")),
     (f"{E0}.values[1]", f'matchExpr 1 (value "-bad-"): {LABEL_VALUE}')),
    ("in with no value", claim(**expr("key", "in")),
     (f"{E0}.values", "matchExpr 1: At least one value in list for operator in in match expression on label key key")),
    ("notin with two values", claim(**expr("key", "notin", "a", "b")), None),
    ("Kubernetes' In", claim(**expr("key", "In", "a", "b")), None),
    ("Kubernetes' NotIn with no value", claim(**expr("key", "NotIn")),
     (f"{E0}.values", "matchExpr 1: At least one value in list for operator NotIn in match expression on label key "
                      "key")),
    ("Kubernetes' Exists", claim(**expr("key", "Exists")), None),
    ("Kubernetes' DoesNotExist with a value", claim(**expr("key", "DoesNotExist", "v")),
     (f"{E0}.values", "matchExpr 1: values not authorized for operator DoesNotExist in match expression on label "
                      "key key")),
    ("upstream bad operator", claim(**expr("key", "badOp", "v")),
     (f"{E0}.operator", f"matchExpr 1: invalid operation badOp in match expression on label key key{SUPPORTED}")),
    ("Kubernetes' Gt is not a host selector's", claim(**expr("key", "Gt", "1")),
     (f"{E0}.operator", f"matchExpr 1: invalid operation Gt in match expression on label key key{SUPPORTED}")),
    ("apimachinery's gt is not upstream's webhook's", claim(**expr("key", "gt", "1")),
     (f"{E0}.operator", f"matchExpr 1: invalid operation gt in match expression on label key key{SUPPORTED}")),
    ("IN is neither spelling", claim(**expr("key", "IN", "a")),
     (f"{E0}.operator", f"matchExpr 1: invalid operation IN in match expression on label key key{SUPPORTED}")),
    ("the second expression is numbered 2", claim(hostSelector={"matchExpressions": [
        {"key": "a", "operator": "in", "values": ["x"]}, {"key": "b", "operator": "Contains", "values": ["x"]}]}),
     ("spec.hostSelector.matchExpressions[1].operator",
      f"matchExpr 2: invalid operation Contains in match expression on label key b{SUPPORTED}")),
    ("reboot annotation, soft", claim(annotations={"reboot.metal3.io": '{"mode": "soft"}'}), None),
    ("reboot annotation, bad mode", claim(annotations={"reboot.metal3.io/tenant": '{"mode": "medium"}'}),
     ("metadata.annotations[reboot.metal3.io/tenant]",
      'invalid mode in the reboot.metal3.io annotation, allowed are "hard", "soft" or ""')),
    ("reboot annotation, not JSON", claim(annotations={"reboot.metal3.io": "{"}),
     ("metadata.annotations[reboot.metal3.io]",
      "failed to unmarshal the data from the reboot.metal3.io annotation: unexpected EOF")),
    ("other annotations are the tenant's", claim(annotations={"example.com/anything": "{"}), None),
    ("image", claim(image=IMAGE), None),
    ("upstream bad image URL", claim(image={**IMAGE, "url": "test1"}),
     ("spec.image.url", 'image URL test1 is invalid: parse "test1": invalid URI for request')),
    ("image without checksum", claim(image={"url": "http://images/os.qcow2"}),
     ("spec.image.checksum", "checksum is required for normal images")),
    ("live ISO without checksum", claim(image={"url": "http://images/live.iso", "format": "live-iso"}), None),
    ("user data of the claim's namespace", claim(userData={"name": "user-data", "namespace": NS}), None),
    ("user data of another namespace", claim(userData={"name": "bmc-secret", "namespace": "infra"}),
     ("spec.userData", "cross-namespace Secret references are not allowed")),
    ("network data of another namespace", claim(networkData={"name": "n", "namespace": "infra"}),
     ("spec.networkData", "cross-namespace Secret references are not allowed")),
    # Ours: the class of compute (upstream's hybrid-cluster design names spec.kind and spec.args).
    ("kind libvirt with args", claim(kind="libvirt", args={"cpus": "2", "memory": "2Gi", "nics": "2"}), None),
    ("kind baremetal", claim(kind="baremetal"), None),
    ("a kind not served here", claim(kind="kubevirt"),
     ("spec.kind", "'kubevirt' is not a class of compute served here (baremetal, libvirt)")),
    ("args of kind libvirt that are not", claim(kind="libvirt", args={"memory": "lots"}),
     ("spec.args.memory", "'lots' is not a quantity")),
    ("args for bare metal", claim(args={"cpus": "2"}), ("spec.args", "kind baremetal takes no args")),
    ("a virtual machine reached through another cluster", claim(kind="libvirt", identityRef={"name": "k"}),
     ("spec.identityRef", "a claim of kind libvirt is served here, not by another cluster's hosts")),
    ("a virtual machine with a custom deploy", claim(kind="libvirt", customDeploy={"method": "m"}),
     ("spec.customDeploy", "a claim of kind libvirt boots spec.image")),
    # Ours (issue 30): what the controller itself fetches for a virtual machine is http(s), and its size is sane.
    ("a virtual machine's image and checksum file over http(s)",
     claim(kind="libvirt", image={**IMAGE, "checksum": "https://images/SHA256SUMS"}), None),
    ("a virtual machine's checksum file on the controller's file system",
     claim(kind="libvirt", image={**IMAGE, "checksum": "file:///etc/passwd"}),
     ("spec.image.checksum", "'file:///etc/passwd' is not an http or https URL")),
    ("a virtual machine's image over ftp", claim(kind="libvirt", image={**IMAGE, "url": "ftp://images/os.qcow2"}),
     ("spec.image.url", "'ftp://images/os.qcow2' is not an http or https URL")),
    ("a virtual machine's checksum file over gopher",
     claim(kind="libvirt", image={**IMAGE, "checksum": "gopher://images/SUMS"}),
     ("spec.image.checksum", "'gopher://images/SUMS' is not an http or https URL")),
    ("a bare-metal claim's image over ftp: Ironic's to fetch, as upstream", claim(image={**IMAGE, "url": "ftp://i/o"}),
     None),
    ("a virtual machine of 1e5000 bytes", claim(kind="libvirt", args={"memory": "1e5000"}),
     ("spec.args.memory", "'1e5000' is not a quantity")),
    ("a virtual machine of 1e999999 bytes", claim(kind="libvirt", args={"memory": "1e999999"}),
     ("spec.args.memory", "'1e999999' is not a quantity")),
    ("a virtual machine of 1Ei of memory", claim(kind="libvirt", args={"memory": "1Ei"}),
     ("spec.args.memory", "'1Ei' is more than 16Ti")),
    ("a virtual machine of a 1Pi disk", claim(kind="libvirt", args={"disk": "1Pi"}),
     ("spec.args.disk", "'1Pi' is more than 64Ti")),
    ("a virtual machine of an arg not known", claim(kind="libvirt", args={"gpus": "8"}),
     ("spec.args.gpus", "unknown for kind libvirt")),
]

P = "spec.hostClaimNamespaces"
# (case, the policy, (field, text) or None when it is admitted)
# The project's one wording for a name that is no namespace name (core/objects.py dns_label_problem).
LABEL_RULE = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
              "and end with an alphanumeric character")
POLICY_CASES = [
    ("names", policy(names=["tenant-a", "tenant-b"]), None),
    ("every constraint", policy(names=["tenant-a"], nameMatches="^tenant-", hasLabels=[
        {"name": "example.com/tenant", "value": "yes"}, {"name": "team"}]), None),
    ("no constraint", {**policy(), "spec": {}}, None),
    ("a name that is no namespace name", policy(names=["tenant-a", "Tenant_B"]),
     (f"{P}.names[1]", f"not a namespace name: Invalid value: 'Tenant_B': {LABEL_RULE}")),
    ("a name with dots", policy(names=["tenant.a"]),
     (f"{P}.names[0]", f"not a namespace name: Invalid value: 'tenant.a': {LABEL_RULE}")),
    ("a name too long", policy(names=["t" * 64]),
     (f"{P}.names[0]", f"not a namespace name: Invalid value: '{'t' * 64}': {LABEL_RULE}")),
    ("nameMatches, a regular expression", policy(nameMatches=r"^(dev|prod)-\d+$"), None),
    ("nameMatches that does not compile", policy(nameMatches="(tenant"),
     (f"{P}.nameMatches", "'(tenant' is not a valid regular expression: missing ), unterminated subpattern at "
                          "position 0")),
    ("nameMatches, a lone quantifier", policy(nameMatches="*"),
     (f"{P}.nameMatches", "'*' is not a valid regular expression: nothing to repeat at position 0")),
    ("hasLabels, a bad key", policy(hasLabels=[{"name": "-team-"}]),
     (f"{P}.hasLabels[0].name", f'"-team-" is not a label key: {NAME_PART}')),
    ("hasLabels, a key with two slashes", policy(hasLabels=[{"name": "a/b/c"}]),
     (f"{P}.hasLabels[0].name", '"a/b/c" is not a label key: a qualified name must consist of alphanumeric')),
    ("hasLabels, a bad value", policy(hasLabels=[{"name": "team", "value": "a b"}]),
     (f"{P}.hasLabels[0].value", f'"a b" is not a label value: {LABEL_VALUE}')),
]


def refusal(rule: Any, obj: dict[str, Any]) -> str | None:
    try:
        rule(None, obj, None)  # the rules read no store
    except Invalid as e:
        return str(e)
    return None


@pytest.mark.parametrize(("obj", "wanted"), [c[1:] for c in CLAIM_CASES], ids=[c[0] for c in CLAIM_CASES])
def test_host_claims(obj, wanted):
    refused = refusal(admit_host_claim, obj)
    if wanted is None:
        assert refused is None
    else:
        assert refused is not None and refused.startswith('HostClaim.metal3.io "claim-0" is invalid: ')
        assert f"{wanted[0]}: {wanted[1]}" in refused


@pytest.mark.parametrize(("obj", "wanted"), [c[1:] for c in POLICY_CASES], ids=[c[0] for c in POLICY_CASES])
def test_host_deploy_policies(obj, wanted):
    refused = refusal(admit_host_deploy_policy, obj)
    if wanted is None:
        assert refused is None
    else:
        assert refused is not None and refused.startswith('HostDeployPolicy.metal3.io "tenants" is invalid: ')
        assert f"{wanted[0]}: {wanted[1]}" in refused


def test_the_tables_hold_valid_and_invalid_rows():
    for cases in (CLAIM_CASES, POLICY_CASES):
        assert {c[2] is None for c in cases} == {True, False}
    assert len(CLAIM_CASES) + len(POLICY_CASES) >= 25


def test_every_problem_is_named_at_once():
    refused = refusal(admit_host_claim, claim(
        annotations={"reboot.metal3.io": "{"}, image={**IMAGE, "url": "test1"},
        hostSelector={"matchLabels": {"-k-": "v"}, "matchExpressions": [{"key": "k", "operator": "Gt", "values": []}]}))
    assert refused is not None and refused.count("; ") == 3
    for field in ("spec.hostSelector.matchLabels[-k-]", f"{E0}.operator", "metadata.annotations[reboot.metal3.io]",
                  "spec.image.url"):
        assert f"{field}: " in refused


def test_the_rules_are_registered_by_the_engine():
    assert engine.DOMAINS  # the engine imports hostclaims/admission.py
    assert {("metal3.io", "HostClaim"), ("metal3.io", "HostDeployPolicy")} <= RULED_KINDS
    assert rule_for(API, "HostClaim") is admit_host_claim
    assert rule_for(API, "HostDeployPolicy") is admit_host_deploy_policy
    assert rule_for(API, "HardwareData") is None  # written by the engine, never by hand: upstream has no webhook
    assert len(OPERATORS) == 11


def test_the_kinds_come_from_their_crds():
    hostclaim, policy_kind, hardware = (lookup(API, k) for k in ("HostClaim", "HostDeployPolicy", "HardwareData"))
    assert (hostclaim.plural, hostclaim.status_subresource) == ("hostclaims", True)
    assert (policy_kind.plural, policy_kind.status_subresource) == ("hostdeploypolicies", True)
    assert (hardware.plural, hardware.status_subresource) == ("hardwaredata", False)
    assert all(k.namespaced for k in (hostclaim, policy_kind, hardware))
    assert {"state", "addresses", "bareMetalHost", "virtualMachine", "hardwareData", "poweredOn", "conditions",
            "lastUpdated"} == \
        set(hostclaim.schema["properties"]["status"]["properties"])


def test_the_schema_is_held_before_the_rules():
    with pytest.raises(Invalid, match=r"spec\.poweredOn: Required value"):
        admit(None, {**claim(), "spec": {}}, None)  # type: ignore[arg-type]
    with pytest.raises(Invalid, match=r"hostSelector\.matchExpressions\[0\]\.values: Required value"):
        admit(None, claim(hostSelector={"matchExpressions": [{"key": "k", "operator": "exists"}]}),  # type: ignore
              None)
    with pytest.raises(BadRequest, match='unknown field "spec.hostClaimNamespaces.bogus"'):
        admit(None, policy(bogus=1), None)  # type: ignore[arg-type]


def test_absurd_quantities_are_refused_fast():
    for value in ("1e5000", "1e999999", "1e" + "9" * 5000, "9" * 100000):
        started = time.process_time()
        refused = refusal(admit_host_claim, claim(kind="libvirt", args={"memory": value}))
        assert refused is not None and "spec.args.memory: " in refused and len(refused) < 1000
        assert time.process_time() - started < 0.5


def test_every_write_of_a_virtual_machines_urls_is_admitted(tmp_path):
    """Create, update and patch: each refuses a checksum file on the controller's file system."""
    with admitted(LocalStore(str(tmp_path / "store.db"))) as store:
        evil = {**IMAGE, "checksum": "file:///etc/passwd"}
        with pytest.raises(Invalid, match=r"spec\.image\.checksum: 'file:///etc/passwd' is not an http or https URL"):
            store.create(claim(kind="libvirt", image=evil))
        stored = store.create(claim(kind="libvirt", image=IMAGE))
        with pytest.raises(Invalid, match=r"spec\.image\.checksum: 'file:///etc/passwd' is not an http"):
            store.patch(Ref.of(stored), {"spec": {"image": {"checksum": "file:///etc/passwd"}}})
        with pytest.raises(Invalid, match=r"spec\.image\.url: 'file:///etc/passwd' is not an http"):
            store.update({**stored, "spec": {**stored["spec"], "image": {**IMAGE, "url": "file:///etc/passwd"}}})
        with pytest.raises(Invalid, match=r"spec\.args\.memory: '1e5000' is not a quantity"):
            store.patch(Ref.of(stored), {"spec": {"args": {"memory": "1e5000"}}})
        # A bare-metal claim switched to a virtual machine is one: its image is held to the same rule.
        bare = store.create({**claim(image={**IMAGE, "url": "ftp://images/os.qcow2"}),
                             "metadata": {"name": "claim-1", "namespace": NS}})
        with pytest.raises(Invalid, match=r"spec\.image\.url: 'ftp://images/os\.qcow2' is not an http"):
            store.patch(Ref.of(bare), {"spec": {"kind": "libvirt"}})
        assert store.get(Ref.of(stored))["spec"]["image"] == IMAGE


def test_the_store_admits_every_write_but_status_ones(tmp_path):
    with admitted(LocalStore(str(tmp_path / "store.db"))) as store:
        with pytest.raises(Invalid, match=r"matchExpressions\[0\]\.operator: matchExpr 1: invalid operation Gt"):
            store.create(claim(**expr("rack", "Gt", "1")))
        stored = store.create(claim(**expr("rack", "In", "r1", "r2")))
        with pytest.raises(Invalid, match=r"spec\.userData: cross-namespace Secret references are not allowed"):
            store.patch(Ref.of(stored), {"spec": {"userData": {"name": "bmc", "namespace": "infra"}}})
        store.patch_status(Ref.of(stored), {"status": {"state": "provisioned", "poweredOn": True, "addresses": [
            {"type": "InternalIP", "address": "192.168.111.20"}, {"type": "Hostname", "address": "node-0"}]}})
        assert store.get(Ref.of(stored))["status"]["state"] == "provisioned"
        with pytest.raises(Invalid, match=r"nameMatches: '\[a-' is not a valid regular expression"):
            store.create(policy(nameMatches="[a-"))
