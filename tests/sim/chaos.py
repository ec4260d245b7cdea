"""The faults of a simulated world's broker calls: failures (some after their write
landed), slow replies, fetches cut short and outages, while the chaos phase lasts."""

from __future__ import annotations

import random
from collections.abc import Callable

from framework.kafka import KafkaIOError
from tests.sim.broker import StoredRecord
from tests.sim.scheduler import Scheduler

__all__ = ["AMBIGUOUS", "FALLIBLE", "Chaos"]


#: Calls that fail in the chaos phase (the others never raise with a real broker either:
#: consume, poll and flush report problems in other ways).
FALLIBLE = frozenset(
    {
        "kafka.consumer",
        "kafka.producer",
        "kafka.partition_counts",
        "kafka.create_topics",
        "kafka.create_partitions",
        "kafka.topic_configs",
        "kafka.describe_topics",
        "kafka.read_log",
        "kafka.append",
        "consumer.committed",
        "consumer.commit",
        "consumer.watermarks",
        "producer.begin",
        "producer.send_offsets",
        "producer.commit",
        "producer.abort",
    }
)
#: Calls whose failure may come after their write landed (a timeout).
AMBIGUOUS = frozenset({"kafka.append", "consumer.commit", "producer.commit"})


class Chaos:
    """The faults of a world's broker calls: every call is a switch point, and while the
    chaos phase lasts a call may fail."""

    def __init__(
        self, scheduler: Scheduler, rng: random.Random, fail_rate: float, slow_rate: float
    ) -> None:
        self.scheduler = scheduler
        self.rng = rng
        self.fail_rate = fail_rate
        self.slow_rate = slow_rate
        self.failures = 0
        self.slow = 0
        #: the chaos phase is on (faults stop when it ends)
        self.active = True
        #: the broker is unreachable until this simulated time
        self.outage_until = 0.0
        #: processes cut off from the broker until a simulated time (a network partition)
        self.isolated_until: dict[str, float] = {}
        #: (process, topic) whose fetches get nothing until a simulated time
        self.starved_until: dict[tuple[str, str], float] = {}
        #: called when one of these processes next queues a record (a pause there)
        self.pause_in_produce: tuple[Callable[[], None], frozenset[str]] | None = None
        #: (process, topic) whose next fetch of topic is cut short (when it has more than one
        #: record), then starved for so many seconds
        self.cut_next: dict[tuple[str, str], float] = {}
        #: process -> (until when, shortest, longest delay): its reads (``kafka.read_log``,
        #: ``kafka.partition_counts``) begun before that simulated time reply so late
        self.late_until: dict[str, tuple[float, float, float]] = {}
        self.outages = 0

    def before(self, operation: str) -> str | None:
        """Switch, then maybe fail ``operation`` (before or after its write)."""
        scheduler = self.scheduler
        if operation == "producer.produce" and self.pause_in_produce is not None:
            current = scheduler.current
            process = "" if current is None else current.name.split("/")[0]
            pause, processes = self.pause_in_produce
            if process in processes:
                self.pause_in_produce = None
                pause()  # between the placement and the queueing: then others run first
        scheduler.switch()
        if scheduler.current is None or not self.active or operation not in FALLIBLE:
            return None
        if scheduler.now < self.outage_until:
            raise KafkaIOError(f"simulated outage: {operation} failed (broker unreachable)")
        process = scheduler.current.name.split("/")[0]
        if scheduler.now < self.isolated_until.get(process, 0.0):
            raise KafkaIOError(f"simulated partition: {operation} failed (broker unreachable)")
        if self.fail_rate and self.rng.random() < self.fail_rate:
            self.failures += 1
            if operation in AMBIGUOUS and self.rng.random() < 0.5:
                return "after"
            raise KafkaIOError(f"simulated failure of {operation}")
        return None

    def fetch(self, wanted: int) -> int:
        """None while the caller is cut off from the broker; at the slow rate a random part
        (a fetch response cut short: the rest comes with later fetches)."""
        scheduler = self.scheduler
        if scheduler.current is None or not self.active:
            return wanted
        process = scheduler.current.name.split("/")[0]
        now = scheduler.now
        if now < self.outage_until or now < self.isolated_until.get(process, 0.0):
            return 0
        if wanted > 1 and self.slow_rate and self.rng.random() < self.slow_rate:
            return self.rng.randint(1, wanted - 1)
        return wanted

    def unreachable(self, process: str) -> bool:
        """Whether ``process`` (``name#incarnation``, or a party's name) cannot reach the
        broker now."""
        if not self.active:
            return False
        now = self.scheduler.now
        name = process.split("#", maxsplit=1)[0]
        return now < self.outage_until or now < self.isolated_until.get(name, 0.0)

    def starved(self, topic: str) -> bool:
        """Whether the caller's fetches of ``topic`` get nothing now (``starve``)."""
        scheduler = self.scheduler
        if not self.starved_until or scheduler.current is None or not self.active:
            return False
        process = scheduler.current.name.split("/")[0]
        return scheduler.now < self.starved_until.get((process, topic), 0.0)

    def starve(self, process: str, topic: str, seconds: float) -> None:
        """``process``'s fetches of ``topic`` get nothing for ``seconds`` (the partition's
        leader is unavailable to it); its other calls work."""
        self.outages += 1
        self.starved_until[(process, topic)] = self.scheduler.now + seconds

    def isolate(self, processes: list[str], seconds: float) -> None:
        """``processes`` (and their threads) cannot reach the broker for ``seconds``."""
        self.outages += 1
        for process in processes:
            self.isolated_until[process] = self.scheduler.now + seconds

    def late_replies(
        self, processes: list[str], seconds: float, delays: tuple[float, float]
    ) -> None:
        """For ``seconds`` from now, reads that ``processes`` begin reply ``delays`` late (a
        reply as of when it was read)."""
        for process in processes:
            self.late_until[process] = (self.scheduler.now + seconds, *delays)

    def outage(self, seconds: float) -> None:
        """The broker is unreachable for ``seconds`` from now."""
        self.outages += 1
        self.outage_until = self.scheduler.now + seconds

    def after(self, operation: str) -> None:
        """Maybe answer late: the reply (read before) arrives up to 4s later, or as
        ``late_replies`` asked."""
        current = self.scheduler.current
        if current is None or not self.active:
            return
        process = current.name.split("/")[0]
        until, shortest, longest = self.late_until.get(process, (0.0, 0.0, 0.0))
        if self.scheduler.now < until:
            self.slow += 1
            self.scheduler.sleep(self.rng.uniform(shortest, longest))
            return
        if self.slow_rate and self.rng.random() < self.slow_rate:
            self.slow += 1
            self.scheduler.sleep(self.rng.uniform(0.1, 4.0))

    def cut(self, topic: str, found: list[StoredRecord]) -> list[StoredRecord]:
        """``found``, or a part of it when the caller's fetch of ``topic`` was to be cut short
        (``cut_next``): then the caller's fetches of ``topic`` get nothing for a while."""
        scheduler = self.scheduler
        if scheduler.current is None or not self.active or not found:
            return found
        process = scheduler.current.name.split("/")[0]
        seconds = self.cut_next.pop((process, topic), None)  # only the next fetch
        if seconds is None or len(found) < 2:
            return found
        self.starve(process, topic, seconds)
        return found[: self.rng.randint(1, len(found) - 1)]
