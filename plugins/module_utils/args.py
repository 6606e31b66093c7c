# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Argument specs shared by the modules; each has one doc fragment (plugins/doc_fragments)."""
from __future__ import annotations

import copy
from typing import Any, Mapping

from ansible.module_utils.basic import env_fallback
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.metal3.baremetal.plugins.module_utils.api.kinds import lookup
from ansible_collections.metal3.baremetal.plugins.module_utils.api.validation import validate
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, merge_patch

# The store: documented once in the metal3.baremetal.store doc fragment. Option names and
# K8S_AUTH_* fallbacks are kubernetes.core's, so AWX's Kubernetes credential works unchanged.
STORE_ARG_SPEC: dict[str, dict[str, Any]] = {
    "backend": {"type": "str", "choices": ["local", "kubernetes"], "fallback": (env_fallback, ["METAL3_BACKEND"])},
    "store_path": {"type": "path", "fallback": (env_fallback, ["METAL3_STORE_PATH"])},
    "kubeconfig": {"type": "raw", "fallback": (env_fallback, ["K8S_AUTH_KUBECONFIG"])},
    "context": {"type": "str", "fallback": (env_fallback, ["K8S_AUTH_CONTEXT"])},
    "host": {"type": "str", "fallback": (env_fallback, ["K8S_AUTH_HOST"])},
    "api_key": {"type": "str", "no_log": True, "fallback": (env_fallback, ["K8S_AUTH_API_KEY"])},
    "validate_certs": {"type": "bool", "aliases": ["verify_ssl"], "fallback": (env_fallback, ["K8S_AUTH_VERIFY_SSL"])},
    "ca_cert": {"type": "path", "aliases": ["ssl_ca_cert"], "fallback": (env_fallback, ["K8S_AUTH_SSL_CA_CERT"])},
    "client_cert": {"type": "path", "aliases": ["cert_file"], "fallback": (env_fallback, ["K8S_AUTH_CERT_FILE"])},
    "client_key": {"type": "path", "aliases": ["key_file"], "no_log": False,
                   "fallback": (env_fallback, ["K8S_AUTH_KEY_FILE"])},
}


