"""The workload cluster's Nodes (capm3/workload.py): CAPM3's providerID workflow and label sync, on a fake
workload store. Against a real kube-apiserver and Cluster API: tests/operator/test_operator_under_cluster_api.py."""
from __future__ import annotations

import copy

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
HOST = {"metadata": {"name": "host-0", "uid": "uid-0",
                     "labels": {"example.io/rack": "r1", "example.io/row": "a", "other.io/rack": "r9"}}}


class Workload:
    """Nodes, as a workload cluster's store lists and merge-patches them."""

    def __init__(self, *nodes: dict) -> None:
        self.nodes = {n["metadata"]["name"]: copy.deepcopy(n) for n in nodes}
        self.patches: list[tuple[str, dict]] = []

    def list(self, api_version, kind, namespace=None, label_selector=None):
        assert (api_version, kind, namespace) == ("v1", "Node", None)
        return [copy.deepcopy(n) for n in self.nodes.values()]

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
    ("Example.io", "invalid prefix 'Example.io': a DNS-1123 subdomain"),
    ("example.io/x", "invalid prefix 'example.io/x': a DNS-1123 subdomain"),
    ("kubernetes.io", "invalid prefix 'kubernetes.io': kubernetes.io is reserved for Kubernetes"),
    ("node-role.kubernetes.io", "is reserved for Kubernetes"),
    ("k8s.io", "is reserved for Kubernetes"),
])
def test_a_bad_prefix_is_refused_naming_the_annotation(annotation, problem):
    with pytest.raises(Invalid, match=r"^metadata\.annotations\[metal3\.io/metal3-label-sync-prefixes\]: .*"
                       + problem.replace(".", r"\.").replace("(", r"\(").replace("[", r"\[")):
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
    step = reconcile_node(workload, HOST, PROVIDER_ID, {"example.io"})
    assert (step.node, step.changed, step.message) == ("n-0", True, "")
    assert workload.nodes["n-0"]["spec"]["providerID"] == PROVIDER_ID
    assert workload.nodes["n-0"]["metadata"]["labels"] == {
        "metal3.io/uuid": "uid-0", "example.io/rack": "r1", "example.io/row": "a", "other.io/kept": "y"}
    assert workload.nodes["n-1"]["spec"] == {}
    # Level-based: a second pass writes nothing.
    assert reconcile_node(workload, HOST, PROVIDER_ID, {"example.io"}).changed is False
    assert len(workload.patches) == 1


def test_a_node_kubelet_gave_the_provider_id_is_found_by_it_and_only_its_labels_synced():
    workload = Workload(node("n-0", PROVIDER_ID))
    step = reconcile_node(workload, HOST, PROVIDER_ID, set())
    assert (step.node, step.changed) == ("n-0", False)
    assert workload.patches == []


@pytest.mark.parametrize(("nodes", "message"), [
    ([], "waiting for the Node labelled metal3.io/uuid=uid-0"),
    ([node("a", **{"metal3.io/uuid": "uid-0"}), node("b", **{"metal3.io/uuid": "uid-0"})],
     "Nodes a, b are all labelled metal3.io/uuid=uid-0: none is given a providerID"),
    ([node("a", "metal3://ns/other/m-9", **{"metal3.io/uuid": "uid-0"})],
     "Node a has providerID metal3://ns/other/m-9, not the machine's metal3://ns/host-0/m-0"),
])
def test_no_node_is_written_when_none_is_the_machines_beyond_doubt(nodes, message):
    workload = Workload(*nodes)
    step = reconcile_node(workload, HOST, PROVIDER_ID, {"example.io"})
    assert step.message == message and not step.changed
    assert workload.patches == []
