# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  allowed_local_hosts:
    description:
      - Hosts of this controller's own (loopback or link-local, as written in a URL, e.g. C(127.0.0.1) or
        C(localhost)) that a URL a tenant writes may name anyway - a claim's image and checksum URLs, a
        DataImage's URL, the server of a claim's C(spec.identityRef) kubeconfig or of a workload cluster's
        C(<cluster>-kubeconfig) Secret, and the URLs of the PreprovisioningImages the operator's options serve.
      - Every other such URL must be http or https (or, for a bare-metal claim's image, which Ironic fetches,
        any scheme upstream admits) and its host must not be, or resolve to, a loopback, link-local or
        unspecified address; the object says which field is refused. Default from
        E(METAL3_ALLOWED_LOCAL_HOSTS) (comma-separated), else none.
    type: list
    elements: str
    default: []
"""
