"""Which namespaces a pool serves: its own, and those its ipam.metal3.io/allowed-namespaces annotation lists."""
from __future__ import annotations

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import serves


def pool(allowed: str | None) -> dict:
    annotations = {} if allowed is None else {"ipam.metal3.io/allowed-namespaces": allowed}
    return {"metadata": {"name": "p", "namespace": "infra", "annotations": annotations}}


# annotation, claim namespace, served
CASES = [
    (None, "infra", True),
    ("", "infra", True),
    (None, "tenant", False),
    ("", "tenant", False),
    ("tenant", "tenant", True),
    ("a,tenant,b", "tenant", True),
    (" a , tenant ", "tenant", True),
    ("*", "tenant", True),
    ("a, *", "tenant", True),
    ("tenant-x", "tenant", False),
    ("tenant*", "tenant", False),
    (",", "tenant", False),
]


@pytest.mark.parametrize(("allowed", "namespace", "served"), CASES)
def test_serves(allowed, namespace, served):
    assert serves(pool(allowed), namespace) is served


def test_no_annotations_at_all():
    assert not serves({"metadata": {"name": "p", "namespace": "infra"}}, "tenant")
