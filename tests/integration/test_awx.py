"""AWX and execution environments (issue 17): the execution environment's definition ansible-builder accepts, the
awx.awx configuration example, the surveys' flat variables, and the shipped playbooks run the way AWX runs a job -
ansible-runner on a private data directory (env/extravars of survey strings, env/envvars with an AWX-style
OpenStack credential's one-cloud clouds.yaml, inventory/hosts, project/), from the collection installed from its
built tarball."""
from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from tests.harness.http_files import ServedDirectory
from tests.integration.playbook_runs import REPO, ansible_playbook

BIN = Path(sys.executable).parent
EE_DIR = REPO / "execution-environment"
AWX_EXAMPLE = REPO / "examples" / "awx"
# awx.awx, for the example's syntax check: Galaxy is not reachable from every machine, PyPI is; the `ansible`
# community package carries the collection. Extracted once per machine.
ANSIBLE_PACKAGE = "ansible==12.3.0"  # awx.awx 24.6.1, for ansible-core 2.19
AWX_CACHE = Path.home() / ".cache" / "metal3-baremetal" / "awx.awx-ansible-12.3.0"
METAL3 = "metal3.io/v1alpha1"


def build_tarball(out: Path) -> Path:
    build = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(out), str(REPO)],
                           capture_output=True, text=True, timeout=300, check=False)
    assert build.returncode == 0, build.stdout + build.stderr
    (tarball,) = out.glob("metal3-baremetal-*.tar.gz")
    return tarball


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The collection as AWX's execution environment holds it: built, then installed from the tarball."""
    work = tmp_path_factory.mktemp("installed")
    tarball = build_tarball(work / "dist")
    install = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "--offline", "--force",
                              str(tarball), "-p", str(work / "collections")], capture_output=True, text=True,
                             timeout=300, check=False)
    assert install.returncode == 0, install.stdout + install.stderr
    root = work / "collections" / "ansible_collections" / "metal3" / "baremetal"
    assert (root / "MANIFEST.json").is_file() and not (root / "MANIFEST.json").is_symlink()
    return work / "collections"


# -- the execution environment ------------------------------------------------------------------------------------

def test_requirements_are_lower_bounds_and_the_collection_says_where_they_are():
    pins = [line for line in (REPO / "requirements.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    assert pins and not [pin for pin in pins if "==" in pin or "~=" in pin], pins
    meta = yaml.safe_load((REPO / "meta" / "execution-environment.yml").read_text())
    assert meta["dependencies"] == {"python": "requirements.txt", "system": "bindep.txt"}
    assert (REPO / "bindep.txt").is_file()


def test_ansible_builder_creates_the_context_with_the_collection_and_its_requirements(tmp_path: Path):
    """The shipped definition, beside the tarball `ansible-galaxy collection build` wrote: `ansible-builder
    create` writes a context whose Containerfile installs the tarball where ansible-builder's introspection finds
    the collection's requirements; that introspection, run on the installed collection, gives the lower bounds."""
    definition = tmp_path / "ee"
    shutil.copytree(EE_DIR, definition)
    tarball = build_tarball(definition)
    context = tmp_path / "context"
    create = subprocess.run([str(BIN / "ansible-builder"), "create", "-f",
                             str(definition / "execution-environment.yml"), "-c", str(context),
                             "--output-filename", "Containerfile"],
                            capture_output=True, text=True, timeout=300, check=False)
    assert create.returncode == 0, create.stdout + create.stderr
    containerfile = (context / "Containerfile").read_text()
    assert (context / "_build" / "collections" / tarball.name).is_file()
    assert re.search(r"^RUN ansible-galaxy collection install --offline "
                     r"/build/collections/metal3-baremetal-\*\.tar\.gz "
                     r"--collections-path /usr/share/ansible/collections$", containerfile, re.M), containerfile
    assert "introspect.py introspect" in containerfile
    assert 'ARG ANSIBLE_INSTALL_REFS="ansible-core>=2.19.14,<2.20 ansible-runner>=2.4.0"' in containerfile

    # What the image's builder stage would gather from the collection, installed as the Containerfile installs it.
    collections = tmp_path / "collections"
    install = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "--offline", "--force",
                              str(tarball), "-p", str(collections)], capture_output=True, text=True, timeout=300,
                             check=False)
    assert install.returncode == 0, install.stdout + install.stderr
    pip, bindep = tmp_path / "pip.txt", tmp_path / "bindep.txt"
    introspect = subprocess.run([sys.executable, str(context / "_build" / "scripts" / "introspect.py"), "introspect",
                                 str(collections), "--write-pip", str(pip), "--write-bindep", str(bindep)],
                                capture_output=True, text=True, timeout=120, check=False)
    assert introspect.returncode == 0, introspect.stdout + introspect.stderr
    wanted = {line.split("#")[0].strip() for line in pip.read_text().splitlines() if line.strip()}
    assert {"kubernetes>=24.2.0", "openstacksdk>=4.0.0", "jsonschema>=4.0.0", "bcrypt>=4.0.0"} <= wanted, wanted
    assert not [line for line in wanted if "==" in line]
    assert "gcc [compile platform:rpm]" in bindep.read_text()


