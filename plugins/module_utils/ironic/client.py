# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""Ironic through openstacksdk: the few calls a BareMetalHost reconcile makes, and their errors.

openstacksdk is imported on first use (~0.3 s), so hosts that never reach Ironic
(paused, unmanaged) cost nothing. Every openstacksdk error leaves this module as one of the
engine's Ironic errors (core/errors.py), never as a store error: IronicUnavailable (Ironic
does not answer, or cannot be used: nothing should be written) or IronicRefused (Ironic
answered and refused: the host records it).
"""
from __future__ import annotations

import json
import os
import threading
import time
import types
from dataclasses import dataclass
from typing import Any, Callable

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import IronicRejected, IronicUnavailable

# Ironic provision states in which a node is busy with inspect, clean, deploy or undeploy: what
# upstream's PROVISIONING_LIMIT counts (ironic.go HasCapacity).
BUSY_STATES = ("cleaning", "clean wait", "inspecting", "inspect wait", "deploying", "wait call-back", "deleting")
VMEDIA_DEVICE = "cdrom"  # the virtual media device a DataImage goes in, as upstream's
VIRTUAL_MEDIA_BOOT = ("redfish-virtual-media", "idrac-redfish-virtual-media", "redfish-https")
NODE_FIELDS = ("id", "name", "provision_state", "target_provision_state", "power_state", "target_power_state",
               "last_error", "maintenance", "instance_info", "driver", "driver_info", "properties",
               "deploy_interface", "boot_interface", "raid_interface", "automated_clean",
               "health",  # the BMC's own health (API 1.109; None from an older Ironic or fake hardware)
               "reservation")  # the conductor holding the node's lock, None when it is free


class IronicRefused(IronicRejected):
    """Ironic answered and refused the request; the message is Ironic's, ``status_code`` its HTTP status."""

    def __init__(self, message: str, status_code: int | None = None):
        super().__init__(message)
        self.status_code = status_code


@dataclass(frozen=True)
class IronicOptions:
    """Where Ironic is: a clouds.yaml cloud, or an endpoint with HTTP basic credentials (or none)."""

    cloud: str | None = None
    endpoint: str | None = None
    username: str | None = None
    password: str | None = None
    timeout: float = 30.0
    provisioning_limit: int = 20
    # Failed deploys of one image before a host stops trying it (0: no limit), as upstream's
    # --max-provisioning-retries; the state machine's setting, given with the other options of host reconciles.
    max_provisioning_retries: int = 5
    # The deploy ramdisk every host boots to be inspected, cleaned and deployed, as upstream's
    # DEPLOY_KERNEL_URL / DEPLOY_RAMDISK_URL / DEPLOY_ISO_URL.
    deploy_kernel: str = ""
    deploy_ramdisk: str = ""
    deploy_iso: str = ""
    # Upstream's --build-preprov-image: each host asks for a PreprovisioningImage and boots the ramdisk it serves.
    build_preprov_image: bool = False

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> IronicOptions:
        return cls(cloud=params.get("ironic_cloud"), endpoint=params.get("ironic_url"),
                   username=params.get("ironic_username"), password=params.get("ironic_password"),
                   timeout=float(params.get("ironic_timeout") or 30),
                   provisioning_limit=int(params.get("provisioning_limit") or 20),
                   max_provisioning_retries=int(cls.max_provisioning_retries
                                                if params.get("max_provisioning_retries") is None
                                                else params["max_provisioning_retries"]),
                   deploy_kernel=params.get("deploy_kernel_url") or "",
                   deploy_ramdisk=params.get("deploy_ramdisk_url") or "",
                   deploy_iso=params.get("deploy_iso_url") or "",
                   build_preprov_image=bool(params.get("build_preprov_image")))

    def describe(self) -> str:
        if self.endpoint:
            return self.endpoint
        try:
            return f"cloud {cloud_name(self.cloud)!r}"
        except IronicUnavailable:
            return "no cloud chosen"


# The cloud the metal3.baremetal.ironic role writes into clouds.yaml.
DEFAULT_CLOUD = "metal3"


