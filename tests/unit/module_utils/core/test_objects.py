"""References of the form ``<namespace>/<name>``, as the host and HostClaim annotations write them."""
from __future__ import annotations

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import split_reference


@pytest.mark.parametrize(("reference", "namespace", "expected"), [
    ("metal3/host-0", "default", ("metal3", "host-0")),
    ("host-0", "metal3", ("metal3", "host-0")),
    ("", "metal3", ("metal3", "")),
])
def test_a_reference_names_its_namespace_or_takes_the_given_one(reference, namespace, expected):
    assert split_reference(reference, namespace) == expected
