# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  backend:
    description:
      - Where objects are kept. C(local) is an embedded SQLite file on the controller (a bastion with no
        cluster); C(kubernetes) is a cluster, reached with the kubernetes.core options below.
      - When not set, the E(METAL3_BACKEND) environment variable, else C(local).
    type: str
    choices: [local, kubernetes]
  store_path:
    description:
      - The SQLite file of the C(local) backend, created mode 0600 when missing. Several ansible-playbook
        processes may share it at once.
      - When not set, the E(METAL3_STORE_PATH) environment variable, else C(~/.local/share/metal3-baremetal/store.db).
    type: path
  kubeconfig:
    description:
      - Path to a kubeconfig file, or its content as a mapping, for the C(kubernetes) backend.
      - When not set, E(K8S_AUTH_KUBECONFIG), then E(KUBECONFIG) or C(~/.kube/config), or the in-cluster
        service account.
    type: raw
  context:
    description: The kubeconfig context to use. Default from E(K8S_AUTH_CONTEXT).
    type: str
  host:
    description: URL of the Kubernetes API. Default from E(K8S_AUTH_HOST).
    type: str
  api_key:
    description: Bearer token for the Kubernetes API. Default from E(K8S_AUTH_API_KEY).
    type: str
  validate_certs:
    description: Whether to verify the API server's certificate. Default from E(K8S_AUTH_VERIFY_SSL).
    type: bool
    aliases: [verify_ssl]
  ca_cert:
    description: CA certificate of the API server. Default from E(K8S_AUTH_SSL_CA_CERT).
    type: path
    aliases: [ssl_ca_cert]
  client_cert:
    description: Client certificate. Default from E(K8S_AUTH_CERT_FILE).
    type: path
    aliases: [cert_file]
  client_key:
    description: Key of the client certificate. Default from E(K8S_AUTH_KEY_FILE).
    type: path
    aliases: [key_file]
requirements:
  - PyYAML and jsonschema on the controller
  - kubernetes (the Python client) on the controller, for the C(kubernetes) backend
notes:
  - The task runs on the controller, where the store is, through an action plugin of the same name.
"""
