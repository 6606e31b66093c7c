"""The BareMetalHost lifecycle against a real Ironic (fake-hardware) and sushy-tools Redfish BMCs.

The engine is called as the module and the operator call it; the store is each backend in turn where the
test is about the host's life, the local one where it is about Ironic or the BMC.
"""
from __future__ import annotations

import hashlib
import json
import time
import uuid
from typing import Any

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import IronicUnavailable
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import baremetalhost as bmh
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import Ironic, IronicOptions
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.provisioner import ironic_provisioners
from tests.harness.http_files import LIVE_ISO, ServedFiles, live_iso
from tests.harness.ironic import RedfishEmulator, free_port

BMC_PASSWORD = "Bmc-pa55word-9c1e"
USER_DATA = "#cloud-config\nhostname: worker\n"
NETWORK_DATA = "links: [{id: eth0, type: phy, ethernet_mac_address: '52:54:00:00:00:01'}]\nnetworks: []\n"


@pytest.fixture
def client(ironic, monkeypatch) -> Ironic:
    for key, value in ironic.env.items():
        monkeypatch.setenv(key, value)
    return Ironic(IronicOptions(cloud=ironic.cloud))


def unique_mac() -> str:
    raw = uuid.uuid4().bytes[:3]
    return "52:54:00:" + ":".join(f"{b:02x}" for b in raw)


def make_host(store, namespace: str, name: str, address: str, mac: str | None = None, password: str = BMC_PASSWORD,
              **spec: Any) -> Ref:
    store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{name}-bmc", "namespace": namespace},
                  "stringData": {"username": "admin", "password": password}})
    spec = {"online": True, "bootMACAddress": mac or unique_mac(),
            "bmc": {"address": address, "credentialsName": f"{name}-bmc"}, **spec}
    store.create({"apiVersion": bmh.API, "kind": bmh.KIND, "metadata": {"name": name, "namespace": namespace},
                  "spec": spec})
    return Ref(bmh.API, bmh.KIND, name, namespace)


def step(store, client, ref) -> bmh.HostStep:
    return bmh.reconcile_host(store, ironic_provisioners(client), ref)


def wait(store, client, ref, *targets: str, timeout: float = 120) -> bmh.HostStep:
    last, reached = bmh.wait_for_host(lambda: step(store, client, ref), targets, timeout)
    assert reached, f"{ref}: {last.state} {last.error} {last.message}"
    return last


def until(store, client, ref, check, timeout: float = 120) -> bmh.HostStep:
    """Step until ``check(step)``; for states a wait target does not name (an error being recorded)."""
    deadline = time.monotonic() + timeout
    while True:
        last = step(store, client, ref)
        if check(last):
            return last
        assert time.monotonic() < deadline, f"{ref}: {last.state} {last.error} {last.message}"
        time.sleep(min(last.requeue_after or 0.5, 1))


def status(store, ref) -> dict[str, Any]:
    return store.get(ref).get("status") or {}


def healthy(store, ref) -> tuple[str, str] | None:
    """The host's Healthy condition: (status, reason)."""
    return next(((c["status"], c["reason"]) for c in status(store, ref).get("conditions") or []
                 if c["type"] == "Healthy"), None)


