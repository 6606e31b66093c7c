"""Maps of strings (a pool's index of thousands of claims) are checked against their schema at C speed, with
the same errors as jsonschema's own check: the field named, the store left alone."""
from __future__ import annotations

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

POOL = Ref("ipam.metal3.io/v1alpha1", "IPPool", "pool", "ns")


@pytest.fixture
def store(tmp_path):
    with LocalStore(str(tmp_path / "store.db")) as opened:
        opened.create({"apiVersion": POOL.api_version, "kind": "IPPool",
                       "metadata": {"name": "pool", "namespace": "ns"},
                       "spec": {"namePrefix": "pool", "pools": [{"subnet": "10.0.0.0/24"}]}})
        yield opened


@pytest.mark.parametrize(("index", "field"), [
    ({"a": "10.0.0.1", "b": 5}, "status.indexes.b"),
    ({"a": ["10.0.0.1"]}, "status.indexes.a"),
    ({"a": {"address": "10.0.0.1"}}, "status.indexes.a"),
])
def test_a_value_of_another_type_is_refused_naming_its_key(store, index, field):
    before = store.get(POOL)
    with pytest.raises(Invalid, match=rf"{field}: Invalid value: .*must be of type string|{field}: .*string"):
        store.patch_status(POOL, {"status": {"indexes": index}})
    assert store.get(POOL) == before


def test_a_large_map_of_strings_is_accepted(store):
    index = {f"claim-{i}": f"10.0.{i // 256}.{i % 256}" for i in range(10_000)}
    assert store.patch_status(POOL, {"status": {"indexes": index}})["status"]["indexes"] == index
