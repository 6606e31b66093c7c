"""A DataImage's own reconcile, as baremetal-operator's DataImageReconciler (dataimage_controller.go): the host of its
name owns it, it holds its finalizer while it lives and, once deleted, until the host has taken its image out of
the drive; its status.error says what reading the drive said. The provisioner is a fixture (fixture_provisioner.py);
attaching and detaching are the host's (test_host_state_machine.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.core.provisioner import POLL, DataImageStatus
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import baremetalhost as bmh
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import dataimage
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from ansible_collections.metal3.baremetal.plugins.modules.data_image import SPEC
from ansible_collections.metal3.baremetal.plugins.plugin_utils.engine_action import run_spec
from tests.unit.module_utils.hosts.fixture_provisioner import Answers, FixtureProvisioner

ISO = "http://images.example/data.iso"
REF = Ref(dataimage.API, dataimage.KIND, "h", "ns")
ATTACHED = DataImageStatus(attached=True)
GONE = None  # the DataImage is gone (its finalizer removed)


@dataclass(frozen=True)
class Case:
    requeue: float | None  # when the reconcile asks to come back
    finalizer: bool | None  # whether the DataImage holds the finalizer afterwards (GONE: it is gone)
    host: str | None = bmh.PROVISIONED  # the host's state (None: there is no host)
    url: str = ISO
    attached_url: str = ""  # status.attachedImage.url, as the host last wrote it
    error: dict[str, Any] | None = None  # status.error before
    deleted: bool = False
    finalizer_before: bool = False  # it holds the finalizer before (a deleted one always does)
    annotations: dict[str, str] = field(default_factory=dict)  # the host's
    drive: DataImageStatus = field(default_factory=DataImageStatus)  # what the provisioner says of the drive
    calls: tuple[str, ...] = ("data_image_status",)  # the provisioner's operations
    check: Callable[[dict[str, Any]], bool] | None = None  # on the DataImage afterwards


def case(name: str, requeue: float | None, finalizer: bool | None, **kwargs: Any) -> Any:
    return pytest.param(Case(requeue, finalizer, **kwargs), id=name)


def error(count: int, message: str) -> Callable[[dict[str, Any]], bool]:
    return lambda di: di["status"]["error"] == {"count": count, "message": message}


NEXT_POWER_ON = "attached at the host's next power on (a reboot annotation, or online false then true)"
CASES = [
    case("new-data-image-is-owned-by-its-host-and-holds-the-finalizer", None, True,
         check=lambda di: [o["kind"] for o in di["metadata"]["ownerReferences"]] == ["BareMetalHost"]),
    case("attached-as-asked-clears-its-error", None, True, attached_url=ISO, error={"count": 3, "message": "x"},
         drive=ATTACHED, check=error(0, "")),
    case("not-yet-attached-keeps-the-error-that-says-why", None, True, error={"count": 1, "message": "404"},
         check=error(1, "404")),
    case("unreadable-drive-is-counted", dataimage.UPDATE_DELAY, True, drive=DataImageStatus(error="Ironic refused"),
         check=error(1, "Ironic refused")),
    case("busy-host-is-looked-at-again", dataimage.BUSY_DELAY, True,
         drive=DataImageStatus(dirty=True, requeue_after=POLL)),
    case("loopback-url-is-refused-naming-spec-url", None, True, url="http://127.0.0.1:8080/data.iso", calls=(),
         check=lambda di: di["status"]["error"]["count"] == 1 and di["status"]["error"]["message"].startswith(
             "spec.url: 'http://127.0.0.1:8080/data.iso' names a loopback or link-local host")),
    case("link-local-url-is-refused-naming-spec-url", None, True, url="http://169.254.169.254/latest", calls=(),
         check=lambda di: di["status"]["error"]["message"].startswith("spec.url: 'http://169.254.169.254/latest'")),
    case("deleted-while-attached-waits-for-the-host-to-detach", dataimage.RETRY_DELAY, True, deleted=True,
         attached_url=ISO, drive=ATTACHED, calls=("data_image_status",)),
    case("deleted-and-detached-lets-go", None, GONE, deleted=True, calls=("data_image_status",)),
    case("deleted-without-a-host-lets-go", None, GONE, host=None, deleted=True, calls=()),
    case("without-a-host-waits-for-one", None, False, host=None, calls=()),
    case("without-a-host-holds-no-finalizer", None, False, host=None, finalizer_before=True, calls=()),
    case("detached-host-waits", dataimage.DETACHED_DELAY, True, annotations={bmh.DETACHED_ANNOTATION: ""}, calls=()),
    case("deleted-with-a-detached-host-lets-go", None, GONE, deleted=True, annotations={bmh.DETACHED_ANNOTATION: ""},
         calls=()),
    case("deleted-with-an-unregistered-host-lets-go", None, GONE, host=bmh.NONE, deleted=True, calls=()),
    case("paused-host-is-left-alone", None, False, annotations={bmh.PAUSED_ANNOTATION: ""}, calls=()),
]


@pytest.fixture
def store(tmp_path):
    with LocalStore(str(tmp_path / "store.db")) as opened:
        yield opened


def make(store: LocalStore, case: Case) -> None:
    if case.host is not None:
        host = store.create({"apiVersion": bmh.API, "kind": bmh.KIND,
                             "metadata": {"name": "h", "namespace": "ns", "annotations": case.annotations},
                             "spec": {"online": True, "bmc": {"address": "redfish://bmc", "credentialsName": "b"}}})
        store.update_status({**host, "status": {"provisioning": {"state": case.host, "ID": "node-h"}}})
    finalizers = [dataimage.FINALIZER] if case.deleted or case.finalizer_before else []
    image = store.create({"apiVersion": dataimage.API, "kind": dataimage.KIND,
                          "metadata": {"name": "h", "namespace": "ns", "finalizers": finalizers},
                          "spec": {"url": case.url}})
    status: dict[str, Any] = {}
    if case.attached_url:
        status["attachedImage"] = {"url": case.attached_url}
    if case.error:
        status["error"] = case.error
    if status:
        store.update_status({**image, "status": status})
    if case.deleted:
        store.delete(REF)


@pytest.mark.parametrize("case", CASES)
def test_data_image_reconcile(store, case: Case):
    make(store, case)
    fixture = FixtureProvisioner(Answers(data_image_status=case.drive))
    result = dataimage.reconcile_data_image(store, fixture, REF, outbound=OutboundPolicy())
    assert result.requeue_after == case.requeue, result.message
    assert fixture.calls == list(case.calls)
    found = store.get_if_exists(REF)
    if case.finalizer is GONE:
        assert found is None, found
        return
    assert found is not None
    assert (dataimage.FINALIZER in (found["metadata"].get("finalizers") or [])) == case.finalizer
    if case.check is not None:
        assert case.check(found), found


def test_a_url_the_operator_allows_is_not_refused():
    assert dataimage.url_refusal("http://127.0.0.1:8080/data.iso", OutboundPolicy.of("127.0.0.1")) == ""
    assert dataimage.url_refusal(ISO, OutboundPolicy()) == ""
    assert dataimage.url_refusal("http:///data.iso", OutboundPolicy()) == "spec.url: 'http:///data.iso' names no host"
    # Admission takes any request URI, as upstream's webhook; Ironic is handed http(s) only.
    assert dataimage.url_refusal("file:///etc/ironic/ironic.conf", OutboundPolicy()) == \
        "spec.url: 'file:///etc/ironic/ironic.conf' is not an http or https URL"


def test_not_yet_attached_says_when_it_will_be(store):
    make(store, Case(None, True))
    result = dataimage.reconcile_data_image(store, FixtureProvisioner(Answers()), REF)
    assert result.message == NEXT_POWER_ON
    assert result.waits_on == [Ref(bmh.API, bmh.KIND, "h", "ns")]  # the host's power on attaches it


def test_the_module_asks_for_an_image_or_none_with_check_mode_and_diff(tmp_path, monkeypatch):
    """metal3.baremetal.data_image: url makes the DataImage (or sets its spec.url), state absent deletes it; check
    mode writes nothing; no Ironic is reached while its host is not registered."""
    monkeypatch.setenv("IRONIC_ENDPOINT", "http://127.0.0.1:9")  # nothing listens
    path = str(tmp_path / "store.db")
    with LocalStore(path) as store:
        store.create({"apiVersion": bmh.API, "kind": bmh.KIND, "metadata": {"name": "h", "namespace": "ns"},
                      "spec": {"online": True}})
    args = {"name": "h", "namespace": "ns", "store_path": path, "url": ISO}
    checked = run_spec(SPEC, args, True)
    assert checked["changed"] and checked["diff"] == {"before": {}, "after": {"url": ISO}}
    with LocalStore(path) as store:
        assert store.get_if_exists(REF) is None
    made = run_spec(SPEC, args, False)
    assert made["changed"] and made["data_image"]["url"] == ISO and made["requeue_after"] == dataimage.DETACHED_DELAY
    assert run_spec(SPEC, args, False)["changed"] is False
    other = run_spec(SPEC, {**args, "url": "http://images.example/other.iso"}, False)
    assert other["diff"] == {"before": {"url": ISO}, "after": {"url": "http://images.example/other.iso"}}
    refused = run_spec(SPEC, {**args, "url": "abc"}, False)
    assert refused["failed"] and 'spec.url: URL "abc" is invalid' in refused["msg"]  # upstream's webhook
    missing = run_spec(SPEC, {**args, "name": "nothing", "url": None}, False)
    assert missing["failed"] and missing["msg"] == "name: ns has no DataImage nothing (url makes one)"
    gone = run_spec(SPEC, {**args, "url": None, "state": "absent"}, False)
    assert gone["changed"] and gone["data_image"] == {}  # its host is not registered: nothing in its drive
    with LocalStore(path) as store:
        assert store.get_if_exists(REF) is None
