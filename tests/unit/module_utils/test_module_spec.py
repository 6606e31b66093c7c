"""The adapters' shared checks: option bounds, and engine errors as failed results."""
from __future__ import annotations

from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec, execute


def spec(minimums: dict[str, int]) -> ModuleSpec:
    return ModuleSpec(argument_spec={}, run=lambda params, check_mode: {"changed": True, "ran": True},
                      minimums=minimums)


def test_an_option_below_its_minimum_fails_naming_it_and_the_engine_never_runs():
    result = execute(spec({"wait_timeout": 0}), {"wait_timeout": -5}, False)
    assert result == {"failed": True, "changed": False, "reason": "Invalid",
                      "msg": "wait_timeout: Invalid value: -5: must be greater than or equal to 0"}


def test_values_at_the_minimum_or_unset_run_the_engine():
    assert execute(spec({"wait_timeout": 0, "concurrency": 1}), {"wait_timeout": 0, "concurrency": None}, False) \
        == {"changed": True, "ran": True}
