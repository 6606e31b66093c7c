"""Durations as Go reads them, and the requeue_after action that hands the operators one."""
from __future__ import annotations

from decimal import Decimal

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.duration import go_duration, parse
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.modules.requeue_after import SPEC
from ansible_collections.metal3.baremetal.plugins.plugin_utils.engine_action import run_spec


@pytest.mark.parametrize("text, seconds", [
    ("30s", "30"), ("1m30s", "90"), ("1.5h", "5400"), ("500ms", "0.5"), ("2us", "0.000002"), ("3µs", "0.000003"),
    ("7ns", "0.000000007"), (".5m", "30"), ("1.s", "1"), ("0", "0"), ("-5s", "-5"), ("+2s", "2"), ("1h0m0s", "3600"),
])
def test_what_go_reads_as_a_duration(text, seconds):
    assert parse(text) == Decimal(seconds)


@pytest.mark.parametrize("text", ["", "10", "1d", "s", "1.2.3s", "5 s", "-", "1h-5m", "ten seconds", "0.0"])
def test_what_go_refuses(text):
    assert parse(text) is None


@pytest.mark.parametrize("value, period", [
    ("30s", "30s"), ("1h30m", "1h30m"), (10, "10s"), (10.0, "10s"), (0.5, "0.5s"), ("12", "12s"), ("0", "0"),
    (0, "0"),
])
def test_a_period_is_a_go_duration_whatever_it_was_given_as(value, period):
    assert go_duration(value, "time") == period
    assert parse(period) is not None


@pytest.mark.parametrize("value", ["soon", "1d", True, None, [], "nan", "inf"])
def test_anything_else_is_refused_naming_the_field(value):
    with pytest.raises(Invalid, match=r"^time: Invalid value: .* must be a duration such as 30s"):
        go_duration(value, "time")


def test_the_action_returns_the_period_the_operators_read():
    assert run_spec(SPEC, {"time": 10.0}, check_mode=False) == {"changed": False, "period": "10s", "wait_on": []}
    assert run_spec(SPEC, {"time": "2m"}, check_mode=True) == {"changed": False, "period": "2m", "wait_on": []}


def test_the_action_returns_what_the_object_waits_on_with_a_name_for_any():
    pool = {"api_version": "ipam.metal3.io/v1alpha1", "kind": "IPPool", "namespace": "ns"}
    result = run_spec(SPEC, {"time": "10s", "wait_on": [pool, {**pool, "name": "pool"}]}, check_mode=False)
    assert result["wait_on"] == [{**pool, "name": ""}, {**pool, "name": "pool"}]


def test_a_wait_target_without_its_kind_is_refused_naming_it():
    result = run_spec(SPEC, {"time": "10s", "wait_on": [{"api_version": "v1", "namespace": "ns"}]},
                      check_mode=False)
    assert result["failed"] and "kind" in result["msg"]


@pytest.mark.parametrize("arguments, message", [
    ({}, "missing required arguments: time"),
    ({"time": "soon"}, "time: Invalid value: 'soon'"),
    ({"time": "10s", "period": "10s"}, "period"),
])
def test_bad_arguments_fail_naming_the_option(arguments, message):
    result = run_spec(SPEC, arguments, check_mode=False)
    assert result["failed"] and message in result["msg"]
