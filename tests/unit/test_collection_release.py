"""One version everywhere: galaxy.yml's is the latest release of changelogs/changelog.yaml (and CHANGELOG.rst's
first), and no plugin or role says it was added in a version after it."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]


def _galaxy_version() -> Version:
    return Version(yaml.safe_load((REPO / "galaxy.yml").read_text())["version"])


def _documentation(path: Path) -> dict | None:
    """A plugin's DOCUMENTATION, read without importing the plugin."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "DOCUMENTATION"
                                                for t in node.targets):
            return yaml.safe_load(ast.literal_eval(node.value))
    return None


DOCUMENTED = sorted(p for p in (REPO / "plugins").glob("*/*.py")
                    if p.parent.name not in ("module_utils", "plugin_utils", "doc_fragments", "action")
                    and p.name != "__init__.py")
ROLES = sorted(p.parent.parent for p in (REPO / "roles").glob("*/meta/argument_specs.yml"))


def test_galaxy_version_is_the_latest_release():
    releases = yaml.safe_load((REPO / "changelogs" / "changelog.yaml").read_text())["releases"]
    assert releases, "changelogs/changelog.yaml has no release: make one with antsibull-changelog release"
    assert max(Version(v) for v in releases) == _galaxy_version()


def test_changelog_rst_opens_with_that_release():
    """CHANGELOG.rst is generated from changelog.yaml (antsibull-changelog release / generate)."""
    headings = [line for line in (REPO / "CHANGELOG.rst").read_text().splitlines() if line.startswith("v")]
    assert headings and headings[0] == f"v{_galaxy_version()}"


@pytest.mark.parametrize("path", DOCUMENTED, ids=lambda p: str(p.relative_to(REPO)))
def test_each_plugin_was_added_in_a_released_version(path):
    doc = _documentation(path)
    assert doc is not None, "no DOCUMENTATION"
    assert "version_added" in doc, "DOCUMENTATION has no version_added"
    assert Version(str(doc["version_added"])) <= _galaxy_version()


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_each_role_was_added_in_a_released_version(role):
    specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    for entry_point, spec in specs.items():
        assert "version_added" in spec, f"entry point {entry_point} has no version_added"
        assert Version(str(spec["version_added"])) <= _galaxy_version()


def test_the_tables_cover_every_plugin_and_role():
    assert len(DOCUMENTED) >= 24 and len(ROLES) >= 12


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_each_role_has_a_molecule_scenario_that_runs_it(role):
    """make test runs every scenario under extensions/molecule (molecule test --all): each role has its own, which
    includes the role."""
    scenario = REPO / "extensions" / "molecule" / role.name
    assert (scenario / "molecule.yml").is_file()
    playbooks = "".join(p.read_text() for p in scenario.glob("*.yml"))
    assert f"metal3.baremetal.{role.name}\n" in playbooks
