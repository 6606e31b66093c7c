"""The collection, found where Ansible finds it: the operator writes through the collection's store, so the
directories of ANSIBLE_COLLECTIONS_PATH (the one the operator's roles run from) go on sys.path too."""
from __future__ import annotations

import os
import sys

DEFAULT_PATH = "~/.ansible/collections"


def make_importable() -> None:
    """Each entry of ANSIBLE_COLLECTIONS_PATH on sys.path, after what is there already (idempotent)."""
    for entry in os.environ.get("ANSIBLE_COLLECTIONS_PATH", DEFAULT_PATH).split(os.pathsep):
        path = os.path.expanduser(entry)
        if path and path not in sys.path:
            sys.path.append(path)
