"""The Ironic client: the provisioning limit's count (shared by a process's reconciles, never exceeded between two
listings), and the requests it makes of Ironic's API where openstacksdk maps none."""
from __future__ import annotations

import json
import types
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.ironic.client import (
    Ironic,
    IronicOptions,
    IronicRefused,
    _BusyCount,
)


def test_a_burst_of_reconciles_gets_no_more_slots_than_the_limit_leaves():
    listings = []
    count = _BusyCount(ttl=60)

    def listing() -> int:
        listings.append(1)
        return 3  # three nodes busy on Ironic

    with ThreadPoolExecutor(16) as pool:
        granted = list(pool.map(lambda _i: count.take(5, listing)[0], range(16)))
    assert granted.count(True) == 2  # 5 - 3
    assert len(listings) == 1  # one listing for the whole burst


def test_the_count_is_read_again_once_it_expires():
    count = _BusyCount(ttl=0)
    assert count.take(1, lambda: 0) == (True, 1)
    assert count.take(1, lambda: 0) == (True, 1)  # re-listed: the node before finished
    assert count.take(1, lambda: 1) == (False, 1)


class Response:
    def __init__(self, status_code: int, body: Any = None):
        self.status_code, self.body = status_code, body
        self.text = json.dumps(body)

    def json(self) -> Any:
        return self.body


class Proxy:
    """openstacksdk's baremetal proxy as the client uses it for what the proxy does not map: raw requests."""

    def __init__(self, answers: dict[str, Response]):
        self.answers, self.requests = answers, []

    def __getattr__(self, method: str) -> Any:
        def request(url: str, **kwargs: Any) -> Response:
            self.requests.append((method.upper(), url, kwargs))
            return self.answers.get(method, Response(204))
        return request


def client(answers: dict[str, Response]) -> tuple[Ironic, Proxy]:
    ironic, proxy = Ironic(IronicOptions(endpoint="http://ironic")), Proxy(answers)
    ironic._conn = types.SimpleNamespace(baremetal=proxy)
    return ironic, proxy


NODE = {"id": "uuid-1", "name": "ns~h"}


def test_virtual_media_requests_are_upstreams():
    """A DataImage as upstream's AttachDataImage / DetachDataImage / GetDataImageStatus ask Ironic for it: a cdrom,
    at the API versions that have each call; the node's history newest first."""
    vmedia = [{"media_types": ["CD"], "inserted": True, "image": "http://ironic/redfish/cdrom-uuid-1.iso"}]
    ironic, proxy = client({"get": Response(200, vmedia)})
    ironic.attach_vmedia(NODE, "http://images.example/data.iso")
    ironic.detach_vmedia(NODE)
    assert ironic.vmedia(NODE) == vmedia
    assert proxy.requests == [
        ("POST", "/nodes/uuid-1/vmedia",
         {"microversion": "1.89", "json": {"device_type": "cdrom", "image_url": "http://images.example/data.iso"}}),
        ("DELETE", "/nodes/uuid-1/vmedia", {"microversion": "1.89", "params": {"device_types": "cdrom"}}),
        ("GET", "/nodes/uuid-1/vmedia", {"microversion": "1.93"})]
    ironic, proxy = client({"get": Response(200, {"history": [{"event": "e"}]})})
    assert ironic.history(NODE) == [{"event": "e"}]
    assert proxy.requests == [("GET", "/nodes/uuid-1/history",
                               {"params": {"sort_dir": "desc", "limit": "20"}, "microversion": "1.78"})]


def test_a_refused_attach_says_ironics_words_and_check_mode_asks_nothing():
    refusal = {"error_message": json.dumps({"faultstring": "Unsupported or missing URL scheme: ftp"})}
    ironic, _proxy = client({"post": Response(400, refusal)})
    with pytest.raises(IronicRefused, match="attach virtual media to node ns~h: Unsupported or missing URL scheme"):
        ironic.attach_vmedia(NODE, "ftp://images.example/data.iso")
    ironic, proxy = client({})
    ironic.dry_run = True
    ironic.attach_vmedia(NODE, "http://images.example/data.iso")
    ironic.detach_vmedia(NODE)
    assert proxy.requests == []
