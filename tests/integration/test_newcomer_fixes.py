"""What a newcomer hit (issue 13): the README's own commands, run the way a newcomer runs them."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import CAPI_API, CLUSTER_NAME_LABEL
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.machines import SET_LABEL
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.harness.ironic import free_port
from tests.integration.playbook_runs import REPO, ansible_playbook

BIN = Path(sys.executable).parent


def ironic_down() -> dict[str, object]:
    """The options of an Ironic nobody listens for: a host reconcile fails at once."""
    return {"ironic_url": f"http://127.0.0.1:{free_port()}", "ironic_timeout": 5}


def test_hosts_playbook_takes_a_relative_hosts_dir_from_where_it_is_run(tmp_path):
    """docs/hosts.md: ``ansible-playbook metal3.baremetal.hosts -e hosts_dir=./hosts``, from the user's directory."""
    (tmp_path / "hosts").mkdir()
    (tmp_path / "hosts" / "node-0.yaml").write_text(textwrap.dedent("""\
        apiVersion: v1
        kind: Secret
        metadata: {name: node-0-bmc}
        stringData: {username: admin, password: pw}
        ---
        apiVersion: metal3.io/v1alpha1
        kind: BareMetalHost
        metadata: {name: node-0}
        spec:
          online: false
          bmc: {address: "fake://node-0", credentialsName: node-0-bmc}
        """))
    store_path = tmp_path / "store.db"
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(REPO / "build" / "collections"),
           "ANSIBLE_PYTHON_INTERPRETER": sys.executable, "ANSIBLE_LOCALHOST_WARNING": "false",
           "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false", "ANSIBLE_NOCOLOR": "1",
           "METAL3_STORE_PATH": str(store_path)}
    extra = json.dumps({"hosts_namespace": "lab", "hosts_wait_timeout": 5, "metal3_ironic": ironic_down()})
    run = subprocess.run([str(BIN / "ansible-playbook"), "metal3.baremetal.hosts", "-e", "hosts_dir=./hosts",
                          "-e", extra], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                         check=False)
    output = run.stdout + run.stderr
    assert "a directory of *.yaml manifests is required" not in output, output
    # The manifests were applied; the hosts' table was printed (Ironic is down here: the reconcile fails).
    assert "node-0" in output and "Traceback" not in output, output
    with LocalStore(str(store_path)) as store:
        assert store.get(Ref("metal3.io/v1alpha1", "BareMetalHost", "node-0", "lab"))["spec"]["online"] is False

    # What is not there is named as the user wrote it, and where that is.
    missing = subprocess.run([str(BIN / "ansible-playbook"), "metal3.baremetal.hosts", "-e", "hosts_dir=./nothing"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert missing.returncode != 0
    assert f'not "./nothing" ({tmp_path.resolve() / "nothing"})' in missing.stdout, missing.stdout


PROVISION = REPO / "playbooks" / "provision.yml"
SETS = [{"name": "cp", "template": "cp-template", "replicas": 1, "control_plane": True},
        {"name": "workers", "template": "worker-template", "replicas": 1}]


def test_provision_without_bootstrap_data_is_refused_up_front(tmp_path):
    store_path = tmp_path / "store.db"
    manifest = tmp_path / "cluster.yaml"
    manifest.write_text(textwrap.dedent("""\
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
        kind: Metal3Cluster
        metadata: {name: c}
        spec: {}
        """) + "".join(textwrap.dedent(f"""\
        ---
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
        kind: Metal3MachineTemplate
        metadata: {{name: {name}}}
        spec: {{template: {{spec: {{image: {{url: "http://images.example/os.img", checksum: abc}}}}}}}}
        """) for name in ("cp-template", "worker-template")))
    started = time.monotonic()
    run = ansible_playbook(PROVISION, {"provision_cluster": "c", "provision_sets": SETS, "provision_wait_timeout": 30,
                                       "provision_manifests": [str(manifest)], "metal3_ironic": ironic_down()},
                           env={"METAL3_STORE_PATH": str(store_path)})
    assert not run.ok
    assert time.monotonic() - started < 30  # refused, not waited for (provision_wait_timeout: 30 minutes)
    assert "provision_bootstrap_secret is required" in run.output, run.output
    assert "Sets without one: cp, workers" in run.output, run.output
    assert not store_path.exists() or not LocalStore(str(store_path)).list(CAPI_API, "Machine", "metal3")

    # A set that names its own Secret needs none of provision_bootstrap_secret; the others still do.
    own = [{**SETS[0], "bootstrap_secret": "cp-userdata"}, SETS[1]]
    run = ansible_playbook(PROVISION, {"provision_cluster": "c", "provision_sets": own},
                           env={"METAL3_STORE_PATH": str(store_path)})
    assert not run.ok and "Sets without one: workers\n" in run.output, run.output


def test_provision_gives_the_secret_to_machines_made_without_one(tmp_path):
    """A run before the check above made Machines without bootstrap data: a run with the Secret completes them."""
    store_path = tmp_path / "store.db"
    with LocalStore(str(store_path)) as store:
        for machine_set in ("cp", "workers"):
            store.create({"apiVersion": CAPI_API, "kind": "Machine",
                          "metadata": {"name": f"{machine_set}-0", "namespace": "metal3",
                                       "labels": {CLUSTER_NAME_LABEL: "c", SET_LABEL: machine_set}},
                          "spec": {"clusterName": "c", "bootstrap": {}}})
        store.create({"apiVersion": CAPI_API, "kind": "Machine",
                      "metadata": {"name": "workers-1", "namespace": "metal3",
                                   "labels": {CLUSTER_NAME_LABEL: "c", SET_LABEL: "workers"}},
                      "spec": {"clusterName": "c", "bootstrap": {"dataSecretName": "kept"}}})
    sets = [{**SETS[0], "bootstrap_secret": "cp-userdata"}, {**SETS[1], "replicas": 2}]
    run = ansible_playbook(PROVISION, {"provision_cluster": "c", "provision_sets": sets,
                                       "provision_bootstrap_secret": "worker-userdata", "provision_wait_timeout": 5,
                                       "metal3_ironic": ironic_down()},
                           env={"METAL3_STORE_PATH": str(store_path)})
    assert run.ok, run.output
    with LocalStore(str(store_path)) as store:
        secrets = {m["metadata"]["name"]: m["spec"]["bootstrap"].get("dataSecretName")
                   for m in store.list(CAPI_API, "Machine", "metal3")}
    assert secrets == {"cp-0": "cp-userdata", "workers-0": "worker-userdata", "workers-1": "kept"}


# What a developer's checkout holds besides the collection: none of it belongs in the artifact.
LOCAL_LEFTOVERS = [".venv", ".venv-sanity", "build", ".pytest_cache", ".ruff_cache", ".mypy_cache", ".cache",
                   "extensions/molecule/.cache", "extensions/molecule/ipam/.cache", "tests/.pytest_cache",
                   "tests/output", "metal3-baremetal-0.0.9.tar.gz"]


def test_galaxy_build_leaves_out_virtualenvs_and_caches(tmp_path):
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=False)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    source = tmp_path / "src"
    for name in filter(None, listed.stdout.decode().split("\0")):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes((REPO / name).read_bytes())
    for leftover in LOCAL_LEFTOVERS:
        path = source / leftover if leftover.endswith(".tar.gz") else source / leftover / "lib" / "left.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("left over\n")
    out = tmp_path / "out"
    build = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(out)],
                           cwd=source, capture_output=True, text=True, timeout=300, check=False)
    assert build.returncode == 0, build.stdout + build.stderr
    (artifact,) = out.glob("*.tar.gz")
    with tarfile.open(artifact) as tar:
        names = tar.getnames()
    packed = [leftover for leftover in LOCAL_LEFTOVERS
              if any(n == leftover or n.startswith(leftover + "/") for n in names)]
    assert packed == []
    # ... and the collection itself is all there.
    for needed in ("plugins/modules/resource.py", "playbooks/hosts.yml", "roles/ironic/tasks/main.yml",
                   "extensions/molecule/shared/seed.yml", "meta/runtime.yml", "README.md"):
        assert needed in names
