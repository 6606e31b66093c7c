# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Open the store a set of options names: the local SQLite file or a Kubernetes cluster, its writes admitted.

Whichever the backend, what ``open_store`` returns passes every create, update and patch through admission
(store/admitted.py): the engine and every module write through it, so upstream's webhook rules hold on every
write path, not only in the resource module.
"""
from __future__ import annotations

import os
from typing import Any, Mapping

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest
from ansible_collections.metal3.baremetal.plugins.module_utils.store.admitted import admitted
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store

BACKENDS = ("local", "kubernetes")
KUBERNETES_OPTIONS = ("kubeconfig", "context", "host", "api_key", "validate_certs", "ca_cert", "client_cert",
                      "client_key")


def open_store(options: Mapping[str, Any] | None = None) -> Store:
    """The store named by ``options`` (the keys of the store argument spec), its writes admitted; env vars fill
    what is unset."""
    return admitted(_open(options))


def _open(options: Mapping[str, Any] | None) -> Store:
    options = options or {}
    backend = options.get("backend") or os.environ.get("METAL3_BACKEND") or "local"
    if backend not in BACKENDS:
        raise BadRequest(f"backend: must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if backend == "local":
        from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

        return LocalStore(options.get("store_path"))
    from ansible_collections.metal3.baremetal.plugins.module_utils.store.kube import KubernetesStore

    return KubernetesStore(**{name: options.get(name) for name in KUBERNETES_OPTIONS})
