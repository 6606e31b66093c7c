"""PreprovisioningImage on a real Ironic: a host (Ironic's fake hardware) asks for its deploy ramdisk, the role of the
image serves the agent kernel and initramfs over HTTP (the Ironic fixture's own server), and the host's node boots
them: Ironic's driver_info names them, as GET /v1/nodes/{node} reads it back.

The image's URLs name 127.0.0.1 (where the fixture serves them): the outbound policy refuses them until the
operator's allowed_local_hosts names that host, and the host records the image's error meanwhile. The host booting
the agent from them is the KVM lab's; fake hardware boots nothing.
"""
from __future__ import annotations

import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import baremetalhost as bmh
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import preprovisioning_image as ppi
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import Ironic, IronicOptions
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.provisioner import ironic_provisioners
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.integration.playbook_runs import ansible_playbook
from tests.integration.test_baremetal_host import make_host, unique_mac

NS = "ppi"
PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Serve the host's image
      ansible.builtin.include_role:
        name: metal3.baremetal.preprovisioning_image
    - name: Show it
      ansible.builtin.debug:
        var: preprovisioning_image_images
"""


def serve_agent(ironic) -> dict[str, str]:
    """The agent's kernel and initramfs in the Ironic fixture's HTTP root (stand-ins: nothing boots them), and the
    Ironic options that name them."""
    root = Path(ironic.base_dir) / "httpboot" / "ppi"
    root.mkdir(parents=True, exist_ok=True)
    (root / "ipa.kernel").write_bytes(b"kernel")
    (root / "ipa.initramfs").write_bytes(b"initramfs")
    base = f"http://127.0.0.1:{ironic.http_port}/ppi"
    return {"deploy_kernel_url": f"{base}/ipa.kernel", "deploy_ramdisk_url": f"{base}/ipa.initramfs"}


def image_role(tmp_path: Path, ironic, store_path: Path, ironic_options: dict[str, Any]) -> str:
    """The role run as the operator runs it for the image (its name and namespace given), from a bastion."""
    playbook = tmp_path / "image.yml"
    playbook.write_text(PLAY)
    run = ansible_playbook(playbook, {"preprovisioning_image_name": "ppi-0", "preprovisioning_image_namespace": NS,
                                      "metal3_ironic": ironic_options},
                           env={**ironic.env, "METAL3_STORE_PATH": str(store_path)}, timeout=300)
    assert run.ok and "Traceback" not in run.output, run.output
    return run.output


def until(step: Callable[[], bmh.HostStep], check: Callable[[bmh.HostStep], bool],
          timeout: float = 60) -> bmh.HostStep:
    deadline = time.monotonic() + timeout
    while True:
        last = step()
        if check(last):
            return last
        assert time.monotonic() < deadline, f"{last.state} {last.error} {last.message}"
        time.sleep(0.5)


def conditions(image: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c.get("message", "")) for c in image["status"]["conditions"]}


def test_a_host_boots_the_agent_its_preprovisioning_image_serves(tmp_path, ironic, monkeypatch):
    for key, value in ironic.env.items():
        monkeypatch.setenv(key, value)
    client = Ironic(IronicOptions(cloud=ironic.cloud, build_preprov_image=True))
    provisioners = ironic_provisioners(client)
    options = serve_agent(ironic)
    for url in options.values():  # served over HTTP
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert answer.status == 200
    store_path = tmp_path / "store.db"
    with LocalStore(str(store_path)) as store:
        ref = make_host(store, NS, "ppi-0", "fake://ppi-0", mac=unique_mac(), architecture="x86_64")
        store.patch(ref, {"metadata": {"labels": {"rack": "r1"}}})

        def step() -> bmh.HostStep:
            return bmh.reconcile_host(store, provisioners, ref)

        # Registered, then inspecting: the host asks for its image and waits for it.
        last = until(step, lambda last: last.state == bmh.INSPECTING and "waiting for" in last.message)
        assert last.requeue_after == ppi.HOST_RETRY
        image_ref = Ref(ppi.API, ppi.KIND, ref.name, NS)
        image = store.get(image_ref)
        assert image["spec"] == {"architecture": "x86_64", "acceptFormats": ["initrd"]}
        assert image["metadata"]["labels"] == {"rack": "r1"}
        assert image["metadata"]["ownerReferences"][0]["name"] == ref.name

        # Served from 127.0.0.1: refused by the outbound policy, naming the option; the host records it.
        output = image_role(tmp_path, ironic, store_path, options)
        image = store.get(image_ref)
        assert conditions(image)["Error"][:2] == ("True", "ConfigurationError")
        assert "deploy_ramdisk_url: 'http://127.0.0.1:" in conditions(image)["Error"][2], output
        assert "imageUrl" not in image["status"]
        failed = step()
        assert failed.state == bmh.INSPECTING and failed.error.startswith(bmh.REGISTRATION_ERROR), failed.message
        assert "names a loopback" in failed.error

        # Allowed by the operator: Ready, with the agent's URLs, and the host goes on with them.
        image_role(tmp_path, ironic, store_path, {**options, "allowed_local_hosts": ["127.0.0.1"]})
        image = store.get(image_ref)
        assert conditions(image)["Ready"][:2] == ("True", "ImageSuccess")
        assert conditions(image)["Error"][0] == "False"
        assert (image["status"]["format"], image["status"]["imageUrl"], image["status"]["kernelUrl"]) == \
            ("initrd", options["deploy_ramdisk_url"], options["deploy_kernel_url"])
        assert {ppi.FINALIZER, ppi.HOST_FINALIZER} <= set(image["metadata"]["finalizers"])
        last, reached = bmh.wait_for_host(step, ("available",), 120)
        assert reached, f"{last.state} {last.error} {last.message}"

    # The node boots them: Ironic's driver_info, read back.
    node = client.get_node(f"{NS}~ppi-0")
    assert node is not None
    info = node["driver_info"]
    assert (info.get("deploy_kernel"), info.get("deploy_ramdisk")) == \
        (options["deploy_kernel_url"], options["deploy_ramdisk_url"])
    assert "deploy_iso" not in info and "kernel_append_params" not in info


BASTION_PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Get the host available, its agent image served meanwhile
      metal3.baremetal.baremetal_host:
        name: ppi-1
        namespace: ppi
        wait_for: available
        wait_timeout: 240
        build_preprov_image: true
        deploy_kernel_url: "{{ kernel }}"
        deploy_ramdisk_url: "{{ ramdisk }}"
        allowed_local_hosts: [127.0.0.1]
"""


