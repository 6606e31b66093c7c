"""The controller: what wakes a reconcile, the CR annotations a reconcile reads, a worker outliving a
reconcile that raises; and against the real kube-apiserver, list and watch (a re-list when the watch's version
is gone), the watch's label selector, and reconcilePeriod."""
from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Unavailable
from ansible_collections.metal3.baremetal.plugins.module_utils.store.kube import KubernetesStore
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from metal3_operator.controller import Controller
from metal3_operator.informer import wants_reconcile
from metal3_operator.metrics import Metrics
from metal3_operator.reconciler import (
    MAX_ARTIFACTS_ANNOTATION,
    RECONCILE_PERIOD_ANNOTATION,
    VERBOSITY_ANNOTATION,
    annotated,
    max_artifacts,
    verbosity,
)
from metal3_operator.runner import Runner
from metal3_operator.watches import Watch, parse_duration
from tests.harness.operator_process import Operator
from tests.operator.conftest import condition, eventually
from tests.operator.fakes import FakeClock, FakeRunner
from tests.operator.test_operator_ipam import IPAM, create_claims, create_pool

CLAIM = {"metadata": {"name": "c", "namespace": "n", "generation": 1, "annotations": {"a": "1"}}}


@pytest.mark.parametrize("change, annotations, expected", [
    ({}, False, False),  # a status write: same generation
    ({"generation": 2}, False, True),  # a spec edit
    ({"deletionTimestamp": "2026-11-23T00:00:00Z"}, False, True),
    ({"annotations": {"a": "2"}}, False, False),
    ({"annotations": {"a": "2"}}, True, True),  # watchAnnotationsChanges
])
def test_what_wakes_a_reconcile(change, annotations, expected):
    new = {"metadata": {**CLAIM["metadata"], **change}}
    assert wants_reconcile(CLAIM, new, annotations) is expected
    assert wants_reconcile(None, new, annotations) is True


@pytest.mark.parametrize("annotation, expected", [
    (None, 1), ("0", 0), ("4", 4), ("7", 7),
    ("8", 1), ("-1", 1), ("loud", 1), ("", 1),  # not a verbosity: the kind's stands
])
def test_a_crs_verbosity_annotation_overrides_the_kinds(annotation, expected):
    annotations = {} if annotation is None else {VERBOSITY_ANNOTATION: annotation}
    assert verbosity(annotations, 1) == expected


@pytest.mark.parametrize("annotation, expected", [(None, None), ("5", 5), ("0", None), ("many", None)])
def test_a_crs_max_runner_artifacts_annotation(annotation, expected):
    annotations = {} if annotation is None else {MAX_ARTIFACTS_ANNOTATION: annotation}
    assert max_artifacts(annotations) == expected


@pytest.mark.parametrize("annotation, expected", [(None, 36000.0), ("90s", 90.0), ("0", 0.0), ("soon", 36000.0)])
def test_a_crs_reconcile_period_annotation(annotation, expected):
    annotations = {} if annotation is None else {RECONCILE_PERIOD_ANNOTATION: annotation}
    assert annotated(annotations, RECONCILE_PERIOD_ANNOTATION, parse_duration, 36000.0) == expected


class Unreachable(FakeRunner):
    def run(self, *args, **kwargs):
        raise Unavailable("cannot reach the Kubernetes API")


def test_a_worker_outlives_a_reconcile_that_raises_and_the_key_comes_back_rate_limited(tmp_path):
    store = LocalStore(str(tmp_path / "store.db"))
    watch = Watch("ipam.metal3.io", "v1alpha1", "IPClaim", role="r", manage_status=False)
    clock = FakeClock()
    controller = Controller(watch, client.ApiClient(), store, Unreachable(), Metrics(), 1, 0, ["ns"], clock=clock)
    controller.cache.put({"apiVersion": watch.api_version, "kind": watch.kind,
                          "metadata": {"name": "claim", "namespace": "ns"}})
    controller.queue.add(("ns", "claim"))
    key, waited = controller.queue.get(), []
    for _attempt in range(3):
        controller.process(key)  # raises inside: logged, counted, requeued
        started = clock.now()
        key = controller.queue.get()
        waited.append(round(clock.now() - started, 6))
    assert key == ("ns", "claim") and waited == [0.005, 0.01, 0.02]


def test_once_synced_the_runs_of_objects_deleted_meanwhile_are_cleared(tmp_path):
    runner = FakeRunner()
    runner.on_disk = [("ns", "kept"), ("ns", "deleted-while-no-operator-ran"), ("other", "not-watched")]
    watch = Watch("ipam.metal3.io", "v1alpha1", "IPClaim", role="r")
    controller = Controller(watch, client.ApiClient(), LocalStore(str(tmp_path / "store.db")), runner, Metrics(), 1,
                            0, ["ns"])
    controller.cache.put({"metadata": {"name": "kept", "namespace": "ns"}})
    controller._synced()
    assert controller.queue.get() == ("ns", "deleted-while-no-operator-ran") and len(controller.queue) == 0


class Ledger:
    """A proxy's ledger that knows one answer."""

    def __init__(self, newest: tuple[bool, str | None]) -> None:
        self.answer = newest

    def saw(self, obj: dict, api_version: str, plural: str) -> None:
        pass

    def newest(self, api_version: str, plural: str, namespace: str | None, name: str) -> tuple[bool, str | None]:
        return self.answer


