# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The Kubernetes backend: the ``kubernetes`` dynamic client against a real cluster.

kube-apiserver gives the semantics itself (resourceVersion preconditions,
finalizers, status subresource, schema validation); this class only maps
calls and errors. Writes use ``fieldValidation=Strict`` so an unknown field
fails here as it fails on the local backend.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from typing import Any, Callable, Iterable, TypeVar

from ansible_collections.metal3.baremetal.plugins.module_utils.core import selector as sel
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    StoreError,
    Unavailable,
    UnknownKind,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import (
    MAX_OBJECT_BYTES,
    Object,
    Ref,
    check_namespace,
    check_ref,
    check_size,
    checked_ref,
    require_identity,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.followed import Followed

try:
    import urllib3
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.client.exceptions import ApiException
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import DynamicApiError, NotFoundError, ResourceNotFoundError

    KUBERNETES_IMPORT_ERROR: ImportError | None = None
except ImportError as e:  # reported when a KubernetesStore is made
    KUBERNETES_IMPORT_ERROR = e

# Connect and read timeouts (seconds): a cluster that does not answer fails fast and clearly.
REQUEST_TIMEOUT = (10, 60)
TOO_MANY_REQUESTS_RETRIES = 10
STRICT = [("fieldValidation", "Strict")]
MERGE_PATCH = "application/merge-patch+json"

# A watch ends after this long and is started again from the last version seen, as client-go's reflector does.
WATCH_SECONDS = 240

T = TypeVar("T")
log = logging.getLogger(__name__)


def _configuration(kubeconfig: str | dict[str, Any] | None, context: str | None, host: str | None,
                   api_key: str | None, validate_certs: bool | None, ca_cert: str | None, client_cert: str | None,
                   client_key: str | None) -> Any:
    """A client Configuration, resolved as kubernetes.core resolves its auth options."""
    configuration = k8s_client.Configuration()
    try:
        if isinstance(kubeconfig, dict):
            k8s_config.load_kube_config_from_dict(kubeconfig, context=context, client_configuration=configuration)
        elif kubeconfig:
            k8s_config.load_kube_config(config_file=os.path.expanduser(kubeconfig), context=context,
                                        client_configuration=configuration)
        elif not (host and api_key):
            if os.environ.get("KUBERNETES_SERVICE_HOST") and not os.environ.get("KUBECONFIG"):
                k8s_config.load_incluster_config(client_configuration=configuration)
            else:
                k8s_config.load_kube_config(context=context, client_configuration=configuration)
    except (k8s_config.ConfigException, OSError, ValueError, KeyError, TypeError) as e:
        where = kubeconfig if isinstance(kubeconfig, str) else \
            "the kubeconfig given" if isinstance(kubeconfig, dict) else "the default kubeconfig"
        raise Unavailable(f"cannot load the Kubernetes configuration from {where}: {e}") from None

    def override(conf: Any) -> None:
        if host:
            conf.host = host
        if api_key:
            conf.api_key = {"BearerToken": f"Bearer {api_key}"}

    override(configuration)
    refresh = configuration.refresh_api_key_hook
    if refresh is not None and (host or api_key):
        # A kubeconfig's token is refreshed before each request, and the refresh writes its cluster's host and
        # token back: the options given on the task must still win, as in kubernetes.core.
        def refresh_then_override(conf: Any) -> None:
            refresh(conf)
            override(conf)

        configuration.refresh_api_key_hook = refresh_then_override
    if validate_certs is not None:
        configuration.verify_ssl = validate_certs
    if ca_cert:
        configuration.ssl_ca_cert = os.path.expanduser(ca_cert)
    if client_cert:
        configuration.cert_file = os.path.expanduser(client_cert)
    if client_key:
        configuration.key_file = os.path.expanduser(client_key)
    configuration.retries = 0
    return configuration


def _message(e: Any) -> str:
    try:
        message: str = json.loads(e.body)["message"]
        return message
    except (TypeError, ValueError, KeyError, AttributeError):
        return str(getattr(e, "reason", "") or e)


class KubernetesStore(Store):
    backend = "kubernetes"
    follows = True

    def __init__(self, kubeconfig: str | dict[str, Any] | None = None, context: str | None = None,
                 host: str | None = None, api_key: str | None = None, validate_certs: bool | None = None,
                 ca_cert: str | None = None, client_cert: str | None = None, client_key: str | None = None,
                 request_timeout: tuple[float, float] | None = None, untrusted: bool | None = False) -> None:
        """``request_timeout``: (connect, read) seconds of every request, discovery's included;
        ``untrusted``: the server is named by a tenant (a HostClaim's identityRef) - its discovery is cached
        for this store alone (not in the process's shared temporary file, keyed by the server's URL), and its
        errors say the HTTP status, never what the server wrote."""
        if KUBERNETES_IMPORT_ERROR is not None:
            raise BadRequest("backend: kubernetes needs the Python library 'kubernetes' on the controller "
                             f"(pip install kubernetes): {KUBERNETES_IMPORT_ERROR}")
        configuration = _configuration(kubeconfig, context, host, api_key, validate_certs, ca_cert,
                                       client_cert, client_key)
        self.host = configuration.host
        self.timeout = request_timeout or REQUEST_TIMEOUT
        self.untrusted = bool(untrusted)
        self._api = k8s_client.ApiClient(configuration)
        _default_timeout(self._api, self.timeout)
        self._resources: dict[tuple[str, str], Any] = {}
        self._followed: dict[tuple[str, str, str, str], Followed | None] = {}
        self._cache_dir = tempfile.mkdtemp(prefix="metal3-discovery-") if untrusted else None
        cache_file = os.path.join(self._cache_dir, "discovery.json") if self._cache_dir else None
        try:
            self._dynamic = self._call(lambda: DynamicClient(self._api, cache_file=cache_file))
        except (Unavailable, Forbidden):
            self.close()
            raise
        except StoreError as e:  # a 404 or a 400 on discovery: not a Kubernetes API server
            self.close()
            raise Unavailable(f"the server at {self.host} did not answer as a Kubernetes API server: {e}") from None

    def close(self) -> None:
        for followed in self._followed.values():
            if followed is not None:
                followed.close()
        self._api.close()
        if self._cache_dir:
            shutil.rmtree(self._cache_dir, ignore_errors=True)

    def follow(self, api_version: str, kind: str, namespace: str, label_selector: str) -> Followed | None:
        """A view of the selector's objects, made once per selector for the store's life: the first call lists;
        the second lists again and starts a watch (in a daemon thread) that keeps it current; later calls cost no
        request. A one-shot process (a module's run) so makes one list and no watch. None when the list is
        refused (no right to list the kind, or no answer): then the caller reads through the store."""
        key = (api_version, kind, namespace, label_selector)
        followed = self._followed.get(key)
        if followed is not None and followed.kept:
            return followed
        if key in self._followed and followed is None:
            return None
        check_namespace(namespace, f"{kind} namespace")
        resource = self._resource(api_version, kind)
        selector = str(sel.parse_selector(label_selector))
        view = followed or Followed()
        try:
            version = self._relist(view, resource, (api_version, kind), namespace, selector)
        except StoreError as e:
            log.debug("not following %s in %s: %s", kind, namespace, e)
            self._followed[key] = None
            return None
        if followed is not None and version:  # its second use: the process lives on, so keep the view current
            view.kept = True
            threading.Thread(target=self._keep, args=(view, resource, (api_version, kind), namespace, selector,
                                                      version), name=f"follow {kind}", daemon=True).start()
        self._followed[key] = view
        return view

    def _relist(self, followed: Followed, resource: Any, type_meta: tuple[str, str], namespace: str,
                selector: str) -> str | None:
        """Replace the view's objects by a list; the list's resourceVersion, to watch from (None when the list
        has none: the real Ansible Operator's proxy answers lists from its cache without one)."""
        listed = self._answer(resource.get, namespace=namespace, label_selector=selector or None,
                              _request_timeout=self.timeout)
        for item in listed.get("items") or []:
            item["apiVersion"], item["kind"] = type_meta
        followed.replace(listed.get("items") or [])
        version = (listed.get("metadata") or {}).get("resourceVersion")
        return str(version) if version else None

    def _keep(self, followed: Followed, resource: Any, type_meta: tuple[str, str], namespace: str, selector: str,
              version: str | None) -> None:
        """Watch from ``version``; list again when the watch's version is too old (410) or the watch fails
        (backed off), until the view is closed."""
        backoff = 0.5
        while not followed.stopping.is_set():
            try:
                if version is None:
                    version = self._relist(followed, resource, type_meta, namespace, selector)
                if version is None:
                    raise Unavailable("the list gave no resourceVersion to watch from")
                version = self._watch(followed, resource, type_meta, namespace, selector, version)
                backoff = 0.5
            except Exception as e:  # noqa: BLE001 - the view outlives whatever one list or watch meets
                log.debug("following %s in %s: %s", type_meta[1], namespace, e)
                version = None
                followed.stopping.wait(backoff)
                backoff = min(backoff * 2, 30.0)

    def _watch(self, followed: Followed, resource: Any, type_meta: tuple[str, str], namespace: str, selector: str,
               version: str) -> str | None:
        """Apply the watch's events from ``version`` until it ends (the last version seen) or that version is
        too old (None: list again)."""
        response = self._dynamic.request("get", resource.path(namespace=namespace), watch=True, serialize=False,
                                         label_selector=selector or None, resource_version=version,
                                         allow_watch_bookmarks=True, timeout_seconds=WATCH_SECONDS,
                                         _request_timeout=(self.timeout[0], WATCH_SECONDS + 30))
        followed.interrupt = getattr(response, "shutdown", response.close)  # urllib3 2.3 can end a blocked read
        try:
            if followed.stopping.is_set():  # closed before the interrupt was in place
                return version
            for line in response:
                if followed.stopping.is_set():
                    break
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    if obj.get("code") == 410:
                        return None
                    raise Unavailable(f"watch: {obj.get('message')}")
                version = str(obj["metadata"]["resourceVersion"])
                if event.get("type") != "BOOKMARK":
                    obj["apiVersion"], obj["kind"] = type_meta
                    followed.apply(event["type"], obj)
        finally:
            followed.interrupt = lambda: None
            response.release_conn()
        return version

    def _call(self, operation: Callable[[], T]) -> T:
        """Run one API call, mapping the client's exceptions to the store's.

        429 (throttled, or storage of a new CRD still initialising) is retried after the delay the server
        asks for, as client-go does.
        """
        attempt = 0
        while True:
            try:
                return operation()
            except StoreError:
                raise
            except (DynamicApiError, ApiException) as e:
                if getattr(e, "status", None) == 429 and attempt < TOO_MANY_REQUESTS_RETRIES:
                    attempt += 1
                    time.sleep(_retry_after(e))
                    continue
                raise _api_error(e, self.host if self.untrusted else None) from None
            except (urllib3.exceptions.HTTPError, OSError) as e:
                reason = getattr(e, "reason", None) or e
                raise Unavailable(f"cannot reach the Kubernetes API at {self.host}: {reason}") from None
            except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
                # An answer that is not the Kubernetes API's (JSON of another shape, or no JSON): the client
                # fails reading it. Its content is not repeated. Only a tenant's server is read so: the
                # operator's own cluster answering so is a defect to see, not an outage.
                if not self.untrusted:
                    raise
                raise Unavailable(f"the server at {self.host} did not answer as a Kubernetes API server "
                                  f"({type(e).__name__} reading its answer)") from None

    def _answer(self, method: Callable[..., Any], **params: Any) -> Object:
        """Run one API request (see :meth:`_call`); its answer, an object, a list or a Status, as a dict.

        Decoded from the raw JSON: the dynamic client's own answer objects cost milliseconds per request on a
        large object (a pool's index of thousands of claims), converted field by field there and back.
        """
        def request() -> Object:
            answer: Object = json.loads(method(serialize=False, **params).data)
            return answer
        return self._call(request)

    def _resource(self, api_version: str, kind: str) -> Any:
        key = (api_version, kind)
        if key not in self._resources:
            def find() -> Any:
                try:
                    return self._dynamic.resources.get(api_version=api_version, kind=kind)
                except (ResourceNotFoundError, NotFoundError):  # a 404 on discovery: no object's absence
                    raise UnknownKind(f"unknown kind {kind!r} in apiVersion {api_version!r}: the cluster at "
                                      f"{self.host} does not serve it (are the CRDs installed?)") from None
            self._resources[key] = self._call(find)
        return self._resources[key]

    @staticmethod
    def _dry(dry_run: bool) -> dict[str, Any]:
        return {"dry_run": "All"} if dry_run else {}

    def get(self, ref: Ref) -> Object:
        check_ref(ref)
        resource = self._resource(ref.api_version, ref.kind)
        return self._answer(resource.get, name=ref.name, namespace=ref.namespace,
                            _request_timeout=self.timeout)

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | Iterable[str] | None = None) -> list[Object]:
        selector = str(sel.parse_selector(label_selector)) or None
        if namespace is not None:
            check_namespace(namespace, f"{kind} namespace")
        resource = self._resource(api_version, kind)
        result = self._answer(resource.get, namespace=namespace, label_selector=selector,
                              _request_timeout=self.timeout)
        items = result.get("items") or []
        for item in items:  # list responses leave these out of each item
            item["apiVersion"], item["kind"] = api_version, kind
        return sorted(items, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))

    def create(self, obj: Object, dry_run: bool = False) -> Object:
        require_identity(obj)
        ref = checked_ref(obj)
        check_size(obj)
        resource = self._resource(ref.api_version, ref.kind)
        return self._answer(resource.create, body=obj, namespace=ref.namespace, query_params=list(STRICT),
                            _request_timeout=self.timeout, **self._dry(dry_run))

    def update(self, obj: Object, dry_run: bool = False) -> Object:
        require_identity(obj)
        ref = checked_ref(obj)
        check_size(obj)
        resource = self._resource(ref.api_version, ref.kind)
        return self._answer(resource.replace, body=obj, name=ref.name, namespace=ref.namespace,
                            query_params=list(STRICT), _request_timeout=self.timeout,
                            **self._dry(dry_run))

    def update_status(self, obj: Object, dry_run: bool = False) -> Object:
        require_identity(obj)
        ref = checked_ref(obj)
        check_size(obj)
        resource = self._resource(ref.api_version, ref.kind)
        return self._answer(resource.status.replace, body=obj, name=ref.name, namespace=ref.namespace,
                            query_params=list(STRICT),
                            _request_timeout=self.timeout,
                            **self._dry(dry_run))

    def patch(self, ref: Ref, patch: Object, dry_run: bool = False) -> Object:
        check_ref(ref)
        resource = self._resource(ref.api_version, ref.kind)
        return self._patch(resource, ref, patch, dry_run)

    def patch_status(self, ref: Ref, patch: Object, dry_run: bool = False) -> Object:
        check_ref(ref)
        resource = self._resource(ref.api_version, ref.kind)
        return self._patch(resource.status, ref, patch, dry_run)

    def _patch(self, resource: Any, ref: Ref, patch: Object, dry_run: bool) -> Object:
        if not isinstance(patch, dict):
            raise BadRequest(f"a merge patch must be a mapping, not {type(patch).__name__}")
        return self._answer(resource.patch, body=patch, name=ref.name, namespace=ref.namespace,
                            content_type=MERGE_PATCH, query_params=list(STRICT),
                            _request_timeout=self.timeout,
                            **self._dry(dry_run))

    def delete(self, ref: Ref, dry_run: bool = False) -> Object | None:
        check_ref(ref)
        resource = self._resource(ref.api_version, ref.kind)
        result = self._answer(resource.delete, name=ref.name, namespace=ref.namespace,
                              propagation_policy="Background",
                              _request_timeout=self.timeout,
                              **self._dry(dry_run))
        # kube-apiserver answers with the object while finalizers hold it, else with the last state or a Status.
        if result.get("kind") != "Status" and (result.get("metadata") or {}).get("finalizers"):
            return result
        return None


