"""Process trees as /proc has them: what the lab's daemons started, what a benchmark's controller runs."""
from __future__ import annotations

import os
from pathlib import Path


def process_tree(root: int) -> list[int]:
    """``root`` and its descendants, as /proc has them now."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    todo, seen = [root], []
    while todo:
        pid = todo.pop()
        seen.append(pid)
        todo.extend(children.get(pid, []))
    return seen
