"""Debian's ``nft`` reading the nftables rule sets the collection renders, in throwaway namespaces.

:func:`check_ruleset` runs ``nft --check -f`` (parse, resolve and have the kernel validate the transaction, then
abort it); :func:`apply_ruleset` applies a rule set for real and lists what the kernel holds. Both run nft in a new
network namespace (inside a new user namespace mapped to root where the kernel allows it, else a network
namespace alone, which needs root), so the host's own ruleset is never read or touched.

nft comes from Debian's ``nftables`` package (``make nftables``, hack/nftables.sh, installs it). A missing nft is
an AssertionError, never a skip: the tests that need it fail.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any

NFT_PATHS = ("/usr/sbin/nft", "/sbin/nft")
SEPARATOR = "----8<---- nft -j list ruleset ----8<----"
TIMEOUT = 60


def nft() -> str:
    """The nft binary: on PATH, or in /usr/sbin (not on a non-root user's PATH)."""
    found = shutil.which("nft") or next((p for p in NFT_PATHS if os.access(p, os.X_OK)), None)
    if not found:
        raise AssertionError("nft is missing: install Debian's nftables package (`make nftables` as root, "
                             "or hack/nftables.sh)")
    return found


@functools.cache
def namespace_command() -> tuple[str, ...]:
    """The unshare prefix that gives nft a fresh network namespace: in a new user namespace mapped to root if the
    kernel lets us make one, else a network namespace alone."""
    for command in (("unshare", "--user", "--map-root-user", "--net"), ("unshare", "--net")):
        probe = subprocess.run([*command, nft(), "list", "ruleset"], capture_output=True, text=True, check=False,
                               timeout=TIMEOUT)
        if probe.returncode == 0:
            return command
    raise AssertionError(f"cannot run nft in a new network namespace (unshare --net): {probe.stderr.strip()}")


def _in_namespace(script: str, *texts: str, args: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """``sh -c script`` in a fresh namespace: ``$1`` the nft binary, ``$2``, ``$3``... files holding ``texts``,
    then ``args``."""
    with tempfile.TemporaryDirectory(prefix="nft-") as directory:
        paths = []
        for index, text in enumerate(texts):
            paths.append(os.path.join(directory, f"ruleset-{index}.nft"))
            with open(paths[-1], "w", encoding="utf-8") as file:
                file.write(text)
        return subprocess.run([*namespace_command(), "sh", "-c", script, "sh", nft(), *paths, *args],
                              capture_output=True, text=True, check=False, timeout=TIMEOUT)


def _numbered(text: str) -> str:
    return "\n".join(f"{number:4} {line}" for number, line in enumerate(text.splitlines(), 1))


def check_ruleset(text: str) -> None:
    """``nft --check -f`` accepts ``text``; AssertionError with nft's own message (and the numbered text) if not."""
    result = _in_namespace('"$1" --check -f "$2"', text)
    if result.returncode != 0:
        raise AssertionError(f"nft --check rejected the rule set:\n{result.stderr.strip()}\n\n{_numbered(text)}")


@dataclass(frozen=True)
class Applied:
    """What the kernel holds once the rule set was applied: ``nft list ruleset`` and its JSON (``nft -j``)."""

    text: str
    json: dict[str, Any]

    def tables(self) -> set[tuple[str, str]]:
        """(family, name) of every table."""
        return {(item["table"]["family"], item["table"]["name"]) for item in self.json.get("nftables", [])
                if "table" in item}

    def chain(self, family: str, table: str, name: str) -> dict[str, Any]:
        """The JSON of a chain (type, hook, prio, policy); AssertionError if there is none."""
        for item in self.json.get("nftables", []):
            chain = item.get("chain")
            if chain and (chain["family"], chain["table"], chain["name"]) == (family, table, name):
                return dict(chain)
        raise AssertionError(f"no chain {family} {table} {name} in:\n{self.text}")


def apply_ruleset(text: str, times: int = 1, before: str = "") -> Applied:
    """``nft -f`` with ``text``, ``times`` times in a row, in a fresh network namespace where ``before`` (another
    rule set) was applied first; then what the namespace holds."""
    script = ('"$1" -f "$2" || exit; i=0; while [ "$i" -lt "$4" ]; do "$1" -f "$3" || exit; i=$((i + 1)); done; '
              f'"$1" list ruleset && echo "{SEPARATOR}" && "$1" -j list ruleset')
    result = _in_namespace(script, before, text, args=(str(times),))
    if result.returncode != 0:
        raise AssertionError(f"nft -f failed (applied {times} times):\n{result.stderr.strip()}\n\n{_numbered(text)}")
    listed, _separator, as_json = result.stdout.partition(SEPARATOR + "\n")
    return Applied(listed, json.loads(as_json))