def with_store(spec: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A module's own argument spec plus the store options."""
    full = copy.deepcopy(STORE_ARG_SPEC)
    full.update(copy.deepcopy(spec))
    return full


def store_options(params: dict[str, Any]) -> dict[str, Any]:
    kubeconfig = params.get("kubeconfig")
    # raw, as kubernetes.core's: a file's path or the parsed file; anything else would reach the client library
    if kubeconfig is not None and not isinstance(kubeconfig, (str, dict)):
        raise BadRequest(f"kubeconfig: must be the path of a kubeconfig file or its content as a mapping, "
                         f"not {kubeconfig!r}")
    return {name: params.get(name) for name in STORE_ARG_SPEC}


def resolve_store_options(given: Mapping[str, Any]) -> dict[str, Any]:
    """The store options a plugin that is no module (the inventory, the lookup) was given, checked and completed
    from the environment (METAL3_*, K8S_AUTH_*) exactly as a module's are; BadRequest naming the option."""
    validator = ArgumentSpecValidator(copy.deepcopy(STORE_ARG_SPEC))
    validation = validator.validate({name: value for name, value in given.items()
                                     if name in STORE_ARG_SPEC and value is not None})
    if validation.error_messages:
        raise BadRequest("; ".join(validation.error_messages))
    return store_options(validation.validated_parameters)


def validate_definition(definition: Object, existing: Object | None) -> None:
    """The kind's CRD schema checks on what ``definition`` would make of the stored object (a merge patch on
    ``existing``, or a new object), before any engine code reads the spec: a wrong type is a field error
    ('spec.prefix: Invalid value: 'abc': must be of type integer') and nothing is written."""
    validate(lookup(definition["apiVersion"], definition["kind"]), merge_patch(existing or {}, definition))


# Ironic: documented once in the metal3.baremetal.ironic doc fragment. Env names are openstacksdk's
# (OS_CLOUD) and baremetal-operator's (IRONIC_ENDPOINT, PROVISIONING_LIMIT, IRONIC_CLIENT_TIMEOUT); upstream's
# --max-provisioning-retries flag is MAX_PROVISIONING_RETRIES here.
IRONIC_ARG_SPEC: dict[str, dict[str, Any]] = {
    "ironic_cloud": {"type": "str", "fallback": (env_fallback, ["OS_CLOUD"])},
    "ironic_url": {"type": "str", "fallback": (env_fallback, ["IRONIC_ENDPOINT"])},
    "ironic_username": {"type": "str", "fallback": (env_fallback, ["IRONIC_USERNAME"])},
    "ironic_password": {"type": "str", "no_log": True, "fallback": (env_fallback, ["IRONIC_PASSWORD"])},
    "ironic_timeout": {"type": "int", "fallback": (env_fallback, ["IRONIC_CLIENT_TIMEOUT"])},
    "provisioning_limit": {"type": "int", "fallback": (env_fallback, ["PROVISIONING_LIMIT"])},
    "max_provisioning_retries": {"type": "int", "fallback": (env_fallback, ["MAX_PROVISIONING_RETRIES"])},
    "deploy_kernel_url": {"type": "str", "fallback": (env_fallback, ["DEPLOY_KERNEL_URL"])},
    "deploy_ramdisk_url": {"type": "str", "fallback": (env_fallback, ["DEPLOY_RAMDISK_URL"])},
    "deploy_iso_url": {"type": "str", "fallback": (env_fallback, ["DEPLOY_ISO_URL"])},
    # Upstream's --build-preprov-image flag, and its default image provider's per-architecture URLs.
    "build_preprov_image": {"type": "bool", "fallback": (env_fallback, ["BUILD_PREPROV_IMAGE"])},
    "deploy_kernel_by_arch": {"type": "str", "fallback": (env_fallback, ["DEPLOY_KERNEL_BY_ARCH"])},
    "deploy_ramdisk_by_arch": {"type": "str", "fallback": (env_fallback, ["DEPLOY_RAMDISK_BY_ARCH"])},
    "deploy_iso_by_arch": {"type": "str", "fallback": (env_fallback, ["DEPLOY_ISO_BY_ARCH"])},
}


# The least values of the Ironic options (ModuleSpec.minimums); 0 stands for the default, as it always has.
IRONIC_MINIMUMS = {"ironic_timeout": 0, "provisioning_limit": 0, "max_provisioning_retries": 0}


def with_ironic(spec: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A module's own argument spec plus the store and Ironic options."""
    full = with_store(spec)
    full.update(copy.deepcopy(IRONIC_ARG_SPEC))
    return full


# The virtual machines that serve HostClaims of kind libvirt: documented once in the metal3.baremetal.libvirt doc
# fragment.
LIBVIRT_ARG_SPEC: dict[str, dict[str, Any]] = {
    "libvirt_uri": {"type": "str", "default": "qemu:///system", "fallback": (env_fallback, ["METAL3_LIBVIRT_URI"])},
    "libvirt_bridge": {"type": "str", "fallback": (env_fallback, ["METAL3_LIBVIRT_BRIDGE"])},
    "libvirt_storage_dir": {"type": "path", "fallback": (env_fallback, ["METAL3_LIBVIRT_STORAGE_DIR"])},
    "libvirt_domain_type": {"type": "str", "default": "auto", "choices": ["auto", "kvm", "qemu"],
                            "fallback": (env_fallback, ["METAL3_LIBVIRT_DOMAIN_TYPE"])},
    # The largest virtual machine, and image download, a claim gets (compute/libvirt.py LibvirtOptions).
    "libvirt_max_cpus": {"type": "int", "default": 16, "fallback": (env_fallback, ["METAL3_LIBVIRT_MAX_CPUS"])},
    "libvirt_max_memory": {"type": "str", "default": "64Gi", "fallback": (env_fallback, ["METAL3_LIBVIRT_MAX_MEMORY"])},
    "libvirt_max_disk": {"type": "str", "default": "512Gi", "fallback": (env_fallback, ["METAL3_LIBVIRT_MAX_DISK"])},
    "libvirt_max_image_size": {"type": "str", "default": "20Gi",
                               "fallback": (env_fallback, ["METAL3_LIBVIRT_MAX_IMAGE_SIZE"])},
    "libvirt_image_timeout": {"type": "int", "default": 1800,
                              "fallback": (env_fallback, ["METAL3_LIBVIRT_IMAGE_TIMEOUT"])},
}
# The controller's own hosts a tenant's URL may name (core/outbound.py); the metal3.baremetal.outbound fragment.
OUTBOUND_ARG_SPEC: dict[str, dict[str, Any]] = {
    "allowed_local_hosts": {"type": "list", "elements": "str", "default": [],
                            "fallback": (env_fallback, ["METAL3_ALLOWED_LOCAL_HOSTS"])},
}


def with_compute(spec: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A module's own argument spec plus the store, Ironic and libvirt options: what serves HostClaims of every
    kind."""
    full = with_ironic(spec)
    full.update(copy.deepcopy(LIBVIRT_ARG_SPEC))
    return with_outbound(full)


def with_outbound(spec: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A module's own argument spec plus the controller's own hosts a tenant's URL may name."""
    return {**spec, **copy.deepcopy(OUTBOUND_ARG_SPEC)}
