# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Errors of the engine, named after Kubernetes' StatusReasons.

Both store backends raise these, with the messages kube-apiserver writes, so a
caller (a module, a role, the operator) handles one set of errors whatever the
backend.
"""
from __future__ import annotations


class StoreError(Exception):
    """Base of every error the store raises; ``reason`` is a Kubernetes StatusReason."""

    reason = "InternalError"


class NotFound(StoreError):
    reason = "NotFound"


class AlreadyExists(StoreError):
    reason = "AlreadyExists"


class Conflict(StoreError):
    """A write whose resourceVersion precondition failed: the object changed since it was read."""

    reason = "Conflict"


class Invalid(StoreError):
    """The object breaks its schema or an API rule; the message names the field."""

    reason = "Invalid"


class BadRequest(StoreError):
    """Malformed input: YAML that does not parse, an invalid label selector, an unknown field."""

    reason = "BadRequest"


class UnknownKind(BadRequest):
    reason = "NotFound"


class Unavailable(StoreError):
    """The store cannot be reached or written: a cluster that does not answer, a read-only file."""

    reason = "ServiceUnavailable"


class Forbidden(StoreError):
    reason = "Forbidden"
