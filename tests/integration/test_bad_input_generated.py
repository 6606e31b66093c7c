"""Generated bad input (issue 12): malformed manifests from the CRD schemas, malformed module arguments from the
modules' argument specs. Each must fail with a message naming the field, leave the store byte-identical, and
never reach the user as a traceback (the engine's "internal error" is the traceback's stand-in here).

The cases are enumerated from the schemas, not sampled at random, so a failure names one reproducible case.
"""
from __future__ import annotations

import copy
import hashlib
import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Metal3Error
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import MAX_OBJECT_BYTES, Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import apply, complete, load_definitions
from ansible_collections.metal3.baremetal.plugins.module_utils.store.kube import KubernetesStore
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from ansible_collections.metal3.baremetal.plugins.plugin_utils.engine_action import run_spec
from tests.integration.crd_schemas import SCHEMAS, set_path, shown, walk

NS = "fuzz"
# A valid object of each kind: every case is one of these with one thing made wrong.
BASELINES: dict[str, dict[str, Any]] = {
    "Metal3Cluster": {"controlPlaneEndpoint": {"host": "192.168.111.249", "port": 6443}},
    "Metal3Machine": {"image": {"url": "http://images/os.img", "checksum": "http://images/os.img.sha256"}},
    "Metal3MachineTemplate": {"template": {"spec": {}}},
    "Metal3DataTemplate": {"clusterName": "c"},
    "Metal3DataClaim": {"template": {"name": "t"}},
    "Metal3Data": {"index": 0, "template": {"name": "t"}, "claim": {"name": "c"}},
    "IPPool": {"namePrefix": "p", "pools": [{"start": "192.168.0.10", "end": "192.168.0.20"}], "prefix": 24},
    "IPClaim": {"pool": {"name": "p"}},
    "IPAddress": {"address": "192.168.0.10", "pool": {"name": "p"}, "claim": {"name": "c"}},
    "IPPrefixPool": {"prefixes": ["10.8.0.0/21"], "prefixLength": 24},
    "IPPrefixClaim": {"pool": {"name": "p"}},
    "IPPrefix": {"pool": {"name": "p"}, "claim": {"name": "c"}, "prefix": "10.8.0.0/24"},
    "BareMetalHost": {"online": False, "bmc": {"address": "redfish://bmc/redfish/v1/Systems/1",
                                               "credentialsName": "bmc"}},
    "HostClaim": {"poweredOn": False, "hostSelector": {"matchLabels": {"rack": "r1"}}},
    "HostDeployPolicy": {"hostClaimNamespaces": {"names": ["tenant-a"]}},
    "HardwareData": {"hardware": {"hostname": "node-0", "ramMebibytes": 4096}},
    "HostFirmwareSettings": {"settings": {"ProcVirtualization": "Disabled", "NetworkBootRetryCount": 20}},
    "FirmwareSchema": {"hardwareVendor": "QEMU", "schema": {
        "ProcVirtualization": {"attribute_type": "Enumeration", "allowable_values": ["Enabled", "Disabled"]},
        "NetworkBootRetryCount": {"attribute_type": "Integer", "lower_bound": 0, "upper_bound": 20,
                                  "read_only": False, "unique": False}}},
    "HostFirmwareComponents": {"updates": [{"component": "bmc", "url": "http://firmware/bmc.bin"}]},
    "HostUpdatePolicy": {"firmwareSettings": "onReboot", "firmwareUpdates": "onReboot"},
    "DataImage": {"url": "http://images/data.iso"},
    "PreprovisioningImage": {"networkDataName": "node-0-network-data", "architecture": "x86_64",
                             "acceptFormats": ["iso"]},
    "MachineType": {"constraints": [{"type": "cores", "min": 4, "max": 8}, {"type": "memory", "min": "16Gi"}]},
    "MetalStackCluster": {"partition": "vagrant", "controlPlaneEndpoint": {"host": "100.255.254.1", "port": 6443},
                          "firewallSpec": {"image": "firewall-ubuntu-2.0", "machineType": "v1-small-x86",
                                           "ingressRules": [{"ports": [443], "from": ["0.0.0.0/0"]}]}},
    "MetalStackMachine": {"image": "ubuntu-cloud-init-20.04", "machineType": "v1-small-x86"},
    "MetalStackFirewall": {"image": "firewall-ubuntu-2.0", "machineType": "v1-small-x86",
                           "egressRules": [{"ports": [53], "protocol": "UDP", "to": ["9.9.9.9/32"]}]},
}
WRONG_TYPE = {"string": 12345, "integer": "not-a-number", "number": "not-a-number", "boolean": "maybe",
              "array": "not-a-list", "object": "not-a-map"}
