# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The inventory of what was provisioned; the records are module_utils/inventory.py's."""
from __future__ import annotations

DOCUMENTATION = r"""
name: metal3
short_description: The machines Metal3 provisioned, as an inventory
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - Reads the store (the local SQLite file or a Kubernetes cluster) and makes one host of each provisioned
    machine - a Metal3Machine, by the machine's name; a HostClaim no Metal3Machine made, by the claim's name;
    a BareMetalHost that is C(provisioned) or C(externally provisioned) and that no listed machine or claim
    holds, by the host's name. Two hosts of one name in different namespaces are named C(<name>.<namespace>).
  - Each host's C(ansible_host) is its address on O(network), and it has the variables C(metal3_kind),
    C(metal3_api_version), C(metal3_name), C(metal3_namespace), C(metal3_host) (C(<namespace>/<name>) of the
    BareMetalHost), C(metal3_failure_domain), C(metal3_state) (a machine's phase - C(pending), C(provisioning),
    C(provisioned), C(paused), C(deleting) - or a claim's or host's provisioning state), C(metal3_ready),
    C(metal3_provider_id), C(metal3_cluster), C(metal3_role) (C(control_plane), C(worker), or empty for claims
    and hosts), C(metal3_addresses) (C(type) and C(address), as a Metal3Machine's status lists them),
    C(metal3_networks) (address by IPPool name and by the data template's network id) and C(metal3_labels).
  - "Groups: C(cluster_<cluster>), C(failure_domain_<domain>), C(control_plane) and C(workers) (by Cluster API's
    label C(cluster.x-k8s.io/control-plane) on the Metal3Machine or its Machine), C(state_<state>); names are
    made valid as Ansible's group names (C(cluster_my_cluster))."
  - The inventory source is a YAML file whose name ends in C(.metal3.yml) or C(.metal3.yaml).
  - No Secret is read. The store options fall back on the environment as the modules' do.
options:
  plugin:
    description: The name of this plugin; makes the file a source of this inventory.
    type: str
    required: true
    choices: [metal3.baremetal.metal3]
  namespace:
    description: The namespace to read; every namespace when not set.
    type: str
  network:
    description:
      - Which address becomes C(ansible_host) - the first of these patterns (shell-style, C(mgmt-*)) that
        matches a network id of the machine's data template, an IPPool name the machine has an address from, or
        an address type (C(InternalIP), C(ExternalIP), C(Hostname), C(InternalDNS), C(ExternalDNS)).
      - When not set, the first C(InternalIP).
      - A host with no address on any of them gets no C(ansible_host); when no host has one, the inventory fails,
        naming the hosts' networks.
    type: list
    elements: str
  filter:
    description:
      - A JMESPath expression over the list of the hosts - each one's C(metal3_*) variables and its C(object) as
        stored - that keeps some of them, such as C([?metal3_failure_domain=='az-a']) or
        C([?object.spec.image.url=='http://images.example/debian.qcow2']).
    type: str
extends_documentation_fragment:
  - metal3.baremetal.store
  - constructed
  - inventory_cache
requirements:
  - jmespath on the controller, for O(filter)
"""

EXAMPLES = r"""
# demo.metal3.yml - ansible-inventory -i demo.metal3.yml --graph
plugin: metal3.baremetal.metal3
namespace: metal3

# The storage network's address for ansible_host, the workers of one cluster only, on a cluster
---
plugin: metal3.baremetal.metal3
backend: kubernetes
network: [storage-*]
filter: "[?metal3_cluster=='my-cluster' && metal3_role=='worker']"

# An SSH user, a group per rack label, a group of the hosts in az-a, cached for an hour
---
plugin: metal3.baremetal.metal3
compose:
  ansible_user: "'debian'"
keyed_groups:
  - key: metal3_labels.rack | default('none')
    prefix: rack
groups:
  zone_a: metal3_failure_domain == 'az-a'
cache: true
cache_plugin: ansible.builtin.jsonfile
cache_connection: ~/.cache/metal3-inventory
cache_timeout: 3600
"""

from typing import Any

from ansible.errors import AnsibleParserError
from ansible.inventory.group import to_safe_group_name
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable

from ansible_collections.metal3.baremetal.plugins.module_utils.args import STORE_ARG_SPEC, resolve_store_options
from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import Metal3Error
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.inventory import HostRecord, host_records, read_objects

SUFFIXES = (".metal3.yml", ".metal3.yaml")


class InventoryModule(BaseInventoryPlugin, Constructable, Cacheable):
    NAME = "metal3.baremetal.metal3"

    def verify_file(self, path: str) -> bool:
        return super().verify_file(path) and path.endswith(SUFFIXES)

    def parse(self, inventory: Any, loader: Any, path: str, cache: bool = True) -> None:
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        key = self.get_cache_key(path)
        use_cache = bool(self.get_option("cache")) and cache
        update_cache = bool(self.get_option("cache")) and not cache
        objects = None
        if use_cache:
            try:
                objects = self._cache[key]
            except KeyError:
                update_cache = True
        try:
            if objects is None:
                objects = self._read()
            records = host_records(objects, self.get_option("network"), self.get_option("filter"))
        except Metal3Error as e:
            raise AnsibleParserError(f"metal3.baremetal.metal3 inventory {path}: {e}") from None
        if update_cache:
            self._cache[key] = objects
        for record in records:
            self._add(record)

    def _read(self) -> dict[str, Any]:
        options = resolve_store_options({name: self.get_option(name) for name in STORE_ARG_SPEC})
        with open_store(options) as store:
            return read_objects(store, self.get_option("namespace"))

    def _add(self, record: HostRecord) -> None:
        host = self.inventory.add_host(record.name)
        for name, value in record.variables.items():
            self.inventory.set_variable(host, name, value)
        for group in record.groups:
            self.inventory.add_child(self.inventory.add_group(to_safe_group_name(group, force=True, silent=True)),
                                     host)
        strict = self.get_option("strict")
        variables = self.inventory.get_host(host).get_vars()
        self._set_composite_vars(self.get_option("compose"), variables, host, strict=strict)
        variables = self.inventory.get_host(host).get_vars()
        self._add_host_to_composed_groups(self.get_option("groups"), variables, host, strict=strict)
        self._add_host_to_keyed_groups(self.get_option("keyed_groups"), variables, host, strict=strict)
