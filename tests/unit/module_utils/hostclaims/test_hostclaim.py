"""HostClaim on a real SQLite store: policies admit namespaces, a claim binds a free host of an admitting
namespace, the host gets the claim's image and (copied) data, the claim shows the host, and a deleted claim
frees its host for the next claim. Hosts change state here by status writes (their own reconcile is
hosts/baremetalhost.py's, tested apart)."""
from __future__ import annotations

import base64

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.compute import baremetal as bm
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.hostclaims import hostclaim as hc
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

API = "metal3.io/v1alpha1"
INFRA, TENANT = "infra", "tenant-a"
IMAGE = {"url": "http://images/debian.qcow2", "checksum": "http://images/debian.qcow2.sha256",
         "checksumType": "sha256", "format": "qcow2"}
HARDWARE = {"hostname": "server-0", "ramMebibytes": 2048, "nics": [{"name": "enp1s0", "mac": "52:54:00:00:00:01",
                                                                    "ip": "192.168.111.20"}]}


@pytest.fixture
def store(tmp_path):
    with LocalStore(str(tmp_path / "store.db")) as opened:
        yield opened


def secret(store, name, namespace=TENANT, **values):
    store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
                  "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}})


def host(store, name, namespace=INFRA, state="available", labels=None, **spec):
    created = store.create({"apiVersion": API, "kind": "BareMetalHost",
                            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
                            "spec": {"online": False, **spec}})
    return set_state(store, Ref.of(created), state)


def set_state(store, ref, state, powered_on=False, hardware=None):
    current = store.get(ref)
    status = {**(current.get("status") or {}), "provisioning": {"state": state}, "poweredOn": powered_on}
    if hardware:
        status["hardware"] = hardware
    return store.update_status({**current, "status": status})


def policy(store, name="tenants", namespace=INFRA, **constraints):
    store.create({"apiVersion": API, "kind": "HostDeployPolicy", "metadata": {"name": name, "namespace": namespace},
                  "spec": {"hostClaimNamespaces": constraints}})


def claim(store, name, namespace=TENANT, **spec):
    store.create({"apiVersion": API, "kind": "HostClaim", "metadata": {"name": name, "namespace": namespace},
                  "spec": {"poweredOn": True, **spec}})
    return Ref(API, "HostClaim", name, namespace)


def host_of(store, ref):
    bound = store.get(ref)["status"]["bareMetalHost"]
    return store.get(Ref(API, "BareMetalHost", bound["name"], bound["namespace"]))


def condition(obj, type_):
    return next(c for c in obj["status"]["conditions"] if c["type"] == type_)


# policy constraints, namespace labels, claim namespace -> admitted (the refusal says why not)
POLICIES = [
    ({"names": ["tenant-a"]}, {}, "tenant-a", ""),
    ({"names": ["tenant-a"]}, {}, "tenant-b", "does not list tenant-b in spec.hostClaimNamespaces.names"),
    ({"names": []}, {}, "tenant-a", "does not list tenant-a in spec.hostClaimNamespaces.names"),
    ({"nameMatches": "^tenant-"}, {}, "tenant-b", ""),
    ({"nameMatches": "prod"}, {}, "reproduce", ""),  # searched, as upstream: anchor it to match whole names
    ({"nameMatches": "^prod$"}, {}, "production", "spec.hostClaimNamespaces.nameMatches '^prod$' does not match "
                                                  "production"),
    ({"hasLabels": [{"name": "tier"}]}, {"tier": "gold"}, "t", ""),
    ({"hasLabels": [{"name": "tier", "value": "gold"}]}, {"tier": "gold"}, "t", ""),
    ({"hasLabels": [{"name": "tier", "value": "gold"}]}, {"tier": "silver"}, "t", "namespace t's label tier is not "
                                                                                  "gold"),
    ({"hasLabels": [{"name": "tier"}]}, {}, "t", "namespace t has no label tier"),
    ({"names": ["t"], "hasLabels": [{"name": "tier"}]}, {}, "t", "namespace t has no label tier"),  # all must hold
    ({}, {}, "anything", ""),  # constraints given, none set: upstream admits every namespace
]


@pytest.mark.parametrize(("constraints", "labels", "namespace", "refusal"), POLICIES)
def test_a_policy_admits_namespaces_by_names_patterns_and_labels(constraints, labels, namespace, refusal):
    assert bm.policy_refusal({"spec": {"hostClaimNamespaces": constraints}}, namespace, labels) == refusal


