"""Host selection as CAPM3's chooseHost, and claims that never give one host two consumers."""
from __future__ import annotations

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import claim as c
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

ME = c.Consumer("infrastructure.cluster.x-k8s.io/v1beta1", "Metal3Machine", "m3m-0", "ns")
OTHER = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "Metal3Machine", "name": "x",
         "namespace": "ns"}


def bmh(name, state="available", labels=None, annotations=None, consumer=None, error="", deleting=False):
    metadata = {"name": name, "namespace": "ns", "labels": labels or {}, "annotations": annotations or {}}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec = {"online": False, **({"consumerRef": consumer} if consumer else {})}
    status = {"provisioning": {"state": state}, **({"errorMessage": error} if error else {})}
    return {"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost", "metadata": metadata, "spec": spec,
            "status": status}


# host → why it is excluded ('' = selectable)
EXCLUSIONS = [
    (bmh("free"), ""),
    (bmh("taken", consumer=OTHER), "consumed by Metal3Machine x"),
    (bmh("gone", deleting=True), "being deleted"),
    (bmh("broken", error="power failed"), "in error: power failed"),
    (bmh("paused", annotations={"baremetalhost.metal3.io/paused": ""}), "paused"),
    (bmh("sick", annotations={"capm3.metal3.io/unhealthy": "x"}), "unhealthy"),
    (bmh("sick-old", annotations={"capi.metal3.io/unhealthy": "x"}), "unhealthy"),
    (bmh("kept", labels={c.NODE_REUSE_LABEL: "other-md"}), "kept for node reuse by other-md"),
]


@pytest.mark.parametrize(("host", "reason"), EXCLUSIONS, ids=[h["metadata"]["name"] for h, _r in EXCLUSIONS])
def test_exclusions(host, reason):
    assert c.exclusion(host) == reason
    chosen = c.choose_host([host], ME).host
    assert (chosen is not None) == (reason == "")


def first(hosts):
    return sorted(hosts, key=lambda h: h["metadata"]["name"])[0]


def test_only_available_hosts_are_chosen():
    assert c.choose_host([bmh("a", state="inspecting"), bmh("b", state="provisioned")], ME).host is None
    assert c.choose_host([bmh("a", state="ready")], ME).host["metadata"]["name"] == "a"


def test_the_failure_domain_is_preferred_softly_and_strict_on_request():
    hosts = [bmh("a", labels={c.FAILURE_DOMAIN_LABEL: "az-a"}), bmh("b", labels={c.FAILURE_DOMAIN_LABEL: "az-b"})]
    assert c.choose_host(hosts, ME, "az-b", pick=first).host["metadata"]["name"] == "b"
    assert c.choose_host(hosts[:1], ME, "az-b", pick=first).host["metadata"]["name"] == "a"  # soft: falls back
    strict = c.choose_host(hosts[:1], ME, "az-b", strict_failure_domain=True)
    assert strict.host is None and "failure domain az-b" in strict.reason


def test_node_reuse_hosts_come_first_and_are_waited_for():
    reuse = {c.NODE_REUSE_LABEL: "md-0"}
    hosts = [bmh("plain"), bmh("reused", labels=reuse, consumer={"kind": "Cluster", "name": "c"})]
    assert c.choose_host(hosts, ME, reuse_name="md-0").host["metadata"]["name"] == "reused"
    busy = [bmh("plain"), bmh("reused", state="deprovisioning", labels=reuse)]
    waiting = c.choose_host(busy, ME, reuse_name="md-0")
    assert waiting.host is None and waiting.wait
    assert c.choose_host(busy, ME).host["metadata"]["name"] == "plain"  # another deployment's host is not ours


def test_association_is_idempotent():
    mine = bmh("mine", state="provisioned", consumer=ME.ref())
    assert c.choose_host([bmh("free"), mine], ME).host is mine


def put(store, host):
    """Create ``host`` with its status (create drops status, as the status subresource does)."""
    created = store.create(host)
    store.update_status({**created, "status": host["status"]})


@pytest.fixture
def store(tmp_path):
    with LocalStore(str(tmp_path / "store.db")) as opened:
        yield opened


def test_a_claim_loses_to_a_concurrent_claimer_and_takes_another_host(store):
    for name in ("a", "b"):
        put(store, bmh(name))
    stale = store.list("metal3.io/v1alpha1", "BareMetalHost", "ns")
    taken = c.associate(store, ["ns"], ME, pick=first)  # takes a
    assert taken.host["spec"]["consumerRef"]["name"] == "m3m-0"
    rival = c.Consumer(ME.api_version, ME.kind, "m3m-1", "ns")
    calls = iter([stale, None])

    def list_stale_once(api_version, kind, namespace=None, label_selector=None):
        listed = next(calls)
        return listed if listed is not None else LocalStore.list(store, api_version, kind, namespace, label_selector)

    store.list = list_stale_once  # the rival listed before the first claim landed: it still sees a free
    second = c.associate(store, ["ns"], rival, pick=first)
    assert second.host["metadata"]["name"] == "b"  # a's update conflicted; it listed again


def test_updates_to_a_host_that_is_no_longer_ours_are_refused(store):
    put(store, bmh("a"))
    assert c.associate(store, ["ns"], ME).host
    ref = c.Ref("metal3.io/v1alpha1", "BareMetalHost", "a", "ns")
    store.patch(ref, {"spec": {"consumerRef": OTHER}})
    with pytest.raises(c.NotHeld, match="not held by Metal3Machine ns/m3m-0"):
        c.update_claimed_host(store, ref, ME, lambda host: host["spec"].update(online=True))


def test_host_selector_operators_in_any_case():
    selector = {"matchLabels": {"rack": "r1"}, "matchExpressions": [{"key": "gpu", "operator": "in",
                                                                     "values": ["a100"]}]}
    assert c.host_selector(selector) == "rack=r1,gpu in (a100)"


# operator as written (Kubernetes' spellings in any case, Go's selection.Operator) -> the selector
OPERATORS = [
    ("In", ["a"], "k in (a)"), ("in", ["a"], "k in (a)"), ("NotIn", ["a"], "k notin (a)"),
    ("notin", ["a"], "k notin (a)"), ("Exists", [], "k"), ("exists", [], "k"), ("DoesNotExist", [], "!k"),
    ("=", ["a"], "k in (a)"), ("==", ["a"], "k in (a)"), ("!=", ["a"], "k notin (a)"), ("!", [], "!k"),
]


@pytest.mark.parametrize(("operator", "values", "selector"), OPERATORS)
def test_host_selector_reads_every_operator_the_webhooks_accept(operator, values, selector):
    expression = {"key": "k", "operator": operator, "values": values}
    assert c.host_selector({"matchExpressions": [expression]}) == selector
