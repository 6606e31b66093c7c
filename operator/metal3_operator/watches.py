"""watches.yaml, in the Ansible Operator's schema: which role (or playbook) reconciles which kind.

Keys and defaults are the Ansible Operator's (``internal/ansible/watches/watches.go``), so one file serves both.
``watchDependentResources``, ``watchClusterScopedResources`` and ``blacklist`` are accepted and have no effect:
this operator does not proxy the roles' API calls, the roles own what they create.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DEFAULT_MAX_RUNNER_ARTIFACTS = 20
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_KNOWN = {"group", "version", "kind", "role", "playbook", "vars", "maxRunnerArtifacts", "reconcilePeriod",
          "finalizer", "manageStatus", "watchDependentResources", "watchClusterScopedResources",
          "snakeCaseParameters", "watchAnnotationsChanges", "markUnsafe", "blacklist", "selector"}


class WatchesError(ValueError):
    """watches.yaml is unusable; the message names the entry and the field."""


def parse_duration(value: Any, field_name: str) -> float:
    """A Go duration ("10h", "1m30s", "500ms", "0") as seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    if text == "0":
        return 0.0
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise WatchesError(f"{field_name}: {value!r} is not a duration such as 30s, 5m or 10h")
    return sum(float(n) * _UNITS[u] for n, u in parts)


def parse_int(value: Any, valid: range, field_name: str) -> int:
    """An integer setting given as text (an environment variable, an annotation), within ``valid``."""
    text = str(value).strip()
    if text.isdigit() and int(text) in valid:
        return int(text)
    raise ValueError(f"{field_name}={value!r}: must be an integer from {valid.start} to {valid.stop - 1}")


@dataclass(frozen=True)
class Finalizer:
    name: str
    role: str | None = None
    playbook: str | None = None
    vars: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Watch:
    group: str
    version: str
    kind: str
    role: str | None = None
    playbook: str | None = None
    vars: dict[str, Any] = field(default_factory=dict)
    max_runner_artifacts: int = DEFAULT_MAX_RUNNER_ARTIFACTS
    reconcile_period: float | None = None
    finalizer: Finalizer | None = None
    manage_status: bool = True
    snake_case_parameters: bool = True
    watch_annotations_changes: bool = False
    mark_unsafe: bool = False
    selector: dict[str, Any] = field(default_factory=dict)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def name(self) -> str:
        """kind.group, as controller-runtime names a controller."""
        return f"{self.kind.lower()}.{self.group}" if self.group else self.kind.lower()

    def label_selector(self) -> str:
        """The selector as a list/watch labelSelector string (matchLabels and matchExpressions)."""
        terms = [f"{k}={v}" for k, v in (self.selector.get("matchLabels") or {}).items()]
        for expr in self.selector.get("matchExpressions") or []:
            key, op, values = expr["key"], expr["operator"], expr.get("values") or []
            terms.append({"In": f"{key} in ({','.join(values)})", "NotIn": f"{key} notin ({','.join(values)})",
                          "Exists": key, "DoesNotExist": f"!{key}"}[op])
        return ",".join(terms)


def _bool(entry: dict[str, Any], key: str, default: bool, where: str) -> bool:
    value = entry.get(key, default)
    if not isinstance(value, bool):
        raise WatchesError(f"{where}: {key} must be true or false, not {value!r}")
    return value


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WatchesError(f"{where} must be a mapping")
    return value


def _runnable(entry: dict[str, Any], where: str, base: Path, required: bool) -> tuple[str | None, str | None]:
    role, playbook = entry.get("role"), entry.get("playbook")
    if role and playbook:
        raise WatchesError(f"{where}: role and playbook are mutually exclusive")
    if required and not (role or playbook):
        raise WatchesError(f"{where}: one of role or playbook is required")
    if playbook:
        path = Path(playbook) if os.path.isabs(playbook) else base / playbook
        if not path.is_file():
            raise WatchesError(f"{where}: playbook {playbook} not found")
        return None, str(path)
    if role:
        if not find_role(role, base):
            raise WatchesError(f"{where}: role {role} not found in the collections or roles paths")
        return role, None
    return None, None


