"""The demo's manifests for tests that share one Ironic: each host with MAC addresses of its own."""
from __future__ import annotations

import copy
import json
import uuid
from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.resources import load_definitions
from tests.harness.operator_process import REPO

DEMO = REPO / "playbooks" / "files" / "demo"


def mac() -> str:
    return "52:54:00:" + ":".join(f"{b:02x}" for b in uuid.uuid4().bytes[:3])


def demo_objects(ns: str, hosts: int,
                 manifests: tuple[str, ...] = ("hosts.yaml", "cluster.yaml")) -> list[dict[str, Any]]:
    """The demo's objects (its hosts and BMC Secret, its cluster) in ``ns``, with its first ``hosts`` hosts only,
    each with MAC addresses of its own (Ironic refuses a port whose MAC another node has)."""
    objects = []
    for manifest in manifests:
        for obj in load_definitions(src=str(DEMO / manifest)):
            obj = copy.deepcopy(obj)
            obj["metadata"]["namespace"] = ns
            if obj["kind"] == "BareMetalHost":
                if hosts == 0:
                    continue
                hosts -= 1
                annotations = obj["metadata"]["annotations"]
                details = json.loads(annotations["inspect.metal3.io/hardwaredetails"])
                for nic in details["nics"]:
                    nic["mac"] = mac()
                annotations["inspect.metal3.io/hardwaredetails"] = json.dumps(details)
                obj["spec"]["bootMACAddress"] = details["nics"][0]["mac"]
            objects.append(obj)
    return objects
