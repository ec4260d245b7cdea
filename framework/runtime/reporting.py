"""A running processor's progress report to Kafka (``framework.coordination.progress_reports``).

Between batches, ``ProgressReporter.tick`` writes the processor's report when one is due:
every ``_SCALE_SECONDS`` while a scale is in progress (a receiver's T2, its bulk build's
progress), every ``HEARTBEAT_SECONDS`` otherwise; each report says which (``every``), so
``status`` knows a processor that was killed by its silence. Reports never stop or slow
processing: one is handed to a producer of its own and never waited for (its delivery is seen
at a later tick); while one is unconfirmed no other is made; a report that fails (Kafka
unreachable, the topic gone, anything else) is logged once a minute at most and the next one
is tried at its due time. As the run closes, a last report says the processor stopped
(waited for at most ``_CLOSE_SECONDS``).
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import asdict, replace

from framework.app import App
from framework.bootstrap.child_process import bootstrap_directory, read_bootstrap_progress
from framework.coordination.control_log import ControlWatcher
from framework.coordination.progress_reports import (
    HEARTBEAT_SECONDS,
    ProcessorReport,
    pid_space,
    report_key,
)
from framework.growth.placement import UNFENCED_SCOPE, UNPLACED_SCOPE
from framework.kafka import DeliveryError, Kafka, KafkaProducer, Message
from framework.runtime.crashes import skipped_records
from framework.snapshots.transfer_progress import read_transfer_progress, transfer_directory
from statestore import ProcessorDatabase

__all__ = ["ProgressReporter"]

log = logging.getLogger(__name__)

#: how often a report is written while a scale is in progress
_SCALE_SECONDS = 2.0
_WARN_EVERY_SECONDS = 60.0
#: how long a report may take to be delivered before it counts as failed
_DELIVERY_TIMEOUT_MS = 10_000
#: how long the run's end waits for its last report
_CLOSE_SECONDS = 2.0
#: skipped records a report lists at most (the newest; all are in the processor's state)
_SKIPPED_SHOWN = 50


class ProgressReporter:
    """Writes processor ``processor``'s report to the app's progress topic when due."""

    def __init__(
        self,
        app: App,
        processor: int,
        *,
        kafka: Kafka,
        database: ProcessorDatabase,
        watcher: ControlWatcher,
    ) -> None:
        self._app = app
        self._config = app.config
        self._processor = processor
        self._kafka = kafka
        self._database = database
        self._watcher = watcher
        self._clock = kafka.clock
        self._host = socket.gethostname()
        self._pid_space = pid_space()
        self._due = float("-inf")
        self._written = float("-inf")
        self._warned = float("-inf")
        self._last: ProcessorReport | None = None
        self._producer: KafkaProducer | None = None
        self._pending = False  # a report handed to the producer, not yet delivered

    def tick(self) -> None:
        """Write a report if one is due (cheap when none is); never raises."""
        try:
            self._tick()
        except Exception as error:  # a report must never stop processing
            self._warn(error)
            self._drop_producer()  # a producer that failed is made anew for the next one

    def _tick(self) -> None:
        if self._producer is not None:
            self._producer.poll(0)  # delivery of the report before (no wait)
        now = self._clock.monotonic()
        if now < self._due:
            return
        scaling = self._watcher.state.scaling is not None
        self._due = now + (_SCALE_SECONDS if scaling else HEARTBEAT_SECONDS)
        if self._pending:
            return  # the one before is still on its way: this one waits its next turn
        report = self.report()
        if not scaling and report.same_news(self._last) and now - self._written < HEARTBEAT_SECONDS:
            return  # (during a scale each is written: the report promised one in 2 s)
        self._send(report)
        self._last, self._written = report, now

    def _send(self, report: ProcessorReport) -> None:
        if self._producer is None:
            self._producer = self._kafka.producer(
                linger_ms=0, delivery_timeout_ms=_DELIVERY_TIMEOUT_MS
            )
        self._pending = True
        try:
            self._producer.produce(
                self._config.progress_topic,
                report.encode(),
                report_key(self._processor),
                0,
                on_delivery=self._delivered,
            )
        except BaseException:
            self._pending = False
            self._last = None  # what it said is written again next time
            raise

    def _delivered(self, error: DeliveryError | None, _message: Message) -> None:
        self._pending = False
        if error is not None:
            self._last = None
            self._warn(error)

    def _warn(self, error: object) -> None:
        now = self._clock.monotonic()
        if now - self._warned >= _WARN_EVERY_SECONDS:
            self._warned = now
            log.warning(
                "processor %d could not write its progress report (`splitstate status` on "
                "other hosts shows less meanwhile; processing goes on): %s",
                self._processor,
                error,
            )

    def close(self) -> None:
        """Write a last report saying the processor stopped (waiting a moment at most), and
        let go of the producer."""
        try:
            if not self._pending:
                self._send(replace(self.report(), stopped=True))
            if self._producer is not None:
                self._producer.flush(_CLOSE_SECONDS)
        except Exception as error:  # the run ends anyway
            self._warn(error)
        finally:
            self._drop_producer()

    def _drop_producer(self) -> None:
        producer, self._producer = self._producer, None
        self._pending = False
        if producer is not None:
            try:
                producer.close()
            except Exception as error:  # already failed: nothing more to do with it
                log.debug("closing the progress reports' producer: %s", error)

    def report(self) -> ProcessorReport:
        """The processor's report now."""
        database = self._database
        state = self._watcher.state
        generation = None
        catch_up: dict[tuple[str, int], int] = {}
        bootstrap = transfer = None
        last = state.scale  # the newest scale, in progress or ended (its T2 then stays F)
        if last is not None and any(h.target == self._processor for h in last.handoffs.values()):
            generation = last.generation
            catch_up = database.progress(f"catchup-{generation}")
            if last.ended:  # the catch-up's progress is deleted then: T2 is each F
                incoming = last.incoming(self._processor)
                catch_up = {p: f for h in incoming for p, f in h.released.items()}
        if generation is not None and state.scaling is not None:
            found = read_bootstrap_progress(
                bootstrap_directory(self._app, self._processor, generation)
            )
            bootstrap = {**found, "generation": generation} if isinstance(found, dict) else None
            progress = read_transfer_progress(
                transfer_directory(self._config.app_state_dir, self._processor, generation)
            )
            transfer = None if progress is None else {**asdict(progress), "generation": generation}
        skipped = sorted(skipped_records(database), key=lambda s: s.at)[-_SKIPPED_SHOWN:]
        return ProcessorReport(
            self._processor,
            self._host,
            os.getpid(),
            self._clock.time(),
            database.size_bytes(),
            generation,
            catch_up,
            bootstrap,
            transfer,
            database.progress(UNFENCED_SCOPE),
            [(s.topic, s.partition, s.offset, s.crashes, s.at) for s in skipped],
            every=_SCALE_SECONDS if state.scaling is not None else HEARTBEAT_SECONDS,
            pid_space=self._pid_space,
            unplaced=database.progress(UNPLACED_SCOPE),
        )
