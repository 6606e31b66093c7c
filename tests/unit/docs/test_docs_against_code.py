"""README and the docs held to the code (issue 31, item 7): what they say of the module group, the modules, roles
and filters the collection holds, the operator's flags and the Make targets is read from the text and checked
against meta/runtime.yml, the modules' argument specs, plugins/, roles/, the operator's argument parser and the
Makefile. A claim that drifts fails here, naming the page."""
from __future__ import annotations

import argparse
import importlib
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.module_utils import basic

from ansible_collections.metal3.baremetal.plugins.module_utils.args import IRONIC_ARG_SPEC, STORE_ARG_SPEC
from metal3_operator import manager

REPO = Path(__file__).resolve().parents[3]
README = REPO / "README.md"
STORE_PAGE = REPO / "docs" / "store.md"
OPERATOR_README = REPO / "operator" / "README.md"
# Every page that names a Make target or a module: README, docs/, the operator's.
PAGES = [README, *sorted((REPO / "docs").glob("*.md")), OPERATOR_README]

MODULES = sorted(p.stem for p in (REPO / "plugins" / "modules").glob("*.py") if p.stem != "__init__")
FILTERS = sorted(p.stem for p in (REPO / "plugins" / "filter").glob("*.py") if p.stem != "__init__")
ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "meta" / "main.yml").exists())
PLAYBOOKS = sorted(p.stem for p in (REPO / "playbooks").glob("*.yml"))


class _Captured(Exception):
    def __init__(self, argument_spec: dict[str, Any]) -> None:
        super().__init__("argument spec captured")
        self.argument_spec = argument_spec


def argument_spec(module: str) -> dict[str, Any]:
    """The argument spec ``module`` gives AnsibleModule, whether through a ModuleSpec or its own main()."""
    loaded = importlib.import_module(f"ansible_collections.metal3.baremetal.plugins.modules.{module}")

    def capture(self: Any, argument_spec: dict[str, Any], **kwargs: Any) -> None:
        raise _Captured(argument_spec)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(basic.AnsibleModule, "__init__", capture)
        with pytest.raises(_Captured) as captured:
            loaded.main()
    return captured.value.argument_spec


SPECS = {module: argument_spec(module) for module in MODULES}


def takes(spec: dict[str, Any], options: dict[str, Any]) -> bool:
    """Whether an argument spec has every one of ``options``, as defined there."""
    return all(spec.get(name) == option for name, option in options.items())


def table(text: str, header: str) -> list[list[str]]:
    """The rows of the Markdown table whose first header cell is ``header``, as lists of cells."""
    match = re.search(rf"^\| {re.escape(header)} \|.*\n\|[-| ]+\|\n((?:\|.*\n)*)", text, re.MULTILINE)
    assert match, f"no table headed {header!r}"
    return [[cell.strip() for cell in row.strip().strip("|").split(" | ")] for row in match.group(1).splitlines()]


def named(rows: list[list[str]]) -> list[str]:
    """The short names a table's first column gives as ``metal3.baremetal.<name>``."""
    return [re.fullmatch(r"`metal3\.baremetal\.(\w+)`", row[0]).group(1) for row in rows]  # type: ignore[union-attr]


def paragraph(text: str, start: str) -> str:
    index = text.index(start)
    return text[index:text.find("\n\n", index)]


# The module group.

def test_the_group_is_every_module_that_takes_the_store_options():
    group = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())["action_groups"]["all"]
    assert len(group) == len(set(group))
    assert sorted(group) == [module for module in MODULES if takes(SPECS[module], STORE_ARG_SPEC)]


def test_the_store_page_names_the_group_and_the_modules_outside_it_truthfully():
    text = paragraph(STORE_PAGE.read_text(), "Set them once per play")
    assert "module_defaults: {group/metal3.baremetal.all:" in text
    inside = text[text.index("(") + 1:text.index(")")]  # "each of them takes these options (...)"
    in_group = set(re.findall(r"`(\w+)`", inside))
    outside = {name for name in re.findall(r"`(\w+)`", text) if name in MODULES} - in_group
    assert in_group == {module for module in MODULES if takes(SPECS[module], STORE_ARG_SPEC)}
    assert outside == {module for module in MODULES if not takes(SPECS[module], STORE_ARG_SPEC)}
    for module in outside:
        assert not set(SPECS[module]) & set(STORE_ARG_SPEC), f"{module} takes some store options after all"


def test_the_store_page_lists_every_store_option():
    rows = table(STORE_PAGE.read_text(), "option")
    listed = [name for row in rows for name in re.findall(r"`(\w+)`", row[0])]
    assert sorted(listed) == sorted(STORE_ARG_SPEC)


