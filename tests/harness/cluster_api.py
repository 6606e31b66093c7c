"""Cluster API's own controllers (issue 32): the core manager, the kubeadm bootstrap provider and the kubeadm
control plane of ``sigs.k8s.io/cluster-api``, with their CRDs and webhook manifests, as hack/cluster-api.sh
builds them once per machine (``bin/``, ``crds/<provider>/``, ``webhooks/<provider>.yaml``).

``ClusterAPI(cluster).start()`` does on a running KubeCluster what ``clusterctl init`` does on a cluster, minus
containers, Services and cert-manager: each provider's CRDs with their conversion webhook, its mutating and
validating webhook configurations, and its manager as a process on loopback. Where upstream's kustomize points
the webhooks at a Service and lets cert-manager inject the CA, here they are URLs (``https://127.0.0.1:<port>``)
and the caBundle is the harness's CA, which also signs the managers' serving certificate.
"""
from __future__ import annotations

import atexit
import base64
import json
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.harness.cache import cached
from tests.harness.cluster import REPO, ClusterError, KubeCluster, free_port, write_serving_cert


@dataclass(frozen=True)
class Provider:
    name: str  # its directory in the cache: crds/<name>/, webhooks/<name>.yaml
    binary: str  # bin/<binary>, upstream's Makefile's name
    prefix: str  # upstream's kustomize namePrefix, which names its webhook configurations
    group: str  # an API group it converts (for the probe of its conversion webhook)
    # Whether upstream's config/crd kustomization labels its CRDs with the contract versions they serve (core
    # finds a bootstrap or control plane provider's version for a reference by them, as it finds ours).
    contract_labels: bool = False


CLUSTER_API_PROVIDERS = (
    Provider("core", "cluster-api-manager", "capi-", "cluster.x-k8s.io"),
    Provider("bootstrap", "kubeadm-bootstrap-manager", "capi-kubeadm-bootstrap-", "bootstrap.cluster.x-k8s.io",
             contract_labels=True),
    Provider("controlplane", "kubeadm-control-plane-manager", "capi-kubeadm-control-plane-",
             "controlplane.cluster.x-k8s.io", contract_labels=True),
)
# The labels of those kustomizations (and of ours: config/crd).
CONTRACT_LABELS = {"cluster.x-k8s.io/v1beta1": "v1beta1", "cluster.x-k8s.io/v1beta2": "v1beta2"}
PROVIDERS = tuple(provider.name for provider in CLUSTER_API_PROVIDERS)
BINARIES = tuple(provider.binary for provider in CLUSTER_API_PROVIDERS)

# ClusterTopology for ClusterClass (issue 32); MachinePool is on by default in v1.14 and not used here.
FEATURE_GATES = "ClusterTopology=true,MachinePool=false"
# The collection's CRDs (not tests/fixtures/crd: the real Cluster API CRDs replace those stand-ins here).
COLLECTION_CRD_FILES = sorted((REPO / "config" / "crd").glob("*.yaml"))
READY_TIMEOUT = 120.0  # a cold start of three Go managers on a busy 2-core machine
STOP_TIMEOUT = 15.0


class ClusterAPIError(ClusterError):
    """Cluster API could not be installed or started; the message says why (with the manager's log)."""


def cluster_api_dir() -> Path:
    """The cache hack/cluster-api.sh fills (it builds on a cold machine, and prints it at once on a warm one)."""
    return cached("cluster-api.sh")


# -- manifests, as upstream's kustomize + cert-manager would render them for loopback ---------------

def load_documents(path: Path) -> list[dict[str, Any]]:
    """The YAML documents of ``path``, parsed by libyaml where PyYAML has it (Cluster API's CRDs are 3 MB: the
    pure-Python parser takes 20 s for them on a busy 2-core machine, libyaml 2 s)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return [doc for doc in yaml.load_all(path.read_text(), Loader=loader) if doc]


def with_contract_labels(crd: dict[str, Any]) -> dict[str, Any]:
    """``crd`` labelled with the contract versions, as its provider's kustomization labels it."""
    metadata = crd["metadata"]
    return {**crd, "metadata": {**metadata, "labels": {**(metadata.get("labels") or {}), **CONTRACT_LABELS}}}


