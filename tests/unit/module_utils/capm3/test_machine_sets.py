"""Machine sets choose the class of compute of their machines over their template's: one template serves a set
of servers and a set of virtual machines (a hybrid cluster); a class or args that cannot be served are refused
before anything is written."""
from __future__ import annotations

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.machines import MachineSet, ensure_machines
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

INFRA = "infrastructure.cluster.x-k8s.io/v1beta1"
NS = "metal3"


@pytest.fixture
def store(tmp_path):
    with LocalStore(str(tmp_path / "store.db")) as opened:
        opened.create({"apiVersion": INFRA, "kind": "Metal3Cluster", "metadata": {"name": "c", "namespace": NS},
                       "spec": {"controlPlaneEndpoint": {"host": "192.168.111.249", "port": 6443},
                                "failureDomains": {"az-a": {"controlPlane": True}}}})
        opened.create({"apiVersion": INFRA, "kind": "Metal3MachineTemplate", "metadata": {"name": "t", "namespace": NS},
                       "spec": {"template": {"spec": {"image": {"url": "http://i/os.qcow2",
                                                                "checksum": "http://i/os.qcow2.sha256"}}}}})
        yield opened


def spec_of(store, name):
    return store.get(Ref(INFRA, "Metal3Machine", name, NS))["spec"]


def test_one_template_serves_a_set_of_servers_and_a_set_of_virtual_machines(store):
    ensure_machines(store, MachineSet("cp", NS, "c", "t", 1, True))
    ensure_machines(store, MachineSet("wk", NS, "c", "t", 1, False, None, "libvirt", {"nics": "2"}))
    assert "kind" not in spec_of(store, "cp-0") and "args" not in spec_of(store, "cp-0")
    assert (spec_of(store, "wk-0")["kind"], spec_of(store, "wk-0")["args"]) == ("libvirt", {"nics": "2"})
    assert spec_of(store, "wk-0")["image"]["url"] == "http://i/os.qcow2"


@pytest.mark.parametrize(("kind", "args", "refusal"), [
    ("kubevirt", None, "kind: 'kubevirt' is not a class of compute served here (baremetal, libvirt)"),
    ("libvirt", {"memory": "lots"}, "args.memory: 'lots' is not a quantity"),
])
def test_a_class_that_cannot_be_served_is_refused_naming_the_option(store, kind, args, refusal):
    with pytest.raises(Invalid, match=refusal.replace("(", r"\(").replace(")", r"\)")):
        MachineSet("wk", NS, "c", "t", 1, False, None, kind, args)
