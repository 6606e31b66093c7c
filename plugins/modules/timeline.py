#!/usr/bin/python
# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: timeline
short_description: Draw the provisioning of BareMetalHosts as a timeline, in SVG and optionally PNG
version_added: 0.2.0
author: metal3.baremetal contributors (!UNKNOWN)
description:
  - Writes a picture of the selected BareMetalHosts' provisioning, one row per host, its phases (C(registering),
    C(inspecting), C(preparing), C(available), C(provisioning), C(provisioned), C(deprovisioning), C(deleting))
    as horizontal bars over time, with a time axis and a legend.
  - The bars come from upstream's fields only - C(status.operationHistory) (the start and end of the last
    C(register), C(inspect), C(provision) and C(deprovision)), what the host rested in between, and, after the
    last operation, its current state from the moment it entered it (the C(Ready) condition's
    C(lastTransitionTime)). Upstream's history has no preparation entry, so preparing shows only while the host
    is available after its inspection; once provisioned, that time shows as C(available).
  - A bar whose timestamps cannot be read, or that ends before it starts, is left out with a warning.
  - The picture ends at the latest time any host records, so the same hosts always make the same file and a
    second run changes nothing.
  - The SVG needs nothing beyond Python. The PNG (O(png)) draws the same picture with Pillow, an optional
    dependency (C(pip install pillow)); without it, asking for a PNG fails and says so.
  - Runs on the controller, beside the store, and writes the files there; missing directories are created.
extends_documentation_fragment:
  - metal3.baremetal.store
  - metal3.baremetal.attributes
attributes:
  check_mode:
    support: full
    details: Says whether the files would change, and writes nothing.
  diff_mode:
    support: full
    details: The SVG text before and after.
options:
  path:
    description: The SVG file to write.
    type: path
    required: true
  png:
    description: A PNG file to write as well (needs Pillow).
    type: path
  namespace:
    description: Namespace of the hosts.
    type: str
    default: default
  label_selectors:
    description: Label selectors (C(key=value), C(key!=value), C(key in (a,b)), C(key), C(!key)) choosing hosts.
    type: list
    elements: str
    default: []
  title:
    description: The picture's title.
    type: str
    default: Provisioning timeline
"""

EXAMPLES = r"""
- name: Picture the provisioning of the demo's hosts
  metal3.baremetal.timeline:
    namespace: metal3
    label_selectors: ["metal3.baremetal/demo=true"]
    path: ~/.local/share/metal3-baremetal/demo-timeline.svg
    png: ~/.local/share/metal3-baremetal/demo-timeline.png

- name: One rack, SVG only (no Pillow needed)
  metal3.baremetal.timeline:
    namespace: metal3
    label_selectors: ["rack=r1"]
    path: /tmp/rack-r1.svg
    title: Rack r1
"""

RETURN = r"""
path:
  description: The SVG file.
  returned: always
  type: str
png:
  description: The PNG file, when O(png) is set.
  returned: when O(png) is set
  type: str
hosts:
  description: Each host drawn, with its bars.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Name of the host.
      type: str
    namespace:
      description: Namespace of the host.
      type: str
    state:
      description: C(status.provisioning.state).
      type: str
    phases:
      description: Its bars in time order, each C(phase), C(start), C(end) (RFC 3339) and C(seconds).
      type: list
      elements: dict
      sample: [{"phase": "provisioning", "start": "2024-05-01T10:02:00Z", "end": "2024-05-01T10:03:10Z",
                "seconds": 70}]
"""

import os
import tempfile
from typing import Any

from ansible_collections.metal3.baremetal.plugins.module_utils.ansible_module import run_module
from ansible_collections.metal3.baremetal.plugins.module_utils.args import store_options, with_store
from ansible_collections.metal3.baremetal.plugins.module_utils.core.selector import parse_selector
from ansible_collections.metal3.baremetal.plugins.module_utils.engine import open_store
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.baremetalhost import API, KIND
from ansible_collections.metal3.baremetal.plugins.module_utils.hosts.timeline import layout, png, svg, timeline_rows
from ansible_collections.metal3.baremetal.plugins.module_utils.module_spec import ModuleSpec


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def _write(path: str, content: bytes) -> None:
    """All or nothing: a temporary file beside ``path``, renamed over it."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".timeline-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def run(params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    selector = str(parse_selector(params["label_selectors"])) or None
    with open_store(store_options(params)) as store:
        hosts = store.list(API, KIND, params["namespace"], selector)
    rows, warnings = timeline_rows(hosts)
    placed = layout(rows, params["title"])
    files = {params["path"]: svg(placed).encode()}
    if params["png"]:
        files[params["png"]] = png(placed)
    before = {path: _read(path) for path in files}
    changed = any(before[path] != content for path, content in files.items())
    if changed and not check_mode:
        for path, content in files.items():
            if before[path] != content:
                _write(path, content)
    old_svg = before[params["path"]]
    result: dict[str, Any] = {
        "changed": changed, "path": params["path"], "hosts": [r.summary() for r in rows],
        "diff": {"before": old_svg.decode(errors="replace") if old_svg is not None else "",
                 "after": files[params["path"]].decode(), "before_header": params["path"],
                 "after_header": params["path"]},
    }
    if params["png"]:
        result["png"] = params["png"]
    if warnings:
        result["warnings"] = warnings
    return result


SPEC = ModuleSpec(
    argument_spec=with_store({
        "path": {"type": "path", "required": True},
        "png": {"type": "path"},
        "namespace": {"type": "str", "default": "default"},
        "label_selectors": {"type": "list", "elements": "str", "default": []},
        "title": {"type": "str", "default": "Provisioning timeline"},
    }),
    run=run,
)


def main() -> None:
    run_module(SPEC)


if __name__ == "__main__":
    main()
