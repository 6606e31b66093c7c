"""Which clouds.yaml entry reaches Ironic when nobody names one: AWX's OpenStack credential writes a clouds.yaml of
one cloud named after the credential (OS_CLIENT_CONFIG_FILE points at it) and sets no OS_CLOUD."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import IronicUnavailable
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import IronicOptions, cloud_name


def a_cloud(port: int) -> dict:
    return {"auth_type": "http_basic",
            "auth": {"endpoint": f"http://127.0.0.1:{port}", "username": "u", "password": "p"}}


@pytest.fixture
def clouds_yaml(tmp_path: Path, monkeypatch):
    """Write a clouds.yaml holding ``names`` and make it the one openstacksdk reads (no OS_* from the caller)."""
    for key in list(os.environ):
        if key.startswith("OS_"):
            monkeypatch.delenv(key)
    path = tmp_path / "clouds.yaml"

    def write(*names: str) -> Path:
        path.write_text(yaml.safe_dump({"clouds": {name: a_cloud(6385 + i) for i, name in enumerate(names)}}))
        monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(path))
        return path
    return write


@pytest.mark.parametrize("ironic_cloud, os_cloud, clouds, chosen", [
    ("lab", None, ["devstack"], "lab"),                  # ironic_cloud set: it, whatever clouds.yaml holds
    ("lab", "other", ["devstack"], "lab"),               # ... over OS_CLOUD
    (None, "other", ["devstack", "metal3"], "other"),    # OS_CLOUD set: it
    (None, None, ["devstack"], "devstack"),              # AWX's credential: the only cloud, whatever its name
    (None, None, ["metal3"], "metal3"),                  # the ironic role's
    (None, None, ["devstack", "metal3"], "metal3"),      # several, one of them the ironic role's
    (None, None, [], "metal3"),                          # none: openstacksdk says metal3 was not found
])
def test_the_cloud_chosen(clouds_yaml, monkeypatch, ironic_cloud, os_cloud, clouds, chosen):
    clouds_yaml(*clouds)
    if os_cloud:
        monkeypatch.setenv("OS_CLOUD", os_cloud)
    assert cloud_name(ironic_cloud) == chosen
    assert IronicOptions(cloud=ironic_cloud).describe() == f"cloud {chosen!r}"


def test_several_clouds_and_none_chosen_is_an_error_naming_ironic_cloud(clouds_yaml):
    path = clouds_yaml("devstack", "prod")
    with pytest.raises(IronicUnavailable) as error:
        cloud_name(None)
    assert str(error.value) == (f"Ironic: {path} has several clouds (devstack, prod) and none is chosen: set "
                                "ironic_cloud (or OS_CLOUD) to one of them, or ironic_url")
    assert IronicOptions().describe() == "no cloud chosen"
    assert IronicOptions(endpoint="http://127.0.0.1:6385").describe() == "http://127.0.0.1:6385"


def test_an_unreadable_clouds_yaml_is_an_ironic_error(clouds_yaml):
    clouds_yaml("devstack").write_text("clouds: [not, a, map]\n")
    with pytest.raises(IronicUnavailable, match="^Ironic: cannot read clouds.yaml: "):
        cloud_name(None)


def test_connecting_uses_the_only_cloud(clouds_yaml):
    """openstack.connect is given the cloud chosen: the session is for the devstack entry's endpoint."""
    from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import Ironic

    clouds_yaml("devstack")
    conn = Ironic(IronicOptions())._connect()
    assert conn.config.name == "devstack"
    assert conn.config.config["auth"]["endpoint"] == "http://127.0.0.1:6385"
