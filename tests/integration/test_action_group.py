"""The collection's action group (meta/runtime.yml) against the modules' argument specs: every member takes the
store options, so ``module_defaults: {group/metal3.baremetal.all: {...}}`` reaches each without failing it; and
every module that takes them is a member (issue 30, item 12)."""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.args import STORE_ARG_SPEC
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from tests.integration.playbook_runs import REPO, ansible_playbook

MODULES = sorted(p.stem for p in (REPO / "plugins" / "modules").glob("*.py") if p.stem != "__init__")
GROUP = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())["action_groups"]["all"]
INFRA = "infrastructure.cluster.x-k8s.io/v1beta1"


def argument_spec(module: str) -> dict:
    """The module's argument spec: its ModuleSpec, or (daemon, htpasswd) the AnsibleModule it builds."""
    loaded = importlib.import_module(f"ansible_collections.metal3.baremetal.plugins.modules.{module}")
    if hasattr(loaded, "SPEC"):
        return loaded.SPEC.argument_spec
    source = Path(loaded.__file__).read_text()
    return {name: {} for name in STORE_ARG_SPEC if f'"{name}"' in source}  # never all of them: not a store module


def takes_store_options(module: str) -> bool:
    return set(STORE_ARG_SPEC) <= set(argument_spec(module))


def test_the_group_names_only_modules_of_the_collection():
    assert GROUP and set(GROUP) <= set(MODULES), set(GROUP) - set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_a_module_is_in_the_group_exactly_when_it_takes_the_store_options(module):
    spec = argument_spec(module)
    missing = sorted(set(STORE_ARG_SPEC) - set(spec))
    if module in GROUP:
        assert not missing, f"{module} is in group/metal3.baremetal.all but does not take {missing}"
        for name, option in STORE_ARG_SPEC.items():  # the same options: type, aliases, environment fallback
            assert spec[name] == option, f"{module}: option {name} differs from the store's"
    else:
        assert missing, f"{module} takes the store options but is not in group/metal3.baremetal.all"


def test_module_defaults_on_the_group_with_a_pivot_in_the_play(tmp_path: Path):
    """A play that sets the store once for the group, and also pivots: move (not a member) takes its two stores
    from its own options, the members the group's."""
    play_store = {"backend": "local", "store_path": str(tmp_path / "play.db")}
    source = {"backend": "local", "store_path": str(tmp_path / "bastion.db")}
    target = {"backend": "local", "store_path": str(tmp_path / "cluster.db")}
    with open_store(source) as store:
        store.create({"apiVersion": INFRA, "kind": "Metal3Cluster", "metadata": {"name": "c1", "namespace": "metal3"},
                      "spec": {"controlPlaneEndpoint": {"host": "192.0.2.10", "port": 6443}}})
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": "localhost", "gather_facts": False,
        "module_defaults": {"group/metal3.baremetal.all": play_store},
        "tasks": [
            {"name": "What would move", "metal3.baremetal.move": {
                "cluster": "c1", "namespace": "metal3", "source": source, "target": target},
             "check_mode": True, "register": "pivot"},
            {"name": "A member of the group, on the play's store", "metal3.baremetal.resource_info": {
                "api_version": INFRA, "kind": "Metal3Cluster", "namespace": "metal3"}, "register": "listed"},
            {"ansible.builtin.assert": {"that": [
                "pivot.moved | map(attribute='name') | list == ['c1']", "listed.resources == []"]}},
        ]}]))
    run = ansible_playbook(playbook)
    assert run.ok, run.output
    assert "Unsupported parameters" not in run.output
    with open_store(source) as bastion, open_store(target) as cluster:  # check mode: nothing moved
        assert bastion.get_if_exists(Ref(INFRA, "Metal3Cluster", "c1", "metal3"))
        assert cluster.get_if_exists(Ref(INFRA, "Metal3Cluster", "c1", "metal3")) is None
