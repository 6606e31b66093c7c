# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Runs metal3.baremetal.table on the controller and prints its lines through Ansible's display."""
from __future__ import annotations

from typing import Any

from ansible_collections.metal3.baremetal.plugins.modules.table import SPEC
from ansible_collections.metal3.baremetal.plugins.plugin_utils.engine_action import EngineAction, display


class ActionModule(EngineAction):
    spec = SPEC

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        # At every verbosity, as plain lines: aligned whatever the callback's result format.
        for line in result.get("lines") or []:
            display.display(line)
        return result
