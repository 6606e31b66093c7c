"""Lab benchmark: the lab's virtual servers from apply to provisioned and booted, through the collection and
through a bare openstacksdk script, in one run on one lab.

- the collection: `playbooks/lab-demo.yml` (what `make lab-demo` runs): Ironic's role, the hosts enrolled,
  inspected by the agent and cleaned, the cluster's machines claimed, their data rendered, the image deployed
  with the config drive, until each booted guest answers its QEMU guest agent;
- the floor: the same Ironic transitions from a minimal openstacksdk script - each node created as the
  collection created it (driver, interfaces, driver_info, properties, network_data), its port, manage, inspect,
  provide, deploy with the config drive the collection rendered, then the same wait for the guest agent - with
  the nodes of all servers side by side, as the collection does.

The ratio goes to docs/benchmarks.md (target: <= 1.2). Not part of `make test`. The lab must not be running
(one libvirtd per machine); the images are built on the first run (hack/lab-images.sh).

    .venv/bin/python benchmarks/lab/bench.py [--servers 2]
"""
from __future__ import annotations

import argparse
import datetime
import json
import re
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "build" / "collections"), str(REPO)]

from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import secret_values  # noqa: E402
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import (  # noqa: E402
    NODE_NAME_SEPARATOR,
)
from benchmarks.report import machine, write_section  # noqa: E402
from tests.harness import guest  # noqa: E402
from tests.harness.virtual_lab import LAB_PLAYBOOK, lab_images, one_lab_at_a_time, without_leftovers  # noqa: E402
from tests.integration.playbook_runs import ansible_playbook  # noqa: E402

BASE = REPO / "build" / "lab-bench"
NETNS = "metal3-lab-bench"
DEMO = REPO / "playbooks" / "lab-demo.yml"
LAB_IRONIC = REPO / "playbooks" / "lab-ironic.yml"
IRONIC = "http://172.22.0.1:6385"
POLL = 5.0
TIMEOUT = 4000
INSTANCE_INFO = ("image_source", "image_disk_format", "image_checksum", "image_os_hash_algo", "image_os_hash_value",
                 "capabilities")
NODE_FIELDS = ("driver", "driver_info", "properties", "instance_info",
               *(f"{i}_interface" for i in ("bios", "boot", "console", "deploy", "inspect", "management",
                                            "network", "power", "raid", "rescue", "storage", "vendor")))


def connect() -> Any:
    import openstack

    return openstack.connect(auth_type="http_basic", load_yaml_config=False, load_envvars=False,
                             auth={"endpoint": IRONIC, "username": "metal3",
                                   "password": (BASE / "ironic" / "password").read_text().strip()}).baremetal


def stored(kind: str) -> dict[str, dict[str, Any]]:
    with sqlite3.connect(BASE / "store.db") as db:
        return {name: json.loads(body) for name, body in
                db.execute("select name, body from objects where kind = ?", (kind,))}


def demo(images: Path, state: str, playbook: Path = DEMO) -> float:
    started = time.perf_counter()
    run = ansible_playbook(playbook, {"lab_base_dir": str(BASE), "lab_images_dir": str(images), "lab_state": state,
                                      "lab_wait_timeout": TIMEOUT}, timeout=TIMEOUT + 600, netns=NETNS)
    if not run.ok:
        raise SystemExit(run.output[-5000:])
    return time.perf_counter() - started


TRANSITION = re.compile(r'^(\S+ \S+) .* Node (\S+) moved to provision state "([^"]+)" from state "([^"]+)"')
# Each phase of a node: from the first time it entered the first state to the first time it entered the second.
PHASES = (("enrolled", "verifying", "inspecting"), ("inspected", "inspecting", "cleaning"),
          ("cleaned", "cleaning", "available"), ("claimed", "available", "deploying"),
          ("deployed", "deploying", "active"))


