# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The action adapter: run a module's engine on the controller, without AnsiballZ.

The store lives on the controller (the bastion's SQLite file, or the cluster
it reaches), so the engine runs there in-process: ~20 ms a task instead of the
~0.4 s of packaging and starting a module.
"""
from __future__ import annotations

from typing import Any

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.parameters import remove_values
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.metal3.baremetal.plugins.module_utils.core.progress import Progress, watching
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec, execute

display = Display()


class EngineAction(ActionBase):
    spec: ModuleSpec
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        # A wait prints a line through Ansible's display each time a host or machine changes state
        # (core/progress.py), at every verbosity, while the task runs.
        with watching(Progress(display.display)):
            result.update(run_spec(self.spec, self._task.args, bool(self._task.check_mode)))
        if not self._task.diff:
            result.pop("diff", None)
        return result


def run_spec(spec: ModuleSpec, arguments: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    """A task's arguments checked against the module's spec, then the engine run: what the task returns."""
    validator = ArgumentSpecValidator(spec.argument_spec, **spec.validation_kwargs())
    validation = validator.validate(arguments)
    if validation.error_messages:
        return {"failed": True, "msg": "; ".join(validation.error_messages)}
    result = execute(spec, validation.validated_parameters, check_mode)
    # Hide what the argument spec marks no_log (api_key), as AnsibleModule would.
    return remove_values(result, validation._no_log_values)