# Semantic rules beyond the schema (upstream's webhooks), with the field each must name.
SEMANTIC = [
    ("IPPool", "spec.pools[0].start", {"pools": [{"start": "300.1.1.1", "end": "192.168.0.20"}]}),
    ("IPPool", "spec.pools[0].end", {"pools": [{"start": "192.168.0.10", "end": "not-an-ip"}]}),
    ("IPPool", "spec.pools[0].subnet", {"pools": [{"subnet": "192.168.0.0/33"}]}),
    ("IPPool", "spec.pools[0].gateway", {"pools": [{"start": "192.168.0.10", "end": "192.168.0.20",
                                                   "gateway": "gateway"}]}),
    ("IPPool", "spec.prefix", {"prefix": 99}),
    ("IPPool", "spec.namePrefix", {"namePrefix": "Not_A_Name"}),
    ("IPPool", "spec.preAllocations", {"preAllocations": {"c": "10.0.0.1"}}),
    ("IPPrefixPool", "spec.prefixes[0]", {"prefixes": ["10.8.0.1/21"]}),
    ("IPPrefixPool", "spec.prefixes[1]", {"prefixes": ["10.8.0.0/21", "10.8.4.0/22"]}),
    ("IPPrefixPool", "spec.prefixLength", {"prefixLength": 16}),
    ("IPPrefixPool", "spec.prefixLength", {"prefixes": ["10.8.0.0/21", "fd00:10::/48"], "prefixLength": 64}),
    ("BareMetalHost", "spec.bootMACAddress", {"bootMACAddress": "zz:zz:zz:zz:zz:zz"}),
    ("HostClaim", "spec.hostSelector.matchExpressions[0].operator",
     {"hostSelector": {"matchExpressions": [{"key": "rack", "operator": "Gt", "values": ["1"]}]}}),
    ("HostDeployPolicy", "spec.hostClaimNamespaces.nameMatches", {"hostClaimNamespaces": {"nameMatches": "(tenant"}}),
    ("DataImage", "spec.url", {"url": "file:///etc/passwd"}),
    ("HostFirmwareComponents", "spec.updates[0].url", {"updates": [{"component": "bmc", "url": "bmc.bin"}]}),
    ("MachineType", "spec.constraints[1].min",
     {"constraints": [{"type": "cores", "min": 4}, {"type": "memory", "min": "16Xi"}]}),
    ("MachineType", "spec.constraints[0].max", {"constraints": [{"type": "cores", "min": 8, "max": 4}]}),
    ("MachineType", "spec.constraints[1].type",
     {"constraints": [{"type": "nics", "min": 1}, {"type": "nics", "max": 2}]}),
    ("MetalStackMachine", "spec.size", {"image": "i", "machineType": "v1-small-x86", "size": "c1-large-x86"}),
    ("MetalStackFirewall", "spec.ingressRules[0].ports[0]",
     {"image": "i", "ingressRules": [{"ports": [70000], "from": ["0.0.0.0/0"]}]}),
    ("MetalStackFirewall", "spec.egressRules[0].to[0]",
     {"image": "i", "egressRules": [{"ports": [53], "to": ["10.0.0.0/33"]}]}),
    ("MetalStackCluster", "spec.firewallSpec.egressRules[0].bogus",
     {"partition": "p", "firewallSpec": {"egressRules": [{"ports": [1], "to": ["0.0.0.0/0"], "bogus": 1}]}}),
    *[("HostClaim", field, {"kind": "libvirt", **spec}) for field, spec in [
        # What the controller itself fetches for a virtual machine (issue 30): http(s) only.
        ("spec.image.checksum", {"image": {"url": "http://images/os.qcow2", "checksum": "file:///etc/passwd"}}),
        ("spec.image.checksum", {"image": {"url": "http://images/os.qcow2", "checksum": "gopher://images/SUMS"}}),
        ("spec.image.url", {"image": {"url": "ftp://images/os.qcow2", "checksum": "0" * 64}}),
        ("spec.image.url", {"image": {"url": "file:///var/lib/libvirt/images/other.qcow2", "checksum": "0" * 64}}),
        # Its size: absurd quantities, refused before anything is computed; an arg no machine reads.
        ("spec.args.memory", {"args": {"memory": "1e5000"}}),
        ("spec.args.memory", {"args": {"memory": "1e999999"}}),
        ("spec.args.memory", {"args": {"memory": "1Ei"}}),
        ("spec.args.memory", {"args": {"memory": "9223372036854775808"}}),
        ("spec.args.disk", {"args": {"disk": "1Pi"}}),
        ("spec.args.disk", {"args": {"disk": "-10Gi"}}),
        ("spec.args.cpus", {"args": {"cpus": "9" * 5000}}),
        ("spec.args.nics", {"args": {"nics": "0"}}),
        ("spec.args.gpus", {"args": {"gpus": "1"}}),
    ]],
]


