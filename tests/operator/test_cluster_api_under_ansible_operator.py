"""Cluster API's scenario with the roles under the real Ansible Operator (issue 32): ``ansible-operator run`` with
the shipped operator/watches.yaml in place of the collection's operator, under Cluster API's core and kubeadm
bootstrap managers (and, for benchmarks/operator/under_cluster_api.py's comparison, under the collection's). The
demo's objects (the Metal3Cluster syncing a label prefix onto the Nodes, the workers' template asking for node
reuse), a v1beta2 Cluster, its control plane Machine and a MachineDeployment of two workers bootstrapped by the kubeadm
bootstrap provider: every Machine Running on a host of its own with a nodeRef, each Node given its machine's
providerID and its host's synced labels by the roles, the control plane initialized. Down to one worker: the freed
host deprovisioned and kept for the deployment. Core's MachineHealthCheck with our Metal3RemediationTemplate: the
worker's Node NotReady, its host rebooted by the remediation, the Node back. The Cluster deleted: every host
available, no address or claim left.

All of it works under the Ansible Operator. What differs there (operator/README.md, "Under the Ansible Operator"):

- the operator's own conditions (Running, Successful, Failure) go, as under the collection's operator, into the
  watched v1beta1 status, which is v1beta2's ``status.deprecated.v1beta1``: Cluster API's v1beta2 conditions stay
  the roles' own. But a Metal3Machine is never marked Successful there: the Ansible Operator ends a reconcile at
  the ``requeue_after`` task before it marks the run done, and a provisioned machine asks to be requeued every
  minute (the label sync), so it stays Running (with the last failure, if a run failed);
- the objects a role creates carry an owner reference to the CR it reconciles, added by the Ansible Operator's
  proxy: an IPAddress names the Metal3Machine whose run claimed it, besides its pool and claim;
- not asserted, as it comes and goes: some runs fail at once with "cannot load the Kubernetes configuration from
  /tmp/kubeconfig...", and are run again. The Ansible Operator ends a reconcile at the ``requeue_after`` event and
  removes that run's kubeconfig while ``ansible-runner --role`` still finishes; at its end ansible-runner writes
  back the ``env/envvars`` it read at its start into the object's runner directory, over the one a requeued run
  has just written, which then reads the removed kubeconfig's path.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Iterator

import pytest
from kubernetes import client

from tests.harness.cluster import KubeCluster
from tests.harness.cluster_api import ClusterAPI
from tests.harness.node_agent import NodeAgent
from tests.harness.operator_process import AnsibleOperator, Operator
from tests.operator import test_operator_under_cluster_api as under_core
from tests.operator.conftest import eventually
from tests.operator.test_operator_under_cluster_api import (
    INFRA,
    IPAM,
    WORKERS,
    cluster_goes,
    cluster_up,
    create_demo,
    listed,
    rebooted,
    remediation_template,
    run_cluster,
    scaled_down,
)
from tests.operator.test_real_ansible_operator import COMPARED, OPERATORS

pytestmark = pytest.mark.kubernetes

workload = under_core.workload  # the fixture: the workload cluster, its kubeconfig and CA as Cluster API's Secrets
# The collection's operator runs this scenario in make test already (test_operator_under_cluster_api.py, and more):
# here it is the comparison's other side (COMPARED), which benchmarks/operator/under_cluster_api.py asks for.
MARKS = {"Running", "Successful", "Failure"}  # the conditions either operator writes on the CR it reconciles


@pytest.fixture(params=COMPARED)
def operator(request: pytest.FixtureRequest, cluster_api: ClusterAPI, cluster_api_namespace: str, ironic: Any,
             tmp_path: Path) -> Iterator[AnsibleOperator | Operator]:
    """The real Ansible Operator (or, for the comparison, the collection's) on the ``cluster_api`` fixture's
    cluster with the shipped watches.yaml and the workload cluster's API on loopback allowed, as
    ``cluster_api_operator`` starts the collection's."""
    env = {**ironic.env, "METAL3_ALLOWED_LOCAL_HOSTS": "127.0.0.1"}
    started = OPERATORS[request.param](cluster_api.cluster, tmp_path / "operator", cluster_api_namespace,
                                       env=env).start()
    yield started
    reconciles = started.reconciles()
    started.stop()
    print(f"--- {started.log.name} ({reconciles:.0f} reconciles)\n{started.tail(80)}")


def test_cores_machine_deployment_runs_scales_down_remediates_and_goes(
        cluster_api, cluster_api_namespace, operator, workload, ironic):
    ns = cluster_api_namespace
    create_demo(cluster_api, ns, 3, remediation_template(ns))
    scenario = functools.partial(runs_scales_down_remediates_and_goes,
                                 ansible_operator=isinstance(operator, AnsibleOperator))
    run_cluster(cluster_api, ns, workload, ironic, {WORKERS: 2}, scenario, kubeadm=True)


def runs_scales_down_remediates_and_goes(api: client.CustomObjectsApi, ns: str, workload: KubeCluster,
                                         agent: NodeAgent, ansible_operator: bool) -> None:
    cluster_up(api, ns, workload, agent, 2)
    marked(api, ns, ansible_operator)
    scaled_down(api, ns, workload, 1, freed=1)
    rebooted(api, ns, workload, agent, (WORKERS,))
    cluster_goes(api, ns)


def marked(api: client.CustomObjectsApi, ns: str, ansible_operator: bool) -> None:
    """What the operator itself writes on the running cluster's objects."""
    machines = listed(api, INFRA, "metal3machines", ns)
    for m3m in machines:
        # Cluster API's conditions (v1beta2) are the roles' alone; the operator's are the watched v1beta1's.
        conditions = {c["type"]: c["status"] for c in m3m["status"]["conditions"]}
        assert conditions["Ready"] == "True" and not MARKS & set(conditions), m3m["status"]
    if ansible_operator:
        # Each run asks to be requeued (a provisioned machine: every minute): left Running, never Successful.
        for m3m in machines:
            marks = operator_marks(m3m)
            assert marks.get("Running") == "True" and marks.get("Successful") != "True", m3m["status"]["deprecated"]
    else:
        eventually(lambda: all(operator_marks(m3m).get("Successful") == "True"
                               for m3m in listed(api, INFRA, "metal3machines", ns)), "every machine Successful")
    # An address's owners: its pool and its claim, and under the Ansible Operator the Metal3Machine whose run
    # claimed it (its proxy's owner reference on what a role creates).
    for address in listed(api, IPAM, "ipaddresses", ns):
        owners = {o["kind"] for o in address["metadata"]["ownerReferences"]}
        assert owners == {"IPPool", "IPClaim"} | ({"Metal3Machine"} if ansible_operator else set()), owners


def operator_marks(m3m: dict[str, Any]) -> dict[str, str]:
    """The operator's conditions on a Metal3Machine (read at v1beta2, where the v1beta1 ones are deprecated)."""
    deprecated = ((m3m["status"].get("deprecated") or {}).get("v1beta1") or {}).get("conditions") or []
    return {c["type"]: c["status"] for c in deprecated if c["type"] in MARKS}
