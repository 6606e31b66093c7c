"""Label selectors parse as `kubectl -l` parses them and match as kube-apiserver matches them."""
from __future__ import annotations

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest
from ansible_collections.metal3.baremetal.plugins.module_utils.core.selector import (
    parse_selector,
    selector_from_match,
)

# selector text, its canonical form
PARSES = [
    ("a=b", "a=b"),
    ("a==b", "a=b"),
    ("a!=b", "a!=b"),
    ("a", "a"),
    ("!a", "!a"),
    ("a in (x,y)", "a in (x,y)"),
    ("a in (y, x)", "a in (x,y)"),
    ("a notin (x)", "a notin (x)"),
    ("a=", "a="),
    ("a>3", "a>3"),
    ("a<-1", "a<-1"),
    ("example.com/rack=a,!x,y in (1,2)", "example.com/rack=a,!x,y in (1,2)"),
    ("  a = b , c  ", "a=b,c"),
    ("infrastructure.cluster.x-k8s.io/failure-domain=az-a", "infrastructure.cluster.x-k8s.io/failure-domain=az-a"),
    ("", ""),
]


@pytest.mark.parametrize(("text", "canonical"), PARSES)
def test_parse(text, canonical):
    assert str(parse_selector(text)) == canonical


REFUSED = [
    ("a in x", "expected '('"),
    ("a in ()", "must not be empty"),
    ("a in (x y)", "expected ',' or ')'"),
    ("a=b,", "trailing ','"),
    ("=b", "expected a label key"),
    ("a b", "unknown operator 'b'"),
    ("a>x", "must be an integer"),
    ("-a=b", "invalid label key"),
    ("a=b!", "invalid label"),
    ("a=" + "x" * 64, "63 characters"),
    ("Example.COM/a=b", "prefix part"),
    ("a in (x", "unexpected end"),
]


@pytest.mark.parametrize(("text", "message"), REFUSED)
def test_refused_selectors_name_the_selector_and_the_problem(text, message):
    with pytest.raises(BadRequest) as raised:
        parse_selector(text)
    assert message in str(raised.value)
    assert repr(text) in str(raised.value)


LABELS = {"rack": "a", "role": "worker", "gen": "5"}
MATCHES = [
    ("rack=a", True),
    ("rack=b", False),
    ("rack!=b", True),
    ("zone!=b", True),
    ("rack in (a,b)", True),
    ("rack notin (a,b)", False),
    ("zone notin (a)", True),
    ("role", True),
    ("!role", False),
    ("!zone", True),
    ("gen>4", True),
    ("gen<5", False),
    ("rack>1", False),
    ("rack=a,role=cp", False),
    ("", True),
]


@pytest.mark.parametrize(("text", "expected"), MATCHES)
def test_matches(text, expected):
    assert parse_selector(text).matches(LABELS) is expected


def test_a_list_of_selectors_is_their_conjunction():
    assert str(parse_selector(["rack=a", "role in (worker)"])) == "rack=a,role in (worker)"


def test_a_label_selector_object_becomes_the_same_selector():
    selector = selector_from_match({"rack": "a"}, [{"key": "role", "operator": "In", "values": ["worker", "cp"]},
                                                   {"key": "broken", "operator": "DoesNotExist"}])
    assert str(selector) == "rack=a,role in (cp,worker),!broken"
    assert selector.matches({"rack": "a", "role": "cp"})
    assert not selector.matches({"rack": "a", "role": "cp", "broken": ""})


@pytest.mark.parametrize("expression", [
    {"key": "a", "operator": "Equals", "values": ["x"]},
    {"key": "a", "operator": "In", "values": []},
])
def test_a_bad_match_expression_is_refused(expression):
    with pytest.raises(BadRequest):
        selector_from_match(None, [expression])
