"""The conditions the operator writes, worded as the Ansible Operator words them."""
from __future__ import annotations

from metal3_operator import status


def by_type(conditions):
    return {c["type"]: c for c in conditions}


def test_success_reads_as_the_ansible_operators():
    done = by_type(status.merge([], status.done(True, {"ok": 3, "changed": 1}, "")))
    assert done["Running"]["status"] == "True" and done["Running"]["reason"] == "Successful"
    assert done["Running"]["message"] == "Awaiting next reconciliation"
    result = done["Running"]["ansibleResult"] | {"completion": None}
    assert result == {"ok": 3, "changed": 1, "skipped": 0, "failures": 0, "completion": None}
    assert done["Successful"]["status"] == "True" and done["Successful"]["message"] == "Last reconciliation succeeded"
    assert done["Failure"]["status"] == "False"


def test_failure_carries_the_messages():
    done = by_type(status.merge([], status.done(False, {"failures": 1}, "spec.size: -1 is not a size")))
    assert done["Failure"]["status"] == "True" and done["Failure"]["reason"] == "Failed"
    assert done["Failure"]["message"] == "spec.size: -1 is not a size"
    assert done["Successful"]["status"] == "False"


def test_merge_keeps_other_conditions_and_transition_times_that_did_not_change():
    ready = {"type": "Ready", "status": "True", "reason": "", "message": "", "lastTransitionTime": "t0"}
    first = status.merge([ready], status.running())
    first = [dict(c, lastTransitionTime="t1") if c["type"] != "Ready" else c for c in first]
    again = by_type(status.merge(first, status.running()))
    assert again["Ready"] == ready
    assert again["Running"]["lastTransitionTime"] == "t1"  # still True: not a transition
    flipped = by_type(status.merge(first, status.done(True, {}, "")))
    assert flipped["Successful"]["lastTransitionTime"] != "t1"  # False -> True


def test_the_failure_event_names_the_object():
    obj = {"apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPPool",
           "metadata": {"name": "bad", "namespace": "ns", "uid": "u1", "resourceVersion": "7"}}
    event = status.failure_event(obj, "x" * 5000, "op")
    assert event["involvedObject"]["name"] == "bad" and event["involvedObject"]["uid"] == "u1"
    assert event["type"] == "Warning" and event["reason"] == "ReconcileFailed"
    assert len(event["message"]) == 1024 and event["metadata"]["namespace"] == "ns"
    assert event["metadata"]["name"].startswith("bad.")  # and the time: one Event per failure, none taken twice
    assert status.failure_event(obj, "again", "op")["metadata"]["name"] != event["metadata"]["name"]


def test_a_result_is_timeless_but_for_its_counts():
    first, again = status.done(True, {"ok": 1}, ""), status.done(True, {"ok": 1}, "")
    again[0]["ansibleResult"]["completion"] = "later"
    assert status.timeless(first) == status.timeless(again)
    assert status.timeless(first) != status.timeless(status.done(True, {"ok": 2}, ""))
    odd = [{"type": "Running", "ansibleResult": "odd"}]  # written by someone else: compared as it is
    assert status.timeless(odd) == odd
