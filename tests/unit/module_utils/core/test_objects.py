"""References of the form ``<namespace>/<name>``, as the host and HostClaim annotations write them."""
from __future__ import annotations

import re

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref, check_ref, split_reference


@pytest.mark.parametrize(("reference", "namespace", "expected"), [
    ("metal3/host-0", "default", ("metal3", "host-0")),
    ("host-0", "metal3", ("metal3", "host-0")),
    ("", "metal3", ("metal3", "")),
])
def test_a_reference_names_its_namespace_or_takes_the_given_one(reference, namespace, expected):
    assert split_reference(reference, namespace) == expected


@pytest.mark.parametrize(("ref", "problem"), [
    (Ref("v1", "Node", "worker-0", ""), None),  # cluster-scoped: no namespace
    (Ref("v1", "Secret", "s", ""), "Secret namespace: Invalid value: ''"),  # namespaced: one is required
    (Ref("v1", "Node", "../x", ""), "Node name: Invalid value: '../x'"),
    (Ref("example.io/v1", "Node", "n", ""), "Node namespace: Invalid value: ''"),  # another group's Node
])
def test_a_reference_has_a_namespace_unless_its_kind_is_cluster_scoped(ref, problem):
    if problem is None:
        assert check_ref(ref) == ref
    else:
        with pytest.raises(Invalid, match=f"^{re.escape(problem)}"):
            check_ref(ref)
