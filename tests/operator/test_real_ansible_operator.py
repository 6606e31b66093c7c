"""The collection's roles under the real Ansible Operator (``ansible-operator run``, built from its Go module by
hack/ansible-operator.sh) and under the collection's operator: the same scenarios, with the shipped
operator/watches.yaml, on the harness's kube-apiserver (and its Ironic and Redfish emulator).

- watches.yaml: the real one's verdict on every case of tests/operator/test_watches.py, and on the shipped file;
- IPAM: a claim made before its pool gets its address once the pool exists (the role asks to be requeued);
  a pool being deleted stays while an address points at it (its finalizer stays while the role waits);
  a claim deleted releases its address, and the pool then goes;
- BareMetalHost: registered, it becomes available on Ironic through the Redfish emulator; deleted, its node
  goes from Ironic and the host from the cluster;
- its BIOS settings (HostFirmwareSettings) behind a Redfish BMC with a BIOS: read with their FirmwareSchema; a
  value the schema does not allow refused, naming the setting; a valid change applied by the host and read back
  through Redfish (under the Ansible Operator; under the collection's too with METAL3_COMPARE_OPERATORS=1).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from kubernetes import client

from tests.harness.cluster import KubeCluster
from tests.harness.operator_process import WATCHES, AnsibleOperator, Operator, ansible_operator_accepts
from tests.operator.conftest import condition, eventually
from tests.operator.test_operator_ipam import IPAM, create_claims, create_pool, items
from tests.operator.test_operator_provisioning import BMH, host_state
from tests.operator.test_watches import ACCEPTED, ENV, REFUSED, lay_out

pytestmark = pytest.mark.kubernetes

OPERATORS = {"ansible-operator": AnsibleOperator, "metal3_operator": Operator}
# Where a scenario's collection's-operator side costs minutes and the collection's operator runs that role in make
# test elsewhere, it is the comparison's only (METAL3_COMPARE_OPERATORS=1, benchmarks/operator/under_cluster_api.py).
COMPARED = list(OPERATORS) if os.environ.get("METAL3_COMPARE_OPERATORS") else ["ansible-operator"]
# One Redfish system each, so that both can run on one emulator (and on redfish_hardware's, beside
# tests/integration/test_host_firmware_settings.py's two).
SYSTEM = {"ansible-operator": 2, "metal3_operator": 3}
HFS = ("metal3.io", "v1alpha1", "hostfirmwaresettings")
VERDICTS = [(what, text, True) for what, text in ACCEPTED] + [(what, text, False) for what, text, _why in REFUSED]


@pytest.fixture(params=list(OPERATORS))
def operator(request: pytest.FixtureRequest, kube_cluster: KubeCluster, kube_namespace: str,
             tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Start the test's operator, the real Ansible Operator or the collection's, with ``operator(env=...)``."""
    started: list[Any] = []

    def start(env: dict[str, str] | None = None) -> Any:
        process = OPERATORS[request.param](kube_cluster, tmp_path / "operator", kube_namespace, env=env)
        started.append(process)
        return process.start()

    yield start
    for process in started:
        process.stop()
        print(f"--- {process.log.name}\n{process.tail(80)}")


# -- watches.yaml ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, accepted", [(text, accepted) for _what, text, accepted in VERDICTS],
                         ids=[what for what, _text, _accepted in VERDICTS])
def test_the_ansible_operator_gives_each_watches_file_the_verdict_of_the_table(tmp_path, text, accepted):
    watches = lay_out(tmp_path)
    watches.write_text(text)
    verdict, error = ansible_operator_accepts(watches, ENV)
    assert verdict is accepted, error or "it started"


def test_the_ansible_operator_starts_with_the_shipped_watches(tmp_path):
    shipped = lay_out(tmp_path)
    shipped.write_text(WATCHES.read_text())
    verdict, error = ansible_operator_accepts(shipped)
    assert verdict, error


# -- IPAM -----------------------------------------------------------------------------------------------------

