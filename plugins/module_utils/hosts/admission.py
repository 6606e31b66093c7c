# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""baremetal-operator's admission rules for BareMetalHosts: what its validating webhook refuses.

Upstream's webhook (internal/webhooks/metal3.io/v1alpha1/baremetalhost_validation.go) checks every create and
update of a host, never a status write. The same rules run here, on both backends, for every write the engine and
the modules make (store/admitted.py): each problem names its field and carries upstream's text.
"""
from __future__ import annotations

import ipaddress
import json
import re
import string
from typing import Any, Iterator

from ansible_collections.metal3.baremetal.plugins.module_utils.api import admission
from ansible_collections.metal3.baremetal.plugins.module_utils.api.kinds import lookup
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import STATUS_ANNOTATION, host_state
from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.bmc import SCHEMES, Driver, driver_for

QUALIFIED_KIND = "BareMetalHost.metal3.io"
REBOOT_ANNOTATION = "reboot.metal3.io"
INSPECT_ANNOTATION = "inspect.metal3.io"
HARDWARE_DETAILS_ANNOTATION = "inspect.metal3.io/hardwaredetails"

# What upstream's webhook allows in the status annotation (metal3api.OperationalStatusAllowed, ErrorTypeAllowed).
OPERATIONAL_STATUS_ALLOWED = ("", "OK", "discovered", "error", "delayed", "detached")
ERROR_TYPE_ALLOWED = ("", "provisioned registration error", "registration error", "inspection error",
                      "preparation error", "provisioning error", "power management error")
REBOOT_MODES = ("hard", "soft", "")
IMAGE_URL_SCHEMES = ("http", "https", "ftp", "gopher", "oci")
CHECKSUM_TYPES = ("auto", "md5", "sha256", "sha512")
INSPECTION_MODES = ("disabled", "agent", "fast")

_DNS_NAME = re.compile(r"^(([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])\.)*"
                       r"([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-]{0,61}[A-Za-z0-9])$")
_HOST_NAME_CHARACTERS = re.compile(r"[^A-Za-z0-9.\-_]")
_USERINFO = re.compile(r"^[A-Za-z0-9\-._:~!$&'()*+,;=%@]*$")
# The forms Go's net.ParseMAC reads: 6, 8 or 20 bytes, as aa:bb:..., aa-bb-... or aabb.ccdd....
_MAC = re.compile(r"^(?:[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}(?:(?::[0-9a-fA-F]{2}){2}|(?::[0-9a-fA-F]{2}){14})?"
                  r"|[0-9a-fA-F]{2}(?:-[0-9a-fA-F]{2}){5}(?:(?:-[0-9a-fA-F]{2}){2}|(?:-[0-9a-fA-F]{2}){14})?"
                  r"|[0-9a-fA-F]{4}(?:\.[0-9a-fA-F]{4}){2}(?:\.[0-9a-fA-F]{4}|(?:\.[0-9a-fA-F]{4}){7})?)$")
# The forms Go's uuid.Parse reads: 8-4-4-4-12 hex digits, in braces, after urn:uuid:, or 32 hex digits.
_UUID_HEX = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_UUID = re.compile(rf"^(?:(?:urn:uuid:)?{_UUID_HEX}|\{{{_UUID_HEX}\}}|[0-9a-f]{{32}})$", re.IGNORECASE)

# The fields of HardwareDetails (the inspect.metal3.io/hardwaredetails annotation), which upstream decodes strictly.
_HARDWARE_DETAILS: dict[str, Any] = {
    "systemVendor": {"manufacturer": None, "productName": None, "serialNumber": None},
    "firmware": {"bios": {"date": None, "vendor": None, "version": None}},
    "ramMebibytes": None,
    "nics": [{"name": None, "model": None, "mac": None, "ip": None, "speedGbps": None,
              "vlans": [{"id": None, "name": None}], "vlanId": None, "pxe": None,
              "lldp": {"switchID": None, "portID": None, "switchSystemName": None}, "pciAddress": None}],
    "storage": [{"name": None, "alternateNames": None, "rotational": None, "type": None, "sizeBytes": None,
                 "vendor": None, "model": None, "serialNumber": None, "wwn": None, "wwnVendorExtension": None,
                 "wwnWithExtension": None, "hctl": None}],
    "cpu": {"arch": None, "model": None, "clockMegahertz": None, "flags": None, "count": None},
    "hostname": None,
}

Problem = tuple[str, str]  # (field, what upstream says is wrong)


class BMCAddressError(Exception):
    """A BMC address upstream's bmc package cannot read; the message is upstream's."""


class BMCAccess:
    """What admission needs to know of a BMC address: upstream's AccessDetails, from our driver table."""

    def __init__(self, scheme: str, driver: Driver):
        self.type = scheme  # upstream's Type(): the scheme as written, "idrac-virtualmedia+https" say
        self.driver = driver

    @property
    def needs_mac(self) -> bool:
        """Whether a boot MAC is needed even with inspection on: VirtualBMC's (libvirt) cannot be discovered."""
        return self.type == "libvirt"

    @property
    def supports_raid(self) -> bool:
        return self.driver.interfaces.get("raid_interface") != "no-raid"

    @property
    def supports_secure_boot(self) -> bool:
        return self.driver.driver != "ipmi"

    @property
    def supports_out_of_band_inspection(self) -> bool:
        return self.driver.driver != "ipmi"


