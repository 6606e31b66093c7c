"""What hack/gen-crds.py generates from config/crd/: the CRDs as the engine reads them (api/crds.py) and the typed
views of its kinds (api/types.py). Both are current, and hold what config/crd says. The CRDs agree with the
registry of classes of compute (compute/registry.py): generating and checking fail, naming the file, the kind and
version and the schema path, when an enum of kinds of compute or a class's status field differs."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.api import types
from ansible_collections.metal3.baremetal.plugins.module_utils.api.crds import crds
from ansible_collections.metal3.baremetal.plugins.module_utils.api.kinds import lookup

ROOT = Path(__file__).resolve().parents[4]
REGISTRY = "plugins/module_utils/compute/registry.py"


def load_generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_crds", ROOT / "hack" / "gen-crds.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = load_generator()


def test_the_generated_modules_are_current():
    check = subprocess.run([sys.executable, str(ROOT / "hack" / "gen-crds.py"), "--check"], capture_output=True,
                           text=True, check=False)
    assert check.returncode == 0, check.stderr


def test_every_crd_with_its_served_versions_and_their_schemas():
    sources = [doc for path in sorted((ROOT / "config" / "crd").glob("*.yaml"))
               for doc in yaml.safe_load_all(path.read_text()) if doc]
    assert [c["metadata"]["name"] for c in crds()] == [c["metadata"]["name"] for c in sources]
    for crd, source in zip(crds(), sources, strict=True):
        assert {k: crd["spec"][k] for k in ("group", "scope")} == {k: source["spec"][k] for k in ("group", "scope")}
        assert [(v["name"], v["served"], v["storage"], v.get("subresources")) for v in crd["spec"]["versions"]] == \
            [(v["name"], v["served"], v["storage"], v.get("subresources")) for v in source["spec"]["versions"]]
        for version, given in zip(crd["spec"]["versions"], source["spec"]["versions"], strict=True):
            properties = version["schema"]["openAPIV3Schema"]["properties"]
            assert properties.keys() == given["schema"]["openAPIV3Schema"]["properties"].keys()


def test_no_prose_is_shipped():
    assert '"description":"' not in str(crds())
    assert "additionalPrinterColumns" not in str(crds())


def test_parsed_once_per_process():
    assert crds() is crds()


def test_the_kinds_read_their_schemas_from_it():
    pool = lookup("ipam.metal3.io/v1alpha1", "IPPool")
    assert pool.schema is not None
    prefix = pool.schema["properties"]["spec"]["properties"]["prefix"]
    assert prefix == {"maximum": 128, "minimum": 0, "type": "integer"}


@pytest.mark.parametrize(("view", "required", "optional"), [
    (types.IPPool, set(), {"apiVersion", "kind", "metadata", "spec", "status"}),
    (types.IPPoolSpec, {"namePrefix"}, {"pools", "prefix", "gateway", "dnsServers", "preAllocations"}),
    (types.IPPoolSpecPoolsItem, set(), {"start", "end", "subnet", "prefix", "gateway", "dnsServers"}),
    (types.IPClaimSpec, set(), {"pool"}),
    (types.IPAddressSpec, {"address", "claim", "pool"}, {"prefix", "gateway", "dnsServers"}),
    (types.BareMetalHostSpecBmc, {"address", "credentialsName"}, {"disableCertificateVerification"}),
    (types.HostClaimSpec, {"poweredOn"}, {"hostSelector", "image", "kind", "userData"}),
    (types.Metal3MachineSpec, set(), {"image", "dataTemplate", "hostSelector", "providerID"}),
    # v1beta2, the storage version, requires none (v1beta1 required claim and template)
    (types.Metal3DataSpec, set(), {"claim", "index", "template", "metaData", "networkData"}),
])
def test_a_typed_view_requires_what_the_schema_requires(view, required, optional):
    assert set(view.__required_keys__) == required
    assert optional <= set(view.__optional_keys__)


# The CRDs and the registry of classes of compute.

def schema(sources: list[tuple[str, dict[str, Any]]], kind: str, version: str) -> dict[str, Any]:
    crd = next(crd for _file, crd in sources if crd["spec"]["names"]["kind"] == kind)
    return next(v for v in crd["spec"]["versions"] if v["name"] == version)["schema"]["openAPIV3Schema"]


def enum_of(kind: str, version: str, *path: str) -> Callable[[list[tuple[str, dict[str, Any]]]], list[str]]:
    """An edit: the enum at ``path`` (spec, kind) of ``kind``'s ``version``, to change in place."""
    def at(sources: list[tuple[str, dict[str, Any]]]) -> list[str]:
        node = schema(sources, kind, version)
        for part in path:
            node = node["properties"][part]
        enum: list[str] = node["enum"]
        return enum
    return at


