"""Objects of a store into inventory hosts, variables and groups (module_utils/inventory.py), without Ansible."""
from __future__ import annotations

import copy
from typing import Any

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Forbidden, Invalid, NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.inventory import host_records, read_objects

INFRA, CAPI, BMH, IPAM = ("infrastructure.cluster.x-k8s.io/v1beta2", "cluster.x-k8s.io/v1beta1",
                          "metal3.io/v1alpha1", "ipam.metal3.io/v1alpha1")
NS = "metal3"
FD = "infrastructure.cluster.x-k8s.io/failure-domain"


def meta(name: str, ns: str = NS, **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": ns, **extra}


def machine_pair(name: str, fd: str, host: str, control_plane: bool, mgmt: str, storage: str,
                 label_on_machine_only: bool = False) -> list[dict[str, Any]]:
    """A Machine, its provisioned Metal3Machine, its Metal3Data and the IPAddresses of its two pools."""
    labels = {"cluster.x-k8s.io/cluster-name": "my-cluster",
              **({"cluster.x-k8s.io/control-plane": ""} if control_plane else {})}
    data = f"net-{fd}-{name}"
    return [
        {"apiVersion": CAPI, "kind": "Machine", "metadata": meta(name, labels=labels),
         "spec": {"clusterName": "my-cluster", "failureDomain": fd}},
        {"apiVersion": INFRA, "kind": "Metal3Machine",
         "metadata": meta(name, labels={} if label_on_machine_only else labels,
                          annotations={"metal3.io/BareMetalHost": f"{NS}/{host}"},
                          ownerReferences=[{"apiVersion": CAPI, "kind": "Machine", "name": name, "uid": "u"}]),
         "spec": {"failureDomain": fd, "providerID": f"metal3://{NS}/{host}/{name}"},
         "status": {"initialization": {"provisioned": True}, "renderedData": {"name": data},
                    "addresses": [{"type": "InternalIP", "address": mgmt}, {"type": "InternalIP", "address": storage},
                                  {"type": "Hostname", "address": name}]}},
        {"apiVersion": INFRA, "kind": "Metal3Data", "metadata": meta(data),
         "spec": {"template": {"name": f"net-{fd}"}}},
        {"apiVersion": IPAM, "kind": "IPAddress", "metadata": meta(f"mgmt-{fd}-{mgmt}"),
         "spec": {"address": mgmt, "pool": {"name": f"mgmt-{fd}-pool"}, "claim": {"name": f"{data}-mgmt-{fd}-pool"}}},
        {"apiVersion": IPAM, "kind": "IPAddress", "metadata": meta(f"storage-{fd}-{storage}"),
         "spec": {"address": storage, "pool": {"name": f"storage-{fd}-pool"},
                  "claim": {"name": f"{data}-storage-{fd}-pool"}}},
        host_object(host, fd, "provisioned", consumer=("Metal3Machine", name)),
    ]


def template(fd: str) -> dict[str, Any]:
    suffix = fd[-1]
    return {"apiVersion": INFRA, "kind": "Metal3DataTemplate", "metadata": meta(f"net-{fd}"),
            "spec": {"template": {"networkData": {"networks": {"ipv4": [
                {"id": f"mgmt-{suffix}", "link": "bond1.11", "ipAddressFromIPPool": f"mgmt-{fd}-pool"},
                {"id": f"storage-{suffix}", "link": "bond1.12", "fromPoolRef": {"name": f"storage-{fd}-pool"}}]}}}}}


def host_object(name: str, fd: str, state: str, consumer: tuple[str, str] | None = None,
                ip: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"online": True}
    if consumer:
        spec["consumerRef"] = {"apiVersion": INFRA if consumer[0] == "Metal3Machine" else BMH, "kind": consumer[0],
                               "name": consumer[1], "namespace": NS}
    hardware = {"hostname": name, "nics": [{"name": "eno1", "ip": ip}] if ip else []}
    return {"apiVersion": BMH, "kind": "BareMetalHost", "metadata": meta(name, labels={FD: fd}), "spec": spec,
            "status": {"provisioning": {"state": state}, "hardware": hardware}}


def demo() -> dict[str, list[dict[str, Any]]]:
    """The demo's five machines (three control plane over az-a/az-b, two workers), a sixth host left available,
    a standalone HostClaim, a HostClaim a machine made, and a provisioned host nobody holds."""
    objects = [
        *machine_pair("my-cluster-controlplane-0", "az-a", "host-0", True, "192.168.11.10", "192.168.12.10"),
        *machine_pair("my-cluster-controlplane-1", "az-b", "host-3", True, "192.168.21.10", "192.168.22.10"),
        *machine_pair("my-cluster-controlplane-2", "az-a", "host-1", True, "192.168.11.11", "192.168.12.11",
                      label_on_machine_only=True),  # KCP labels the Machine; its Metal3Machine may not carry it
        *machine_pair("my-cluster-workers-0", "az-b", "host-4", False, "192.168.21.11", "192.168.22.11"),
        *machine_pair("my-cluster-workers-1", "az-a", "host-2", False, "192.168.11.12", "192.168.12.12"),
        template("az-a"), template("az-b"),
        host_object("host-5", "az-b", "available"),
        host_object("lonely", "az-b", "externally provisioned", ip="10.0.0.9"),
        host_object("claimed", "az-a", "provisioned", consumer=("HostClaim", "web-0")),
        {"apiVersion": BMH, "kind": "HostClaim", "metadata": meta("web-0", labels={}),
         "spec": {"failureDomain": "az-a"},
         "status": {"bareMetalHost": {"name": "claimed", "namespace": NS}, "state": "provisioned",
                    "addresses": [{"type": "InternalIP", "address": "10.0.0.7"}]}},
    ]
    grouped: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        grouped.setdefault(obj["kind"], []).append(obj)
    return grouped


def by_name(records):
    return {r.name: r for r in records}


def test_the_demo_machines_their_facts_and_groups():
    records = by_name(host_records(demo()))
    assert sorted(records) == ["lonely", "my-cluster-controlplane-0", "my-cluster-controlplane-1",
                               "my-cluster-controlplane-2", "my-cluster-workers-0", "my-cluster-workers-1", "web-0"]
    cp0 = records["my-cluster-controlplane-0"]
    assert cp0.variables["ansible_host"] == "192.168.11.10"  # the first InternalIP
    assert cp0.variables["metal3_host"] == "metal3/host-0"
    assert cp0.variables["metal3_provider_id"] == "metal3://metal3/host-0/my-cluster-controlplane-0"
    assert cp0.variables["metal3_networks"] == {"mgmt-a": "192.168.11.10", "mgmt-az-a-pool": "192.168.11.10",
                                                "storage-a": "192.168.12.10", "storage-az-a-pool": "192.168.12.10"}
    assert sorted(cp0.groups) == ["cluster_my-cluster", "control_plane", "failure_domain_az-a", "state_provisioned"]
    assert "control_plane" in records["my-cluster-controlplane-2"].groups  # from its Machine's label
    assert sorted(records["my-cluster-workers-0"].groups) == ["cluster_my-cluster", "failure_domain_az-b",
                                                              "state_provisioned", "workers"]
    assert records["web-0"].variables["metal3_host"] == "metal3/claimed"
    assert records["web-0"].variables["ansible_host"] == "10.0.0.7"
    assert sorted(records["web-0"].groups) == ["failure_domain_az-a", "state_provisioned"]
    assert records["lonely"].variables["metal3_state"] == "externally provisioned"
    assert records["lonely"].variables["ansible_host"] == "10.0.0.9"


# (network option, {host: ansible_host}); None: the host has no ansible_host
NETWORKS = [
    (["storage-*"], {"my-cluster-controlplane-0": "192.168.12.10", "my-cluster-workers-0": "192.168.22.11",
                     "web-0": None}),
    (["storage-az-b-pool", "InternalIP"], {"my-cluster-controlplane-0": "192.168.11.10",
                                           "my-cluster-workers-0": "192.168.22.11", "web-0": "10.0.0.7"}),
    (["mgmt-b"], {"my-cluster-controlplane-1": "192.168.21.10", "my-cluster-controlplane-0": None}),
    (["Hostname"], {"my-cluster-workers-1": "my-cluster-workers-1", "lonely": "lonely"}),
]


@pytest.mark.parametrize("network,expected", NETWORKS, ids=str)
def test_ansible_host_is_the_address_on_the_chosen_network(network, expected):
    records = by_name(host_records(demo(), network))
    for name, address in expected.items():
        assert records[name].variables.get("ansible_host") == address, name


# (filter, the hosts kept)
FILTERS = [
    ("[?metal3_role=='control_plane']", ["my-cluster-controlplane-0", "my-cluster-controlplane-1",
                                         "my-cluster-controlplane-2"]),
    ("[?metal3_failure_domain=='az-b' && metal3_kind=='Metal3Machine']", ["my-cluster-controlplane-1",
                                                                          "my-cluster-workers-0"]),
    ("[?object.spec.providerID=='metal3://metal3/host-2/my-cluster-workers-1']", ["my-cluster-workers-1"]),
    ("[?metal3_kind=='BareMetalHost']", ["lonely"]),
    ("[?metal3_cluster=='other']", []),
]


@pytest.mark.parametrize("query,kept", FILTERS, ids=[q for q, _k in FILTERS])
def test_filter_keeps_what_the_jmespath_expression_selects(query, kept):
    assert [r.name for r in host_records(demo(), query=query)] == kept


# (network, filter, the start of the message)
ERRORS = [
    (["nowhere"], None, "network: no host has an address on nowhere (the hosts' networks and address types: "
                        "Hostname, InternalIP, mgmt-a"),
    (None, "[?metal3_role==",
     "filter: not a JMESPath expression: '[?metal3_role==': Invalid jmespath expression at column 16"),
    (None, "[].metal3_name", "filter: must keep some of the hosts (a list of them"),
    (None, "length(@)", "filter: must keep some of the hosts"),
    (None, "abs(metal3_name)", "filter: 'abs(metal3_name)' fails on the hosts"),
]


@pytest.mark.parametrize("network,query,message", ERRORS, ids=[m[:30] for _n, _q, m in ERRORS])
def test_bad_options_are_refused_naming_the_option(network, query, message):
    with pytest.raises(Invalid) as raised:
        host_records(demo(), network, query)
    assert str(raised.value).startswith(message), str(raised.value)


def test_machines_of_a_name_in_two_namespaces_are_told_apart():
    objects = demo()
    other = copy.deepcopy(objects["Metal3Machine"][0])
    other["metadata"]["namespace"] = "tenant"
    objects["Metal3Machine"].append(other)
    names = [r.name for r in host_records(objects)]
    assert "my-cluster-controlplane-0.metal3" in names and "my-cluster-controlplane-0.tenant" in names
    assert "my-cluster-controlplane-0" not in names


def test_a_machine_in_host_claim_mode_is_one_host_on_its_claims_host():
    objects = demo()
    m3m = objects["Metal3Machine"][0]
    del m3m["metadata"]["annotations"]["metal3.io/BareMetalHost"]
    m3m["metadata"]["annotations"]["metal3.io/HostClaim"] = f"{NS}/my-cluster-controlplane-0"
    objects["HostClaim"].append({"apiVersion": BMH, "kind": "HostClaim", "metadata": meta("my-cluster-controlplane-0"),
                                 "status": {"bareMetalHost": {"name": "host-0", "namespace": "infra"},
                                            "state": "provisioned"}})
    records = by_name(host_records(objects))
    assert records["my-cluster-controlplane-0"].variables["metal3_host"] == "infra/host-0"
    assert records["my-cluster-controlplane-0"].variables["metal3_kind"] == "Metal3Machine"
    assert len(records) == 7  # the claim the machine made is not a host of its own


# (Metal3Machine changes, its state)
STATES = [
    ({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}}, "deleting"),
    ({"metadata": {"annotations": {"cluster.x-k8s.io/paused": ""}}}, "paused"),
    ({"status": {"initialization": {"provisioned": False}}}, "provisioning"),
]


