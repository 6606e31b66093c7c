# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""A kubeconfig a tenant wrote into a Secret - a HostClaim's ``identityRef``, a Cluster's ``<name>-kubeconfig`` -
checked before anything connects with it.

Whatever reads it runs with the controller's rights on the controller's machine, so the kubeconfig may reach a
cluster with a token or client certificate given inline and nothing else: no file of that machine (a CA, a key, a
token file) and no command (``exec`` or ``auth-provider`` plugins) is ever used on its say. Its servers are URLs
the tenant wrote: http(s) only, never the controller's own loopback or link-local hosts unless the operator's
``allowed_local_hosts`` names them (core/outbound.py).
"""
from __future__ import annotations

from typing import Any, Iterable

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import DomainError
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy, Refused

try:
    import yaml

    HAS_YAML = True
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    HAS_YAML = False

# What a kubeconfig from a Secret may say, by section: inline credentials and where the cluster is.
ALLOWED = {
    "cluster": {"server", "certificate-authority-data", "insecure-skip-tls-verify", "tls-server-name"},
    "user": {"token", "client-certificate-data", "client-key-data"},
    "context": {"cluster", "user", "namespace"},
}


class KubeconfigRefused(DomainError):
    """A kubeconfig from a Secret cannot be used; the message names the Secret, the field and why."""


def checked_kubeconfig(text: str | None, secret: str, key: str, outbound: OutboundPolicy | None = None
                       ) -> dict[str, Any]:
    """The kubeconfig ``text`` (the ``key`` of ``secret``, "Secret <namespace>/<name>") as a dict, checked - its
    fields, and each cluster's server by ``outbound`` (default: no loopback or link-local host)."""
    if not HAS_YAML:
        raise KubeconfigRefused("reading a kubeconfig needs PyYAML on the controller")
    if not text:
        raise KubeconfigRefused(f"{secret} has no {key!r} key")
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise KubeconfigRefused(f"the {key!r} of {secret} is not YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(config, dict):
        raise KubeconfigRefused(f"the {key!r} of {secret} is not a kubeconfig")
    for section, allowed in ALLOWED.items():
        for entry in _entries(config.get(f"{section}s"), section):
            unknown = sorted(set(entry) - allowed)
            if unknown:
                raise KubeconfigRefused(f"the kubeconfig of {secret} uses {section} field {unknown[0]!r}; only "
                                        f"{', '.join(sorted(allowed))} are allowed (inline credentials: no file and "
                                        "no command is used on its say)")
    policy = outbound or OutboundPolicy()
    clusters = config.get("clusters")
    for index, item in enumerate(clusters if isinstance(clusters, list) else []):
        body = item.get("cluster") if isinstance(item, dict) else None
        if not isinstance(body, dict):
            continue
        field = f"the kubeconfig of {secret}: its server (clusters[{index}].cluster.server)"
        server = body.get("server")
        if not isinstance(server, str) or not server:
            raise KubeconfigRefused(f"{field} is required")
        try:
            policy.check(server, field)
        except Refused as e:
            raise KubeconfigRefused(str(e)) from None
    return config


def _entries(items: Any, section: str) -> Iterable[dict[str, Any]]:
    for item in items if isinstance(items, list) else []:
        body = item.get(section) if isinstance(item, dict) else None
        if isinstance(body, dict):
            yield body
