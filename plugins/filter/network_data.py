# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
name: network_data
short_description: Render a Metal3DataTemplate networkData into OpenStack network_data.json
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - Renders the C(networkData) of a Metal3DataTemplate as CAPM3 does - links (ethernets, bonds, vlans),
    networks (ipv4, ipv6, ipv4DHCP, ipv6DHCP, ipv6SLAAC, with routes) and services (dns, dnsFromIPPool) - into
    the OpenStack C(network_data.json) form cloud-init reads (C(links), C(networks), C(services)).
  - Accepts upstream's field names and the spellings of the per-failure-domain feature request (bond
    C(interfaces), C(bondMiimon), C(bondLACPRate); vlan C(link); route C(to)/C(via)); both render alike.
  - C(links) come in CAPM3's order - bonds, then ethernets, then vlans. Every route has C(services) (an empty
    list when it has none), as CAPM3 writes them. A bond has C(bond_xmit_hash_policy) only when
    C(bondXmitHashPolicy) is set (CAPM3 writes an empty one, which cloud-init puts into netplan as an invalid
    C(transmit-hash-policy)).
  - Every link a bond (C(bondLinks)), a vlan (C(vlanLink)) or a network (C(link)) names must be in C(links), and
    a link may be in one bond only; a MAC address written with C(-) is rendered with C(:). cloud-init cannot
    read such network_data otherwise.
  - An ethernet or bond may be given by its kernel C(name) without C(macAddress); it is then rendered with
    C(name) and no C(ethernet_mac_address). An ethernet needs at least one of the two.
  - A vlan given without C(macAddress) gets the MAC address of the link it sits on as C(vlan_mac_address),
    which cloud-init requires - a bond's own C(macAddress), else the MAC address of its first C(bondLinks)
    member; an ethernet's MAC address. It is an error if that link has no MAC address.
  - C(dnsFromIPPool) reads only the DNS servers of what the pool gave, as CAPM3 does, so a pool in O(addresses)
    given by its C(dns_servers) alone (no C(address)) renders them; a pool that gave neither is an error.
  - A template without C(networkData) (the input is C(null)) renders no document - the result is C(null) - as
    CAPM3 renders no network_data then (no networkdata Secret; the host gets none, and cloud-init falls back to
    its default network). Write no C(network_data.json) for it. An empty C(networkData) (C({})) renders the
    empty document (C(links), C(networks) and C(services) each an empty list), as CAPM3 does.
  - "Errors name the field, for example C(networkData.links.bonds[0].bondMode: must be one of ...)."
options:
  _input:
    description: The C(networkData) mapping of a Metal3DataTemplate; C(null) when the template has none.
    type: dict
    required: true
  addresses:
    description:
      - Pool name to the address claimed from it, C({address, prefix, gateway, dns_servers}) - a registered
        M(metal3.baremetal.ip_claim) result as it is (its other keys are ignored).
      - C(dnsServers), the IPAddress spec's spelling, is read for C(dns_servers) too.
    type: dict
    required: true
  host:
    description:
      - The BareMetalHost, whose C(status.hardware.nics) give C(fromHostInterface) MAC addresses and whose
        annotations give C(fromAnnotation) MAC addresses and C(fromPoolAnnotation) pools.
    type: dict
"""

EXAMPLES = r"""
- name: network_data.json for a host with two bonded NICs
  ansible.builtin.copy:
    dest: /tmp/network_data.json
    mode: "0644"
    content: >-
      {{ template.spec.networkData | metal3.baremetal.network_data(
           {'mgmt': {'address': '192.168.11.10', 'prefix': 24, 'gateway': '192.168.11.1', 'dns_servers': []}},
           host) | to_nice_json }}

- name: Claim the address of a node, then render its network_data.json with it
  metal3.baremetal.ip_claim:
    name: node-0-mgmt
    namespace: metal3
    pool: mgmt
  register: mgmt

- name: network_data.json with the claimed address, gateway and DNS servers of pool mgmt
  ansible.builtin.copy:
    dest: /tmp/network_data.json
    mode: "0644"
    content: "{{ template.spec.networkData | metal3.baremetal.network_data({'mgmt': mgmt}, host) | to_nice_json }}"
"""

RETURN = r"""
_value:
  description:
    - C({links, networks, services}) in OpenStack network_data.json form.
    - C(null) when the input is C(null) (a template without C(networkData)) - no network_data at all.
  type: dict
"""

from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Metal3Error
from ansible_collections.metal3.baremetal.plugins.module_utils.templating.render import render_network_data


def network_data(network_data_spec: dict[str, Any] | None, addresses: dict[str, Any],
                 host: dict[str, Any] | None = None) -> dict[str, Any] | None:
    # Values go to the renderer as given (None is "not set": no document): it names the argument or field of a
    # bad one.
    try:
        return render_network_data(network_data_spec, addresses, host)
    except Metal3Error as e:
        raise AnsibleFilterError(str(e)) from None


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"network_data": network_data}