def test_a_policy_without_constraints_admits_nobody_and_a_malformed_pattern_is_an_error():
    assert bm.policy_refusal({"spec": {}}, "t", {}) == "has no spec.hostClaimNamespaces"
    with pytest.raises(ValueError, match=r"nameMatches '\(' is not a regular expression"):
        bm.policy_refusal({"spec": {"hostClaimNamespaces": {"nameMatches": "("}}}, "t", {})


def test_a_claim_binds_a_free_host_of_an_admitting_namespace_and_provisions_it_with_its_data(store):
    policy(store, names=[TENANT])
    host(store, "taken", consumerRef={"apiVersion": API, "kind": "HostClaim", "name": "x", "namespace": "other"})
    host(store, "inspecting", state="inspecting")
    host(store, "server-0")
    host(store, "elsewhere", namespace="no-policy")
    secret(store, "cloud-init", userData="#cloud-config\n")
    ref = claim(store, "web", image=IMAGE, userData={"name": "cloud-init"})

    step = hc.reconcile_host_claim(store, ref)

    assert (step.phase, step.host, step.requeue_after) == ("bound", f"{INFRA}/server-0", hc.WAIT)
    bound = host_of(store, ref)
    identity = store.get(ref)["metadata"]["annotations"]["metal3.baremetal/claim-id"]  # the claim's, kept for good
    assert bound["spec"]["consumerRef"] == {"apiVersion": API, "kind": "HostClaim", "name": "web",
                                            "namespace": TENANT, "uid": identity}
    assert bound["spec"]["image"] == IMAGE and bound["spec"]["online"] is True
    assert bound["spec"]["userData"] == {"name": "server-0-claim-user-data", "namespace": INFRA}
    copied = store.get(Ref("v1", "Secret", "server-0-claim-user-data", INFRA))
    assert copied["data"] == store.get(Ref("v1", "Secret", "cloud-init", TENANT))["data"]
    assert copied["metadata"]["annotations"] == {bm.COPY_ANNOTATION: f"{TENANT}/web"}
    assert copied["metadata"]["ownerReferences"][0]["uid"] == bound["metadata"]["uid"]
    obj = store.get(ref)
    assert obj["metadata"]["finalizers"] == [hc.FINALIZER]
    assert condition(obj, "Associated")["reason"] == "BareMetalHostAssociated"
    assert condition(obj, "Synchronized")["reason"] == "ConfigurationSynced"
    assert condition(obj, "Ready")["status"] == "False"

    set_state(store, Ref.of(bound), "provisioned", powered_on=True, hardware=HARDWARE)
    step = hc.reconcile_host_claim(store, ref)

    assert (step.phase, step.state, step.requeue_after) == ("provisioned", "provisioned", None)
    obj = store.get(ref)
    assert obj["status"]["poweredOn"] is True and obj["status"]["state"] == "provisioned"
    assert obj["status"]["addresses"] == [{"type": "InternalIP", "address": "192.168.111.20"},
                                          {"type": "Hostname", "address": "server-0"},
                                          {"type": "InternalDNS", "address": "server-0"}]
    assert obj["status"]["hardwareData"] == {"namespace": TENANT, "name": "web"}
    assert store.get(Ref(API, "HardwareData", "web", TENANT))["spec"]["hardware"] == HARDWARE
    assert condition(obj, "Ready")["status"] == "True"
    assert not hc.reconcile_host_claim(store, ref).changed  # a second run changes nothing


def test_a_claim_nobody_admits_stays_pending_with_the_reason(store):
    policy(store, names=[TENANT])
    host(store, "server-0")
    ref = claim(store, "web", namespace="tenant-c")
    step = hc.reconcile_host_claim(store, ref)
    assert (step.phase, step.requeue_after) == ("pending", bm.NO_HOST_WAIT)
    assert step.waits_on == []  # a policy's change would admit it: no informer names that, so on a timer
    reason = "no HostDeployPolicy admits namespace tenant-c"
    assert step.message == reason
    associated = condition(store.get(ref), "Associated")
    assert (associated["status"], associated["reason"], associated["message"]) == ("False", "NoBareMetalHost", reason)
    assert "consumerRef" not in store.get(Ref(API, "BareMetalHost", "server-0", INFRA))["spec"]


