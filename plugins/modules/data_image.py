#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: data_image
short_description: Ask for an image (an ISO) in a provisioned host's virtual CD drive (a DataImage), or for none
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - A C(metal3.io) DataImage names an image that Ironic puts in the virtual CD drive (virtual media) of the
    provisioned BareMetalHost of the same name, as baremetal-operator's. This module reconciles it as upstream's
    controller does - the host owns it, it holds the C(dataimage.metal3.io) finalizer while the host still has its
    image in the drive, and C(status.error) says what reading the drive said.
  - With O(url), the DataImage is made, or its C(spec.url) set. With O(state=absent), it is deleted.
  - Nothing is attached or detached here. The host does it as it is next powered on, as upstream - a reboot
    annotation (C(reboot.metal3.io)), or C(online) false then true, reconciled by
    M(metal3.baremetal.baremetal_host) or the operator; C(status.attachedImage.url) then names the image. A
    deleted DataImage goes once the host has detached its image, at its next power on (at once when the host is
    detached or not registered).
  - The URL is the tenant's and Ironic fetches it - it must not name the controller's own loopback or link-local
    hosts (unless O(allowed_local_hosts) names them). Such a URL is refused, in C(status.error), naming
    C(spec.url), and never attached.
options:
  name:
    description: The host (the DataImage has its name).
    type: str
    required: true
  namespace:
    description: Their namespace.
    type: str
    default: default
  url:
    description:
      - The image's URL (C(spec.url)); http or https, as Ironic's virtual media takes them. Upstream's admission
        admits ftp, gopher and oci too, which Ironic refuses. Without it, the DataImage is only reconciled.
    type: str
  state:
    description: C(absent) deletes the DataImage (its image is detached at the host's next power on).
    type: str
    choices: [present, absent]
    default: present
extends_documentation_fragment:
  - metal3.baremetal.store
  - metal3.baremetal.ironic
  - metal3.baremetal.outbound
  - metal3.baremetal.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: An ISO for node-0's virtual CD drive
  metal3.baremetal.data_image:
    name: node-0
    namespace: metal3
    url: http://images.example.com/config.iso

- name: Reboot node-0 (its reboot annotation, merged into it), which attaches it first
  metal3.baremetal.resource:
    definition:
      apiVersion: metal3.io/v1alpha1
      kind: BareMetalHost
      metadata: {name: node-0, namespace: metal3, annotations: {reboot.metal3.io: ""}}

- name: Take it out again at the next power on
  metal3.baremetal.data_image:
    name: node-0
    namespace: metal3
    state: absent
"""

RETURN = r"""
data_image:
  description: The DataImage after its reconcile; empty once it is gone.
  returned: always
  type: dict
  contains:
    url:
      description: The image asked for (C(spec.url)).
      type: str
    attached_url:
      description: The image the host last attached (C(status.attachedImage.url)); empty when none.
      type: str
    error_count:
      description: Failures in a row of attaching, detaching or reading the drive (C(status.error.count)).
      type: int
    error_message:
      description: The last of them (C(status.error.message)), naming C(spec.url) when it is refused.
      type: str
    last_reconciled:
      description: When the host last looked at its drive for it (C(status.lastReconciled)).
      type: str
    deleting:
      description: Whether it is deleted and waits for the host to detach its image.
      type: bool
requeue_after:
  description: Seconds after which it should be reconciled again; null when only a change will do.
  returned: always
  type: float
waits_on:
  description:
    - The objects whose change may let it go on (its host, until the host has attached or detached its image), in
      the form M(metal3.baremetal.requeue_after) takes as O(metal3.baremetal.requeue_after#module:wait_on).
  returned: always
  type: list
  elements: dict
message:
  description: What the reconcile did.
  returned: always
  type: str
"""

from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.ansible_module import run_module
from ansible_collections.metal3.baremetal.plugins.module_utils.args import (
    IRONIC_MINIMUMS,
    store_options,
    with_ironic,
    with_outbound,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref, check_name, check_namespace
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import dataimage
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import Ironic, IronicOptions
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.provisioner import ironic_provisioners
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec

MAX_URL = 2048


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    name, namespace = check_name(params["name"], "name"), check_namespace(params["namespace"], "namespace")
    url = params["url"]
    if url is not None and (not url or len(url) > MAX_URL):
        raise BadRequest(f"url: must be a URL of 1 to {MAX_URL} characters")
    if url is not None and params["state"] == "absent":
        raise BadRequest("url: not with state absent")
    ref = Ref(dataimage.API, dataimage.KIND, name, namespace)
    options = IronicOptions.from_params(params)
    provisioners = ironic_provisioners(Ironic(options, dry_run=check_mode), options.provisioning_limit)
    with open_store(store_options(params)) as store:
        before = store.get_if_exists(ref)
        if before is None and url is None and params["state"] == "present":
            raise BadRequest(f"name: {namespace} has no DataImage {name} (url makes one)")
        changed = False
        if params["state"] == "absent":
            if before is not None and not before["metadata"].get("deletionTimestamp"):
                store.delete(ref, dry_run=check_mode)
                changed = True
        elif url is not None and ((before or {}).get("spec") or {}).get("url") != url:
            dataimage.ask(store, ref, url, check_mode)
            changed = True
        step = dataimage.reconcile_data_image(store, provisioners, ref, check_mode, OutboundPolicy.from_params(params))
        after = step.obj if step.obj is not None and not (check_mode and params["state"] == "absent") else None
    return {**step.fields(), "changed": changed or step.changed, "waits_on": step.wait_targets(),
            "data_image": dataimage.summary(after) if after is not None else {},
            "diff": {"before": {"url": ((before or {}).get("spec") or {}).get("url")} if before else {},
                     "after": {"url": url or ((before or {}).get("spec") or {}).get("url")}
                     if params["state"] == "present" else {}}}


SPEC = ModuleSpec(
    argument_spec=with_outbound(with_ironic({
        "name": {"type": "str", "required": True},
        "namespace": {"type": "str", "default": "default"},
        "url": {"type": "str"},
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    })),
    run=run,
    minimums=IRONIC_MINIMUMS,
)


def main() -> None:
    run_module(SPEC)


if __name__ == "__main__":
    main()
