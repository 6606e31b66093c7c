# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Label selectors, parsed as ``kubectl -l`` (apimachinery's labels.Parse) parses them.

Grammar: requirements separated by commas, each one of
``key``, ``!key``, ``key=value``, ``key==value``, ``key!=value``,
``key in (v1,v2)``, ``key notin (v1,v2)``, ``key>N``, ``key<N``.
A selector is a list of requirements that must all hold (AND).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import DNS_SUBDOMAIN

# Operators, as apimachinery's selection.Operator names them.
EXISTS = "exists"
DOES_NOT_EXIST = "!"
EQUALS = "="
NOT_EQUALS = "!="
IN = "in"
NOT_IN = "notin"
GREATER_THAN = "gt"
LESS_THAN = "lt"

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_NAME_RE = re.compile(rf"^{_NAME}$")
_TOKEN_RE = re.compile(r"\s*(==|!=|=|!|\(|\)|,|>|<|[^\s=!(),<>]+)")


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator == EXISTS:
            return present
        if self.operator == DOES_NOT_EXIST:
            return not present
        if self.operator in (EQUALS, IN):
            return present and value in self.values
        if self.operator in (NOT_EQUALS, NOT_IN):
            return not present or value not in self.values
        if not present:
            return False
        try:
            number = int(value or "")
        except ValueError:
            return False
        bound = int(self.values[0])
        return number > bound if self.operator == GREATER_THAN else number < bound

    def __str__(self) -> str:
        if self.operator == EXISTS:
            return self.key
        if self.operator == DOES_NOT_EXIST:
            return f"!{self.key}"
        if self.operator in (IN, NOT_IN):
            return f"{self.key} {self.operator} ({','.join(self.values)})"
        symbol = {EQUALS: "=", NOT_EQUALS: "!=", GREATER_THAN: ">", LESS_THAN: "<"}[self.operator]
        return f"{self.key}{symbol}{self.values[0]}"