@dataclass(frozen=True)
class Case:
    what: str
    field: str  # the field the message must name
    obj: Any  # a manifest (dict), or YAML text

    def __str__(self) -> str:
        return f"{self.what} @ {self.field}"


def baseline(kind: str, name: str = "fuzzed") -> dict[str, Any]:
    return {"apiVersion": SCHEMAS[kind][0], "kind": kind, "metadata": {"name": name, "namespace": NS},
            "spec": copy.deepcopy(BASELINES[kind])}


def schema_cases() -> list[Case]:
    cases = []
    for kind in BASELINES:
        spec_schema = SCHEMAS[kind][1]["properties"]["spec"]
        for parts, node in walk(spec_schema, ["spec"]):
            if node.get("x-kubernetes-int-or-string"):
                cases.append(Case(f"{kind}: a list for an int-or-string", shown(parts), (kind, parts, ["x"])))
            elif node.get("type") in WRONG_TYPE and len(parts) > 1:
                cases.append(Case(f"{kind}: wrong type", shown(parts), (kind, parts, WRONG_TYPE[node["type"]])))
            if node.get("enum"):
                cases.append(Case(f"{kind}: not in the enum", shown(parts), (kind, parts, "NotInTheEnum")))
            if node.get("pattern"):
                cases.append(Case(f"{kind}: against the pattern", shown(parts), (kind, parts, "../../Not/A/Name")))
            if "maximum" in node:
                cases.append(Case(f"{kind}: above the maximum", shown(parts), (kind, parts, node["maximum"] + 1)))
            if "minimum" in node:
                cases.append(Case(f"{kind}: below the minimum", shown(parts), (kind, parts, node["minimum"] - 1)))
            if node.get("type") == "object" and node.get("properties") \
                    and not node.get("x-kubernetes-preserve-unknown-fields"):
                cases.append(Case(f"{kind}: an unknown field", shown([*parts, "bogusField"]),
                                  (kind, [*parts, "bogusField"], 1)))
        for required in spec_schema.get("required") or []:
            cases.append(Case(f"{kind}: a required field missing", f"spec.{required}", (kind, None, required)))
    return cases


def metadata_cases() -> list[Case]:
    bad = [
        ("metadata.name", ["metadata", "name"], "../../other/secrets/x"),
        ("metadata.name", ["metadata", "name"], "Upper_Case"),
        ("metadata.name", ["metadata", "name"], "x" * 254),
        ("metadata.namespace", ["metadata", "namespace"], "a/b"),
        ("metadata.labels", ["metadata", "labels"], {"bad key!": "v"}),
        ("metadata.labels", ["metadata", "labels"], {"k": "v" * 64}),
        ("metadata.labels", ["metadata", "labels"], "not-a-map"),
        ("metadata.annotations", ["metadata", "annotations"], {"k": 5}),
        ("metadata.finalizers", ["metadata", "finalizers"], "not-a-list"),
        ("metadata.ownerReferences[0].uid", ["metadata", "ownerReferences"], [{"apiVersion": "v1", "kind": "X",
                                                                               "name": "x"}]),
    ]
    return [Case(f"{kind}: bad {field}", field, (kind, parts, value))
            for kind in BASELINES for field, parts, value in bad]


