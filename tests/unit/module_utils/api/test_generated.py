"""What hack/gen-crds.py generates from config/crd/: the CRDs as the engine reads them (api/crds.py) and the typed
views of its kinds (api/types.py). Both are current, and hold what config/crd says."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.api import types
from ansible_collections.metal3.baremetal.plugins.module_utils.api.crds import crds
from ansible_collections.metal3.baremetal.plugins.module_utils.api.kinds import lookup

ROOT = Path(__file__).resolve().parents[4]


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