def phases(log: str, start: float, end: float) -> dict[str, float]:
    """Seconds of each phase, averaged over the nodes Ironic's conductor saw move between start and end, from its
    log; 'booted' runs from active to the end of the run."""
    entered: dict[str, dict[str, float]] = {}
    for line in log.splitlines():
        if (m := TRANSITION.match(line)):
            at = datetime.datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S.%f").timestamp()
            if start <= at <= end:
                entered.setdefault(m[2], {}).setdefault(m[3], at)
    nodes = [states for states in entered.values() if "active" in states]
    spans = {name: [states[b] - states[a] for states in nodes if a in states and b in states]
             for name, a, b in PHASES}
    spans["booted"] = [end - states["active"] for states in nodes]
    spans["before the first node"] = [min(states["verifying"] for states in nodes) - start] if nodes else []
    return {name: round(sum(values) / len(values), 1) for name, values in spans.items() if values}


def capture() -> list[dict[str, Any]]:
    """What the floor needs of each server, as the collection made it: its node, port and config drive (run
    inside the lab, after the collection's run)."""
    bm = connect()
    secrets = stored("Secret")
    servers = []
    for name, host in stored("BareMetalHost").items():
        node = bm.get_node(f"{host['metadata']['namespace']}{NODE_NAME_SEPARATOR}{name}").to_dict(computed=False)
        drive: dict[str, Any] = {"meta_data": {"uuid": host["metadata"]["uid"], "local-hostname": name,
                                               "local_hostname": name, "name": name}}
        for field, key in (("metaData", "meta_data"), ("userData", "user_data"), ("networkData", "network_data")):
            ref = host["spec"].get(field) or {}
            if ref.get("name"):
                values = secret_values(secrets[ref["name"]])
                text = values.get(field, values.get("value", ""))
                drive[key] = text if key == "user_data" else {**drive.get(key, {}), **(yaml.safe_load(text) or {})}
        fields = {f: node[f] for f in NODE_FIELDS if node.get(f) is not None}
        # openstacksdk maps no network_data: read from the API, set by a patch.
        fields["network_data"] = bm.get(f"/nodes/{node['id']}", params={"fields": "network_data"},
                                        microversion="1.66").json().get("network_data") or {}
        # What the collection asked for, not what Ironic added while deploying (the config drive among it).
        fields["instance_info"] = {k: v for k, v in fields.get("instance_info", {}).items() if k in INSTANCE_INFO}
        servers.append({"name": name, "mac": host["spec"]["bootMACAddress"], "drive": drive, "node": fields})
    return servers


