"""A real Kubernetes API on loopback: etcd, kube-apiserver and kube-controller-manager, started by the tests.

The binaries come from hack/kube-binaries.sh (built with Go once per machine). Certificates, the
service-account key and a static admin token are made here; kube-controller-manager runs only the garbage
collector and namespace controllers, which is what ownerReference cascades and namespace deletion need.
The collection's conversion webhook runs beside them, as CAPM3's does on a real cluster: the CAPM3 CRDs store
v1beta2 and serve v1beta1, and only a webhook converts between them.

CLI, for people (`make cluster` / `make cluster-down`):
    python -m tests.harness.cluster up --dir DIR     start detached, install the CRDs, print the KUBECONFIG
    python -m tests.harness.cluster down --dir DIR   stop what `up` started
"""
from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import datetime
import ipaddress
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from tests.harness.cache import cached

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO / "operator", REPO / "build" / "collections"):
    # metal3_operator.crds, and the engine's conversion it imports, when this module runs as `make cluster` runs it
    if str(_path) not in sys.path:
        sys.path.append(str(_path))
CRD_FILES = [*sorted((REPO / "config" / "crd").glob("*.yaml")),
             *sorted((REPO / "tests" / "fixtures" / "crd").glob("*.yaml"))]
READY_TIMEOUT = 90.0
COLLECTION = REPO / "build" / "collections" / "ansible_collections" / "metal3" / "baremetal"


class ClusterError(Exception):
    """The cluster could not be started or used; the message says why."""