def claim_status(sources: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    properties: dict[str, Any] = schema(sources, "HostClaim", "v1alpha1")["properties"]["status"]["properties"]
    return properties


HOSTCLAIM = "config/crd/metal3.io.yaml: HostClaim.metal3.io v1alpha1"
MACHINE = "config/crd/infrastructure.cluster.x-k8s.io.yaml: Metal3Machine.infrastructure.cluster.x-k8s.io"
TEMPLATE = "config/crd/infrastructure.cluster.x-k8s.io.yaml: " \
    "Metal3MachineTemplate.infrastructure.cluster.x-k8s.io"
KINDS = ("baremetal", "libvirt")
BOUND = {"baremetal": "bareMetalHost", "libvirt": "virtualMachine"}


@pytest.mark.parametrize(("edit", "kinds", "bound", "problems"), [
    pytest.param(None, KINDS, BOUND, [], id="as-they-are"),
    pytest.param(lambda s: enum_of("HostClaim", "v1alpha1", "spec", "kind")(s).remove("libvirt"), KINDS, BOUND,
                 [f"{HOSTCLAIM}: spec.kind: enum [baremetal] is not the compute registry's kinds [baremetal, libvirt] "
                  f"(libvirt missing; {REGISTRY})"], id="a-kind-missing"),
    pytest.param(lambda s: enum_of("Metal3Machine", "v1beta1", "spec", "kind")(s).append("kubevirt"), KINDS, BOUND,
                 [f"{MACHINE} v1beta1: spec.kind: enum [baremetal, libvirt, kubevirt] is not the compute registry's "
                  f"kinds [baremetal, libvirt] (kubevirt not in the registry; {REGISTRY})"], id="an-extra-kind"),
    pytest.param(lambda s: enum_of("Metal3MachineTemplate", "v1beta2", "spec", "template", "spec", "kind")(s).reverse(),
                 KINDS, BOUND,
                 [f"{TEMPLATE} v1beta2: spec.template.spec.kind: enum [libvirt, baremetal] is not the compute "
                  f"registry's kinds [baremetal, libvirt] (in another order; {REGISTRY})"], id="another-order"),
    pytest.param(lambda s: schema(s, "Metal3Machine", "v1beta2")["properties"]["spec"]["properties"].pop("kind"),
                 KINDS, BOUND,
                 [f"{MACHINE} v1beta2: spec.kind: no such property, whose enum is the compute registry's kinds "
                  f"[baremetal, libvirt] ({REGISTRY})"], id="no-kind-field"),
    pytest.param(lambda s: enum_of("HostClaim", "v1alpha1", "spec", "kind")(s).clear(), KINDS, BOUND,
                 [f"{HOSTCLAIM}: spec.kind: enum [] is not the compute registry's kinds [baremetal, libvirt] "
                  f"(baremetal, libvirt missing; {REGISTRY})"], id="no-enum"),
    pytest.param(lambda s: claim_status(s).pop("virtualMachine"), KINDS, BOUND,
                 [f"{HOSTCLAIM}: status.virtualMachine: no such property, the bound_field of class libvirt of the "
                  f"compute registry ({REGISTRY})"], id="a-bound-field-missing"),
    pytest.param(None, (*KINDS, "toycloud"), {**BOUND, "toycloud": "cloudInstance"},
                 [f"{MACHINE} v1beta2: spec.kind: enum [baremetal, libvirt] is not the compute registry's kinds "
                  f"[baremetal, libvirt, toycloud] (toycloud missing; {REGISTRY})",
                  f"{MACHINE} v1beta1: spec.kind: enum [baremetal, libvirt] is not the compute registry's kinds "
                  f"[baremetal, libvirt, toycloud] (toycloud missing; {REGISTRY})",
                  f"{TEMPLATE} v1beta2: spec.template.spec.kind: enum [baremetal, libvirt] is not the compute "
                  f"registry's kinds [baremetal, libvirt, toycloud] (toycloud missing; {REGISTRY})",
                  f"{TEMPLATE} v1beta1: spec.template.spec.kind: enum [baremetal, libvirt] is not the compute "
                  f"registry's kinds [baremetal, libvirt, toycloud] (toycloud missing; {REGISTRY})",
                  f"{HOSTCLAIM}: spec.kind: enum [baremetal, libvirt] is not the compute registry's kinds "
                  f"[baremetal, libvirt, toycloud] (toycloud missing; {REGISTRY})",
                  f"{HOSTCLAIM}: status.cloudInstance: no such property, the bound_field of class toycloud of the "
                  f"compute registry ({REGISTRY})"], id="a-class-registered-only"),
    pytest.param(lambda s: s.pop(next(i for i, (_f, crd) in enumerate(s)
                                      if crd["spec"]["names"]["kind"] == "Metal3MachineTemplate")), KINDS, BOUND,
                 [f"config/crd: no CRD of Metal3MachineTemplate.infrastructure.cluster.x-k8s.io, which repeats the "
                  f"compute registry ({REGISTRY})"], id="a-crd-missing"),
])
def test_the_crds_repeat_the_compute_registry(edit, kinds, bound, problems):
    sources = json.loads(json.dumps(gen.read_sources()))  # no YAML alias shared between versions
    if edit is not None:
        edit(sources)
    assert gen.registry_problems(sources, kinds, bound) == problems


def test_the_generator_reads_the_engines_registry():
    from ansible_collections.metal3.baremetal.plugins.module_utils.compute import registry
    assert gen.compute_registry() == (registry.kinds(), {k: c.bound_field for k, c in registry.CLASSES.items()})
    assert gen.compute_registry() == (KINDS, BOUND)


@pytest.mark.parametrize("argv", [["gen-crds.py"], ["gen-crds.py", "--check"]], ids=["generating", "checking"])
def test_generating_and_checking_fail_on_a_disagreement_writing_nothing(argv, monkeypatch, tmp_path, capsys):
    sources = json.loads(json.dumps(gen.read_sources()))
    claim_status(sources).pop("bareMetalHost")
    monkeypatch.setattr(gen, "read_sources", lambda: sources)
    monkeypatch.setattr(gen, "CRDS_TARGET", tmp_path / "crds.py")
    monkeypatch.setattr(gen, "TYPES_TARGET", tmp_path / "types.py")
    monkeypatch.setattr(sys, "argv", argv)
    assert gen.main() == 1
    assert capsys.readouterr().err == f"{HOSTCLAIM}: status.bareMetalHost: no such property, the bound_field of " \
        f"class baremetal of the compute registry ({REGISTRY})\n"
    assert list(tmp_path.iterdir()) == []