def parse_bmc_address(address: str) -> tuple[str, str, str]:
    """(scheme, hostname, URL) of a BMC address as upstream's bmc.GetParsedURL reads it: "ipmi:host" is
    "ipmi://host", and a bare host or host:port is IPMI; BMCAddressError with upstream's words otherwise."""
    url = address
    try:
        scheme, opaque, hostname = _parse_url(url)
        if opaque:
            url = address.replace(":", "://", 1)
        elif not scheme and not hostname:  # no scheme at all: the host was read as a path
            url = "ipmi://" + address
        if url != address:
            scheme, _opaque, hostname = _parse_url(url)
    except BMCAddressError as e:
        if url != address or ":" in address and not _splits_host_port(address):
            raise BMCAddressError(f"failed to parse BMC address information: {e}") from None
        scheme, hostname, url = "ipmi", _host_of(address), "ipmi://" + address
    if hostname and not _is_ip(hostname) and not _DNS_NAME.match(hostname):
        raise BMCAddressError(f"failed to parse BMC address information: BMC address hostname/IP : [{hostname}] is "
                              "invalid")
    return scheme, hostname, url


def bmc_access(address: str, disable_certificate_verification: bool = False) -> BMCAccess:
    """The driver of a BMC address, for a scheme upstream registers (and ours, fake://); BMCAddressError else."""
    if not address:
        raise BMCAddressError("missing BMC address")
    scheme, _hostname, url = parse_bmc_address(address)
    # IPMI has no HTTP transport: upstream registers ipmi and libvirt without the +http/+https forms.
    if scheme not in SCHEMES or scheme.partition("+")[2] and scheme.partition("+")[0] in ("ipmi", "libvirt"):
        raise BMCAddressError(f"Unknown BMC type '{scheme}' for address {address}")
    try:
        driver = driver_for(url, "", "", disable_certificate_verification)
    except Invalid as e:
        raise BMCAddressError(str(e).partition(": ")[2]) from None
    return BMCAccess(scheme, driver)


def admit_host(store: admission.Reader, new: Object, old: Object | None) -> None:
    """Upstream's BareMetalHost webhook: Invalid listing every problem, each naming its field."""
    problems = list(validate_host(new))
    if old is not None:
        problems.extend(validate_changes(old, new))
    if problems:
        name = (new.get("metadata") or {}).get("name", "")
        raise Invalid(f'{QUALIFIED_KIND} "{name}" is invalid: ' + "; ".join(f"{f}: {w}" for f, w in problems))


