"""Releasing a host when a Metal3Machine is deleted: a host that is only contended is not a host let go.

Regression: "changed too often" used to be a Conflict, and the release path reads Conflict as "no longer
ours": a Metal3Machine then dropped its finalizer while its host was still claimed by it.
"""
from __future__ import annotations

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import (
    HOST_ANNOTATION,
    INFRA_API,
    MACHINE_FINALIZER,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.machine import reconcile_metal3machine
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Conflict, TooManyConflicts
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

NS = "ns"
HOST = Ref("metal3.io/v1alpha1", "BareMetalHost", "host-0", NS)
MACHINE = Ref(INFRA_API, "Metal3Machine", "m3m-0", NS)


class ContendedHosts(LocalStore):
    """Every write to a BareMetalHost loses its race, as with a writer that never stops."""

    def update(self, obj, dry_run=False):
        if obj.get("kind") == "BareMetalHost":
            raise Conflict(f"{Ref.of(obj)}: the object has been modified")
        return super().update(obj, dry_run=dry_run)


@pytest.fixture
def store(tmp_path):
    with ContendedHosts(str(tmp_path / "store.db")) as store:
        yield store


def deleted_machine_holding_its_host(store, owner: dict[str, str]) -> None:
    store.create({"apiVersion": HOST.api_version, "kind": "BareMetalHost",
                  "metadata": {"name": HOST.name, "namespace": NS},
                  "spec": {"online": True, "consumerRef": owner, "image": {"url": "http://i/img", "checksum": "x"}}})
    store.create({"apiVersion": INFRA_API, "kind": "Metal3Machine",
                  "metadata": {"name": MACHINE.name, "namespace": NS, "finalizers": [MACHINE_FINALIZER],
                               "annotations": {HOST_ANNOTATION: f"{NS}/{HOST.name}"}},
                  "spec": {"image": {"url": "http://i/img", "checksum": "x"}}})
    store.delete(MACHINE)


def test_a_host_that_keeps_changing_is_not_read_as_released(store):
    consumer = {"apiVersion": INFRA_API, "kind": "Metal3Machine", "name": MACHINE.name, "namespace": NS}
    deleted_machine_holding_its_host(store, consumer)
    with pytest.raises(TooManyConflicts):
        reconcile_metal3machine(store, MACHINE)
    assert not isinstance(TooManyConflicts("x"), Conflict)
    assert store.get(MACHINE)["metadata"]["finalizers"] == [MACHINE_FINALIZER]  # kept: the host is still ours
    assert store.get(HOST)["spec"]["consumerRef"]["name"] == MACHINE.name


def test_a_host_held_by_another_consumer_is_left_to_it(store):
    consumer = {"apiVersion": INFRA_API, "kind": "Metal3Machine", "name": "someone-else", "namespace": NS}
    deleted_machine_holding_its_host(store, consumer)
    step = reconcile_metal3machine(store, MACHINE)
    assert step.phase == "deleted"  # nothing of ours to release: the finalizer goes
    assert store.get_if_exists(MACHINE) is None
    assert store.get(HOST)["spec"]["consumerRef"]["name"] == "someone-else"
