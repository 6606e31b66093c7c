"""Keep only the kernel modules an agent's ramdisk needs: the ones named, what they depend on (modules.dep) and
what they ask for first or after (modules.softdep), and every crypto and library module (small, and loaded on
demand by name). The rest are deleted; run depmod afterwards.

Usage: ramdisk_modules.py <ramdisk>/lib/modules/<kernel version> <module name>...
"""
from __future__ import annotations

import os
import re
import sys

ALWAYS = ("kernel/arch/", "kernel/crypto/", "kernel/lib/")


def module_name(path: str) -> str:
    return os.path.basename(path).split(".ko")[0].replace("-", "_")


def dependencies(base: str) -> dict[str, list[str]]:
    """Each module's path (relative to ``base``) and the paths it depends on."""
    found: dict[str, list[str]] = {}
    with open(os.path.join(base, "modules.dep"), encoding="utf-8") as lines:
        for line in lines:
            path, _colon, rest = line.partition(":")
            found[path] = rest.split()
    return found


def soft_dependencies(base: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    with open(os.path.join(base, "modules.softdep"), encoding="utf-8") as lines:
        for line in lines:
            match = re.match(r"softdep (\S+) (.*)", line.strip())
            if match:
                found[match.group(1).replace("-", "_")] = [
                    word.replace("-", "_") for word in match.group(2).split() if not word.endswith(":")]
    return found


def kept_modules(deps: dict[str, list[str]], soft: dict[str, list[str]], wanted: list[str]) -> set[str]:
    by_name = {module_name(path): path for path in deps}
    missing = [name for name in wanted if name not in by_name]
    if missing:
        raise SystemExit(f"lab-images: no such module in the ramdisk's kernel: {' '.join(missing)}")
    todo = [by_name[name] for name in wanted] + [path for path in deps if path.startswith(ALWAYS)]
    kept: set[str] = set()
    while todo:
        path = todo.pop()
        if path not in kept:
            kept.add(path)
            todo += deps[path] + [by_name[name] for name in soft.get(module_name(path), []) if name in by_name]
    return kept


def main(base: str, wanted: list[str]) -> None:
    deps = dependencies(base)
    kept = kept_modules(deps, soft_dependencies(base), wanted)
    for path in set(deps) - kept:
        os.remove(os.path.join(base, path))
    print(f"lab-images: {len(kept)} of {len(deps)} kernel modules kept", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