def test_on_a_bastion_a_host_waited_for_has_its_image_served_by_the_wait(tmp_path, ironic, monkeypatch):
    """No operator serves images on a bastion: baremetal_host's wait reconciles the image its host waits for, and
    the host goes on at once (not after its 300 s look again)."""
    for key, value in ironic.env.items():
        monkeypatch.setenv(key, value)
    options = serve_agent(ironic)
    store_path = tmp_path / "store.db"
    with LocalStore(str(store_path)) as store:
        ref = make_host(store, NS, "ppi-1", "fake://ppi-1", mac=unique_mac(), architecture="x86_64")
    playbook = tmp_path / "bastion.yml"
    playbook.write_text(BASTION_PLAY)
    run = ansible_playbook(playbook, {"kernel": options["deploy_kernel_url"], "ramdisk": options["deploy_ramdisk_url"]},
                           env={**ironic.env, "METAL3_STORE_PATH": str(store_path)}, timeout=300)
    assert run.ok and "Traceback" not in run.output, run.output
    with LocalStore(str(store_path)) as store:
        image = store.get(Ref(ppi.API, ppi.KIND, ref.name, NS))
        host = store.get(ref)
    assert host["status"]["provisioning"]["state"] == "available"
    assert conditions(image)["Ready"][:2] == ("True", "ImageSuccess")
    node = Ironic(IronicOptions(cloud=ironic.cloud)).get_node(f"{NS}~ppi-1")
    assert node is not None
    assert (node["driver_info"].get("deploy_kernel"), node["driver_info"].get("deploy_ramdisk")) == \
        (options["deploy_kernel_url"], options["deploy_ramdisk_url"])
