# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  ironic_cloud:
    description:
      - The openstacksdk cloud (an entry of C(clouds.yaml)) of the Ironic to use, as the metal3.baremetal.ironic
        role writes it.
      - When not set, E(OS_CLOUD); else C(metal3) when clouds.yaml has it; else the only cloud clouds.yaml has,
        whatever its name (the clouds.yaml of AWX's OpenStack credential); several clouds and none chosen is
        an error. E(OS_CLIENT_CONFIG_FILE) names another clouds.yaml.
      - Ignored when O(ironic_url) is set.
    type: str
  ironic_url:
    description:
      - Ironic's API endpoint, instead of a cloud, for example C(http://127.0.0.1:6385).
      - Default from E(IRONIC_ENDPOINT).
    type: str
  ironic_username:
    description:
      - HTTP basic user for O(ironic_url); without it, no authentication. Default from E(IRONIC_USERNAME).
    type: str
  ironic_password:
    description: HTTP basic password for O(ironic_url). Default from E(IRONIC_PASSWORD).
    type: str
  ironic_timeout:
    description: Seconds to wait for an answer from Ironic. Default from E(IRONIC_CLIENT_TIMEOUT), else 30.
    type: int
  provisioning_limit:
    description:
      - How many hosts may inspect, provision or deprovision at once (counted on Ironic, virtual-media boots
        excepted); others wait with C(operationalStatus=delayed), as upstream's E(PROVISIONING_LIMIT).
      - Default from E(PROVISIONING_LIMIT), else 20.
    type: int
  max_provisioning_retries:
    description:
      - How many times a host's deploys of one image may fail before it stops trying it, as upstream's
        C(--max-provisioning-retries). Each failure is counted in C(status.provisioningFailCount) and the host
        deprovisions, then tries again; at the limit it rests in C(available) with C(errorType=provisioning error)
        until C(spec.image) changes or C(status.provisioningFailCount) is reset to 0.
      - C(0) means no limit. Default from E(MAX_PROVISIONING_RETRIES), else 5.
    type: int
  deploy_kernel_url:
    description:
      - URL of the deploy ramdisk's kernel (an ironic-python-agent kernel) that hosts boot to be inspected, cleaned
        and deployed; set on each node as C(driver_info.deploy_kernel), as upstream's E(DEPLOY_KERNEL_URL).
      - Used with O(deploy_ramdisk_url); both or neither. Default from E(DEPLOY_KERNEL_URL).
    type: str
  deploy_ramdisk_url:
    description:
      - URL of the deploy ramdisk (an ironic-python-agent initramfs). Default from E(DEPLOY_RAMDISK_URL).
    type: str
  deploy_iso_url:
    description:
      - URL of a bootable ironic-python-agent ISO, used instead of the kernel and ramdisk by hosts that boot from
        virtual media (C(redfish-virtualmedia://), C(idrac-virtualmedia://)); without it Ironic builds the ISO
        from the kernel and ramdisk. Default from E(DEPLOY_ISO_URL).
    type: str
  build_preprov_image:
    description:
      - Each host is given a C(PreprovisioningImage) of its name, and boots the deploy ramdisk that it serves instead
        of the one O(deploy_kernel_url) and O(deploy_ramdisk_url) name, as upstream's C(--build-preprov-image). A
        host waits for its image to be ready while it is inspected, prepared or cleaned.
      - The images are served by M(metal3.baremetal.preprovisioning_image) (the operator's
        C(metal3.baremetal.preprovisioning_image) role), from O(deploy_kernel_url), O(deploy_ramdisk_url) and
        O(deploy_iso_url), or their per-architecture O(deploy_kernel_by_arch), O(deploy_ramdisk_by_arch) and
        O(deploy_iso_by_arch).
      - Default from E(BUILD_PREPROV_IMAGE), else false.
    type: bool
  deploy_kernel_by_arch:
    description:
      - The deploy kernel per CPU architecture a PreprovisioningImage serves, as upstream's E(DEPLOY_KERNEL_BY_ARCH)
        - comma-separated C(arch:url) pairs (C(x86_64:http://images/ipa.kernel,aarch64:http://images/ipa-arm.kernel)).
        An architecture it does not name gets O(deploy_kernel_url). Default from E(DEPLOY_KERNEL_BY_ARCH).
    type: str
  deploy_ramdisk_by_arch:
    description:
      - The deploy ramdisk per CPU architecture, as O(deploy_kernel_by_arch). Default from E(DEPLOY_RAMDISK_BY_ARCH).
    type: str
  deploy_iso_by_arch:
    description:
      - The deploy ISO per CPU architecture, as O(deploy_kernel_by_arch). Default from E(DEPLOY_ISO_BY_ARCH).
    type: str
"""
