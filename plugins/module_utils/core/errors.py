# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Errors of the engine: one root, three branches that a caller never confuses.

- ``StoreError``: what a store answers, named after Kubernetes' StatusReasons with the messages
  kube-apiserver writes, so a caller handles one set of errors whatever the backend.
- ``IronicError``: what the provisioner could not do (Ironic unreachable, a request it refused).
- ``DomainError``: a rule of the domain that says no (a host held by another consumer, a pool with
  no free address).

Bad input (``Invalid``, ``BadRequest``) is a store error because the store is where upstream refuses it,
and the engine refuses it the same way before it gets there. ``except Conflict`` catches only a
resourceVersion precondition that failed, never a provisioner or domain failure.
"""
from __future__ import annotations


class Metal3Error(Exception):
    """Root of every error the engine raises; ``reason`` is a Kubernetes StatusReason-like word."""

    reason = "InternalError"


class StoreError(Metal3Error):
    """What a store answered."""


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


class TooManyConflicts(StoreError):
    """A write kept meeting Conflict after every retry: the object is contended, not released."""

    reason = "Conflict"


class IronicError(Metal3Error):
    """The provisioner could not do what was asked; never read as a store answer."""

    reason = "ServiceUnavailable"


class IronicUnavailable(IronicError):
    """Ironic cannot be reached, or its client library is missing."""


class IronicRejected(IronicError):
    """Ironic answered and refused the request (a bad driver field, a state it will not leave)."""

    reason = "BadRequest"


class DomainError(Metal3Error):
    """A rule of the domain says no."""

    reason = "Conflict"


class NotHeld(DomainError):
    """The host (or address) is held by another consumer, or no longer by this one."""


class Exhausted(DomainError):
    """No free host or address is left in what the request may use."""
