# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Hosts in another store: a HostClaim whose ``spec.identityRef`` names a Secret of its namespace holding a
kubeconfig binds and drives the BareMetalHosts of the cluster that kubeconfig reaches (upstream's multi-tenancy
design names ``identityRef`` for this). Claims on a workload cluster, or on a bastion's local store, so use the
hosts of a management cluster; nothing of the hosts' (BMC credentials least of all) is copied back.

The kubeconfig is the tenant's input, read by whatever reconciles the claim (the operator): it may reach a cluster
with a token or client certificate given inline and nothing else - no file of the reconciler's machine (a CA, a
key, a token file) and no command (``exec`` or ``auth-provider`` plugins) is ever used on its say. Its servers are
URLs a tenant wrote (core/outbound.py): http(s) only, never the controller's own loopback or link-local hosts
unless the operator's ``allowed_local_hosts`` names them. Whatever that server answers - no Kubernetes API at all,
an error, nothing - the claim says so in its status (HostsUnreachable, or IdentityRefInvalid for what only the
tenant can change), with the HTTP status and never with what the server wrote; each request has a timeout.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, TypeVar

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import (
    BadRequest,
    DomainError,
    Forbidden,
    Invalid,
    StoreError,
    Unavailable,
    UnknownKind,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref, secret_values
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy, Refused
from ansible_collections.metal3.baremetal.plugins.module_utils.store.admitted import admitted
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.delegating import DelegatingStore
from ansible_collections.metal3.baremetal.plugins.module_utils.store.followed import Followed

try:
    import yaml

    HAS_YAML = True
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    HAS_YAML = False

T = TypeVar("T")

KUBECONFIG_KEY = "kubeconfig"
# (connect, read) seconds of each request to another cluster's API.
REMOTE_TIMEOUT = (10.0, 30.0)
# What a kubeconfig from a Secret may say, by section: inline credentials and where the cluster is.
ALLOWED = {
    "cluster": {"server", "certificate-authority-data", "insecure-skip-tls-verify", "tls-server-name"},
    "user": {"token", "client-certificate-data", "client-key-data"},
    "context": {"cluster", "user", "namespace"},
}


class RemoteRefused(DomainError):
    """A claim's identityRef cannot be used; the message names the field and why."""


class HostsUnreachable(Unavailable):
    """The store of a claim's hosts did not answer."""


def identity_ref(claim: Object) -> dict[str, Any] | None:
    ref = (claim.get("spec") or {}).get("identityRef")
    return ref if isinstance(ref, dict) and ref.get("name") else None


def remote_kubeconfig(store: Store, claim: Object, outbound: OutboundPolicy | None = None
                      ) -> tuple[dict[str, Any], str | None]:
    """The kubeconfig (as a dict) and context the claim's identityRef names, checked - its fields, and each
    cluster's server by ``outbound`` (default: no loopback or link-local host); RemoteRefused otherwise."""
    ref = identity_ref(claim) or {}
    namespace = claim["metadata"]["namespace"]
    secret = store.get_if_exists(Ref("v1", "Secret", ref["name"], namespace))
    if secret is None:
        raise RemoteRefused(f"spec.identityRef: Secret {namespace}/{ref['name']} not found")
    if not HAS_YAML:
        raise RemoteRefused("spec.identityRef: reading a kubeconfig needs PyYAML on the controller")
    text = secret_values(secret).get(KUBECONFIG_KEY)
    if not text:
        raise RemoteRefused(f"spec.identityRef: Secret {namespace}/{ref['name']} has no {KUBECONFIG_KEY!r} key")
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise RemoteRefused(f"spec.identityRef: the {KUBECONFIG_KEY!r} of Secret {namespace}/{ref['name']} is not "
                            f"YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(config, dict):
        raise RemoteRefused(f"spec.identityRef: the {KUBECONFIG_KEY!r} of Secret {namespace}/{ref['name']} is not "
                            "a kubeconfig")
    for section, allowed in ALLOWED.items():
        for entry in _entries(config.get(f"{section}s"), section):
            unknown = sorted(set(entry) - allowed)
            if unknown:
                raise RemoteRefused(f"spec.identityRef: the kubeconfig of Secret {namespace}/{ref['name']} uses "
                                    f"{section} field {unknown[0]!r}; only {', '.join(sorted(allowed))} are "
                                    "allowed (inline credentials: no file and no command is used on its say)")
    policy = outbound or OutboundPolicy()
    clusters = config.get("clusters")
    for index, item in enumerate(clusters if isinstance(clusters, list) else []):
        body = item.get("cluster") if isinstance(item, dict) else None
        if not isinstance(body, dict):
            continue
        field = (f"spec.identityRef: the kubeconfig of Secret {namespace}/{ref['name']}: its server "
                 f"(clusters[{index}].cluster.server)")
        server = body.get("server")
        if not isinstance(server, str) or not server:
            raise RemoteRefused(f"{field} is required")
        try:
            policy.check(server, field)
        except Refused as e:
            raise RemoteRefused(str(e)) from None
    context = ref.get("context") or None
    return config, context


def _entries(items: Any, section: str) -> Iterable[dict[str, Any]]:
    for item in items if isinstance(items, list) else []:
        body = item.get(section) if isinstance(item, dict) else None
        if isinstance(body, dict):
            yield body


class RemoteHosts(DelegatingStore):
    """The store of a claim's hosts when they are elsewhere: each call that does not reach it, or that its server
    answers with what is not the Kubernetes API's, is HostsUnreachable, so that the claim says so and keeps
    everything it has; one its server refuses (credentials, a write) is RemoteRefused. An object's absence, a
    conflict, an object that exists already stay what they are: the claim's flow reads them."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.follows = False  # no live view of another cluster's hosts: read through the store

    def _call(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            return super()._call(call, *args, **kwargs)
        except (HostsUnreachable, RemoteRefused):
            raise
        except (Unavailable, UnknownKind) as e:
            raise HostsUnreachable(f"spec.identityRef: {e}") from None
        except (Forbidden, Invalid, BadRequest) as e:
            raise RemoteRefused(f"spec.identityRef: the hosts' cluster refused: {e}") from None

    def follow(self, api_version: str, kind: str, namespace: str, label_selector: str) -> Followed | None:
        return None


def open_remote_hosts(store: Store, claim: Object, outbound: OutboundPolicy | None = None) -> RemoteHosts:
    """The store of the hosts the claim's identityRef reaches, its writes admitted (RemoteRefused,
    HostsUnreachable); ``outbound``: which of the controller's own hosts its server may name (none by default)."""
    config, context = remote_kubeconfig(store, claim, outbound)
    from ansible_collections.metal3.baremetal.plugins.module_utils.store.kube import KubernetesStore

    try:
        opened = KubernetesStore(kubeconfig=config, context=context, request_timeout=REMOTE_TIMEOUT, untrusted=True)
    except Unavailable as e:
        raise HostsUnreachable(f"spec.identityRef: {e}") from None
    except StoreError as e:  # credentials refused, the kubernetes library missing
        raise RemoteRefused(f"spec.identityRef: {e}") from None
    return RemoteHosts(admitted(opened))