def test_the_store_page_names_the_modules_that_take_the_ironic_options():
    text = paragraph(STORE_PAGE.read_text(), "The modules that step hosts")
    said = set(re.findall(r"`(\w+)`", text[:text.index("also take")]))
    assert said == {module for module in MODULES if takes(SPECS[module], IRONIC_ARG_SPEC)}
    # the options it names: neither the modules nor values (`metal3`) nor the play keyword
    options = set(re.findall(r"`([a-z]+_\w+)`", text)) - said - {"module_defaults"}
    assert options == set(IRONIC_ARG_SPEC)


# Every task that calls a module of the collection - in a module's EXAMPLES, a playbook, a role, a test's
# playbook - passes only options the module takes (ansible-test checks EXAMPLES as YAML, never their options).

def _examples(path: Path) -> str:
    loaded = importlib.import_module(f"ansible_collections.metal3.baremetal.plugins.modules.{path.stem}")
    return loaded.EXAMPLES


TASK_SOURCES = [*(("EXAMPLES", p) for p in sorted((REPO / "plugins" / "modules").glob("*.py"))
                  if p.stem != "__init__"),
                *(("file", p) for p in [*sorted((REPO / "playbooks").rglob("*.yml")),
                                        *sorted((REPO / "roles").glob("*/tasks/*.yml")),
                                        *sorted((REPO / "tests" / "integration" / "playbooks").glob("*.yml"))])]


def calls(node: Any) -> list[tuple[str, dict[str, Any]]]:
    """Each (module, arguments) a task list, play or block calls of the collection's modules, however nested."""
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, list):
        for item in node:
            found += calls(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key.startswith("metal3.baremetal.") and isinstance(value, dict):
                found.append((key.removeprefix("metal3.baremetal."), value))
            elif key in ("tasks", "pre_tasks", "post_tasks", "handlers", "block", "rescue", "always"):
                found += calls(value)
    return found


@pytest.mark.parametrize("kind,path", TASK_SOURCES, ids=lambda v: v if isinstance(v, str) else v.name)
def test_every_call_of_a_module_passes_only_options_it_takes(kind: str, path: Path):
    text = _examples(path) if kind == "EXAMPLES" else path.read_text()
    for module, arguments in calls(yaml.safe_load(text)):
        assert module in SPECS, f"{path.name}: no module metal3.baremetal.{module}"
        spec = SPECS[module]
        known = set(spec) | {alias for option in spec.values() for alias in option.get("aliases", ())}
        unknown = sorted(set(arguments) - known)
        assert not unknown, f"{path.name}: metal3.baremetal.{module} takes no option {', '.join(unknown)}"


# What the collection holds.

def test_readme_lists_every_module_and_none_else():
    assert sorted(named(table(README.read_text(), "module"))) == MODULES


def test_readme_lists_every_filter_and_role_and_none_else():
    text = README.read_text()
    assert sorted(named(table(text, "filter"))) == FILTERS
    assert sorted(named(table(text, "role"))) == ROLES


def test_the_playbooks_readme_lists_exist():
    assert set(named(table(README.read_text(), "playbook"))) <= set(PLAYBOOKS)


# README's requirements: each version it names, and where the version is pinned (the file, and the pin's pattern
# with the version in its one group).
REQUIREMENTS = [
    ("ansible-core", "tested with 2.19.14", "requirements-test.txt", r"^ansible-core==(\S+)$"),
    ("ansible-core", "2.19, tested", "requirements.txt", r"^ansible-core>=(2\.\d+)\.\d+,<"),
    ("Python", "tested with 3.11", "pyproject.toml", r'^python_version = "(\S+)"$'),
    ("Python", "image has 3.12", "execution-environment/execution-environment.yml",
     r"python_path: /usr/bin/python(\S+)$"),
    ("Kubernetes", "kube-apiserver v1.34.4", "hack/kube-binaries.sh", r'^KUBE_VERSION="\$\{KUBE_VERSION:-(\S+)\}"$'),
    ("Kubernetes", "etcd v3.6.5", "hack/kube-binaries.sh", r'^ETCD_VERSION="\$\{ETCD_VERSION:-(\S+)\}"'),
    ("Ironic", "39.0.0, installed", "roles/ironic/defaults/main.yml", r"^  - ironic==(\S+)$"),
    ("Ironic", "ironic-python-agent 13.0.0", "hack/lab-images.sh", r"^IPA_VERSION=(\S+)"),
    ("Ironic", "sushy-tools 2.2.0", "roles/redfish_emulator/defaults/main.yml", r"^  - sushy-tools==(\S+)$"),
]


@pytest.mark.parametrize("row, says, source, pin", REQUIREMENTS, ids=[f"{r[0]}: {r[1]}" for r in REQUIREMENTS])
def test_readme_requirements_are_the_pinned_versions(row: str, says: str, source: str, pin: str):
    cells = {cells[0]: cells[1] for cells in table(README.read_text(), "requirement")}
    assert says in cells[row], f"README's requirements ({row}) no longer say {says!r}: {cells[row]}"
    pinned = re.findall(pin, (REPO / source).read_text(), re.MULTILINE)
    assert len(pinned) == 1, f"{source}: no single pin matching {pin}"
    assert pinned[0] in says, f"README's requirements ({row}) say {says!r}, {source} pins {pinned[0]}"


def test_readme_maps_every_docs_page():
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)\)", README.read_text()))
    assert linked == {f"docs/{page.name}" for page in (REPO / "docs").glob("*.md")}


