"""The reservation protocol (store/reservation.py), tested once, on its own: a claimer of numbered seats, each taken by
the ConfigMap named after it, driven through every state; killed at every write of a run (and of the runs that
recover) it never leaves a claim holding two seats nor a seat that no claim holds; claimers racing in real
processes never take one seat twice.

The claims are ConfigMaps too: a claim names its seat in SEAT_ANNOTATION, its status is its data's "seat".
"""
from __future__ import annotations

import contextlib
import multiprocessing
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import NotFound, TooManyConflicts
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object, Ref
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store
from ansible_collections.metal3.baremetal.plugins.module_utils.store.local import LocalStore
from ansible_collections.metal3.baremetal.plugins.module_utils.store.reservation import (
    TERMINAL,
    Claimer,
    Marking,
    Moved,
    Restart,
    State,
    mark_claim,
    reserve,
    restarting,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.store.writes import release_finalized, standing
from tests.harness.crashing_store import Crash, CrashingStore

NS = "test"
SEAT_ANNOTATION = "example.org/seat"
CLAIM_FINALIZER = "example.org/claim"
SEAT_FINALIZER = "example.org/seat"
CLAIM_LABEL = "example.org/claim"
SEATS = 6


def claim_ref(name: str) -> Ref:
    return Ref("v1", "ConfigMap", name, NS)


def seat_ref(seat: str) -> Ref:
    return Ref("v1", "ConfigMap", f"seat-{seat}", NS)


class Seats(Claimer[Object, str]):
    """Seats 1..SEATS for one claim, lowest free first; ``refuse``: PREPARE says no."""

    def __init__(self, store: Store, name: str, marking: Marking, moved: Moved, refuse: bool = False) -> None:
        self.store, self.ref, self.refuse = store, claim_ref(name), refuse
        self.marking, self.moved = marking, moved
        self.claim = store.get(self.ref)
        self.lost_seats: set[str] = set()

    # the trail
    def marker(self) -> str | None:
        return (self.claim["metadata"].get("annotations") or {}).get(SEAT_ANNOTATION)

    def held(self) -> Object | None:
        seat = self.marker() or (self.claim.get("data") or {}).get("seat")
        found = self.store.get_if_exists(seat_ref(seat)) if seat else None
        return found if found is not None and self.owns(found) else None

    def may_own(self) -> bool:
        return bool(self.marker() or (self.claim.get("data") or {}).get("seat"))

    def owned(self) -> list[Object]:
        listed = self.store.list("v1", "ConfigMap", NS, f"{CLAIM_LABEL}={self.ref.name}")
        return sorted((s for s in listed if self.owns(s)), key=lambda s: s["metadata"]["name"])

    def reported(self, obj: Object) -> bool:
        return bool(self.value(obj) == (self.claim.get("data") or {}).get("seat"))

    def release(self, obj: Object) -> bool:
        return release_finalized(self.store, Ref.of(obj), obj["metadata"].get("uid"), SEAT_FINALIZER)

    def reread(self) -> bool:
        self.claim = self.store.get(self.ref)
        return not self.claim["metadata"].get("deletionTimestamp")

    def confirm(self, taken: Object) -> bool:
        """The claim's status written to name ``taken``, as an IP claim's is: that write tells whether it stands."""
        def with_seat(claim: Object) -> Object:
            return {**claim, "data": {"seat": self.value(taken)}}

        self.claim = standing(self.store, self.claim, change=with_seat)
        return not self.claim["metadata"].get("deletionTimestamp")

    def mark(self, candidate: str) -> None:
        self.claim = mark_claim(self.store, self.claim, SEAT_ANNOTATION, candidate, CLAIM_FINALIZER, False)

    # taking
    def prepare(self) -> bool:
        return not self.refuse

    def valid(self, candidate: str) -> bool:
        return candidate.isdigit() and 1 <= int(candidate) <= SEATS

    def next(self) -> str | None:
        taken = {self.value(s) for s in self.store.list("v1", "ConfigMap", NS) if "seat" in s["metadata"]["name"]}
        free = [str(n) for n in range(1, SEATS + 1) if str(n) not in taken | self.lost_seats]
        return free[0] if free else None

    def take(self, candidate: str) -> Object:
        return self.store.create({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": seat_ref(candidate).name, "namespace": NS, "labels": {CLAIM_LABEL: self.ref.name},
                         "finalizers": [SEAT_FINALIZER]},
            "data": {"seat": candidate, "claim": self.ref.name, "uid": self.claim["metadata"]["uid"]}})

    def lookup(self, candidate: str) -> Object | None:
        return self.store.get_if_exists(seat_ref(candidate))

    def owns(self, obj: Object) -> bool:
        data = obj.get("data") or {}
        return data.get("claim") == self.ref.name and data.get("uid") == self.claim["metadata"]["uid"]

    def lost(self, candidate: str) -> None:
        self.lost_seats.add(candidate)

    def value(self, obj: Object) -> str:
        return str(obj["data"]["seat"])

    def name(self, taken: Object) -> Object | None:
        """The marker made to name ``taken``, unless the claim went or holds another by now."""
        try:
            self.reread()
        except NotFound:
            self.release(taken)
            return None
        other = self.held()
        if other is not None and other["metadata"]["name"] != taken["metadata"]["name"] \
                and self.marker() not in self.lost_seats:
            self.release(taken)
            return other
        self.mark(self.value(taken))
        return taken


