"""The node agent tells a control plane machine from a worker by its user_data, as the kubeadm bootstrap provider
writes it (its cloudinit package's templates, trimmed): ``kubeadm init`` with /run/kubeadm/kubeadm.yaml, whose
ClusterConfiguration kubeadm uploads; a join whose configuration has ``controlPlane``; a worker's join without."""
from __future__ import annotations

import yaml

from tests.harness.node_agent import Kubeadm, kubeadm_of

HEADER = "## template: jinja\n#cloud-config\n"
INIT = HEADER + """write_files:
-   path: /etc/kubernetes/pki/ca.crt
    owner: root:root
    permissions: '0640'
    content: |
      -----BEGIN CERTIFICATE-----
-   path: /run/kubeadm/kubeadm.yaml
    owner: root:root
    permissions: '0640'
    content: |
      ---
      apiVersion: kubeadm.k8s.io/v1beta4
      kind: ClusterConfiguration
      controlPlaneEndpoint: 127.0.0.1:6443
      etcd:
        external:
          endpoints:
          - https://etcd.example:2379
      kubernetesVersion: v1.34.4
      ---
      apiVersion: kubeadm.k8s.io/v1beta4
      kind: InitConfiguration
      nodeRegistration:
        name: '{{ ds.meta_data.name }}'
runcmd:
  - 'kubeadm init --config /run/kubeadm/kubeadm.yaml  && echo success > /run/cluster-api/bootstrap-success.complete'
"""


def join(control_plane: bool) -> str:
    extra = "      controlPlane:\n        localAPIEndpoint: {}\n" if control_plane else ""
    return HEADER + f"""write_files:
-   path: /run/kubeadm/kubeadm-join-config.yaml
    owner: root:root
    permissions: '0640'
    content: |
      apiVersion: kubeadm.k8s.io/v1beta4
      kind: JoinConfiguration
{extra}      discovery:
        bootstrapToken:
          apiServerEndpoint: 127.0.0.1:6443
          token: abcdef.0123456789abcdef
runcmd:
  - kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml  && echo success
"""


def test_an_init_is_control_plane_with_the_cluster_configuration_kubeadm_uploads():
    found = kubeadm_of(INIT)
    assert found.control_plane
    assert found.cluster_configuration is not None
    uploaded = yaml.safe_load(found.cluster_configuration)
    assert uploaded["kind"] == "ClusterConfiguration"
    assert uploaded["etcd"]["external"]["endpoints"] == ["https://etcd.example:2379"]


def test_a_join_is_control_plane_only_with_control_plane_and_uploads_nothing():
    assert kubeadm_of(join(control_plane=True)) == Kubeadm(control_plane=True)
    assert kubeadm_of(join(control_plane=False)) == Kubeadm()


def test_other_user_data_is_a_plain_node():
    assert kubeadm_of("#cloud-config\nruncmd:\n  - echo provisioned by metal3.baremetal\n") == Kubeadm()
    assert kubeadm_of("") == Kubeadm()
    assert kubeadm_of("#!/bin/sh\necho {{ not: yaml") == Kubeadm()
    assert kubeadm_of(HEADER + "write_files:\n- path: /run/kubeadm/kubeadm.yaml\n  content: '{{'\n") == Kubeadm()