def with_conversion(crd: dict[str, Any], client_config: dict[str, Any]) -> dict[str, Any]:
    """``crd`` converting through the webhook at ``client_config`` when it serves more than one version, as
    upstream's webhookcainjection / webhook patches make it; unchanged when it serves one."""
    spec = crd["spec"]
    if sum(1 for version in spec["versions"] if version.get("served")) < 2:
        return crd
    webhook = {"clientConfig": client_config, "conversionReviewVersions": ["v1", "v1beta1"]}
    return {**crd, "spec": {**spec, "conversion": {"strategy": "Webhook", "webhook": webhook}}}


def with_urls(configuration: dict[str, Any], prefix: str, base_url: str, ca_bundle: str) -> dict[str, Any]:
    """A Mutating/ValidatingWebhookConfiguration renamed with the provider's prefix, each webhook's ``service``
    replaced by a ``url`` on ``base_url`` (the service's path kept) and the CA given."""
    webhooks = []
    for webhook in configuration.get("webhooks") or []:
        service = webhook["clientConfig"]["service"]
        webhooks.append({**webhook, "clientConfig": {"url": f"{base_url}{service.get('path', '/')}",
                                                     "caBundle": ca_bundle}})
    metadata = {**configuration["metadata"], "name": prefix + configuration["metadata"]["name"]}
    return {**configuration, "metadata": metadata, "webhooks": webhooks}


def apply_webhook_configurations(api: Any, configurations: list[dict[str, Any]]) -> None:
    """Create each configuration, or replace the one of that name."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    admission = client.AdmissionregistrationV1Api(api)
    calls = {
        "MutatingWebhookConfiguration": (admission.create_mutating_webhook_configuration,
                                         admission.read_mutating_webhook_configuration,
                                         admission.replace_mutating_webhook_configuration),
        "ValidatingWebhookConfiguration": (admission.create_validating_webhook_configuration,
                                           admission.read_validating_webhook_configuration,
                                           admission.replace_validating_webhook_configuration),
    }
    for configuration in configurations:
        create, read, replace = calls[configuration["kind"]]
        name = configuration["metadata"]["name"]
        try:
            create(configuration)
        except ApiException as e:
            if e.status != 409:
                raise ClusterAPIError(f"{configuration['kind']} {name} refused: {e.body}") from None
            current = read(name)
            replace(name, {**configuration, "metadata": {**configuration["metadata"],
                                                         "resourceVersion": current.metadata.resource_version}})


def install_crds(api: Any, crds: list[dict[str, Any]], timeout: float = READY_TIMEOUT) -> None:
    """Create each CRD (or replace the one of that name), then wait until all are Established and each of their
    versions is served. All are created before any is waited for, so kube-apiserver establishes them together,
    and "served" is read from each group version's own discovery document, not by rediscovering the cluster
    (which metal3_operator.crds.install does, and which takes minutes for Cluster API's large CRDs on a busy
    2-core machine). Answers are read as JSON, not as the client's models (slow to build for 300 KB schemas)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    extensions = client.ApiextensionsV1Api(api)

    def read(name: str) -> dict[str, Any]:
        return dict(json.loads(extensions.read_custom_resource_definition(name, _preload_content=False).data))

    for crd in crds:
        name = crd["metadata"]["name"]
        try:
            extensions.create_custom_resource_definition(crd, _preload_content=False)
        except ApiException as e:
            if e.status != 409:
                raise ClusterAPIError(f"CRD {name} refused: {e.body}") from None
            extensions.replace_custom_resource_definition(name, {**crd, "metadata": {
                **crd["metadata"], "resourceVersion": read(name)["metadata"]["resourceVersion"]}},
                _preload_content=False)
    custom = client.CustomObjectsApi(api)

    def ready(crd: dict[str, Any]) -> bool:
        conditions = (read(crd["metadata"]["name"]).get("status") or {}).get("conditions") or []
        if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            return False
        spec = crd["spec"]
        for version in spec["versions"]:
            if not version.get("served"):
                continue
            try:
                resources = custom.get_api_resources(spec["group"], version["name"]).resources
            except ApiException:
                return False
            if spec["names"]["plural"] not in {resource.name for resource in resources}:
                return False
        return True

    deadline = time.monotonic() + timeout
    waiting = list(crds)
    while waiting:
        waiting = [crd for crd in waiting if not ready(crd)]
        if waiting and time.monotonic() > deadline:
            raise ClusterAPIError(f"CRDs not served after {timeout:.0f}s: "
                                  + ", ".join(crd["metadata"]["name"] for crd in waiting))
        if waiting:
            time.sleep(0.2)


