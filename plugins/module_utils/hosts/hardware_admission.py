# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Admission of baremetal-operator's day-2 hardware kinds: the rules of its DataImage and HostFirmwareComponents
webhooks (internal/webhooks/metal3.io/v1alpha1/dataimage_validation.go, hostfirmwarecomponents_validation.go).

Both check every create and update, never a status write, and only URLs, with upstream's validateURL
(common_validation.go; hosts/admission.py ``request_uri_problem``): a URL Go's url.ParseRequestURI reads, of
scheme http, https, ftp, gopher or oci. Each problem names its field and carries upstream's text.

Upstream has no webhook for HostFirmwareSettings, FirmwareSchema, HostUpdatePolicy or PreprovisioningImage:
their schemas alone admit them. What its controllers check of HostFirmwareSettings (against the FirmwareSchema)
and of HostFirmwareComponents' component names is in hosts/firmware.py, for the reconciles to report, as
upstream's do, in the ``Valid`` condition.
"""
from __future__ import annotations

from typing import Iterator

from ansible_collections.metal3.baremetal.plugins.module_utils.api import admission
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.admission import Problem, request_uri_problem
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.firmware import COMPONENTS_KIND

GROUP = "metal3.io"
DATA_IMAGE_KIND = "DataImage"


def _refuse(kind: str, obj: Object, problems: list[Problem]) -> None:
    if problems:
        name = (obj.get("metadata") or {}).get("name", "")
        raise Invalid(f'{kind}.{GROUP} "{name}" is invalid: ' + "; ".join(f"{f}: {w}" for f, w in problems))


def data_image_problems(image: Object) -> Iterator[Problem]:
    """Upstream's validateDataImage: spec.url."""
    url = str((image.get("spec") or {}).get("url") or "")
    problem = request_uri_problem(url)
    if problem:
        yield "spec.url", f'URL "{url}" is invalid: {problem}'


def admit_data_image(store: admission.Reader, new: Object, old: Object | None) -> None:
    """Upstream's DataImage webhook, the same on create and update."""
    _refuse(DATA_IMAGE_KIND, new, list(data_image_problems(new)))


def firmware_components_problems(components: Object) -> Iterator[Problem]:
    """Upstream's validateHostFirmwareComponents: the URL of each of spec.updates."""
    for index, update in enumerate((components.get("spec") or {}).get("updates") or []):
        url, component = str(update.get("url") or ""), str(update.get("component") or "")
        problem = request_uri_problem(url)
        if problem:
            yield (f"spec.updates[{index}].url",
                   f'invalid URL "{url}" in FirmwareUpdate in component "{component}": {problem}')


def admit_firmware_components(store: admission.Reader, new: Object, old: Object | None) -> None:
    """Upstream's HostFirmwareComponents webhook, the same on create and update."""
    _refuse(COMPONENTS_KIND, new, list(firmware_components_problems(new)))


admission.register(GROUP, DATA_IMAGE_KIND, admit_data_image)
admission.register(GROUP, COMPONENTS_KIND, admit_firmware_components)
