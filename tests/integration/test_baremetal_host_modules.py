"""baremetal_host, the hosts playbook and check mode through ansible-playbook, against the real Ironic."""
from __future__ import annotations

import base64
import json
import re
import textwrap

from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.harness.ironic import REPO, free_port
from tests.integration.playbook_runs import ansible_playbook

PASSWORD = "Hidden-BMC-pw-4d2f91"


def test_bad_input_and_ironic_down_fail_clearly_and_write_nothing(store_options, namespace, ironic):
    run = ansible_playbook("baremetal_host_bad_input.yml", {
        "store": store_options, "ns": namespace, "ironic": {"ironic_cloud": ironic.cloud},
        "down": {"ironic_url": f"http://127.0.0.1:{free_port()}", "ironic_timeout": 5}}, env=ironic.env)
    assert run.ok, run.output
    assert "Traceback" not in run.output


def test_hosts_playbook_enrolls_a_directory_and_never_shows_the_bmc_password(tmp_path, ironic):
    hosts = tmp_path / "hosts"
    hosts.mkdir()
    for index, image in ((0, "http://images.example/os.qcow2"), (1, None)):
        image_spec = f"\n  image: {{url: {image}, checksum: abc}}" if image else ""
        (hosts / f"node-{index}.yaml").write_text(textwrap.dedent(f"""\
            apiVersion: v1
            kind: Secret
            metadata: {{name: node-{index}-bmc}}
            stringData: {{username: admin, password: {PASSWORD}}}
            ---
            apiVersion: metal3.io/v1alpha1
            kind: BareMetalHost
            metadata: {{name: node-{index}}}
            spec:
              online: true
              bootMACAddress: 52:54:00:e7:00:0{index}
              bmc: {{address: "fake://node-{index}", credentialsName: node-{index}-bmc}}""") + image_spec + "\n")
    log = tmp_path / "ansible.log"
    store_path = tmp_path / "store.db"
    env = {**ironic.env, "ANSIBLE_LOG_PATH": str(log), "METAL3_STORE_PATH": str(store_path)}
    run = ansible_playbook(REPO / "playbooks" / "hosts.yml", {"hosts_dir": str(hosts), "hosts_namespace": "lab"},
                           "-vvv", env=env)
    assert run.ok, run.output
    assert re.search(r"^node-0 +provisioned ", run.output, re.M), run.output
    assert re.search(r"^node-1 +available ", run.output, re.M), run.output

    again = ansible_playbook(REPO / "playbooks" / "hosts.yml", {"hosts_dir": str(hosts), "hosts_namespace": "lab"},
                             env=env)
    assert again.ok, again.output
    assert "changed=0" in again.output  # a second run changes nothing

    with LocalStore(str(store_path)) as store:
        stored = json.dumps(store.list("metal3.io/v1alpha1", "BareMetalHost", "lab"))
    encoded = base64.b64encode(PASSWORD.encode()).decode()
    for where, text in (("output", run.output + again.output), ("log", log.read_text()), ("status", stored)):
        assert PASSWORD not in text, where
        assert encoded not in text, where
    assert PASSWORD not in (ironic.base_dir / "log" / "ironic.log").read_text()

    cleanup = ansible_playbook(REPO / "tests" / "integration" / "playbooks" / "hosts_delete.yml",
                               {"ns": "lab", "names": ["node-0", "node-1"]}, env=env)
    assert cleanup.ok, cleanup.output


def test_check_mode_reads_ironic_and_changes_nothing(tmp_path, ironic):
    store_path = tmp_path / "store.db"
    with LocalStore(str(store_path)) as store:
        store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c-bmc", "namespace": "lab"},
                      "stringData": {"username": "admin", "password": PASSWORD}})
        store.create({"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
                      "metadata": {"name": "check", "namespace": "lab"},
                      "spec": {"online": True, "bmc": {"address": "fake://check", "credentialsName": "c-bmc"}}})
        before = store.list("metal3.io/v1alpha1", "BareMetalHost", "lab")
    run = ansible_playbook(REPO / "tests" / "integration" / "playbooks" / "hosts_step.yml",
                           {"ns": "lab", "name": "check"}, "--check",
                           env={**ironic.env, "METAL3_STORE_PATH": str(store_path)})
    assert run.ok, run.output
    assert "changed: [localhost]" in run.output
    with LocalStore(str(store_path)) as store:
        assert store.list("metal3.io/v1alpha1", "BareMetalHost", "lab") == before
    from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import Ironic, IronicOptions

    assert Ironic(IronicOptions(endpoint=ironic.url, **ironic.credentials())).get_node("lab~check") is None
