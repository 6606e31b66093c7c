# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The Metal3Machine flow, as CAPM3's reconcileNormal and reconcileDelete.

Normal: finalizer → bootstrap data → a host chosen and claimed (hosts/claim.py) →
the data template of the host's failure domain → Metal3DataClaim → rendered data →
host spec (image, userData, metaData, networkData, online) → host provisioned →
providerID ``metal3://<namespace>/<host>/<metal3machine>`` → addresses → ready → in the Cluster's workload
cluster, once Cluster API wrote its kubeconfig, the machine's Node given the providerID kubelet did not set and
the host's synced labels (capm3/workload.py).
Delete: host spec cleared and powered off, host deprovisioned, host released (or
kept for node reuse), data claim released, finalizer removed.

HostClaim mode (upstream's design, a switch of the whole controller): the machine does not claim a host
itself but makes a HostClaim named after it in its own namespace (hostclaims/hostclaim.py binds it to a host of a
namespace whose HostDeployPolicy admits it, and releases it when the machine deletes it); the data template and
the machine's providerID and addresses read the host through what the claim shows its tenant (``host_view``),
and the image and rendered data go to the claim. Node reuse is not done in this mode.

The host itself is provisioned by its own reconcile (hosts/baremetalhost.py);
this flow only writes its spec and waits for its state.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.common import (
    CAPI_API,
    CLONED_FROM_NAME,
    CLUSTER_NAME_LABEL,
    CONTROL_PLANE_GROUP,
    DATA_CLAIM_FINALIZER,
    HOST_ANNOTATION,
    HOST_CLAIM_ANNOTATION,
    INFRA_API,
    MACHINE_FINALIZER,
    owner_named,
    owner_reference,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.data import (
    DataResult,
    reconcile_data_claim,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.capm3.workload import (
    kubeconfig_secret,
    label_sync_prefixes,
    open_workload,
    reconcile_node,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.compute.libvirt import VirtualMachines
from ansible_collections.metal3.baremetal.plugins.module_utils.compute.registry import DEFAULT_KIND, claim_kind
from ansible_collections.metal3.baremetal.plugins.module_utils.core import pause
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Invalid, Metal3Error, NotFound
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import (
    Object,
    Ref,
    controlled_by,
    secret_values,
    split_reference,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.outbound import OutboundPolicy
from ansible_collections.metal3.baremetal.plugins.module_utils.core.reconcile import Result
from ansible_collections.metal3.baremetal.plugins.module_utils.core.retry import retry_on_conflict
from ansible_collections.metal3.baremetal.plugins.module_utils.core.selector import label_value
from ansible_collections.metal3.baremetal.plugins.module_utils.hostclaims import hostclaim
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (
    API as BMH_API,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import PROVISIONED, host_state
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.claim import (
    FAILURE_DOMAIN_LABEL,
    NODE_REUSE_LABEL,
    Consumer,
    associate,
    release_host,
    update_claimed_host,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.resources import parse_yaml
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.writes import (
    ensure_finalizer,
    remove_finalizer,
    set_condition,
)

if TYPE_CHECKING:
    from ansible_collections.metal3.baremetal.plugins.module_utils.api.types import (
        BareMetalHost,
        HostClaim,
        Metal3Data,
        Metal3Machine,
        Metal3MachineSpecImage,
    )

READY_REASON = "Ready"  # Cluster API's ReadyReason, as upstream's v1beta2 Ready condition gives it
# Where the machine landed against the failure domain it asked for (spec.failureDomain, else its Machine's): True
# in it; False when no host of that domain was free and it took one of another (the domain is a preference).
FAILURE_DOMAIN_CONDITION = "FailureDomainPlaced"
IN_DOMAIN_REASON = "InRequestedFailureDomain"
FALLBACK_REASON = "PlacedInAnotherFailureDomain"
WAIT = 1.0
NO_HOST_WAIT = 10.0  # upstream requeues after 30 s when no host is free
NODE_WAIT = 10.0  # for the workload cluster's kubeconfig, or for kubelet to register the machine's Node
LABEL_SYNC_PERIOD = 60.0  # upstream's label sync looks at each host again every 60 s


@dataclass
class MachineResult(Result):
    """What one reconcile of a Metal3Machine came to: beside the common fields, the machine's phase, whether it
    is ready, the host it holds (``<namespace>/<name>``), the class of compute that serves it (baremetal,
    libvirt) and the steps of its data claim."""

    phase: str = ""
    ready: bool = False
    host: str = ""
    data: list[DataResult] = field(default_factory=list)
    host_class: str = DEFAULT_KIND
    failure_domain: str | None = None  # where the machine landed: its host's failure domain; None: no host seen
    placement: str = ""  # when it landed outside the failure domain it asked for, that and why
    requested_failure_domain: str | None = None  # spec.failureDomain, else its Machine's; None: spec's

    def summary(self) -> dict[str, Any]:
        m3m = cast("Metal3Machine", self.obj or {})
        metadata = m3m.get("metadata") or {}
        spec, status = m3m.get("spec") or {}, m3m.get("status") or {}
        asked = spec.get("failureDomain", "") if self.requested_failure_domain is None \
            else self.requested_failure_domain
        return {"name": metadata.get("name"), "namespace": metadata.get("namespace"), "phase": self.phase,
                "ready": self.ready, "host": self.host, "host_class": self.host_class,
                "provider_id": spec.get("providerID", ""),
                "failure_domain": asked if self.failure_domain is None else self.failure_domain,
                "requested_failure_domain": asked, "placement": self.placement,
                "addresses": status.get("addresses", []),
                "rendered_data": status.get("renderedData"), "meta_data": status.get("metaData"),
                "network_data": status.get("networkData"), "requeue_after": self.requeue_after,
                "waits_on": self.wait_targets(), "message": self.message}


def host_image(image: Metal3MachineSpecImage) -> dict[str, Any]:
    """A Metal3Machine's spec.image as a BareMetalHost's: v1beta2's diskFormat is the host's format."""
    host = {key: copy.deepcopy(value) for key, value in image.items() if key != "diskFormat"}
    if image.get("diskFormat"):
        host["format"] = image["diskFormat"]
    return host


def reconcile_metal3machine(store: Store, ref: Ref, dry_run: bool = False,
                            strict_failure_domain: bool = False, fast_track: bool = False,
                            host_claim_mode: bool = False, machines: VirtualMachines | None = None,
                            outbound: OutboundPolicy | None = None) -> MachineResult:
    """One step of the Metal3Machine named by ``ref``. HostClaim mode: for every machine with ``host_claim_mode``,
    else for a machine whose spec names a ``kind`` of compute; ``machines`` serves HostClaims of kind libvirt;
    ``outbound``: which of the controller's own hosts a claim's URLs may name (hostclaims/hostclaim.py)."""
    try:
        m3m = store.get(ref)
    except NotFound:
        return MachineResult(None, message="gone", phase="deleted")
    flow = _Flow(store, m3m, dry_run, strict_failure_domain, fast_track, host_claim_mode, machines, outbound)
    if flow.paused():
        return MachineResult(m3m, message="paused", phase="paused", host=flow.host_name,
                             host_class=flow.host_class)
    if m3m["metadata"].get("deletionTimestamp"):
        return flow.delete()
    return flow.normal()


class _Flow:
    def __init__(self, store: Store, m3m: Object, dry_run: bool, strict_failure_domain: bool, fast_track: bool,
                 host_claim_mode: bool = False, machines: VirtualMachines | None = None,
                 outbound: OutboundPolicy | None = None):
        self.store, self.m3m, self.dry_run, self.strict = store, m3m, dry_run, strict_failure_domain
        self.host_class = claim_kind(m3m)  # the class of compute that serves it (compute/registry.py)
        self.fast_track = fast_track
        self.claim_mode = host_claim_mode or bool((self.view.get("spec") or {}).get("kind"))
        self.machines = machines
        self.outbound = outbound or OutboundPolicy()
        self.bound_host = ""  # HostClaim mode: the host the claim holds, <namespace>/<name>
        self.claim_view: Object | None = None  # HostClaim mode: the host as the claim showed it this reconcile
        self.landed: str | None = None  # the failure domain of the host it holds, once seen this reconcile
        self.ref = Ref.of(m3m)
        self.consumer = Consumer.of(m3m)
        self.changed = False
        self.machine = self._owner_machine()
        self.cluster = self._cluster()
        self.machine_set = self._machine_set()
        self.template = self._template()  # read once: node reuse and the data template both need it

    @property
    def view(self) -> Metal3Machine:
        """The machine as its schema types it: mypy checks the fields read from it."""
        return cast("Metal3Machine", self.m3m)

    @property
    def host_name(self) -> str:
        annotations: dict[str, str] = self.m3m["metadata"].get("annotations") or {}
        return annotations.get(HOST_ANNOTATION, "")

    def _host_ref(self) -> Ref | None:
        if not self.host_name:
            return None
        namespace, name = split_reference(self.host_name, self.ref.namespace)
        return Ref(BMH_API, "BareMetalHost", name, namespace)

    def _owner_machine(self) -> Object | None:
        owner = owner_named(self.m3m, "Machine")
        return self.store.get_if_exists(Ref(CAPI_API, "Machine", owner["name"], self.ref.namespace)) if owner else None

    def _cluster(self) -> Object | None:
        name = (self.m3m["metadata"].get("labels") or {}).get(CLUSTER_NAME_LABEL)
        return self.store.get_if_exists(Ref(CAPI_API, "Cluster", name, self.ref.namespace)) if name else None

    def paused(self) -> bool:
        return pause.paused(self.m3m, self.cluster)

    def step(self, phase: str, requeue: float | None = None, message: str = "", ready: bool = False,
             data: list[DataResult] | None = None, waits_on: list[Ref] | None = None) -> MachineResult:
        return MachineResult(self.m3m, self.changed, requeue, message or phase, waits_on or [], phase=phase,
                             ready=ready, host=self.bound_host or self.host_name, data=data or [],
                             host_class=self.host_class, failure_domain=self.landed, placement=self._placement(),
                             requested_failure_domain=self._failure_domain() or "")

    def _placement(self) -> str:
        """Why the machine is not in the failure domain it asked for, or "": the domain is a preference, and a
        machine that found no free host there took one of another domain (unless strict)."""
        asked = self._failure_domain()
        if not asked or self.landed is None or self.landed == asked:
            return ""
        return f"asked {asked}, placed in {self.landed or 'no failure domain'}: no free host in {asked}"

    # -- normal ----------------------------------------------------------------------------------------------
    def normal(self) -> MachineResult:
        finalized = ensure_finalizer(self.store, self.ref, MACHINE_FINALIZER, self.dry_run)
        self.changed = self.changed or MACHINE_FINALIZER not in (self.m3m["metadata"].get("finalizers") or [])
        self.m3m = finalized
        user_data = self._user_data()
        if user_data is None:
            return self.step("pending", WAIT, "waiting for its Machine: Cluster API sets the owner reference"
                             if self.machine is None else
                             "waiting for bootstrap data (Machine spec.bootstrap.dataSecretName)")
        host, waiting = self._claim() if self.claim_mode else self._associate()
        if host is None:
            return waiting
        self.landed = (host["metadata"].get("labels") or {}).get(FAILURE_DOMAIN_LABEL, "")
        steps: list[DataResult] = []
        template = self._data_template(host)
        if template:
            claim = self._data_claim(template)
            for _attempt in range(3):  # claim → data → rendered, as far as it goes without waiting
                steps.append(reconcile_data_claim(self.store, Ref.of(claim), self.dry_run))
                if steps[-1].ready or steps[-1].requeue_after != 0.0:
                    break
            if not steps[-1].ready:
                return self.step("associated", steps[-1].requeue_after or WAIT,
                                 f"waiting for rendered data: {steps[-1].message}", data=steps,
                                 waits_on=steps[-1].waits_on)
        rendered = self._rendered(steps[-1].obj if steps else None)
        set_spec = self._set_claim_spec if self.claim_mode else self._set_host_spec
        host = set_spec(user_data, rendered)
        state = host_state(host)
        if state != PROVISIONED:
            self._set_status(rendered, host, ready=False)
            return self.step("provisioning", WAIT, f"host {self.host_name} is {state or 'new'}", data=steps)
        self._set_provider_id(host)
        self._set_status(rendered, host, ready=True)
        requeue, node_wait = self._node(host)
        return self.step("provisioned", requeue, f"ready; {node_wait}" if node_wait else "ready", ready=True,
                         data=steps)

    def _user_data(self) -> dict[str, str] | None:
        """The bootstrap data secret: the CAPI Machine's, else (no Cluster API) the Metal3Machine's own. A machine
        of a Cluster waits for its Machine, as CAPM3's does: Cluster API sets the owner reference just after
        either is made, and a machine provisioned meanwhile would boot without its bootstrap data."""
        if self.machine is not None:
            name = ((self.machine.get("spec") or {}).get("bootstrap") or {}).get("dataSecretName")
            return {"name": name, "namespace": self.ref.namespace} if name else None
        if self.cluster is not None:
            return None
        ref = self.view["spec"].get("userData")
        return {"name": ref["name"], "namespace": ref.get("namespace") or self.ref.namespace} if ref else {}

    def _failure_domain(self) -> str | None:
        return (self.view["spec"].get("failureDomain")
                or ((self.machine or {}).get("spec") or {}).get("failureDomain") or None)

    def _associate(self) -> tuple[Object | None, MachineResult]:
        """The host this machine holds, or one chosen and claimed now; else why there is none."""
        host_ref = self._host_ref()
        if host_ref is not None:
            host = self.store.get_if_exists(host_ref)
            if host is not None and self.consumer.holds(host):
                return host, self.step("associated")
            return None, self.step("pending", None, f"host {self.host_name} is gone or held by another consumer")
        labels = {CLUSTER_NAME_LABEL: self.cluster["metadata"]["name"]} if self.cluster else {}
        selection = associate(self.store, [self.ref.namespace], self.consumer, self.view["spec"].get("hostSelector"),
                              self._failure_domain(), self.strict, self._reuse_name(), labels, self.dry_run)
        if selection.host is None:
            # A host freed, added or relabelled in the namespace may serve it.
            return None, self.step("pending", NO_HOST_WAIT, f"no host: {selection.reason}",
                                   waits_on=[Ref(BMH_API, "BareMetalHost", "", self.ref.namespace)])
        name = f"{selection.host['metadata']['namespace']}/{selection.host['metadata']['name']}"
        self.m3m = self.store.patch(self.ref, {"metadata": {"annotations": {HOST_ANNOTATION: name}}},
                                    dry_run=self.dry_run)
        self.changed = True
        return selection.host, self.step("associated")

    # -- HostClaim mode ------------------------------------------------------------------------------------
    def _claim_ref(self) -> Ref:
        return Ref(BMH_API, hostclaim.KIND, self.ref.name, self.ref.namespace)

    def _own_claim(self) -> Object | None:
        """The machine's HostClaim; Invalid when a claim of its name is someone else's."""
        claim = self.store.get_if_exists(self._claim_ref())
        if claim is not None and not controlled_by(claim, self.m3m):
            raise Invalid(f"HostClaim {self.ref.namespace}/{self.ref.name} exists and was not made by this "
                          "Metal3Machine; it is left alone")
        return claim

    def _step_claim(self) -> hostclaim.ClaimResult:
        step = hostclaim.reconcile_host_claim(self.store, self._claim_ref(), self.dry_run, self.machines,
                                              self.outbound)
        self.changed = self.changed or step.changed
        self.bound_host = step.host
        return step

    def _claim(self) -> tuple[Object | None, MachineResult]:
        """The host the machine's HostClaim holds, as the claim shows it; the claim made first if need be."""
        if self._own_claim() is None:
            spec: dict[str, Any] = {"poweredOn": False, "consumerRef": {
                "apiVersion": self.m3m["apiVersion"], "kind": self.m3m["kind"], "name": self.ref.name,
                "namespace": self.ref.namespace}}
            selector = {k: v for k, v in (self.view["spec"].get("hostSelector") or {}).items()
                        if k in ("matchLabels", "matchExpressions")}
            if selector:
                spec["hostSelector"] = selector
            if self._failure_domain():
                spec["failureDomain"] = self._failure_domain()
            for field_name in ("kind", "args"):  # the class of compute, and what parameterises it
                if self.view["spec"].get(field_name):
                    spec[field_name] = copy.deepcopy(self.view["spec"][field_name])
            labels = {CLUSTER_NAME_LABEL: self.cluster["metadata"]["name"]} if self.cluster else {}
            self.store.create({"apiVersion": BMH_API, "kind": hostclaim.KIND,
                               "metadata": {"name": self.ref.name, "namespace": self.ref.namespace, "labels": labels,
                                            "ownerReferences": [owner_reference(self.m3m, controller=True)]},
                               "spec": spec}, dry_run=self.dry_run)
            self.changed = True
        step = self._step_claim()
        if not step.host:
            return None, self.step("pending", step.requeue_after, f"no host: {step.error or step.message}",
                                   waits_on=[self._claim_ref()] if step.requeue_after and not step.error else [])
        name = f"{self.ref.namespace}/{self.ref.name}"
        if (self.m3m["metadata"].get("annotations") or {}).get(HOST_CLAIM_ANNOTATION) != name:
            self.m3m = self.store.patch(self.ref, {"metadata": {"annotations": {HOST_CLAIM_ANNOTATION: name}}},
                                        dry_run=self.dry_run)
            self.changed = True
        view = hostclaim.host_view(self.store, step.obj)
        if view is None:
            return None, self.step("associated", WAIT, f"waiting for the hardware data of host {step.host}")
        self.claim_view = view
        return view, self.step("associated")

    def _set_claim_spec(self, user_data: dict[str, str], rendered: dict[str, Any]) -> Object:
        """The image and the data to the machine's HostClaim, which passes them to its host; the host as the
        claim then shows it."""
        def change(claim: Object) -> Object:
            self._put_workload(claim["spec"], user_data, rendered, with_namespace=False)
            cast("HostClaim", claim)["spec"]["poweredOn"] = True
            return claim

        written: list[bool] = []

        def write() -> Object:
            claim = self._own_claim()
            if claim is None:
                raise NotFound(f"HostClaim {self.ref.namespace}/{self.ref.name} is gone")
            wanted = change(copy.deepcopy(claim))
            if wanted == claim:
                return claim
            written.append(True)
            return self.store.update(wanted, dry_run=self.dry_run)

        retry_on_conflict(write)
        if not written and self.claim_view is not None:  # the claim was stepped with this spec already
            return self.claim_view
        self.changed = True
        step = self._step_claim()
        view = hostclaim.host_view(self.store, step.obj)
        if view is None:
            raise NotFound(f"HostClaim {self.ref.namespace}/{self.ref.name} shows no host")
        return view

    def _machine_set(self) -> Object | None:
        owner = owner_named(self.machine, "MachineSet") if self.machine else None
        return self.store.get_if_exists(Ref(CAPI_API, "MachineSet", owner["name"], self.ref.namespace)) \
            if owner else None

    def _control_plane_owner(self) -> dict[str, Any] | None:
        """The owner reference of a control plane provider's (a KubeadmControlPlane's) on the Machine."""
        return next((r for r in (self.machine or {"metadata": {}})["metadata"].get("ownerReferences") or []
                     if str(r.get("apiVersion", "")).startswith(CONTROL_PLANE_GROUP + "/")), None)

    def _template(self) -> Object | None:
        """The Metal3MachineTemplate the machine was made from, found as CAPM3 finds it: the infrastructureRef of
        its MachineSet's machine template (a worker) or of its control plane's; else Cluster API's cloned-from
        annotation (a machine no Cluster API controller owns: core's metadata sync may drop that annotation
        from a MachineSet's machines)."""
        name = (self.m3m["metadata"].get("annotations") or {}).get(CLONED_FROM_NAME)
        if self.machine_set is not None:
            name = ((((self.machine_set.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
                "infrastructureRef") or {}).get("name") or name
        elif (control_plane := self._control_plane_owner()) is not None:
            found = self.store.get_if_exists(Ref(control_plane["apiVersion"], control_plane["kind"],
                                                 control_plane["name"], self.ref.namespace))
            machine_template = ((found or {}).get("spec") or {}).get("machineTemplate") or {}
            # v1beta1 names it at machineTemplate.infrastructureRef, v1beta2 at machineTemplate.spec.
            ref = (machine_template.get("spec") or machine_template).get("infrastructureRef") or {}
            name = ref.get("name") or name
        return self.store.get_if_exists(Ref(INFRA_API, "Metal3MachineTemplate", name, self.ref.namespace)) \
            if name else None

    def _reuse_name(self) -> str | None:
        """The node-reuse label's value when the template asks for node reuse, as CAPM3 names it:
        ``cp-<name>`` for a machine of a control plane provider, ``md-<name>`` for a worker of a
        MachineDeployment (through its MachineSet, so a rollout's new MachineSet finds the hosts the old one
        left); else the template's name (a machine no Cluster API controller owns). Past a label value's 63
        characters, cut and told apart by a digest (CAPM3 writes it whole, and the API server refuses the host)."""
        template = self.template
        if not template or not template["spec"].get("nodeReuse"):
            return None
        control_plane = self._control_plane_owner()
        if control_plane:
            return label_value(f"cp-{control_plane['name']}")
        deployment = owner_named(self.machine_set, "MachineDeployment") if self.machine_set else None
        return label_value(f"md-{deployment['name']}" if deployment else str(template["metadata"]["name"]))

    def _data_template(self, host: Object) -> dict[str, str] | None:
        """The template of the failure domain of the host actually claimed, else spec.dataTemplate."""
        spec = self.view["spec"]
        domain = (host["metadata"].get("labels") or {}).get(FAILURE_DOMAIN_LABEL)
        by_domain = dict(spec.get("dataTemplatesByFailureDomain") or {})
        template = self.template
        for entry in ((template or {}).get("spec") or {}).get("failureDomainDataTemplates") or []:
            by_domain.setdefault(entry["failureDomain"], entry["dataTemplate"])
        chosen = by_domain.get(domain) if domain else None
        chosen = chosen or spec.get("dataTemplate")
        if not chosen:
            return None
        return {"name": chosen["name"], "namespace": chosen.get("namespace") or self.ref.namespace}

    def _data_claim(self, template: dict[str, str]) -> Object:
        """The Metal3DataClaim named after the Metal3Machine; once made, its template never changes. Made with its
        finalizer, as an IPClaim is: an operator that adds a watch's finalizer itself (the Ansible Operator, with an
        update from its cache) then has none to add while this run still writes the claim."""
        existing = self.store.get_if_exists(Ref(INFRA_API, "Metal3DataClaim", self.ref.name, self.ref.namespace))
        if existing is not None:
            if not controlled_by(existing, self.m3m):
                raise Invalid(f"Metal3DataClaim {self.ref.namespace}/{self.ref.name} exists and was not made by "
                              "this Metal3Machine; it is left alone")
            return existing
        labels = {CLUSTER_NAME_LABEL: self.cluster["metadata"]["name"]} if self.cluster else {}
        claim = {"apiVersion": INFRA_API, "kind": "Metal3DataClaim",
                 "metadata": {"name": self.ref.name, "namespace": self.ref.namespace, "labels": labels,
                              "finalizers": [DATA_CLAIM_FINALIZER],
                              "ownerReferences": [owner_reference(self.m3m, controller=True)]},
                 "spec": {"template": template}}
        self.changed = True
        return self.store.create(claim, dry_run=self.dry_run)

    def _rendered(self, claim: Object | None) -> dict[str, Any]:
        """metaData and networkData secret refs: the rendered data's, else those the user set on the spec."""
        spec = self.view["spec"]
        result: dict[str, Any] = {key: spec[key] for key in ("metaData", "networkData") if spec.get(key)}
        if claim is not None:
            rendered = (claim.get("status") or {})["renderedData"]  # a claim is ready once it has one
            data_ref = Ref(INFRA_API, "Metal3Data", rendered["name"], self.ref.namespace)
            data = cast("Metal3Data", self.store.get(data_ref))
            result.update({key: data["spec"][key] for key in ("metaData", "networkData") if data["spec"].get(key)})
            result["renderedData"] = rendered
        return result

    def _put_workload(self, target: dict[str, Any], user_data: dict[str, str], rendered: dict[str, Any],
                      with_namespace: bool) -> None:
        """The machine's image or custom deploy (never an in-place upgrade: only onto a spec that has none), its
        user data and its rendered data into ``target``, a host's spec (references with their namespace) or a
        HostClaim's (references to Secrets of the claim's namespace, the machine's)."""
        spec = self.view["spec"]
        if not target.get("image") and not target.get("customDeploy"):
            if spec.get("image"):
                target["image"] = host_image(spec["image"])
            if spec.get("customDeploy"):
                target["customDeploy"] = copy.deepcopy(spec["customDeploy"])
        refs = {"userData": user_data or None, **{key: rendered.get(key) for key in ("metaData", "networkData")}}
        for key, ref in refs.items():
            if ref:
                target[key] = ({"name": ref["name"], "namespace": ref.get("namespace") or self.ref.namespace}
                               if with_namespace else {"name": ref["name"]})

    def _set_host_spec(self, user_data: dict[str, str], rendered: dict[str, Any]) -> Object:
        spec = self.view["spec"]

        def change(host: Object) -> None:
            host_spec = host["spec"]
            self._put_workload(host_spec, user_data, rendered, with_namespace=True)
            if spec.get("automatedCleaningMode"):
                host_spec["automatedCleaningMode"] = spec["automatedCleaningMode"]
            host_spec["online"] = True

        host_ref = self._host_ref()
        if host_ref is None:
            raise NotFound(f"{self.ref} is associated with no host")
        before = self.store.get(host_ref)
        host = update_claimed_host(self.store, host_ref, self.consumer, change, self.dry_run)
        self.changed = self.changed or host != before
        return host

    def _set_provider_id(self, host: Object) -> None:
        provider_id = f"metal3://{self.ref.namespace}/{host['metadata']['name']}/{self.ref.name}"
        if self.view["spec"].get("providerID") != provider_id:
            self.m3m = self.store.patch(self.ref, {"spec": {"providerID": provider_id}}, dry_run=self.dry_run)
            self.changed = True

    def _node(self, host: Object) -> tuple[float | None, str]:
        """The machine's Node in its Cluster's workload cluster (capm3/workload.py): its providerID and synced
        labels, once Cluster API has written the cluster's kubeconfig. When to look again, and what it waits for
        (''); the machine is ready whatever the Node is, as upstream's."""
        if self.cluster is None:
            return None, ""
        namespace, cluster_name = self.ref.namespace, self.cluster["metadata"]["name"]
        infrastructure = (self.cluster.get("spec") or {}).get("infrastructureRef") or {}
        try:
            metal3_cluster = (self.store.get_if_exists(Ref(INFRA_API, "Metal3Cluster", infrastructure["name"],
                                                           namespace))
                              if infrastructure.get("kind") == "Metal3Cluster" and infrastructure.get("name")
                              else None)
            prefixes = label_sync_prefixes(metal3_cluster)
            opened = open_workload(self.store, namespace, cluster_name, self.outbound)
            if opened is None:
                return NODE_WAIT, f"no workload cluster yet (Secret {namespace}/{kubeconfig_secret(cluster_name)})"
            node_ref = ((self.machine or {}).get("status") or {}).get("nodeRef") or {}
            # A HostClaim's tenant does not see its host's UID, which kubelet's metal3.io/uuid label carries.
            host_uid = "" if self.claim_mode else host["metadata"].get("uid", "")
            with opened as workload:
                node = reconcile_node(workload, self.view["spec"].get("providerID", ""),
                                      host["metadata"].get("labels") or {}, prefixes, node_ref.get("name", ""),
                                      host_uid, self.dry_run)
        except Metal3Error as e:
            return NODE_WAIT, f"the workload cluster: {e}"
        self.changed = self.changed or node.changed
        sync = LABEL_SYNC_PERIOD if prefixes else None
        if node.message:
            return (NODE_WAIT if host_uid else sync), node.message
        return sync, ""

    def _set_status(self, rendered: dict[str, Any], host: Object, ready: bool) -> None:
        def write() -> Object:
            current = self.store.get(self.ref)
            status = copy.deepcopy(current.get("status") or {})
            status.update(rendered)
            status["addresses"] = self._addresses(rendered, host)
            status["initialization"] = {**(status.get("initialization") or {}), "provisioned": ready}
            status["conditions"] = set_condition(status.get("conditions"), "AssociateBareMetalHost", True,
                                                 "AssociateBareMetalHostSuccess")
            if rendered.get("renderedData"):
                status["conditions"] = set_condition(status["conditions"], "Metal3DataReady", True,
                                                     "Metal3DataSecretsReady")
            status["conditions"] = set_condition(status["conditions"], "Ready", ready,
                                                 READY_REASON if ready else "WaitingForHost")
            if self._failure_domain() and self.landed is not None:
                placement = self._placement()
                status["conditions"] = set_condition(
                    status["conditions"], FAILURE_DOMAIN_CONDITION, not placement,
                    FALLBACK_REASON if placement else IN_DOMAIN_REASON, placement or f"placed in {self.landed}")
            if self.machine is not None and self.machine["spec"].get("bootstrap"):
                status["userData"] = {"name": self.machine["spec"]["bootstrap"].get("dataSecretName"),
                                      "namespace": self.ref.namespace}
            if status == current.get("status"):
                return current
            self.changed = True
            return self.store.update_status({**current, "status": status}, dry_run=self.dry_run)

        self.m3m = retry_on_conflict(write)

    def _addresses(self, rendered: dict[str, Any], host: Object) -> list[dict[str, str]]:
        """InternalIP from the rendered networks and the host's NICs; Hostname and InternalDNS."""
        addresses: list[dict[str, str]] = []
        network = rendered.get("networkData")
        if network:
            try:
                text = secret_values(self.store.get(Ref("v1", "Secret", network["name"], self.ref.namespace)))
                parsed = parse_yaml(text.get("networkData", text.get("value", "")), "networkData") or {}
            except NotFound:
                parsed = {}
            for net in parsed.get("networks") or []:
                if net.get("ip_address"):
                    addresses.append({"type": "InternalIP", "address": net["ip_address"]})
        hardware = (cast("BareMetalHost", host).get("status") or {}).get("hardware") or {}
        for nic in hardware.get("nics") or []:
            if nic.get("ip") and {"type": "InternalIP", "address": nic["ip"]} not in addresses:
                addresses.append({"type": "InternalIP", "address": nic["ip"]})
        hostname = hardware.get("hostname") or self.ref.name
        addresses += [{"type": "Hostname", "address": hostname}, {"type": "InternalDNS", "address": hostname}]
        return addresses

    # -- delete ----------------------------------------------------------------------------------------------
    def delete(self) -> MachineResult:
        host_ref = self._host_ref()
        if self.claim_mode and self._own_claim() is not None:
            self.store.delete(self._claim_ref(), dry_run=self.dry_run)
            step = self._step_claim()
            if step.obj is not None:
                return self.step("deprovisioning", WAIT, step.message)
        if host_ref is not None:
            host = self.store.get_if_exists(host_ref)
            if host is not None and self.consumer.holds(host):
                waiting = self._release_host(host_ref)
                if waiting:
                    return self.step("deprovisioning", WAIT, waiting)
        claim_ref = Ref(INFRA_API, "Metal3DataClaim", self.ref.name, self.ref.namespace)
        if controlled_by(self.store.get_if_exists(claim_ref), self.m3m):  # never a claim someone else made
            self.store.delete(claim_ref, dry_run=self.dry_run)
            claim = reconcile_data_claim(self.store, claim_ref, self.dry_run)
            if claim.obj is not None:
                return self.step("deleting", WAIT, "releasing the rendered data")
        remove_finalizer(self.store, self.ref, MACHINE_FINALIZER, self.dry_run)
        return MachineResult(None, True, message="deleted", phase="deleted")

    def _release_host(self, host_ref: Ref) -> str:
        """Clear the host's spec and wait until it is deprovisioned; then let it go. '' once released."""
        reuse = self._reuse_name()

        def keep(host: Object) -> None:
            # Kept for the next machine of the same deployment; not while the whole cluster goes (as CAPM3).
            if reuse and self.cluster is not None and not self.cluster["metadata"].get("deletionTimestamp"):
                host["metadata"]["labels"][NODE_REUSE_LABEL] = reuse
                host["spec"]["consumerRef"] = {"apiVersion": self.cluster["apiVersion"], "kind": "Cluster",
                                               "name": self.cluster["metadata"]["name"],
                                               "namespace": self.ref.namespace}

        waiting = release_host(self.store, host_ref, self.consumer, self.fast_track, self.dry_run, keep)
        if not waiting:
            self.changed = True
        return waiting
