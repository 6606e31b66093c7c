"""The workload cluster's Nodes (capm3/workload.py): CAPM3's providerID workflow and label sync, on a fake
workload store. Against a real kube-apiserver and Cluster API: tests/operator/test_operator_under_cluster_api.py."""
from __future__ import annotations

import copy
import re

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.workload import (
    LABEL_SYNC_ANNOTATION,
    label_sync_prefixes,
    reconcile_node,
    synced_labels,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref

PROVIDER_ID = "metal3://ns/host-0/m-0"
HOST_UID = "uid-0"
HOST_LABELS = {"example.io/rack": "r1", "example.io/row": "a", "other.io/rack": "r9"}


class Workload:
    """Nodes, as a workload cluster's store reads, lists (by a label selector key=value) and merge-patches them;
    it counts the lists, which a fleet's workload cluster makes costly."""

    def __init__(self, *nodes: dict) -> None:
        self.nodes = {n["metadata"]["name"]: copy.deepcopy(n) for n in nodes}
        self.patches: list[tuple[str, dict]] = []
        self.lists = 0

    def get_if_exists(self, ref: Ref):
        assert (ref.api_version, ref.kind, ref.namespace) == ("v1", "Node", "")
        return copy.deepcopy(self.nodes.get(ref.name))

    def list(self, api_version, kind, namespace=None, label_selector=None):
        assert (api_version, kind, namespace) == ("v1", "Node", None)
        self.lists += 1
        key, value = label_selector.split("=")
        return [copy.deepcopy(n) for n in self.nodes.values() if n["metadata"]["labels"].get(key) == value]

    def patch(self, ref: Ref, patch: dict, dry_run: bool = False):
        assert (ref.kind, ref.namespace) == ("Node", "")
        self.patches.append((ref.name, patch))
        node = self.nodes[ref.name]
        node.setdefault("spec", {}).update(patch.get("spec") or {})
        labels = node["metadata"].setdefault("labels", {})
        for key, value in ((patch.get("metadata") or {}).get("labels") or {}).items():
            if value is None:
                labels.pop(key, None)
            else:
                labels[key] = value
        return node


def node(name: str, provider_id: str = "", **labels: str) -> dict:
    return {"metadata": {"name": name, "labels": labels}, "spec": {"providerID": provider_id} if provider_id else {}}


@pytest.mark.parametrize(("annotation", "expected"), [
    (None, set()),
    ("", set()),
    ("example.io", {"example.io"}),
    (" example.io , my-prefix,, ", {"example.io", "my-prefix"}),  # trimmed, empty entries ignored (as CAPM3)
])
def test_label_sync_prefixes_are_the_annotations_list(annotation, expected):
    annotations = {LABEL_SYNC_ANNOTATION: annotation} if annotation is not None else {}
    assert label_sync_prefixes({"metadata": {"annotations": annotations}}) == expected


@pytest.mark.parametrize(("annotation", "problem"), [
    ("Example.io", "invalid prefix 'Example.io': a lowercase RFC 1123 subdomain"),
    ("example.io/x", "invalid prefix 'example.io/x': a lowercase RFC 1123 subdomain"),
    ("kubernetes.io", "invalid prefix 'kubernetes.io': kubernetes.io is reserved for Kubernetes"),
    ("node-role.kubernetes.io", "is reserved for Kubernetes"),
    ("k8s.io", "is reserved for Kubernetes"),
])
def test_a_bad_prefix_is_refused_naming_the_annotation(annotation, problem):
    with pytest.raises(Invalid, match=r"^metadata\.annotations\[metal3\.io/metal3-label-sync-prefixes\]: .*"
                       + re.escape(problem)):
        label_sync_prefixes({"metadata": {"annotations": {LABEL_SYNC_ANNOTATION: annotation}}})


@pytest.mark.parametrize(("labels", "expected"), [
    ({"example.io/rack": "r1", "other.io/rack": "r2", "rack": "r3"}, {"example.io/rack": "r1"}),
    ({"example.io/": "x", "sub.example.io/rack": "r1"}, {}),  # no name; a subdomain is another prefix
])
def test_synced_labels_are_those_under_a_prefix(labels, expected):
    assert synced_labels({"example.io"}, labels) == expected


def test_a_node_without_provider_id_gets_the_machines_by_its_uuid_label_and_the_synced_labels():
    workload = Workload(node("n-0", **{"metal3.io/uuid": "uid-0", "example.io/gone": "x", "other.io/kept": "y"}),
                        node("n-1", **{"metal3.io/uuid": "uid-1"}))
    step = reconcile_node(workload, PROVIDER_ID, HOST_LABELS, {"example.io"}, host_uid=HOST_UID)
    assert (step.node, step.changed, step.message) == ("n-0", True, "")
    assert workload.nodes["n-0"]["spec"]["providerID"] == PROVIDER_ID
    assert workload.nodes["n-0"]["metadata"]["labels"] == {
        "metal3.io/uuid": "uid-0", "example.io/rack": "r1", "example.io/row": "a", "other.io/kept": "y"}
    assert workload.nodes["n-1"]["spec"] == {}
    # Level-based: a second pass writes nothing.
    assert reconcile_node(workload, PROVIDER_ID, HOST_LABELS, {"example.io"}, host_uid=HOST_UID).changed is False
    assert len(workload.patches) == 1


def test_the_node_the_machine_names_is_read_by_name_and_no_node_is_listed():
    workload = Workload(node("n-0", PROVIDER_ID, **{"example.io/rack": "r0"}))
    step = reconcile_node(workload, PROVIDER_ID, HOST_LABELS, {"example.io"}, node_name="n-0", host_uid=HOST_UID)
    assert (step.node, step.changed, workload.lists) == ("n-0", True, 0)
    assert workload.patches == [("n-0", {"metadata": {"labels": {"example.io/rack": "r1", "example.io/row": "a"}}})]


def test_a_named_node_of_another_provider_id_is_not_the_machines():
    workload = Workload(node("n-0", "metal3://ns/other/m-9"), node("n-1", **{"metal3.io/uuid": HOST_UID}))
    step = reconcile_node(workload, PROVIDER_ID, HOST_LABELS, set(), node_name="n-0", host_uid=HOST_UID)
    assert (step.node, step.changed) == ("n-1", True)
    assert workload.nodes["n-0"]["spec"]["providerID"] == "metal3://ns/other/m-9"


def test_a_node_kubelet_gave_the_provider_id_and_the_uuid_label_is_left_as_it_is():
    workload = Workload(node("n-0", PROVIDER_ID, **{"metal3.io/uuid": HOST_UID}))
    step = reconcile_node(workload, PROVIDER_ID, HOST_LABELS, set(), host_uid=HOST_UID)
    assert (step.node, step.changed) == ("n-0", False)
    assert workload.patches == []


def test_without_the_hosts_uid_the_step_waits_for_the_node_to_be_named_and_lists_none():
    """A HostClaim's machine: its tenant does not see the host's UID; Cluster API finds the Node by providerID."""
    workload = Workload(node("n-0", PROVIDER_ID))
    step = reconcile_node(workload, PROVIDER_ID, HOST_LABELS, {"example.io"})
    assert (step.node, step.changed, workload.lists) == ("", False, 0)
    assert step.message == f"waiting for a Node with providerID {PROVIDER_ID}"
    assert reconcile_node(workload, PROVIDER_ID, HOST_LABELS, {"example.io"}, node_name="n-0").changed


@pytest.mark.parametrize(("nodes", "message"), [
    ([], "waiting for the Node labelled metal3.io/uuid=uid-0"),
    ([node("a", **{"metal3.io/uuid": "uid-0"}), node("b", **{"metal3.io/uuid": "uid-0"})],
     "Nodes a, b are all labelled metal3.io/uuid=uid-0: none is given a providerID"),
    ([node("a", "metal3://ns/other/m-9", **{"metal3.io/uuid": "uid-0"})],
     "Node a has providerID metal3://ns/other/m-9, not the machine's metal3://ns/host-0/m-0"),
])
def test_no_node_is_written_when_none_is_the_machines_beyond_doubt(nodes, message):
    workload = Workload(*nodes)
    step = reconcile_node(workload, PROVIDER_ID, HOST_LABELS, {"example.io"}, host_uid=HOST_UID)
    assert step.message == message and not step.changed
    assert workload.patches == []
