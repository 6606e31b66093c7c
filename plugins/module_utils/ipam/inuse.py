# Copyright: Contributors to the metal3.baremetal project
# Apache License 2.0 (see LICENSE)
"""A pool's in-use set: a bitmap of offsets, the allocator's view of the pool's index.

The allocator builds it from the pool's ``status.indexes`` on each allocation, so that it finds the next free
address in C-speed scans of full bytes. It is only a hint: the IPAddress named after an address is what makes
it taken, so a stale bit costs a retry, never a duplicate.
"""
from __future__ import annotations

import re
from typing import Iterable

_NOT_FULL = re.compile(rb"[^\xff]")


class InUse:
    def __init__(self) -> None:
        self.bits = bytearray()

    @classmethod
    def of(cls, offsets: Iterable[int]) -> InUse:
        in_use = cls()
        for offset in offsets:
            in_use.add(offset)
        return in_use

    def __contains__(self, offset: int) -> bool:
        byte = offset >> 3
        return byte < len(self.bits) and bool(self.bits[byte] & (1 << (offset & 7)))

    def add(self, offset: int) -> None:
        byte = offset >> 3
        if byte >= len(self.bits):
            self.bits.extend(b"\0" * (byte + 1 - len(self.bits)))
        self.bits[byte] |= 1 << (offset & 7)

    def first_free(self, size: int, start: int = 0, skip: Iterable[int] = ()) -> int | None:
        """The first offset at or after ``start`` (wrapping around) that is neither in use nor in ``skip``."""
        skipped = set(skip)
        for low, high in ((start, size), (0, start)):
            offset = low
            while offset < high:
                offset = self._next_clear(offset)
                if offset >= high:
                    break
                if offset not in skipped:
                    return offset
                offset += 1
        return None

    def _next_clear(self, offset: int) -> int:
        """The first clear bit at or after ``offset``; full bytes are skipped at C speed."""
        while offset in self:
            if offset & 7 == 0:
                match = _NOT_FULL.search(self.bits, offset >> 3)
                if match is None:
                    return len(self.bits) * 8
                offset = max(offset, match.start() * 8)
                if offset not in self:
                    return offset
            offset += 1
        return offset