def test_namespace_labels_admit_and_in_namespace_narrows_the_search(store):
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant-b", "labels": {"tier": "a"}}})
    policy(store, hasLabels=[{"name": "tier", "value": "a"}])
    policy(store, name="all", namespace="pool-2", nameMatches=".")
    host(store, "server-0")
    host(store, "server-1", namespace="pool-2")
    ref = claim(store, "web", namespace="tenant-b", hostSelector={"inNamespace": INFRA})
    assert hc.reconcile_host_claim(store, ref).host == f"{INFRA}/server-0"


def test_the_host_selector_and_failure_domain_choose_the_host(store):
    policy(store, names=[TENANT])
    host(store, "small", labels={"size": "s", hc_label(): "az-a"})
    host(store, "big-a", labels={"size": "l", hc_label(): "az-a"})
    host(store, "big-b", labels={"size": "l", hc_label(): "az-b"})
    ref = claim(store, "web", failureDomain="az-b",
                hostSelector={"matchExpressions": [{"key": "size", "operator": "in", "values": ["l"]}]})
    assert hc.reconcile_host_claim(store, ref).host == f"{INFRA}/big-b"


def hc_label():
    return "infrastructure.cluster.x-k8s.io/failure-domain"


def test_no_matching_host_leaves_the_claim_pending(store):
    policy(store, names=[TENANT])
    host(store, "server-0", labels={"size": "s"})
    ref = claim(store, "web", hostSelector={"matchLabels": {"size": "l"}})
    step = hc.reconcile_host_claim(store, ref)
    assert step.phase == "pending" and step.message.startswith("no available host matches size=l in infra")
    # Only a change of a host where it is admitted can serve it: the operator waits on those, not on a timer.
    assert step.summary()["waits_on"] == [{"api_version": API, "kind": "BareMetalHost", "namespace": INFRA,
                                           "name": ""}]


@pytest.mark.parametrize(("field", "ref", "why"), [
    ("userData", {"name": "missing"}, "spec.userData: Secret tenant-a/missing not found"),
    ("networkData", {"name": "bmc", "namespace": INFRA},
     "spec.networkData.namespace: infra is not the claim's namespace; a HostClaim reads Secrets of its own "
     "namespace only"),
])
def test_a_claim_whose_data_cannot_be_read_binds_nothing_or_deploys_nothing(store, field, ref, why):
    policy(store, names=[TENANT])
    host(store, "server-0")
    secret(store, "bmc", namespace=INFRA, username="admin", password="secret")
    claim_ref = claim(store, "web", image=IMAGE, **{field: ref})
    step = hc.reconcile_host_claim(store, claim_ref)
    assert step.error == why and step.requeue_after is None
    server = store.get(Ref(API, "BareMetalHost", "server-0", INFRA))
    assert "image" not in server["spec"]
    synchronized = condition(store.get(claim_ref), "Synchronized")
    assert synchronized["status"] == "False" and synchronized["message"] == why
    assert [s["metadata"]["name"] for s in store.list("v1", "Secret", INFRA)] == ["bmc"]  # nothing copied


# image URLs the Ironic of the controller would check and fetch, allowed local hosts -> the refusal (None: bound)
IMAGE_HOSTS = [
    ({"url": "http://127.0.0.1:6385/v1/nodes"}, (),
     "spec.image.url: 'http://127.0.0.1:6385/v1/nodes' names a loopback or link-local host"),
    ({"url": "http://localhost/os.img"}, (), "spec.image.url: 'http://localhost/os.img' names a loopback"),
    ({"url": "http://[::1]:8088/os.img"}, (), "spec.image.url: 'http://[::1]:8088/os.img' names a loopback"),
    ({"url": "ftp://127.0.0.1/os.img"}, (), "spec.image.url: 'ftp://127.0.0.1/os.img' names a loopback"),
    ({"checksum": "http://169.254.169.254/latest/meta-data"}, (),
     "spec.image.checksum: 'http://169.254.169.254/latest/meta-data' names a loopback or link-local host"),
    ({"url": "http://127.0.0.1:8088/os.img"}, ("127.0.0.1",), None),
    ({}, (), None),
]