def claim(custom: client.CustomObjectsApi, ns: str, name: str = "claim-0") -> dict[str, Any]:
    return custom.get_namespaced_custom_object(*IPAM, ns, "ipclaims", name)


def test_a_claim_made_before_its_pool_gets_an_address_once_the_pool_exists(operator, custom, kube_namespace):
    operator()
    create_claims(custom, kube_namespace, 1)
    waiting = eventually(lambda: condition(claim(custom, kube_namespace), "Ready"), "the claim waiting for its pool")
    assert waiting["status"] == "False" and "not found" in waiting["message"]
    create_pool(custom, kube_namespace)
    eventually(lambda: condition(claim(custom, kube_namespace), "Ready").get("status") == "True",
               "the claim Ready once its pool exists")
    address, = items(custom, kube_namespace, "ipaddresses")
    assert claim(custom, kube_namespace)["status"]["address"]["name"] == address["metadata"]["name"]
    assert address["spec"]["claim"]["name"] == "claim-0" and address["spec"]["address"] == "192.168.10.10"


def test_a_pool_being_deleted_stays_while_an_address_points_at_it_and_goes_after_its_claim(
        operator, custom, kube_namespace):
    process = operator()
    create_pool(custom, kube_namespace)
    create_claims(custom, kube_namespace, 1)
    eventually(lambda: condition(claim(custom, kube_namespace), "Ready").get("status") == "True", "the claim Ready")
    before = pool_reconciles(process)
    custom.delete_namespaced_custom_object(*IPAM, kube_namespace, "ippools", "pool")
    # The deletion's run, then the one it asked for: the role waits, and the finalizer stays through both.
    eventually(lambda: pool_reconciles(process) >= before + 2, "the pool's deletion reconciled twice", timeout=60)
    pool = custom.get_namespaced_custom_object(*IPAM, kube_namespace, "ippools", "pool")
    assert pool["metadata"]["deletionTimestamp"] and pool["metadata"]["finalizers"] == ["ippool.ipam.metal3.io"]
    assert [a["spec"]["claim"]["name"] for a in items(custom, kube_namespace, "ipaddresses")] == ["claim-0"]

    custom.delete_namespaced_custom_object(*IPAM, kube_namespace, "ipclaims", "claim-0")
    eventually(lambda: not any(items(custom, kube_namespace, plural) for plural in ("ipclaims", "ipaddresses",
                                                                                    "ippools")),
               "the claim released its address, then the pool went", timeout=180)


def pool_reconciles(process: Any) -> float:
    """Reconciles of IPPools so far, whatever the operator calls its controller (ippool.ipam.metal3.io here,
    ippool-v1alpha1-controller in the Ansible Operator)."""
    return sum(v for k, v in process.metrics().items()
               if k.startswith('controller_runtime_reconcile_total{controller="ippool'))


# -- BareMetalHost --------------------------------------------------------------------------------------------

def available_host(request: pytest.FixtureRequest, custom: client.CustomObjectsApi, kube_cluster: KubeCluster,
                   ns: str, emulator: Any) -> str:
    """host-0 on the operator's own system of ``emulator``, registered and available; that system's name."""
    index = SYSTEM[request.node.callspec.params["operator"]]
    system = f"{emulator.prefix}-{index}"
    client.CoreV1Api(kube_cluster.api_client()).create_namespaced_secret(ns, {
        "metadata": {"name": "host-0-bmc"}, "stringData": {"username": emulator.username,
                                                           "password": emulator.password}})
    custom.create_namespaced_custom_object(*BMH[:2], ns, BMH[2], {
        "apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost", "metadata": {"name": "host-0"},
        "spec": {"online": False, "bootMACAddress": emulator.mac(index),
                 "bmc": {"address": emulator.address(system), "credentialsName": "host-0-bmc"},
                 "inspectionMode": "disabled", "automatedCleaningMode": "disabled"}})
    # make test runs the lab and the Cluster API scenarios beside it (a load of 20 on two cores): 240 s ran out once
    # there (stop 47), on a host that is available in 90 s alone. The status says where it stood.
    try:
        eventually(lambda: host_state(custom, ns, "host-0") == "available", "host-0 available", timeout=600)
    except AssertionError as failure:
        status = custom.get_namespaced_custom_object(*BMH[:2], ns, BMH[2], "host-0").get("status")
        raise AssertionError(f"{failure}; its status: {status}") from None
    return system


