"""watches.yaml, in the Ansible Operator's schema: which role (or playbook) reconciles which kind.

Keys, defaults and what is refused are the Ansible Operator's (``internal/ansible/watches/watches.go``), so one
file serves both: every file it accepts is accepted here, and read the same way. Keys match whatever their case
(``ReconcilePeriod`` is ``reconcilePeriod``) and unknown keys are ignored, as Go's JSON decoding does; here they
are logged. ``watchDependentResources``, ``watchClusterScopedResources`` and ``blacklist`` are read and have no
effect: this operator does not proxy the roles' API calls, the roles own what they create. What the Ansible
Operator only refuses when it starts (a selector that is not one) is refused here with the rest.
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

log = logging.getLogger("metal3_operator.watches")
DEFAULT_MAX_RUNNER_ARTIFACTS = 20
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_KNOWN = {"group", "version", "kind", "role", "playbook", "vars", "maxRunnerArtifacts", "reconcilePeriod",
          "finalizer", "manageStatus", "watchDependentResources", "watchClusterScopedResources",
          "snakeCaseParameters", "watchAnnotationsChanges", "markUnsafe", "blacklist", "selector"}
_FINALIZER_KEYS = {"name", "role", "playbook", "vars"}
_SELECTOR_KEYS = {"matchLabels", "matchExpressions"}
_EXPRESSION_KEYS = {"key", "operator", "values"}
_OPERATORS = {"In", "NotIn", "Exists", "DoesNotExist"}
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class WatchesError(ValueError):
    """watches.yaml is unusable; the message names the entry and the field."""


def parse_duration(value: Any, field_name: str) -> float:
    """A Go duration ("10h", "1m30s", "1.5h", "500ms", "-5s", "0") as seconds; a number is seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    sign, rest = (-1.0, text[1:]) if text[:1] == "-" else (1.0, text[1:] if text[:1] == "+" else text)
    if rest == "0":
        return 0.0
    parts = _DURATION.findall(rest)
    if not parts or "".join(n + u for n, u in parts) != rest:
        raise WatchesError(f"{field_name}: {value!r} is not a duration such as 30s, 5m or 10h")
    return sign * sum(float(n) * _UNITS[u] for n, u in parts)


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


def _keys(entry: dict[Any, Any], known: set[str], where: str) -> dict[str, Any]:
    """``entry`` with its keys spelt as ``known`` spells them, whatever their case (as Go's JSON decoding matches
    them); a key it does not know is ignored, and logged."""
    spelt = {name.lower(): name for name in known}
    keyed: dict[str, Any] = {}
    unknown = []
    for key, value in entry.items():
        name = spelt.get(str(key).lower())
        if name is None:
            unknown.append(str(key))
        else:
            keyed[name] = value
    if unknown:
        log.warning("%s: ignoring unknown field(s) %s", where, ", ".join(sorted(unknown)))
    return keyed


def _string(entry: dict[str, Any], key: str, where: str) -> str:
    """A string field; a number or a boolean is taken as its text, as the Ansible Operator takes it."""
    value = entry.get(key)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if not isinstance(value, str):
        raise WatchesError(f"{where}: {key} must be a string, not {type(value).__name__}")
    return value


def _bool(entry: dict[str, Any], key: str, default: bool, where: str) -> bool:
    value = entry.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise WatchesError(f"{where}: {key} must be true or false, not {value!r}")
    return value