def find_role(role: str, base: Path) -> Path | None:
    """Where the role is, searched as the Ansible Operator searches (FQCN in the collections path first)."""
    candidates: list[Path] = []
    parts = role.split(".")
    if len(parts) == 3:
        ns, coll, name = parts
        paths = os.environ.get("ANSIBLE_COLLECTIONS_PATH") or os.environ.get("ANSIBLE_COLLECTIONS_PATHS") \
            or "~/.ansible/collections:/usr/share/ansible/collections"
        candidates += [Path(p).expanduser() / "ansible_collections" / ns / coll / "roles" / name
                       for p in paths.split(":") if p]
    for p in (os.environ.get("ANSIBLE_ROLES_PATH") or "").split(":"):
        if p:
            candidates += [Path(p) / role, Path(p) / "roles" / role]
    candidates.append(base / "roles" / role)
    return next((c for c in candidates if c.is_dir()), None)


def _watch(entry: Any, index: int, base: Path) -> Watch:
    if not isinstance(entry, dict):
        raise WatchesError(f"entry {index}: must be a mapping")
    where = f"entry {index} ({entry.get('kind', '?')})"
    unknown = set(entry) - _KNOWN
    if unknown:
        raise WatchesError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    for key in ("version", "kind"):
        if not entry.get(key) or not isinstance(entry[key], str):
            raise WatchesError(f"{where}: {key} is required")
    role, playbook = _runnable(entry, where, base, required=True)
    finalizer = None
    if entry.get("finalizer") is not None:
        spec = _mapping(entry["finalizer"], f"{where}: finalizer")
        if not spec.get("name"):
            raise WatchesError(f"{where}: finalizer.name is required")
        f_role, f_playbook = _runnable(spec, f"{where}: finalizer", base, required=False)
        finalizer = Finalizer(spec["name"], f_role, f_playbook, _mapping(spec.get("vars"), f"{where}: finalizer.vars"))
    artifacts = entry.get("maxRunnerArtifacts", DEFAULT_MAX_RUNNER_ARTIFACTS)
    if not isinstance(artifacts, int) or isinstance(artifacts, bool) or artifacts < 1:
        raise WatchesError(f"{where}: maxRunnerArtifacts must be a positive integer")
    period = entry.get("reconcilePeriod")
    return Watch(
        group=entry.get("group") or "", version=entry["version"], kind=entry["kind"], role=role, playbook=playbook,
        vars=_mapping(entry.get("vars"), f"{where}: vars"), max_runner_artifacts=artifacts,
        reconcile_period=None if period is None else parse_duration(period, f"{where}: reconcilePeriod"),
        finalizer=finalizer, manage_status=_bool(entry, "manageStatus", True, where),
        snake_case_parameters=_bool(entry, "snakeCaseParameters", True, where),
        watch_annotations_changes=_bool(entry, "watchAnnotationsChanges", False, where),
        mark_unsafe=_bool(entry, "markUnsafe", False, where),
        selector=_mapping(entry.get("selector"), f"{where}: selector"),
    )


def load(path: str | Path) -> list[Watch]:
    """Read watches.yaml (``${VAR}`` expanded from the environment, as the Ansible Operator does)."""
    path = Path(path)
    try:
        text = os.path.expandvars(path.read_text())
        entries = yaml.safe_load(text) or []
    except OSError as e:
        raise WatchesError(f"cannot read {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise WatchesError(f"{path} is not valid YAML: {e}") from None
    if not isinstance(entries, list):
        raise WatchesError(f"{path}: must be a list of watches")
    watches = [_watch(entry, i, path.parent) for i, entry in enumerate(entries)]
    seen: set[tuple[str, str, str]] = set()
    for w in watches:
        gvk = (w.group, w.version, w.kind)
        if gvk in seen:
            raise WatchesError(f"{path}: {w.kind}.{w.group}/{w.version} is watched twice")
        seen.add(gvk)
    return watches
