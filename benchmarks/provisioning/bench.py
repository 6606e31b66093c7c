"""Provisioning benchmark: 100 hosts from registration to provisioned and back to available, on fake-hardware.

Two runs against the same real Ironic (fake-hardware, every [fake] delay 0), started with the ironic role:

- the collection: `ansible-playbook` applies 100 BareMetalHost manifests, then baremetal_host waits for
  `provisioned`; the images are removed and baremetal_host waits for `available` - register, manage,
  inspect, provide, deploy with a config drive, undeploy, all through the store and the state machine;
- the floor: a minimal script calling openstacksdk directly for the same transitions (create node and
  port, manage, inspect, provide, deploy with a config drive, undeploy), with the same concurrency and the
  same poll interval.

Both wall times and their ratio go to docs/benchmarks.md (target: ratio <= 1.3). Not part of `make test`.

    .venv/bin/python benchmarks/provisioning/bench.py [--hosts 100] [--concurrency 20]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "build" / "collections"), str(REPO)]

from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import POLL  # noqa: E402
from benchmarks.report import machine, write_section  # noqa: E402
from tests.harness.ironic import LAB, Ironic, free_port  # noqa: E402

PLAYBOOK = Path(__file__).resolve().parent / "provision.yml"


def manifests(directory: Path, hosts: int, image: bool) -> Path:
    docs = ["apiVersion: v1\nkind: Secret\nmetadata: {name: bench-bmc}\nstringData: {username: admin, "
            "password: bench}\n"]
    for i in range(hosts):
        spec = (f"  online: true\n  bootMACAddress: '52:54:01:00:{i // 256:02x}:{i % 256:02x}'\n"
                f"  bmc: {{address: 'fake://bench-{i}', credentialsName: bench-bmc}}\n")
        spec += ("  image: {url: 'http://images.example/os.qcow2', checksum: abc}\n" if image
                 else "  image: null\n")
        docs.append(f"apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {{name: bench-{i}}}\n"
                    f"spec:\n{spec}")
    path = directory / ("hosts.yaml" if image else "deprovision.yaml")
    path.write_text("---\n".join(docs))
    return path


def collection(ironic: Ironic, scratch: Path, hosts: int, concurrency: int) -> float:
    env = {**os.environ, **ironic.env, "METAL3_STORE_PATH": str(scratch / "store.db"),
           "ANSIBLE_COLLECTIONS_PATH": str(REPO / "build" / "collections"),
           "ANSIBLE_PYTHON_INTERPRETER": sys.executable, "ANSIBLE_LOCALHOST_WARNING": "false",
           "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false"}
    extra = {"provision": str(manifests(scratch, hosts, True)), "deprovision": str(manifests(scratch, hosts, False)),
             "concurrency": concurrency}
    started = time.perf_counter()
    run = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), str(PLAYBOOK), "-e",
                          json.dumps(extra)], env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if run.returncode:
        raise SystemExit(run.stdout[-3000:] + run.stderr[-3000:])
    return elapsed


def floor(ironic: Ironic, hosts: int, concurrency: int) -> float:
    """The same transitions with nothing but openstacksdk, polling as often as the collection does."""
    import openstack

    os.environ.update(ironic.env)

    def one(i: int) -> None:
        bm = openstack.connect(cloud=ironic.cloud).baremetal
        node = bm.create_node(name=f"floor~{i}", driver="fake-hardware", boot_interface="fake",
                              deploy_interface="fake", management_interface="fake", power_interface="fake",
                              inspect_interface="fake")
        bm.create_port(node_id=node.id, address=f"52:54:02:00:{i // 256:02x}:{i % 256:02x}")
        for target, reached, kwargs in (
                ("manage", "manageable", {}), ("inspect", "manageable", {}), ("provide", "available", {}),
                ("active", "active", {"config_drive": {"meta_data": {"uuid": node.id}, "user_data": ""}}),
                ("deleted", "available", {})):
            if target == "active":
                bm.patch_node(node, [{"op": "add", "path": "/instance_info",
                                      "value": {"image_source": "http://images.example/os.qcow2",
                                                "image_checksum": "abc"}}])
            bm.set_node_provision_state(node, target, **kwargs)
            while bm.get_node(node.id).provision_state != reached:
                time.sleep(POLL)
        bm.delete_node(node)

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(hosts)))
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--no-report", action="store_true", help="print only")
    args = parser.parse_args()
    lab = Ironic(LAB / "bench-ironic", free_port(), free_port())
    shutil.rmtree(lab.base_dir, ignore_errors=True)
    lab.start(ironic_fake_delays={})  # every [fake] delay at Ironic's default: 0
    try:
        with tempfile.TemporaryDirectory() as scratch:
            ours = collection(lab, Path(scratch), args.hosts, args.concurrency)
        bare = floor(lab, args.hosts, args.concurrency)
    finally:
        lab.stop("absent")
    result = {"hosts": args.hosts, "concurrency": args.concurrency, "collection_s": round(ours, 1),
              "floor_s": round(bare, 1), "ratio": round(ours / bare, 2)}
    print(json.dumps(result))
    if not args.no_report:
        write_section("provisioning", [
            "## Provisioning (`benchmarks/provisioning/bench.py`)", "",
            f"Machine: {machine()}. Run: {time.strftime('%Y-%m-%d')}, "
            "`.venv/bin/python benchmarks/provisioning/bench.py`.", "",
            f"{args.hosts} hosts on one Ironic 39 (fake-hardware, every `[fake]` delay 0, SQLite), registration to "
            f"provisioned and back to available, {args.concurrency} at a time, polling every {POLL} s. "
            "The collection: one `ansible-playbook` run - apply the BareMetalHost manifests, baremetal_host "
            "`wait_for: provisioned`, remove the images, `wait_for: available` - on the local store. The floor: "
            "the same Ironic transitions (create node and port, manage, inspect, provide, deploy with a config "
            "drive, undeploy) from a minimal openstacksdk script.", "",
            "| hosts | concurrency | collection s | openstacksdk floor s | ratio (target <= 1.3) |",
            "|---|---|---|---|---|",
            f"| {args.hosts} | {args.concurrency} | {result['collection_s']} | {result['floor_s']} | "
            f"{result['ratio']} |"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
