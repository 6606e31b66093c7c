"""Count the engine's reads of an object's spec and status, by what mypy knows of the object read.

Each ``x["spec"]``, ``x["status"]``, ``x.get("spec")`` and ``x.get("status")`` in plugins/module_utils is counted
by the type mypy (--strict, the project's settings) gives ``x``: a TypedDict (typed: mypy checks the fields read
from it), ``Any`` or a ``dict[str, Any]`` (untyped: any field name, any use, passes), or something else.
``--files a.py,b.py`` also counts every string-keyed read (``y["k"]``, ``y.get("k")``) in those files, nested ones
included, the same way. ``--list`` prints each access.

Usage (from the repository root): .venv/bin/python hack/count-typed-access.py [--files ipam/pools.py,...] [--list]
"""
from __future__ import annotations

import argparse
import ast
import os
import sys
from collections import Counter
from pathlib import Path

from mypy import build
from mypy.main import process_options
from mypy.nodes import CallExpr, Expression, IndexExpr, MemberExpr, NameExpr, StrExpr
from mypy.types import AnyType, Instance, TypedDictType, UnionType, get_proper_type

ROOT = Path(__file__).resolve().parent.parent
COLLECTIONS = ROOT / "build" / "collections"
PACKAGE = "ansible_collections.metal3.baremetal.plugins.module_utils"
TOP = {"spec", "status"}


def kind_of(types: dict[Expression, object], expr: Expression) -> str:
    """'typed', 'Any' or 'other' for the type mypy gives ``expr`` (None in a union left aside)."""
    found = types.get(expr)
    if found is None:
        return "unchecked"
    proper = get_proper_type(found)  # type: ignore[arg-type]
    if isinstance(proper, UnionType):
        items = [get_proper_type(t) for t in proper.items]
        items = [t for t in items if not (isinstance(t, Instance) and t.type.fullname == "builtins.NoneType")
                 and type(t).__name__ != "NoneType"]
        proper = items[0] if len(items) == 1 else proper
    if isinstance(proper, TypedDictType):
        return "typed"
    if isinstance(proper, AnyType):
        return "Any"
    if isinstance(proper, Instance) and proper.type.fullname in ("builtins.dict", "typing.Mapping") \
            and proper.args and isinstance(get_proper_type(proper.args[-1]), AnyType):
        return "Any"
    return "other"


def typed_reads(types: dict[Expression, object]) -> dict[tuple[int, int, str, str], list[str]]:
    """Every string-keyed read mypy typed, by (line, column, key, the name read from or ''): the kind of the
    expression read from. (mypy is compiled: its visitors cannot be subclassed, and its expressions do not say
    their module, so each read is found among the expressions it typed and matched to a file by its place.)"""
    found: dict[tuple[int, int, str, str], list[str]] = {}
    for expr in types:
        if isinstance(expr, IndexExpr) and isinstance(expr.index, StrExpr):
            key, base = expr.index.value, expr.base
        elif isinstance(expr, CallExpr) and isinstance(expr.callee, MemberExpr) and expr.callee.name == "get" \
                and expr.args and isinstance(expr.args[0], StrExpr):
            key, base = expr.args[0].value, expr.callee.expr
        else:
            continue
        name = base.name if isinstance(base, NameExpr) else ""
        found.setdefault((expr.line, expr.column, key, name), []).append(kind_of(types, base))
    return found


def file_reads(path: Path) -> list[tuple[int, int, str, str]]:
    """Every string-keyed read in a file (``x["k"] = v`` writes), by (line, column, key, the name read from or '')."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str):
            key, base = node.slice.value, node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            key, base = node.args[0].value, node.func.value
        else:
            continue
        found.append((node.lineno, node.col_offset, key, base.id if isinstance(base, ast.Name) else ""))
    return sorted(found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default="", help="module_utils files (relative) whose every read is counted")
    parser.add_argument("--list", action="store_true", help="print each access")
    args = parser.parse_args()
    os.chdir(COLLECTIONS)
    sources, options = process_options(["--config-file", str(ROOT / "pyproject.toml"), "-p", PACKAGE])
    options.export_types = True
    options.incremental = False
    result = build.build(sources, options)
    if result.errors:
        print("\n".join(result.errors), file=sys.stderr)
    files = {f.strip() for f in args.files.split(",") if f.strip()}
    typed = typed_reads(result.types)  # type: ignore[arg-type]
    top: Counter[str] = Counter()
    every: Counter[str] = Counter()
    module_utils = ROOT / "plugins" / "module_utils"
    for path in sorted(module_utils.rglob("*.py")):
        relative = str(path.relative_to(module_utils))
        if relative == "api/crds.py":
            continue
        for place in file_reads(path):
            kinds = typed.get(place, ["unchecked"])
            kind = kinds[0] if len(set(kinds)) == 1 else "ambiguous"
            if place[2] in TOP:
                top[kind] += 1
                if args.list:
                    print(f"{relative}:{place[0]}: [{place[2]!r}] on {kind}")
            if relative in files:
                every[kind] += 1
    print(f"spec/status reads in module_utils: {sum(top.values())}: " +
          ", ".join(f"{k} {v}" for k, v in sorted(top.items())))
    if files:
        print(f"string-keyed reads in {', '.join(sorted(files))}: {sum(every.values())}: " +
              ", ".join(f"{k} {v}" for k, v in sorted(every.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