def _mapping(value: Any, where: str) -> dict[Any, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WatchesError(f"{where} must be a mapping")
    return value


def _playbook(playbook: str, base: Path) -> Path | None:
    """Where a playbook is: absolute, or relative to the working directory (the Ansible Operator's rule), or to the
    watches file."""
    path = Path(playbook)
    candidates = [path] if path.is_absolute() else [Path.cwd() / path, base / path]
    return next((c for c in candidates if c.is_file()), None)


def find_role(role: str, base: Path) -> Path | None:
    """Where the role is, searched as the Ansible Operator searches: an absolute path; an FQCN in the collections
    path; ANSIBLE_ROLES_PATH (with or without ``roles/``); ``roles/`` of the working directory (here also of the
    watches file's directory); last, the name itself as a path from the working directory."""
    if os.path.isabs(role):
        return Path(role) if Path(role).is_dir() else None
    candidates: list[Path] = []
    parts = role.split(".")
    if len(parts) == 3:
        ns, coll, name = parts
        paths = os.environ.get("ANSIBLE_COLLECTIONS_PATH") or os.environ.get("ANSIBLE_COLLECTIONS_PATHS") \
            or "/usr/share/ansible/collections:~/.ansible/collections"
        candidates += [Path(p).expanduser() / "ansible_collections" / ns / coll / "roles" / name
                       for p in paths.split(":") if p]
    for p in (os.environ.get("ANSIBLE_ROLES_PATH") or "").split(":"):
        if p:
            candidates += [Path(p) / role, Path(p) / "roles" / role]
    candidates += [Path.cwd() / "roles" / role, base / "roles" / role, Path.cwd() / role]
    return next((c for c in candidates if c.is_dir()), None)


def _runnable(entry: dict[str, Any], where: str, base: Path) -> tuple[str | None, str | None, str]:
    """(role, playbook, what is wrong): the playbook when one is named (it wins over a role, as in the Ansible
    Operator), else the role. A role found as a collection's is kept by its FQCN (it runs as the collection's
    role); any other by its path."""
    role, playbook = _string(entry, "role", where), _string(entry, "playbook", where)
    if playbook:
        found = _playbook(playbook, base)
        return None, str(found or playbook), "" if found else f"playbook {playbook} not found"
    if role:
        path = find_role(role, base)
        if path is None:
            return role, None, f"role {role} not found in the collections or roles paths"
        fqcn = len(role.split(".")) == 3 and path.parts[-5:-4] == ("ansible_collections",)
        return (role if fqcn else str(path)), None, ""
    return None, None, "one of role or playbook is required"


def _label_key(key: Any, where: str) -> str:
    """A label key checked as Kubernetes checks one: an optional DNS subdomain and '/', then a name."""
    prefix, slash, name = str(key).rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)) \
            or len(name) > 63 or not _LABEL_NAME.match(name):
        raise WatchesError(f"{where}: {key!r} is not a label key (an optional DNS subdomain and '/', then up to 63 "
                           "alphanumerics, '-', '_' or '.', starting and ending alphanumeric)")
    return str(key)


def _label_value(value: Any, where: str) -> str:
    """A label value as text (a number or a boolean is its text, as the Ansible Operator takes it), checked."""
    text = "" if value is None else ("true" if value is True else "false" if value is False else str(value))
    if isinstance(value, dict | list) or text and (len(text) > 63 or not _LABEL_NAME.match(text)):
        raise WatchesError(f"{where}: {value!r} is not a label value (up to 63 alphanumerics, '-', '_' or '.', "
                           "starting and ending alphanumeric)")
    return text


def _selector(value: Any, where: str) -> dict[str, Any]:
    """The watch's label selector, refused when it is not one (the Ansible Operator refuses it when it starts)."""
    spec = _keys(_mapping(value, where), _SELECTOR_KEYS, where)
    labels = {_label_key(k, f"{where}.matchLabels"): _label_value(v, f"{where}.matchLabels")
              for k, v in _mapping(spec.get("matchLabels"), f"{where}.matchLabels").items()}
    expressions = []
    listed = spec.get("matchExpressions") or []
    if not isinstance(listed, list):
        raise WatchesError(f"{where}.matchExpressions must be a list")
    for i, raw in enumerate(listed):
        at = f"{where}.matchExpressions[{i}]"
        expression = _keys(_mapping(raw, at), _EXPRESSION_KEYS, at)
        operator, values = expression.get("operator"), expression.get("values") or []
        key = _label_key(expression.get("key", ""), f"{at}.key")
        if operator not in _OPERATORS:
            raise WatchesError(f"{at}.operator: {operator!r} is not one of {', '.join(sorted(_OPERATORS))}")
        if not isinstance(values, list):
            raise WatchesError(f"{at}.values must be a list")
        if operator in ("In", "NotIn") and not values:
            raise WatchesError(f"{at}.values: must not be empty for {operator}")
        if operator in ("Exists", "DoesNotExist") and values:
            raise WatchesError(f"{at}.values: must be empty for {operator}")
        expressions.append({"key": key, "operator": operator,
                            "values": [_label_value(v, f"{at}.values") for v in values]})
    return {**({"matchLabels": labels} if labels else {}), **({"matchExpressions": expressions} if expressions else {})}


