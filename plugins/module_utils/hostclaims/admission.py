# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Admission of HostClaims (baremetal-operator's webhook rules) and of HostDeployPolicies (ours).

HostClaim: upstream's webhook (internal/webhooks/metal3.io/v1alpha1/hostclaim_validation.go) checks every create
and update, never a status write: the host selector's labels and expressions, the reboot annotations and the
image, as for a BareMetalHost. Each problem names its field and carries upstream's text, whose label rules are
Kubernetes' (apimachinery's IsQualifiedName and IsValidLabelValue, in their words).

Three choices of ours, beyond upstream's webhook:

- Operators. Upstream's webhook admits apimachinery's selection operators ``=``, ``==``, ``!=``, ``in``,
  ``notin``, ``exists`` and ``!``; its manager lowercases an operator before building the selector, and the
  engine (hosts/claim.py ``host_selector``) reads the Kubernetes spellings in any case. So the capitalised
  Kubernetes spellings a LabelSelector uses (``In``, ``NotIn``, ``Exists``, ``DoesNotExist``) are admitted too,
  with the value rules of their lowercase forms; anything else (``Gt``, ``gt``, ``IN``, ``Contains``) is refused,
  naming the accepted operators. (Upstream's manager would refuse ``DoesNotExist``, which lowercases to no
  operator; ours reads it as ``!``.)
