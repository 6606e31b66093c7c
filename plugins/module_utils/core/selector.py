# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Label selectors, parsed as ``kubectl -l`` (apimachinery's labels.Parse) parses them.

Grammar: requirements separated by commas, each one of
``key``, ``!key``, ``key=value``, ``key==value``, ``key!=value``,
``key in (v1,v2)``, ``key notin (v1,v2)``, ``key>N``, ``key<N``.
A selector is a list of requirements that must all hold (AND).
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest

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


# apimachinery's formats and messages (k8s.io/apimachinery/pkg/util/validation).
_QUALIFIED_NAME_FORMAT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FORMAT = f"({_QUALIFIED_NAME_FORMAT})?"
_DNS_LABEL_FORMAT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN_FORMAT = rf"{_DNS_LABEL_FORMAT}(\.{_DNS_LABEL_FORMAT})*"
_QUALIFIED_NAME_RULE = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                        "alphanumeric character")
_LABEL_VALUE_RULE = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                     "and must start and end with an alphanumeric character")
_DNS_SUBDOMAIN_RULE = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                       "'.', and must start and end with an alphanumeric character")


def _regex_error(rule: str, pattern: str, *examples: str) -> str:
    """apimachinery's RegexError: the rule, examples, and the pattern."""
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{rule} (e.g. {shown}regex used for validation is '{pattern}')"


_QUALIFIED_NAME_ERROR = _regex_error(_QUALIFIED_NAME_RULE, _QUALIFIED_NAME_FORMAT, "MyName", "my.name", "123-abc")
_DNS_SUBDOMAIN_ERROR = _regex_error(_DNS_SUBDOMAIN_RULE, _DNS_SUBDOMAIN_FORMAT, "example.com")


def _too_long(limit: int) -> str:
    return f"must be no more than {limit} characters"


def _matches(pattern: str, value: str) -> bool:
    return re.fullmatch(pattern, value) is not None  # Go's ^...$: the whole text, a final newline included


def qualified_name_problems(value: str) -> list[str]:
    """What apimachinery's IsQualifiedName says of ``value`` (a label key): [] when it is one."""
    problems: list[str] = []
    parts = value.split("/")
    if len(parts) > 2:
        return [f"a qualified name {_QUALIFIED_NAME_ERROR} with an optional DNS subdomain prefix and '/' (e.g. "
                "'example.com/MyName')"]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            if len(prefix.encode()) > 253:
                problems.append(f"prefix part {_too_long(253)}")
            if not _matches(_DNS_SUBDOMAIN_FORMAT, prefix):
                problems.append(f"prefix part {_DNS_SUBDOMAIN_ERROR}")
    if not name:
        problems.append("name part must be non-empty")
    elif len(name.encode()) > 63:
        problems.append(f"name part {_too_long(63)}")
    if not _matches(_QUALIFIED_NAME_FORMAT, name):
        problems.append(f"name part {_QUALIFIED_NAME_ERROR}")
    return problems


def label_value(value: str) -> str:
    """``value`` as a label value when it may be longer (an object name is up to 253 characters, a label value 63):
    longer ones cut and told apart by a digest of the whole."""
    if len(value) <= 63:
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()[:12]
    return f"{value[:50].rstrip('-.')}-{digest}"


def label_value_problems(value: str) -> list[str]:
    """What apimachinery's IsValidLabelValue says of ``value``: [] when it is a label value (empty is one)."""
    problems: list[str] = []
    if len(value.encode()) > 63:
        problems.append(_too_long(63))
    if not _matches(_LABEL_VALUE_FORMAT, value):
        problems.append(_regex_error(_LABEL_VALUE_RULE, _LABEL_VALUE_FORMAT, "MyValue", "my_value", "12345"))
    return problems


def validate_label_key(key: str) -> None:
    """Raise BadRequest unless ``key`` is a qualified name, as Kubernetes requires of label keys."""
    problems = qualified_name_problems(key)
    if problems:
        raise BadRequest(f"invalid label key {key!r}: {'; '.join(problems)}")


def validate_label_value(value: str, key: str = "") -> None:
    """Raise BadRequest unless ``value`` is a valid label value (empty is valid)."""
    problems = label_value_problems(value)
    if problems:
        where = f" for key {key!r}" if key else ""
        raise BadRequest(f"invalid label value {value!r}{where}: {'; '.join(problems)}")


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