@pytest.mark.parametrize(("image", "allowed", "refusal"), IMAGE_HOSTS)
def test_a_bare_metal_claims_image_on_the_controllers_own_hosts_binds_nothing(store, image, allowed, refusal):
    """Ironic, which the controller runs, checks and fetches a host's image: a tenant's URL naming the
    controller's loopback or link-local hosts is refused (whatever its scheme; upstream admits ftp and oci),
    unless the operator allows the host (allowed_local_hosts)."""
    policy(store, names=[TENANT])
    host(store, "server-0")
    claim_ref = claim(store, "web", image={**IMAGE, **image})
    step = hc.reconcile_host_claim(store, claim_ref, outbound=OutboundPolicy.of(allowed))
    server = store.get(Ref(API, "BareMetalHost", "server-0", INFRA))
    if refusal is None:
        assert not step.error and host_of(store, claim_ref)["metadata"]["name"] == "server-0"
        return
    assert step.error.startswith(refusal) and step.requeue_after is None, step
    assert "consumerRef" not in server["spec"] and "image" not in server["spec"]
    ready = condition(store.get(claim_ref), "Ready")
    assert ready["status"] == "False" and ready["message"].startswith(refusal)


def test_a_deleted_claim_deprovisions_and_frees_its_host_for_the_next_claim(store):
    policy(store, nameMatches="^tenant-")
    host(store, "server-0")
    secret(store, "cloud-init", userData="#cloud-config\n")
    first = claim(store, "web", image=IMAGE, userData={"name": "cloud-init"})
    hc.reconcile_host_claim(store, first)
    server = Ref(API, "BareMetalHost", "server-0", INFRA)
    set_state(store, server, "provisioned", powered_on=True, hardware=HARDWARE)
    hc.reconcile_host_claim(store, first)
    waiting = claim(store, "db", namespace="tenant-b")
    assert hc.reconcile_host_claim(store, waiting).phase == "pending"

    store.delete(first)
    step = hc.reconcile_host_claim(store, first)
    assert step.phase == "deleting"
    assert step.message == "waiting for host infra/server-0 to deprovision (it is provisioned)"
    cleared = store.get(server)["spec"]
    assert "image" not in cleared and "userData" not in cleared and cleared["online"] is False
    assert cleared["consumerRef"]["name"] == "web"  # held until deprovisioned
    assert hc.reconcile_host_claim(store, waiting).phase == "pending"

    set_state(store, server, "available")
    assert hc.reconcile_host_claim(store, first).phase == "deleted"
    assert store.get_if_exists(first) is None
    assert store.get_if_exists(Ref("v1", "Secret", "server-0-claim-user-data", INFRA)) is None
    assert store.get_if_exists(Ref(API, "HardwareData", "web", TENANT)) is None
    assert hc.reconcile_host_claim(store, waiting).host == f"{INFRA}/server-0"


def test_power_and_reboot_requests_on_the_claim_reach_the_host(store):
    policy(store, names=[TENANT])
    host(store, "server-0")
    ref = claim(store, "web", image=IMAGE)
    hc.reconcile_host_claim(store, ref)
    server = Ref(API, "BareMetalHost", "server-0", INFRA)
    set_state(store, server, "provisioned", powered_on=True)
    store.patch(ref, {"spec": {"poweredOn": False}, "metadata": {"annotations": {"reboot.metal3.io": ""}}})
    step = hc.reconcile_host_claim(store, ref)
    assert step.requeue_after == hc.WAIT  # the host is still on
    assert store.get(server)["spec"]["online"] is False
    assert store.get(server)["metadata"]["annotations"] == {"reboot.metal3.io": ""}
    assert "reboot.metal3.io" not in (store.get(ref)["metadata"].get("annotations") or {})  # one request, one reboot


