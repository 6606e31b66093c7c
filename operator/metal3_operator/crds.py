"""Install (create or replace) CustomResourceDefinitions and wait until they are served.

``python -m metal3_operator.crds FILE...`` does it against the cluster of KUBECONFIG; ``make operator`` runs it
before the operator, and the test harness uses ``install`` for its own cluster. A CRD serving several versions of
a converted group converts through the conversion webhook named by ``conversion`` (a clientConfig); without one,
the conversion a CRD already has on the cluster is kept, so re-installing never breaks a running webhook.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from metal3_operator.conversion_webhook import crd_conversion


class CRDError(Exception):
    pass


def _wait(what: str, ready: Any, deadline: float, timeout: float) -> None:
    while not ready():
        if time.monotonic() > deadline:
            raise CRDError(f"{what} after {timeout:.0f}s")
        time.sleep(0.1)


def install(api: client.ApiClient, paths: list[Path], timeout: float = 60.0,
            conversion: dict[str, Any] | None = None) -> list[str]:
    """Every CRD in ``paths`` in place, Established, and served; their names."""
    extensions = client.ApiextensionsV1Api(api)
    crds = [doc for path in paths for doc in yaml.safe_load_all(Path(path).read_text()) if doc]
    if conversion:
        crds = [crd_conversion(crd, conversion) for crd in crds]
    for crd in crds:
        name = crd["metadata"]["name"]
        try:
            extensions.create_custom_resource_definition(crd)
        except ApiException as e:
            if e.status != 409:
                raise CRDError(f"CRD {name} refused: {e.body}") from None
            current = api.sanitize_for_serialization(extensions.read_custom_resource_definition(name))
            crd["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            if "conversion" not in crd["spec"] and "conversion" in current["spec"]:
                crd["spec"]["conversion"] = current["spec"]["conversion"]
            extensions.replace_custom_resource_definition(name, crd)
    deadline = time.monotonic() + timeout

    def established(name: str) -> bool:
        status = extensions.read_custom_resource_definition(name).status  # None until the API server has set it
        conditions = (status.conditions if status else None) or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    dynamic = DynamicClient(api)

    def served(api_version: str, kind: str) -> bool:
        try:
            dynamic.resources.get(api_version=api_version, kind=kind)
            return True
        except ResourceNotFoundError:
            dynamic.resources.invalidate_cache()
            return False

    for crd in crds:
        name, spec = crd["metadata"]["name"], crd["spec"]
        _wait(f"CRD {name} not Established", lambda n=name: established(n), deadline, timeout)
        for version in spec["versions"]:
            api_version, kind = f"{spec['group']}/{version['name']}", spec["names"]["kind"]
            _wait(f"{kind} not served", lambda a=api_version, k=kind: served(a, k), deadline, timeout)
    return [crd["metadata"]["name"] for crd in crds]


def main(argv: list[str]) -> int:
    try:
        config.load_kube_config()
        names = install(client.ApiClient(), [Path(p) for p in argv])
    except (CRDError, config.ConfigException, OSError) as e:
        print(f"CRDs not installed: {e}", file=sys.stderr)
        return 1
    print(f"{len(names)} CRDs installed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