def other_cases() -> list[Case]:
    cases = [Case(f"{kind}: {field} semantic", field, ("semantic", kind, spec)) for kind, field, spec in SEMANTIC]
    for kind in BASELINES:
        text = f"apiVersion: {SCHEMAS[kind][0]}\nkind: {kind}\nmetadata: {{name: x, namespace: {NS}}}\nspec: "
        cases.append(Case(f"{kind}: nested too deeply", "definition", text + "[" * 200 + "]" * 200))
        cases.append(Case(f"{kind}: malformed YAML", "definition", text + "{a: [\n"))
        cases.append(Case(f"{kind}: not a mapping", "definition", "- just\n- a list\n"))
    big = baseline("Metal3Machine")
    big["spec"]["image"]["url"] = "http://images/" + "c" * MAX_OBJECT_BYTES
    cases.append(Case("oversized", "Request entity too large", big))
    return cases


def build(case: Case) -> Any:
    if not isinstance(case.obj, tuple):
        return case.obj
    if case.obj[0] == "semantic":
        obj = baseline(case.obj[1])
        obj["spec"].update(case.obj[2])
        return obj
    kind, parts, value = case.obj
    obj = baseline(kind)
    if parts is None:
        obj["spec"].pop(value, None)
    else:
        set_path(obj, list(parts), value)
    return obj


MANIFEST_CASES = schema_cases() + metadata_cases() + other_cases()


def named(field: str, message: str) -> bool:
    """Whether ``message`` names ``field``, in either store's spelling (a.b[0].c, a[b].c, a.b.c for a list)."""
    words = [w for w in re.split(r"[.\[\]]+", field) if w]
    pattern = re.escape(words[0])
    for word in words[1:]:  # a list index may be left out (kube-apiserver's metadata.ownerReferences.uid)
        pattern += rf"(\W+{word})?" if word.isdigit() else rf"\W+{re.escape(word)}"
    return bool(re.search(pattern, message))


def named_by_the_cluster(field: str, message: str) -> bool:
    """kube-apiserver names a malformed metadata map by its Go field (ObjectMeta.annotations)."""
    return named(field, message) or (field.startswith("metadata.") and f"ObjectMeta.{field[9:]}" in message)


def fingerprint(path: Path) -> str:
    digest = hashlib.sha256()
    for suffix in ("", "-wal"):
        part = Path(f"{path}{suffix}")
        digest.update(part.read_bytes() if part.exists() else b"")
    return digest.hexdigest()


def apply_manifest(store: Any, manifest: Any) -> None:
    objects = [complete(o, None, None, None, NS, "definition") for o in load_definitions(manifest)]
    apply(store, objects, "present")


def test_there_are_at_least_300_generated_manifests_over_every_kind():
    assert len(MANIFEST_CASES) >= 300
    assert {c.what.split(":")[0] for c in MANIFEST_CASES} >= set(BASELINES)


def test_each_baseline_is_valid(tmp_path):
    with LocalStore(str(tmp_path / "store.db")) as store:
        for kind in BASELINES:
            apply_manifest(store, baseline(kind, "valid"))


def test_every_generated_manifest_fails_naming_the_field_and_changes_nothing_on_the_local_store(tmp_path):
    path = tmp_path / "store.db"
    failures = []
    with LocalStore(str(path)) as store:
        apply_manifest(store, baseline("IPPool", "existing"))  # something for the store to keep as it is
        before = fingerprint(path)
        for case in MANIFEST_CASES:
            try:
                apply_manifest(store, build(case))
                failures.append(f"{case}: accepted")
            except Metal3Error as e:
                if not named(case.field, str(e)):
                    failures.append(f"{case}: {e}")
            except Exception as e:  # noqa: BLE001 - what would reach a user as a traceback
                failures.append(f"{case}: {type(e).__name__}: {e}")
            if fingerprint(path) != before:
                failures.append(f"{case}: the store changed")
                before = fingerprint(path)
    assert not failures, f"{len(failures)} of {len(MANIFEST_CASES)}:\n" + "\n".join(failures)