def test_lifecycle_register_inspect_provision_power_deprovision_delete(store, namespace, client, ironic):
    for name, key, value in (("user", "userData", USER_DATA), ("net", "networkData", NETWORK_DATA),
                             ("meta", "metaData", "role: worker\nlocal-hostname: w-0\n")):
        store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
                      "stringData": {key: value}})
    ref = make_host(store, namespace, "host-0", "fake://host-0", userData={"name": "user"},
                    networkData={"name": "net"}, metaData={"name": "meta"}, bootMode="UEFI",
                    rootDeviceHints={"deviceName": "/dev/sda", "minSizeGigabytes": 100})
    node_name = f"{namespace}~host-0"

    wait(store, client, ref, "available")
    st = status(store, ref)
    assert st["provisioning"]["ID"] == client.get_node(node_name)["id"]
    assert st["goodCredentials"]["credentials"] == {"name": "host-0-bmc", "namespace": namespace}
    assert {"register", "inspect"} <= set(st["operationHistory"])
    assert st["operationHistory"]["inspect"]["end"]
    assert "hardware" in st and st["operationalStatus"] == "OK" and st["errorCount"] == 0
    assert {c["type"]: c["status"] for c in st["conditions"]}["Manageable"] == "True"
    # fake hardware has no BMC to report a health (Ironic's node health is null): Healthy is unknown, as upstream's
    assert {c["type"]: (c["status"], c["reason"]) for c in st["conditions"]}["Healthy"] == ("Unknown", "Unknown")
    assert client.get_node(node_name)["provision_state"] == "manageable"  # upstream keeps available hosts here

    store.patch(ref, {"spec": {"image": {"url": "http://images.example/os.qcow2", "checksum": "0" * 64,
                                         "checksumType": "sha256", "format": "qcow2"}}})
    wait(store, client, ref, "provisioned")
    node = client.get_node(node_name)
    assert node["provision_state"] == "active"
    info = ironic.instance_info(node_name)
    assert info["image_source"] == "http://images.example/os.qcow2"
    assert info["image_os_hash_algo"] == "sha256" and info["image_disk_format"] == "qcow2"
    drive = info["configdrive"]
    assert drive["user_data"] == USER_DATA
    assert drive["network_data"]["links"][0]["id"] == "eth0"
    uid = store.get(ref)["metadata"]["uid"]
    assert drive["meta_data"] == {"uuid": uid, "metal3-namespace": namespace, "metal3-name": "host-0",
                                  "local-hostname": "w-0", "local_hostname": "host-0", "name": "host-0",
                                  "role": "worker"}
    assert node["properties"]["root_device"] == {"name": "s== /dev/sda", "size": ">= 100"}
    st = status(store, ref)
    assert st["provisioning"]["image"]["url"] == "http://images.example/os.qcow2"
    assert st["poweredOn"] is True

    store.patch(ref, {"spec": {"online": False}})
    wait(store, client, ref, "settled")
    assert status(store, ref)["poweredOn"] is False
    assert client.get_node(node_name)["power_state"] == "power off"

    store.patch(ref, {"spec": {"online": True}, "metadata": {"annotations": {"reboot.metal3.io": ""}}})
    wait(store, client, ref, "settled")
    assert "reboot.metal3.io" not in (store.get(ref)["metadata"].get("annotations") or {})
    assert client.get_node(node_name)["power_state"] == "power on"

    store.patch(ref, {"spec": {"image": None}})
    wait(store, client, ref, "available")
    assert client.get_node(node_name)["provision_state"] in ("available", "manageable")
    assert status(store, ref)["operationHistory"]["deprovision"]["end"]

    store.delete(ref)
    wait(store, client, ref, "deleted")
    assert client.get_node(node_name) is None


def test_deleting_a_provisioned_host_deprovisions_it_first(store, namespace, client):
    ref = make_host(store, namespace, "host-1", "fake://host-1",
                    image={"url": "http://images.example/os.img", "checksum": "abc"})
    wait(store, client, ref, "provisioned")
    store.delete(ref)
    states = []
    last, reached = bmh.wait_for_host(lambda: record(states, step(store, client, ref)), ("deleted",), 120)
    assert reached, last
    assert states.index("deprovisioning") < states.index("powering off before delete") < states.index("deleting")
    assert client.get_node(f"{namespace}~host-1") is None


