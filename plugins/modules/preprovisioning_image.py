#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: preprovisioning_image
short_description: Serve the deploy ramdisk a host asks for (its PreprovisioningImage)
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - With O(build_preprov_image), each BareMetalHost asks for a C(metal3.io) PreprovisioningImage of its name - the
    formats it can boot (C(iso) first for a BMC that boots from virtual media, C(initrd)), its architecture and its
    preprovisioning network data - and boots the deploy ramdisk that the image's status names once it is C(Ready).
  - This module reconciles those images as baremetal-operator's controller does with its default image provider - the
    first accepted format the options serve (C(iso) with O(deploy_iso_url), C(initrd) with O(deploy_kernel_url) and
    O(deploy_ramdisk_url)), the URLs for the image's architecture (O(deploy_kernel_by_arch), ...), written in
    C(status) with the conditions C(Ready) and C(Error) of the generation they judged.
  - The URLs are read back by whoever may read the images, and the hosts boot them. Each must be http or https, and
    name no loopback or link-local host unless O(allowed_local_hosts) names it; otherwise the image has C(Error)
    (reason C(ConfigurationError)) naming the option, and its host records the error.
  - Without O(name), every PreprovisioningImage of O(namespace) is reconciled.
options:
  name:
    description: The image (its host's name). Without it, every one of O(namespace).
    type: str
  namespace:
    description: Its namespace.
    type: str
    default: default
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
- name: Serve every host of metal3 the lab's agent kernel and initramfs
  metal3.baremetal.preprovisioning_image:
    namespace: metal3
    deploy_kernel_url: http://192.168.111.1:6180/images/ipa.kernel
    deploy_ramdisk_url: http://192.168.111.1:6180/images/ipa.initramfs
  register: images

- name: The hosts whose image is not ready, and why
  ansible.builtin.debug:
    msg: "{{ images.images | rejectattr('ready') | map(attribute='message') }}"
"""

RETURN = r"""
images:
  description: Each PreprovisioningImage after its reconcile.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The image's name (its host's).
      type: str
    namespace:
      description: Its namespace.
      type: str
    format:
      description: The format served (C(iso) or C(initrd)); empty when none is.
      type: str
    image_url:
      description: The ISO, or the initramfs (C(status.imageUrl)).
      type: str
    kernel_url:
      description: The kernel of an initrd image (C(status.kernelUrl)).
      type: str
    ready:
      description: Whether the image is ready for its current spec (the C(Ready) condition).
      type: bool
    error:
      description: Why it cannot be served (the C(Error) condition's message); empty when it can.
      type: str
    requeue_after:
      description: Seconds after which it should be reconciled again (a network data secret not found yet).
      type: float
    waits_on:
      description: The objects whose change may let it be served (its network data secret), as
        M(metal3.baremetal.requeue_after) takes them.
      type: list
      elements: dict
message:
  description: What the reconciles did, one line per image.
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
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import (
    Object,
    Ref,
    check_namespace,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import preprovisioning_image as ppi
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import names_to_reconcile


def summary(image: Object | None) -> dict[str, Any]:
    status = (image or {}).get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    error = conditions.get(ppi.ERROR) or {}
    return {"format": status.get("format", ""), "image_url": status.get("imageUrl", ""),
            "kernel_url": status.get("kernelUrl", ""),
            "ready": (conditions.get(ppi.READY) or {}).get("status") == "True",
            "error": error.get("message", "") if error.get("status") == "True" else ""}


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    namespace = check_namespace(params["namespace"], "namespace")
    provider = ppi.ImageProvider.from_params(params)
    outbound = OutboundPolicy.from_params(params)
    result: dict[str, Any] = {"changed": False, "images": [], "diff": {"before": {}, "after": {}}}
    messages = []
    with open_store(store_options(params)) as store:
        for name in names_to_reconcile(store, params["name"], ppi.API, (ppi.KIND,), namespace):
            ref = Ref(ppi.API, ppi.KIND, name, namespace)
            before = store.get_if_exists(ref)
            step = ppi.reconcile_preprovisioning_image(store, ref, provider, outbound, check_mode)
            messages.append(f"{ref}: {step.message}")
            if step.changed:
                result["changed"] = True
                result["diff"]["before"][name] = summary(before)
                result["diff"]["after"][name] = summary(step.obj)
            if step.obj is not None:
                result["images"].append({"name": name, "namespace": namespace, **summary(step.obj),
                                         "requeue_after": step.requeue_after, "waits_on": step.wait_targets()})
    result["message"] = "\n".join(messages)
    return result


SPEC = ModuleSpec(
    argument_spec=with_outbound(with_ironic({
        "name": {"type": "str"},
        "namespace": {"type": "str", "default": "default"},
    })),
    run=run,
    minimums=IRONIC_MINIMUMS,
)


def main() -> None:
    run_module(SPEC)


if __name__ == "__main__":
    main()
