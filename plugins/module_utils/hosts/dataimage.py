# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""DataImage: an image (an ISO) in the virtual CD drive of the provisioned BareMetalHost of the same name, as
baremetal-operator keeps it (internal/controller/metal3.io/dataimage_controller.go, and the host controller's
handleDataImageActions in baremetalhost_controller.go).

Two halves, as upstream's:

- ``at_power_on``, called by the host (hosts/baremetalhost.py) when a provisioned host is about to be powered on
  (a reboot annotation, or powered off and to be on): the DataImage's URL is attached, a changed URL detached
  first, a deleted DataImage's image detached; the power on waits until the drive is as asked. So a DataImage
  takes effect at the host's next power on, never under a running guest. It writes ``status.lastReconciled``,
  ``status.attachedImage.url`` (the URL last attached: Ironic reports its own copy's URL, not the one asked) and
  ``status.error`` (count, message), as upstream.
- ``reconcile_data_image``, the DataImage's own reconcile: the host of its name owns it (ownerReferences), it
  has its finalizer while it lives, and keeps it once deleted until the host has detached its image (a detached
  host's, or an unknown host's, is removed at once); its error is what reading the drive's state said.

The URL is the tenant's and Ironic fetches it: a URL naming the controller's own loopback or link-local hosts
(core/outbound.py) is refused, naming spec.url, and never attached (not upstream's, which hands any URL on).
"""
from __future__ import annotations

from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Conflict, NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref, now, owner_reference
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy, Refused
from ansible_collections.metal3.baremetal.plugins.module_utils.core.provisioner import (
    Provisioner,
    ProvisionerFactory,
    ProvisionResult,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.reconcile import Result
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import baremetalhost as bmh
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import firmware_settings as hfs
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.writes import ensure_finalizer, remove_finalizer

API = "metal3.io/v1alpha1"
KIND = "DataImage"
FINALIZER = "dataimage.metal3.io"  # upstream's DataImageFinalizer
URL_FIELD = "spec.url"
# Upstream's delays: after a failure (dataImageUpdateDelay, and the backoff of status.error.count beyond it), while
# a deleted DataImage's image is still attached (dataImageRetryDelay), while its host is detached
# (dataImageUnmanagedRetryDelay).
UPDATE_DELAY, RETRY_DELAY, DETACHED_DELAY = 30.0, 60.0, 20.0
# After an attach or a detach, how soon the drive is looked at again (upstream: 30 s at least). Ironic's lock on
# the node says when it is still at it, so sooner is safe.
CHECK_DELAY = 2.0
BUSY_DELAY = 5.0  # Ironic busy with the node: look again (upstream: 30 s)
MAX_MESSAGE = 1024


def ref_of(host_ref: Ref) -> Ref:
    """The DataImage of a host: its name, in its namespace."""
    return Ref(API, KIND, host_ref.name, host_ref.namespace)


def ask(store: Store, ref: Ref, url: str, dry_run: bool = False) -> Object:
    """The DataImage ``ref`` asking for ``url``: made, or its spec.url set (admission judges the URL, as upstream's
    webhook: refused naming spec.url, nothing written)."""
    current = store.get_if_exists(ref)
    if current is None:
        return store.create({"apiVersion": API, "kind": KIND,
                             "metadata": {"name": ref.name, "namespace": ref.namespace}, "spec": {"url": url}},
                            dry_run=dry_run)
    return store.update({**current, "spec": {**(current.get("spec") or {}), "url": url}}, dry_run=dry_run)


def url_refusal(url: str, outbound: OutboundPolicy) -> str:
    """Why Ironic is not to be handed ``url`` on the tenant's say ("" when it may be): the outbound policy's
    (core/outbound.py: an http(s) URL with a host, not the controller's own unless ``outbound`` allows it)."""
    try:
        outbound.check(url, URL_FIELD)
    except Refused as e:
        return str(e)
    return ""


def _backoff(count: int) -> float:
    """Upstream's wait after a DataImage's ``count``-th failure in a row: 30 s, or the host's backoff when longer."""
    return max(UPDATE_DELAY, min(bmh.BACKOFF_BASE * 2.0 ** max(count - 1, 0), bmh.BACKOFF_MAX))


def _bounded(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE - 3] + "..."


def _failed(status: dict[str, Any], message: str) -> None:
    error = status.get("error") or {}
    status["error"] = {"count": int(error.get("count") or 0) + 1, "message": _bounded(message)}


def _write_status(store: Store, image: Object, status: dict[str, Any], dry_run: bool) -> Object | None:
    """``status`` written when it differs; None when the DataImage changed meanwhile (looked at again)."""
    if status == (image.get("status") or {}):
        return image
    try:
        return store.update_status({**image, "status": status}, dry_run=dry_run)
    except (Conflict, NotFound):
        return None


# -- the host's half: at its power on ------------------------------------------------------------------------------
def at_power_on(store: Store, provisioner: Provisioner, host_ref: Ref, outbound: OutboundPolicy,
                dry_run: bool = False) -> Result | None:
    """Upstream's handleDataImageActions, for a provisioned host about to be powered on: None when the power on may
    go on (no DataImage, or its image is as asked); otherwise the wait (its requeue_after and message)."""
    ref = ref_of(host_ref)
    image = store.get_if_exists(ref)
    if image is None:
        return None
    old = image.get("status") or {}
    status: dict[str, Any] = {**old, "lastReconciled": now()}
    attached_url = (old.get("attachedImage") or {}).get("url") or ""
    # The last attach was asked for when its URL was written, at the last look (lastReconciled).
    drive = provisioner.data_image_status((old.get("lastReconciled") or "") if attached_url else "")

    def wait(after: float, message: str) -> Result:
        written = _write_status(store, image, status, dry_run)
        return Result(written, written is not image, after if written is not None else 0.0, f"{ref}: {message}")

    if drive.dirty:
        return wait(drive.requeue_after or BUSY_DELAY, drive.message or "the host is busy")
    if drive.error:
        _failed(status, drive.error)
        return wait(_backoff(status["error"]["count"]), f"cannot read the host's virtual media: {drive.error}")
    if drive.attach_error:  # not upstream's: it sees only that the image is not in, and attaches it again
        _failed(status, drive.attach_error)
        status["attachedImage"] = {"url": ""}
        return wait(_backoff(status["error"]["count"]), f"the attach failed: {drive.attach_error}")
    if not drive.attached and attached_url:
        status["attachedImage"] = {"url": ""}
        return wait(0.0, "the image is not in the drive any more")
    if image["metadata"].get("deletionTimestamp"):
        if not drive.attached:
            return None  # its reconcile removes the finalizer
        return _change(store, image, status, provisioner.detach_data_image(), "detaching the image", dry_run)
    wanted = str((image.get("spec") or {}).get("url") or "")
    if wanted != attached_url:
        if attached_url:
            return _change(store, image, status, provisioner.detach_data_image(),
                           f"detaching {attached_url}, to attach {wanted}", dry_run)
        refused = url_refusal(wanted, outbound)
        if refused:  # nothing to wait for until the spec changes: the host powers on without it
            if (old.get("error") or {}).get("message") != refused:
                _failed(status, refused)
            _write_status(store, image, status, dry_run)
            return None
        result = provisioner.attach_data_image(wanted)
        if not result.error and not result.dirty:
            status["attachedImage"] = {"url": wanted}
        return _change(store, image, status, result, f"attaching {wanted}", dry_run)
    status["error"] = {"count": 0, "message": ""}
    _write_status(store, image, status, dry_run)
    return None


def _change(store: Store, image: Object, status: dict[str, Any], result: ProvisionResult, doing: str,
            dry_run: bool) -> Result:
    """After an attach or a detach was asked for: the failure recorded, or a look again soon."""
    if result.error:
        _failed(status, result.error)
        after = _backoff(status["error"]["count"])
        doing = f"{doing} failed: {result.error}"
    else:
        after = result.requeue_after if result.dirty and result.requeue_after is not None else CHECK_DELAY
    written = _write_status(store, image, status, dry_run)
    return Result(written, written is not image, after if written is not None else 0.0, f"{Ref.of(image)}: {doing}")


# -- the DataImage's own reconcile ----------------------------------------------------------------------------------
def reconcile_data_image(store: Store, provisioners: ProvisionerFactory, ref: Ref, dry_run: bool = False,
                         outbound: OutboundPolicy | None = None) -> Result:
    """One reconcile of the DataImage ``ref`` (upstream's DataImageReconciler); ``outbound``: the controller's own
    hosts its URL may name (none by default)."""
    image = store.get_if_exists(ref)
    if image is None:
        return Result(None, message="not found")
    deleting = bool(image["metadata"].get("deletionTimestamp"))
    host_ref = Ref(bmh.API, bmh.KIND, ref.name, ref.namespace)
    host = store.get_if_exists(host_ref)
    if host is None:
        return _release(store, image, dry_run, f"no {host_ref}")
    annotations = host["metadata"].get("annotations") or {}
    if bmh.PAUSED_ANNOTATION in annotations:
        return Result(image, message="the host is paused")
    changed = False
    owners = image["metadata"].get("ownerReferences") or []
    if not any(owner.get("uid") == host["metadata"]["uid"] for owner in owners):
        image = store.patch(ref, {"metadata": {"ownerReferences": [*owners, owner_reference(host)]}},
                            dry_run=dry_run)
        changed = True
    if not deleting and FINALIZER not in (image["metadata"].get("finalizers") or []):
        image = ensure_finalizer(store, ref, FINALIZER, dry_run)
        changed = True
    status: dict[str, Any] = dict(image.get("status") or {})
    url = str((image.get("spec") or {}).get("url") or "")
    refused = "" if deleting else url_refusal(url, outbound or OutboundPolicy())
    if refused:
        if (status.get("error") or {}).get("message") != refused:
            _failed(status, refused)
        written = _write_status(store, image, status, dry_run)
        return Result(written or image, changed or written is not image, None if written else 0.0, refused)
    skipped = hfs.skip_reason(host)
    if skipped == "detached" or skipped == "not registered":
        # Nothing can be detached through a host Ironic does not know (upstream only lets a detached host's go).
        if deleting:
            return _release(store, image, dry_run, f"deleted while the host is {skipped}")
        return Result(image, changed, DETACHED_DELAY, f"the host is {skipped}", waits_on=[host_ref])
    provisioning = (host.get("status") or {}).get("provisioning") or {}
    drive = provisioners(f"{ref.namespace}{bmh.NODE_NAME_SEPARATOR}{ref.name}",
                         provisioning.get("ID") or "").data_image_status()
    if drive.dirty:
        return Result(image, changed, BUSY_DELAY, drive.message or "the host is busy")
    if drive.error:
        _failed(status, drive.error)
        written = _write_status(store, image, status, dry_run)
        return Result(written or image, True, UPDATE_DELAY, f"cannot read the host's virtual media: {drive.error}")
    if deleting:
        if drive.attached:
            return Result(image, changed, RETRY_DELAY, "deleted: waiting for the host to detach its image, which it "
                                                       "does at its next power on", waits_on=[host_ref])
        return _release(store, image, dry_run, "deleted, and its image detached")
    as_asked = drive.attached and (status.get("attachedImage") or {}).get("url") == url
    # An error stays while the image is not as asked: it says why (upstream clears it at any good read).
    if as_asked:
        status["error"] = {"count": 0, "message": ""}
    written = _write_status(store, image, status, dry_run)
    message = ("attached" if as_asked else
               "attached at the host's next power on (a reboot annotation, or online false then true)")
    return Result(written or image, changed or written is not image, None if written else 0.0, message,
                  waits_on=[] if as_asked else [host_ref])


def _release(store: Store, image: Object, dry_run: bool, why: str) -> Result:
    """The DataImage's finalizer removed, as upstream's when there is no host to detach its image: a deleted one
    goes."""
    if FINALIZER not in (image["metadata"].get("finalizers") or []):
        return Result(image, message=why)
    remove_finalizer(store, Ref.of(image), FINALIZER, dry_run)
    gone = bool(image["metadata"].get("deletionTimestamp")) and not dry_run
    return Result(None if gone else store.get_if_exists(Ref.of(image)), True, message=f"{why}: finalizer removed")


def summary(image: Object | None) -> dict[str, Any]:
    """A DataImage as the module reports it."""
    status = (image or {}).get("status") or {}
    return {"url": ((image or {}).get("spec") or {}).get("url", ""),
            "attached_url": (status.get("attachedImage") or {}).get("url", ""),
            "error_count": (status.get("error") or {}).get("count", 0),
            "error_message": (status.get("error") or {}).get("message", ""),
            "last_reconciled": status.get("lastReconciled", ""),
            "deleting": bool(image and image["metadata"].get("deletionTimestamp"))}
