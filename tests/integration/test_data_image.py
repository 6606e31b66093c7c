"""DataImage on a real Ironic and a Redfish BMC with virtual media (sushy-tools' fake driver, which keeps the virtual
media's state only): an ISO attached as a provisioned host reboots, a failed attach read from the node's history,
the image detached at the reboot after the DataImage's deletion, and a loopback URL refused.

The host is externally provisioned (sushy-tools without a VM cannot deploy). The ISO is served on 127.0.0.1, which
the controller's outbound policy allows here by name (METAL3_ALLOWED_LOCAL_HOSTS), as an operator serving images
from its own host would; ``localhost`` stays refused. Whether the guest sees /dev/sr0 is the KVM lab's.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import (
    ALLOWED_LOCAL_HOSTS_ENV,
    OutboundPolicy,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import baremetalhost as bmh
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import dataimage
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import Ironic, IronicOptions
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.provisioner import ironic_provisioners
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.harness.http_files import ServedFiles

NS = "dataimage"
INDEX = 2  # the emulator's system node-2 (test_baremetal_host.py uses node-0 and node-1)
POLICY = OutboundPolicy.of("127.0.0.1")
EXTERNAL = "externally provisioned"


def host(store: LocalStore, emulator) -> Ref:
    name = f"{emulator.prefix}-{INDEX}"
    store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{name}-bmc", "namespace": NS},
                  "stringData": {"username": emulator.username, "password": emulator.password}})
    made = store.create({"apiVersion": bmh.API, "kind": bmh.KIND, "metadata": {"name": name, "namespace": NS},
                         "spec": {"online": True, "externallyProvisioned": True, "inspectionMode": "disabled",
                                  "bootMACAddress": emulator.mac(INDEX),
                                  "bmc": {"address": emulator.address(name, "redfish-virtualmedia+http"),
                                          "credentialsName": f"{name}-bmc"}}})
    return Ref.of(made)


def until(step: Callable[[], Any], check: Callable[[Any], bool], timeout: float = 120) -> Any:
    """Step until ``check``, whatever the steps ask for (a DataImage's failure asks for 30 s)."""
    deadline = time.monotonic() + timeout
    while True:
        last = step()
        if check(last):
            return last
        assert time.monotonic() < deadline, last
        time.sleep(0.5)


def test_a_data_image_is_attached_at_a_reboot_and_detached_at_the_reboot_after_its_deletion(
        tmp_path, ironic, redfish_emulator, monkeypatch):
    for key, value in ironic.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv(ALLOWED_LOCAL_HOSTS_ENV, "127.0.0.1")  # what a host's reconcile reads
    client = Ironic(IronicOptions(cloud=ironic.cloud))
    provisioners = ironic_provisioners(client)
    served = ServedFiles()
    served.files["/data.iso"] = b"an ISO image\n" * 64
    try:
        with LocalStore(str(tmp_path / "store.db")) as store:
            ref = host(store, redfish_emulator)
            image_ref = dataimage.ref_of(ref)
            node = f"{NS}~{ref.name}"

            def step_host() -> bmh.HostStep:
                return bmh.reconcile_host(store, provisioners, ref)

            def settled() -> bmh.HostStep:
                last, reached = bmh.wait_for_host(step_host, (EXTERNAL,), 180)
                assert reached and not last.error, f"{last.state} {last.error} {last.message}"
                return last

            def reboot() -> None:
                store.patch(ref, {"metadata": {"annotations": {bmh.REBOOT_ANNOTATION: ""}}})

            def inserted() -> list[dict[str, Any]]:
                return [m for m in client.vmedia(client.get_node(node)) if m.get("inserted")]

            def status() -> dict[str, Any]:
                return store.get(image_ref).get("status") or {}

            settled()
            assert inserted() == []

            # A DataImage of an image that is not there: Ironic answers the attach at once, and fails it after.
            dataimage.ask(store, image_ref, served.url("/missing.iso"))
            made = dataimage.reconcile_data_image(store, provisioners, image_ref, outbound=POLICY)
            assert made.message == "attached at the host's next power on (a reboot annotation, or online false " \
                                   "then true)"
            reboot()
            until(step_host, lambda _step: (status().get("error") or {}).get("count", 0) >= 1)
            assert status()["error"]["message"].startswith("Could not attach device cdrom to node ")
            assert "/missing.iso" in served.requests and status()["attachedImage"] == {"url": ""}
            assert bmh.REBOOT_ANNOTATION in store.get(ref)["metadata"]["annotations"]  # not rebooted without it

            # The URL fixed: attached, then the host reboots.
            dataimage.ask(store, image_ref, served.url("/data.iso"))
            settled()
            assert bmh.REBOOT_ANNOTATION not in (store.get(ref)["metadata"].get("annotations") or {})
            assert "/data.iso" in served.requests  # Ironic fetched it, to publish its own copy
            [cd] = inserted()
            assert cd["image"]  # Ironic's copy of the image, on its HTTP server
            assert status()["attachedImage"] == {"url": served.url("/data.iso")}
            checked = dataimage.reconcile_data_image(store, provisioners, image_ref, outbound=POLICY)
            assert (checked.message, status()["error"]) == ("attached", {"count": 0, "message": ""})
            image = store.get(image_ref)
            assert image["metadata"]["finalizers"] == [dataimage.FINALIZER]
            assert [o["name"] for o in image["metadata"]["ownerReferences"]] == [ref.name]

            # Deleted: it stays, its image in, until the host's next power on takes the image out.
            store.delete(image_ref)
            waiting = dataimage.reconcile_data_image(store, provisioners, image_ref, outbound=POLICY)
            assert waiting.requeue_after == dataimage.RETRY_DELAY and store.get_if_exists(image_ref) is not None
            assert len(inserted()) == 1
            reboot()
            settled()
            assert inserted() == []
            gone = dataimage.reconcile_data_image(store, provisioners, image_ref, outbound=POLICY)
            assert gone.obj is None and store.get_if_exists(image_ref) is None

            # A URL of the controller's own loopback (not the one allowed by name) is refused, naming spec.url, and
            # the host reboots without it.
            requests = len(served.requests)
            dataimage.ask(store, image_ref, "http://localhost:8080/data.iso")
            dataimage.reconcile_data_image(store, provisioners, image_ref, outbound=POLICY)
            assert status()["error"]["message"].startswith("spec.url: 'http://localhost:8080/data.iso' names a "
                                                           "loopback or link-local host")
            reboot()
            settled()
            assert inserted() == [] and len(served.requests) == requests
            assert status()["error"]["count"] == 1  # the same refusal, not counted again

            # The host deleted, its node leaves the session's Ironic: a later test on this worker may enroll
            # another host with node-2's MAC (Ironic refuses a MAC that a node has already).
            store.delete(ref)
            last, reached = bmh.wait_for_host(step_host, ("deleted",), 180)
            assert reached, f"{last.state} {last.error} {last.message}"
            assert client.get_node(node) is None
    finally:
        served.close()
