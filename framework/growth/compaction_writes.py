"""Which compaction tombstones a producer writes, and writing them
(``framework.growth.compaction`` says what they are; ``produce_placed`` has them written after
each record).

For a keyed record of a compacted input whose topic changed its partition count at least
once, every partition an earlier count placed the key on, other than where the current count
places it (``LinearHashPartitioner.earlier_homes``), may still hold the key's older values;
each gets a compaction tombstone, queued right after the record (so under exactly-once in the
same transaction). A producer does this once per ``(topic, key, step)``: it remembers the last
``cached`` of them (least recently used first out). A key it forgot (evicted, or a restarted
producer) only gets another tombstone, which changes nothing for processors. Whether the old
partition still holds records from before the change (the seed's log-start test) is not
asked: on a ``cleanup.policy=compact`` topic the log start rarely moves, so the cache is what
bounds the extra writes.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

from framework.config import DEFAULT_TOMBSTONES_CACHED
from framework.errors import SplitstateError
from framework.growth.compaction import compaction_header
from framework.kafka import DeliveryCallback, DeliveryError, Header, KafkaProducer, Message

if TYPE_CHECKING:
    from framework.growth.placement import LinearHashPartitioner

__all__ = ["DEFAULT_TOMBSTONES_CACHED", "CompactionTombstones"]


class CompactionTombstones:
    """A producer's memory of the compaction tombstones it wrote: the last ``cached``
    ``(topic, key, step)`` (``0``: none, a tombstone with every record of a moved key)."""

    def __init__(self, cached: int = DEFAULT_TOMBSTONES_CACHED) -> None:
        if isinstance(cached, bool) or not isinstance(cached, int) or cached < 0:
            raise SplitstateError(
                f"compaction_tombstones_cached={cached!r} is not a count of keys. Fix: pass 0 "
                f"or more (default {DEFAULT_TOMBSTONES_CACHED})."
            )
        self.cached = cached
        self._written: OrderedDict[tuple[str, bytes, int], None] = OrderedDict()
        # no lock (this code reads no clock and starts no thread): a producer shared by
        # threads may at worst forget an entry early, which only writes another tombstone

    def due(self, topic: str, key: bytes, step: int) -> bool:
        """Whether ``key`` of ``topic`` placed at history step ``step`` still needs its
        tombstones: ``False`` while ``written`` is remembered for it."""
        entry = (topic, key, step)
        if entry not in self._written:
            return True
        try:
            self._written.move_to_end(entry)
        except KeyError:  # another thread evicted it meanwhile
            return True
        return False

    def written(self, topic: str, key: bytes, step: int) -> None:
        """Remember that ``key``'s tombstones for ``step`` were queued."""
        if not self.cached:
            return
        entry = (topic, key, step)
        self._written.pop(entry, None)
        self._written[entry] = None  # last: most recently used
        while len(self._written) > self.cached:
            try:
                self._written.popitem(last=False)
            except KeyError:  # another thread emptied it meanwhile
                break

    def write(
        self,
        producer: KafkaProducer,
        counts: LinearHashPartitioner,
        topic: str,
        key: bytes,
        *,
        on_delivery: DeliveryCallback | None = None,
    ) -> None:
        """After a record of ``key`` was queued with ``counts``: for a compacted topic whose
        count changed, queue a compaction tombstone of the key on each partition an earlier
        count placed it on, unless remembered as written for this step. Their failed
        deliveries are reported to ``on_delivery`` (a delivered one is not: it is no record
        of the caller's)."""
        earlier = counts.earlier_homes(topic, key)
        if earlier is None:
            return
        step, partitions = earlier
        if not partitions or not self.due(topic, key, step):
            return
        headers: list[Header] = [compaction_header(topic, step), counts.count_header(topic)]
        report = None if on_delivery is None else _failures_to(on_delivery)
        for old in partitions:
            while True:
                try:
                    producer.produce(topic, None, key, old, headers=headers, on_delivery=report)
                    break
                except BufferError:
                    producer.poll(0.1)  # the local queue is full: let deliveries drain
        self.written(topic, key, step)

    def __len__(self) -> int:
        return len(self._written)


def _failures_to(on_delivery: DeliveryCallback) -> DeliveryCallback:
    """A delivery callback passing only failures on to ``on_delivery``."""

    def report(error: DeliveryError | None, message: Message) -> None:
        if error is not None:
            on_delivery(error, message)

    return report