def settle(claimer: Seats) -> None:
    """The claim's status names its seat (onto the claim as last written; a claim moved meanwhile starts over)."""
    outcome = reserve(claimer)
    if outcome.state in (State.HELD, State.TAKEN):
        seat = claimer.value(outcome.holding())
        claimer.claim["data"] = {"seat": seat}
        claimer.claim = claimer.store.update(claimer.claim)


def make_claim(store: Store, name: str) -> None:
    store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS},
                  "data": {}})


@pytest.fixture
def store(tmp_path: Path):
    with LocalStore(str(tmp_path / "store.db")) as opened:
        yield opened


def check_one_seat_per_claim(store: Store) -> dict[str, str]:
    """Every claim holds at most one seat, the one its marker and status name; no seat of a claim that is gone."""
    objects = store.list("v1", "ConfigMap", NS)
    claims = {o["metadata"]["name"]: o for o in objects if not o["metadata"]["name"].startswith("seat-")}
    owned: dict[str, list[str]] = defaultdict(list)
    for seat in (o for o in objects if o["metadata"]["name"].startswith("seat-")):
        owned[seat["data"]["claim"]].append(seat["data"]["seat"])
    assert not [name for name in owned if name not in claims], owned
    held = {}
    for name, seats in owned.items():
        assert len(seats) == 1, f"claim {name} holds seats {seats}"
        assert claims[name]["metadata"]["annotations"][SEAT_ANNOTATION] == seats[0]
        assert claims[name]["data"].get("seat") == seats[0]
        held[name] = seats[0]
    return held


MODES = [(Marking.ONCE, Moved.FOLLOW), (Marking.EACH, Moved.RESTART)]
MODE_IDS = ["once-follow", "each-restart"]


# -- every state, named ------------------------------------------------------------------------------------------

def run_traced(claimer: Seats) -> list[State]:
    trace: list[State] = []
    reserve(claimer, trace.append)
    return trace


def test_a_fresh_claim_marks_then_takes_the_lowest_free_seat(store):
    make_claim(store, "c")
    assert run_traced(Seats(store, "c", Marking.ONCE, Moved.FOLLOW)) == \
        [State.FIND, State.PREPARE, State.PICK, State.MARK, State.TAKE, State.TAKEN]
    assert store.get(claim_ref("c"))["metadata"]["annotations"][SEAT_ANNOTATION] == "1"
    assert store.get(claim_ref("c"))["metadata"]["finalizers"] == [CLAIM_FINALIZER]


@pytest.mark.parametrize(("marking", "moved"), MODES, ids=MODE_IDS)
def test_a_claim_that_holds_a_seat_finds_it_by_its_marker_and_writes_nothing(store, marking, moved):
    make_claim(store, "c")
    settle(Seats(store, "c", marking, moved))
    writes = CrashingStore(store, None)
    assert run_traced(Seats(writes, "c", marking, moved)) == [State.FIND, State.HELD]
    assert writes.writes == 0


@pytest.mark.parametrize(("marking", "moved"), MODES, ids=MODE_IDS)
def test_a_seat_the_marker_does_not_lead_to_is_adopted_and_extras_given_back(store, marking, moved):
    make_claim(store, "c")
    first = Seats(store, "c", marking, moved)
    settle(first)
    first.lost_seats = {"1"}
    first.take("3")  # a second seat, as a run of an older version could leave
    claim = store.get(claim_ref("c"))
    claim["metadata"]["annotations"][SEAT_ANNOTATION] = "5"  # leads nowhere
    store.update(claim)
    claimer = Seats(store, "c", marking, moved)
    trace: list[State] = []
    outcome = reserve(claimer, trace.append)
    assert trace == [State.FIND, State.ADOPT, State.HELD] and outcome.adopted
    assert claimer.value(outcome.holding()) == "1"  # the one its status names
    assert store.get_if_exists(seat_ref("3")) is None
    assert store.get(claim_ref("c"))["metadata"]["annotations"][SEAT_ANNOTATION] == "1"