def _retry_after(e: Any) -> float:
    headers = getattr(e, "headers", None) or {}
    try:
        return min(float(headers.get("Retry-After", 1)), 5.0)
    except (TypeError, ValueError):
        return 1.0


def _default_timeout(api: Any, timeout: tuple[float, float]) -> None:
    """Give every request of ``api`` that names no timeout ``timeout`` - the dynamic client's discovery names
    none, and a server that accepts the connection and never answers would hold the reconcile for ever."""
    rest = api.rest_client
    request = rest.request

    def timed(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("_request_timeout") is None:
            kwargs["_request_timeout"] = timeout
        return request(*args, **kwargs)

    rest.request = timed


def _api_error(e: Any, untrusted_host: str | None = None) -> StoreError:
    """The store's error for the API's answer ``e``; with ``untrusted_host``, its message says only the HTTP
    status (what a tenant's server wrote is not repeated)."""
    status = getattr(e, "status", None)
    message = f"the Kubernetes API at {untrusted_host} answered HTTP {status}" if untrusted_host else _message(e)
    reason = ""
    with contextlib.suppress(TypeError, ValueError, AttributeError):
        reason = json.loads(e.body).get("reason", "")
    if status == 404:
        return NotFound(message)
    if status == 409:
        return AlreadyExists(message) if reason == "AlreadyExists" else Conflict(message)
    if status == 422:
        return Invalid(message)
    if status == 400:
        return BadRequest(message)
    if status == 413 or "request is too large" in message:  # kube-apiserver's body limit, or etcd's
        return BadRequest(f"Request entity too large: {message} (objects are limited to {MAX_OBJECT_BYTES} bytes)")
    if status in (401, 403):
        return Forbidden(message)
    return Unavailable(message if untrusted_host else f"the Kubernetes API answered {status}: {message}")
