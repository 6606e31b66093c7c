# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""The one crash-safe reservation protocol: how a claim takes one of many things through the store, never two.

An address of an IPPool, a prefix of an IPPrefixPool and a BareMetalHost are each reserved by a claim with the same
steps, driven here (``reserve``) through a ``Claimer``, the strategy that knows what is reserved and how it is
written. The store is the only lock: a thing is taken by one write that fails for all but one claimer (the create
of an object named after it - AlreadyExists - or a resourceVersion-checked update of it - Conflict).

The steps, as the states of ``State``:

- FIND: the claim's trail (its marker: an annotation naming the candidate it holds or is taking) leads to an
  object the claim owns: it holds it.
- ADOPT: no trail leads anywhere, but the claim may own something (a marker or a status names one): a run that
  died between taking and naming left it. Every object the claim owns is looked up (by label); one is kept (the
  one its status names, else the first of its pool), the others are given back, so that it never holds two.
- PREPARE: the claimer's checks before anything is taken (a pool that refuses the claim's namespace, say).
- PICK: the candidate the marker names first (an earlier run's reservation), else the claimer's next free one.
- MARK: the claim names the candidate (with its finalizer), resourceVersion-checked, before the candidate is
  taken: a crash after it leaves a trail, never a leak. Two runs of one claim meet on this write.
- TAKE: the one write that takes the candidate. Losing it to AlreadyExists or Conflict is a lost race, unless the
  claim's own marker names the candidate: then the object is read, and is the claim's when another run of the
  claim made it; one released between the write and the read is tried again. Then the claim is read again: its
  release lists what it owns only once it is being deleted, so a take that release may have missed (the claim
  this run read was deleted and released meanwhile) is given back (RELEASED). A claimer whose claim takes a
  write after the take anyway (its status) lets that resourceVersion-checked write tell (``confirm``): a read
  might be a cache's, behind the deletion.
- LOST: another claim got there first; back to PICK (or FIND, for a claimer that looks afresh after each loss).
- NAME: the claim took another candidate than its marker names (it marks only once): the marker is made to name
  it, unless another run of the claim has meanwhile named and taken another, which then stays.

Where the things reserved differ in what they must do, a claimer says so by its policies, not by its own copy of
the steps: ``marking`` (none: the take itself writes the claim onto the object, as a host's consumerRef; once;
each candidate), ``moved`` (what a conflicting mark means: follow the claim as it now is, or start over) and
``relook_after_loss``.

A run ends in one of the terminal states: HELD (held already, found or adopted), TAKEN, EXHAUSTED (nothing left to
take), REFUSED (PREPARE said no), GOING (the claim is being deleted: its release is left to the next run) or
RELEASED (the claim went, or is going, while this run took something, which was given back).
"""
from __future__ import annotations

import copy
import enum
from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

from ansible_collections.metal3.baremetal.plugins.module_utils.core.errors import (
    AlreadyExists,
    Conflict,
    NotFound,
    TooManyConflicts,
)
from ansible_collections.metal3.baremetal.plugins.module_utils.core.objects import Object
from ansible_collections.metal3.baremetal.plugins.module_utils.core.retry import retry_on_conflict
from ansible_collections.metal3.baremetal.plugins.module_utils.store.base import Store

T = TypeVar("T")  # the thing reserved, as the store holds it
C = TypeVar("C")  # a candidate: what the marker names and TAKE takes
R = TypeVar("R")

# How many times TAKE writes a candidate that is released each time between its write and the read that follows.
TAKE_ATTEMPTS = 5


class State(enum.Enum):
    """The protocol's states: the steps, then the ends a run comes to."""

    FIND = "find"
    ADOPT = "adopt"
    PREPARE = "prepare"
    PICK = "pick"
    MARK = "mark"
    TAKE = "take"
    LOST = "lost"
    NAME = "name"
    HELD = "held"
    TAKEN = "taken"
    EXHAUSTED = "exhausted"
    REFUSED = "refused"
    GOING = "going"
    RELEASED = "released"


TERMINAL = frozenset({State.HELD, State.TAKEN, State.EXHAUSTED, State.REFUSED, State.GOING, State.RELEASED})


class Marking(enum.Enum):
    """When the claim names its candidate."""

    NONE = "none"  # never: the take writes the claim onto the reserved object itself, in its one write
    ONCE = "once"  # its first candidate, before its take; one taken in its place is named after (NAME): a claimer
    # that loses many candidates in a race pays one create for each, not a mark too
    EACH = "each"  # every candidate, before its take: the marker always names what is being taken


class Moved(enum.Enum):
    """What a run does when its mark meets Conflict: another run of the claim (or its user) moved the claim."""

    FOLLOW = "follow"  # read the claim again and go on from what its marker now names
    RESTART = "restart"  # start over from the claim as it now is (``Restart``, caught by ``restarting``)


class Restart(Exception):
    """Another run of the claim moved it: the reconcile starts over from the claim as it now is."""


class Claimer(Generic[T, C]):
    """What ``reserve`` needs of one kind of claim: the strategy of one thing reserved. Every method is a read or
    a write of the store; the claimer keeps the claim as last read or written."""

    marking = Marking.ONCE
    moved = Moved.FOLLOW
    relook_after_loss = False  # after a loss, look again at what the claim holds (FIND) before the next PICK

    # -- the trail ---------------------------------------------------------------------------------------------
    def marker(self) -> C | None:
        """The candidate the claim's marker names now; None with no marker (or Marking.NONE)."""
        return None

    def held(self) -> T | None:
        """What the claim's trail leads to, when the claim owns it."""
        raise NotImplementedError

    def may_own(self) -> bool:
        """Whether the claim may own something its trail does not lead to (a marker or a status names one)."""
        return False

    def owned(self) -> list[T]:
        """Everything the claim owns, of any pool (looked up by label, then checked), in the order adoption keeps."""
        return []

    def keepable(self, obj: T) -> bool:
        """Whether adoption may keep ``obj`` (it is of the claim's pool)."""
        return True

    def reported(self, obj: T) -> bool:
        """Whether the claim's status names ``obj`` (what its users were told): adoption keeps that one first."""
        return False

    def release(self, obj: T) -> bool:
        """Give ``obj`` back; whether it went (False: it is another object of that name now)."""
        raise NotImplementedError

    def released(self, objs: list[T]) -> None:
        """After adoption gave ``objs`` back."""

    def reread(self) -> bool:
        """Read the claim again; False when it is being deleted."""
        raise NotImplementedError

    def confirm(self, taken: T) -> bool:
        """After ``taken`` was taken: whether the claim, as it is now, is not being deleted (NotFound: it went).
        A release marks its claim deleted before it lists what the claim owns, so the claim read (or written,
        resourceVersion-checked) after the take tells whether that release could have missed ``taken``. It must be
        a write (``store/writes.py`` ``standing``, or a status write the claimer makes anyway): a read may come
        from a cache (the Ansible Operator's proxy) that does not show the deletion yet. A claimer that marks
        nothing is never asked."""
        raise NotImplementedError

    def mark(self, candidate: C) -> None:
        """The claim names ``candidate`` (and carries its finalizer): resourceVersion-checked, Conflict when the
        claim moved since it was read; no write when it says so already."""
        raise NotImplementedError

    # -- taking ------------------------------------------------------------------------------------------------
    def prepare(self) -> bool:
        """The checks and writes before anything is taken; False refuses (the claimer knows why)."""
        return True

    def valid(self, candidate: C) -> bool:
        """Whether ``candidate`` (named by the marker) can still be taken from the claim's pool."""
        return True

    def next(self) -> C | None:
        """The next candidate to take; None when there is none (the claimer knows why)."""
        raise NotImplementedError

    def take(self, candidate: C) -> T:
        """The one write that takes ``candidate``: AlreadyExists or Conflict when another got there first."""
        raise NotImplementedError

    def lookup(self, candidate: C) -> T | None:
        """What holds ``candidate`` now (None: nothing)."""
        raise NotImplementedError

    def owns(self, obj: T) -> bool:
        """Whether ``obj`` is this claim's."""
        raise NotImplementedError

    def lost(self, candidate: C) -> None:
        """Another claim holds ``candidate``."""

    def value(self, obj: T) -> C:
        """The candidate ``obj`` is."""
        raise NotImplementedError

    def name(self, taken: T) -> T | None:
        """NAME: the marker made to name ``taken``; what the claim holds then (another run's, when it named and
        took another meanwhile: ``taken`` then goes back), None when the claim went (``taken`` given back)."""
        raise NotImplementedError


@dataclass
class Outcome(Generic[T]):
    """Where a run ended: a terminal State, and what the claim holds (HELD, TAKEN)."""

    state: State
    obj: T | None = None
    adopted: bool = False

    def holding(self) -> T:
        """What the claim holds (HELD, TAKEN)."""
        if self.obj is None:
            raise RuntimeError(f"a reservation that ended {self.state.value} holds nothing")
        return self.obj


class Reservation(Generic[T, C]):
    """One run of the protocol for one claim; ``trace`` is told each state as it is entered (for tests)."""

    def __init__(self, claimer: Claimer[T, C], trace: Callable[[State], None] | None = None) -> None:
        self.claimer, self.trace = claimer, trace

    def _enter(self, state: State) -> State:
        if self.trace is not None:
            self.trace(state)
        return state

    def run(self) -> Outcome[T]:
        claimer = self.claimer
        state = self._enter(State.FIND)
        obj: T | None = None
        candidate: C | None = None
        marked = claimer.marking is not Marking.NONE and claimer.marker() is not None
        first_pick = True
        while True:
            if state is State.FIND:
                obj = claimer.held()
                if obj is not None:
                    self._trail(obj, adopted=False)
                    return Outcome(self._enter(State.HELD), obj)
                state = self._enter(State.ADOPT if claimer.may_own() else State.PREPARE if first_pick
                                    else State.PICK)
            elif state is State.ADOPT:
                obj = self._adopt()
                if obj is not None:
                    self._trail(obj, adopted=True)
                    return Outcome(self._enter(State.HELD), obj, adopted=True)
                state = self._enter(State.PREPARE if first_pick else State.PICK)
            elif state is State.PREPARE:
                if not claimer.prepare():
                    return Outcome(self._enter(State.REFUSED))
                state = self._enter(State.PICK)
            elif state is State.PICK:
                if first_pick:  # a reservation an earlier run left (or one running now) is taken first
                    candidate = claimer.marker() if claimer.marking is not Marking.NONE else None
                    first_pick = False
                from_marker = candidate is not None and candidate == claimer.marker()
                if candidate is None or not claimer.valid(candidate):
                    from_marker = False
                    candidate = claimer.next()
                    if candidate is None:
                        return Outcome(self._enter(State.EXHAUSTED))
                if claimer.marking is Marking.EACH or (claimer.marking is Marking.ONCE and not marked
                                                       and not from_marker):
                    state = self._enter(State.MARK)
                else:
                    state = self._enter(State.TAKE)
            elif state is State.MARK:
                try:
                    claimer.mark(_entered_with(candidate, state))
                    marked = True
                    state = self._enter(State.TAKE)
                except Conflict:
                    if claimer.moved is Moved.RESTART:
                        raise Restart() from None
                    if not claimer.reread():
                        return Outcome(self._enter(State.GOING))
                    candidate = claimer.marker()
                    marked = candidate is not None
                    state = self._enter(State.PICK)
            elif state is State.TAKE:
                obj = self._take(_entered_with(candidate, state))
                if obj is None:
                    state = self._enter(State.LOST)
                elif not self._still_claimed(obj):
                    return Outcome(self._enter(State.RELEASED))
                elif claimer.marking is Marking.ONCE and claimer.marker() != claimer.value(obj):
                    state = self._enter(State.NAME)
                else:
                    return Outcome(self._enter(State.TAKEN), obj)
            elif state is State.LOST:
                claimer.lost(_entered_with(candidate, state))
                candidate = None
                state = self._enter(State.FIND if claimer.relook_after_loss else State.PICK)
            elif state is State.NAME:
                obj = claimer.name(_entered_with(obj, state))
                return Outcome(self._enter(State.TAKEN if obj is not None else State.RELEASED), obj)

    def _adopt(self) -> T | None:
        """Keep one of what the claim owns (its status's, else the first of its pool); give back the others."""
        claimer = self.claimer
        owned = claimer.owned()
        mine = [o for o in owned if claimer.keepable(o)]
        kept = next((o for o in mine if claimer.reported(o)), mine[0] if mine else None)
        claimer.released([extra for extra in owned if extra is not kept and claimer.release(extra)])
        return kept

    def _take(self, candidate: C) -> T | None:
        """TAKE: the object taken, or None when another claim holds ``candidate``. Only a candidate the claim's
        marker names can already be the claim's own (taken by another run of the claim): only then is it read.
        Any other is simply lost, at the cost of one write."""
        claimer = self.claimer
        ours = claimer.marking is Marking.EACH or (claimer.marking is Marking.ONCE
                                                   and candidate == claimer.marker())
        for _attempt in range(TAKE_ATTEMPTS):
            try:
                return claimer.take(candidate)
            except (AlreadyExists, Conflict):
                if not ours:
                    return None
                existing = claimer.lookup(candidate)
            if existing is not None:
                return existing if claimer.owns(existing) else None
            # Released between the write and the read: free again, so try again.
        return None  # taken and released over and over: as good as taken, move on

    def _still_claimed(self, taken: T) -> bool:
        """After TAKE: whether the claim still stands (``confirm``); if not, ``taken`` goes back. A claimer that
        marks nothing writes the claim onto what it takes, and the claim's own release finds it there."""
        if self.claimer.marking is Marking.NONE:
            return True
        try:
            if self.claimer.confirm(taken):
                return True
        except NotFound:
            pass
        except TooManyConflicts:  # not known either way: given back, and the run fails (it is run again)
            self.claimer.release(taken)
            raise
        self.claimer.release(taken)
        return False

    def _trail(self, obj: T, adopted: bool) -> None:
        """HELD: the marker made to lead to what the claim holds. A claimer that marks each candidate does so on
        every run (a no-op when it does); one that marks once only after an adoption (its trail led elsewhere)."""
        claimer = self.claimer
        if claimer.marking is Marking.EACH or (claimer.marking is Marking.ONCE and adopted):
            value = claimer.value(obj)
            if claimer.moved is Moved.RESTART:
                try:
                    claimer.mark(value)
                except Conflict:
                    raise Restart() from None
            else:
                def again() -> None:
                    claimer.reread()
                    claimer.mark(value)

                retry_on_conflict(again)


def _entered_with(value: R | None, state: State) -> R:
    """What a state is only entered with (the candidate, the object taken); its absence is a bug of this module."""
    if value is None:
        raise AssertionError(f"the reservation entered {state.value} without what it works on")
    return value


def reserve(claimer: Claimer[T, C], trace: Callable[[State], None] | None = None) -> Outcome[T]:
    """Run the protocol once for ``claimer``'s claim."""
    return Reservation(claimer, trace).run()


def restarting(attempt: Callable[[], R], attempts: int, what: str) -> R:
    """``attempt`` (a reconcile that reads its claim first) run again while it restarts (Restart); TooManyConflicts
    after ``attempts``."""
    for _attempt in range(attempts):
        try:
            return attempt()
        except Restart:
            continue
    raise TooManyConflicts(f"{what}: other reconciles of the claim kept moving it ({attempts} attempts)")


def mark_claim(store: Store, claim: Object, annotation: str, value: str, finalizer: str, dry_run: bool) -> Object:
    """The claim as it names ``value`` in ``annotation`` and carries ``finalizer``: written (resourceVersion-checked
    against ``claim``, so Conflict when it moved since) unless it says so already, or ``dry_run``."""
    metadata = claim["metadata"]
    finalizers = metadata.get("finalizers") or []
    if (metadata.get("annotations") or {}).get(annotation) == value and finalizer in finalizers:
        return claim
    obj = copy.deepcopy(claim)
    obj["metadata"]["annotations"] = {**(metadata.get("annotations") or {}), annotation: value}
    if finalizer not in finalizers:
        obj["metadata"]["finalizers"] = [*finalizers, finalizer]
    return claim if dry_run else store.update(obj)