@pytest.mark.parametrize(("marking", "moved"), MODES, ids=MODE_IDS)
def test_a_lost_race_picks_again_and_a_claimer_that_marks_once_names_what_it_took(store, marking, moved):
    make_claim(store, "c")
    make_claim(store, "rival")
    rival = Seats(store, "rival", marking, moved)
    stealing = CrashingStore(store, None, lambda: settle(rival), take_kind="ConfigMap")
    trace = run_traced(Seats(stealing, "c", marking, moved))
    marks = [State.MARK] if marking is Marking.EACH else []
    ending = [State.NAME, State.TAKEN] if marking is Marking.ONCE else [State.TAKEN]
    assert trace == [State.FIND, State.PREPARE, State.PICK, State.MARK, State.TAKE, State.LOST, State.PICK, *marks,
                     State.TAKE, *ending]
    assert store.get(claim_ref("c"))["metadata"]["annotations"][SEAT_ANNOTATION] == "2"


def test_a_claim_whose_marked_seat_is_its_own_already_takes_it_as_its_own(store):
    """Another run of the claim took the seat its marker names: TAKE's AlreadyExists reads it and finds it ours."""
    make_claim(store, "c")
    claimer = Seats(store, "c", Marking.ONCE, Moved.FOLLOW)
    claimer.mark("4")
    claimer.take("4")
    other = Seats(store, "c", Marking.ONCE, Moved.FOLLOW)
    other.held = lambda: None  # type: ignore[method-assign]  # it read the claim before the take landed
    other.may_own = lambda: False  # type: ignore[method-assign]
    trace: list[State] = []
    outcome = reserve(other, trace.append)
    assert trace == [State.FIND, State.PREPARE, State.PICK, State.TAKE, State.TAKEN]
    assert other.value(outcome.holding()) == "4"


@pytest.mark.parametrize(("marking", "moved"), MODES, ids=MODE_IDS)
def test_a_full_pool_exhausts_and_a_refusal_refuses(store, marking, moved):
    for n in range(SEATS + 1):
        make_claim(store, f"c{n}")
    for n in range(SEATS):
        settle(Seats(store, f"c{n}", marking, moved))
    assert run_traced(Seats(store, f"c{SEATS}", marking, moved))[-1] is State.EXHAUSTED
    assert run_traced(Seats(store, f"c{SEATS}", marking, moved, refuse=True)) == \
        [State.FIND, State.PREPARE, State.REFUSED]


def moved_claim(store: Store, deleting: bool) -> Seats:
    """A claimer whose claim another run moves (marks seat 5; or deletes it) between its read and its mark."""
    make_claim(store, "c")
    claimer = Seats(store, "c", Marking.ONCE, Moved.FOLLOW)
    claim = store.get(claim_ref("c"))
    claim["metadata"]["annotations"] = {SEAT_ANNOTATION: "5"}
    claim["metadata"]["finalizers"] = [CLAIM_FINALIZER]
    store.update(claim)
    if deleting:
        store.delete(claim_ref("c"))
    return claimer


def test_a_claim_moved_under_a_mark_is_followed_to_what_it_names_now(store):
    claimer = moved_claim(store, deleting=False)
    trace: list[State] = []
    outcome = reserve(claimer, trace.append)
    assert trace == [State.FIND, State.PREPARE, State.PICK, State.MARK, State.PICK, State.TAKE, State.TAKEN]
    assert claimer.value(outcome.holding()) == "5"


def test_a_claim_deleted_under_a_mark_is_left_to_its_release(store):
    trace = run_traced(moved_claim(store, deleting=True))
    assert trace[-2:] == [State.MARK, State.GOING]


def test_a_claim_moved_under_a_mark_restarts_a_claimer_that_restarts(store):
    claimer = moved_claim(store, deleting=False)
    claimer.moved = Moved.RESTART
    with pytest.raises(Restart):
        reserve(claimer)
    attempts = iter([claimer, Seats(store, "c", Marking.EACH, Moved.RESTART)])
    assert restarting(lambda: reserve(next(attempts)), 2, "c").state is State.TAKEN

    def always_moved():
        raise Restart()

    with pytest.raises(TooManyConflicts, match="kept moving it"):
        restarting(always_moved, 3, "c")


