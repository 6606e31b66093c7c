# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""PreprovisioningImage: the deploy ramdisk one host boots, as baremetal-operator asks for it and serves it.

When the provisioner builds per-host images (the Ironic option ``build_preprov_image``, upstream's
``--build-preprov-image``), a host owns a PreprovisioningImage of its name (hosts/baremetalhost.py makes it, as
upstream's host controller does): ``spec.acceptFormats`` from its BMC's boot method (an ISO first for virtual
media, an initrd), its ``architecture`` and ``networkDataName`` (its preprovisioningNetworkDataName). This
module is the rest of it:

- ``reconcile_preprovisioning_image``: upstream's PreprovisioningImage controller with its default image provider
  (pkg/controllers/preprovisioningimage_controller.go, pkg/imageprovider/default.go) - the first accepted format
  the operator's options serve, their URLs for the image's architecture, written in ``status`` with the
  conditions ``Ready`` and ``Error`` of the generation they judged;
- ``image_for_host``: what the host reads of it - the image, once it is ready for what the host asks now
  (upstream's preprovImageAvailable), or ``ImageBuildError`` when building it failed.

The URLs are the operator's, but a tenant reads them back in the image's status and its host boots them: each
passes the outbound policy (core/outbound.py) as a tenant's URL would - a loopback or link-local host only when
``allowed_local_hosts`` names it. Not upstream's (it hands any URL on).
"""
from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import Any, Mapping

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Conflict, NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref, owner_reference
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy, Refused
from ansible_collections.metal3.baremetal.plugins.module_utils.core.provisioner import (
    INITRD,
    ISO,
    PreprovisioningImage,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.reconcile import Result
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.writes import (
    ensure_finalizer,
    remove_finalizer,
    set_condition,
)

API = "metal3.io/v1alpha1"
KIND = "PreprovisioningImage"
FINALIZER = "preprovisioningimage.metal3.io"  # the image's controller's
HOST_FINALIZER = "baremetalhost.metal3.io/preprovisioningImage"  # the host's, while it may boot the image
READY, ERROR = "Ready", "Error"
# The conditions' reasons, upstream's.
SUCCESS, CONFIGURATION_ERROR, MISSING_NETWORK_DATA = "ImageSuccess", "ConfigurationError", "MissingNetworkData"
RETRY_MIN, RETRY_MAX = 10.0, 600.0  # upstream's minRetryDelay and maxRetryDelay
HOST_RETRY = 300.0  # upstream's preprovImageRetryDelay: a host waiting for its image looks again after it


def architecture(host: Object) -> str:
    """Upstream's getHostArchitecture: spec.architecture, else the inspected CPU's, else the controller's own."""
    arch = (host.get("spec") or {}).get("architecture")
    if arch:
        return str(arch)
    arch = ((((host.get("status") or {}).get("hardware") or {}).get("cpu")) or {}).get("arch")
    if arch:
        return str(arch)
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine())


def wanted_spec(host: Object, formats: list[str]) -> dict[str, Any]:
    """The spec a host asks of its image: the formats its provisioner accepts, its architecture, its network data."""
    spec: dict[str, Any] = {"architecture": architecture(host), "acceptFormats": list(formats)}
    network_data = (host.get("spec") or {}).get("preprovisioningNetworkDataName")
    if network_data:
        spec["networkDataName"] = network_data
    return spec


def new_image(host: Object, spec: Mapping[str, Any]) -> Object:
    """The PreprovisioningImage upstream's host controller makes: the host's name and labels, controlled by it, the
    host's finalizer on it."""
    metadata = host["metadata"]
    image_metadata: dict[str, Any] = {"name": metadata["name"], "namespace": metadata["namespace"],
                                      "finalizers": [HOST_FINALIZER],
                                      "ownerReferences": [owner_reference(host, controller=True)]}
    if metadata.get("labels"):
        image_metadata["labels"] = dict(metadata["labels"])
    return {"apiVersion": API, "kind": KIND, "metadata": image_metadata, "spec": dict(spec)}


def image_changes(image: Object, host: Object, spec: Mapping[str, Any]) -> Object | None:
    """The image as the host wants it (its finalizer, the host's labels, ``spec``), or None when it is so."""
    metadata = dict(image["metadata"])
    changed = False
    if HOST_FINALIZER not in (metadata.get("finalizers") or []):
        metadata["finalizers"] = [*(metadata.get("finalizers") or []), HOST_FINALIZER]
        changed = True
    labels = dict(metadata.get("labels") or {})
    for key, value in (host["metadata"].get("labels") or {}).items():
        if labels.get(key) != value:
            labels[key] = value
            changed = True
    metadata["labels"] = labels
    if (image.get("spec") or {}) != dict(spec):
        changed = True
    return {**image, "metadata": metadata, "spec": dict(spec)} if changed else None


class ImageBuildError(Exception):
    """The image's Error condition is True: the host records it (upstream's imageBuildError)."""


def _conditions(image: Object) -> dict[str, dict[str, Any]]:
    return {c.get("type"): c for c in (image.get("status") or {}).get("conditions") or []}


def image_for_host(image: Object, network_data_version: str | None) -> PreprovisioningImage | None:
    """Upstream's preprovImageAvailable: the image once its status is of its spec (architecture, an accepted format,
    the network data secret's name and ``network_data_version``: its resourceVersion, None when it cannot be read)
    and Ready for its generation; None while it is not; ImageBuildError when building it failed (for its current
    spec, or for the status it has)."""
    spec, status = image.get("spec") or {}, image.get("status") or {}
    conditions = _conditions(image)
    error = conditions.get(ERROR) or {}
    if error.get("status") == "True" and error.get("observedGeneration") == image["metadata"].get("generation"):
        # Before the checks of the status against the spec, unlike upstream: an image that failed before any was
        # built has no architecture nor format in its status, and upstream's host would wait for it in silence.
        raise ImageBuildError(str(error.get("message") or "error building the PreprovisioningImage"))
    if status.get("architecture") != spec.get("architecture"):
        return None
    if status.get("format") not in (spec.get("acceptFormats") or []):
        return None
    network_data = status.get("networkData") or {}
    if spec.get("networkDataName") and network_data.get("version") != network_data_version:
        return None
    if (network_data.get("name") or "") != (spec.get("networkDataName") or ""):
        return None
    if error.get("status") == "True":
        raise ImageBuildError(str(error.get("message") or "error building the PreprovisioningImage"))
    ready = conditions.get(READY) or {}
    if ready.get("status") != "True" or ready.get("observedGeneration") != image["metadata"].get("generation"):
        return None
    return PreprovisioningImage(format=str(status["format"]), image_url=str(status.get("imageUrl") or ""),
                                kernel_url=str(status.get("kernelUrl") or ""),
                                extra_kernel_params=str(status.get("extraKernelParams") or ""))


# -- the default image provider ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ImageProvider:
    """Upstream's default image provider: the deploy ramdisk the options name, the same for every host of an
    architecture (a ``*_by_arch`` option's ``arch:url`` pair, else the plain URL). ``initrd`` needs a kernel."""

    kernel: str = ""
    ramdisk: str = ""
    iso: str = ""
    kernel_by_arch: str = ""
    ramdisk_by_arch: str = ""
    iso_by_arch: str = ""

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> ImageProvider:
        return cls(**{name: str(params.get(option) or "") for name, option in _OPTIONS.items()})

    def supports(self, format_: str) -> bool:
        """Upstream's SupportsFormat: an ISO URL for iso; a kernel and a ramdisk URL for initrd."""
        if format_ == ISO:
            return bool(self.iso)
        return format_ == INITRD and bool(self.kernel) and bool(self.ramdisk)

    def build(self, format_: str, arch: str) -> dict[str, str]:
        """Upstream's BuildImage: {"imageUrl", "kernelUrl"} for ``arch``, each with the option it came from."""
        if format_ == ISO:
            return {"imageUrl": _by_arch(self.iso_by_arch, arch) or self.iso}
        return {"imageUrl": _by_arch(self.ramdisk_by_arch, arch) or self.ramdisk,
                "kernelUrl": _by_arch(self.kernel_by_arch, arch) or self.kernel}

    def option(self, format_: str, field: str, arch: str) -> str:
        """The option a built URL comes from, for an error to name."""
        name = {(ISO, "imageUrl"): "iso", (INITRD, "imageUrl"): "ramdisk", (INITRD, "kernelUrl"): "kernel"}[
            (format_, field)]
        if _by_arch(getattr(self, f"{name}_by_arch"), arch):
            name = f"{name}_by_arch"
        return next(option for attribute, option in _OPTIONS.items() if attribute == name)


_OPTIONS = {"kernel": "deploy_kernel_url", "ramdisk": "deploy_ramdisk_url", "iso": "deploy_iso_url",
            "kernel_by_arch": "deploy_kernel_by_arch", "ramdisk_by_arch": "deploy_ramdisk_by_arch",
            "iso_by_arch": "deploy_iso_by_arch"}


def _by_arch(pairs: str, arch: str) -> str:
    """Upstream's lookupByArch: the URL of ``arch`` (any case) in comma-separated ``arch:url`` pairs, or ''."""
    if not pairs or not arch:
        return ""
    for entry in pairs.split(","):
        name, found, url = entry.partition(":")
        if found and name.strip().lower() == arch.lower():
            return url.strip()
    return ""


# -- the reconcile ----------------------------------------------------------------------------------------

def reconcile_preprovisioning_image(store: Store, ref: Ref, provider: ImageProvider,
                                    outbound: OutboundPolicy | None = None, dry_run: bool = False) -> Result:
    """One reconcile of the PreprovisioningImage ``ref``: its finalizer, then its status - the image for the first
    of spec.acceptFormats that ``provider`` serves, for spec.architecture, Ready; or Error with upstream's reason
    (no format served, the network data secret missing, a URL the outbound policy refuses). ``outbound``: the
    controller's own hosts a URL may name (none by default)."""
    image = store.get_if_exists(ref)
    if image is None:
        return Result(None, message="not found")
    metadata = image["metadata"]
    if metadata.get("deletionTimestamp"):
        if any(f != FINALIZER for f in metadata.get("finalizers") or []):
            return Result(image, message="being deleted: waiting for its host to let it go")
        if FINALIZER in (metadata.get("finalizers") or []):
            remove_finalizer(store, ref, FINALIZER, dry_run)
            return Result(None, True, message="deleted")
        return Result(image, message="being deleted")
    changed = False
    if FINALIZER not in (metadata.get("finalizers") or []):
        image = ensure_finalizer(store, ref, FINALIZER, dry_run)
        changed = True
    status, requeue, message = _status(store, image, provider, outbound or OutboundPolicy())
    old = image.get("status") or {}
    if status != old:
        try:
            image = store.update_status({**image, "status": status}, dry_run=dry_run)
        except (Conflict, NotFound):
            return Result(image, changed, 0, f"{ref} changed while reconciling; will look again")
        changed = True
    else:
        message = f"up to date: {message}"
    waits_on = [Ref("v1", "Secret", image["spec"]["networkDataName"], ref.namespace)] \
        if requeue is not None and (image.get("spec") or {}).get("networkDataName") else []
    return Result(image, changed, requeue, message, waits_on)


def _status(store: Store, image: Object, provider: ImageProvider,
            outbound: OutboundPolicy) -> tuple[dict[str, Any], float | None, str]:
    """The status upstream's controller writes, when to look again, and what it came to."""
    generation = image["metadata"].get("generation")
    spec, old = image.get("spec") or {}, image.get("status") or {}
    status = dict(old)

    def error(reason: str, message: str) -> tuple[dict[str, Any], float | None, str]:
        """Upstream's setError; only a missing secret is looked for again (the options change with a restart)."""
        status.pop("imageUrl", None)
        conditions = set_condition(old.get("conditions"), READY, False, reason, observed_generation=generation)
        status["conditions"] = set_condition(conditions, ERROR, True, reason, message,
                                             observed_generation=generation)
        return status, _retry(old) if reason == MISSING_NETWORK_DATA else None, message

    format_ = next((f for f in spec.get("acceptFormats") or [] if provider.supports(f)), "")
    if not format_:
        return error(CONFIGURATION_ERROR, "No acceptable image format supported")
    network_data: dict[str, str] = {}
    if spec.get("networkDataName"):
        secret = store.get_if_exists(Ref("v1", "Secret", spec["networkDataName"], image["metadata"]["namespace"]))
        if secret is None:
            return error(MISSING_NETWORK_DATA, "NetworkData secret not found")
        network_data = {"name": spec["networkDataName"], "version": str(secret["metadata"].get("resourceVersion"))}
    arch = str(spec.get("architecture") or "")
    built = provider.build(format_, arch)
    for field, url in built.items():
        try:
            outbound.check(url, provider.option(format_, field, arch))
        except Refused as e:
            return error(CONFIGURATION_ERROR, str(e))
    for key in ("imageUrl", "kernelUrl", "extraKernelParams"):
        status.pop(key, None)
    status.update({key: value for key, value in built.items() if value})
    status.update(format=format_, architecture=arch, networkData=network_data)
    conditions = set_condition(old.get("conditions"), READY, bool(built.get("imageUrl")), SUCCESS, "Generated image",
                               observed_generation=generation)
    status["conditions"] = set_condition(conditions, ERROR, False, SUCCESS, observed_generation=generation)
    return status, None, f"{format_} image for {arch or 'any architecture'}: {built['imageUrl']}"


def _retry(old: Mapping[str, Any]) -> float:
    """Upstream's getErrorRetryDelay, without its clock: the least delay, then the most once it kept failing."""
    return RETRY_MAX if (_conditions({"status": old}).get(ERROR) or {}).get("status") == "True" else RETRY_MIN
