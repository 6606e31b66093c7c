"""Every doc fragment's and every module's documentation is YAML that parses (a ': ' inside a plain scalar makes
it a mapping key: ansible-doc, validate-modules and galaxy-importer then refuse every module using it)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

PLUGINS = Path(__file__).resolve().parents[4] / "plugins"
DOCUMENTED = sorted([*(PLUGINS / "doc_fragments").glob("*.py"), *(PLUGINS / "modules").glob("*.py")])


def documentation(path: Path) -> dict[str, str]:
    """The module's (or a fragment class's) DOCUMENTATION, EXAMPLES and RETURN strings, as written."""
    found = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in ("DOCUMENTATION", "EXAMPLES", "RETURN"):
                    found[target.id] = node.value.value
    return found


@pytest.mark.parametrize("path", DOCUMENTED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_documentation_parses_as_yaml(path):
    docs = documentation(path)
    assert "DOCUMENTATION" in docs or path.name == "__init__.py", path
    for name, text in docs.items():
        try:
            yaml.safe_load(text)
        except yaml.YAMLError as e:
            pytest.fail(f"{path.name} {name}: {e}")