def manager_command(binary: Path, kubeconfig: Path, webhook_port: int, cert_dir: Path,
                    health_port: int) -> list[str]:
    """A manager's command line: the admin kubeconfig, its webhook server on ``webhook_port`` serving
    ``cert_dir``/tls.crt, probes on loopback, no metrics server, no leader election."""
    return [
        str(binary), f"--kubeconfig={kubeconfig}", "--leader-elect=false",
        f"--webhook-port={webhook_port}", f"--webhook-cert-dir={cert_dir}",
        f"--health-addr=127.0.0.1:{health_port}", "--diagnostics-address=0",
        f"--feature-gates={FEATURE_GATES}",
    ]


# -- the managers ------------------------------------------------------------------------------------

@dataclass
class Manager:
    provider: Provider
    webhook_port: int
    health_port: int
    log: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def webhook_url(self) -> str:
        return f"https://127.0.0.1:{self.webhook_port}"

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def healthy(self) -> bool:
        """Its readiness endpoint answers 200 (controller-runtime's readyz includes the webhook server)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def webhook_answers(self, ca: ssl.SSLContext) -> bool:
        """Its webhook server answers an (empty) ConversionReview over TLS the harness's CA verifies."""
        review_uid = str(uuid.uuid4())
        review = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                  "request": {"uid": review_uid, "desiredAPIVersion": f"{self.provider.group}/v1beta2",
                              "objects": []}}
        request = urllib.request.Request(f"{self.webhook_url}/convert", data=json.dumps(review).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=5, context=ca) as answer:
                response = json.loads(answer.read()).get("response") or {}
        except (urllib.error.URLError, OSError, ValueError):
            return False
        return bool(response.get("uid") == review_uid and (response.get("result") or {}).get("status") == "Success")