@dataclass(frozen=True)
class Selector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def validate_label_key(key: str) -> None:
    """Raise BadRequest unless ``key`` is a qualified name, as Kubernetes requires of label keys."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix)):
        raise BadRequest(f"invalid label key {key!r}: prefix part must be a DNS subdomain (RFC 1123)")
    if not name or len(name) > 63 or not _NAME_RE.match(name):
        raise BadRequest(
            f"invalid label key {key!r}: name part must be 63 characters or less, begin and end with "
            "an alphanumeric character and contain only alphanumerics, '-', '_' or '.'"
        )


def validate_label_value(value: str, key: str = "") -> None:
    """Raise BadRequest unless ``value`` is a valid label value (empty is valid)."""
    if value and (len(value) > 63 or not _NAME_RE.match(value)):
        where = f" for key {key!r}" if key else ""
        raise BadRequest(
            f"invalid label value {value!r}{where}: must be 63 characters or less, empty or begin and end "
            "with an alphanumeric character and contain only alphanumerics, '-', '_' or '.'"
        )


def validate_labels(labels: Mapping[str, str]) -> None:
    for key, value in labels.items():
        validate_label_key(key)
        if not isinstance(value, str):
            raise BadRequest(f"invalid label value for key {key!r}: must be a string, not {type(value).__name__}")
        validate_label_value(value, key)


def _tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    position = 0
    text = text.rstrip()
    while position < len(text):
        match = _TOKEN_RE.match(text, position)
        if not match:
            raise BadRequest(f"invalid label selector {text!r}: unexpected character at {position}")
        tokens.append(match.group(1))
        position = match.end()
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.position = 0

    def error(self, what: str) -> BadRequest:
        return BadRequest(f"invalid label selector {self.text!r}: {what}")

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise self.error("unexpected end of selector")
        self.position += 1
        return token

    def key(self, token: str) -> str:
        if token in ("==", "!=", "=", "!", "(", ")", ",", ">", "<", "in", "notin"):
            raise self.error(f"expected a label key, found {token!r}")
        try:
            validate_label_key(token)
        except BadRequest as e:
            raise self.error(str(e)) from None
        return token

    def value(self, token: str, key: str) -> str:
        try:
            validate_label_value(token, key)
        except BadRequest as e:
            raise self.error(str(e)) from None
        return token

    def value_set(self, key: str) -> tuple[str, ...]:
        if self.take() != "(":
            raise self.error(f"expected '(' after the operator for key {key!r}")
        values: list[str] = []
        expect_value = True
        while True:
            token = self.take()
            if token == ")":
                if expect_value and values:
                    values.append("")  # "(a,)" holds the empty value, as apimachinery reads it
                break
            if token == ",":
                if expect_value:
                    values.append("")
                expect_value = True
                continue
            if not expect_value:
                raise self.error(f"expected ',' or ')' in the values of key {key!r}")
            values.append(self.value(token, key))
            expect_value = False
        if not values:
            raise self.error(f"the set of values for key {key!r} must not be empty")
        return tuple(sorted(set(values)))

    def requirement(self) -> Requirement:
        token = self.take()
        if token == "!":
            return Requirement(self.key(self.take()), DOES_NOT_EXIST)
        key = self.key(token)
        operator = self.peek()
        if operator is None or operator == ",":
            return Requirement(key, EXISTS)
        self.take()
        if operator in ("=", "=="):
            return Requirement(key, EQUALS, (self.single_value(key),))
        if operator == "!=":
            return Requirement(key, NOT_EQUALS, (self.single_value(key),))
        if operator in ("in", "notin"):
            return Requirement(key, IN if operator == "in" else NOT_IN, self.value_set(key))
        if operator in (">", "<"):
            bound = self.take()
            if not re.fullmatch(r"-?\d+", bound):
                raise self.error(f"for 'gt' and 'lt' the value of key {key!r} must be an integer, not {bound!r}")
            return Requirement(key, GREATER_THAN if operator == ">" else LESS_THAN, (bound,))
        raise self.error(f"unknown operator {operator!r} after key {key!r}")

    def single_value(self, key: str) -> str:
        token = self.peek()
        if token is None or token == ",":
            return ""
        return self.value(self.take(), key)

    def parse(self) -> Selector:
        requirements: list[Requirement] = []
        if not self.tokens:
            return Selector()
        while True:
            requirements.append(self.requirement())
            token = self.peek()
            if token is None:
                break
            if self.take() != ",":
                raise self.error(f"expected ',' after {requirements[-1]}")
            if self.peek() is None:
                raise self.error("trailing ','")
        return Selector(tuple(requirements))


def parse_selector(selectors: str | Iterable[str] | None) -> Selector:
    """Parse one selector string or a list of them (joined with AND, as kubernetes.core's label_selectors).

    Raises BadRequest naming the selector and what is wrong with it.
    """
    if selectors is None:
        return Selector()
    if isinstance(selectors, str):
        selectors = [selectors]
    requirements: list[Requirement] = []
    for text in selectors:
        if not isinstance(text, str):
            raise BadRequest(f"invalid label selector {text!r}: must be a string")
        requirements.extend(_Parser(text).parse().requirements)
    return Selector(tuple(requirements))


def selector_from_match(match_labels: Mapping[str, str] | None = None,
                        match_expressions: Iterable[Mapping[str, Any]] | None = None) -> Selector:
    """The Selector of a metav1.LabelSelector (matchLabels + matchExpressions)."""
    requirements = [Requirement(k, EQUALS, (str(v),)) for k, v in sorted((match_labels or {}).items())]
    operators = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}
    for expression in match_expressions or []:
        operator = operators.get(expression.get("operator", ""))
        if operator is None:
            raise BadRequest(f"invalid label selector operator {expression.get('operator')!r}: "
                             "must be one of In, NotIn, Exists, DoesNotExist")
        values = tuple(sorted(str(v) for v in expression.get("values") or []))
        if operator in (IN, NOT_IN) and not values:
            raise BadRequest(f"invalid label selector: operator {expression['operator']} "
                             f"on key {expression.get('key')!r} needs at least one value")
        requirements.append(Requirement(str(expression.get("key", "")), operator, values))
    for requirement in requirements:
        validate_label_key(requirement.key)
    return Selector(tuple(requirements))