# -- the awx.awx example -------------------------------------------------------------------------------------------

class AnsibleYaml(yaml.SafeLoader):
    """YAML as Ansible reads it, enough for the example: !unsafe strings are strings."""


AnsibleYaml.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))


def awx_collection() -> Path:
    """A collections path holding awx.awx, from the `ansible` package on PyPI, once per machine."""
    AWX_CACHE.parent.mkdir(parents=True, exist_ok=True)
    with open(AWX_CACHE.parent / ".awx.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (AWX_CACHE / "ansible_collections" / "awx" / "awx" / "MANIFEST.json").is_file():
            download = AWX_CACHE.with_name(AWX_CACHE.name + ".download")
            shutil.rmtree(download, ignore_errors=True)
            pip = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                                  "--no-deps", "--only-binary", ":all:", ANSIBLE_PACKAGE, "-d", str(download)],
                                 capture_output=True, text=True, timeout=900, check=False)
            if pip.returncode != 0:
                pytest.fail(f"cannot download {ANSIBLE_PACKAGE} (for awx.awx) from PyPI: {pip.stderr[-2000:]}")
            (wheel,) = download.glob("ansible-*.whl")
            staging = AWX_CACHE.with_name(AWX_CACHE.name + ".tmp")
            shutil.rmtree(staging, ignore_errors=True)
            with zipfile.ZipFile(wheel) as archive:
                members = [n for n in archive.namelist() if n.startswith("ansible_collections/awx/awx/")]
                archive.extractall(staging, members)
            shutil.rmtree(AWX_CACHE, ignore_errors=True)
            staging.rename(AWX_CACHE)
            shutil.rmtree(download, ignore_errors=True)
    return AWX_CACHE


def test_the_awx_configuration_example_passes_the_syntax_check():
    awx = awx_collection()
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": f"{awx}:{REPO / 'build' / 'collections'}",
           "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false", "ANSIBLE_NOCOLOR": "1"}
    for playbook in [AWX_EXAMPLE / "configure.yml", *sorted((AWX_EXAMPLE / "project").glob("*.yml"))]:
        check = subprocess.run([str(BIN / "ansible-playbook"), "--syntax-check", str(playbook)], env=env,
                               capture_output=True, text=True, timeout=300, check=False)
        assert check.returncode == 0, f"{playbook}: {check.stdout}{check.stderr}"
    # The job templates are the four playbooks of the project, each with a survey of flat variables only.
    example = yaml.load((AWX_EXAMPLE / "configure.yml").read_text(), Loader=AnsibleYaml)[0]  # noqa: S506
    templates = example["vars"]["awx_job_templates"]
    assert sorted(t["playbook"] for t in templates) == ["claim.yml", "deprovision.yml", "hosts.yml", "provision.yml"]
    for template in templates:
        assert (AWX_EXAMPLE / "project" / template["playbook"]).is_file()
        assert {q["type"] for q in template["survey"]} <= {"text", "textarea", "integer", "multiplechoice"}


# -- the surveys' flat variables: bad input fails first, naming the variable ---------------------------------------