class ClusterAPI:
    """Cluster API's three managers on ``cluster``; ``start()``, ``stop()``.

    RBAC: the managers use the harness's kubeconfig, whose token is in system:masters - fine for tests; upstream
    gives each manager a ServiceAccount and the ClusterRoles of its config/rbac, which this harness does not
    install (nothing here checks Cluster API's own permissions).
    """

    def __init__(self, cluster: KubeCluster, cache: Path | None = None) -> None:
        self.cluster = cluster
        self.cache = cache
        self.workdir = cluster.workdir / "cluster-api"
        self.managers: dict[str, Manager] = {}
        self.started_in = 0.0  # seconds start() took, CRDs and webhooks included
        self.timings: dict[str, float] = {}  # seconds by step of the last start(): crds, webhooks, managers
        self.installed = False  # the CRDs and webhook configurations, naming the managers' ports

    @property
    def binaries_dir(self) -> Path:
        """Where the managers' binaries are (known once start() has found the cache)."""
        if self.cache is None:
            raise ClusterAPIError("Cluster API has not been started")
        return self.cache / "bin"

    @property
    def cert_dir(self) -> Path:
        return self.workdir / "serving-certs"

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> ClusterAPI:
        """Install and start it all, and wait until every manager is healthy and its webhooks answer; a start
        that fails stops the managers it had started. A start after stop() starts the managers again as they were
        (same ports and certificate, which the installed CRDs and webhook configurations name)."""
        started = time.monotonic()
        self.timings = {}
        cache = self.cache = self.cache or cluster_api_dir()
        for provider in CLUSTER_API_PROVIDERS:
            if not (cache / "bin" / provider.binary).exists():
                raise ClusterAPIError(f"{provider.binary} is missing from {cache}: run `make cluster-api`")
        atexit.register(self.stop)
        try:
            step = time.monotonic()
            if not self.installed:
                self.workdir.mkdir(parents=True, exist_ok=True)
                write_serving_cert(self.cluster.workdir, self.cert_dir, "cluster-api-webhooks")
                self.managers = {provider.name: Manager(provider, free_port(), free_port(),
                                                        self.cluster.workdir / f"{provider.binary}.log")
                                 for provider in CLUSTER_API_PROVIDERS}
                self._install_crds(cache)
                self.timings["crds"], step = time.monotonic() - step, time.monotonic()
                self._install_webhooks(cache)
                self.timings["webhooks"], step = time.monotonic() - step, time.monotonic()
                self.installed = True
            for manager in self.managers.values():
                self._spawn(manager, cache)
            self._wait_ready()
            self.timings["managers"] = time.monotonic() - step
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - started
        return self

    def _client_config(self, manager: Manager, path: str) -> dict[str, Any]:
        return {"url": f"{manager.webhook_url}{path}", "caBundle": self.ca_bundle}

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.cluster.ca_cert.read_bytes()).decode()

    def _install_crds(self, cache: Path) -> None:
        """Each provider's CRDs, converting through its own manager's webhook (controller-runtime's /convert)."""
        crds = [with_conversion(with_contract_labels(crd) if manager.provider.contract_labels else crd,
                                self._client_config(manager, "/convert"))
                for name, manager in self.managers.items()
                for path in sorted((cache / "crds" / name).glob("*.yaml")) for crd in load_documents(path)]
        (self.workdir / "crds.json").write_text(json.dumps(crds))  # as installed, for people debugging
        install_crds(self.cluster.api_client(), crds)

    def _install_webhooks(self, cache: Path) -> None:
        configurations = [with_urls(doc, manager.provider.prefix, manager.webhook_url, self.ca_bundle)
                          for name, manager in self.managers.items()
                          for doc in load_documents(cache / "webhooks" / f"{name}.yaml")]
        (self.workdir / "webhooks.yaml").write_text(yaml.safe_dump_all(configurations))
        apply_webhook_configurations(self.cluster.api_client(), configurations)

    def _spawn(self, manager: Manager, cache: Path) -> None:
        command = manager_command(cache / "bin" / manager.provider.binary, self.cluster.kubeconfig,
                                  manager.webhook_port, self.cert_dir, manager.health_port)
        with manager.log.open("ab") as log:
            manager.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL, start_new_session=True)

    def _wait_ready(self) -> None:
        ca = ssl.create_default_context(cafile=str(self.cluster.ca_cert))
        deadline = time.monotonic() + READY_TIMEOUT
        waiting = list(self.managers.values())
        while waiting:
            for manager in list(waiting):
                assert manager.process is not None
                if manager.process.poll() is not None:
                    raise ClusterAPIError(f"{manager.provider.binary} exited with {manager.process.returncode}:\n"
                                          f"{manager.tail()}")
                if manager.healthy() and manager.webhook_answers(ca):
                    waiting.remove(manager)
            if waiting and time.monotonic() > deadline:
                names = ", ".join(manager.provider.binary for manager in waiting)
                raise ClusterAPIError(f"not healthy after {READY_TIMEOUT:.0f}s: {names}:\n"
                                      + "\n".join(manager.tail() for manager in waiting))
            if waiting:
                time.sleep(0.2)

    @property
    def pids(self) -> list[int]:
        return [manager.process.pid for manager in self.managers.values() if manager.process is not None]

    def stop(self) -> None:
        """SIGTERM to every manager, SIGKILL to any still running after STOP_TIMEOUT; each one reaped. The CRDs
        and webhook configurations stay (as on a cluster whose managers are down): start() serves them again."""
        running = [manager.process for manager in self.managers.values()
                   if manager.process is not None and manager.process.poll() is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for process in running:
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        atexit.unregister(self.stop)

    def __enter__(self) -> ClusterAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def new_namespace(self, prefix: str = "capi") -> str:
        return self.cluster.new_namespace(prefix)