def validate_host(host: Object) -> Iterator[Problem]:
    """What upstream's validateHost refuses in a host, created or updated."""
    metadata = host.get("metadata") or {}
    spec = host.get("spec") or {}
    bmc = spec.get("bmc") or {}
    access = None
    if bmc.get("address"):
        try:
            access = bmc_access(bmc["address"], bool(bmc.get("disableCertificateVerification")))
        except BMCAddressError as e:
            yield "spec.bmc.address", str(e)
    if spec.get("firmware") is not None:
        yield "spec.firmware", "the Firmware field is no longer supported, use HostFirmwareSettings resource instead"
    for field in ("userData", "networkData", "metaData"):
        ref = spec.get(field) or {}
        if ref.get("namespace") and ref["namespace"] != metadata.get("namespace"):
            yield f"spec.{field}", "cross-namespace Secret references are not allowed"
    yield from _raid_problems(spec)
    if access is not None:
        yield from _bmc_problems(host, access)
    yield from _name_problems(str(metadata.get("name") or ""))
    hints = spec.get("rootDeviceHints") or {}
    if hints.get("deviceName"):
        problem = root_device_name_problem(str(hints["deviceName"]))
        if problem:
            yield "spec.rootDeviceHints.deviceName", problem
    if spec.get("image") is not None:
        yield from image_problems(spec["image"])
    yield from _annotation_problems(host)
    yield from _inspection_problems(host, access)
    if spec.get("disablePowerOff") and not spec.get("online"):
        yield "spec.disablePowerOff", "node can't simultaneously have online set to false and have power off disabled"
    yield from _network_interface_problems(spec.get("networkInterfaces") or [])


def validate_changes(old: Object, new: Object) -> Iterator[Problem]:
    """What upstream's validateChanges refuses in an update, beyond validateHost."""
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    old_status, new_status = old.get("status") or {}, new.get("status") or {}
    old_address = (old_spec.get("bmc") or {}).get("address") or ""
    new_address = (new_spec.get("bmc") or {}).get("address") or ""
    if (old_address and new_address != old_address
            and "detached" not in (old_status.get("operationalStatus"), new_status.get("operationalStatus"))
            and "registering" not in (host_state(old), host_state(new))):
        yield "spec.bmc.address", ("BMC address can not be changed if the BMH is not in the Registering state, or if "
                                   "the BMH is not detached")
    old_mac = old_spec.get("bootMACAddress") or ""
    if old_mac and str(new_spec.get("bootMACAddress") or "").lower() != old_mac.lower():
        yield "spec.bootMACAddress", "bootMACAddress can not be changed once it is set"
    if (not old_spec.get("externallyProvisioned") and new_spec.get("externallyProvisioned")
            and "available" not in (host_state(old), host_state(new))):
        yield "spec.externallyProvisioned", ("externallyProvisioned can only be enabled when in Available state, "
                                             f"currently in {host_state(old)}")


def root_device_name_problem(device_name: str) -> str | None:
    """Upstream's rule for rootDeviceHints.deviceName: a /dev/ path, directly or under /dev/disk/by-path/."""
    subpath = device_name.removeprefix("/dev/")
    if subpath == device_name:
        return f'device name of root device hint must be a /dev/ path, not "{device_name}"'
    if "/" in subpath.removeprefix("disk/by-path/"):
        return f'device name of root device hint must be path in /dev/ or /dev/disk/by-path/, not "{device_name}"'
    return None


def image_checksum_problem(image: dict[str, Any]) -> Problem | None:
    """Upstream's Image.GetChecksum: a checksum unless live-iso or OCI (where it must be empty), a known type."""
    url = str(image.get("url") or "")
    checksum = image.get("checksum") or ""
    if url.lower().startswith("oci://"):
        if checksum:
            return "spec.image.checksum", ("spec.image.checksum must be empty for OCI images (oci:// images have "
                                           "embedded checksums)")
        return None
    if image.get("format") == "live-iso":
        return None
    if not checksum:
        return "spec.image.checksum", "checksum is required for normal images"
    checksum_type = image.get("checksumType") or ""
    if checksum_type and checksum_type not in CHECKSUM_TYPES:
        return "spec.image.checksumType", (f"unknown checksumType {checksum_type}, supported are "
                                           f"{', '.join(CHECKSUM_TYPES)}")
    return None


# -- the parts of validateHost ----------------------------------------------------------------------------------


def _inspection_disabled(host: Object) -> bool:
    annotations = (host.get("metadata") or {}).get("annotations") or {}
    return (host.get("spec") or {}).get("inspectionMode") == "disabled" or annotations.get(INSPECT_ANNOTATION) == \
        "disabled"


