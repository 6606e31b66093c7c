# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Hosts in another store: a HostClaim whose ``spec.identityRef`` names a Secret of its namespace holding a
kubeconfig binds and drives the BareMetalHosts of the cluster that kubeconfig reaches (upstream's multi-tenancy
design names ``identityRef`` for this). Claims on a workload cluster, or on a bastion's local store, so use the
hosts of a management cluster; nothing of the hosts' (BMC credentials least of all) is copied back.

The kubeconfig is the tenant's input, read by whatever reconciles the claim (the operator), and checked as
core/kubeconfigs.py checks any: inline credentials only, no file and no command used on its say, its servers
http(s) and never the controller's own hosts unless the operator allows them. Whatever that server answers - no
Kubernetes API at all, an error, nothing - the claim says so in its status (HostsUnreachable, or IdentityRefInvalid
for what only the tenant can change), with the HTTP status and never with what the server wrote; each request has
a timeout.
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import (
    BadRequest,
    DomainError,
    Forbidden,
    Invalid,
    StoreError,
    Unavailable,
    UnknownKind,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.kubeconfigs import (
    KubeconfigRefused,
    checked_kubeconfig,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref, secret_values
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.store.admitted import admitted
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.delegating import DelegatingStore
from ansible_collections.metal3.baremetal.plugins.module_utils.store.followed import Followed

T = TypeVar("T")

KUBECONFIG_KEY = "kubeconfig"
# (connect, read) seconds of each request to another cluster's API.
REMOTE_TIMEOUT = (10.0, 30.0)


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
    try:
        config = checked_kubeconfig(secret_values(secret).get(KUBECONFIG_KEY), f"Secret {namespace}/{ref['name']}",
                                    KUBECONFIG_KEY, outbound)
    except KubeconfigRefused as e:
        raise RemoteRefused(f"spec.identityRef: {e}") from None
    return config, ref.get("context") or None


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
