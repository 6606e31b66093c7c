# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""BMC addresses → the Ironic driver, interfaces and driver_info, as baremetal-operator maps them.

Credentials enter driver_info here and nowhere else; ``Driver.shown()`` is the form safe to print.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid

HIDDEN = "******"
SECRET_KEYS = ("ipmi_password", "redfish_password", "ipmi_username", "redfish_username")


@dataclass(frozen=True)
class Driver:
    """What Ironic needs to manage a host through its BMC."""

    driver: str
    driver_info: dict[str, Any]
    interfaces: dict[str, str] = field(default_factory=dict)

    def shown(self) -> dict[str, Any]:
        """driver_info with the credentials replaced: for output, logs and status."""
        return {k: (HIDDEN if k in SECRET_KEYS else v) for k, v in self.driver_info.items()}


# scheme → (driver, boot interface, the other interfaces)
_REDFISH_INTERFACES = {"firmware_interface": "redfish", "raid_interface": "redfish",
                       "management_interface": "redfish", "power_interface": "redfish"}
_IDRAC_INTERFACES = {"bios_interface": "idrac-redfish", "management_interface": "idrac-redfish",
                     "power_interface": "idrac-redfish", "raid_interface": "idrac-redfish",
                     "vendor_interface": "idrac-redfish"}
_SCHEMES: dict[str, tuple[str, str, dict[str, str]]] = {
    "ipmi": ("ipmi", "ipxe", {"raid_interface": "no-raid"}),
    "libvirt": ("ipmi", "ipxe", {"raid_interface": "no-raid"}),
    "redfish": ("redfish", "ipxe", _REDFISH_INTERFACES),
    "ilo5-redfish": ("redfish", "ipxe", _REDFISH_INTERFACES),
    "redfish-virtualmedia": ("redfish", "redfish-virtual-media", _REDFISH_INTERFACES),
    "ilo5-virtualmedia": ("redfish", "redfish-virtual-media", _REDFISH_INTERFACES),
    "redfish-uefihttp": ("redfish", "redfish-https", _REDFISH_INTERFACES),
    "idrac-redfish": ("idrac", "ipxe", _IDRAC_INTERFACES),
    "idrac-virtualmedia": ("idrac", "idrac-redfish-virtual-media", _IDRAC_INTERFACES),
    # Ours: Ironic's fake-hardware type, for demos and tests without any BMC.
    "fake": ("fake-hardware", "fake", {"deploy_interface": "fake", "management_interface": "fake",
                                       "power_interface": "fake", "inspect_interface": "fake",
                                       "raid_interface": "fake", "bios_interface": "fake",
                                       "vendor_interface": "fake", "console_interface": "fake"}),
}
# The deploy interfaces a fake:// address may ask for (fake://name?deploy_interface=direct): direct deploys wait for an
# agent that never calls back on fake hardware, so that a test can make deploys fail (Ironic's abort).
FAKE_DEPLOY_INTERFACES = ("fake", "direct")
# The out-of-band inspection of the drivers that have one (inspectionMode: fast); the agent inspects otherwise.
OUT_OF_BAND_INSPECTION = {"redfish": "redfish", "idrac": "idrac-redfish"}
# Boot interfaces that can boot the deploy ramdisk from an ISO (upstream's DEPLOY_ISO_URL).
ISO_BOOT = ("redfish-virtual-media", "idrac-redfish-virtual-media")
# Each driver's own RAID interface (one per driver), as upstream's AccessDetails.RAIDInterface().
RAID_INTERFACES = {driver: interfaces["raid_interface"] for driver, _boot, interfaces in _SCHEMES.values()}
SCHEMES = tuple(sorted({*_SCHEMES, *(f"{s}+{t}" for s in _SCHEMES if s not in ("fake",) for t in ("http", "https"))}))


def driver_for(address: str, username: str, password: str, disable_certificate_verification: bool = False,
               field: str = "spec.bmc.address") -> Driver:
    """The Ironic driver for a BareMetalHost's BMC address; Invalid names ``field`` when it cannot be read."""
    if not address:
        raise Invalid(f"{field}: Required value")
    if not isinstance(address, str):
        raise Invalid(f"{field}: Invalid value: {address!r}: must be of type string")
    text = address if "://" in address else f"ipmi://{address}"  # a bare host[:port] is IPMI, as upstream
    try:
        parts = urlsplit(text)
    except ValueError as e:  # an unclosed '[' of an IPv6 host, for one
        raise Invalid(f"{field}: Invalid value: {address!r}: not a URL: {e}") from None
    scheme, _plus, transport = parts.scheme.partition("+")
    if scheme not in _SCHEMES or (transport and (transport not in ("http", "https") or scheme == "fake")):
        raise Invalid(f"{field}: Unsupported value: {parts.scheme!r}: supported schemes: {', '.join(SCHEMES)}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        raise Invalid(f"{field}: Invalid value: {address!r}: not a valid port") from None
    if not host and scheme != "fake":
        raise Invalid(f"{field}: Invalid value: {address!r}: no host")
    if any(c.isspace() or not c.isprintable() for c in address):  # Go's url.Parse refuses them too
        raise Invalid(f"{field}: Invalid value: {address!r}: must not contain spaces or control characters")
    driver, boot, interfaces = _SCHEMES[scheme]
    info: dict[str, Any]
    if driver == "ipmi":
        info = {"ipmi_address": host, "ipmi_port": port or 623, "ipmi_username": username, "ipmi_password": password}
        privilege = parse_qs(parts.query).get("privilegelevel")
        if privilege:
            info["ipmi_priv_level"] = privilege[0]
        if disable_certificate_verification:
            info["ipmi_verify_ca"] = False
    elif driver in ("redfish", "idrac"):
        base = f"{transport or 'https'}://{host}" + (f":{port}" if port else "")
        info = {"redfish_address": base, "redfish_username": username, "redfish_password": password}
        if parts.path and parts.path.rstrip("/") not in ("", "/redfish/v1"):
            info["redfish_system_id"] = parts.path
        if disable_certificate_verification:
            info["redfish_verify_ca"] = False
    else:
        info = {}
        deploy = parse_qs(parts.query).get("deploy_interface")
        if deploy:
            if deploy[0] not in FAKE_DEPLOY_INTERFACES:
                raise Invalid(f"{field}: Unsupported value: {deploy[0]!r}: supported deploy_interface of fake:// "
                              f"addresses: {', '.join(FAKE_DEPLOY_INTERFACES)}")
            interfaces = {**interfaces, "deploy_interface": deploy[0]}
    return Driver(driver, info, {"boot_interface": boot, **interfaces})
