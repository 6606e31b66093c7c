"""htpasswd entries (core/htpasswd.py): bcrypt at Apache's default cost, since the server checks one on every
request; an entry kept when it holds the password at the cost asked, written again otherwise."""
from __future__ import annotations

import bcrypt
import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.htpasswd import (
    DEFAULT_COST,
    cost_of,
    digest_for,
    invalid_cost,
    invalid_entry,
)

AT_5 = bcrypt.hashpw(b"secret", bcrypt.gensalt(rounds=5)).decode()
AT_4 = bcrypt.hashpw(b"secret", bcrypt.gensalt(rounds=4)).decode()


def test_the_default_cost_is_apaches_htpasswd_bs():
    assert DEFAULT_COST == 5


@pytest.mark.parametrize(("digest", "cost"), [
    (AT_5, 5), (AT_4, 4), ("$2y$12$abcdefghijklmnopqrstuu", 12), ("$apr1$salt$hash", None), ("plain", None), ("", None),
], ids=["bcrypt-5", "bcrypt-4", "bcrypt-2y-12", "apr1", "plain", "empty"])
def test_the_cost_of_an_entry(digest, cost):
    assert cost_of(digest) == cost


# the entry the file holds, the password, the cost asked: whether it is written again
CASES = [
    ("none yet", None, b"secret", 5, True),
    ("the password at the cost asked", AT_5, b"secret", 5, False),
    ("another password", AT_5, b"other", 5, True),
    ("the password at another cost", AT_4, b"secret", 5, True),
    ("no bcrypt digest", "$apr1$salt$hash", b"secret", 5, True),
    ("a broken bcrypt digest", "$2b$05$broken", b"secret", 5, True),
]


@pytest.mark.parametrize(("current", "password", "cost", "written"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_an_entry_is_written_unless_it_holds_the_password_at_the_cost_asked(current, password, cost, written):
    digest = digest_for(current, password, cost)
    assert (digest is not None) is written
    if digest is not None:
        assert cost_of(digest) == cost and bcrypt.checkpw(password, digest.encode())


@pytest.mark.parametrize(("cost", "refused"), [(3, True), (4, False), (5, False), (17, False), (18, True)])
def test_a_cost_outside_htpasswds_range_is_refused_naming_the_option(cost, refused):
    why = invalid_cost(cost)
    assert (why is not None) is refused
    if why:
        assert why.startswith("cost: ") and str(cost) in why


# a user name, a password: refused naming which (None: taken)
ENTRIES = [
    ("a user", "metal3", b"secret", None),
    ("a password of 72 bytes", "metal3", b"x" * 72, None),
    ("an empty name", "", b"secret", "name: "),
    ("a name with a colon", "a:b", b"secret", "name: "),
    ("a name with a line break", "a\nb:$2b$05$forged", b"secret", "name: "),
    ("a password of 73 bytes", "metal3", b"x" * 73, "password: "),
]


@pytest.mark.parametrize(("name", "password", "refused"), [e[1:] for e in ENTRIES], ids=[e[0] for e in ENTRIES])
def test_an_entry_that_would_break_the_file_or_bcrypt_is_refused_naming_the_option(name, password, refused):
    why = invalid_entry(name, password)
    assert (why or "").startswith(refused or "") and (why is None) is (refused is None)
    assert why is None or "secret" not in why
