"""A PreprovisioningImage's reconcile with upstream's default image provider: which format it serves, the URLs for
the image's architecture, the Ready and Error conditions of the generation judged, the outbound policy on the
URLs; and what a host reads of it (upstream's preprovImageAvailable)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.core.provisioner import PreprovisioningImage
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import preprovisioning_image as ppi
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore

KERNEL, RAMDISK, ISO = "http://img/ipa.kernel", "http://img/ipa.initramfs", "http://img/ipa.iso"
INITRD_OPTIONS = {"deploy_kernel_url": KERNEL, "deploy_ramdisk_url": RAMDISK}
ALL_OPTIONS = {**INITRD_OPTIONS, "deploy_iso_url": ISO}
BY_ARCH = {**ALL_OPTIONS, "deploy_kernel_by_arch": "x86_64:http://img/x86.kernel,AARCH64:http://img/arm.kernel",
           "deploy_ramdisk_by_arch": "aarch64:http://img/arm.initramfs", "deploy_iso_by_arch": "aarch64:http://img/arm.iso"}


@dataclass(frozen=True)
class Case:
    formats: list[str]  # spec.acceptFormats
    options: dict[str, str]  # the provider's options
    format: str = ""  # status.format served ('' : none, an error)
    urls: dict[str, str] = field(default_factory=dict)  # status.imageUrl, kernelUrl
    error: str = ""  # the Error condition's reason, when True
    message: str = ""  # in the Error condition's message
    arch: str = "x86_64"
    network_data: str = ""  # spec.networkDataName
    allowed: tuple[str, ...] = ()  # the outbound policy's allowed local hosts
    requeue: float | None = None


def case(name: str, *args: Any, **kwargs: Any) -> Any:
    return pytest.param(Case(*args, **kwargs), id=name)


CASES = [
    case("virtual-media-host-gets-the-iso", ["iso", "initrd"], ALL_OPTIONS, "iso", {"imageUrl": ISO}),
    case("no-iso-configured-gives-the-initrd", ["iso", "initrd"], INITRD_OPTIONS, "initrd",
         {"imageUrl": RAMDISK, "kernelUrl": KERNEL}),
    case("pxe-host-gets-the-initrd", ["initrd"], ALL_OPTIONS, "initrd", {"imageUrl": RAMDISK, "kernelUrl": KERNEL}),
    case("initrd-needs-a-kernel", ["initrd"], {"deploy_ramdisk_url": RAMDISK}, error="ConfigurationError",
         message="No acceptable image format supported"),
    case("nothing-configured", ["iso", "initrd"], {}, error="ConfigurationError",
         message="No acceptable image format supported"),
    case("no-format-accepted", [], ALL_OPTIONS, error="ConfigurationError"),
    case("per-architecture-urls", ["initrd"], BY_ARCH, "initrd",
         {"imageUrl": "http://img/arm.initramfs", "kernelUrl": "http://img/arm.kernel"}, arch="aarch64"),
    case("per-architecture-iso", ["iso"], BY_ARCH, "iso", {"imageUrl": "http://img/arm.iso"}, arch="aarch64"),
    case("an-architecture-not-named-gets-the-plain-urls", ["initrd"], BY_ARCH, "initrd",
         {"imageUrl": RAMDISK, "kernelUrl": KERNEL}, arch="ppc64le"),
    case("network-data-secret-missing", ["initrd"], INITRD_OPTIONS, error="MissingNetworkData",
         message="NetworkData secret not found", network_data="missing", requeue=ppi.RETRY_MIN),
    case("network-data-secret-named", ["initrd"], INITRD_OPTIONS, "initrd",
         {"imageUrl": RAMDISK, "kernelUrl": KERNEL}, network_data="net"),
    case("loopback-url-refused", ["initrd"], {**INITRD_OPTIONS, "deploy_ramdisk_url": "http://127.0.0.1/ipa.initramfs"},
         error="ConfigurationError", message="deploy_ramdisk_url: 'http://127.0.0.1/ipa.initramfs' names a loopback"),
    case("per-architecture-loopback-url-refused-naming-its-option", ["initrd"],
         {**INITRD_OPTIONS, "deploy_kernel_by_arch": "x86_64:http://localhost/k"}, error="ConfigurationError",
         message="deploy_kernel_by_arch: 'http://localhost/k' names a loopback"),
    case("link-local-url-refused", ["iso"], {"deploy_iso_url": "http://169.254.169.254/ipa.iso"},
         error="ConfigurationError", message="names a loopback or link-local host"),
    case("loopback-url-allowed-by-the-operator", ["initrd"],
         {"deploy_kernel_url": "http://127.0.0.1/k", "deploy_ramdisk_url": "http://127.0.0.1/r"}, "initrd",
         {"imageUrl": "http://127.0.0.1/r", "kernelUrl": "http://127.0.0.1/k"}, allowed=("127.0.0.1",)),
    case("file-url-refused", ["iso"], {"deploy_iso_url": "file:///etc/shadow"}, error="ConfigurationError",
         message="deploy_iso_url: 'file:///etc/shadow' is not an http or https URL"),
]


@pytest.fixture
def store(tmp_path):
    with LocalStore(str(tmp_path / "store.db")) as opened:
        yield opened


def make_image(store: LocalStore, spec: dict[str, Any], finalizers: list[str] | None = None) -> Ref:
    made = store.create({"apiVersion": ppi.API, "kind": ppi.KIND,
                         "metadata": {"name": "h", "namespace": "ns", "finalizers": finalizers or [ppi.HOST_FINALIZER]},
                         "spec": spec})
    return Ref.of(made)


def conditions(image: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in image["status"]["conditions"]}


@pytest.mark.parametrize("case", CASES)
def test_preprovisioning_image_reconcile(store, case: Case):
    spec: dict[str, Any] = {"architecture": case.arch, "acceptFormats": case.formats}
    if case.network_data:
        spec["networkDataName"] = case.network_data
    store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "net", "namespace": "ns"},
                  "stringData": {"networkData": "{}"}})
    ref = make_image(store, spec)
    result = ppi.reconcile_preprovisioning_image(store, ref, ppi.ImageProvider.from_params(case.options),
                                                 OutboundPolicy.of(case.allowed))
    image = store.get(ref)
    status, judged = image["status"], conditions(image)
    assert ppi.FINALIZER in image["metadata"]["finalizers"] and result.changed
    assert result.requeue_after == case.requeue
    assert {c["observedGeneration"] for c in judged.values()} == {image["metadata"]["generation"]}
    if case.error:
        assert (judged["Ready"]["status"], judged["Error"]["status"], judged["Error"]["reason"]) == \
            ("False", "True", case.error)
        assert case.message in judged["Error"]["message"]
        assert "imageUrl" not in status
        with pytest.raises(ppi.ImageBuildError, match=case.message or "."):  # its host records it
            ppi.image_for_host(image, None)
        return
    assert (judged["Ready"]["status"], judged["Error"]["status"]) == ("True", "False")
    assert status["format"] == case.format and status["architecture"] == case.arch
    assert {k: status[k] for k in ("imageUrl", "kernelUrl") if k in status} == case.urls
    version = store.get(Ref("v1", "Secret", "net", "ns"))["metadata"]["resourceVersion"]
    assert status["networkData"] == ({"name": "net", "version": version} if case.network_data else {})
    # what the host reads of it
    served = ppi.image_for_host(image, version if case.network_data else None)
    assert served == PreprovisioningImage(case.format, case.urls["imageUrl"], case.urls.get("kernelUrl", ""))


def test_a_second_reconcile_changes_nothing(store):
    ref = make_image(store, {"architecture": "x86_64", "acceptFormats": ["initrd"]})
    provider = ppi.ImageProvider.from_params(INITRD_OPTIONS)
    ppi.reconcile_preprovisioning_image(store, ref, provider)
    before = store.get(ref)
    result = ppi.reconcile_preprovisioning_image(store, ref, provider)
    assert not result.changed and store.get(ref) == before


def test_a_new_spec_is_judged_again_at_its_generation(store):
    ref = make_image(store, {"architecture": "x86_64", "acceptFormats": ["iso", "initrd"]})
    provider = ppi.ImageProvider.from_params(ALL_OPTIONS)
    ppi.reconcile_preprovisioning_image(store, ref, provider)
    image = store.get(ref)
    store.update({**image, "spec": {**image["spec"], "acceptFormats": ["initrd"]}})
    assert ppi.image_for_host(store.get(ref), None) is None  # Ready is of the older generation
    ppi.reconcile_preprovisioning_image(store, ref, provider)
    assert ppi.image_for_host(store.get(ref), None) == PreprovisioningImage("initrd", RAMDISK, KERNEL)


def test_an_image_of_outdated_network_data_is_not_used(store):
    store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "net", "namespace": "ns"},
                  "stringData": {"networkData": "{}"}})
    ref = make_image(store, {"architecture": "x86_64", "acceptFormats": ["initrd"], "networkDataName": "net"})
    ppi.reconcile_preprovisioning_image(store, ref, ppi.ImageProvider.from_params(INITRD_OPTIONS))
    assert ppi.image_for_host(store.get(ref), "some-older-version") is None


def test_a_build_error_is_the_hosts(store):
    ref = make_image(store, {"architecture": "x86_64", "acceptFormats": ["initrd"]})
    ppi.reconcile_preprovisioning_image(store, ref, ppi.ImageProvider.from_params(INITRD_OPTIONS))
    image = store.get(ref)
    image["status"]["conditions"] = [{**c, "status": "True", "message": "it broke"} if c["type"] == "Error" else c
                                     for c in image["status"]["conditions"]]
    with pytest.raises(ppi.ImageBuildError, match="it broke"):
        ppi.image_for_host(image, None)


def test_a_deleted_image_goes_once_its_host_lets_it_go(store):
    ref = make_image(store, {"acceptFormats": ["initrd"]}, [ppi.HOST_FINALIZER, ppi.FINALIZER])
    store.delete(ref)
    provider = ppi.ImageProvider.from_params(INITRD_OPTIONS)
    assert ppi.reconcile_preprovisioning_image(store, ref, provider).obj is not None
    store.patch(ref, {"metadata": {"finalizers": [ppi.FINALIZER]}})
    result = ppi.reconcile_preprovisioning_image(store, ref, provider)
    assert result.obj is None and store.get_if_exists(ref) is None


def test_the_image_a_host_makes_is_upstreams():
    host = {"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
            "metadata": {"name": "h", "namespace": "ns", "uid": "u-1", "labels": {"rack": "r1"}},
            "spec": {"preprovisioningNetworkDataName": "net"}, "status": {"hardware": {"cpu": {"arch": "aarch64"}}}}
    made = ppi.new_image(host, ppi.wanted_spec(host, ["iso", "initrd"]))
    assert made["spec"] == {"architecture": "aarch64", "acceptFormats": ["iso", "initrd"], "networkDataName": "net"}
    assert made["metadata"]["labels"] == {"rack": "r1"}
    assert made["metadata"]["finalizers"] == [ppi.HOST_FINALIZER]
    assert made["metadata"]["ownerReferences"] == [{"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
                                                    "name": "h", "uid": "u-1", "controller": True,
                                                    "blockOwnerDeletion": True}]
    assert ppi.image_changes({**made, "metadata": {**made["metadata"], "labels": {"rack": "r1"}}}, host,
                             made["spec"]) is None
    relabelled = {**host, "metadata": {**host["metadata"], "labels": {"rack": "r2"}}}
    assert ppi.image_changes(made, relabelled, made["spec"])["metadata"]["labels"] == {"rack": "r2"}