def test_a_sample_of_the_generated_manifests_fails_the_same_way_on_the_cluster(kube_cluster, kube_namespace):
    sample = MANIFEST_CASES[::max(1, len(MANIFEST_CASES) // 60)]
    assert len(sample) >= 50
    failures = []
    with KubernetesStore(kubeconfig=str(kube_cluster.kubeconfig)) as store:
        for case in sample:
            manifest = build(case)
            if isinstance(manifest, dict) and manifest["metadata"].get("namespace") == NS:
                manifest = copy.deepcopy(manifest)
                manifest["metadata"]["namespace"] = kube_namespace
            try:
                objects = [complete(o, None, None, None, kube_namespace, "definition")
                           for o in load_definitions(manifest)]
                apply(store, objects, "present")
                failures.append(f"{case}: accepted")
            except Metal3Error as e:
                if not named_by_the_cluster(case.field, str(e)):
                    failures.append(f"{case}: {e}")
            except Exception as e:  # noqa: BLE001
                failures.append(f"{case}: {type(e).__name__}: {e}")
        for kind in BASELINES:
            if store.list(SCHEMAS[kind][0], kind, kube_namespace):
                failures.append(f"{kind}: an object was written")
    assert not failures, f"{len(failures)} of {len(sample)}:\n" + "\n".join(failures)


# -- module arguments -------------------------------------------------------------------------------------------

MODULES = ["resource", "resource_info", "ip_pool", "ip_claim", "ipam_reconcile", "baremetal_host", "metal3machine",
           "metal3data", "metal3cluster", "metal3remediation", "machines", "machine_type", "metalstack", "hostclaim",
           "data_image"]
WRONG_ARGUMENT = {"int": "not-a-number", "bool": "maybe", "list": {"a": 1}, "dict": "not-a-dict",
                  "float": "not-a-number"}
NAME_OPTIONS = ("name", "namespace", "pool", "pool_namespace", "template", "cluster", "host")
STORE_OPTIONS = {"backend", "store_path", "kubeconfig", "context", "host", "api_key", "validate_certs", "ca_cert",
                 "client_cert", "client_key"}


def module_spec(module: str) -> Any:
    return importlib.import_module(f"ansible_collections.metal3.baremetal.plugins.modules.{module}").SPEC


def minimal_arguments(spec: Any) -> dict[str, Any]:
    """Arguments that satisfy the spec's required options, with harmless values."""
    arguments: dict[str, Any] = {"state": "absent", "name": "valid"} if "definition" in spec.argument_spec else {}
    for option, definition in spec.argument_spec.items():
        if option == "kind":
            arguments[option] = (definition.get("choices") or ["ConfigMap"])[0]
        elif definition.get("required"):
            harmless = {"int": 1, "bool": False, "list": [], "dict": {}}
            arguments[option] = harmless.get(definition.get("type", "str"), "valid")
    return arguments


def module_cases() -> list[tuple[str, dict[str, Any], str]]:
    cases = []
    for module in MODULES:
        spec = module_spec(module)
        base = minimal_arguments(spec)
        for option, definition in spec.argument_spec.items():
            if option in STORE_OPTIONS:
                continue
            kind = definition.get("type", "str")
            if kind in WRONG_ARGUMENT:
                cases.append((module, {**base, option: WRONG_ARGUMENT[kind]}, option))
            if definition.get("choices"):
                cases.append((module, {**base, option: "not-a-choice"}, option))
            if kind == "str" and option in NAME_OPTIONS:
                cases.append((module, {**base, option: "../../other/secrets/x"}, option))
            if definition.get("required"):
                cases.append((module, {k: v for k, v in base.items() if k != option}, option))
        cases.append((module, {**base, "no_such_option": 1}, "no_such_option"))
        if "wait_timeout" in spec.argument_spec:
            cases.append((module, {**base, "wait_timeout": -5}, "wait_timeout"))
        if "libvirt_max_memory" in spec.argument_spec:  # the operator's bounds on a claim's virtual machine
            cases.extend((module, {**base, option: value}, option) for option, value in LIBVIRT_LIMITS)
    return cases


LIBVIRT_LIMITS = [("libvirt_max_memory", "1e999999"), ("libvirt_max_memory", "lots"), ("libvirt_max_disk", "1Ei9"),
                  ("libvirt_max_disk", "0"), ("libvirt_max_image_size", "-1Gi"), ("libvirt_max_cpus", 0),
                  ("libvirt_image_timeout", -1)]


MODULE_CASES = module_cases()


def test_every_module_gets_generated_bad_arguments():
    assert {module for module, _args, _option in MODULE_CASES} == set(MODULES)
    assert len(MODULE_CASES) + len(MANIFEST_CASES) >= 300


def test_every_generated_bad_argument_fails_naming_the_option_and_changes_nothing(tmp_path, monkeypatch):
    path = tmp_path / "store.db"
    monkeypatch.setenv("METAL3_STORE_PATH", str(path))
    monkeypatch.setenv("IRONIC_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: no Ironic is ever reached
    with LocalStore(str(path)) as store:
        apply_manifest(store, baseline("IPPool", "existing"))
    before = fingerprint(path)
    failures = []
    for module, arguments, option in MODULE_CASES:
        result = run_spec(module_spec(module), arguments, check_mode=False)
        message = str(result.get("msg", ""))
        if not result.get("failed"):
            failures.append(f"{module} {arguments}: accepted")
        elif "internal error" in message or "Traceback" in message or option not in message:
            failures.append(f"{module} {arguments}: {message}")
        if fingerprint(path) != before:
            failures.append(f"{module} {arguments}: the store changed")
            before = fingerprint(path)
    with LocalStore(str(path)) as store:
        assert [o["metadata"]["name"] for o in store.list(SCHEMAS["IPPool"][0], "IPPool", NS)] == ["existing"]
    assert not failures, f"{len(failures)} of {len(MODULE_CASES)}:\n" + "\n".join(failures)


# -- a HostClaim's identityRef kubeconfig ---------------------------------------------------------------------
# The kubeconfig is a Secret's, so no admission sees it: the claim's reconcile refuses it, through the module.
# Cases: every field client-go's kubeconfig knows beyond the inline ones allowed (core/kubeconfigs.py ALLOWED), by
# section, and servers that are not a tenant's to name; each must fail naming spec.identityRef and the field, reach no
# server, and change no host.

# client-go's clientcmd/api/v1 types.go: the fields of Cluster, AuthInfo and Context.
KUBECONFIG_FIELDS = {
    "cluster": ["server", "tls-server-name", "insecure-skip-tls-verify", "certificate-authority",
                "certificate-authority-data", "proxy-url", "disable-compression", "extensions"],
    "user": ["client-certificate", "client-certificate-data", "client-key", "client-key-data", "token", "tokenFile",
             "as", "as-uid", "as-groups", "as-user-extra", "username", "password", "auth-provider", "exec",
             "extensions"],
    "context": ["cluster", "user", "namespace", "extensions"],
}
BAD_SERVERS = [
    ("file:///etc/kubernetes/admin.conf", "is not an http or https URL"),
    ("ftp://192.0.2.1/", "is not an http or https URL"),
    ("192.0.2.1:6443", "is not an http or https URL"),
    ("https://", "names no host"),
    ("https://192.0.2.1:99999", "is not a URL"),
    ("http://127.0.0.1:{port}/x?", "loopback or link-local"),
    ("https://127.1.2.3:{port}", "loopback or link-local"),
    ("https://localhost:{port}", "loopback or link-local"),
    ("https://[::1]:{port}", "loopback or link-local"),
    ("https://[::ffff:127.0.0.1]:{port}", "loopback or link-local"),
    ("http://169.254.169.254/latest/meta-data/", "loopback or link-local"),
    ("https://[fe80::1]:6443", "loopback or link-local"),
    ("https://0.0.0.0:{port}", "loopback or link-local"),
]


def kubeconfig_cases() -> list[tuple[str, dict[str, Any], tuple[str, ...]]]:
    """(what, the kubeconfig, what the refusal says: the field, and why)."""
    def config(cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None,
               context: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Config", "current-context": "c",
                "clusters": [{"name": "m", "cluster": {"server": "https://192.0.2.1:6443", **(cluster or {})}}],
                "users": [{"name": "u", "user": {"token": "t0ken", **(user or {})}}],
                "contexts": [{"name": "c", "context": {"cluster": "m", "user": "u", **(context or {})}}]}

    from ansible_collections.metal3.baremetal.plugins.module_utils.core.kubeconfigs import ALLOWED

    cases = []
    for section, fields in KUBECONFIG_FIELDS.items():
        for name in fields:
            if name not in ALLOWED[section]:
                cases.append((f"{section} field {name}", config(**{section: {name: "/etc/shadow"}}),
                              (f"{section} field {name!r}",)))
    server_field = "its server (clusters[0].cluster.server)"
    for server, why in BAD_SERVERS:
        cases.append((f"server {server}", config(cluster={"server": server}), (server_field, why)))
    cases.append(("no server", {**config(), "clusters": [{"name": "m", "cluster": {}}]}, (server_field, "required")))
    cases.append(("a server that is no string", config(cluster={"server": ["https://192.0.2.1"]}),
                  (server_field, "required")))
    return cases


KUBECONFIG_CASES = kubeconfig_cases()


def test_every_generated_bad_identity_ref_kubeconfig_is_refused_naming_the_field_and_reaches_nothing(tmp_path):
    import socket

    import yaml

    listener = socket.create_server(("127.0.0.1", 0))  # where the loopback servers point: nobody may connect
    listener.setblocking(False)
    port = listener.getsockname()[1]
    path = tmp_path / "store.db"
    api = SCHEMAS["HostClaim"][0]
    failures = []
    with LocalStore(str(path)) as store:
        host = store.create({"apiVersion": api, "kind": "BareMetalHost", "metadata": {"name": "h", "namespace": NS},
                             "spec": {"online": False}})
        for index, (_what, kubeconfig, _words) in enumerate(KUBECONFIG_CASES):
            text = yaml.safe_dump(kubeconfig).replace("{port}", str(port))
            store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"k-{index}", "namespace": NS},
                          "stringData": {"kubeconfig": text}})
            store.create({"apiVersion": api, "kind": "HostClaim", "metadata": {"name": f"c-{index}", "namespace": NS},
                          "spec": {"poweredOn": False, "identityRef": {"name": f"k-{index}"}}})
    assert len(KUBECONFIG_CASES) >= 30
    with listener:
        for index, (what, _kubeconfig, words) in enumerate(KUBECONFIG_CASES):
            result = run_spec(module_spec("hostclaim"), {"backend": "local", "store_path": str(path),
                                                         "namespace": NS, "name": f"c-{index}"}, check_mode=False)
            message = str(result.get("msg", ""))
            if not result.get("failed"):
                failures.append(f"{what}: accepted")
            elif "internal error" in message or "Traceback" in message or "spec.identityRef" not in message \
                    or not all(word in message for word in words):
                failures.append(f"{what}: {message}")
        try:
            listener.accept()
            failures.append("a loopback server was connected to")
        except BlockingIOError:
            pass
    with LocalStore(str(path)) as store:
        if store.get(Ref.of(host))["metadata"]["resourceVersion"] != host["metadata"]["resourceVersion"]:
            failures.append("the host changed")
        for index, (what, _kubeconfig, _words) in enumerate(KUBECONFIG_CASES):
            status = store.get(Ref(api, "HostClaim", f"c-{index}", NS)).get("status") or {}
            refused = [c for c in status.get("conditions") or [] if c["type"] == "HostsReachable"
                       and c["status"] == "False" and c["reason"] == "IdentityRefInvalid"]
            if "bareMetalHost" in status or not refused:
                failures.append(f"{what}: status {status}")
    assert not failures, f"{len(failures)} of {len(KUBECONFIG_CASES)}:\n" + "\n".join(failures)
