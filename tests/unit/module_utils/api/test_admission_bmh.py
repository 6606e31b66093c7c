"""baremetal-operator's BareMetalHost admission rules, with upstream's own webhook test cases.

The cases are those of upstream's TestValidateCreate and TestValidateUpdate
(internal/webhooks/metal3.io/v1alpha1/baremetalhost_validation_test.go), by upstream's names: each either passes
or is refused with upstream's text, after the field it names. Upstream lets a RAID level be empty in cases that
test another rule; the schema refuses that (as upstream's CRD does), so those cases carry a valid level here.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.api.admission import admit, rule_for
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import BadRequest, Invalid
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.admission import (
    BMCAddressError,
    admit_host,
    bmc_access,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.store.admitted import admitted
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

API = "metal3.io/v1alpha1"
MAC = "01:02:03:04:05:06"
REDFISH = {"address": "redfish://bmc.example.com", "credentialsName": "test1"}
HARDWARE = json.dumps({
    "systemVendor": {"manufacturer": "QEMU", "productName": "Standard PC (Q35 + ICH9, 2009)", "serialNumber": ""},
    "firmware": {"bios": {"date": "", "vendor": "", "version": ""}}, "ramMebibytes": 4096,
    "nics": [{"name": "eth0", "model": "0x1af4 0x0001", "mac": "00:b7:8b:bb:3d:f6", "ip": "172.22.0.64",
              "speedGbps": 0, "vlanId": 0, "pxe": True}],
    "storage": [{"name": "/dev/sda", "rotational": True, "sizeBytes": 53687091200, "vendor": "QEMU",
                 "model": "QEMU HARDDISK", "serialNumber": "drive-scsi0-0-0-0", "hctl": "6:0:0:0"}],
    "cpu": {"arch": "x86_64", "model": "Intel Xeon E3-12xx v2 (IvyBridge)", "clockMegahertz": 2494.224,
            "flags": ["foo"], "count": 4},
    "hostname": "hwdAnnotation-0"}, separators=(",", ":"))
VOLUME = {"level": "1"}
CHECKSUM = "be254ebfd73e66ca91f6d91f5050aa2ee1ec4813ee65ba472f608ed340cbff09"


def host(name: str = "test", annotations: dict[str, str] | None = None, state: str = "",
         operational_status: str = "", **spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "test-namespace"}
    if annotations is not None:
        metadata["annotations"] = annotations
    obj: dict[str, Any] = {"apiVersion": API, "kind": "BareMetalHost", "metadata": metadata, "spec": spec}
    if state or operational_status:
        obj["status"] = {"provisioning": {"state": state}, "operationalStatus": operational_status}
    return obj


def ref_to(namespace: str) -> dict[str, str]:
    return {"name": "test-secret", "namespace": namespace}


def nic(**fields: str) -> dict[str, Any]:
    return {**fields, "hostNetworkAttachment": {"name": "my-attachment"}}


# (upstream's case name, the host, (field, upstream's text) or None when the host is admitted)
CREATE_CASES = [
    ("valid", host(), None),
    ("validExternallyProvisioned", host(externallyProvisioned=True), None),
    ("invalidName", host(name="test~"),
     ("metadata.name", "BareMetalHost resource name cannot contain characters other than [A-Za-z0-9._-]")),
    ("invalidName2", host(name="07564256-96ae-4315-ab03-8d34ece60fbb"),
     ("metadata.name", "BareMetalHost resource name cannot be a UUID")),
    ("invalidRAID", host(bootMACAddress=MAC, bmc=REDFISH,
                         raid={"hardwareRAIDVolumes": [VOLUME], "softwareRAIDVolumes": [VOLUME]}),
     ("spec.raid", "hardwareRAIDVolumes and softwareRAIDVolumes can not be set at the same time")),
    ("supportBMCType", host(bootMACAddress=MAC, bmc=REDFISH), None),
    ("unsupportBMCType", host(bmc={"address": "test:127.0.1.1", "credentialsName": "test1"}),
     ("spec.bmc.address", "Unknown BMC type 'test' for address test:127.0.1.1")),
    ("RAIDWithSupportBMC", host(raid={"hardwareRAIDVolumes": [VOLUME]}, bootMACAddress=MAC, bmc=REDFISH), None),
    ("RAIDWithUnsupportBMC", host(raid={"hardwareRAIDVolumes": [VOLUME]},
                                  bmc={"address": "ipmi://127.0.1.1", "credentialsName": "test1"}),
     ("spec.raid.hardwareRAIDVolumes", "BMC driver ipmi does not support configuring RAID")),
    ("FirmwareWithUnsupportBMC", host(firmware={"virtualizationEnabled": True},
                                      bmc={"address": "redfish://127.0.1.1", "credentialsName": "test1"}),
     ("spec.firmware", "the Firmware field is no longer supported, use HostFirmwareSettings resource instead")),
    ("BootMACAddressRequiredWithoutBootMACAddress",
     host(bmc={"address": "libvirt://127.0.1.1", "credentialsName": "test1"}),
     ("spec.bootMACAddress", "BMC driver libvirt requires a BootMACAddress value")),
    ("BootMACAddressRequiredWithBootMACAddress",
     host(bmc={"address": "libvirt://127.0.1.1", "credentialsName": "test1"}, bootMACAddress="00:00:00:00:00:00"),
     None),
    ("BootMACAddressNotRequiredForVirtualMedia",
     host(bmc={"address": "idrac-virtualmedia+https://192.168.1.1/redfish/v1/Systems/System.Embedded.1",
               "credentialsName": "test1"}), None),
    ("BootMACAddressRequiredForVirtualMediaWithInspectionDisabled",
     host(annotations={"inspect.metal3.io": "disabled"},
          bmc={"address": "idrac-virtualmedia+https://192.168.1.1/redfish/v1/Systems/System.Embedded.1",
               "credentialsName": "test1"}),
     ("spec.bootMACAddress", "BMC driver idrac-virtualmedia+https requires a BootMACAddress value")),
    ("BootMACAddressProvidedForVirtualMediaWithInspectionDisabled",
     host(bmc={"address": "idrac-virtualmedia+https://192.168.1.1/redfish/v1/Systems/System.Embedded.1",
               "credentialsName": "test1"}, bootMACAddress="00:00:00:00:00:00", inspectionMode="disabled"), None),
    ("BootMACAddressNotRequiredForVirtualMediaWithInspectionEnabled",
     host(bmc={"address": "redfish-virtualmedia+https://192.168.1.1/redfish/v1/Systems/1", "credentialsName": "test1"},
          inspectionMode="agent"), None),
    ("BootMACAddressRequired",
     host(bmc={"address": "libvirt://127.0.1.1", "credentialsName": "test1"}, bootMACAddress="00:00:00:00:00:00",
          bootMode="UEFISecureBoot"),
     ("spec.bootMode", "BMC driver libvirt does not support secure boot")),
    ("InvalidBootMACAddress", host(bmc=REDFISH, bootMACAddress="00:00:00:00:00", bootMode="UEFISecureBoot"),
     ("spec.bootMACAddress", "address 00:00:00:00:00: invalid MAC address")),
    ("UEFISecureBootWithSupportBMC", host(bmc=REDFISH, bootMACAddress="00:00:00:00:00:00", bootMode="UEFISecureBoot"),
     None),
    ("'physicalDisks' in HardwareRAID without 'controller'.",
     host(bmc={"address": "redfish://127.0.0.1", "credentialsName": "test1"},
          raid={"hardwareRAIDVolumes": [{**VOLUME, "physicalDisks": ["Disk-1", "Disk-2"]}]}),
     ("spec.raid.hardwareRAIDVolumes[0].controller",
      "'physicalDisks' specified without 'controller' in hardware RAID volume 0")),
    ("'numberOfPhysicalDisks' not same as length of 'physicalDisks'",
     host(bmc={"address": "redfish://127.0.0.1", "credentialsName": "test1"},
          raid={"hardwareRAIDVolumes": [{**VOLUME, "controller": "Controller-1", "physicalDisks": ["Disk-1", "Disk-2"],
                                         "numberOfPhysicalDisks": 3}]}),
     ("spec.raid.hardwareRAIDVolumes[0].numberOfPhysicalDisks",
      "the 'numberOfPhysicalDisks'[3] and number of 'physicalDisks'[2] is not same for volume 0")),
    ("validDNSName", host(bmc={"address": "ipmi://host-0.example.com.org:6223", "credentialsName": "c"}), None),
    ("validDNSName2", host(bmc={"address": "ipmi://baremetalhost", "credentialsName": "c"}), None),
    ("validDNSName3", host(bmc={"address": "ipmi://[fe80::fc33:62ff:fe83:8a76]:6233", "credentialsName": "c"}), None),
    ("invalidDNSNameinvalidhyphenuse", host(bmc={"address": "ipmi://-host.example.com.org", "credentialsName": "c"}),
     ("spec.bmc.address", "failed to parse BMC address information: BMC address hostname/IP : "
                          "[-host.example.com.org] is invalid")),
    ("invalidDNSNameinvalidcharacter", host(bmc={"address": "ipmi://host+1.example.com.org", "credentialsName": "c"}),
     ("spec.bmc.address", "failed to parse BMC address information: BMC address hostname/IP : "
                          "[host+1.example.com.org] is invalid")),
    ("invalidDNSNameinvalidformat", host(bmc={"address": "[@]host.example.com", "credentialsName": "c"}),
     ("spec.bmc.address", 'failed to parse BMC address information: parse "ipmi://[@]host.example.com": '
                          "net/url: invalid userinfo")),
    ("invalidDNSNameinvalidbmc", host(bmc={"address": "ipm:host.example.com:6223", "credentialsName": "c"}),
     ("spec.bmc.address", "Unknown BMC type 'ipm' for address ipm:host.example.com:6223")),
    # Upstream's text goes on with Go's own words for the bad IPv6 literal; ours with Python's.
    ("invalidDNSNameinvalidipv6",
     host(bmc={"address": "ipmi://[fe80::fc33:62ff:fe33:8xff]:6223", "credentialsName": "c"}),
     ("spec.bmc.address", 'failed to parse BMC address information: parse "ipmi://[fe80::fc33:62ff:fe33:8xff]:6223": '
                          'invalid host: ParseAddr("fe80::fc33:62ff:fe33:8xff"): ')),
    ("validRootDeviceHint", host(rootDeviceHints={"deviceName": "/dev/sda"}), None),
    ("validRootDeviceHintByPath",
     host(rootDeviceHints={"deviceName": "/dev/disk/by-path/pci-0000:01:00.0-scsi-0:2:0:0"}), None),
    ("invalidRootDeviceHintByUUID",
     host(rootDeviceHints={"deviceName": "/dev/disk/by-uuid/cdaacd50-3a4c-421c-91c0-fe9ba7b8b2f1"}),
     ("spec.rootDeviceHints.deviceName",
      'device name of root device hint must be path in /dev/ or /dev/disk/by-path/, not '
      '"/dev/disk/by-uuid/cdaacd50-3a4c-421c-91c0-fe9ba7b8b2f1"')),
    ("invalidRootDeviceHintNoPath", host(rootDeviceHints={"deviceName": "sda"}),
     ("spec.rootDeviceHints.deviceName", 'device name of root device hint must be a /dev/ path, not "sda"')),
    ("validImageURL", host(image={"url": "https://example.com/image", "checksum": CHECKSUM}), None),
    ("validImageURLOCI", host(image={"url": "oci://example.com/image:latest"}), None),
    ("validImageLiveISO", host(image={"url": "https://example.com/image", "format": "live-iso"}), None),
    ("invalidImageURL", host(image={"url": "test1", "checksum": CHECKSUM}),
     ("spec.image.url", 'image URL test1 is invalid: parse "test1": invalid URI for request')),
    ("invalidImageURLScheme", host(image={"url": "unix://example.com", "checksum": CHECKSUM}),
     ("spec.image.url", 'image URL unix://example.com is invalid: invalid scheme in URL, "unix" not allowed')),
    ("emptyImageURL", host(image={"url": "", "checksum": CHECKSUM}),
     ("spec.image.url", 'image URL  is invalid: parse "": empty url')),
    ("imageNoChecksum", host(image={"url": "https://example.com/image"}),
     ("spec.image.checksum", "checksum is required for normal images")),
    ("imageInvalidChecksum", host(image={"url": "https://example.com/image", "checksum": CHECKSUM,
                                         "checksumType": "SHA42"}),
     ("spec.image.checksumType", "unknown checksumType SHA42, supported are auto, md5, sha256, sha512")),
    ("validStatusAnnotation", host(annotations={"baremetalhost.metal3.io/status": '{"operationalStatus": "OK"}'}),
     None),
    ("invalidFieldStatusAnnotation", host(annotations={"baremetalhost.metal3.io/status": '{"InvalidField":"NotOK"}'}),
     ("metadata.annotations[baremetalhost.metal3.io/status]",
      'error decoding status annotation: json: unknown field "InvalidField"')),
    ("invalidOpstatusStatusAnnotation",
     host(annotations={"baremetalhost.metal3.io/status": '{"operationalStatus":"NotOK"}'}),
     ("metadata.annotations[baremetalhost.metal3.io/status]",
      "invalid operationalStatus 'NotOK' in the baremetalhost.metal3.io/status annotation")),
    ("invalidErrtypeStatusAnnotation", host(annotations={"baremetalhost.metal3.io/status": '{"errorType":"No Error"}'}),
     ("metadata.annotations[baremetalhost.metal3.io/status]",
      "invalid errorType 'No Error' in the baremetalhost.metal3.io/status annotation")),
    ("invalidFormatStatusAnnotation", host(annotations={"baremetalhost.metal3.io/status": '{"operationalStatus":"OK"'}),
     ("metadata.annotations[baremetalhost.metal3.io/status]", "error decoding status annotation: unexpected EOF")),
    ("invalidValueRebootAnnotationPrefix", host(annotations={"reboot.metal3.io": '{"mode":"medium"}'}),
     ("metadata.annotations[reboot.metal3.io]",
      'invalid mode in the reboot.metal3.io annotation, allowed are "hard", "soft" or ""')),
    ("invalidValueRebootAnnotationWithKey", host(annotations={"reboot.metal3.io/my-key": '{"mode":"medium"}'}),
     ("metadata.annotations[reboot.metal3.io/my-key]",
      'invalid mode in the reboot.metal3.io annotation, allowed are "hard", "soft" or ""')),
    ("inspectionNotDisabledHardwareDetailsAnnotation",
     host(annotations={"inspect.metal3.io/hardwaredetails": HARDWARE}),
     ("metadata.annotations[inspect.metal3.io/hardwaredetails]",
      "when hardware details are provided, inspection must be disabled (either via inspect.metal3.io annotation or "
      "inspectionMode field)")),
    ("invalidFieldHardwareDetailsAnnotation",
     host(annotations={"inspect.metal3.io": "disabled",
                       "inspect.metal3.io/hardwaredetails": HARDWARE.replace('"systemVendor"', '"INVALIDField"')}),
     ("metadata.annotations[inspect.metal3.io/hardwaredetails]",
      'error decoding the inspect.metal3.io/hardwaredetails annotation: json: unknown field "INVALIDField"')),
    ("invalidJsonHardwareDetailsAnnotation",
     host(annotations={"inspect.metal3.io": "disabled",
                       "inspect.metal3.io/hardwaredetails": HARDWARE.replace('"systemVendor"', '"INVALIDField"')[:-1]}),
     ("metadata.annotations[inspect.metal3.io/hardwaredetails]",
      "error decoding the inspect.metal3.io/hardwaredetails annotation: unexpected EOF")),
    ("invalidValueInspectAnnotation", host(annotations={"inspect.metal3.io": "enabled"}),
     ("metadata.annotations[inspect.metal3.io]",
      'invalid value for the inspect.metal3.io annotation, allowed are "disabled" or ""')),
    ("crossNamespaceUserData", host(userData=ref_to("different-namespace")),
     ("spec.userData", "cross-namespace Secret references are not allowed")),
    ("crossNamespaceNetworkData", host(networkData=ref_to("different-namespace")),
     ("spec.networkData", "cross-namespace Secret references are not allowed")),
    ("crossNamespaceMetaData", host(metaData=ref_to("different-namespace")),
     ("spec.metaData", "cross-namespace Secret references are not allowed")),
    ("multipleSecretsCrossNamespace", host(userData=ref_to("different-namespace1"),
                                           networkData=ref_to("different-namespace2"),
                                           metaData=ref_to("different-namespace3")),
     ("spec.userData", "cross-namespace Secret references are not allowed")),
    ("sameNamespaceSecrets", host(userData=ref_to("test-namespace"), networkData=ref_to("test-namespace"),
                                  metaData=ref_to("test-namespace")), None),
    ("disablePowerOff", host(disablePowerOff=True, online=True), None),
    ("disablePowerOffErr", host(disablePowerOff=True, online=False),
     ("spec.disablePowerOff", "node can't simultaneously have online set to false and have power off disabled")),
    ("validInspectionModeDisabled", host(inspectionMode="disabled"), None),
    ("validInspectionModeAgent", host(inspectionMode="agent"), None),
    ("inspectionModeAndAnnotationConsistent", host(annotations={"inspect.metal3.io": "disabled"},
                                                   inspectionMode="disabled"), None),
    ("inspectionModeAndAnnotationConflict", host(annotations={"inspect.metal3.io": "disabled"}, inspectionMode="agent"),
     ("spec.inspectionMode", "inspect.metal3.io annotation and inspectionMode field have contradicting values")),
    ("inspectionModeAgentAndAnnotationEmptyConsistent", host(annotations={"inspect.metal3.io": ""},
                                                             inspectionMode="agent"), None),
    ("validInspectionModeFastRedfish",
     host(bmc={"address": "redfish://192.168.122.1", "credentialsName": "secretRefName"}, inspectionMode="fast"), None),
    ("validInspectionModeFastIDracRedfish",
     host(bmc={"address": "idrac-redfish://192.168.122.1", "credentialsName": "secretRefName"}, inspectionMode="fast"),
     None),
    ("validInspectionModeFastRedfishVirtualMedia",
     host(bmc={"address": "redfish-virtualmedia://192.168.122.1", "credentialsName": "secretRefName"},
          inspectionMode="fast"), None),
    ("validInspectionModeFastIDracVirtualMedia",
     host(bmc={"address": "idrac-virtualmedia://192.168.122.1", "credentialsName": "secretRefName"},
          inspectionMode="fast"), None),
    ("inspectionModeFastWithIPMI",
     host(bmc={"address": "ipmi://192.168.122.1:6233", "credentialsName": "secretRefName"}, inspectionMode="fast"),
     ("spec.inspectionMode", "BMC driver ipmi does not support fast (out-of-band) inspection")),
    ("inspectionModeFastAndAnnotationConflict", host(annotations={"inspect.metal3.io": "disabled"},
                                                     inspectionMode="fast"),
     ("spec.inspectionMode", "inspect.metal3.io annotation and inspectionMode field have contradicting values")),
    ("hardwareDetailsWithInspectionModeDisabled", host(annotations={"inspect.metal3.io/hardwaredetails": HARDWARE},
                                                       inspectionMode="disabled"), None),
    ("validNetworkInterfaceWithName", host(networkInterfaces=[nic(name="eth0")]), None),
    ("validNetworkInterfaceWithMACAddress", host(networkInterfaces=[nic(macAddress="00:11:22:33:44:55")]), None),
    ("invalidNetworkInterfaceMissingIdentifier", host(networkInterfaces=[nic()]),
     ("spec.networkInterfaces[0]", "networkInterfaces[0]: must specify either name or macAddress")),
    ("invalidNetworkInterfaceDuplicateName", host(networkInterfaces=[nic(name="eth0"), nic(name="eth0")]),
     ("spec.networkInterfaces[1]", 'networkInterfaces[1]: duplicate interface selector for "eth0"')),
    ("invalidNetworkInterfaceDuplicateMAC", host(networkInterfaces=[nic(macAddress="00:11:22:33:44:55"),
                                                                    nic(macAddress="00:11:22:33:44:55")]),
     ("spec.networkInterfaces[1]", 'networkInterfaces[1]: duplicate interface selector for "00:11:22:33:44:55"')),
    ("rejectNetworkInterfaceWithBothNameAndMAC",
     host(networkInterfaces=[nic(name="eth0", macAddress="00:11:22:33:44:55")]),
     ("spec.networkInterfaces[0]", "networkInterfaces[0]: name and macAddress are mutually exclusive")),
    ("duplicateMACCaseInsensitive", host(networkInterfaces=[nic(macAddress="AA:BB:CC:DD:EE:FF"),
                                                            nic(macAddress="aa:bb:cc:dd:ee:ff")]),
     ("spec.networkInterfaces[1]", 'networkInterfaces[1]: duplicate interface selector for "aa:bb:cc:dd:ee:ff"')),
]

# (upstream's case name, the host as it is, the host as written, (field, upstream's text) or None)
UPDATE_CASES = [
    ("updateAddress", host(bmc={"address": "test-address", "credentialsName": "c"}),
     host(bmc={"address": "test-address-changed", "credentialsName": "c"}),
     ("spec.bmc.address", "BMC address can not be changed if the BMH is not in the Registering state, or if the BMH "
                          "is not detached")),
    ("updateAddressBMHRegistering", host(bmc={"address": "test-address", "credentialsName": "c"}, state="registering"),
     host(bmc={"address": "test-address-changed", "credentialsName": "c"}, state="registering"), None),
    ("updateAddressBMHDetached",
     host(bmc={"address": "test-address", "credentialsName": "c"}, operational_status="detached"),
     host(bmc={"address": "test-address-changed", "credentialsName": "c"}, operational_status="detached"), None),
    ("updateBootMAC", host(bootMACAddress="test-mac"), host(bootMACAddress="test-mac-changed"),
     ("spec.bootMACAddress", "bootMACAddress can not be changed once it is set")),
    ("updateBootMACCaseOnly", host(bootMACAddress="aa:bb:cc:dd:ee:ff"), host(bootMACAddress="AA:BB:CC:DD:EE:FF"),
     None),
    ("updateBootMACCaseMixed", host(bootMACAddress="AA:BB:CC:DD:EE:FF"), host(bootMACAddress="aA:Bb:cC:Dd:Ee:Ff"),
     None),
    ("updateBootMACInvalidNew", host(bootMACAddress="00:11:22:33:44:55"),
     host(bmc={"address": "redfish://127.0.0.1", "credentialsName": "test1"}, bootMACAddress="invalid-mac"),
     ("spec.bootMACAddress", "address invalid-mac: invalid MAC address")),
    ("allowDisablingExternallyProvisioned", host(externallyProvisioned=True), host(externallyProvisioned=False), None),
    ("rejectEnablingExternallyProvisionedWhenNotInAvailable", host(externallyProvisioned=False, state="inspecting"),
     host(externallyProvisioned=True, state="inspecting"),
     ("spec.externallyProvisioned", "externallyProvisioned can only be enabled when in Available state, currently in "
                                    "inspecting")),
    ("allowEnablingExternallyProvisionedWhenInAvailable", host(externallyProvisioned=False, state="available"),
     host(externallyProvisioned=True, state="available"), None),
]


def admission_of(new: dict[str, Any], old: dict[str, Any] | None = None) -> str | None:
    """The message admission refuses ``new`` with, or None when it is admitted."""
    try:
        admit_host(None, new, old)  # type: ignore[arg-type]  # the host rules read no store
    except Invalid as e:
        return str(e)
    return None


@pytest.mark.parametrize(("new", "wanted"), [c[1:] for c in CREATE_CASES], ids=[c[0] for c in CREATE_CASES])
def test_upstream_create_cases(new, wanted):
    refused = admission_of(new)
    if wanted is None:
        assert refused is None
    else:
        field, text = wanted
        assert refused is not None and refused.startswith(f'BareMetalHost.metal3.io "{new["metadata"]["name"]}" '
                                                          "is invalid: ")
        assert f"{field}: {text}" in refused


@pytest.mark.parametrize(("old", "new", "wanted"), [c[1:] for c in UPDATE_CASES], ids=[c[0] for c in UPDATE_CASES])
def test_upstream_update_cases(old, new, wanted):
    refused = admission_of(new, old)
    if wanted is None:
        assert refused is None
    else:
        assert f"{wanted[0]}: {wanted[1]}" in refused


def test_every_problem_is_named_at_once():
    refused = admission_of(host(name="test~", rootDeviceHints={"deviceName": "sda"}, disablePowerOff=True))
    assert refused.count("; ") == 2
    for field in ("metadata.name", "spec.rootDeviceHints.deviceName", "spec.disablePowerOff"):
        assert f"{field}: " in refused


# Addresses as upstream's bmc package reads them: the scheme it registers (and ours, fake://), or its refusal.
@pytest.mark.parametrize(("address", "scheme", "refusal"), [
    ("192.168.1.1:623", "ipmi", None),  # a bare IP:port is IPMI
    ("bmc-0", "ipmi", None),  # a bare host is IPMI
    ("ipmi:bmc-0", "ipmi", None),  # scheme:host is scheme://host
    ("REDFISH://bmc-0", "redfish", None),  # schemes are case-insensitive
    ("redfish+http://bmc-0:8000/redfish/v1/Systems/1", "redfish+http", None),
    ("redfish-uefihttp+https://bmc-0/redfish/v1/Systems/1", "redfish-uefihttp+https", None),
    ("ilo5-virtualmedia://bmc-0", "ilo5-virtualmedia", None),
    ("fake://host-0", "fake", None),  # ours: Ironic's fake-hardware
    # Go reads "name.domain:port" as scheme "name.domain": upstream refuses it, so do we.
    ("bmc.example.com:623", None, "Unknown BMC type 'bmc.example.com' for address bmc.example.com:623"),
    ("ipmi+https://bmc-0", None, "Unknown BMC type 'ipmi+https' for address ipmi+https://bmc-0"),
    ("ibmc://bmc-0", None, "Unknown BMC type 'ibmc' for address ibmc://bmc-0"),  # removed upstream in 2024
    ("redfish://bmc-0:http", None, 'failed to parse BMC address information: parse "redfish://bmc-0:http": invalid '
                                   'port ":http" after host'),
])
def test_bmc_addresses_as_upstream_reads_them(address, scheme, refusal):
    if refusal is None:
        assert bmc_access(address).type == scheme
    else:
        with pytest.raises(BMCAddressError) as refused:
            bmc_access(address)
        assert str(refused.value) == refusal


def test_the_schema_is_held_before_the_rules_as_kube_apiserver_runs_a_webhook_after_it():
    assert rule_for(API, "BareMetalHost") is not None
    with pytest.raises(Invalid, match=r"spec\.raid: Invalid value: 'x': must be of type object"):
        admit(None, host(online=True, raid="x"), None)  # type: ignore[arg-type]
    with pytest.raises(BadRequest, match='unknown field "spec.bogus"'):
        admit(None, host(online=True, bogus=1), None)  # type: ignore[arg-type]


def test_status_writes_are_not_admitted_as_upstream_registers_no_webhook_on_status(tmp_path):
    with admitted(LocalStore(str(tmp_path / "store.db"))) as store:
        stored = store.create(host(online=True, bootMACAddress=MAC, bmc=REDFISH))
        ref = Ref.of(stored)
        # A host's status annotation is admitted; its status is the controller's, written as it finds it.
        store.patch_status(ref, {"status": {"operationalStatus": "servicing", "errorType": "servicing error"}})
        with pytest.raises(Invalid, match="invalid operationalStatus 'servicing'"):
            store.patch(ref, {"metadata": {"annotations": {
                "baremetalhost.metal3.io/status": '{"operationalStatus": "servicing"}'}}})
        assert store.get(ref)["status"]["errorType"] == "servicing error"


def test_an_update_is_admitted_against_the_stored_status_not_the_one_it_carries(tmp_path):
    with admitted(LocalStore(str(tmp_path / "store.db"))) as store:
        stored = store.create(host(online=True, bootMACAddress=MAC, bmc=REDFISH))
        store.patch_status(Ref.of(stored), {"status": {"provisioning": {"state": "inspecting"}}})
        current = store.get(Ref.of(stored))
        current["spec"]["bmc"] = {**REDFISH, "address": "redfish://other.example.com"}
        current["status"]["provisioning"]["state"] = "registering"  # ignored, as on a status subresource
        with pytest.raises(Invalid, match="spec.bmc.address: BMC address can not be changed"):
            store.update(current)
        store.patch_status(Ref.of(stored), {"status": {"provisioning": {"state": "registering"}}})
        current = store.get(Ref.of(stored))
        current["spec"]["bmc"] = {**REDFISH, "address": "redfish://other.example.com"}
        assert store.update(current)["spec"]["bmc"]["address"] == "redfish://other.example.com"