def cloud_name(cloud: str | None) -> str:
    """The clouds.yaml entry to use: ``cloud`` (ironic_cloud), else OS_CLOUD; else ``metal3`` when clouds.yaml has
    it (or has no cloud at all: openstacksdk then says what it did not find); else the only cloud clouds.yaml has,
    whatever its name - AWX's OpenStack credential writes a clouds.yaml of one cloud named after the credential and
    points OS_CLIENT_CONFIG_FILE at it. Several clouds and none of them ``metal3``: which one is the caller's
    choice, and the error says so."""
    chosen = cloud or os.environ.get("OS_CLOUD")
    if chosen:
        return chosen
    try:
        from openstack.config import loader
    except ImportError:
        return DEFAULT_CLOUD  # connecting says the library is missing
    try:
        config = loader.OpenStackConfig()
    except Exception as e:  # openstacksdk's config errors, YAML's, the file's: an unreadable or invalid clouds.yaml
        raise IronicUnavailable(f"Ironic: cannot read clouds.yaml: {_first_line(e)}") from None
    # A "defaults" cloud of openstacksdk's defaults is its stand-in when no file and no OS_* variable gives one.
    clouds = config.cloud_config["clouds"]
    names: list[str] = sorted(str(name) for name in clouds
                              if not (name == "defaults" and clouds[name] == config.defaults))
    if DEFAULT_CLOUD in names or not names:
        return DEFAULT_CLOUD
    if len(names) == 1:
        return names[0]
    raise IronicUnavailable(f"Ironic: {config.config_filename or 'clouds.yaml'} has several clouds "
                            f"({', '.join(names)}) and none is chosen: set ironic_cloud (or OS_CLOUD) to one of "
                            "them, or ironic_url")


Node = dict[str, Any]


