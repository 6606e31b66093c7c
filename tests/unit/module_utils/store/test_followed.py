"""A live view keeps the newest copy of each object, whatever order a watch and the caller's own writes reach
it in."""
from __future__ import annotations

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.store.followed import Followed


def obj(name: str, version: int, **spec) -> dict:
    return {"metadata": {"name": name, "resourceVersion": str(version)}, "spec": spec}


def versions(view: Followed) -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in view.objects()}


# (what reaches the view, in order; what it then holds)
CASES = [
    ("an event adds", [("ADDED", obj("a", 5))], {"a": "5"}),
    ("a newer copy replaces", [("ADDED", obj("a", 5)), ("MODIFIED", obj("a", 7))], {"a": "7"}),
    ("an older copy after a newer one is ignored (a write's answer, then its late event)",
     [("MODIFIED", obj("a", 7)), ("ADDED", obj("a", 5))], {"a": "7"}),
    ("a deletion removes", [("ADDED", obj("a", 5)), ("DELETED", obj("a", 6))], {}),
    ("a late copy of a deleted object does not revive it",
     [("ADDED", obj("a", 5)), ("DELETED", obj("a", 6)), ("MODIFIED", obj("a", 5))], {}),
    ("created again after its deletion, it is back",
     [("ADDED", obj("a", 5)), ("DELETED", obj("a", 6)), ("ADDED", obj("a", 9))], {"a": "9"}),
    ("a late deletion of an older incarnation leaves the newer one",
     [("ADDED", obj("a", 9)), ("DELETED", obj("a", 6))], {"a": "9"}),
    ("bookmarks and unknown events change nothing", [("ADDED", obj("a", 5)), ("BOOKMARK", obj("b", 8))],
     {"a": "5"}),
]


@pytest.mark.parametrize("events, held", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_view_holds_the_newest_copy(events, held):
    view = Followed()
    for event, o in events:
        view.apply(event, o)
    assert versions(view) == held


def test_a_list_replaces_everything():
    view = Followed()
    view.apply("ADDED", obj("stale", 3))
    view.replace([obj("a", 10), obj("b", 11)])
    assert versions(view) == {"a": "10", "b": "11"}


def test_a_deletion_forgotten_by_a_new_list_does_not_hide_a_later_create():
    view = Followed()
    view.apply("DELETED", obj("a", 6))
    view.replace([])
    view.put(obj("a", 4))  # a version numbering that started again (a new store): a list is the truth
    assert versions(view) == {"a": "4"}


def names(objects):
    return sorted(o["metadata"]["name"] for o in objects)


def test_a_reader_reads_only_what_changed_since_its_mark():
    view = Followed()
    view.replace([obj("a", 1), obj("b", 2)])
    mark = view.mark()
    view.put(obj("c", 3))
    view.put(obj("a", 4))
    view.put(obj("b", 1))  # older than held: no change
    changed, mark = view.changed_since(mark)
    assert names(changed) == ["a", "c"]
    assert view.changed_since(mark) == ([], mark)


def test_a_reader_behind_a_list_or_the_changes_kept_reads_everything():
    view = Followed()
    view.replace([obj("a", 1)])
    mark = view.mark()
    view.replace([obj("a", 1), obj("b", 2)])
    assert names(view.changed_since(mark)[0]) == ["a", "b"]
    small = Followed()
    small._changes = type(small._changes)(maxlen=2)
    mark = small.mark()
    for version, name in enumerate("xyz", start=1):
        small.put(obj(name, version))
    assert names(small.changed_since(mark)[0]) == ["x", "y", "z"]  # x's change is no longer kept: all
    assert names(small.changed_since(mark + 1)[0]) == ["y", "z"]