def delete_claim(store: Store, name: str, released: bool) -> None:
    """The claim deleted by its user; ``released``: its release ran too (its finalizer gone, and the claim)."""
    if released:
        claim = store.get(claim_ref(name))
        claim["metadata"]["finalizers"] = []
        store.update(claim)
    store.delete(claim_ref(name))


class GoneBeforeNaming(Seats):
    """A claimer whose claim is deleted and released between its take and its NAME."""

    def name(self, taken: Object) -> Object | None:
        delete_claim(self.store, self.ref.name, released=True)
        return super().name(taken)


def test_a_claim_gone_before_it_names_what_it_took_gives_it_back(store):
    make_claim(store, "c")
    claimer = GoneBeforeNaming(store, "c", Marking.ONCE, Moved.FOLLOW)
    claimer.mark("1")
    make_claim(store, "rival")
    rival = Seats(store, "rival", Marking.ONCE, Moved.FOLLOW)
    claimer.store = CrashingStore(store, None, lambda: settle(rival), take_kind="ConfigMap")
    trace: list[State] = []
    reserve(claimer, trace.append)
    assert trace[-2:] == [State.NAME, State.RELEASED]
    assert check_one_seat_per_claim(store) == {"rival": "1"}


@pytest.mark.parametrize("released", [False, True], ids=["being-deleted", "gone"])
@pytest.mark.parametrize(("marking", "moved"), MODES, ids=MODE_IDS)
def test_a_claim_released_while_a_run_takes_gets_back_what_that_run_took(store, marking, moved, released):
    """A run reads its claim (marked, holding nothing: its seat was given back); the claim is then deleted, and
    its release lists no seat; the run takes the marked seat. Read again after the take, the claim is deleted:
    the seat goes back, or it would be held for ever by a claim that is gone."""
    make_claim(store, "c")
    Seats(store, "c", marking, moved).mark("1")
    claimer = Seats(store, "c", marking, moved)
    claimer.store = CrashingStore(store, None, lambda: delete_claim(store, "c", released), take_kind="ConfigMap")
    trace: list[State] = []
    reserve(claimer, trace.append)
    assert trace[-2:] == [State.TAKE, State.RELEASED]
    assert not [o for o in store.list("v1", "ConfigMap", NS) if o["metadata"]["name"].startswith("seat-")]


def test_a_run_that_cannot_tell_whether_its_claim_stands_gives_back_what_it_took_and_fails(store):
    """The check after the take keeps conflicting (a cache that never catches up): whether the claim's release
    could have missed the seat is not known, so the seat goes back and the run fails, to be run again."""
    make_claim(store, "c")
    claimer = Seats(store, "c", Marking.ONCE, Moved.FOLLOW)

    def never_tells(_taken: Object) -> bool:
        raise TooManyConflicts("ConfigMap c: still conflicting after 6 attempts")

    claimer.confirm = never_tells  # type: ignore[method-assign]
    with pytest.raises(TooManyConflicts):
        reserve(claimer)
    assert not [o for o in store.list("v1", "ConfigMap", NS) if o["metadata"]["name"].startswith("seat-")]


def test_every_state_is_named_by_a_test_above():
    tested = {State.FIND, State.ADOPT, State.PREPARE, State.PICK, State.MARK, State.TAKE, State.LOST, State.NAME,
              State.HELD, State.TAKEN, State.EXHAUSTED, State.REFUSED, State.GOING, State.RELEASED}
    assert tested == set(State) and tested > TERMINAL


# -- a crash at every write --------------------------------------------------------------------------------------

def steal_then_die(store: Store, tag: str, marking: Marking, moved: Moved, crash_at: int) -> tuple[bool, set[State]]:
    """Claim v<tag> goes for seat 1; rival s<tag> takes it just before v's create, so v loses it and takes
    another; v dies at write ``crash_at``. Whether it died, and the states it went through."""
    def steal() -> None:
        settle(Seats(store, f"s{tag}", marking, moved))

    crashing = CrashingStore(store, crash_at, steal, take_kind="ConfigMap")
    seen: set[State] = set()
    try:
        claimer = Seats(crashing, f"v{tag}", marking, moved)
        held = claimer.value(reserve(claimer, seen.add).holding())
        if (claimer.claim.get("data") or {}).get("seat") != held:  # its status, unless the check wrote it
            claimer.claim["data"] = {"seat": held}
            crashing.update(claimer.claim)
    except Crash:
        if crashing.before_take is not None:  # it died before the theft: the rival comes anyway
            steal()
        return True, seen
    return False, seen