def settling_controller(tmp_path: Path, newest: tuple[bool, str | None]) -> Controller:
    watch = Watch("ipam.metal3.io", "v1alpha1", "IPClaim", role="r")
    controller = Controller(watch, client.ApiClient(), LocalStore(str(tmp_path / "store.db")), FakeRunner(),
                            Metrics(), 1, 0, ["ns"], ledger=Ledger(newest))
    controller.informer.plural = "ipclaims"
    return controller


def at(version: str) -> dict:
    return {"apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPClaim",
            "metadata": {"name": "claim", "namespace": "ns", "resourceVersion": version}}


@pytest.mark.parametrize("newest, cached, held, expected", [
    ((False, None), "7", "5", "7"),  # the role wrote nothing through the proxy that the cache lacks
    ((False, None), "5", "7", "7"),  # the operator's own Running write is newer than the cache
    ((False, None), None, "5", "read"),  # gone from the cache
    ((True, "7"), "7", "5", "7"),  # the watch brought the role's last write
    ((True, "8"), "7", "5", "read"),  # the watch is late (past the wait): read it
    ((True, None), "7", "5", "read"),  # the role saw it go
], ids=["nothing-pending", "operator-newer", "uncached", "caught-up", "late", "deleted"])
def test_after_a_run_the_object_comes_from_the_cache_once_it_holds_the_roles_last_write(
        tmp_path, monkeypatch, newest, cached, held, expected):
    monkeypatch.setattr("metal3_operator.controller.SETTLE_TIMEOUT", 0.01)
    controller = settling_controller(tmp_path, newest)
    if cached:
        controller.cache.put(at(cached))
    settled = controller._settled(("ns", "claim"), at(held))
    assert (settled["metadata"]["resourceVersion"] if isinstance(settled, dict) else "read") == expected


@pytest.mark.kubernetes
def test_a_watch_from_a_version_long_gone_asks_for_a_relist(kube_cluster, kube_namespace, custom, tmp_path):
    create_pool(custom, kube_namespace)
    create_claims(custom, kube_namespace, 2)
    watch = Watch("ipam.metal3.io", "v1alpha1", "IPClaim", role="metal3.baremetal.ipam_reconcile")
    runner = Runner(tmp_path / "runner", prefork=False)
    ghost = runner.private_dir(watch, kube_namespace, "deleted-while-no-operator-ran")
    (ghost / "artifacts").mkdir(parents=True)
    store = KubernetesStore(kubeconfig=str(kube_cluster.kubeconfig))
    controller = Controller(watch, kube_cluster.api_client(), store, runner, Metrics(), 1, 0, [kube_namespace])
    informer = controller.informer
    informer.plural = "ipclaims"
    assert informer.watch_from(kube_namespace, "1") is None  # 410 Gone: too old
    version = informer.relist(kube_namespace)
    assert int(version) > 1
    assert controller.cache.keys() == [(kube_namespace, "claim-0"), (kube_namespace, "claim-1")]
    assert controller.cache.get(kube_namespace, "claim-0")["kind"] == "IPClaim"  # a list leaves it out
    assert controller.synced.is_set()
    # The two claims to reconcile, and the directory of an object that is gone, to be cleared.
    keys = [controller.queue.get() for _key in range(len(controller.queue))]
    assert sorted(keys) == [(kube_namespace, "claim-0"), (kube_namespace, "claim-1"),
                            (kube_namespace, "deleted-while-no-operator-ran")]
    controller.reconciler.reconcile((kube_namespace, "deleted-while-no-operator-ran"))
    assert not ghost.exists() and runner.objects(watch) == []


@pytest.mark.kubernetes
def test_the_selector_limits_the_watch_and_reconcile_period_requeues(kube_cluster, kube_namespace, custom,
                                                                     tmp_path: Path):
    watches = tmp_path / "watches.yaml"
    watches.write_text("""
- {group: ipam.metal3.io, version: v1alpha1, kind: IPPool, role: metal3.baremetal.ipam_reconcile,
   vars: {ipam_reconcile_kind: IPPool}, reconcilePeriod: 1s}
- {group: ipam.metal3.io, version: v1alpha1, kind: IPClaim, role: metal3.baremetal.ipam_reconcile,
   vars: {ipam_reconcile_kind: IPClaim}, selector: {matchLabels: {tier: gold}}}
""")
    operator = Operator(kube_cluster, tmp_path / "operator", kube_namespace, watches=watches).start()
    try:
        create_pool(custom, kube_namespace)
        create_claims(custom, kube_namespace, 1)
        custom.create_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", {
            "apiVersion": "ipam.metal3.io/v1alpha1", "kind": "IPClaim",
            "metadata": {"name": "gold", "labels": {"tier": "gold"}}, "spec": {"pool": {"name": "pool"}}})
        eventually(lambda: condition(custom.get_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "gold"),
                                     "Ready").get("status") == "True", "the gold claim Ready")
        pool_runs = 'controller_runtime_reconcile_total{controller="ippool.ipam.metal3.io",result="success"}'
        eventually(lambda: operator.metrics().get(pool_runs, 0) >= 4, "the pool reconciled every second")
        plain = custom.get_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "claim-0")
        assert "status" not in plain and not plain["metadata"].get("finalizers")
    finally:
        operator.stop()
