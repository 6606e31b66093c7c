# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Where the controller connects on a tenant's say: a claim's image and checksum URLs, an identityRef's
kubeconfig server.

The tenant writes the URL; the controller fetches it with its own network position and credentials. So such a URL
is http or https only (never ``file:``, ``ftp:`` or anything urllib would also open), and its host never one of the
controller's own (loopback, link-local - the cloud's metadata service among them - or unspecified), whatever name
it is given under: the host is resolved, and every address it resolves to is checked, before each connection and
again at every redirect. An operator that serves images from the controller's own loopback names those hosts in
``allowed_local_hosts`` (env ``METAL3_ALLOWED_LOCAL_HOSTS``, comma-separated); nothing else relaxes the rule.

What a fetched URL answered is never echoed into an error: the tenant would read it back in the claim's status.
"""
from __future__ import annotations

import ipaddress
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Iterable

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import DomainError

SCHEMES = ("http", "https")
ALLOWED_LOCAL_HOSTS_ENV = "METAL3_ALLOWED_LOCAL_HOSTS"
OPTION = "allowed_local_hosts"


class Refused(DomainError):
    """A tenant's URL names what the controller will not connect to; the message names the field."""


def _local(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_link_local or ip.is_unspecified


@dataclass(frozen=True)
class OutboundPolicy:
    """The hosts a tenant's URL may name although they are the controller's own (as written in the URL:
    ``127.0.0.1``, ``localhost``, ``::1``); none by default."""

    allowed_local_hosts: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, hosts: Iterable[str] | str | None) -> OutboundPolicy:
        if isinstance(hosts, str):
            hosts = hosts.split(",")
        return cls(frozenset(h.strip().lower().strip("[]").rstrip(".") for h in hosts or () if h and h.strip()))

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> OutboundPolicy:
        return cls.of(params.get(OPTION))

    @classmethod
    def from_env(cls) -> OutboundPolicy:
        """The policy of the environment (METAL3_ALLOWED_LOCAL_HOSTS), which the modules' allowed_local_hosts
        defaults to: for the engine's callers that take no options of their own (a host's reconcile)."""
        return cls.of(os.environ.get(ALLOWED_LOCAL_HOSTS_ENV))

    def check_scheme(self, url: str, field: str) -> urllib.parse.SplitResult:
        """``url`` split, when it is an http(s) URL with a host; Refused naming ``field`` otherwise."""
        try:
            parts = urllib.parse.urlsplit(url)
            parts.port  # noqa: B018 - raises ValueError on a port out of range
        except ValueError as e:
            raise Refused(f"{field}: {url!r} is not a URL: {e}") from None
        if parts.scheme not in SCHEMES:
            raise Refused(f"{field}: {url!r} is not an http or https URL")
        if not parts.hostname:
            raise Refused(f"{field}: {url!r} names no host")
        return parts

    def check(self, url: str, field: str, resolve: bool = True) -> None:
        """Refused unless ``url`` is http(s) and its host is not the controller's own (or is allowed);
        ``resolve``: look the name up too (where it will be connected to), not only an address written in it."""
        self.check_host(url, self.check_scheme(url, field).hostname or "", field, resolve)

    def check_host(self, url: str, host: str, field: str, resolve: bool = True) -> None:
        """Refused when ``host`` (of ``url``, whatever its scheme) is the controller's own and not allowed."""
        host = host.lower().rstrip(".")
        if host in self.allowed_local_hosts:
            return
        if host == "localhost" or host.endswith(".localhost") or _local(host):
            raise Refused(f"{field}: {url!r} names a loopback or link-local host, which this controller does not "
                          f"connect to on a claim's say (the operator allows named ones with {OPTION})")
        if not resolve or _is_address(host):
            return
        try:
            found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError):
            return  # not resolvable now: the connection fails on its own, naming the field
        if any(_local(str(entry[4][0])) for entry in found):
            raise Refused(f"{field}: {url!r}: its host resolves to a loopback or link-local address, which this "
                          f"controller does not connect to on a claim's say (the operator allows named hosts with "
                          f"{OPTION})")

    def open(self, url: str, field: str, timeout: float) -> Any:
        """The answer to GET ``url`` (a file-like object), each redirect checked as ``url`` was; Refused, or
        OSError (urllib's errors) when the server cannot be reached or answers an error."""
        self.check(url, field)
        policy = self

        class Checked(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any,
                                 newurl: str) -> Any:
                policy.check(newurl, f"{field} (redirected)")
                return super().redirect_request(req, fp, code, msg, headers, newurl)

        # urllib, not Ansible's open_url: the engine runs without Ansible (the operator's proxy, the tests).
        # Only http(s) handlers matter: the scheme is checked above and at every redirect.
        return urllib.request.build_opener(Checked).open(url, timeout=timeout)


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


class Deadline:
    """An overall limit on a transfer: ``left()`` seconds remain (at least a little, for a socket timeout);
    ``expired()`` once they are spent."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return max(self.end - time.monotonic(), 0.001)

    def expired(self) -> bool:
        return time.monotonic() >= self.end


def read_bounded(answer: Any, limit: int, deadline: Deadline, field: str, url: str, chunk: int = 1 << 20
                 ) -> Iterable[bytes]:
    """The body of ``answer`` in chunks, Refused once it passes ``limit`` bytes or ``deadline``. Read by what has
    arrived (``read1`` where the answer has it): a server trickling bytes meets the deadline between two reads, not
    after a whole chunk has trickled in."""
    read = getattr(answer, "read1", None) or answer.read
    total = 0
    while True:
        if deadline.expired():
            raise Refused(f"{field}: {url!r} took longer than this controller allows a download")
        piece = read(chunk)
        if not piece:
            return
        total += len(piece)
        if total > limit:
            raise Refused(f"{field}: {url!r} is larger than this controller allows ({limit} bytes)")
        yield piece


def describe(error: BaseException) -> str:
    """What went wrong with a fetch, without anything the server sent: an HTTP status, or the connection's
    error (urllib's reason)."""
    if isinstance(error, urllib.error.HTTPError):
        return f"the server answered HTTP {error.code}"
    if isinstance(error, urllib.error.URLError):
        return f"cannot be fetched: {error.reason}"
    return f"cannot be fetched: {error}"