def binaries_dir() -> Path:
    """Where the binaries are: METAL3_KUBE_BIN_DIR, else what hack/kube-binaries.sh builds or has cached."""
    if os.environ.get("METAL3_KUBE_BIN_DIR"):
        return Path(os.environ["METAL3_KUBE_BIN_DIR"])
    return cached("kube-binaries.sh", ClusterError)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _new_key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem_key(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def _serving_cert(ca: Any, ca_key: Any, common_name: str, dns_names: list[str], ips: list[str]) -> tuple[Any, Any]:
    """A serving certificate and its key, signed by ``ca``, for these names and addresses."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    key = _new_key()
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName(
                [*(x509.DNSName(name) for name in dns_names),
                 *(x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips)]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert, key


def _write_pki(directory: Path) -> None:
    """A CA (its key kept, for write_serving_cert), a serving certificate for 127.0.0.1, and the service-account
    signing key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = _new_key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "metal3-test-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=30))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    server, server_key = _serving_cert(ca, ca_key, "kube-apiserver",
                                       ["localhost", "kubernetes", "kubernetes.default"], ["127.0.0.1", "10.0.0.1"])
    (directory / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (directory / "ca.key").write_bytes(_pem_key(ca_key))
    (directory / "ca.key").chmod(0o600)
    (directory / "server.crt").write_bytes(server.public_bytes(serialization.Encoding.PEM))
    (directory / "server.key").write_bytes(_pem_key(server_key))
    (directory / "sa.key").write_bytes(_pem_key(_new_key()))


def write_serving_cert(pki: Path, cert_dir: Path, common_name: str) -> None:
    """``cert_dir``/tls.crt and tls.key, as controller-runtime's webhook servers read them: a certificate for
    127.0.0.1 and localhost signed by the CA _write_pki made in ``pki``, which kube-apiserver trusts as caBundle."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    ca = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), password=None)
    cert, key = _serving_cert(ca, ca_key, common_name, ["localhost"], ["127.0.0.1"])
    cert_dir.mkdir(parents=True, exist_ok=True)
    (cert_dir / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (cert_dir / "tls.key").write_bytes(_pem_key(key))
    (cert_dir / "tls.key").chmod(0o600)


class KubeCluster:
    """etcd + kube-apiserver (+ kube-controller-manager) in ``workdir``; ``start()``, ``stop()``."""

    def __init__(self, workdir: Path, bin_dir: Path | None = None) -> None:
        self.workdir = Path(workdir).resolve()
        self.bin_dir = bin_dir
        self.processes: dict[str, subprocess.Popen] = {}
        self.commands: dict[str, tuple[list[str], dict[str, str] | None]] = {}
        self.port = 0
        self.webhook_port = 0
        self.token = ""

    # -- paths -------------------------------------------------------------------------------------

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def ca_cert(self) -> Path:
        return self.workdir / "ca.crt"

    @property
    def ca_key(self) -> Path:
        """The CA's key (Cluster API's ``<cluster>-ca`` Secret holds it, for a workload cluster)."""
        return self.workdir / "ca.key"

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> KubeCluster:
        """Start it all and wait until it serves; a start that fails at any point stops what it had started."""
        bin_dir = self.bin_dir or binaries_dir()
        for component in ("etcd", "kube-apiserver"):
            if not (bin_dir / component).exists():
                raise ClusterError(f"{component} is missing from {bin_dir}: run `make kube-binaries`")
        if not COLLECTION.is_dir():  # the conversion webhook imports the engine from there
            raise ClusterError(f"the collection is not installed at {COLLECTION.relative_to(REPO)}: "
                               "run `make collection`")
        self.workdir.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop)
        try:
            self._start(bin_dir)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, bin_dir: Path) -> None:
        _write_pki(self.workdir)
        self.token = secrets.token_hex(16)
        (self.workdir / "tokens.csv").write_text(f'{self.token},admin,{uuid.uuid4()},"system:masters"\n')
        etcd_port, peer_port, self.port = free_port(), free_port(), free_port()
        self._spawn("etcd", [
            str(bin_dir / "etcd"), "--data-dir", str(self.workdir / "etcd"), "--name", "metal3-test",
            "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-cluster", f"metal3-test=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync", "--log-level", "warn",
        ])
        self._spawn("kube-apiserver", [
            str(bin_dir / "kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            f"--secure-port={self.port}", "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--tls-cert-file={self.workdir / 'server.crt'}", f"--tls-private-key-file={self.workdir / 'server.key'}",
            f"--client-ca-file={self.ca_cert}", f"--token-auth-file={self.workdir / 'tokens.csv'}",
            f"--service-account-key-file={self.workdir / 'sa.key'}",
            f"--service-account-signing-key-file={self.workdir / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc", "--service-cluster-ip-range=10.0.0.0/24",
            "--authorization-mode=RBAC", "--enable-priority-and-fairness=false", "--allow-privileged=false",
            f"--cert-dir={self.workdir / 'certs'}", "--v=1",
        ])
        self._write_kubeconfig()
        self._wait_ready()
        self._start_conversion_webhook()
        controller_manager = bin_dir / "kube-controller-manager"
        if controller_manager.exists():
            self._spawn("kube-controller-manager", [
                str(controller_manager), f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}", f"--authorization-kubeconfig={self.kubeconfig}",
                "--controllers=garbagecollector,namespace", "--leader-elect=false", "--secure-port=0",
                "--use-service-account-credentials=false", "--v=1",
            ])

    @property
    def pids_file(self) -> Path:
        """The processes started, one pid a line: what `cluster.py down` stops. Written as each one starts."""
        return self.workdir / "pids"

    def _spawn(self, name: str, command: list[str], env: dict[str, str] | None = None) -> None:
        self.commands[name] = (command, env)
        log = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115 - lives as long as the process
        self.processes[name] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                                stdin=subprocess.DEVNULL, start_new_session=True)
        self.pids_file.write_text("".join(f"{p.pid}\n" for p in self.processes.values()))

    def _start_conversion_webhook(self) -> None:
        """The webhook on a free loopback port, serving with the apiserver's certificate (its SAN has 127.0.0.1)."""
        certs = self.workdir / "webhook"
        certs.mkdir(exist_ok=True)
        (certs / "tls.crt").write_bytes((self.workdir / "server.crt").read_bytes())
        (certs / "tls.key").write_bytes((self.workdir / "server.key").read_bytes())
        self.webhook_port = free_port()
        path = os.pathsep.join([str(REPO / "build" / "collections"), str(REPO / "operator")])
        self._spawn("conversion-webhook", [
            sys.executable, "-m", "metal3_operator.conversion_webhook",
            f"--bind-address=127.0.0.1:{self.webhook_port}", f"--cert-dir={certs}",
        ], env={**os.environ, "PYTHONPATH": path})
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            process = self.processes["conversion-webhook"]
            if process.poll() is not None:
                raise ClusterError(f"the conversion webhook exited with {process.returncode}:\n"
                                   f"{self._log_tail('conversion-webhook')}")
            try:
                socket.create_connection(("127.0.0.1", self.webhook_port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise ClusterError("the conversion webhook did not listen") from None
                time.sleep(0.1)

    @property
    def conversion(self) -> dict[str, Any]:
        """The clientConfig by which kube-apiserver reaches the conversion webhook."""
        return {"url": f"https://127.0.0.1:{self.webhook_port}/convert",
                "caBundle": base64.b64encode(self.ca_cert.read_bytes()).decode()}

    def _log_tail(self, name: str, lines: int = 30) -> str:
        path = self.workdir / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def _wait_ready(self) -> None:
        import requests

        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise ClusterError(f"{name} exited with {process.returncode}:\n{self._log_tail(name)}")
            try:
                answer = requests.get(f"{self.server}/readyz", headers={"Authorization": f"Bearer {self.token}"},
                                      verify=str(self.ca_cert), timeout=2)
                if answer.status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.25)
        raise ClusterError(f"kube-apiserver not ready after {READY_TIMEOUT:.0f}s:\n{self._log_tail('kube-apiserver')}")

    def _write_kubeconfig(self) -> None:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "metal3-test",
            "clusters": [{"name": "metal3-test",
                          "cluster": {"server": self.server, "certificate-authority": str(self.ca_cert)}}],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": "metal3-test", "context": {"cluster": "metal3-test", "user": "admin"}}],
        }
        self.kubeconfig.write_text(yaml.safe_dump(config))
        self.kubeconfig.chmod(0o600)

    def inline_kubeconfig(self, **user: Any) -> str:
        """A kubeconfig of this cluster with its credentials inline (``user``: the admin token by default), as a
        Secret carries one (a HostClaim's identityRef, Cluster API's <cluster>-kubeconfig)."""
        return yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "management",
            "clusters": [{"name": "management", "cluster": {
                "server": self.server,
                "certificate-authority-data": base64.b64encode(self.ca_cert.read_bytes()).decode()}}],
            "users": [{"name": "operator", "user": user or {"token": self.token}}],
            "contexts": [{"name": "management", "context": {"cluster": "management", "user": "operator"}}]})

    def stop(self) -> None:
        stopped = bool(self.processes)
        for process in reversed(list(self.processes.values())):
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()
        if stopped:
            self.pids_file.unlink(missing_ok=True)

    def stop_api(self) -> None:
        """Stop kube-apiserver alone (etcd keeps the cluster's state): the API is down until start_api()."""
        process = self.processes["kube-apiserver"]
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def start_api(self) -> None:
        """Start kube-apiserver again as it was (same port, certificates and token), and wait until it serves."""
        self._spawn("kube-apiserver", *self.commands["kube-apiserver"])
        self._wait_ready()

    def __enter__(self) -> KubeCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- use ---------------------------------------------------------------------------------------

    def api_client(self) -> Any:
        from kubernetes import client

        configuration = client.Configuration()
        configuration.host = self.server
        configuration.api_key = {"authorization": f"Bearer {self.token}"}
        configuration.ssl_ca_cert = str(self.ca_cert)
        return client.ApiClient(configuration)

    def install_crds(self, paths: list[Path] | None = None, timeout: float = 60.0) -> list[str]:
        """Create (or replace) every CRD in ``paths``; wait until each is Established and served."""
        from metal3_operator.crds import CRDError, install

        try:
            return install(self.api_client(), list(CRD_FILES if paths is None else paths), timeout,
                           conversion=self.conversion)
        except CRDError as e:
            raise ClusterError(str(e)) from None

    def new_namespace(self, prefix: str = "test") -> str:
        from kubernetes import client

        name = f"{prefix[:40]}-{secrets.token_hex(4)}".lower()
        client.CoreV1Api(self.api_client()).create_namespace({"metadata": {"name": name}})
        return name

    def delete_namespace(self, name: str) -> None:
        """Delete the namespace, and let go what finalizers its custom objects still carry. The test's operators
        have stopped, so nothing would ever take them off, and the namespace controller sweeps a namespace stuck
        Terminating (a list and a delete of every kind) every 15 s for the rest of the session: 20 such
        namespaces and 1367 sweeps on one worker's cluster 28 minutes into make test."""
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        api = self.api_client()
        client.CoreV1Api(api).delete_namespace(name)
        custom = client.CustomObjectsApi(api)
        for crd in client.ApiextensionsV1Api(api).list_custom_resource_definition().items:
            if crd.spec.scope != "Namespaced":
                continue
            kind = (crd.spec.group, next(v.name for v in crd.spec.versions if v.storage), name, crd.spec.names.plural)
            with contextlib.suppress(ApiException):
                for item in custom.list_namespaced_custom_object(*kind)["items"]:
                    if item["metadata"].get("finalizers"):
                        with contextlib.suppress(ApiException):  # gone meanwhile
                            custom.patch_namespaced_custom_object(*kind, item["metadata"]["name"],
                                                                  {"metadata": {"finalizers": None}})


