# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""An htpasswd file's bcrypt entries, as Apache's ``htpasswd -B`` writes them.

Ironic's http_basic auth and sushy-tools check the password against the entry on every request, so the bcrypt
cost is what each request costs the server, not only what each guess costs an attacker: each step of it doubles
the work, so cost 12 is 128 times Apache's default of 5 (``htpasswd -B``, which Metal3's ironic-image runs for
its JSON-RPC file).
"""
from __future__ import annotations

import traceback

try:
    import bcrypt

    BCRYPT_ERROR: str | None = None
except ImportError:
    BCRYPT_ERROR = traceback.format_exc()

DEFAULT_COST = 5  # Apache htpasswd -B's
COSTS = range(4, 18)  # htpasswd -C's: 4 to 17


def cost_of(digest: str) -> int | None:
    """The bcrypt cost of an entry's digest (``$2b$05$...``); None when it is no bcrypt digest."""
    parts = digest.split("$")
    if len(parts) >= 4 and parts[0] == "" and parts[1] in ("2a", "2b", "2y") and parts[2].isdigit():
        return int(parts[2])
    return None


def invalid_cost(cost: int) -> str | None:
    """Why ``cost`` cannot be used, naming the option; None when it can."""
    if cost in COSTS:
        return None
    return f"cost: must be from {COSTS.start} to {COSTS.stop - 1} (htpasswd -C's range), got {cost}"


MAX_PASSWORD_BYTES = 72  # all bcrypt reads (the bcrypt library refuses longer ones)


def invalid_entry(name: str, password: bytes) -> str | None:
    """Why ``name`` and ``password`` cannot make an entry, naming the option; None when they can."""
    if not name or any(c in name for c in ":\n\r"):
        return f"name: must be a non-empty user name without ':' or line breaks, got {name!r}"
    if len(password) > MAX_PASSWORD_BYTES:
        return f"password: must be at most {MAX_PASSWORD_BYTES} bytes (all bcrypt reads), got {len(password)}"
    return None


def digest_for(current: str | None, password: bytes, cost: int) -> str | None:
    """The digest to write for ``password`` at ``cost``; None when ``current`` holds it at that cost already
    (a digest of another cost is written again, so a file made at a costlier setting gets cheaper checks)."""
    if current and cost_of(current) == cost:
        try:
            if bcrypt.checkpw(password, current.encode()):
                return None
        except ValueError:  # not a digest bcrypt reads
            pass
    return str(bcrypt.hashpw(password, bcrypt.gensalt(rounds=cost)).decode())
