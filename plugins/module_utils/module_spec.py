# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""What a module is to the engine: an argument spec and a run function.

Both adapters use it: the module (plugins/modules, run through AnsiballZ) and the
action plugin of the same name (plugins/action, run on the controller, which
saves the ~0.4 s a module task costs). Neither holds any logic of its own.
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid, Metal3Error

Run = Callable[[dict[str, Any], bool], dict[str, Any]]


@dataclass(frozen=True)
class ModuleSpec:
    argument_spec: dict[str, dict[str, Any]]
    run: Run  # (validated params, check_mode) -> result
    mutually_exclusive: list[list[str]] = field(default_factory=list)
    required_one_of: list[list[str]] = field(default_factory=list)
    required_if: list[Any] = field(default_factory=list)
    # Integer options and the least value each takes (wait_timeout: 0): an argument spec has no bounds.
    minimums: dict[str, int] = field(default_factory=dict)

    def validation_kwargs(self) -> dict[str, Any]:
        return {"mutually_exclusive": self.mutually_exclusive, "required_one_of": self.required_one_of,
                "required_if": self.required_if}


def execute(spec: ModuleSpec, params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    """Run the engine; an engine error becomes a failed result with a clear message, never a traceback."""
    try:
        check_minimums(spec.minimums, params)
        result = spec.run(params, check_mode)
    except Metal3Error as e:
        return {"failed": True, "changed": False, "msg": str(e), "reason": e.reason}
    except Exception as e:  # a bug: say so plainly, keep the traceback for -vvv
        return {"failed": True, "changed": False, "msg": f"internal error: {type(e).__name__}: {e}",
                "exception": traceback.format_exc()}
    result.setdefault("changed", False)
    return result


def check_minimums(minimums: dict[str, int], params: dict[str, Any]) -> None:
    """Invalid naming the first option below its least value, before the engine sees any option."""
    for name, least in minimums.items():
        value = params.get(name)
        if value is not None and value < least:
            raise Invalid(f"{name}: Invalid value: {value}: must be greater than or equal to {least}")