@pytest.mark.parametrize("playbook, extra, message", [
    ("provision.yml", {"provision_control_plane_count": "three"},
     'provision_control_plane_count must be a number of machines (0 or more), given with '
     'provision_control_plane_template; provision_control_plane_template is required when it is not 0; not "three"'),
    ("provision.yml", {"provision_worker_count": "2", "provision_worker_template": ""},
     "provision_worker_count must be a number of machines"),
    ("provision.yml", {"provision_control_plane_template": "", "provision_control_plane_count": ""},
     "provision_cluster and provision_sets are required (or provision_control_plane_template"),
    ("provision.yml", {"provision_wait_timeout": "soon"},
     'provision_wait_timeout must be a number of seconds, not "soon"'),
    ("deprovision.yml", {"provision_wait_timeout": "1 hour"}, "provision_wait_timeout must be a number of seconds"),
    ("hosts.yml", {"hosts_dir": "", "hosts_urls": " , \n"},
     "a directory of *.yaml manifests is required (or hosts_urls"),
    ("hosts.yml", {"hosts_urls": "/etc/passwd"}, 'hosts_urls must be http, https or ftp URLs (not ["/etc/passwd"])'),
    ("claim.yml", {"claim_count": "two"}, "claim_count is 0 or more"),
    ("claim.yml", {"claim_host_labels": "size=large\nrack"},
     'claim_host_labels are key=value pairs, comma or newline separated (not ["rack"])'),
])
def test_bad_survey_input_fails_first_naming_the_variable(tmp_path: Path, playbook, extra, message):
    survey = {"provision_cluster": "c", "provision_control_plane_template": "cp", "provision_control_plane_count": "1",
              "provision_bootstrap_secret": "s", "hosts_dir": "", "hosts_urls": "http://127.0.0.1:9/h.yaml",
              "claim_namespace": "t", "claim_name": "web", "claim_image_url": "http://images.example/i.qcow2"}
    store = tmp_path / "store.db"
    run = ansible_playbook(REPO / "playbooks" / playbook, {**survey, **extra}, env={"METAL3_STORE_PATH": str(store)})
    assert not run.ok
    assert message in " ".join(run.output.split()), run.output
    assert "Traceback" not in run.output
    assert not store.exists()  # refused before any task opened the store


# -- the playbooks, run as AWX runs a job ---------------------------------------------------------------------------

