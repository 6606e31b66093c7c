"""CAPM3's bookkeeping on a real SQLite store: data indexes, machine spread, pause, cluster readiness."""
from __future__ import annotations

import subprocess

import pytest
import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3 import data
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.cluster import reconcile_metal3cluster
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import (
    DATA_CLAIM_FINALIZER,
    INFRA_API,
    PAUSED_ANNOTATION,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.data import reconcile_data_claim
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.machine import reconcile_metal3machine
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.machines import spread
from ansible_collections.metal3.baremetal.plugins.module_utils.compute.libvirt import write_config_drive
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref, secret_values
from ansible_collections.metal3.baremetal.plugins.module_utils.core.retry import Backoff
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import config_drive
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.claim import online_after_release
from ansible_collections.metal3.baremetal.plugins.module_utils.store.delegating import DelegatingStore
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

NS = "ns"


@pytest.fixture
def store(tmp_path):
    with LocalStore(str(tmp_path / "store.db")) as opened:
        yield opened


def claim(store, name: str) -> Ref:
    store.create({"apiVersion": INFRA_API, "kind": "Metal3DataClaim", "metadata": {"name": name, "namespace": NS},
                  "spec": {"template": {"name": "net"}}})
    ref = Ref(INFRA_API, "Metal3DataClaim", name, NS)
    reconcile_data_claim(store, ref)
    return ref


def test_a_claim_gets_the_lowest_free_index_named_template_index(store):
    store.create({"apiVersion": INFRA_API, "kind": "Metal3DataTemplate", "metadata": {"name": "net", "namespace": NS},
                  "spec": {}})
    refs = [claim(store, f"m-{i}") for i in range(3)]
    rendered = [store.get(ref)["status"]["renderedData"]["name"] for ref in refs]
    assert rendered == ["net-0", "net-1", "net-2"]
    store.delete(refs[1])
    assert reconcile_data_claim(store, refs[1]).obj is None  # released: its Metal3Data is gone
    assert store.get(Ref(INFRA_API, "Metal3Data", "net-2", NS))["spec"]["index"] == 2
    assert store.get(claim(store, "m-3"))["status"]["renderedData"]["name"] == "net-1"  # the gap is reused
    assert reconcile_data_claim(store, claim(store, "m-4")).obj["status"]["renderedData"]["name"] == "net-3"


def metal3data(name: str, index: int, template: str, claim_name: str, labels: dict | None = None) -> dict:
    return {"apiVersion": INFRA_API, "kind": "Metal3Data",
            "metadata": {"name": name, "namespace": NS, "labels": labels or {}},
            "spec": {"index": index, "template": {"name": template}, "claim": {"name": claim_name}}}


def test_a_template_s_data_are_listed_by_its_label_and_an_unlabelled_index_is_skipped(store, monkeypatch):
    store.create({"apiVersion": INFRA_API, "kind": "Metal3DataTemplate", "metadata": {"name": "net", "namespace": NS},
                  "spec": {}})
    store.create(metal3data("net-0", 0, "net", "older"))  # made before data were labelled: not listed
    store.create(metal3data("other-0", 0, "other", "x", {data.TEMPLATE_LABEL: "other"}))
    selectors = []
    listing = store.list

    def list_recorded(api_version, kind, namespace=None, label_selector=None):
        if kind == "Metal3Data":
            selectors.append(label_selector)
        return listing(api_version, kind, namespace, label_selector)

    monkeypatch.setattr(store, "list", list_recorded)
    ref = claim(store, "m-0")
    assert store.get(ref)["status"]["renderedData"]["name"] == "net-1"  # net-0 collided on create: the next
    made = store.get(Ref(INFRA_API, "Metal3Data", "net-1", NS))
    assert made["metadata"]["labels"] == {data.TEMPLATE_LABEL: "net"}
    assert selectors and set(selectors) == {f"{data.TEMPLATE_LABEL}=net"}


def test_a_claim_finds_its_own_unlabelled_data_on_create(store):
    store.create({"apiVersion": INFRA_API, "kind": "Metal3DataTemplate", "metadata": {"name": "net", "namespace": NS},
                  "spec": {}})
    store.create(metal3data("net-0", 0, "net", "m-0"))  # an earlier step made it, unlabelled, and wrote no status
    assert store.get(claim(store, "m-0"))["status"]["renderedData"]["name"] == "net-0"


def test_a_claim_that_keeps_losing_the_index_race_waits_and_says_so(store, monkeypatch):
    store.create({"apiVersion": INFRA_API, "kind": "Metal3DataTemplate", "metadata": {"name": "net", "namespace": NS},
                  "spec": {}})
    monkeypatch.setattr(data, "INDEX_BACKOFF", Backoff(steps=3, duration=0.0))
    creating = store.create

    def racing_create(obj, dry_run=False):
        if obj["kind"] == "Metal3Data":  # a racing claimer takes each index just before
            creating({**obj, "spec": {**obj["spec"], "claim": {"name": "racer"}}})
        return creating(obj, dry_run=dry_run)

    monkeypatch.setattr(store, "create", racing_create)
    store.create({"apiVersion": INFRA_API, "kind": "Metal3DataClaim", "metadata": {"name": "m-0", "namespace": NS},
                  "spec": {"template": {"name": "net"}}})
    result = reconcile_data_claim(store, Ref(INFRA_API, "Metal3DataClaim", "m-0", NS))
    assert result.requeue_after and not result.ready
    assert result.message == f"Metal3DataClaim {NS}/m-0: no free index of template net in 3 attempts: others " \
                             "keep taking them"


def test_a_claim_of_a_missing_template_says_so(store):
    ref = claim(store, "lost")
    assert store.get(ref)["status"]["errorMessage"] == f"Metal3DataTemplate {NS}/net not found"


def test_a_claim_is_served_only_by_a_template_of_its_own_namespace(store):
    """CAPM3's template controller serves only the claims of its own namespace; a claim naming another
    namespace's template gets no data from it (its strings and its pools' addresses stay that namespace's)."""
    store.create({"apiVersion": INFRA_API, "kind": "Metal3DataTemplate",
                  "metadata": {"name": "net", "namespace": "other-tenant"},
                  "spec": {"metaData": {"strings": [{"key": "secret", "value": "theirs"}]}}})
    store.create({"apiVersion": INFRA_API, "kind": "Metal3DataClaim", "metadata": {"name": "m", "namespace": NS},
                  "spec": {"template": {"name": "net", "namespace": "other-tenant"}}})
    ref = Ref(INFRA_API, "Metal3DataClaim", "m", NS)
    reconcile_data_claim(store, ref)
    status = store.get(ref)["status"]
    assert "renderedData" not in status
    assert status["errorMessage"].startswith("spec.template.namespace: 'other-tenant' is not the namespace")
    assert store.list(INFRA_API, "Metal3Data", NS) == []


def test_a_metal3data_naming_another_namespace_s_template_renders_nothing(store):
    store.create({"apiVersion": INFRA_API, "kind": "Metal3DataTemplate",
                  "metadata": {"name": "net", "namespace": "other-tenant"}, "spec": {}})
    made = metal3data("net-0", 0, "net", "m")
    made["spec"]["template"]["namespace"] = "other-tenant"
    store.create(made)
    store.create({"apiVersion": INFRA_API, "kind": "Metal3DataClaim", "metadata": {"name": "m", "namespace": NS},
                  "spec": {"template": {"name": "net"}}})
    data_ref = Ref(INFRA_API, "Metal3Data", "net-0", NS)
    objects = {"metal3machine": {"metadata": {"name": "m"}}, "baremetalhost": {"metadata": {"name": "h"}}}
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(data, "_objects", lambda *_: objects)
        data.reconcile_data(store, data_ref)
    status = store.get(data_ref)["status"]
    assert status["ready"] is False
    assert status["errorMessage"].startswith("spec.template.namespace: 'other-tenant' is not the namespace")
    assert store.list("v1", "Secret", NS) == []


class Interleaved(DelegatingStore):
    """Another reconcile's write, made through the inner store just before this one's first ``call`` (update or
    update_status) of a ``kind``: what the operator's concurrent reconciles of a claim, its data and its machine do."""

    def __init__(self, inner, call: str, kind: str, other) -> None:
        super().__init__(inner)
        self.call, self.kind, self.other = call, kind, other

    def _write(self, call, *args, **kwargs):
        if self.other is not None and call.__name__ == self.call and args[0].get("kind") == self.kind:
            other, self.other = self.other, None
            other(self.inner)
        return super()._write(call, *args, **kwargs)


def test_a_metal3datas_status_written_after_another_reconciles_write_is_written_not_failed(store):
    store.create({"apiVersion": INFRA_API, "kind": "Metal3DataTemplate", "metadata": {"name": "net", "namespace": NS},
                  "spec": {}})
    store.create(metal3data("net-0", 0, "net", "m"))
    store.create({"apiVersion": INFRA_API, "kind": "Metal3DataClaim", "metadata": {"name": "m", "namespace": NS},
                  "spec": {"template": {"name": "net"}}})
    data_ref = Ref(INFRA_API, "Metal3Data", "net-0", NS)

    def labelled(inner):
        current = inner.get(data_ref)
        current["metadata"]["labels"]["touched"] = "yes"
        inner.update(current)

    objects = {"metal3machine": {"metadata": {"name": "m"}}, "baremetalhost": {"metadata": {"name": "h"}}}
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(data, "_objects", lambda *_: objects)
        step = data.reconcile_data(Interleaved(store, "update_status", "Metal3Data", labelled), data_ref)
    assert step.ready, step.message
    found = store.get(data_ref)
    assert found["status"]["ready"] is True and found["metadata"]["labels"]["touched"] == "yes"


def test_a_claim_whose_data_another_reconcile_released_first_is_released(store):
    store.create({"apiVersion": INFRA_API, "kind": "Metal3DataTemplate", "metadata": {"name": "net", "namespace": NS},
                  "spec": {}})
    ref = claim(store, "m")
    data_ref = Ref(INFRA_API, "Metal3Data", "net-0", NS)
    store.delete(ref)

    def released(inner):  # the data's own reconcile takes its finalizer off: it is gone
        current = inner.get(data_ref)
        current["metadata"]["finalizers"] = []
        inner.update(current)

    step = reconcile_data_claim(Interleaved(store, "update", "Metal3Data", released), ref)
    assert step.obj is None and step.message == "released"
    assert store.get_if_exists(data_ref) is None and store.get_if_exists(ref) is None


# machines already placed → the domain of the next one
SPREAD = [
    ([], "az-a"),
    (["az-a"], "az-b"),
    (["az-a", "az-b"], "az-a"),
    (["az-b", "az-b"], "az-a"),
    (["az-a", "other"], "az-b"),
]


@pytest.mark.parametrize(("taken", "expected"), SPREAD)
def test_machines_go_to_the_failure_domain_with_the_fewest(taken, expected):
    assert spread(["az-b", "az-a"], taken) == expected
    assert spread([], taken) is None


def test_a_paused_machine_is_left_alone(store):
    store.create({"apiVersion": INFRA_API, "kind": "Metal3Machine", "metadata": {
        "name": "m", "namespace": NS, "annotations": {PAUSED_ANNOTATION: ""}}, "spec": {}})
    ref = Ref(INFRA_API, "Metal3Machine", "m", NS)
    before = store.get(ref)
    step = reconcile_metal3machine(store, ref)
    assert step.phase == "paused" and store.get(ref) == before


def machine_on_a_free_host(store, template_spec: dict) -> None:
    """A Metal3Machine ``m`` of the Metal3DataTemplate ``net`` (of ``template_spec``), and an available host ``h``."""
    store.create({"apiVersion": INFRA_API, "kind": "Metal3DataTemplate", "metadata": {"name": "net", "namespace": NS},
                  "spec": template_spec})
    host = store.create({"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
                         "metadata": {"name": "h", "namespace": NS},
                         "spec": {"online": False, "bmc": {"address": "fake://h", "credentialsName": "h-bmc"}}})
    store.update_status({**host, "status": {"provisioning": {"state": "available"}}})
    store.create({"apiVersion": INFRA_API, "kind": "Metal3Machine", "metadata": {"name": "m", "namespace": NS},
                  "spec": {"image": {"url": "http://images.example/os.qcow2", "checksum": "0" * 64,
                                     "checksumType": "sha256", "diskFormat": "qcow2"},
                           "dataTemplate": {"name": "net"}}})


def test_a_machine_makes_its_data_claim_with_the_claim_s_finalizer(store, monkeypatch):
    """Made with it, as an IPClaim is: the Ansible Operator adds a watch's finalizer with an update from its cache,
    which conflicted with the machine's run writing the claim meanwhile (a failed reconcile, retried)."""
    machine_on_a_free_host(store, {})
    created = []
    create = store.create

    def recorded(obj, *args, **kwargs):
        created.append(obj)
        return create(obj, *args, **kwargs)

    monkeypatch.setattr(store, "create", recorded)
    reconcile_metal3machine(store, Ref(INFRA_API, "Metal3Machine", "m", NS))
    claim = next(obj for obj in created if obj["kind"] == "Metal3DataClaim")
    assert claim["metadata"]["finalizers"] == [DATA_CLAIM_FINALIZER]
    made = store.get(Ref(INFRA_API, "Metal3DataClaim", "m", NS))
    assert made["metadata"]["finalizers"] == [DATA_CLAIM_FINALIZER]


def test_a_cluster_is_ready_with_its_endpoint_and_publishes_its_failure_domains(store):
    store.create({"apiVersion": INFRA_API, "kind": "Metal3Cluster", "metadata": {"name": "c", "namespace": NS},
                  "spec": {"failureDomains": [{"name": "az-a", "controlPlane": True}]}})
    ref = Ref(INFRA_API, "Metal3Cluster", "c", NS)
    step = reconcile_metal3cluster(store, ref)
    assert not step.ready and "ControlPlaneEndpointMissing" in str(step.obj["status"]["conditions"])
    assert step.obj["status"]["initialization"] == {"provisioned": False}
    store.patch(ref, {"spec": {"controlPlaneEndpoint": {"host": "10.0.0.5", "port": 6443}}})
    step = reconcile_metal3cluster(store, ref)
    assert step.ready and step.obj["status"]["failureDomains"] == [{"name": "az-a", "controlPlane": True}]
    assert step.obj["status"]["initialization"] == {"provisioned": True}
    assert not reconcile_metal3cluster(store, ref).changed
    store.create({"apiVersion": INFRA_API, "kind": "Metal3Machine", "metadata": {
        "name": "m", "namespace": NS, "labels": {"cluster.x-k8s.io/cluster-name": "c"}}, "spec": {}})
    store.delete(ref)
    assert reconcile_metal3cluster(store, ref).requeue_after  # waits for its machines
    store.delete(Ref(INFRA_API, "Metal3Machine", "m", NS))
    assert reconcile_metal3cluster(store, ref).obj is None


def test_a_cluster_written_at_v1beta1_is_reconciled_and_read_back_in_v1beta1s_words(store):
    old = "infrastructure.cluster.x-k8s.io/v1beta1"
    store.create({"apiVersion": old, "kind": "Metal3Cluster", "metadata": {"name": "c", "namespace": NS},
                  "spec": {"controlPlaneEndpoint": {"host": "10.0.0.5", "port": 6443}, "noCloudProvider": True,
                           "failureDomains": {"az-a": {"controlPlane": True}, "az-b": {}}}})
    assert reconcile_metal3cluster(store, Ref(INFRA_API, "Metal3Cluster", "c", NS)).ready
    cluster = store.get(Ref(old, "Metal3Cluster", "c", NS))
    assert cluster["spec"]["noCloudProvider"] is True
    assert cluster["status"]["ready"] is True
    assert cluster["status"]["failureDomains"] == {"az-a": {"controlPlane": True}, "az-b": {}}
    assert cluster["status"]["v1beta2"]["conditions"][0]["type"] == "BaremetalInfrastructureReady"


# host spec, fast track → powered on once released (upstream's fast-track matrix)
RELEASE_POWER = [
    ({}, False, False),
    ({}, True, True),
    ({"automatedCleaningMode": "disabled"}, True, False),
    ({"disablePowerOff": True}, False, True),
    ({"automatedCleaningMode": "metadata"}, False, False),
]


@pytest.mark.parametrize(("spec", "fast_track", "online"), RELEASE_POWER)
def test_power_of_a_released_host(spec, fast_track, online):
    assert online_after_release(spec, fast_track) is online


# a Metal3DataTemplate spec → the network_data its machine's host gets (None: none at all). As CAPM3's
# createSecrets: a template whose networkData is nil renders no networkdata Secret and sets no
# Metal3Data.spec.networkData, so the host gets no networkData and its config drive no network_data.json
# (cloud-init falls back to its default network); one whose networkData is set, even empty, renders the document.
MACHINE_NETWORK_DATA = [
    pytest.param({}, None, id="no-networkData"),
    pytest.param({"metaData": {"strings": [{"key": "role", "value": "worker"}]}}, None, id="metaData-only"),
    pytest.param({"networkData": {}}, {"links": [], "networks": [], "services": []}, id="empty-networkData"),
    pytest.param({"networkData": {"services": {"dns": ["8.8.8.8"]}}},
                 {"links": [], "networks": [], "services": [{"type": "dns", "address": "8.8.8.8"}]}, id="services"),
]


# Reads the drive back with isoinfo, which the lab's tests install (see compute/test_libvirt.py): in their group.
@pytest.mark.xdist_group("virtual-lab")
@pytest.mark.parametrize(("template_spec", "network_data"), MACHINE_NETWORK_DATA)
def test_a_template_without_network_data_gives_the_host_none(store, tmp_path, template_spec, network_data):
    machine_on_a_free_host(store, template_spec)
    step = reconcile_metal3machine(store, Ref(INFRA_API, "Metal3Machine", "m", NS))
    assert step.phase == "provisioning", step.message  # rendered, and handed to the host
    data = store.get(Ref(INFRA_API, "Metal3Data", "net-0", NS))
    assert data["status"]["ready"] is True
    secrets = sorted(s["metadata"]["name"] for s in store.list("v1", "Secret", NS))
    host = store.get(Ref("metal3.io/v1alpha1", "BareMetalHost", "h", NS))
    assert host["spec"]["metaData"] == {"name": "m-metadata", "namespace": NS}
    if network_data is None:
        assert secrets == ["m-metadata"]
        assert "networkData" not in data["spec"] and "networkData" not in host["spec"]
        assert "networkData" not in step.obj.get("status", {})
    else:
        assert secrets == ["m-metadata", "m-networkdata"]
        assert data["spec"]["networkData"] == host["spec"]["networkData"] == {"name": "m-networkdata",
                                                                              "namespace": NS}
    # the config drive the host is deployed with (Ironic's, and the one a libvirt machine boots)
    drive = config_drive(Ref.of(host), "uid", host["spec"], lambda name, _field: secret_values(
        store.get(Ref("v1", "Secret", name, NS))))
    assert drive.get("network_data") == network_data
    iso = tmp_path / "config-2.iso"
    write_config_drive(iso, drive)
    listed = subprocess.run(["isoinfo", "-R", "-f", "-i", str(iso)], capture_output=True, text=True, check=True)
    files = set(listed.stdout.split())
    assert "/openstack/latest/meta_data.json" in files
    assert ("/openstack/latest/network_data.json" in files) is (network_data is not None)
    if network_data is not None:
        extracted = subprocess.run(["isoinfo", "-R", "-i", str(iso), "-x", "/openstack/latest/network_data.json"],
                                   capture_output=True, text=True, check=True)
        assert yaml.safe_load(extracted.stdout) == network_data