# The operator's flags.

def operator_parser(monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """The operator's own argument parser, as it parses no arguments (no WATCHES_FILE in the environment)."""
    monkeypatch.delenv("WATCHES_FILE", raising=False)
    parsers: list[argparse.ArgumentParser] = []
    original = argparse.ArgumentParser.parse_args

    def parse_args(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        parsers.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_args)
    manager.parse_args([])
    return parsers[0]


def flags_table() -> dict[str, str]:
    """operator/README.md's table of flags: each flag it names (``--proxy`` / ``--no-proxy`` are two) to the default
    it says."""
    said = {}
    for row in table(OPERATOR_README.read_text(), "flag"):
        for flag in re.findall(r"`(--[a-z-]+)`", row[0]):
            said[flag] = row[1]
    return said


def expected_default(action: argparse.Action) -> str:
    """How the table must begin to say ``action``'s default."""
    default = action.default
    if isinstance(action, argparse.BooleanOptionalAction) or isinstance(default, bool):
        return "on" if default else "off"
    if action.dest == "max_concurrent_reconciles" and default == (os.cpu_count() or 1):
        return "the CPU count"
    if action.dest == "runner_dir":
        default = default.replace(tempfile.gettempdir(), "$TMPDIR", 1)
    return f"`{default}`"


def test_the_operator_flags_table_is_the_parser(monkeypatch):
    parser = operator_parser(monkeypatch)
    actions = {flag: action for action in parser._actions for flag in action.option_strings if flag != "-h"}
    del actions["--help"]
    said = flags_table()
    assert sorted(said) == sorted(actions), "operator/README.md's flags table against manager.parse_args"
    for flag, cell in said.items():
        action = actions[flag]
        if action.default is None:  # found at run time (the kubeconfig, the pod's namespace): said in words
            assert cell and not cell.startswith(("on", "off")), (flag, cell)
        else:
            assert cell.startswith(expected_default(action)), (flag, cell, action.default)


def test_every_operator_flag_the_pages_name_exists(monkeypatch):
    parser = operator_parser(monkeypatch)
    flags = {flag for action in parser._actions for flag in action.option_strings}
    for page in (OPERATOR_README, REPO / "docs" / "operator.md"):
        text = page.read_text()
        # a flag on its own (`--no-prefork`) or given to the operator (OPERATOR_ARGS=--leader-elect); not another
        # program's (`benchmarks/operator/bench.py --workers`)
        named_flags = set(re.findall(r"`(--[a-z-]+)", text)) | set(re.findall(r"OPERATOR_ARGS=(--[a-z-]+)", text))
        assert named_flags <= flags, (page.name, named_flags - flags)


def test_the_operator_readme_says_the_deployment_needs_cert_manager():
    resources = yaml.safe_load((REPO / "operator" / "config" / "kustomization.yaml").read_text())["resources"]
    webhook = (REPO / "operator" / "config" / "webhook" / "certificate.yaml").read_text()
    if "webhook" in resources and "cert-manager.io/" in webhook:
        deploy = OPERATOR_README.read_text().split("## Deploy", 1)[1]
        assert "cert-manager" in deploy


# The Make targets.

def make_targets() -> set[str]:
    targets = set()
    for line in (REPO / "Makefile").read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+(?: [A-Za-z0-9_.-]+)*):(?!=)", line)
        if match and not match.group(1).startswith("."):
            targets.update(match.group(1).split())
    return targets


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_make_target_a_page_names_exists(page: Path):
    text = page.read_text()
    said = set(re.findall(r"`make ([a-z][\w-]*)", text))
    said |= set(re.findall(r"^\s*(?:\$ )?make ([a-z][\w-]*)", text, re.MULTILINE))  # in a command block
    assert said <= make_targets(), sorted(said - make_targets())