def floor(servers: list[dict[str, Any]], bmc_password: str) -> float:
    """The same transitions with nothing but openstacksdk (run inside the lab)."""
    bm = connect()

    def wait(node: Any, reached: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        while (current := bm.get_node(node.id)).provision_state != reached:
            if current.provision_state.endswith("failed") or time.monotonic() > deadline:
                raise SystemExit(f"{node.name}: {current.provision_state}: {current.last_error}")
            time.sleep(POLL)

    def one(server: dict[str, Any]) -> None:
        fields = dict(server["node"])
        instance_info, network_data = fields.pop("instance_info"), fields.pop("network_data")
        fields["driver_info"] = {k: bmc_password if v == "******" else v for k, v in fields["driver_info"].items()}
        node = bm.create_node(name=f"floor-{server['name']}", **fields)
        bm.create_port(node_id=node.id, address=server["mac"])
        if network_data:
            bm.patch_node(node, [{"op": "add", "path": "/network_data", "value": network_data}])
        for target, reached in (("manage", "manageable"), ("inspect", "manageable"), ("provide", "available")):
            bm.set_node_provision_state(node, target)
            wait(node, reached)
        bm.patch_node(node, [{"op": "add", "path": "/instance_info", "value": instance_info}])
        bm.set_node_provision_state(node, "active", config_drive=server["drive"])
        wait(node, "active")
        guest.wait_for_agent(server["domain"], TIMEOUT)

    started = time.perf_counter()
    with ThreadPoolExecutor(len(servers)) as pool:
        list(pool.map(one, servers))
    return time.perf_counter() - started


def inside(step: str, *arguments: str) -> str:
    """Run a step of this script inside the lab's namespace; its standard output."""
    done = subprocess.run(["ip", "netns", "exec", NETNS, sys.executable, __file__, "--inside", step, *arguments],
                          capture_output=True, text=True, check=False, timeout=TIMEOUT + 600)
    if done.returncode:
        raise SystemExit(done.stdout[-3000:] + done.stderr[-3000:])
    return done.stdout


def measure(servers: int) -> dict[str, Any]:
    images = lab_images()
    lab = {"virtual_lab_base_dir": str(BASE), "virtual_lab_netns": NETNS, "virtual_lab_bridge": "labbbr0",
           "virtual_lab_servers": [{"name": f"lab-bench-{i}", "firmware": ("bios", "uefi")[i % 2],
                                    "memory_mib": 2048} for i in range(servers)]}
    with one_lab_at_a_time():
        without_leftovers(lab)
        run = ansible_playbook(LAB_PLAYBOOK, lab, timeout=1800)
        if not run.ok:
            raise SystemExit(run.output[-5000:])
        try:
            # Ironic is up before either is timed: the floor finds it running, and so does the collection.
            demo(images, "present", LAB_IRONIC)
            started = time.time()
            ours = demo(images, "present")
            captured = BASE / "captured.json"
            captured.write_text(inside("capture"))
            demo(images, "absent")
            floor_started = time.time()
            bare = float(inside("floor", str(captured)))
            log = (BASE / "ironic" / "log" / "ironic.log").read_text()
        finally:  # the floor's nodes go with the lab's Ironic
            ansible_playbook(LAB_PLAYBOOK, {**lab, "virtual_lab_state": "absent"}, timeout=900)
    return {"servers": servers, "collection_s": round(ours), "floor_s": round(bare), "ratio": round(ours / bare, 2),
            "collection_phases": phases(log, started, started + ours),
            "floor_phases": phases(log, floor_started, floor_started + bare)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", type=int, default=2)
    parser.add_argument("--no-report", action="store_true", help="print only")
    parser.add_argument("--inside", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        step, *rest = args.inside
        if step == "capture":
            print(json.dumps(capture()))
        elif step == "floor":
            servers = json.loads(Path(rest[0]).read_text())
            for server in servers:
                server["domain"] = server["name"]
            password_file = json.loads((BASE / "servers.json").read_text())[0]["password_file"]
            print(floor(servers, Path(password_file).read_text().strip()))
        return 0
    result = measure(args.servers)
    print(json.dumps(result))
    if not args.no_report:
        write_section("lab", [
            "## Lab: virtual servers that boot (`benchmarks/lab/bench.py`)", "",
            f"Machine: {machine()}. Run: {time.strftime('%Y-%m-%d')}, "
            f"`.venv/bin/python benchmarks/lab/bench.py --servers {args.servers}`.", "",
            f"{args.servers} virtual servers of the lab (`make lab`; half BIOS enrolled by IPMI and booted by PXE, "
            "half UEFI by Redfish virtual media with no DHCP), from apply to provisioned and booted (the guest's "
            "agent answers). The collection: `playbooks/lab-demo.yml` - the hosts enrolled, inspected by the "
            "agent, cleaned, claimed by the cluster's machines, their data rendered, the image deployed with the "
            "config drive. The floor: the same Ironic transitions (create node and port as the collection made "
            "them, manage, inspect, provide, deploy with the same config drive) from a minimal openstacksdk "
            f"script, polling every {POLL:g} s, the servers side by side. Ironic is started before either is "
            "timed. One run: the collection first, then the floor on the same servers.", "",
            "| servers | collection s | openstacksdk floor s | ratio (target <= 1.2) |",
            "|---|---|---|---|",
            f"| {args.servers} | {result['collection_s']} | {result['floor_s']} | {result['ratio']} |", "",
            "Where the time goes, from Ironic's conductor log: seconds in each phase, the mean over the servers "
            "(enrolled: node created to inspection started; claimed: available to deploying; booted: active to "
            "the guest agent's answer, the end of the run).", "",
            "| phase | collection s | floor s |", "|---|---|---|",
            *(f"| {name} | {result['collection_phases'].get(name, '-')} | {result['floor_phases'].get(name, '-')} |"
              for name in ("before the first node", *(p[0] for p in PHASES), "booted"))])
    return 0


if __name__ == "__main__":
    sys.exit(main())