def _bmc_problems(host: Object, access: BMCAccess) -> Iterator[Problem]:
    spec = host.get("spec") or {}
    if (spec.get("raid") or {}).get("hardwareRAIDVolumes") and not access.supports_raid:
        yield "spec.raid.hardwareRAIDVolumes", f"BMC driver {access.type} does not support configuring RAID"
    mac = spec.get("bootMACAddress") or ""
    if (access.needs_mac or _inspection_disabled(host)) and not mac:
        yield "spec.bootMACAddress", f"BMC driver {access.type} requires a BootMACAddress value"
    if mac and not _MAC.match(str(mac)):
        yield "spec.bootMACAddress", f"address {mac}: invalid MAC address"
    if spec.get("bootMode") == "UEFISecureBoot" and not access.supports_secure_boot:
        yield "spec.bootMode", f"BMC driver {access.type} does not support secure boot"


def _raid_problems(spec: dict[str, Any]) -> Iterator[Problem]:
    raid = spec.get("raid")
    if raid is None:
        return
    hardware = raid.get("hardwareRAIDVolumes") or []
    software = raid.get("softwareRAIDVolumes") or []
    if hardware and software:
        yield "spec.raid", "hardwareRAIDVolumes and softwareRAIDVolumes can not be set at the same time"
    for index, volume in enumerate(hardware):
        field = f"spec.raid.hardwareRAIDVolumes[{index}]"
        disks = volume.get("physicalDisks") or []
        if disks and not volume.get("controller"):
            yield f"{field}.controller", (f"'physicalDisks' specified without 'controller' in hardware RAID volume "
                                          f"{index}")
        count = volume.get("numberOfPhysicalDisks")
        if count is not None and disks and count != len(disks):
            yield f"{field}.numberOfPhysicalDisks", (f"the 'numberOfPhysicalDisks'[{count}] and number of "
                                                     f"'physicalDisks'[{len(disks)}] is not same for volume {index}")
    roots = sum(1 for volume in software if volume.get("rootVolume"))
    if roots > 1:
        yield "spec.raid.softwareRAIDVolumes", "softwareRAIDVolumes[*].rootVolume can only be set once"
    if roots == 1 and spec.get("rootDeviceHints") is not None:
        yield "spec.rootDeviceHints", ("softwareRAIDVolumes[*].rootVolume and rootDeviceHints can not be set at the "
                                       "same time")
    for index, volume in enumerate(software):
        if volume.get("rootVolume") and volume.get("level") != "1":
            yield f"spec.raid.softwareRAIDVolumes[{index}].level", (f"softwareRAIDVolumes[{index}] with rootVolume "
                                                                    "set must use RAID level 1")


def _name_problems(name: str) -> Iterator[Problem]:
    if _HOST_NAME_CHARACTERS.search(name):
        yield "metadata.name", "BareMetalHost resource name cannot contain characters other than [A-Za-z0-9._-]"
    if _UUID.match(name):
        yield "metadata.name", "BareMetalHost resource name cannot be a UUID"


def image_problems(image: dict[str, Any]) -> Iterator[Problem]:
    """Upstream's validateImage (a host's and a HostClaim's spec.image): the URL, and its checksum."""
    url = str(image.get("url") or "")
    problem = request_uri_problem(url)
    if problem:
        yield "spec.image.url", f"image URL {url} is invalid: {problem}"
    checksum = image_checksum_problem(image)
    if checksum:
        yield checksum


def request_uri_problem(url: str) -> str | None:
    """Upstream's validateURL (common_validation.go): Go's url.ParseRequestURI, and the schemes upstream allows an
    image's URL, a DataImage's and a firmware update's."""
    if not url:
        return 'parse "": empty url'
    try:
        scheme, _opaque, _host = _parse_url(url)
    except BMCAddressError as e:
        return str(e)
    if not scheme and not url.startswith("/"):
        return f'parse "{url}": invalid URI for request'
    if scheme.lower() not in IMAGE_URL_SCHEMES:
        return f'invalid scheme in URL, "{scheme}" not allowed'
    return None