def run_once(store: Store, name: str, marking: Marking, moved: Moved, seen: set[State]) -> None:
    """One run of the claim: the protocol, then its status (when it does not name the seat held yet)."""
    claimer = Seats(store, name, marking, moved)
    held = claimer.value(reserve(claimer, seen.add).holding())
    if (claimer.claim.get("data") or {}).get("seat") != held:
        claimer.claim["data"] = {"seat": held}
        store.update(claimer.claim)


def until_done(store: Store, name: str, marking: Marking, moved: Moved, first_crash: int) -> set[State]:
    """Runs of the claim through a store that dies at write ``first_crash``, then (a fresh process) at the next
    write, ..., until one completes; the states they went through."""
    seen: set[State] = set()
    for deaths in range(first_crash, 100):
        crashing = CrashingStore(store, deaths)
        try:
            restarting(lambda crashing=crashing: run_once(crashing, name, marking, moved, seen), 8, name)
            return seen
        except Crash:
            continue
    raise AssertionError("never completed")


@pytest.mark.parametrize("freed", [False, True], ids=["stolen-seat-kept", "stolen-seat-freed"])
@pytest.mark.parametrize(("marking", "moved"), MODES, ids=MODE_IDS)
def test_a_claimer_killed_at_any_write_ends_with_one_seat_and_no_orphan(store, marking, moved, freed):
    seen: set[State] = set()
    for first in range(100):
        tag = str(first)
        make_claim(store, f"v{tag}")
        make_claim(store, f"s{tag}")
        died, states = steal_then_die(store, tag, marking, moved, first)
        seen |= states
        if not died:
            break
        if freed:  # the stolen seat is free again: the one the dead claimer's marker may name
            seat = store.get(seat_ref("1"))
            release_finalized(store, Ref.of(seat), seat["metadata"]["uid"], SEAT_FINALIZER)
            store.delete(claim_ref(f"s{tag}"))
        seen |= until_done(store, f"v{tag}", marking, moved, first)
        held = check_one_seat_per_claim(store)
        assert f"v{tag}" in held and len(set(held.values())) == len(held)
        for name in list(held):  # the seats go back for the next scenario
            seat = store.get(seat_ref(held[name]))
            release_finalized(store, Ref.of(seat), seat["metadata"]["uid"], SEAT_FINALIZER)
        for leftover in store.list("v1", "ConfigMap", NS):
            with contextlib.suppress(NotFound):  # a claim being deleted goes with its finalizer
                store.update({**leftover, "metadata": {**leftover["metadata"], "finalizers": []}})
                store.delete(Ref.of(leftover))
    # mark 1, lose 1 (its failed create), take 2 and name it (once), or mark 2 and take it (each), write the status
    assert first == 5, f"the path made {first} writes"
    assert {State.FIND, State.PREPARE, State.PICK, State.MARK, State.TAKE, State.LOST, State.TAKEN} <= seen
    assert State.ADOPT in seen or State.HELD in seen


# -- racing processes --------------------------------------------------------------------------------------------

PROCESSES, CLAIMS_EACH = 4, 2


def _claimer(path: str, names: list[str], marking: Marking, moved: Moved, barrier: Any) -> None:
    with LocalStore(path) as store:
        barrier.wait(timeout=60)
        for name in names:
            restarting(lambda name=name: settle(Seats(store, name, marking, moved)), 8, name)


@pytest.mark.parametrize(("marking", "moved"), MODES, ids=MODE_IDS)
def test_claimers_racing_in_processes_never_take_one_seat_twice(tmp_path, marking, moved):
    path = str(tmp_path / "race.db")
    names = [[f"p{p}-c{c}" for c in range(CLAIMS_EACH)] for p in range(PROCESSES)]
    with LocalStore(path) as store:
        for group in names:
            for name in group:
                make_claim(store, name)
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(PROCESSES)
    processes = [context.Process(target=_claimer, args=(path, group, marking, moved, barrier)) for group in names]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
    assert [p.exitcode for p in processes] == [0] * PROCESSES, "a claimer failed (its traceback is above)"
    with LocalStore(path) as store:
        held = check_one_seat_per_claim(store)
    assert len(held) == SEATS and len(set(held.values())) == SEATS  # 8 claims, 6 seats: 2 wait, none shares
