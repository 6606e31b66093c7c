"""ip_claim, ip_pool and the ipam role through ansible-playbook, on both backends."""
from __future__ import annotations

from tests.integration.playbook_runs import ansible_playbook


def test_claim_and_release_in_a_playbook(store_options, namespace):
    run = ansible_playbook("ip_claim.yml", {"store": store_options, "ns": namespace})
    assert run.ok, run.output
    assert "Traceback" not in run.output


def test_bad_pools_are_refused_and_nothing_is_written(store_options, namespace):
    run = ansible_playbook("ip_pool_bad_input.yml", {"store": store_options, "ns": namespace})
    assert run.ok, run.output
    assert "Traceback" not in run.output
