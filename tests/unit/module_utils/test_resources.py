"""Manifests in: YAML that expands past any object a store keeps is refused before it is built (issue 12)."""
from __future__ import annotations

import resource

import pytest
import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import (
    MAX_EXPANDED_NODES,
    load_definitions,
    parse_yaml,
)


def laughs(levels: int = 9, width: int = 9) -> str:
    """The 'billion laughs': each level aliases the one below ``width`` times."""
    lines = [f'  a0: &a0 [{", ".join(["lol"] * width)}]']
    lines += [f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\ndata:\n" + "\n".join(lines) + "\n"


def test_an_alias_bomb_in_yaml_text_is_refused_before_it_expands(tmp_path):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(BadRequest, match=f"document 1 has more than {MAX_EXPANDED_NODES} nodes once its YAML "
                                         "aliases are expanded"):
        load_definitions(laughs())
    src = tmp_path / "bomb.yaml"
    src.write_text("---\napiVersion: v1\nkind: Namespace\nmetadata: {name: fine}\n---\n" + laughs())
    with pytest.raises(BadRequest, match=f"{src}: document 2 has more than"):
        load_definitions(src=str(src))
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000  # KiB: nothing was expanded


def test_an_alias_bomb_already_loaded_by_ansible_is_refused():
    with pytest.raises(BadRequest, match="definition: more than"):
        load_definitions(yaml.safe_load(laughs()))


def test_aliases_that_expand_to_little_are_fine():
    text = "base: &base {cpu: 2, labels: {a: b}}\nhosts: [*base, *base, *base]\n"
    assert parse_yaml(text, "x")["hosts"][2] == {"cpu": 2, "labels": {"a": "b"}}


@pytest.mark.parametrize("text", ["a: " + "[" * 5000 + "]" * 5000, "a: " + "[" * 150 + "]" * 150])
def test_values_nested_too_deeply_are_refused(text):
    with pytest.raises(BadRequest, match="nested"):
        load_definitions(text)


def test_one_document_is_expected_where_one_is_asked_for():
    with pytest.raises(BadRequest, match="expected one YAML document, found 2"):
        parse_yaml("a: 1\n---\nb: 2\n", "x")
    assert parse_yaml("", "x") is None