def test_power_holds_on_the_claim_hold_its_host_off_under_keys_of_their_own_until_removed_or_released(store):
    """CAPM3's remediation powers a machine off with reboot.metal3.io/<key> until it removes it: on a HostClaim
    as on a host (the seed: HostClaims are transparent for remediation). The host gets the claim's holds under
    keys of its own, which the claim adds and removes; an admin's hold on the host is left as it is."""
    policy(store, names=[TENANT])
    host(store, "server-0")
    server = Ref(API, "BareMetalHost", "server-0", INFRA)
    ref = claim(store, "web", image=IMAGE)
    hc.reconcile_host_claim(store, ref)
    set_state(store, server, "provisioned", powered_on=True)
    store.patch(server, {"metadata": {"annotations": {"reboot.metal3.io/admin": ""}}})
    remediation = "reboot.metal3.io/metal3-remediation-0b8c6a54-9fd4-4b8e-8b1c-1b4a1bd5e2c7"
    store.patch(ref, {"metadata": {"annotations": {remediation: '{"mode":"hard","force":false}'}}})
    step = hc.reconcile_host_claim(store, ref)
    held = store.get(server)["metadata"]["annotations"]
    mirrored = [key for key in held if key.startswith("reboot.metal3.io/hostclaim-")]
    assert len(mirrored) == 1 and held[mirrored[0]] == '{"mode":"hard","force":false}'
    assert held["reboot.metal3.io/admin"] == "" and store.get(server)["spec"]["online"] is True
    assert step.requeue_after == hc.WAIT  # the host is still on: off is what the claim now asks
    set_state(store, server, "provisioned", powered_on=False)
    assert hc.reconcile_host_claim(store, ref).requeue_after is None  # held off, as asked: settled
    assert store.get(ref)["status"]["poweredOn"] is False

    store.patch(ref, {"metadata": {"annotations": {remediation: None,
                                                   "capm3.metal3.io/unhealthy": "capm3/UnhealthyNode"}}})
    hc.reconcile_host_claim(store, ref)
    # The unhealthy mark stays on the claim: a tenant writes it, and must not take hosts out of the pool.
    assert store.get(server)["metadata"]["annotations"] == {"reboot.metal3.io/admin": ""}

    store.patch(ref, {"metadata": {"annotations": {remediation: "{}"}}})  # held again, then the claim deleted
    hc.reconcile_host_claim(store, ref)
    store.delete(ref)
    hc.reconcile_host_claim(store, ref)
    # The workload goes: the claim's hold with it; the admin's stays.
    assert store.get(server)["metadata"]["annotations"] == {"reboot.metal3.io/admin": ""}


def test_a_lost_status_write_finds_the_host_the_claim_holds(store):
    policy(store, names=[TENANT])
    host(store, "server-0")
    host(store, "server-1")
    ref = claim(store, "web")
    first = hc.reconcile_host_claim(store, ref).host
    obj = store.get(ref)
    store.update_status({**obj, "status": {}})  # the status as if its write had been lost
    assert hc.reconcile_host_claim(store, ref).host == first
    holders = [h for h in store.list(API, "BareMetalHost", INFRA) if h["spec"].get("consumerRef")]
    assert len(holders) == 1


def test_two_reconciles_of_one_claim_keep_one_host(store, monkeypatch):
    policy(store, names=[TENANT])
    host(store, "server-0")
    host(store, "server-1")
    ref = claim(store, "web")
    # Another reconcile of the claim binds server-1 between this one's choice and its status write.
    associating = bm.associate

    def racing(*args, **kwargs):
        selection = associating(*args, **kwargs)
        other = "server-1" if selection.host["metadata"]["name"] == "server-0" else "server-0"
        rival = store.get(Ref(API, "BareMetalHost", other, INFRA))
        rival["spec"]["consumerRef"] = {"apiVersion": API, "kind": "HostClaim", "name": "web", "namespace": TENANT}
        store.update(rival)
        current = store.get(ref)
        store.update_status({**current, "status": {"bareMetalHost": {"namespace": INFRA, "name": other}}})
        return selection

    monkeypatch.setattr(bm, "associate", racing)
    step = hc.reconcile_host_claim(store, ref)
    holders = [h["metadata"]["name"] for h in store.list(API, "BareMetalHost", INFRA) if h["spec"].get("consumerRef")]
    assert holders == [step.host.split("/")[1]] and store.get(ref)["status"]["bareMetalHost"]["name"] == holders[0]


def test_copy_names_fit_an_object_name():
    assert bm.copy_name("server-0", "networkData") == "server-0-claim-network-data"
    long = bm.copy_name("h" * 253, "userData")
    assert len(long) <= 253 and long.endswith("-claim-user-data")
    assert long != bm.copy_name("h" * 252 + "i", "userData")


def test_the_host_as_the_claim_shows_it(store):
    policy(store, names=[TENANT])
    host(store, "server-0", labels={hc_label(): "az-a"}, bootMACAddress="52:54:00:00:00:01")
    ref = claim(store, "web")
    assert hc.host_view(store, store.get(ref)) is None  # not bound yet
    hc.reconcile_host_claim(store, ref)
    set_state(store, Ref(API, "BareMetalHost", "server-0", INFRA), "available", hardware=HARDWARE)
    hc.reconcile_host_claim(store, ref)
    assert hc.host_view(store, store.get(ref)) == {
        "apiVersion": API, "kind": "BareMetalHost",
        "metadata": {"name": "server-0", "namespace": TENANT, "labels": {hc_label(): "az-a"}},
        "spec": {"bootMACAddress": "52:54:00:00:00:01"},
        "status": {"hardware": HARDWARE, "provisioning": {"state": "available"}, "poweredOn": False}}
