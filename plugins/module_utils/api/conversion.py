# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""CAPM3's objects between infrastructure.cluster.x-k8s.io/v1beta1 and v1beta2, as upstream converts them.

v1beta2 is what the CRDs store; v1beta1 is served beside it. The local store converts with :func:`convert` on
the way in and out, and the operator's conversion webhook serves the same function to kube-apiserver, so both
backends convert alike. The differences (upstream's ``api/v1beta1/conversion.go``):

- status.ready <-> status.initialization.provisioned (Metal3Cluster, Metal3Machine);
- conditions: v1beta2's (metav1 Conditions) are v1beta1's status.v1beta2.conditions; v1beta1's, with
  failureReason and failureMessage, are v1beta2's status.deprecated.v1beta1;
- failureDomains (spec and status of Metal3Cluster, Metal3ClusterTemplate): a map by name <-> a list;
- noCloudProvider is v1beta1's only, the opposite of cloudProviderEnabled (which v1beta1 also has); alone, it
  sets cloudProviderEnabled in v1beta2 (upstream drops it);
- ready false is provisioned false (upstream leaves initialization out), so a round trip needs no annotation;
- Metal3Machine status.phase, Metal3Data and Metal3DataTemplate spec.templateReference are v1beta1's only;
- image.format <-> image.diskFormat (Metal3Machine, Metal3MachineTemplate);
- ObjectReferences (apiVersion, kind, uid, ...) <-> {name, namespace}: Metal3Machine spec.dataTemplate and
  status.renderedData, Metal3DataClaim spec.template and status.renderedData, Metal3Data spec.claim and
  spec.template (v1beta1 requires the last three; an empty one is no reference in v1beta2);
- Metal3DataTemplate: metaData ``*FromIPPool`` <-> ``*FromPool``; a bond's parameters map <-> a list of
  {name, value}; status.indexes map by name <-> a list of {name, index}; an index step 0 is the default step;
- a remediation strategy's timeout (a duration such as 5m0s) <-> timeoutSeconds;
- the templates' spec.template.metadata is v1beta2's only (Metal3ClusterTemplate).

What the target version cannot hold is kept, as upstream keeps it, in the annotation
``cluster.x-k8s.io/conversion-data``: the whole source object but its metadata, as JSON. Converting back restores
from it every field the object's current content does not contradict, so a round trip is lossless, and an edit
made meanwhile in the other version wins over the annotation. The seed's extra spellings and our own extra fields
are the same in both versions and are copied as they are.
"""
from __future__ import annotations

import copy
import json
import re
from decimal import Decimal, InvalidOperation
from typing import Any, Callable, Iterator

from ansible_collections.metal3.baremetal.plugins.module_utils.api.kinds import lookup
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest, Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, split_api_version

INFRA_GROUP = "infrastructure.cluster.x-k8s.io"
CONVERTED_GROUPS = frozenset({INFRA_GROUP})  # the groups whose versions differ and convert here
HUB, SPOKE = "v1beta2", "v1beta1"
ANNOTATION = "cluster.x-k8s.io/conversion-data"

Body = dict[str, Any]  # an object without its metadata
Step = Callable[[Body], None]  # converts a body in place

_MISSING = object()


# -- public API ---------------------------------------------------------------------------------------------

def storage_version(api_version: str, kind: str) -> str:
    """The apiVersion ``kind`` is stored at: its CRD's storage version, else (kinds stored as given) ``api_version``."""
    info = lookup(api_version, kind)
    if not info.storage:
        return api_version
    return f"{info.group}/{info.storage}" if info.group else info.storage


def convert(obj: Object, api_version: str) -> Object:
    """``obj`` at ``api_version``, a new object (``obj`` is never changed); identity when it is at that version.

    Raises BadRequest for another group, or a kind whose versions differ and have no conversion here, and Invalid
    naming the field for a value the target version cannot hold (a timeout that is no duration).
    """
    if not isinstance(obj, dict):
        raise BadRequest(f"an object to convert must be a mapping, not {type(obj).__name__}")
    kind, source = obj.get("kind"), str(obj.get("apiVersion") or "")
    group, version = split_api_version(source)
    target_group, target = split_api_version(str(api_version))
    if target_group != group:
        raise BadRequest(f"cannot convert {kind} from {source} to {api_version}: another API group")
    if version == target:
        return copy.deepcopy(obj)
    forward, backward = _steps(group, str(kind), source, api_version)
    metadata = copy.deepcopy(obj["metadata"]) if isinstance(obj.get("metadata"), dict) else None
    annotations = dict((metadata or {}).get("annotations") or {})
    snapshot = _snapshot(annotations.pop(ANNOTATION, None), api_version, kind)
    body = {key: copy.deepcopy(value) for key, value in obj.items() if key != "metadata"}

    def seen_from_source(candidate: Body) -> Body:
        return _apply(backward, candidate, source)

    out = _apply(forward, body, api_version)
    if snapshot is not None:
        out = _restore(out, snapshot, seen_from_source)
    if seen_from_source(out) != body:  # the target cannot hold all of it: keep the source, as upstream does
        annotations[ANNOTATION] = json.dumps(body, sort_keys=True, separators=(",", ":"))
    result: Object = {"apiVersion": api_version, "kind": kind}
    if metadata is not None or annotations:
        metadata = metadata if metadata is not None else {}
        if annotations:
            metadata["annotations"] = annotations
        else:
            metadata.pop("annotations", None)
        result["metadata"] = metadata
    result.update((key, value) for key, value in out.items() if key not in ("apiVersion", "kind"))
    return result


# -- the annotation -----------------------------------------------------------------------------------------

def _snapshot(text: Any, api_version: str, kind: Any) -> Body | None:
    """The object the annotation keeps, when it is of ``kind`` at ``api_version`` (else it says nothing here)."""
    if not isinstance(text, str):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("apiVersion") != api_version or data.get("kind") != kind:
        return None
    return {key: value for key, value in data.items() if key != "metadata"}


def _restore(base: Body, snapshot: Body, seen: Callable[[Body], Body]) -> Body:
    """``base`` with every part of ``snapshot`` that the source version does not see differently.

    ``seen`` turns a candidate into the source version; a part of the snapshot is taken when the candidate with
    it looks, from the source, exactly as ``base`` does: what the source version cannot hold (a field it lacks, a
    list's order, a value it spells otherwise), never what was changed in it since the snapshot was made.
    """
    target = seen(base)
    if seen(snapshot) == target:
        return copy.deepcopy(snapshot)
    result = copy.deepcopy(base)
    _adopt(result, snapshot, lambda: seen(result) == target)
    return result


def _adopt(node: dict[str, Any], wanted: dict[str, Any], fits: Callable[[], bool]) -> None:
    """Take into ``node`` (a mapping inside the candidate ``fits`` checks) each part of ``wanted`` that fits."""
    for key in sorted(set(node) | set(wanted), key=str):
        have, want = node.get(key, _MISSING), wanted.get(key, _MISSING)
        if have == want:
            continue
        _put(node, key, copy.deepcopy(want))
        if fits():
            continue
        _put(node, key, have)
        if isinstance(have, dict) and isinstance(want, dict):
            _adopt(have, want, fits)
        elif isinstance(have, list) and isinstance(want, list) and len(have) == len(want):
            for i, (item, wanted_item) in enumerate(zip(have, want, strict=True)):
                if item == wanted_item:
                    continue
                have[i] = copy.deepcopy(wanted_item)
                if fits():
                    continue
                have[i] = item
                if isinstance(item, dict) and isinstance(wanted_item, dict):
                    _adopt(item, wanted_item, fits)


def _put(node: dict[str, Any], key: str, value: Any) -> None:
    if value is _MISSING:
        node.pop(key, None)
    else:
        node[key] = value


# -- which conversion -----------------------------------------------------------------------------------------

def _steps(group: str, kind: str, source: str, target: str) -> tuple[Step, Step]:
    """(forward, backward): the steps from ``source`` to ``target`` and back."""
    info = lookup(source, kind)
    lookup(target, kind)  # UnknownKind for a version the kind does not have
    versions = (split_api_version(source)[1], split_api_version(target)[1])
    if group in CONVERTED_GROUPS:
        steps = _KINDS.get(kind)
        if steps is not None and versions == (SPOKE, HUB):
            return steps
        if steps is not None and versions == (HUB, SPOKE):
            return steps[1], steps[0]
    elif info.schemas is not None and info.schema_for(versions[0]) == info.schema_for(versions[1]):
        return _same, _same  # one shape under two names
    raise BadRequest(f"cannot convert {kind} from {source} to {target}: the versions' fields differ and there is "
                     "no conversion between them")


def _apply(step: Step, body: Body, api_version: str) -> Body:
    out = copy.deepcopy(body)
    out["apiVersion"] = api_version
    step(out)
    return out


def _same(body: Body) -> None:
    pass


# -- helpers ------------------------------------------------------------------------------------------------

def _dicts(node: Any, *path: str) -> Iterator[dict[str, Any]]:
    """The mappings at ``path`` under ``node``; '[]' steps into every item of a list."""
    if not path:
        if isinstance(node, dict):
            yield node
        return
    head, rest = path[0], path[1:]
    if head == "[]":
        for item in node if isinstance(node, list) else ():
            yield from _dicts(item, *rest)
    elif isinstance(node, dict) and head in node:
        yield from _dicts(node[head], *rest)


def _each(body: Body, step: Callable[[dict[str, Any]], None], *path: str) -> None:
    for node in list(_dicts(body, *path)):
        step(node)


def _rename(node: dict[str, Any], old: str, new: str) -> None:
    if old in node and new not in node:
        node[new] = node.pop(old)


def _short_ref(node: dict[str, Any], key: str, keep_empty: bool) -> None:
    """An ObjectReference as v1beta2's {name, namespace}; an empty one is no reference unless ``keep_empty``."""
    ref = node.get(key)
    if not isinstance(ref, dict):
        return
    short = {field: ref[field] for field in ("name", "namespace") if ref.get(field) not in (None, "")}
    if short or keep_empty:
        node[key] = short
    else:
        del node[key]


def _required_ref(node: dict[str, Any], key: str) -> None:
    """v1beta1 requires the reference: no reference is an empty one."""
    if node.get(key) is None:
        node[key] = {}


# -- failure domains, status ----------------------------------------------------------------------------------

def _domains_up(node: dict[str, Any]) -> None:
    domains = node.get("failureDomains")
    if not isinstance(domains, dict):
        return
    listed = []
    for name in sorted(domains):
        domain = domains[name] if isinstance(domains[name], dict) else {}
        entry = {"name": name, **{k: v for k, v in domain.items() if k not in ("name", "controlPlane")}}
        if domain.get("controlPlane"):
            entry["controlPlane"] = True
        listed.append(entry)
    _put(node, "failureDomains", listed or _MISSING)


def _domains_down(node: dict[str, Any]) -> None:
    domains = node.get("failureDomains")
    if not isinstance(domains, list):
        return
    mapped: dict[str, Any] = {}
    for domain in domains:
        if isinstance(domain, dict) and isinstance(domain.get("name"), str):
            entry = {k: v for k, v in domain.items() if k not in ("name", "controlPlane")}
            if domain.get("controlPlane"):
                entry["controlPlane"] = True
            mapped[domain["name"]] = entry
    _put(node, "failureDomains", mapped or _MISSING)


_OLD_STATUS = ("conditions", "failureReason", "failureMessage")


def _status_up(status: dict[str, Any]) -> None:
    old = {key: status.pop(key) for key in _OLD_STATUS if key in status}
    new = status.pop("v1beta2", None)
    if isinstance(new, dict) and "conditions" in new:
        status["conditions"] = new["conditions"]
    if old:
        status["deprecated"] = {"v1beta1": old}
    if "ready" in status:
        status["initialization"] = {"provisioned": status.pop("ready")}
    status.pop("phase", None)  # Metal3Machine's, never set upstream: v1beta2 has none
    _domains_up(status)


def _status_down(status: dict[str, Any]) -> None:
    deprecated = status.pop("deprecated", None)
    conditions = status.pop("conditions", _MISSING)
    old = deprecated.get("v1beta1") if isinstance(deprecated, dict) else None
    if isinstance(old, dict):
        status.update((key, old[key]) for key in _OLD_STATUS if key in old)
    if conditions is not _MISSING:
        status["v1beta2"] = {"conditions": conditions}
    initialization = status.pop("initialization", None)
    if isinstance(initialization, dict) and "provisioned" in initialization:
        status["ready"] = initialization["provisioned"]
    _domains_down(status)


# -- Metal3Cluster, Metal3ClusterTemplate ---------------------------------------------------------------------

def _cluster_spec_up(spec: dict[str, Any]) -> None:
    no_cloud_provider = spec.pop("noCloudProvider", None)
    if isinstance(no_cloud_provider, bool) and spec.get("cloudProviderEnabled") is None:
        spec["cloudProviderEnabled"] = not no_cloud_provider
    _domains_up(spec)


def _cluster_spec_down(spec: dict[str, Any]) -> None:
    if isinstance(spec.get("cloudProviderEnabled"), bool):
        spec["noCloudProvider"] = not spec["cloudProviderEnabled"]
    _domains_down(spec)


def _cluster_up(body: Body) -> None:
    _each(body, _cluster_spec_up, "spec")
    _each(body, _status_up, "status")


def _cluster_down(body: Body) -> None:
    _each(body, _cluster_spec_down, "spec")
    _each(body, _status_down, "status")


def _cluster_template_up(body: Body) -> None:
    _each(body, _cluster_spec_up, "spec", "template", "spec")


def _cluster_template_down(body: Body) -> None:
    _each(body, _cluster_spec_down, "spec", "template", "spec")
    _each(body, lambda template: template.pop("metadata", None), "spec", "template")


# -- Metal3Machine, Metal3MachineTemplate ----------------------------------------------------------------------

def _machine_spec_up(spec: dict[str, Any]) -> None:
    _each(spec, lambda image: _rename(image, "format", "diskFormat"), "image")
    _short_ref(spec, "dataTemplate", keep_empty=True)


def _machine_spec_down(spec: dict[str, Any]) -> None:
    _each(spec, lambda image: _rename(image, "diskFormat", "format"), "image")


def _machine_up(body: Body) -> None:
    _each(body, _machine_spec_up, "spec")
    _each(body, _status_up, "status")
    _each(body, lambda status: _short_ref(status, "renderedData", keep_empty=True), "status")


def _machine_down(body: Body) -> None:
    _each(body, _machine_spec_down, "spec")
    _each(body, _status_down, "status")


def _machine_template_up(body: Body) -> None:
    _each(body, _machine_spec_up, "spec", "template", "spec")


def _machine_template_down(body: Body) -> None:
    _each(body, _machine_spec_down, "spec", "template", "spec")


# -- Metal3DataTemplate ---------------------------------------------------------------------------------------

_POOL_SOURCES = {"ipAddressesFromIPPool": "ipAddressesFromPool", "prefixesFromIPPool": "prefixesFromPool",
                 "gatewaysFromIPPool": "gatewaysFromPool", "dnsServersFromIPPool": "dnsServersFromPool"}


def _template_parts(body: Body) -> Iterator[dict[str, Any]]:
    """The mappings holding metaData and networkData: the spec, and the seed's spec.template."""
    yield from _dicts(body, "spec")
    yield from _dicts(body, "spec", "template")


def _bond_parameters_up(bond: dict[str, Any]) -> None:
    parameters = bond.get("parameters")
    if isinstance(parameters, dict):
        _put(bond, "parameters", [{"name": name, "value": parameters[name]} for name in sorted(parameters)]
             or _MISSING)


def _bond_parameters_down(bond: dict[str, Any]) -> None:
    parameters = bond.get("parameters")
    if isinstance(parameters, list):
        mapped = {item["name"]: item["value"] for item in parameters
                  if isinstance(item, dict) and isinstance(item.get("name"), str) and "value" in item}
        _put(bond, "parameters", mapped or _MISSING)


def _default_step(index: dict[str, Any]) -> None:
    if index.get("step") == 0:  # 0 is the default step (1): v1beta2 has no step 0, and it reads back as none
        del index["step"]


def _indexes_up(status: dict[str, Any]) -> None:
    indexes = status.get("indexes")
    if isinstance(indexes, dict):
        listed = [{"name": name, "index": index} for name, index in indexes.items()]
        listed.sort(key=lambda entry: (entry["index"] if isinstance(entry["index"], int) else float("inf"),
                                       entry["name"]))
        _put(status, "indexes", listed or _MISSING)


def _indexes_down(status: dict[str, Any]) -> None:
    indexes = status.get("indexes")
    if isinstance(indexes, list):
        mapped = {entry["name"]: entry["index"] for entry in indexes
                  if isinstance(entry, dict) and isinstance(entry.get("name"), str) and "index" in entry}
        _put(status, "indexes", mapped or _MISSING)


def _data_template_up(body: Body) -> None:
    _each(body, lambda spec: spec.pop("templateReference", None), "spec")
    for part in list(_template_parts(body)):
        for meta_data in _dicts(part, "metaData"):
            for old, new in _POOL_SOURCES.items():
                _rename(meta_data, old, new)
            _each(meta_data, _default_step, "indexes", "[]")
        _each(part, _bond_parameters_up, "networkData", "links", "bonds", "[]")
    _each(body, _indexes_up, "status")


def _data_template_down(body: Body) -> None:
    for part in list(_template_parts(body)):
        for meta_data in _dicts(part, "metaData"):
            for old, new in _POOL_SOURCES.items():
                _rename(meta_data, new, old)
            _each(meta_data, _default_step, "indexes", "[]")
        _each(part, _bond_parameters_down, "networkData", "links", "bonds", "[]")
    _each(body, _indexes_down, "status")


# -- Metal3DataClaim, Metal3Data -------------------------------------------------------------------------------

def _data_claim_up(body: Body) -> None:
    _each(body, lambda spec: _short_ref(spec, "template", keep_empty=False), "spec")
    _each(body, lambda status: _short_ref(status, "renderedData", keep_empty=True), "status")


def _data_claim_down(body: Body) -> None:
    _each(body, lambda spec: _required_ref(spec, "template"), "spec")


def _data_up(body: Body) -> None:
    for spec in _dicts(body, "spec"):
        spec.pop("templateReference", None)
        _short_ref(spec, "claim", keep_empty=False)
        _short_ref(spec, "template", keep_empty=False)


def _data_down(body: Body) -> None:
    for spec in _dicts(body, "spec"):
        _required_ref(spec, "claim")
        _required_ref(spec, "template")


# -- Metal3Remediation, Metal3RemediationTemplate --------------------------------------------------------------

_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_UNITS = {"ns": Decimal("1e-9"), "us": Decimal("1e-6"), "µs": Decimal("1e-6"), "μs": Decimal("1e-6"),
          "ms": Decimal("1e-3"), "s": Decimal(1), "m": Decimal(60), "h": Decimal(3600)}


def _seconds(value: Any, path: str) -> int:
    """A Go duration ('5m0s', '300s', '1.5h') in whole seconds, as Cluster API's ConvertToSeconds counts them."""
    text = value if isinstance(value, str) else ""
    sign, rest = (-1, text[1:]) if text[:1] == "-" else (1, text[1:] if text[:1] == "+" else text)
    if rest == "0":
        return 0
    total, position = Decimal(0), 0
    while rest and position < len(rest):
        part = _DURATION_PART.match(rest, position)
        if part is None:
            break
        try:
            total += Decimal(part[1]) * _UNITS[part[2]]
        except InvalidOperation:
            break
        position = part.end()
    if not rest or position != len(rest):
        raise Invalid(f"{path}: Invalid value: {value!r}: not a duration (such as 300s or 5m0s)")
    return sign * int(total)


def _duration(seconds: Any, path: str) -> str:
    """Whole seconds as Go writes a duration: 300 -> '5m0s'."""
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        raise Invalid(f"{path}: Invalid value: {seconds!r}: must be of type integer")
    sign, seconds = ("-" if seconds < 0 else ""), abs(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, rest = divmod(rest, 60)
    if hours:
        return f"{sign}{hours}h{minutes}m{rest}s"
    return f"{sign}{minutes}m{rest}s" if minutes else f"{sign}{rest}s"


def _strategy_up(path: str) -> Callable[[dict[str, Any]], None]:
    def step(strategy: dict[str, Any]) -> None:
        timeout = strategy.pop("timeout", None)
        if timeout is not None:
            strategy["timeoutSeconds"] = _seconds(timeout, f"{path}.timeout")
    return step


def _strategy_down(path: str) -> Callable[[dict[str, Any]], None]:
    def step(strategy: dict[str, Any]) -> None:
        seconds = strategy.pop("timeoutSeconds", None)
        if seconds:  # upstream: no timeout for 0
            strategy["timeout"] = _duration(seconds, f"{path}.timeoutSeconds")
    return step


def _remediation_up(body: Body) -> None:
    _each(body, _strategy_up("spec.strategy"), "spec", "strategy")


def _remediation_down(body: Body) -> None:
    _each(body, _strategy_down("spec.strategy"), "spec", "strategy")


def _remediation_template_up(body: Body) -> None:
    _each(body, _strategy_up("spec.template.spec.strategy"), "spec", "template", "spec", "strategy")


def _remediation_template_down(body: Body) -> None:
    _each(body, _strategy_down("spec.template.spec.strategy"), "spec", "template", "spec", "strategy")


# kind -> (v1beta1 -> v1beta2, v1beta2 -> v1beta1)
_KINDS: dict[str, tuple[Step, Step]] = {
    "Metal3Cluster": (_cluster_up, _cluster_down),
    "Metal3ClusterTemplate": (_cluster_template_up, _cluster_template_down),
    "Metal3Machine": (_machine_up, _machine_down),
    "Metal3MachineTemplate": (_machine_template_up, _machine_template_down),
    "Metal3DataTemplate": (_data_template_up, _data_template_down),
    "Metal3DataClaim": (_data_claim_up, _data_claim_down),
    "Metal3Data": (_data_up, _data_down),
    "Metal3Remediation": (_remediation_up, _remediation_down),
    "Metal3RemediationTemplate": (_remediation_template_up, _remediation_template_down),
}