def _annotation_problems(host: Object) -> Iterator[Problem]:
    for key, value in sorted(((host.get("metadata") or {}).get("annotations") or {}).items()):
        field = f"metadata.annotations[{key}]"
        problem = None
        if key == STATUS_ANNOTATION:
            problem = _status_annotation_problem(value)
        elif is_reboot_annotation(key):
            problem = reboot_annotation_problem(value)
        elif key == INSPECT_ANNOTATION:
            if value not in ("disabled", ""):
                problem = f'invalid value for the {INSPECT_ANNOTATION} annotation, allowed are "disabled" or ""'
        elif key == HARDWARE_DETAILS_ANNOTATION and value:
            if not _inspection_disabled(host):
                problem = ("when hardware details are provided, inspection must be disabled (either via "
                           "inspect.metal3.io annotation or inspectionMode field)")
            else:
                error = _strict_json_problem(value, _HARDWARE_DETAILS)
                problem = f"error decoding the {HARDWARE_DETAILS_ANNOTATION} annotation: {error}" if error else None
        if problem:
            yield field, problem


def _status_annotation_problem(value: str) -> str | None:
    if not value:
        return None
    error = _strict_json_problem(value, _status_shape())
    if error:
        return f"error decoding status annotation: {error}"
    status = json.loads(value) or {}
    if status.get("operationalStatus", "") not in OPERATIONAL_STATUS_ALLOWED:
        return f"invalid operationalStatus '{status['operationalStatus']}' in the {STATUS_ANNOTATION} annotation"
    if status.get("errorType", "") not in ERROR_TYPE_ALLOWED:
        return f"invalid errorType '{status['errorType']}' in the {STATUS_ANNOTATION} annotation"
    return None


def is_reboot_annotation(key: str) -> bool:
    """Whether ``key`` is reboot.metal3.io or reboot.metal3.io/<anything> (one reboot request each)."""
    return key == REBOOT_ANNOTATION or key.startswith(REBOOT_ANNOTATION + "/")


def reboot_annotation_problem(value: str) -> str | None:
    """What upstream's validateRebootAnnotation says of a reboot annotation's value (a host's, a HostClaim's)."""
    if not value:
        return None
    try:
        args = json.loads(value)
    except ValueError as e:
        return f"failed to unmarshal the data from the {REBOOT_ANNOTATION} annotation: {_json_error(value, e)}"
    if not isinstance(args, dict):
        return (f"failed to unmarshal the data from the {REBOOT_ANNOTATION} annotation: json: cannot unmarshal "
                f"{_json_type(args)} into Go value of type v1alpha1.RebootAnnotationArguments")
    if args.get("mode", "") not in REBOOT_MODES:
        return f'invalid mode in the {REBOOT_ANNOTATION} annotation, allowed are "hard", "soft" or ""'
    return None


def _inspection_problems(host: Object, access: BMCAccess | None) -> Iterator[Problem]:
    annotation = ((host.get("metadata") or {}).get("annotations") or {}).get(INSPECT_ANNOTATION) or ""
    mode = (host.get("spec") or {}).get("inspectionMode") or ""
    if annotation and mode and (annotation == "disabled") != (mode == "disabled"):
        yield "spec.inspectionMode", "inspect.metal3.io annotation and inspectionMode field have contradicting values"
    elif mode and mode not in INSPECTION_MODES:
        yield "spec.inspectionMode", (f"invalid inspectionMode value: {mode}, allowed values are 'disabled', 'agent', "
                                      "or 'fast'")
    elif mode == "fast" and access is not None and not access.supports_out_of_band_inspection:
        yield "spec.inspectionMode", f"BMC driver {access.type} does not support fast (out-of-band) inspection"


def _network_interface_problems(interfaces: list[dict[str, Any]]) -> Iterator[Problem]:
    seen: set[str] = set()
    for index, interface in enumerate(interfaces):
        field = f"spec.networkInterfaces[{index}]"
        name, mac = interface.get("name") or "", interface.get("macAddress") or ""
        if not name and not mac:
            yield field, f"networkInterfaces[{index}]: must specify either name or macAddress"
            continue
        if name and mac:
            yield field, f"networkInterfaces[{index}]: name and macAddress are mutually exclusive"
            continue
        key = mac or name
        if key.lower() in seen:
            yield field, f'networkInterfaces[{index}]: duplicate interface selector for "{key}"'
        seen.add(key.lower())


# -- URLs and JSON as Go reads them -----------------------------------------------------------------------------