# -- CLI -------------------------------------------------------------------------------------------

def _up(directory: Path) -> int:
    if (directory / "pids").exists() and _running(directory):
        print(f"a cluster already runs from {directory}; `make cluster-down` first", file=sys.stderr)
        return 1
    cluster = KubeCluster(directory)
    cluster.start()
    try:
        installed = cluster.install_crds()
    except BaseException:
        cluster.stop()  # a cluster that is not what `up` promises is not left running
        raise
    atexit.unregister(cluster.stop)  # detached: it outlives this command
    print(f"kube-apiserver {cluster.server} ready; {len(installed)} CRDs installed")
    print(f"export KUBECONFIG={cluster.kubeconfig.resolve()}")
    return 0


def _running(directory: Path) -> list[int]:
    pids = []
    for line in (directory / "pids").read_text().split():
        try:
            os.kill(int(line), 0)
            pids.append(int(line))
        except (ProcessLookupError, ValueError):
            pass
    return pids


def _down(directory: Path) -> int:
    if not (directory / "pids").exists():
        print("no cluster runs from", directory)
        return 0
    pids = _running(directory)
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while _running(directory) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in _running(directory):
        os.kill(pid, signal.SIGKILL)
    (directory / "pids").unlink()
    print(f"stopped {len(pids)} processes")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["up", "down"])
    parser.add_argument("--dir", type=Path, default=REPO / "build" / "cluster")
    args = parser.parse_args(argv)
    try:
        return _up(args.dir) if args.command == "up" else _down(args.dir)
    except ClusterError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
