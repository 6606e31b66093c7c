#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: table
short_description: Print rows as an aligned text table, whatever the callback's result format
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - Aligns O(rows) under O(columns) (each column as wide as its widest cell, two spaces between columns) and
    prints the lines through Ansible's display, at every verbosity, before the task's result - so the table
    reads the same under C(ANSIBLE_CALLBACK_RESULT_FORMAT=json) and C(yaml), where a multi-line C(msg) of
    M(ansible.builtin.debug) is one escaped JSON string.
  - A cell that is null prints as C(-); any other value as its text.
  - Run as a module (not through its action plugin, which is the normal case) it only returns the lines.
extends_documentation_fragment:
  - metal3.baremetal.attributes
attributes:
  check_mode:
    support: full
    details: Prints the table in check mode too.
  diff_mode:
    support: none
options:
  columns:
    description: The column headings.
    type: list
    elements: str
    required: true
  rows:
    description: The rows, each a list of cells in the order of O(columns); a shorter row is padded with C(-).
    type: list
    elements: list
    required: true
  title:
    description: A line printed above the table.
    type: str
"""

EXAMPLES = r"""
- name: Show the machines
  metal3.baremetal.table:
    title: Machines
    columns: [MACHINE, HOST, STATE]
    rows: "{{ metal3machine_states | sort(attribute='name') | map(attribute='name')
              | zip(metal3machine_states | sort(attribute='name') | map(attribute='host'),
                    metal3machine_states | sort(attribute='name') | map(attribute='phase')) | list }}"
"""

RETURN = r"""
lines:
  description: The table's lines, as printed (the title first when there is one).
  returned: always
  type: list
  elements: str
  sample: ["MACHINE  HOST           STATE", "cp-0     metal3/host-0  provisioned"]
"""

from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.ansible_module import run_module
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec


def cell(value: Any) -> str:
    return "-" if value is None else str(value)


def table_lines(columns: list[str], rows: list[list[Any]], title: str | None = None) -> list[str]:
    """Left-aligned columns, two spaces apart, no trailing blanks; Invalid for a row longer than the header."""
    for index, row in enumerate(rows):
        if len(row) > len(columns):
            raise Invalid(f"rows[{index}]: {len(row)} cells for {len(columns)} columns")
    cells = [list(columns)] + [[cell(v) for v in row] + ["-"] * (len(columns) - len(row)) for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = ["  ".join(text.ljust(width) for text, width in zip(r, widths, strict=True)).rstrip() for r in cells]
    return [title, *lines] if title else lines


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    return {"changed": False, "lines": table_lines(params["columns"], params["rows"], params["title"])}


SPEC = ModuleSpec(
    argument_spec={
        "columns": {"type": "list", "elements": "str", "required": True},
        "rows": {"type": "list", "elements": "list", "required": True},
        "title": {"type": "str"},
    },
    run=run,
)


def main() -> None:
    run_module(SPEC)


if __name__ == "__main__":
    main()
