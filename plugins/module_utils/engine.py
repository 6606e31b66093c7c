# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The engine's entry point: a store with every domain's admission rules in force.

The store layer cannot know the domains above it, so the rules upstream runs as validating webhooks are
registered by the domain packages that own them (api/admission.py's registry), and this module, above them all,
imports those packages before opening a store. Modules, the operator and tools open their store here.
"""
from __future__ import annotations

from typing import Any, Mapping

from ansible_collections.metal3.baremetal.plugins.module_utils.api import validation
from ansible_collections.metal3.baremetal.plugins.module_utils.hostclaims import admission as claim_admission
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import admission as host_admission
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts import hardware_admission
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam import allocation as ipam_allocation
from ansible_collections.metal3.baremetal.plugins.module_utils.ipam import prefixes as ipam_prefixes
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack import admission as metalstack_admission
from ansible_collections.metal3.baremetal.plugins.module_utils.metalstack import machinetypes
from ansible_collections.metal3.baremetal.plugins.module_utils.store import factory
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store

BACKENDS = factory.BACKENDS
# The domains imported for their admission.register(...) calls: BareMetalHost's, DataImage's and
# HostFirmwareComponents', HostClaim's, HostDeployPolicy's, IPPool's, IPPrefixPool's and MachineType's rules.
DOMAINS = (host_admission, hardware_admission, claim_admission, ipam_allocation, ipam_prefixes, machinetypes,
           metalstack_admission)


def open_store(options: Mapping[str, Any] | None = None) -> Store:
    """The store named by ``options`` (the keys of the store argument spec), its writes admitted."""
    return factory.open_store(options)


def warm() -> None:
    """Import both store backends and build the kinds' registry and schema validators now: a process that forks
    one worker per task (the operator's prefork server) then does it once, where each worker would compile the
    backend's source and parse every CRD again: about a third of an idle reconcile's task, profiled)."""
    from ansible_collections.metal3.baremetal.plugins.module_utils.store import kube, local  # noqa: F401

    validation.build_validators()