@pytest.mark.parametrize("change,state", STATES, ids=[s for _c, s in STATES])
def test_a_machine_state_is_its_phase(change, state):
    objects = demo()
    m3m = objects["Metal3Machine"][0]
    for part, values in change.items():
        for key, value in values.items():
            if isinstance(value, dict) and isinstance(m3m[part].get(key), dict):
                m3m[part][key].update(value)
            else:
                m3m[part][key] = value
    record = by_name(host_records(objects))["my-cluster-controlplane-0"]
    assert record.variables["metal3_state"] == state
    assert f"state_{state}" in record.groups


@pytest.mark.parametrize("paused,state", [(True, "paused"), (False, "provisioned")], ids=["paused", "running"])
def test_a_machine_of_a_paused_cluster_is_paused(paused, state):
    objects = demo()
    objects["Cluster"] = [{"apiVersion": CAPI, "kind": "Cluster", "metadata": meta("my-cluster"),
                           "spec": {"paused": paused}}]
    records = by_name(host_records(objects))
    machines = [r for r in records.values() if r.variables["metal3_kind"] == "Metal3Machine"]
    assert len(machines) == 5  # controlplane-2's cluster is its Machine's label: it is paused with the rest
    for record in machines:
        assert record.variables["metal3_state"] == state and f"state_{state}" in record.groups
    assert records["web-0"].variables["metal3_state"] == "provisioned"  # a claim of no cluster