def test_the_preprovisioning_network_reaches_the_node_and_follows_its_secret(store, namespace, client):
    def network(ip: str) -> dict[str, Any]:
        return {"links": [{"id": "nic0", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:02"}],
                "networks": [{"id": "provisioning", "type": "ipv4", "link": "nic0", "ip_address": ip,
                              "network_id": "provisioning",
                              "netmask": "255.255.255.0"}], "services": []}

    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pre-net", "namespace": namespace},
              "stringData": {"networkData": json.dumps(network("172.22.0.200"))}}
    store.create(secret)
    ref = make_host(store, namespace, "host-pre", "fake://host-pre", preprovisioningNetworkDataName="pre-net")
    wait(store, client, ref, "available")
    node = client.get_node(f"{namespace}~host-pre")
    assert client.network_data(node) == network("172.22.0.200")

    store.patch(Ref("v1", "Secret", "pre-net", namespace),
                {"stringData": {"networkData": json.dumps(network("172.22.0.201"))}})
    until(store, client, ref, lambda _: client.network_data(node) == network("172.22.0.201"))


def record(states: list[str], last: bmh.HostStep) -> bmh.HostStep:
    if not states or states[-1] != last.state:
        states.append(last.state)
    return last


def test_a_boot_mac_another_node_has_is_a_registration_error(store, namespace, client):
    mac = unique_mac()
    first = make_host(store, namespace, "first", "fake://first", mac=mac)
    wait(store, client, first, "available")
    second = make_host(store, namespace, "second", "fake://second", mac=mac)
    last = until(store, client, second, lambda s: bool(s.error))
    st = status(store, second)
    assert st["errorType"] == "registration error"
    assert f"MAC address {mac} conflicts with existing node {namespace}~first" in st["errorMessage"]
    assert st["operationalStatus"] == "error" and st["errorCount"] == 1
    assert last.requeue_after and last.requeue_after > 0  # tried again after a backoff
    assert client.get_node(f"{namespace}~second") is None


@pytest.fixture
def images():
    served = ServedFiles()
    yield served
    served.close()


def served_image(images: ServedFiles, path: str) -> dict[str, str]:
    images.files[path] = f"the disk image at {path}".encode()
    return {"url": images.url(path), "checksum": hashlib.sha256(images.files[path]).hexdigest(),
            "checksumType": "sha256"}


def test_a_deploy_that_keeps_failing_stops_at_the_retry_limit_until_the_image_changes(
        store, namespace, client, ironic, images):
    import openstack

    # fake://...?deploy_interface=direct: a direct deploy on fake hardware waits for an agent that never calls back;
    # Ironic's abort (API 1.110) fails it, as a deploy whose agent fails. No cleaning: it too would wait for one.
    sdk = openstack.connect(cloud=ironic.cloud).baremetal
    bad = served_image(images, "/os.img")
    ref = make_host(store, namespace, "failing", "fake://failing?deploy_interface=direct", image=bad,
                    automatedCleaningMode="disabled")
    node_name, aborted = f"{namespace}~failing", []

    def failing_step() -> bmh.HostStep:
        node = client.get_node(node_name)
        if node and node["provision_state"] == "wait call-back":
            response = sdk.put(f"/nodes/{node['id']}/states/provision", json={"target": "abort"},
                               microversion="1.110")
            assert response.status_code == 202, response.text
            aborted.append(node["instance_info"]["image_source"])
        return bmh.reconcile_host(store, ironic_provisioners(client), ref, max_provisioning_retries=2)

    last, _reached = bmh.wait_for_host(failing_step, ("settled",), 240)
    st = status(store, ref)
    assert (last.state, st["errorType"], st["provisioningFailCount"]) == ("available", "provisioning error", 2)
    assert st["errorMessage"] == ("provisioning failed 2 times, retry limit (2) reached; change image or reset "
                                  "provisioningFailCount to retry")
    assert aborted == [bad["url"]] * 2 and st["lastAttemptedImage"] == bad
    assert client.get_node(node_name)["provision_state"] == "available"  # undeployed, not tried a third time

    # Deploys would work now (no agent awaited), but the image is the same: the host stays where it stopped.
    store.patch(ref, {"spec": {"bmc": {"address": "fake://failing"}}})
    again = bmh.reconcile_host(store, ironic_provisioners(client), ref, max_provisioning_retries=2)
    assert again.requeue_after is None and status(store, ref)["provisioningFailCount"] == 2
    assert client.get_node(node_name)["provision_state"] == "available"

    good = served_image(images, "/fixed.img")
    store.patch(ref, {"spec": {"image": good}})
    wait(store, client, ref, "provisioned")
    st = status(store, ref)
    assert (st["provisioningFailCount"], st.get("errorType", ""), st["lastAttemptedImage"]) == (0, "", good)
    node = client.get_node(node_name)
    assert (node["provision_state"], node["instance_info"]["image_source"]) == ("active", good["url"])


def test_paused_hosts_are_left_alone(store, namespace, client):
    ref = make_host(store, namespace, "paused", "fake://paused")
    store.patch(ref, {"metadata": {"annotations": {bmh.PAUSED_ANNOTATION: ""}}})
    last = step(store, client, ref)
    assert last.message == "paused" and not last.changed
    assert client.get_node(f"{namespace}~paused") is None and "status" not in store.get(ref)


def test_detach_removes_the_node_and_reattach_adopts_it(store, namespace, client):
    ref = make_host(store, namespace, "detach", "fake://detach", image={"url": "http://images.example/os.img"})
    wait(store, client, ref, "provisioned")
    store.patch(ref, {"metadata": {"annotations": {bmh.DETACHED_ANNOTATION: ""}}})
    step(store, client, ref)
    assert client.get_node(f"{namespace}~detach") is None
    st = status(store, ref)
    assert st["operationalStatus"] == "detached" and st["provisioning"]["state"] == "provisioned"

    store.patch(ref, {"metadata": {"annotations": {bmh.DETACHED_ANNOTATION: None}}})
    until(store, client, ref, lambda s: s.requeue_after is None)
    node = client.get_node(f"{namespace}~detach")
    assert node["provision_state"] == "active"  # adopted, not deployed again
    st = status(store, ref)
    assert st["provisioning"]["state"] == "provisioned" and st["operationalStatus"] == "OK"


def test_a_host_waiting_for_its_agent_detaches_when_forced_and_goes_without_power_off(store, namespace, client,
                                                                                      images):
    # fake://...?deploy_interface=direct: the deploy waits for an agent that never calls back (wait call-back).
    ref = make_host(store, namespace, "stuck", "fake://stuck?deploy_interface=direct",
                    image=served_image(images, "/stuck.img"), automatedCleaningMode="disabled")
    node_name = f"{namespace}~stuck"
    until(store, client, ref, lambda s: (client.get_node(node_name) or {}).get("provision_state") == "wait call-back")

    # Detached while provisioning: the deploy under way goes on, the node stays.
    store.patch(ref, {"metadata": {"annotations": {bmh.DETACHED_ANNOTATION: ""}}})
    assert step(store, client, ref).state == "provisioning"
    assert client.get_node(node_name)["provision_state"] == "wait call-back"

    # Forced: Ironic aborts the wait, then the node goes; the host keeps its state, detached.
    forced = '{"force": true, "deleteAction": "delay"}'
    store.patch(ref, {"metadata": {"annotations": {bmh.DETACHED_ANNOTATION: forced}}})
    until(store, client, ref, lambda s: status(store, ref).get("operationalStatus") == "detached")
    assert client.get_node(node_name) is None and status(store, ref)["provisioning"]["state"] == "provisioning"

    # Deleted: delayed, as the annotation asks; then with deleteAction delete, gone without power off.
    store.delete(ref)
    assert step(store, client, ref).message == "deletion delayed: the host is detached"
    assert store.get(ref)["metadata"]["finalizers"] == [bmh.FINALIZER]
    store.patch(ref, {"metadata": {"annotations": {bmh.DETACHED_ANNOTATION: '{"deleteAction": "delete"}'}}})
    until(store, client, ref, lambda s: s.obj is None)
    assert store.get_if_exists(ref) is None


def test_externally_provisioned_hosts_are_adopted(store, namespace, client):
    ref = make_host(store, namespace, "external", "fake://external", externallyProvisioned=True)
    wait(store, client, ref, "externally provisioned")
    until(store, client, ref, lambda s: s.requeue_after is None)
    assert client.get_node(f"{namespace}~external")["provision_state"] == "active"


def test_ironic_down_fails_clearly_and_writes_nothing(store, namespace):
    ref = make_host(store, namespace, "nowhere", "fake://nowhere")
    before = store.get(ref)
    down = Ironic(IronicOptions(endpoint=f"http://127.0.0.1:{free_port()}", timeout=5))
    with pytest.raises(IronicUnavailable, match="did not answer"):
        bmh.reconcile_host(store, ironic_provisioners(down), ref)
    assert store.get(ref) == before


# -- Redfish: sushy-tools ------------------------------------------------------------------------------------

@pytest.fixture
def local_store(tmp_path):
    from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

    with LocalStore(str(tmp_path / "store.db")) as opened:
        yield opened


@pytest.fixture
def live_isos(tmp_path):
    """The URL of a directory served on loopback that holds a small live ISO."""
    with live_iso(tmp_path) as served:
        yield served.url


def test_redfish_power_and_boot_device_through_a_live_iso_deploy(local_store, client, redfish_emulator, live_isos):
    """A live ISO on redfish virtual media: a bad URL fails the deploy, the fixed one boots it from CD."""
    name = redfish_emulator.prefix + "-0"
    ref = make_host(local_store, "redfish", "rf-0", redfish_emulator.address(name, "redfish-virtualmedia+http"),
                    mac=redfish_emulator.mac(0), password=redfish_emulator.password, inspectionMode="disabled",
                    automatedCleaningMode="disabled", online=False)
    wait(local_store, client, ref, "available", timeout=180)
    assert redfish_emulator.system(name)["PowerState"] == "Off"

    local_store.patch(ref, {"spec": {"online": True}})
    wait(local_store, client, ref, "settled", timeout=120)
    assert redfish_emulator.system(name)["PowerState"] == "On"
    local_store.patch(ref, {"spec": {"online": False}})
    wait(local_store, client, ref, "settled", timeout=120)
    assert redfish_emulator.system(name)["PowerState"] == "Off"

    missing = {"url": f"{live_isos}/missing.iso", "format": "live-iso"}
    local_store.patch(ref, {"spec": {"online": True, "image": missing}})
    failed = until(local_store, client, ref, lambda s: bool(s.error), timeout=240)
    st = status(local_store, ref)
    assert st["errorType"] == "provisioning error" and st["errorMessage"]  # Ironic's last_error
    # counted; the host undeploys and tries again, up to the retry limit (test_a_deploy_that_keeps_failing_...)
    assert (failed.state, st["provisioningFailCount"]) == ("deprovisioning", 1) and failed.requeue_after

    local_store.patch(ref, {"spec": {"image": {"url": f"{live_isos}/{LIVE_ISO}", "format": "live-iso"}}})
    wait(local_store, client, ref, "provisioned", timeout=240)
    system = redfish_emulator.system(name)
    assert system["PowerState"] == "On"
    assert system["Boot"]["BootSourceOverrideTarget"] == "Cd"
    assert "errorType" not in status(local_store, ref)
    # The BMC's health rollup, which Ironic reads as it syncs power states (every minute): sushy-tools says OK.
    until(local_store, client, ref, lambda _step: healthy(local_store, ref) == ("True", "Healthy"), timeout=150)

    local_store.delete(ref)
    wait(local_store, client, ref, "deleted", timeout=240)


def test_redfish_inspection_failure_shows_ironics_last_error(local_store, client, redfish_emulator):
    name = redfish_emulator.prefix + "-1"
    # Out-of-band (fast) inspection: by default the agent inspects, which needs a machine that boots.
    ref = make_host(local_store, "redfish", "rf-1", redfish_emulator.address(name), mac=redfish_emulator.mac(1),
                    password=redfish_emulator.password, inspectionMode="fast")
    until(local_store, client, ref, lambda s: bool(s.error), timeout=240)
    st = status(local_store, ref)
    # sushy-tools' fake systems have no Processors resource, which Ironic's redfish inspection reads.
    assert st["errorType"] == "inspection error"
    assert "Processors" in st["errorMessage"]
    local_store.delete(ref)
    wait(local_store, client, ref, "deleted", timeout=120)


def test_a_bmc_that_does_not_answer_is_a_registration_error_until_it_does(local_store, client, tmp_path):
    emulator = RedfishEmulator(tmp_path / "late-bmc", free_port(), systems=1, prefix="late", password="L4te-BMC-pw")
    ref = make_host(local_store, "redfish", "late", emulator.address("late-0"), password=emulator.password,
                    inspectionMode="disabled")
    until(local_store, client, ref, lambda s: bool(s.error), timeout=240)
    st = status(local_store, ref)
    assert st["errorType"] == "registration error" and st["errorMessage"]
    assert "goodCredentials" not in st

    emulator.start()  # the BMC answers now; nothing else changes
    try:
        wait(local_store, client, ref, "available", timeout=240)
        st = status(local_store, ref)
        assert "errorType" not in st and st["errorCount"] == 0 and st["goodCredentials"]
        local_store.delete(ref)
        wait(local_store, client, ref, "deleted", timeout=120)
    finally:
        emulator.stop()
