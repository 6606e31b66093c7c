"""The conditions the Ansible Operator writes on a CR it manages the status of, and the Event on a failure.

Running / Successful / Failure, with its reasons and messages (``controller/status/types.go``): before a run
Running=True; after it, on success Running (reason Successful, "Awaiting next reconciliation", with
ansibleResult), Successful=True and Failure=False; on failure Failure=True with the failure messages and
Successful=False. Conditions of other types (a role's own, such as Ready) are kept.
"""
from __future__ import annotations

import datetime
import time
from typing import Any

RUNNING_MESSAGE = "Running reconciliation"
AWAITING_MESSAGE = "Awaiting next reconciliation"
SUCCEEDED_MESSAGE = "Last reconciliation succeeded"
MESSAGE_LIMIT = 32768


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(type_: str, status: bool, reason: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"type": type_, "status": "True" if status else "False", "reason": reason, "message": message, **extra}


def merge(existing: list[dict[str, Any]], updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Conditions by type: an update replaces its type, keeping lastTransitionTime unless the status changed."""
    by_type = {c.get("type"): c for c in existing}
    merged = list(existing)
    for update in updates:
        old = by_type.get(update["type"])
        update = dict(update)
        update["lastTransitionTime"] = old["lastTransitionTime"] if old and old.get("status") == update["status"] \
            and old.get("lastTransitionTime") else now()
        if old is None:
            merged.append(update)
        else:
            merged[merged.index(old)] = update
    return merged


def timeless(conditions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conditions less the time each run's result was completed: a run whose result is the last one's again
    (a host polled while Ironic works, a period's reconcile) changes nothing else, and is not written."""
    return [{**c, "ansibleResult": {**c["ansibleResult"], "completion": None}}
            if isinstance(c.get("ansibleResult"), dict) else c for c in conditions]


def running() -> list[dict[str, Any]]:
    return [condition("Running", True, "Running", RUNNING_MESSAGE),
            condition("Successful", False, "Running", RUNNING_MESSAGE)]


def done(ok: bool, stats: dict[str, int], message: str) -> list[dict[str, Any]]:
    result = {"ok": stats.get("ok", 0), "changed": stats.get("changed", 0), "skipped": stats.get("skipped", 0),
              "failures": stats.get("failures", 0), "completion": now()}
    if ok:
        return [condition("Running", True, "Successful", AWAITING_MESSAGE, ansibleResult=result),
                condition("Successful", True, "Successful", SUCCEEDED_MESSAGE),
                condition("Failure", False, "Successful", SUCCEEDED_MESSAGE)]
    return [condition("Running", True, "Failed", AWAITING_MESSAGE, ansibleResult=result),
            condition("Successful", False, "Failed", message[:MESSAGE_LIMIT]),
            condition("Failure", True, "Failed", message[:MESSAGE_LIMIT], ansibleResult=result)]


def failure_event(obj: dict[str, Any], message: str, component: str) -> dict[str, Any]:
    """A core/v1 Warning Event about a failed reconcile of ``obj``, named as client-go names Events: after the
    object and the time, in hexadecimal nanoseconds."""
    meta = obj["metadata"]
    stamp = now()
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{time.time_ns():x}", "namespace": meta.get("namespace") or "default"},
        "involvedObject": {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"],
                           "namespace": meta.get("namespace"), "uid": meta.get("uid"),
                           "resourceVersion": meta.get("resourceVersion")},
        "reason": "ReconcileFailed", "message": message[:1024], "type": "Warning",
        "source": {"component": component}, "reportingComponent": component,
        "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
    }