def _parse_url(raw: str) -> tuple[str, str, str]:
    """(scheme, opaque, hostname) of ``raw`` as Go's url.Parse reads it; BMCAddressError with Go's words."""
    def fail(reason: str) -> BMCAddressError:
        return BMCAddressError(f'parse "{raw}": {reason}')

    scheme, rest = "", raw
    for i, c in enumerate(raw):
        if c in string.ascii_letters:
            continue
        if c in string.digits or c in "+-.":
            if i == 0:
                break
            continue
        if c == ":":
            if i == 0:
                raise fail("missing protocol scheme")
            scheme, rest = raw[:i].lower(), raw[i + 1:]
        break
    rest = rest.partition("#")[0].partition("?")[0]
    if scheme and not rest.startswith("/"):
        return scheme, rest, ""
    if not scheme and ":" in rest.partition("/")[0]:
        raise fail("first path segment in URL cannot contain colon")
    if not rest.startswith("//") or (not scheme and rest.startswith("///")):
        return scheme, "", ""
    authority = rest[2:].partition("/")[0]
    userinfo, at, host = authority.rpartition("@")
    if at and not _USERINFO.match(userinfo):
        raise fail("net/url: invalid userinfo")
    if host.startswith("["):
        literal, bracket, port = host[1:].rpartition("]")
        if not bracket:
            raise fail("missing ']' in host")
        if not re.match(r"^(:\d*)?$", port):
            raise fail(f'invalid port "{port}" after host')
        try:
            ipaddress.IPv6Address(literal.partition("%")[0])
        except ValueError as e:
            raise fail(f'invalid host: ParseAddr("{literal}"): {e}') from None
        return scheme, "", literal
    hostname, _colon, port = host.rpartition(":") if ":" in host else (host, "", "")
    if port and not port.isdigit():
        raise fail(f'invalid port ":{port}" after host')
    return scheme, "", hostname


def _splits_host_port(address: str) -> bool:
    """Whether Go's net.SplitHostPort reads ``address`` as host:port."""
    if address.startswith("["):
        return bool(re.match(r"^\[[^\]]*\]:[^:]*$", address))
    return address.count(":") == 1


def _host_of(address: str) -> str:
    host = address.rpartition(":")[0] if _splits_host_port(address) else address
    return host.strip("[]")


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _json_error(text: str, error: ValueError) -> str:
    """A JSON decoding error in Go's words where they differ: a document cut short is "unexpected EOF"."""
    position = getattr(error, "pos", None)
    if position is not None and position >= len(text.rstrip()):
        return "unexpected EOF"
    return str(error)


def _json_type(value: Any) -> str:
    return {bool: "bool", int: "number", float: "number", str: "string", list: "array"}.get(type(value), "null")


def _strict_json_problem(text: str, shape: dict[str, Any]) -> str | None:
    """What Go's strict json.Decoder (DisallowUnknownFields) says of ``text`` decoded into ``shape``, if anything."""
    try:
        value = json.loads(text)
    except ValueError as e:
        return _json_error(text, e)
    if value is None:  # null decodes into nothing, as in Go
        return None
    if not isinstance(value, dict):
        return f"json: cannot unmarshal {_json_type(value)} into Go value of type object"
    unknown = _unknown_field(value, shape)
    return f'json: unknown field "{unknown}"' if unknown else None


def _unknown_field(value: Any, shape: Any) -> str | None:
    """The first key of ``value`` that ``shape`` (a dict of known keys, [item shape], or None: anything) lacks."""
    if isinstance(shape, list) and isinstance(value, list):
        return next((found for item in value if (found := _unknown_field(item, shape[0]))), None)
    if isinstance(shape, dict) and isinstance(value, dict):
        for key, item in value.items():
            if key not in shape:
                return str(key)
            found = _unknown_field(item, shape[key])
            if found:
                return found
    return None


def _status_shape() -> dict[str, Any]:
    """The fields of BareMetalHostStatus, from the CRD's status schema (hardware: HardwareDetails')."""
    def shape(node: dict[str, Any]) -> Any:
        if node.get("x-kubernetes-preserve-unknown-fields"):
            return None
        if "properties" in node:
            return {key: shape(sub) for key, sub in node["properties"].items()}
        if isinstance(node.get("items"), dict):
            item = shape(node["items"])
            return [item] if item is not None else None
        return None

    schema = lookup("metal3.io/v1alpha1", "BareMetalHost").schema or {}
    status = shape(schema.get("properties", {}).get("status", {})) or {}
    return {**status, "hardware": _HARDWARE_DETAILS}


admission.register("metal3.io", "BareMetalHost", admit_host)