- Secrets of another namespace. The engine copies a claim's userData, metaData and networkData Secrets into the
  host's namespace: a reference to another namespace's Secret (a BMC's credentials, say) is refused, with the
  words of upstream's BareMetalHost rule, so that no tenant can have another namespace's Secret copied.
- The class of compute (``spec.kind``, upstream's hybrid-cluster design): one served here (compute/registry.py),
  and what its class admits (``ComputeClass.admit``): ``args`` only for a kind that reads them (compute/libvirt.py,
  with its fixed sanity bounds), no ``identityRef`` or ``customDeploy`` for a virtual machine, its image and
  checksum URLs http or https only (core/outbound.py), since the controller itself fetches them; and fixed once
  the claim is bound (its status names what serves it: a bareMetalHost, a virtualMachine): a claim not yet bound
  may change it. The reconcile checks all of it again (on a cluster no webhook admits HostClaims), the hosts a URL
  names too (hostclaims/hostclaim.py).

HostDeployPolicy: upstream has no webhook, and a bad policy fails each claim's reconcile instead. Here it is
refused when written: nameMatches must compile, names must be namespace names, hasLabels label keys and values.
"""
from __future__ import annotations

import re
from typing import Any, Iterator

from ansible_collections.metal3.baremetal.plugins.module_utils.api import admission
from ansible_collections.metal3.baremetal.plugins.module_utils.compute.registry import (
    CLASSES,
    DEFAULT_KIND,
    claim_kind,
    served_kinds,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, dns_label_problem
from ansible_collections.metal3.baremetal.plugins.module_utils.core.selector import (
    label_value_problems,
    qualified_name_problems,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.admission import (
    Problem,
    image_problems,
    is_reboot_annotation,
    reboot_annotation_problem,
)

GROUP = "metal3.io"
CLAIM_KIND = "HostClaim"
POLICY_KIND = "HostDeployPolicy"

# Upstream's webhook's operators (apimachinery's selection.Operator values), by the rule their values follow.
ONE_VALUE_OPERATORS = ("=", "==", "!=")
SOME_VALUES_OPERATORS = ("in", "notin", "In", "NotIn")
NO_VALUE_OPERATORS = ("exists", "!", "Exists", "DoesNotExist")
OPERATORS = ("=", "==", "!=", "in", "notin", "exists", "!", "In", "NotIn", "Exists", "DoesNotExist")


def _refuse(kind: str, obj: Object, problems: list[Problem]) -> None:
    if problems:
        name = (obj.get("metadata") or {}).get("name", "")
        raise Invalid(f'{kind}.{GROUP} "{name}" is invalid: ' + "; ".join(f"{f}: {w}" for f, w in problems))


# -- HostClaim ------------------------------------------------------------------------------------------------


def admit_host_claim(store: admission.Reader, new: Object, old: Object | None) -> None:
    """Upstream's HostClaim webhook (the same on create and update), and ours on Secrets and on a bound claim's
    kind: Invalid listing every problem, each naming its field."""
    problems = list(validate_host_claim(new))
    if old is not None:
        problems.extend(kind_change_problems(new, old))
    _refuse(CLAIM_KIND, new, problems)


def kind_change_problems(new: Object, old: Object) -> Iterator[Problem]:
    """spec.kind changed on a claim that is bound: what serves it would be orphaned (never released)."""
    if claim_kind(new) == claim_kind(old):
        return
    status = old.get("status") or {}
    for field in (compute_class.bound_field for compute_class in CLASSES.values()):
        bound = status.get(field)
        if isinstance(bound, dict) and bound.get("name"):
            yield "spec.kind", (f"cannot change from {claim_kind(old)} to {claim_kind(new)}: the claim is bound "
                                f"(status.{field} is {bound.get('namespace', '')}/{bound['name']}); delete the "
                                "claim, which releases it, and make a new one")
            return


def validate_host_claim(claim: Object) -> Iterator[Problem]:
    """What upstream's validateHostClaim refuses in a claim, and a Secret of another namespace."""
    metadata = claim.get("metadata") or {}
    spec = claim.get("spec") or {}
    selector = spec.get("hostSelector") or {}
    for key, value in sorted((selector.get("matchLabels") or {}).items()):
        for label_problem in qualified_name_problems(str(key)) + label_value_problems(str(value)):
            yield f"spec.hostSelector.matchLabels[{key}]", f"{key}={value}: {label_problem}"
    for index, expression in enumerate(selector.get("matchExpressions") or []):
        yield from _expression_problems(index, expression)
    for key, value in sorted((metadata.get("annotations") or {}).items()):
        if is_reboot_annotation(key):
            reboot_problem = reboot_annotation_problem(value)
            if reboot_problem:
                yield f"metadata.annotations[{key}]", reboot_problem
    if spec.get("image") is not None:
        yield from image_problems(spec["image"])
    for field in ("userData", "networkData", "metaData"):
        ref = spec.get(field) or {}
        if ref.get("namespace") and ref["namespace"] != metadata.get("namespace"):
            yield f"spec.{field}", "cross-namespace Secret references are not allowed"
    yield from _compute_problems(spec)


def _compute_problems(spec: dict[str, Any]) -> Iterator[Problem]:
    """Ours: the class of compute (spec.kind), and what its class refuses of the spec (compute/base.py)."""
    kind = spec.get("kind")
    if kind is not None and kind not in CLASSES:
        yield "spec.kind", f"{kind!r} is not a class of compute served here ({served_kinds()})"
        if spec.get("args"):
            yield "spec.args", f"kind {kind or DEFAULT_KIND} takes no args"
        return
    yield from CLASSES[kind or DEFAULT_KIND].admit(spec)


def _expression_problems(index: int, expression: dict[str, Any]) -> Iterator[Problem]:
    """Upstream's rules for one matchExpression (numbered from 1 in its text, from 0 in the field)."""
    field = f"spec.hostSelector.matchExpressions[{index}]"
    number = index + 1
    key = str(expression.get("key") or "")
    operator = str(expression.get("operator") or "")
    values = [str(v) for v in expression.get("values") or []]
    for problem in qualified_name_problems(key):
        yield f"{field}.key", f"matchExpr {number}: {problem}"
    checked: list[str] = []
    if operator in ONE_VALUE_OPERATORS:
        if len(values) != 1:
            yield f"{field}.values", (f"matchExpr {number}: exactly one value for operator {operator} in match "
                                      f"expression on label key {key}")
        else:
            checked = values
    elif operator in SOME_VALUES_OPERATORS:
        if not values:
            yield f"{field}.values", (f"matchExpr {number}: At least one value in list for operator {operator} in "
                                      f"match expression on label key {key}")
        checked = values
    elif operator in NO_VALUE_OPERATORS:
        if values:
            yield f"{field}.values", (f"matchExpr {number}: values not authorized for operator {operator} in match "
                                      f"expression on label key {key}")
    else:
        yield f"{field}.operator", (f"matchExpr {number}: invalid operation {operator} in match expression on label "
                                    f"key {key}, supported are " + ", ".join(f'"{o}"' for o in OPERATORS))
    for position, value in enumerate(checked):
        for problem in label_value_problems(value):
            yield f"{field}.values[{position}]", f'matchExpr {number} (value "{value}"): {problem}'


# -- HostDeployPolicy -----------------------------------------------------------------------------------------


def admit_host_deploy_policy(store: admission.Reader, new: Object, old: Object | None) -> None:
    """Our rules for a HostDeployPolicy (upstream has none, and fails each claim's reconcile on a bad policy)."""
    _refuse(POLICY_KIND, new, list(validate_host_deploy_policy(new)))


def validate_host_deploy_policy(policy: Object) -> Iterator[Problem]:
    """What would make spec.hostClaimNamespaces unusable when a claim's namespace is matched against it."""
    constraints = (policy.get("spec") or {}).get("hostClaimNamespaces") or {}
    field = "spec.hostClaimNamespaces"
    for index, name in enumerate(constraints.get("names") or []):
        problem = dns_label_problem(name)
        if problem:
            yield f"{field}.names[{index}]", f"not a namespace name: {problem}"
    pattern = constraints.get("nameMatches") or ""
    if pattern:
        # Python's re, as the engine matches with it; upstream compiles with Go's regexp (RE2 syntax), which has
        # no backreferences or lookarounds and knows \p{...} classes: a pattern should keep to what both read.
        try:
            re.compile(pattern)
        except re.error as e:
            yield f"{field}.nameMatches", f"{pattern!r} is not a valid regular expression: {e}"
    for index, label in enumerate(constraints.get("hasLabels") or []):
        name, value = str(label.get("name") or ""), str(label.get("value") or "")
        for problem in qualified_name_problems(name):
            yield f"{field}.hasLabels[{index}].name", f'"{name}" is not a label key: {problem}'
        for problem in label_value_problems(value):
            yield f"{field}.hasLabels[{index}].value", f'"{value}" is not a label value: {problem}'


admission.register(GROUP, CLAIM_KIND, admit_host_claim)
admission.register(GROUP, POLICY_KIND, admit_host_deploy_policy)
