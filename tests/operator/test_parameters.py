"""The extra vars a reconcile hands to its role, as the Ansible Operator builds them."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from metal3_operator.parameters import extra_vars, to_snake
from metal3_operator.watches import Finalizer, Watch

CR = {"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
      "metadata": {"name": "host-0", "namespace": "metal3"},
      "spec": {"bootMACAddress": "52:54:00:00:00:01", "rootDeviceHints": {"minSizeGigabytes": 100},
               "bmc": {"address": "redfish://{{ lookup('env', 'HOME') }}", "disableCertificateVerification": True}}}


@pytest.mark.parametrize("name, snake", [
    ("online", "online"), ("bootMACAddress", "boot_mac_address"), ("rootDeviceHints", "root_device_hints"),
    ("HTTPProxy", "http_proxy"), ("minSizeGigabytes", "min_size_gigabytes"), ("ipv4Address", "ipv4_address"),
    ("already_snake", "already_snake"), ("dash-name", "dash_name"),
])
def test_camel_case_becomes_snake_case(name, snake):
    assert to_snake(name) == snake


def test_the_spec_lands_snake_cased_on_top_with_meta_the_cr_and_its_raw_spec():
    watch = Watch("metal3.io", "v1alpha1", "BareMetalHost", role="r", vars={"baremetal_host_concurrency": 1})
    variables = extra_vars(watch, CR)
    assert variables["boot_mac_address"] == "52:54:00:00:00:01"
    assert variables["root_device_hints"] == {"min_size_gigabytes": 100}
    assert variables["ansible_operator_meta"] == {"name": "host-0", "namespace": "metal3"}
    assert variables["_metal3_io_baremetalhost"] is CR
    assert variables["_metal3_io_baremetalhost_spec"] == CR["spec"]
    assert variables["baremetal_host_concurrency"] == 1


def test_watch_vars_override_the_spec_and_finalizer_vars_come_last():
    watch = Watch("metal3.io", "v1alpha1", "BareMetalHost", role="r", vars={"online": False, "state": "present"},
                  finalizer=Finalizer("f", vars={"state": "absent"}))
    cr = {**CR, "spec": {"online": True}}
    assert extra_vars(watch, cr)["online"] is False
    assert extra_vars(watch, cr)["state"] == "present"
    assert extra_vars(watch, cr, finalizer=True)["state"] == "absent"


def test_without_snake_case_or_spec():
    watch = Watch("ipam.metal3.io", "v1alpha1", "IPClaim", role="r", snake_case_parameters=False)
    assert "bootMACAddress" in extra_vars(watch, CR)
    assert extra_vars(watch, {**CR, "spec": None})["_ipam_metal3_io_ipclaim_spec"] == {}


def test_mark_unsafe_wraps_every_string_of_the_spec():
    watch = Watch("metal3.io", "v1alpha1", "BareMetalHost", role="r", mark_unsafe=True)
    variables = extra_vars(watch, CR)
    assert variables["bmc"]["address"] == {"__ansible_unsafe": "redfish://{{ lookup('env', 'HOME') }}"}
    assert variables["bmc"]["disable_certificate_verification"] is True
    for copy in (variables["_metal3_io_baremetalhost"]["spec"], variables["_metal3_io_baremetalhost_spec"]):
        assert copy["bmc"]["address"] == {"__ansible_unsafe": "redfish://{{ lookup('env', 'HOME') }}"}


# How ansible-playbook loads the runner's extra vars file (-e @env/extravars), in a Python of its own as it does.
LOAD_META = """
import json, sys
from ansible.parsing.dataloader import DataLoader
from ansible.template import is_trusted_as_template
meta = DataLoader().load_from_file(sys.argv[1], trusted_as_template=True)["ansible_operator_meta"]
print(json.dumps({"meta": meta, "trusted": {key: is_trusted_as_template(value) for key, value in meta.items()}}))
"""


def test_mark_unsafe_wraps_the_name_and_namespace_too(tmp_path):
    watch = Watch("metal3.io", "v1alpha1", "BareMetalHost", role="r", mark_unsafe=True)
    assert extra_vars(watch, CR)["ansible_operator_meta"] == {"name": {"__ansible_unsafe": "host-0"},
                                                              "namespace": {"__ansible_unsafe": "metal3"}}

    def loaded(watch: Watch, cr: dict) -> dict:
        path = tmp_path / "extravars"
        path.write_text(json.dumps(extra_vars(watch, cr)))
        run = subprocess.run([sys.executable, "-c", LOAD_META, str(path)], cwd=tmp_path, capture_output=True,
                             text=True, check=False)
        assert run.returncode == 0, run.stderr
        return json.loads(run.stdout)

    cr = {**CR, "metadata": {"name": "{{ lookup('env', 'HOME') }}", "namespace": "metal3"}}
    loaded_meta = loaded(watch, cr)
    # Plain strings for the role, which are never templated.
    assert loaded_meta == {"meta": {"name": "{{ lookup('env', 'HOME') }}", "namespace": "metal3"},
                           "trusted": {"name": False, "namespace": False}}
    # As they were without markUnsafe.
    assert loaded(Watch("metal3.io", "v1alpha1", "BareMetalHost", role="r"), cr)["trusted"] == {
        "name": True, "namespace": True}
