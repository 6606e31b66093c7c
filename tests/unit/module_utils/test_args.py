"""What the modules check of their options before the engine reads them."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.args import (
    LIBVIRT_ARG_SPEC,
    store_options,
    validate_definition,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest, Invalid

POOL = {"apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPPool", "metadata": {"name": "p", "namespace": "ns"}}


def test_a_definition_is_checked_against_its_crd_schema():
    with pytest.raises(Invalid, match=r"""^IPPool\.ipam\.metal3\.io "p" is invalid: spec\.prefix: Invalid value: """
                                      r"'abc': must be of type integer$"):
        validate_definition({**POOL, "spec": {"namePrefix": "p", "prefix": "abc"}}, None)


def test_a_partial_definition_is_checked_as_the_merge_it_makes_with_the_stored_object():
    stored = {**POOL, "metadata": {**POOL["metadata"], "resourceVersion": "7", "annotations": {"a": "b"}},
              "spec": {"namePrefix": "p", "pools": [{"subnet": "10.0.0.0/24"}]}}
    # no namePrefix: the stored one stays; an annotation set to None is removed by the merge
    validate_definition({**POOL, "metadata": {**POOL["metadata"], "annotations": {"a": None}},
                         "spec": {"prefix": 24}}, stored)
    with pytest.raises(Invalid, match=r"spec\.namePrefix: Required value"):
        validate_definition({**POOL, "spec": {"prefix": 24}}, None)
    with pytest.raises(Invalid, match=r"spec\.pools\[0\]\.prefix: Invalid value: 'x'"):
        validate_definition({**POOL, "spec": {"pools": [{"subnet": "10.0.0.0/24", "prefix": "x"}]}}, stored)


def test_an_unknown_field_is_refused_as_kube_apiserver_refuses_it():
    with pytest.raises(BadRequest, match=r'unknown field "spec\.colour"'):
        validate_definition({**POOL, "spec": {"namePrefix": "p", "colour": "red"}}, None)


@pytest.mark.parametrize("kubeconfig", [5, ["a"], True])
def test_a_kubeconfig_is_a_path_or_a_mapping(kubeconfig):
    with pytest.raises(BadRequest, match=r"^kubeconfig: must be the path of a kubeconfig file or its content"):
        store_options({"backend": "kubernetes", "kubeconfig": kubeconfig})
    assert store_options({"kubeconfig": "~/.kube/config"})["kubeconfig"] == "~/.kube/config"
    assert store_options({"kubeconfig": {"clusters": []}})["kubeconfig"] == {"clusters": []}


def test_readme_gives_the_libvirt_limits_their_defaults():
    """README's paragraph on tenant input (docs/hostclaims.md) names each limit with its default: held to the argument
    spec."""
    readme = (Path(__file__).resolve().parents[3] / "docs" / "hostclaims.md").read_text()
    named = dict(re.findall(r"`(libvirt_max_\w+|libvirt_image_timeout)`\s*\((\w+)", readme))
    assert set(named) == {k for k in LIBVIRT_ARG_SPEC if k.startswith(("libvirt_max_", "libvirt_image_timeout"))}
    for option, default in named.items():
        assert str(LIBVIRT_ARG_SPEC[option]["default"]) == default, option
