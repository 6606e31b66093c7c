"""The engine's packages in layers: a module imports only from its own layer's package or a layer below.

core (objects, errors, selector, retry) is the bottom; api (kinds, schemas, conversion, the admission
registry) sits on it; the store on api; resources (apply, YAML) on the store; the domains on those; the entry
points (engine, the module adapters) and the operator on top. A domain's admission rules reach api by
registering, never by api importing the domain.

The drivers: a BareMetalHost (hosts) is provisioned through the Provisioner seam (core/provisioner.py), Ironic's
in ironic/; a HostClaim (hostclaims) is served through the compute seam (compute/base.py), by the class its
spec.kind names - bare metal (BareMetalHosts), libvirt (its own driver) - from compute/registry.py.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
MODULE_UTILS = ROOT / "plugins" / "module_utils"
PREFIX = "ansible_collections.metal3.baremetal.plugins.module_utils."

# (unit, layer): a unit is a package of module_utils or one of its top-level modules.
LAYERS = {
    "core": 0,
    "api": 1,
    "store": 2,
    "resources": 3,
    "templating": 4, "ironic": 4,
    "ipam": 5,
    "hosts": 6,
    "compute": 7,  # the classes of compute a HostClaim is served by, behind one interface, keyed by spec.kind
    "hostclaims": 8,  # the HostClaim flow and admission, the same for every class
    "capm3": 9,
    "metalstack": 10,  # the metal-stack provider builds on CAPM3's pieces (capm3.common)
    "pivot": 10,  # moves the objects of every domain below; none of them knows it
    "engine": 11, "daemon": 11, "inventory": 11,
    "module_spec": 12, "args": 12,
    "ansible_module": 13,
}
OPERATOR_LAYER = 14


def unit_of(module: str) -> str:
    return module[len(PREFIX):].split(".")[0]


def imports(path: Path) -> list[tuple[int, str]]:
    """Every module_utils module ``path`` imports, at any depth (a lazy import is an import too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX):
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.ImportFrom) and node.module and PREFIX.startswith(node.module + "."):
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def sources() -> list[tuple[Path, int]]:
    files = []
    for path in sorted(MODULE_UTILS.rglob("*.py")):
        relative = path.relative_to(MODULE_UTILS)
        unit = relative.parts[0].removesuffix(".py")
        if unit == "__init__":
            continue
        files.append((path, LAYERS[unit]))
    files += [(path, OPERATOR_LAYER) for path in sorted((ROOT / "operator").rglob("*.py"))]
    return files


def test_every_unit_has_a_layer():
    units = {p.relative_to(MODULE_UTILS).parts[0].removesuffix(".py") for p in MODULE_UTILS.rglob("*.py")}
    assert units - {"__init__"} <= set(LAYERS), f"give {sorted(units - set(LAYERS) - {'__init__'})} a layer"


@pytest.mark.parametrize("path,layer", sources(), ids=lambda v: str(v.relative_to(ROOT)) if isinstance(v, Path) else "")
def test_imports_only_from_below(path: Path, layer: int):
    own = path.relative_to(MODULE_UTILS).parts[0].removesuffix(".py") if MODULE_UTILS in path.parents else None
    upward = []
    for line, module in imports(path):
        unit = unit_of(module)
        target = LAYERS[unit]
        if target > layer or (target == layer and unit != own):
            upward.append(f"line {line}: {module} (layer {target}, this is layer {layer})")
    assert not upward, f"{path.relative_to(ROOT)} imports upward or sideways:\n" + "\n".join(upward)