def test_a_host_registers_and_becomes_available_and_deleted_leaves_ironic(operator, request, custom, kube_cluster,
                                                                          kube_namespace, ironic, ironic_client,
                                                                          redfish_emulator):
    operator(env=ironic.env)
    system = available_host(request, custom, kube_cluster, kube_namespace, redfish_emulator)
    # Ironic keeps an available host's node manageable until it provisions, as under baremetal-operator.
    assert ironic_client.get_node(f"{kube_namespace}~host-0")["provision_state"] == "manageable"
    assert redfish_emulator.system(system)["PowerState"] == "Off"
    host = custom.get_namespaced_custom_object(*BMH[:2], kube_namespace, BMH[2], "host-0")
    assert host["metadata"]["finalizers"] == ["baremetalhost.metal3.io"]
    assert host["status"]["operationalStatus"] == "OK"

    custom.delete_namespaced_custom_object(*BMH[:2], kube_namespace, BMH[2], "host-0")
    eventually(lambda: host_state(custom, kube_namespace, "host-0") == "gone", "host-0 deleted", timeout=240)
    assert ironic_client.get_node(f"{kube_namespace}~host-0") is None


# Under the collection's operator the firmware role runs in molecule, and its engine on the same hardware in
# tests/integration/test_host_firmware_settings.py: here, the comparison's (COMPARED).
@pytest.mark.parametrize("operator", COMPARED, indirect=True)
def test_a_hosts_bios_settings_are_read_checked_and_applied(operator, request, custom, kube_cluster, kube_namespace,
                                                            ironic, redfish_hardware):
    operator(env=ironic.env)
    system = available_host(request, custom, kube_cluster, kube_namespace, redfish_hardware)

    def settings() -> dict[str, Any]:
        return custom.get_namespaced_custom_object(*HFS[:2], kube_namespace, HFS[2], "host-0")

    def judged(valid: str) -> dict[str, Any]:
        current = settings()
        generation = current["metadata"]["generation"]
        found = condition(current, "Valid")
        return found if found.get("status") == valid and found.get("observedGeneration") == generation else {}

    read = eventually(lambda: (settings().get("status") or {}).get("settings"), "the host's settings read")
    assert read["ProcTurboMode"] == "Enabled" and "SysPassword" not in read
    schema = custom.get_namespaced_custom_object("metal3.io", "v1alpha1", kube_namespace, "firmwareschemas",
                                                 settings()["status"]["schema"]["name"])
    assert schema["spec"]["schema"]["ProcTurboMode"]["allowable_values"] == ["Enabled", "Disabled"]

    custom.patch_namespaced_custom_object(*HFS[:2], kube_namespace, HFS[2], "host-0", {"spec": {"settings": {
        "ProcTurboMode": "Sometimes"}}})
    refused = eventually(lambda: judged("False"), "the value refused")
    assert "Setting ProcTurboMode is invalid, unknown enumeration value - Sometimes" in refused["message"]

    custom.patch_namespaced_custom_object(*HFS[:2], kube_namespace, HFS[2], "host-0", {"spec": {"settings": {
        "ProcTurboMode": "Disabled"}}})
    eventually(lambda: redfish_hardware.system(system, "BIOS")["Attributes"]["ProcTurboMode"] == "Disabled",
               "the change applied through Redfish", timeout=240)
    eventually(lambda: condition(settings(), "ChangeDetected").get("status") == "False" and
               settings()["status"]["settings"]["ProcTurboMode"] == "Disabled", "the change read back", timeout=240)
    eventually(lambda: host_state(custom, kube_namespace, "host-0") == "available", "host-0 available again")
    host = custom.get_namespaced_custom_object(*BMH[:2], kube_namespace, BMH[2], "host-0")
    assert not host["status"].get("errorType"), host["status"]
