# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Runs metal3.baremetal.metal3remediation on the controller (see plugin_utils/engine_action.py)."""
from __future__ import annotations

from ansible_collections.metal3.baremetal.plugins.modules.metal3remediation import SPEC
from ansible_collections.metal3.baremetal.plugins.plugin_utils.engine_action import EngineAction


class ActionModule(EngineAction):
    spec = SPEC
