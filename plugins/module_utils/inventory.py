# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""What was provisioned, as Ansible inventory records: the engine of the metal3.baremetal.metal3 inventory plugin.

Each machine is one host, named as its owner knows it: a Metal3Machine by the machine's name; a HostClaim a
Metal3Machine did not make, by the claim's; a provisioned BareMetalHost no listed machine or claim holds, by the
host's. ``read_objects`` reads what that takes from a store (no Secret is read: addresses come from the
IPAddresses and the data templates); ``host_records`` turns it into hosts, variables and groups, plain data the
plugin hands to Ansible. Group names are given raw ('cluster_my-cluster'); the plugin makes them valid the
Ansible way.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, cast

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import (
    CAPI_API,
    CLUSTER_NAME_LABEL,
    HOST_ANNOTATION,
    HOST_CLAIM_ANNOTATION,
    INFRA_API,
    owner_named,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.machines import CONTROL_PLANE_LABEL
from ansible_collections.metal3.baremetal.plugins.module_utils.core import pause
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Forbidden, Invalid, NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, split_reference
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (
    API as BMH_API,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (
    EXTERNALLY_PROVISIONED,
    PROVISIONED,
    host_state,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam.allocation import IPAM_API
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.templating.render import normalize_template_spec

if TYPE_CHECKING:
    from ansible_collections.metal3.baremetal.plugins.module_utils.api.types import (
        BareMetalHost,
        BareMetalHostSpec,
        HostClaim,
        HostClaimSpec,
        IPAddress,
        IPAddressSpec,
        Metal3Data,
        Metal3Machine,
    )

try:
    import jmespath

    HAS_JMESPATH = True
except ImportError:  # pragma: no cover - a dependency of the collection (and of openstacksdk)
    HAS_JMESPATH = False

FAILURE_DOMAIN_LABEL = "infrastructure.cluster.x-k8s.io/failure-domain"
ADDRESS_TYPES = ("InternalIP", "ExternalIP", "Hostname", "InternalDNS", "ExternalDNS")
# A BareMetalHost no machine or claim holds is a host of the inventory in these states only: it runs something.
RUNNING_STATES = (PROVISIONED, EXTERNALLY_PROVISIONED)

# (apiVersion, kind) of everything read: the three kinds hosts come from, and what their facts are read from.
MACHINE, CLAIM, HOST = (INFRA_API, "Metal3Machine"), (BMH_API, "HostClaim"), (BMH_API, "BareMetalHost")
SOURCES = (MACHINE, CLAIM, HOST)
FACTS = ((CAPI_API, "Cluster"), (CAPI_API, "Machine"), (INFRA_API, "Metal3Data"),
         (INFRA_API, "Metal3DataTemplate"), (IPAM_API, "IPAddress"))

Objects = Mapping[str, list[Object]]  # kind -> the objects of that kind read


@dataclass
class HostRecord:
    """One inventory host: its name, its variables (``metal3_*``, and ``ansible_host`` when it has an address on
    the chosen network) and the groups it belongs to (raw names)."""

    name: str
    variables: dict[str, Any]
    groups: list[str] = field(default_factory=list)


def read_objects(store: Store, namespace: str | None = None) -> dict[str, list[Object]]:
    """Every object the records are made from, in ``namespace`` (all when None). A kind the store does not serve
    (a cluster without that CRD) or may not be listed (a tenant's RBAC) is none; Forbidden when none of the kinds
    hosts come from may be listed."""
    objects: dict[str, list[Object]] = {}
    forbidden: list[str] = []
    for api_version, kind in SOURCES + FACTS:
        try:
            objects[kind] = store.list(api_version, kind, namespace)
        except NotFound:  # UnknownKind is one: the API server has no such resource
            objects[kind] = []
        except Forbidden as e:
            objects[kind] = []
            forbidden.append(f"{kind}: {e}")
    if len([k for k in forbidden if k.split(":")[0] in {kind for _api, kind in SOURCES}]) == len(SOURCES):
        raise Forbidden("; ".join(forbidden))
    return objects


def host_records(objects: Objects, network: Iterable[str] | None = None, query: str | None = None) -> list[HostRecord]:
    """The hosts ``objects`` hold, sorted by name; ``ansible_host`` their address on the first of ``network``
    (patterns of network ids, IPPool names or address types; the first InternalIP when None) and only those
    ``query`` (a JMESPath expression over the list of each host's variables plus its ``object``) keeps.

    Invalid naming the option for a query that does not compile or keeps something other than hosts, and for a
    network no host has an address on."""
    facts = _Facts(objects)
    records = [*(facts.machine(m) for m in objects.get(MACHINE[1], [])),
               *(facts.claim(c) for c in objects.get(CLAIM[1], []) if not facts.made_by_machine(c)),
               *(facts.host(h) for h in objects.get(HOST[1], []) if facts.runs_alone(h))]
    if query:
        records = _filtered(records, query)
    patterns = list(network or [])
    found = False
    for record, _obj in records:
        address = choose_address(record.variables, patterns)
        if address:
            record.variables["ansible_host"] = address
            found = True
    if patterns and records and not found:
        known = sorted({n for r, _o in records for n in r.variables["metal3_networks"]}
                       | {a["type"] for r, _o in records for a in r.variables["metal3_addresses"]})
        raise Invalid(f"network: no host has an address on {', '.join(patterns)} (the hosts' networks and "
                      f"address types: {', '.join(known) or 'none'})")
    return _named([r for r, _o in records])


def choose_address(variables: Mapping[str, Any], patterns: list[str]) -> str | None:
    """The address of the first pattern that names one of the host's networks (id or IPPool) or address types;
    with no pattern, the first InternalIP."""
    addresses = variables.get("metal3_addresses") or []
    networks = variables.get("metal3_networks") or {}
    for pattern in patterns or ["InternalIP"]:
        for name in sorted(networks):
            if fnmatch.fnmatchcase(name, pattern):
                return str(networks[name])
        for address in addresses:
            if fnmatch.fnmatchcase(address.get("type", ""), pattern) and address.get("address"):
                return str(address["address"])
    return None


def _filtered(records: list[tuple[HostRecord, Object]], query: str) -> list[tuple[HostRecord, Object]]:
    if not HAS_JMESPATH:
        raise Invalid("filter: needs the Python library jmespath on the controller")
    try:
        expression = jmespath.compile(query)
    except jmespath.exceptions.JMESPathError as e:
        where = f" at column {e.lex_position + 1}" if isinstance(getattr(e, "lex_position", None), int) else ""
        problem = getattr(e, "msg", None) or str(e).splitlines()[0]
        raise Invalid(f"filter: not a JMESPath expression: {query!r}: {problem}{where}") from None
    listed = [{**record.variables, "object": obj} for record, obj in records]
    try:
        kept = expression.search(listed)
    except jmespath.exceptions.JMESPathError as e:
        raise Invalid(f"filter: {query!r} fails on the hosts: {e}") from None
    if kept is None:
        kept = []
    if not isinstance(kept, list) or not all(isinstance(k, dict) and "metal3_name" in k for k in kept):
        raise Invalid(f"filter: must keep some of the hosts (a list of them, such as "
                      f"[?metal3_failure_domain=='az-a']), not {_short(kept)}")
    wanted = {_identity(k) for k in kept}
    return [(r, o) for r, o in records if _identity(r.variables) in wanted]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _identity(variables: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(variables.get("metal3_kind")), str(variables.get("metal3_namespace")),
            str(variables.get("metal3_name")))


def _named(records: list[HostRecord]) -> list[HostRecord]:
    """Host names unique: an object's name, or ``<name>.<namespace>`` (then ``<kind>.<name>.<namespace>``)
    where names meet."""
    def with_namespace(record: HostRecord) -> str:
        return f"{record.name}.{record.variables['metal3_namespace']}"

    def with_kind(record: HostRecord) -> str:
        return f"{str(record.variables['metal3_kind']).lower()}.{record.name}"

    for qualify in (with_namespace, with_kind):
        counts: dict[str, int] = {}
        for record in records:
            counts[record.name] = counts.get(record.name, 0) + 1
        for record in records:
            if counts[record.name] > 1:
                record.name = qualify(record)
    return sorted(records, key=lambda r: r.name)


class _Facts:
    """Indexes of what the records read besides their own object."""

    def __init__(self, objects: Objects):
        self.clusters = {(c["metadata"].get("namespace"), c["metadata"]["name"]): c
                         for c in objects.get("Cluster", [])}
        self.machines = {(m["metadata"].get("namespace"), m["metadata"]["name"]): m
                         for m in objects.get("Machine", [])}
        self.data = {(d["metadata"].get("namespace"), d["metadata"]["name"]): d for d in objects.get("Metal3Data", [])}
        self.templates = {(t["metadata"].get("namespace"), t["metadata"]["name"]): t
                          for t in objects.get("Metal3DataTemplate", [])}
        self.claims = {(c["metadata"].get("namespace"), c["metadata"]["name"]): c for c in objects.get(CLAIM[1], [])}
        self.addresses: dict[tuple[str | None, str], dict[str, str]] = {}  # (ns, IPClaim name) -> {pool: address}
        for address in objects.get("IPAddress", []):
            spec = cast("IPAddress", address).get("spec") or cast("IPAddressSpec", {})
            claim, pool = (spec.get("claim") or {}).get("name"), (spec.get("pool") or {}).get("name")
            if claim and pool and spec.get("address"):
                self.addresses.setdefault((address["metadata"].get("namespace"), claim), {})[pool] = spec["address"]
        self.machine_claims = {split_reference(_annotations(m)[HOST_CLAIM_ANNOTATION], m["metadata"]["namespace"])
                               for m in objects.get(MACHINE[1], []) if _annotations(m).get(HOST_CLAIM_ANNOTATION)}
        # A host's failure domain: where a machine or claim landed, which may not be the domain it asked for.
        self.host_domains: dict[tuple[str, str], str] = {
            (h["metadata"].get("namespace") or "", h["metadata"]["name"]):
                str((h["metadata"].get("labels") or {}).get(FAILURE_DOMAIN_LABEL, ""))
            for h in objects.get(HOST[1], [])}
        self.consumers = {(kind, ns, o["metadata"]["name"]) for (_api, kind) in (MACHINE, CLAIM)
                          for o in objects.get(kind, []) for ns in [o["metadata"].get("namespace")]}

    def landed(self, host: str, namespace: str | None, asked: str) -> str:
        """The failure domain of ``host`` (``<namespace>/<name>``), where its consumer landed; ``asked`` while the
        host is unknown (none yet, or not listed)."""
        if not host:
            return asked
        return self.host_domains.get(split_reference(host, namespace or ""), asked)

    def made_by_machine(self, claim: Object) -> bool:
        return (claim["metadata"].get("namespace"), claim["metadata"]["name"]) in self.machine_claims

    def runs_alone(self, host: Object) -> bool:
        """A host no listed machine or claim holds, running something."""
        ref = (cast("BareMetalHost", host).get("spec") or cast("BareMetalHostSpec", {})).get("consumerRef") or {}
        held = (ref.get("kind"), ref.get("namespace") or host["metadata"].get("namespace"), ref.get("name"))
        return held not in self.consumers and host_state(host) in RUNNING_STATES

    # -- one record per kind ------------------------------------------------------------------------------
    def machine(self, m3m: Object) -> tuple[HostRecord, Object]:
        namespace = m3m["metadata"]["namespace"]
        view = cast("Metal3Machine", m3m)
        spec, status = view.get("spec") or {}, view.get("status") or {}
        owner = owner_named(m3m, "Machine")
        machine = self.machines.get((namespace, owner["name"])) if owner else None
        labels = {**((machine or {}).get("metadata") or {}).get("labels", {}), **_labels(m3m)}
        host = _annotations(m3m).get(HOST_ANNOTATION, "")
        claim_ref = _annotations(m3m).get(HOST_CLAIM_ANNOTATION, "")
        if not host and claim_ref:  # HostClaim mode: the host the claim is bound to
            claim = self.claims.get(split_reference(claim_ref, namespace)) or {}
            bound = (claim.get("status") or {}).get("bareMetalHost") or {}
            host = f"{bound.get('namespace', namespace)}/{bound['name']}" if bound.get("name") else ""
        role = "control_plane" if CONTROL_PLANE_LABEL in labels else "worker"
        cluster = labels.get(CLUSTER_NAME_LABEL) or ((machine or {}).get("spec") or {}).get("clusterName", "")
        failure_domain = self.landed(host, namespace, spec.get("failureDomain")
                                     or ((machine or {}).get("spec") or {}).get("failureDomain", ""))
        data_name = (status.get("renderedData") or {}).get("name")
        state = _machine_state(m3m, self.clusters.get((namespace, cluster)), host)
        variables = _variables(m3m, host, failure_domain, state, spec.get("providerID", ""), cluster, role,
                               status.get("addresses") or [], self._networks(namespace, data_name))
        variables["metal3_ready"] = bool((status.get("initialization") or {}).get("provisioned"))
        return HostRecord(m3m["metadata"]["name"], variables, _groups(variables)), m3m

    def claim(self, claim: Object) -> tuple[HostRecord, Object]:
        status = claim.get("status") or {}
        bound = status.get("bareMetalHost") or {}
        host = f"{bound.get('namespace', claim['metadata'].get('namespace'))}/{bound['name']}" if bound.get("name") \
            else ""
        labels = _labels(claim)
        asked = (cast("HostClaim", claim).get("spec") or cast("HostClaimSpec", {})).get("failureDomain") \
            or labels.get(FAILURE_DOMAIN_LABEL, "")
        failure_domain = self.landed(host, claim["metadata"].get("namespace"), asked)
        state = "deleting" if claim["metadata"].get("deletionTimestamp") else (status.get("state") or
                                                                               ("bound" if host else "pending"))
        variables = _variables(claim, host, failure_domain, state, "", labels.get(CLUSTER_NAME_LABEL, ""), "",
                               status.get("addresses") or [], {})
        variables["metal3_ready"] = state == PROVISIONED
        return HostRecord(claim["metadata"]["name"], variables, _groups(variables)), claim

    def host(self, host: Object) -> tuple[HostRecord, Object]:
        hardware = (cast("BareMetalHost", host).get("status") or {}).get("hardware") or {}
        addresses = [{"type": "InternalIP", "address": nic["ip"]} for nic in hardware.get("nics") or []
                     if nic.get("ip")]
        if hardware.get("hostname"):
            addresses += [{"type": "Hostname", "address": hardware["hostname"]}]
        labels = _labels(host)
        name = f"{host['metadata'].get('namespace')}/{host['metadata']['name']}"
        variables = _variables(host, name, labels.get(FAILURE_DOMAIN_LABEL, ""), host_state(host), "",
                               labels.get(CLUSTER_NAME_LABEL, ""), "", addresses, {})
        variables["metal3_ready"] = True
        return HostRecord(host["metadata"]["name"], variables, _groups(variables)), host

    def _networks(self, namespace: str | None, data_name: str | None) -> dict[str, str]:
        """A machine's addresses by IPPool name and by the network id of its data template that uses the pool."""
        if not data_name:
            return {}
        by_pool = {pool: address for (ns, claim), pools in self.addresses.items() if ns == namespace
                   for pool, address in pools.items() if claim == f"{data_name}-{pool}"}
        networks = dict(by_pool)
        data = cast("Metal3Data", self.data.get((namespace, data_name)) or {})
        template = self.templates.get((namespace, ((data.get("spec") or {}).get("template") or {}).get("name")))
        for network_id, pool in _template_networks(template):
            if pool in by_pool:
                networks.setdefault(network_id, by_pool[pool])
        return networks


def _template_networks(template: Object | None) -> list[tuple[str, str]]:
    """(network id, IPPool name) of each static network a data template names a pool for by name."""
    if not template:
        return []
    try:
        network_data = normalize_template_spec(template.get("spec") or {}).get("networkData")  # None: not set
        networks = (network_data.get("networks") if isinstance(network_data, dict) else None) or {}
    except Invalid:  # a template admission let through in another shape: its networks are not named, that is all
        return []
    found = []
    for kind in ("ipv4", "ipv6"):
        for network in networks.get(kind) or [] if isinstance(networks, dict) else []:
            if not isinstance(network, dict) or not network.get("id"):
                continue
            pool = network.get("ipAddressFromIPPool") or (network.get("fromPoolRef") or {}).get("name")
            if isinstance(pool, str):
                found.append((str(network["id"]), pool))
    return found


def _machine_state(m3m: Object, cluster: Object | None, host: str) -> str:
    """A Metal3Machine's phase as the metal3machine module names it, read from the stored object and its Cluster
    (when listed: its spec.paused pauses the machine)."""
    if m3m["metadata"].get("deletionTimestamp"):
        return "deleting"
    if pause.paused(m3m, cluster):
        return "paused"
    if ((m3m.get("status") or {}).get("initialization") or {}).get("provisioned"):
        return "provisioned"
    return "provisioning" if host else "pending"


def _variables(obj: Object, host: str, failure_domain: str, state: str, provider_id: str, cluster: str, role: str,
               addresses: Iterable[Mapping[str, Any]], networks: dict[str, str]) -> dict[str, Any]:
    return {"metal3_kind": obj["kind"], "metal3_api_version": obj["apiVersion"], "metal3_name": obj["metadata"]["name"],
            "metal3_namespace": obj["metadata"].get("namespace", ""), "metal3_host": host,
            "metal3_failure_domain": failure_domain or "", "metal3_state": state, "metal3_provider_id": provider_id,
            "metal3_cluster": cluster or "", "metal3_role": role,
            "metal3_addresses": [{"type": a.get("type", ""), "address": a.get("address", "")} for a in addresses],
            "metal3_networks": networks, "metal3_labels": _labels(obj)}


def _groups(variables: Mapping[str, Any]) -> list[str]:
    groups = []
    if variables["metal3_cluster"]:
        groups.append(f"cluster_{variables['metal3_cluster']}")
    if variables["metal3_failure_domain"]:
        groups.append(f"failure_domain_{variables['metal3_failure_domain']}")
    if variables["metal3_role"]:
        groups.append("control_plane" if variables["metal3_role"] == "control_plane" else "workers")
    if variables["metal3_state"]:
        groups.append(f"state_{variables['metal3_state']}")
    return groups


def _labels(obj: Object) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _annotations(obj: Object) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})
