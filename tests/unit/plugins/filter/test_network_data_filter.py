"""The network_data filter renders as CAPM3 does: no document for no networkData, and the DNS servers of a pool
given by its DNS servers alone."""
from __future__ import annotations

import pytest

from ansible_collections.metal3.baremetal.plugins.filter.network_data import network_data

EMPTY = {"links": [], "networks": [], "services": []}

# (input, addresses) → the result
RESULTS = [
    pytest.param(None, {}, None, id="no-networkData-no-document"),
    pytest.param({}, {}, EMPTY, id="empty-networkData-empty-document"),
    pytest.param({"services": {"dnsFromIPPool": "dns"}}, {"dns": {"dns_servers": ["10.0.0.53"]}},
                 {**EMPTY, "services": [{"type": "dns", "address": "10.0.0.53"}]}, id="dns-servers-of-a-pool"),
]


@pytest.mark.parametrize(("spec", "addresses", "result"), RESULTS)
def test_network_data(spec, addresses, result):
    assert network_data(spec, addresses) == result
