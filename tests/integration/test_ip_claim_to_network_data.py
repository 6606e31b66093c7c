"""The documented path from a claimed address to rendered data: an ip_claim result goes to the network_data and
meta_data filters as it is, DNS servers included (they were once spelt two ways and silently dropped)."""
from __future__ import annotations

from tests.integration.playbook_runs import ansible_playbook


def test_an_ip_claim_result_renders_its_dns_servers(store_options, namespace):
    run = ansible_playbook("ip_claim_network_data.yml", {"store": store_options, "ns": namespace})
    assert run.ok, run.output
    assert "Traceback" not in run.output
