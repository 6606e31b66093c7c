# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  libvirt_uri:
    description:
      - The libvirt that defines the virtual machines serving HostClaims of C(spec.kind=libvirt).
      - Default from E(METAL3_LIBVIRT_URI), else C(qemu:///system).
    type: str
    default: qemu:///system
  libvirt_bridge:
    description:
      - The bridge every NIC of those virtual machines joins (where their networks, and the VLANs of their
        network data, are).
      - Without it (and without O(libvirt_storage_dir)) this run serves no claims of kind libvirt, and such a claim
        says so. Default from E(METAL3_LIBVIRT_BRIDGE).
    type: str
  libvirt_storage_dir:
    description:
      - The directory of those machines' disks (copy-on-write layers over their images), config drives and serial
        logs, and of the images they start from (fetched once per checksum). Default from
        E(METAL3_LIBVIRT_STORAGE_DIR).
    type: path
  libvirt_domain_type:
    description:
      - C(kvm), C(qemu) (emulation), or C(auto) - kvm where C(/dev/kvm) can be used. Default from
        E(METAL3_LIBVIRT_DOMAIN_TYPE).
    type: str
    choices: [auto, kvm, qemu]
    default: auto
  libvirt_max_cpus:
    description:
      - The most virtual CPUs a HostClaim of C(spec.kind=libvirt) gets; a claim whose C(spec.args.cpus) asks for
        more fails, naming the arg and this limit. Default from E(METAL3_LIBVIRT_MAX_CPUS), else 16.
    type: int
    default: 16
  libvirt_max_memory:
    description:
      - The most memory such a machine gets, a Kubernetes quantity (C(64Gi)); a claim whose C(spec.args.memory)
        asks for more fails, naming the arg and this limit. Default from E(METAL3_LIBVIRT_MAX_MEMORY), else C(64Gi).
      - Whatever this says, a claim asking for more than 16Ti is refused when it is written.
    type: str
    default: 64Gi
  libvirt_max_disk:
    description:
      - The largest disk such a machine gets, a quantity; a claim whose C(spec.args.disk) asks for more fails,
        naming the arg and this limit. Default from E(METAL3_LIBVIRT_MAX_DISK), else C(512Gi).
      - Whatever this says, a claim asking for more than 64Ti is refused when it is written.
    type: str
    default: 512Gi
  libvirt_max_image_size:
    description:
      - The largest image (a quantity of bytes) downloaded for such a machine; a larger one fails the claim, naming
        C(spec.image.url), and nothing of it is kept. Default from E(METAL3_LIBVIRT_MAX_IMAGE_SIZE), else C(20Gi).
    type: str
    default: 20Gi
  libvirt_image_timeout:
    description:
      - Seconds one image's download (its checksum file's included) may take in all; a slower one fails the claim
        and is tried again on a later reconcile. Default from E(METAL3_LIBVIRT_IMAGE_TIMEOUT), else 1800.
    type: int
    default: 1800
"""