class FakeStore:
    """list() of a store whose cluster lacks some kinds or may not list them."""

    def __init__(self, missing: set[str], forbidden: set[str]):
        self.missing, self.forbidden, self.namespaces = missing, forbidden, []

    def list(self, api_version, kind, namespace=None, label_selector=None):
        self.namespaces.append(namespace)
        if kind in self.missing:
            raise NotFound(f"the server could not find the requested resource ({kind})")
        if kind in self.forbidden:
            raise Forbidden(f"{kind} is forbidden")
        return [{"kind": kind}]


def test_read_objects_takes_a_missing_or_forbidden_kind_as_none():
    store = FakeStore({"HostClaim"}, {"BareMetalHost", "IPAddress"})
    objects = read_objects(store, "tenant")  # type: ignore[arg-type]
    assert objects["HostClaim"] == [] and objects["BareMetalHost"] == [] and objects["IPAddress"] == []
    assert objects["Metal3Machine"] == [{"kind": "Metal3Machine"}]
    assert set(store.namespaces) == {"tenant"}


def test_read_objects_fails_when_no_kind_of_host_may_be_listed():
    with pytest.raises(Forbidden, match="Metal3Machine is forbidden"):
        read_objects(FakeStore(set(), {"Metal3Machine", "HostClaim", "BareMetalHost"}))  # type: ignore[arg-type]