@pytest.fixture
def manifests_server(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A directory served over HTTP on loopback, as a CMDB or a Git forge would serve manifests."""
    root = tmp_path / "served"
    root.mkdir()
    with ServedDirectory(root) as served:
        yield root, served.url


class AwxJob:
    """One private data directory per job, as AWX prepares it for ansible-runner."""

    def __init__(self, base: Path, collections: Path, envvars: dict[str, str], project: Path = AWX_EXAMPLE / "project"):
        self.base, self.collections, self.envvars, self.count = base, collections, envvars, 0
        self.project = project

    def run(self, playbook: str, extravars: dict[str, str]) -> tuple[dict[str, Any], str]:
        assert all(isinstance(value, str) for value in extravars.values())  # a survey's answers
        self.count += 1
        pdd = self.base / f"job-{self.count}"
        (pdd / "env").mkdir(parents=True)
        (pdd / "inventory").mkdir()
        shutil.copytree(self.project, pdd / "project")
        (pdd / "env" / "extravars").write_text(json.dumps(extravars))
        (pdd / "env" / "envvars").write_text(json.dumps({
            **self.envvars, "ANSIBLE_COLLECTIONS_PATH": str(self.collections), "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false"}))
        (pdd / "inventory" / "hosts").write_text(
            f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n")
        # Not the checkout's: neither its collections path nor its Ironic cloud.
        env = {key: value for key, value in os.environ.items()
               if key not in ("ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_COLLECTIONS_PATHS", "OS_CLOUD", "PYTHONPATH")}
        env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # ansible-runner runs ansible-playbook from PATH
        done = subprocess.run([str(BIN / "ansible-runner"), "run", str(pdd), "-p", playbook, "--ident", "job"],
                              env=env, capture_output=True, text=True, timeout=1800, check=False)
        output = done.stdout + done.stderr
        stats = [json.loads(event.read_text()) for event in (pdd / "artifacts" / "job" / "job_events").glob("*.json")]
        stats = [event["event_data"] for event in stats if event.get("event") == "playbook_on_stats"]
        assert done.returncode == 0 and len(stats) == 1, output
        assert (pdd / "artifacts" / "job" / "status").read_text() == "successful", output
        assert "Traceback" not in output, output
        return stats[0], output


def changed(stats: dict[str, Any]) -> int:
    return int(stats.get("changed", {}).get("localhost", 0))


def test_the_playbooks_run_as_awx_runs_them_from_the_installed_tarball(tmp_path: Path, ironic, installed,
                                                                       manifests_server):
    served, url = manifests_server
    # The hosts' names and MACs are this test's own: the session's Ironic holds other tests' nodes.
    tag = secrets.token_hex(2)
    mac = f"52:54:{tag[:2]}:{tag[2:]}"
    hosts = (REPO / "playbooks" / "files" / "demo" / "hosts.yaml").read_text()
    hosts = hosts.replace("host-", f"awx{tag}-").replace("52:54:00:de", mac)
    documents = hosts.split("\n---\n")
    (served / "bmc.yaml").write_text(documents[0] + "\n---\n" + "\n---\n".join(documents[1:4]))
    (served / "more.yaml").write_text("\n---\n".join(documents[4:]) + "\n---\n" + yaml.safe_dump({
        "apiVersion": METAL3, "kind": "HostDeployPolicy", "metadata": {"name": "tenants"},
        "spec": {"hostClaimNamespaces": {"names": [f"tenant-{tag}"]}}}))
    assert hosts.count("kind: BareMetalHost") == 6
    (tmp_path / "project-files").mkdir()
    cluster = tmp_path / "project-files" / "cluster.yaml"
    shutil.copy(REPO / "playbooks" / "files" / "demo" / "cluster.yaml", cluster)

    # AWX's OpenStack credential: a clouds.yaml of one cloud, named after the credential, not metal3; no OS_CLOUD.
    fixture_clouds = yaml.safe_load(ironic.clouds_yaml.read_text())["clouds"]
    clouds = tmp_path / "awx-clouds.yaml"
    clouds.write_text(yaml.safe_dump({"clouds": {"devstack": fixture_clouds[ironic.cloud]}}))
    store = tmp_path / "store.db"
    job = AwxJob(tmp_path / "jobs", installed, {"OS_CLIENT_CONFIG_FILE": str(clouds), "METAL3_STORE_PATH": str(store)})
    namespace = f"awx-{tag}"

    stats, output = job.run("hosts.yml", {"hosts_urls": f"{url}/bmc.yaml,\n{url}/more.yaml",
                                          "hosts_namespace": namespace, "hosts_wait_timeout": "300"})
    assert changed(stats) > 0
    assert len(re.findall(rf"awx{tag}-\d +available ", output)) == 6, output

    provision = {"provision_cluster": "my-cluster", "provision_namespace": namespace,
                 "provision_manifests": f"{cluster}\n", "provision_control_plane_template": "my-cluster-controlplane",
                 "provision_control_plane_count": "1", "provision_worker_template": "my-cluster-workers",
                 "provision_worker_count": "1", "provision_bootstrap_secret": "my-cluster-userdata",
                 "provision_wait_timeout": "600"}
    stats, output = job.run("provision.yml", provision)
    assert changed(stats) > 0
    # The table, in the callback's JSON: rows are separated by "\n".
    machines = re.findall(rf"(my-cluster-(?:controlplane|workers)-0) +({namespace}/awx{tag}-\d) ", output)
    assert sorted(m for m, _host in machines) == ["my-cluster-controlplane-0", "my-cluster-workers-0"], output
    with LocalStore(str(store)) as reader:
        provisioned = [h["metadata"]["name"] for h in reader.list(METAL3, "BareMetalHost", namespace)
                       if h["status"]["provisioning"]["state"] == "provisioned"]
    assert len(provisioned) == 2

    stats, output = job.run("provision.yml", provision)
    assert changed(stats) == 0, output

    stats, output = job.run("deprovision.yml", {key: value for key, value in provision.items()
                                                if not key.endswith("_count")})
    assert changed(stats) > 0
    with LocalStore(str(store)) as reader:
        assert reader.list("infrastructure.cluster.x-k8s.io/v1beta1", "Metal3Machine", namespace) == []
        assert not [h for h in reader.list(METAL3, "BareMetalHost", namespace) if h["spec"].get("consumerRef")]

    # A tenant's servers, from the same hosts: claimed, then given back.
    claim = {"claim_namespace": f"tenant-{tag}", "claim_name": "web", "claim_count": "2",
             "claim_image_url": "http://images.example/debian.qcow2", "claim_host_labels": "metal3.baremetal/demo=true",
             "claim_powered_on": "true", "claim_wait_timeout": "300"}
    stats, output = job.run("claim.yml", claim)
    rows = re.findall(rf"(web-\d) +({namespace}/awx{tag}-\d) +provisioned +on ", output)
    assert sorted(c for c, _host in rows) == ["web-0", "web-1"], output
    stats, output = job.run("claim.yml", {**claim, "claim_state": "absent"})
    with LocalStore(str(store)) as reader:
        assert reader.list(METAL3, "HostClaim", f"tenant-{tag}") == []
        assert not [h for h in reader.list(METAL3, "BareMetalHost", namespace) if h["spec"].get("consumerRef")]


# AWX's "OpenShift or Kubernetes API Bearer Token" credential injects these, and no kubeconfig.
ADDRESSES = """\
- name: An address from a pool, on the cluster AWX's Kubernetes credential names
  hosts: localhost
  gather_facts: false
  tasks:
    - name: The pool
      metal3.baremetal.ip_pool:
        name: awx
        namespace: "{{ awx_namespace }}"
        spec: {namePrefix: awx, pools: [{start: 192.168.30.10, end: 192.168.30.20}], prefix: 24}
    - name: A claim on it
      metal3.baremetal.ip_claim:
        name: web
        namespace: "{{ awx_namespace }}"
        pool: awx
      register: awx_claim
    - name: Say what it got
      ansible.builtin.debug:
        msg: "address {{ awx_claim.address }}"
"""


def test_awxs_kubernetes_credential_selects_the_cluster_without_a_kubeconfig(tmp_path: Path, installed, kube_cluster):
    from kubernetes import client

    core = client.CoreV1Api(kube_cluster.api_client())
    namespace = kube_cluster.new_namespace("awx")
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "awx"}})
    rbac = client.RbacAuthorizationV1Api(kube_cluster.api_client())
    rbac.create_namespaced_role(namespace, {"metadata": {"name": "awx"}, "rules": [
        {"apiGroups": ["ipam.metal3.io"], "resources": ["*"], "verbs": ["*"]}]})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": "awx"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "awx"},
        "subjects": [{"kind": "ServiceAccount", "name": "awx", "namespace": namespace}]})
    token = core.create_namespaced_service_account_token("awx", namespace, {"spec": {"expirationSeconds": 3600}})
    project = tmp_path / "project"
    project.mkdir()
    (project / "addresses.yml").write_text(ADDRESSES)
    job = AwxJob(tmp_path / "jobs", installed, {
        "METAL3_BACKEND": "kubernetes", "K8S_AUTH_HOST": kube_cluster.server,
        "K8S_AUTH_API_KEY": token.status.token, "K8S_AUTH_SSL_CA_CERT": str(kube_cluster.ca_cert),
        "K8S_AUTH_VERIFY_SSL": "True", "KUBECONFIG": str(tmp_path / "none")}, project)
    stats, output = job.run("addresses.yml", {"awx_namespace": namespace})
    assert "address 192.168.30.10" in output, output
    assert token.status.token not in output
    claim = client.CustomObjectsApi(kube_cluster.api_client()).get_namespaced_custom_object(
        "ipam.metal3.io", "v1alpha1", namespace, "ipclaims", "web")
    assert claim["status"]["address"]["name"] == "awx-192-168-30-10"
    stats, output = job.run("addresses.yml", {"awx_namespace": namespace})
    assert changed(stats) == 0, output