class Ironic:
    """The Ironic calls of a reconcile; nodes come back as plain dicts of NODE_FIELDS."""

    def __init__(self, options: IronicOptions, dry_run: bool = False):
        self.options = options
        self.dry_run = dry_run  # check mode: read Ironic, change nothing
        self._conn: Any = None

    @property
    def _baremetal(self) -> Any:
        if self._conn is None:
            self._conn = self._connect()
        return self._conn.baremetal

    def _connect(self) -> Any:
        try:
            import openstack
        except ImportError:
            raise IronicUnavailable("Ironic: the Python library 'openstacksdk' is needed on the controller "
                                    "(pip install openstacksdk)") from None
        opts = self.options
        # No baremetal_api_version: openstacksdk negotiates the newest both sides speak (firmware_interface
        # needs 1.86; upstream's floor for an external Ironic is 1.81).
        settings: dict[str, Any] = {"api_timeout": opts.timeout}
        try:
            if opts.endpoint:
                if opts.username:
                    settings.update(auth_type="http_basic", auth={"endpoint": opts.endpoint, "username": opts.username,
                                                                  "password": opts.password or ""})
                else:
                    settings.update(auth_type="none", auth={"endpoint": opts.endpoint})
                return openstack.connect(load_yaml_config=False, load_envvars=False, **settings)
            return openstack.connect(cloud=cloud_name(opts.cloud), **settings)
        except IronicUnavailable:
            raise
        except Exception as e:  # openstacksdk's config errors: no such cloud, unreadable clouds.yaml
            raise IronicUnavailable(f"Ironic: cannot use {opts.describe()}: {_first_line(e)}") from None

    def _call(self, what: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """openstacksdk's baremetal proxy ``method``; the proxy is made here, as making it may reach Ironic."""
        from openstack import exceptions as sdk

        try:
            result = getattr(self._baremetal, method)(*args, **kwargs)
            return list(result) if isinstance(result, types.GeneratorType) else result  # listings are lazy
        except sdk.NotFoundException:
            return None
        except sdk.HttpException as e:
            if e.status_code is None or e.status_code in (502, 503, 504):
                raise IronicUnavailable(f"Ironic at {self.options.describe()} did not answer ({what}): "
                                        f"{_first_line(e)}") from None
            raise IronicRefused(f"Ironic refused to {what}: {_ironic_message(e)}", e.status_code) from None
        except (sdk.SDKException, OSError) as e:
            raise IronicUnavailable(f"Ironic at {self.options.describe()} did not answer ({what}): "
                                    f"{_first_line(e)}") from None
        except Exception as e:  # keystoneauth's ConnectFailure and friends do not derive from SDKException
            if type(e).__module__.startswith(("keystoneauth1", "requests", "urllib3")):
                raise IronicUnavailable(f"Ironic at {self.options.describe()} did not answer ({what}): "
                                        f"{_first_line(e)}") from None
            raise

    # -- nodes ---------------------------------------------------------------------------------------
    def get_node(self, name_or_id: str) -> Node | None:
        node = self._call(f"read node {name_or_id}", "get_node", name_or_id)
        return _node(node) if node is not None else None

    def node_by_mac(self, mac: str) -> Node | None:
        ports = list(self._call(f"look up MAC {mac}", "ports", address=mac.lower(),
                                fields=["node_uuid"]) or [])
        return self.get_node(ports[0].node_id) if ports else None

    def create_node(self, name: str, driver: str, driver_info: dict[str, Any], interfaces: dict[str, str],
                    properties: dict[str, Any], mac: str | None, automated_clean: bool,
                    network_data: dict[str, Any] | None = None) -> Node:
        if self.dry_run:
            return {**dict.fromkeys(NODE_FIELDS), "id": "", "name": name, "provision_state": "enroll",
                    "driver": driver, "driver_info": {}, "properties": properties, **interfaces}
        node = self._call(f"create node {name}", "create_node", name=name, driver=driver,
                          driver_info=driver_info, properties=properties, automated_clean=automated_clean,
                          **interfaces)
        if mac:
            self._call(f"create the port {mac} of node {name}", "create_port", node_id=node.id,
                       address=mac.lower())
        if network_data:  # openstacksdk's Node drops the field from a create: a patch sets it
            return self.patch_node(_node(node), {"network_data": network_data})
        return _node(node)

    def network_data(self, node: Node) -> dict[str, Any]:
        """The node's network_data (the deploy ramdisk's network where there is no DHCP); {} when none.

        openstacksdk does not map the field, so it is read from the API (1.66 has it).
        """
        network_data: dict[str, Any] = self._unmapped_field(node, "network_data", "1.66") or {}
        return network_data

    def patch_node(self, node: Node, changes: dict[str, Any]) -> Node:
        """Set top-level node fields (driver_info, instance_info, deploy_interface, automated_clean...)."""
        if self.dry_run:
            return {**node, **changes}
        patch = [{"op": "add", "path": f"/{key}", "value": value} for key, value in changes.items()]
        return _node(self._call(f"update node {node['name']}", "patch_node", node["id"], patch))

    def set_provision_state(self, node: Node, target: str, **kwargs: Any) -> None:
        if self.dry_run:
            return
        self._call(f"move node {node['name']} to {target}", "set_node_provision_state", node["id"],
                   target, **kwargs)

    def service(self, node: Node, steps: list[dict[str, Any]]) -> None:
        """Service an active node with ``steps`` (API 1.87): openstacksdk's proxy does not pass service steps."""
        self._provision(node, {"target": "service", "service_steps": steps}, "1.87", f"service node {node['name']}")

    def abort(self, node: Node) -> None:
        """Abort what the node waits for: an inspection, a cleaning, a servicing or, from API 1.110, a deploy."""
        self._provision(node, {"target": "abort"}, "1.110", f"abort what node {node['name']} waits for")

    def set_target_raid_config(self, node: Node, logical_disks: list[dict[str, Any]]) -> None:
        """The node's target RAID configuration, which its next raid.create_configuration step builds (API 1.12)."""
        self._provision(node, {"logical_disks": logical_disks}, "1.12",
                        f"set the target RAID configuration of node {node['name']}", state="raid")

    def target_raid_config(self, node: Node) -> dict[str, Any]:
        """The node's target RAID configuration as Ironic holds it ({} when none)."""
        config: dict[str, Any] = self._unmapped_field(node, "target_raid_config", "1.12") or {}
        return config

    def _provision(self, node: Node, body: dict[str, Any], microversion: str, what: str,
                   state: str = "provision") -> None:
        """PUT the node's provision (or ``state``) state at ``microversion``, which openstacksdk's proxy does not
        choose."""
        self._write_node("put", node, f"/states/{state}", microversion, what, json=body)

    def _write_node(self, method: str, node: Node, path: str, microversion: str, what: str,
                    **kwargs: Any) -> None:
        """``method`` (put, post, delete) on /nodes/<id><path> at ``microversion`` (``what`` it does, for errors);
        nothing in check mode."""
        if self.dry_run:
            return
        response = self._call(what, method, f"/nodes/{node['id']}{path}", microversion=microversion, **kwargs)
        if response is not None and response.status_code >= 400:
            raise IronicRefused(f"Ironic refused to {what}: {_response_message(response)}", response.status_code)

    # -- virtual media (a DataImage): upstream's AttachDataImage, DetachDataImage, GetDataImageStatus ----------
    def attach_vmedia(self, node: Node, url: str) -> None:
        """Insert ``url`` in the node's virtual CD drive (API 1.89). Ironic answers 204 at once and attaches after:
        a failure is only in the node's history (``history``)."""
        self._write_node("post", node, "/vmedia", "1.89", f"attach virtual media to node {node['name']}",
                         json={"device_type": VMEDIA_DEVICE, "image_url": url})

    def detach_vmedia(self, node: Node) -> None:
        """Eject the node's virtual CD (API 1.89; asynchronous too)."""
        self._write_node("delete", node, "/vmedia", "1.89", f"detach virtual media from node {node['name']}",
                         params={"device_types": VMEDIA_DEVICE})

    def vmedia(self, node: Node) -> list[dict[str, Any]]:
        """The node's virtual media devices as its BMC reports them (API 1.93): each ``media_types``, ``inserted``,
        ``image`` (Ironic's own copy of the image when it republished it)."""
        what = f"read the virtual media of node {node['name']}"
        response = self._call(what, "get", f"/nodes/{node['id']}/vmedia", microversion="1.93")
        if response is None or response.status_code == 404:
            return []
        if response.status_code >= 400:
            raise IronicRefused(f"Ironic refused to {what}: {_response_message(response)}", response.status_code)
        body = response.json()
        # A bare list; a mapping of one list under some key is read the same, should Ironic wrap it one day.
        if isinstance(body, dict):
            body = next((value for value in body.values() if isinstance(value, list)), [])
        return [entry for entry in body if isinstance(entry, dict)]

    def history(self, node: Node, limit: int = 20) -> list[dict[str, Any]]:
        """The node's newest history events (API 1.78), newest first: each ``created_at``, ``severity``,
        ``event``."""
        listing = self._read_node(node, "/history", {"sort_dir": "desc", "limit": str(limit)}, "1.78",
                                  f"the history of node {node['name']}") or {}
        events: list[dict[str, Any]] = listing.get("history") or []
        return events

    def set_power_state(self, node: Node, target: str) -> None:
        """target: 'power on', 'power off', 'rebooting', 'soft power off', 'soft rebooting'; does not wait."""
        if self.dry_run:
            return
        self._call(f"set the power of node {node['name']} to {target}", "set_node_power_state",
                   node["id"], target, wait=False)

    def set_maintenance(self, node: Node, reason: str) -> None:
        if self.dry_run:
            return
        self._call(f"put node {node['name']} in maintenance", "set_node_maintenance", node["id"],
                   reason)

    def clear_maintenance(self, node: Node) -> None:
        if self.dry_run:
            return
        self._call(f"take node {node['name']} out of maintenance", "unset_node_maintenance", node["id"])

    def delete_node(self, node: Node) -> None:
        if self.dry_run:
            return
        self._call(f"delete node {node['name']}", "delete_node", node["id"], ignore_missing=True)

    def inventory(self, node: Node) -> dict[str, Any] | None:
        """What inspection found (Ironic's inventory), or None when it stored none."""
        inventory: dict[str, Any] | None = self._call(f"read the inventory of node {node['name']}",
                                                      "get_node_inventory", node["id"])
        return inventory

    def inspection_finished_at(self, node: Node) -> str | None:
        """When Ironic last finished inspecting the node (None: never, or one is running).

        Ironic sets it as an inspection ends and clears it as one starts, whatever the inspect interface;
        openstacksdk does not map the field, so it is read from the API (1.6 has it, 1.8 filters fields).
        """
        finished: str | None = self._unmapped_field(node, "inspection_finished_at", "1.8")
        return finished

    def bios_settings(self, node: Node) -> list[dict[str, Any]]:
        """The node's BIOS settings as Ironic last read them from the BMC, each with its registry entry
        (attribute_type, allowable_values, bounds, lengths, read_only, reset_required): [] when its BIOS
        interface has none. Ironic reads them when a node becomes manageable and around cleaning and servicing.

        openstacksdk has no BIOS calls, so they are read from the API (1.74 gives the registry entries).
        """
        listing = self._read_node(node, "/bios", {"detail": "True"}, "1.74",
                                  f"the BIOS settings of node {node['name']}") or {}
        settings: list[dict[str, Any]] = listing.get("bios") or []
        return settings

    def firmware_components(self, node: Node) -> list[dict[str, Any]]:
        """The node's firmware components as Ironic last read them from the BMC (component, initial_version,
        current_version, last_version_flashed, updated_at): [] when its firmware interface has none. Ironic reads
        them after inspection, on verify, and around cleaning and servicing.

        Read from the API (1.86), as the BIOS settings are: one way to read a node's sub-resources.
        """
        listing = self._read_node(node, "/firmware", {}, "1.86", f"the firmware components of node {node['name']}")
        components: list[dict[str, Any]] = (listing or {}).get("firmware") or []
        return components

    def _unmapped_field(self, node: Node, field: str, microversion: str) -> Any:
        """One node field openstacksdk does not map, read from the API; None when the node is gone."""
        return (self._read_node(node, "", {"fields": field}, microversion, f"node {node['name']}") or {}).get(field)

    def _read_node(self, node: Node, path: str, params: dict[str, str], microversion: str,
                   what: str) -> dict[str, Any] | None:
        """GET /nodes/<id><path> at ``microversion`` (``what`` it reads, for errors); None when the node is gone."""
        what = f"read {what}"
        response = self._call(what, "get", f"/nodes/{node['id']}{path}", params=params, microversion=microversion)
        if response is None or response.status_code == 404:
            return None
        if response.status_code >= 400:
            raise IronicRefused(f"Ironic refused to {what}: {_response_message(response)}", response.status_code)
        body: dict[str, Any] = response.json()
        return body

    def take_provisioning_slot(self, limit: int) -> tuple[bool, int]:
        """Whether one more node may start inspecting, cleaning, deploying or undeploying (and the busy count).

        Busy nodes booting from virtual media are not counted, as upstream does not count them.
        """
        with _BUSY_LOCK:
            busy = _BUSY.setdefault(self.options.describe(), _BusyCount())
        if self.dry_run:
            return busy.count < limit, busy.count
        return busy.take(limit, lambda: sum(1 for n in self.nodes_in(BUSY_STATES)
                                            if n["boot_interface"] not in VIRTUAL_MEDIA_BOOT))

    def nodes_in(self, states: tuple[str, ...]) -> list[Node]:
        """Nodes in any of ``states``, filtered by Ironic (one listing per state): few nodes are busy at once,
        and openstacksdk spends ~15 ms of CPU on each node object it builds, so listing them all is the cost."""
        found: list[Node] = []
        for state in states:
            nodes = self._call("list nodes", "nodes", provision_state=state,
                               fields=["uuid", "name", "provision_state", "boot_interface"])
            found += [{"id": n.id, "name": n.name, "provision_state": n.provision_state,
                       "boot_interface": n.boot_interface} for n in nodes or []]
        return found


class _BusyCount:
    """How many nodes of one Ironic are busy, shared by the reconciles of one process for ``ttl`` seconds.

    Each start granted in the meantime is added to the count, so a burst of reconciles cannot exceed the
    limit between two listings (upstream counts afresh each time, and races with its other workers).
    """

    def __init__(self, ttl: float = 1.0):
        self.ttl = ttl
        self.lock = threading.Lock()
        self.count = 0
        self.expires = 0.0

    def take(self, limit: int, listing: Callable[[], int]) -> tuple[bool, int]:
        with self.lock:
            if time.monotonic() >= self.expires:
                self.count = listing()
                self.expires = time.monotonic() + self.ttl
            if self.count < limit:
                self.count += 1
                return True, self.count
            return False, self.count


_BUSY: dict[str, _BusyCount] = {}
_BUSY_LOCK = threading.Lock()


# Ironic's field names where openstacksdk's attributes differ.
SDK_ATTRIBUTES = {"maintenance": "is_maintenance", "automated_clean": "is_automated_clean_enabled"}


def _node(node: Any) -> Node:
    return {name: getattr(node, SDK_ATTRIBUTES.get(name, name), None) for name in NODE_FIELDS}


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


def _response_message(response: Any) -> str:
    """Ironic's own words in an error response (its error body's faultstring), else the body's start."""
    try:
        fault = json.loads(json.loads(response.text)["error_message"])["faultstring"]
    except (ValueError, KeyError, TypeError):
        fault = response.text
    return str(fault).strip()[:200]


def _ironic_message(error: Any) -> str:
    """Ironic's own words: openstacksdk puts them after the URL in its message."""
    details = getattr(error, "details", None)
    if details:
        return str(details).strip()
    return _first_line(error)