def _finalizer(value: Any, where: str, base: Path) -> Finalizer | None:
    """The Ansible Operator's rule: a name, and a role or a playbook that exists, or vars (then the watch's role or
    playbook runs with them). With vars, a role or playbook that does not exist is accepted, and fails when it
    runs."""
    if value is None:
        return None
    spec = _keys(_mapping(value, f"{where}: finalizer"), _FINALIZER_KEYS, f"{where}: finalizer")
    name = _string(spec, "name", f"{where}: finalizer")
    if not name:
        raise WatchesError(f"{where}: finalizer.name is required")
    variables = _mapping(spec.get("vars"), f"{where}: finalizer.vars")
    role, playbook, problem = _runnable(spec, f"{where}: finalizer", base)
    if problem and not variables:
        if not (role or playbook):
            problem = "needs a role, a playbook or vars"
        raise WatchesError(f"{where}: finalizer {problem}")
    return Finalizer(name, role, playbook, variables)


def _watch(entry: Any, index: int, base: Path) -> Watch:
    if not isinstance(entry, dict):
        raise WatchesError(f"entry {index}: must be a mapping")
    where = f"entry {index} ({entry.get('kind', '?')})"
    entry = _keys(entry, _KNOWN, where)
    group, version, kind = (_string(entry, key, where) for key in ("group", "version", "kind"))
    for key, value in (("version", version), ("kind", kind)):
        if not value:
            raise WatchesError(f"{where}: {key} is required")
    role, playbook, problem = _runnable(entry, where, base)
    if problem:
        raise WatchesError(f"{where}: {problem}")
    artifacts = entry.get("maxRunnerArtifacts")
    if artifacts is not None and (not isinstance(artifacts, int) or isinstance(artifacts, bool)):
        raise WatchesError(f"{where}: maxRunnerArtifacts must be an integer")
    period = entry.get("reconcilePeriod")
    if period is not None and not isinstance(period, str):
        raise WatchesError(f"{where}: reconcilePeriod must be a duration written as text, such as 30s, "
                           f"not {period!r}")
    blacklist = entry.get("blacklist")
    if blacklist is not None and not isinstance(blacklist, list):
        raise WatchesError(f"{where}: blacklist must be a list of group, version and kind")
    for key in ("watchDependentResources", "watchClusterScopedResources"):
        _bool(entry, key, False, where)
    return Watch(
        group=group, version=version, kind=kind, role=role, playbook=playbook,
        vars=_mapping(entry.get("vars"), f"{where}: vars"),
        # 0 (or none) is the default, as in the Ansible Operator; fewer keeps every run's artifacts.
        max_runner_artifacts=artifacts or DEFAULT_MAX_RUNNER_ARTIFACTS,
        reconcile_period=None if period is None else parse_duration(period, f"{where}: reconcilePeriod"),
        finalizer=_finalizer(entry.get("finalizer"), where, base),
        manage_status=_bool(entry, "manageStatus", True, where),
        snake_case_parameters=_bool(entry, "snakeCaseParameters", True, where),
        watch_annotations_changes=_bool(entry, "watchAnnotationsChanges", False, where),
        mark_unsafe=_bool(entry, "markUnsafe", False, where),
        selector=_selector(entry.get("selector"), f"{where}: selector"),
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
    watches = [_watch(entry, i, path.parent.resolve()) for i, entry in enumerate(entries)]
    seen: set[tuple[str, str, str]] = set()
    for w in watches:
        gvk = (w.group, w.version, w.kind)
        if gvk in seen:
            raise WatchesError(f"{path}: {w.kind}.{w.group}/{w.version} is watched twice")
        seen.add(gvk)
    return watches
