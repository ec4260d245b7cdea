"""Which ticks read are the canonical order's own forced ticks (``framework.runtime.ordering``).

A forced tick is an *errand* of the merge: written only to release what waits, nothing waits
for it (``MergeBuffer.add``'s ``wanted=False``), so no tick is forced for it. A forced tick
says so (``framework.time.ticks``: ``FORCED_HEADER``), whoever wrote it, before a restart too;
one whose headers do not say so (the time writer's, or one of before forced ticks said so) is
waited for, and does not use up the floor of a forced tick decided here. A processor keeps
what it wrote too: per partition, the floors decided and not read back yet (each counted
once), and, once one is read, its offset; only a tick whose headers cannot be read is judged
by those (an errand if it has such a floor, or is read again at such an offset).
"""

from __future__ import annotations

from collections.abc import Mapping

from framework.kafka import Message
from framework.records import readable_headers
from framework.time.ticks import is_forced_tick
from rebalance.positions import Position

__all__ = ["Errands"]


class Errands:
    """The forced ticks a processor wrote, by partition (see the module)."""

    def __init__(self) -> None:
        #: per partition, the floors of the forced ticks written there and not read yet
        self._unread: dict[Position, list[int]] = {}
        #: per partition, the offsets of the forced ticks read there, from the state's on
        self._read: dict[Position, set[int]] = {}

    def decided(self, position: Position, floor: int) -> None:
        """A forced tick with ``floor`` is written to ``position`` with the batch."""
        self._unread.setdefault(position, []).append(floor)

    def left_out(self, position: Position, floor: int) -> None:
        """The forced tick with ``floor`` to ``position`` was not written after all."""
        unread = self._unread.get(position)
        if unread is not None and floor in unread:
            unread.remove(floor)

    def wanted(self, position: Position, offset: int, floor: int | None) -> bool:
        """Whether something waits for a tick read at ``offset`` of ``position`` with
        ``floor`` (``None``: another app's): not for another app's, nor for a forced tick
        written here (each floor counted once), nor for one read there before."""
        if floor is None:
            return False
        read = self._read.get(position)
        if read is not None and offset in read:
            return False
        unread = self._unread.get(position)
        if unread is None or floor not in unread:
            return True
        unread.remove(floor)
        if not unread:
            del self._unread[position]
        self._read.setdefault(position, set()).add(offset)
        return False

    def tick_wanted(
        self, message: Message, position: Position, offset: int, floor: int | None
    ) -> bool:
        """Whether something waits for the tick ``message`` at ``offset`` of ``position``
        (``floor``: ``None`` for another app's): not for a forced one, which says so
        (``is_forced_tick``: written by any processor, before a restart too; it uses up the
        floor this processor decided for it). One whose headers say it is not forced (the
        time writer's) is waited for and leaves a forced tick's floor decided here to the
        forced tick; only one whose headers cannot be read is judged by what this processor
        wrote (``wanted``)."""
        headers = readable_headers(message)
        if headers is None:
            return self.wanted(position, offset, floor)
        if is_forced_tick(headers):
            self.wanted(position, offset, floor)  # (its floor used up, its offset known)
            return False
        read = self._read.get(position)
        return floor is not None and not (read is not None and offset in read)

    def dropped(self) -> None:
        """A batch was dropped: the forced ticks not read yet may not have been written."""
        self._unread.clear()

    def read_from(self, starts: Mapping[Position, int]) -> None:
        """The partitions are read again (at most) from ``starts`` on, the state's offsets:
        forget the forced ticks read before."""
        for position, read in list(self._read.items()):
            start = starts.get(position)
            if start is not None:
                read.difference_update([offset for offset in read if offset < start])
                if not read:
                    del self._read[position]

    def forget(self, position: Position) -> None:
        """``position`` is no longer read here."""
        self._unread.pop(position, None)
        self._read.pop(position, None)
