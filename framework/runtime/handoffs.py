"""The processor's parts in a scale (the catch-up protocol, KIP-287), between batches.

The loop owns one ``HandoffCoordinator`` per run and asks it, between batches; the
coordinator answers from the control log and never reaches into the loop:

- ``owned(layout)``: the partitions the processor should read now;
- ``follow(layout)``: after the control state changed, act on it: register the purges of
  keys given away (``MovedKeys``), start, follow or drop this receiver's catch-up;
- ``releases(layout)`` then ``release(r)``: as an old owner, the READY handoffs to give away
  at a batch boundary, each with its final offsets F; the loop stops reading their
  partitions, then ``release`` commits F to the group and writes RELEASE;
- ``catch_up()``: as a receiver, one step of its catch-up (``CatchUp``, optionally after a
  Spark bootstrap): CAUGHT_UP when T1 - T2 is small, COMPLETE once finished to F after
  RELEASE (the partitions are then its own: ``owned`` says so);
- ``forgetting``, ``forget_step()``/``forget_all()``: delete moved keys' state in steps;
- ``report_stop(error)``: a receiver that stops says why in the control log.

A catch-up that cannot go on stops (the processor's own partitions keep flowing) and says why
and where in the control log; a later run resumes it once past that point. What the run
writes, and the checks before it writes, are ``RunVoice``'s. Every event is written once per
run, but a RELEASE the log refused (its receiver had stopped first) may be written again.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from framework.app import App
from framework.coordination.control_log import ControlLog, ControlWatcher
from framework.coordination.layout import AppLayout
from framework.kafka import Kafka, KafkaConsumer, TransactionalProducer
from framework.processing import (
    ProcessorFencedError,
    ProcessorStoppedError,
    RecordProcessor,
)
from framework.runtime.bulk_starts import start_catch_up
from framework.runtime.catchup import CatchUp
from framework.runtime.catchup_apply import took_over
from framework.runtime.completions import Completions
from framework.runtime.final_offsets import final_offsets
from framework.runtime.moved_keys import MovedKeys
from framework.runtime.run_voice import RunVoice
from framework.runtime.transactions import commit_offsets
from rebalance import HandoffEvent, HandoffPhase
from rebalance.control import Handoff, Scale
from rebalance.positions import Position
from statestore import ProcessorDatabase

__all__ = ["HandoffCoordinator", "Release"]

_RELEASING = (HandoffPhase.READY, HandoffPhase.RELEASED)  # RELEASE awaited, or read to F
# the processor's lines keep the loop's logger name (they were written there)
log = logging.getLogger("framework.runtime.loop")


@dataclass(frozen=True)
class Release:
    """A READY handoff to give away now: stop reading ``partitions``, then ``release`` it."""

    generation: int
    handoff: Handoff
    partitions: frozenset[Position]
    #: F, per moved partition
    offsets: dict[Position, int]


class HandoffCoordinator:
    """Processor ``processor``'s parts in the scales of ``app``'s control log."""

    def __init__(
        self,
        app: App,
        processor: int,
        *,
        watcher: ControlWatcher,
        control: ControlLog,
        database: ProcessorDatabase,
        records: RecordProcessor,
        kafka: Kafka,
        consumer: KafkaConsumer,
        instance: str,
        completions: Completions,
        transactions: TransactionalProducer | None = None,
    ) -> None:
        self.processor = processor
        #: this run's id in the control log (``instance`` record)
        self.instance = instance
        #: the run's transactional producer (exactly-once): F is committed through it
        self._transactions = transactions
        self._app = app
        self._config = app.config
        self._watcher = watcher
        self._control = control
        self._database = database
        self._records = records
        self._kafka = kafka
        self._consumer = consumer
        self._moved = MovedKeys(processor, database)
        #: what this run writes to the control log, and whether it may
        self._voice = RunVoice(
            processor,
            instance,
            watcher=watcher,
            control=control,
            database=database,
            completions=completions,
            state_dir=self._config.app_state_dir,
        )
        self._catchup: CatchUp | None = None
        #: (generation, source, target, event) of the handoff records written in this run
        #: per generation, the partitions this processor released (before the log shows it)
        self._released: dict[int, set[Position]] = {}
        #: per generation, the partitions this processor completed (before the log shows it)
        self._completed: dict[int, set[Position]] = {}
        #: request id of each RELEASE written in this run: (generation, source, target) -> id
        self._release_requests: dict[tuple[int, int, int], str] = {}
        #: generations whose catch-up stopped here, with the reason (until a restart or abort)
        self._failed: dict[int, str] = {}
        #: things already logged once (not to repeat a line every batch)
        self._notes: set[str] = set()

    # -- what the loop asks ----------------------------------------------------------------

    def owned(self, layout: AppLayout) -> set[Position]:
        """What the control log says this processor owns, less what it released itself
        (its own RELEASE may not have come back through the log yet)."""
        state = self._watcher.state
        self._voice.check_held(state)  # before any partition it gained is read
        counts = {name: entry.history.created for name, entry in layout.inputs.items()}
        owned = state.owned(self.processor, counts)  # the universe: deleted partitions too
        scale = state.scaling
        if scale is not None:
            self._take_back_refused(scale)
            owned -= self._released.get(scale.generation, set())
            # COMPLETE always applies after RELEASED (nothing else may follow): own at once
            owned |= self._completed.get(scale.generation, set())
        return owned

    @property
    def takeovers(self) -> int:
        """How many handoffs this processor completed in this run (its partitions are to be
        read from F from then on: ``owned`` says so before the log does)."""
        return sum(len(partitions) for partitions in self._completed.values())

    def _take_back_refused(self, scale: Scale) -> None:
        """Own again the partitions of a RELEASE the log ignored (its receiver had stopped
        first): that record can never apply, so they are this processor's until it releases
        them again."""
        for (generation, source, target), request in list(self._release_requests.items()):
            if generation != scale.generation or request not in scale.refused:
                continue
            del self._release_requests[(generation, source, target)]
            self._voice.unsend((generation, source, target, HandoffEvent.RELEASE.value))
            handoff = scale.handoffs[(source, target)]
            self._released.get(generation, set()).difference_update(handoff.partitions)
            log.warning(
                "processor %d keeps %s: processor %d stopped before its release",
                self.processor,
                sorted(handoff.partitions),
                target,
            )

    @property
    def catching_up(self) -> bool:
        """Whether this processor is catching up as a receiver (or bootstrapping for it)."""
        return self._catchup is not None

    @property
    def bootstrapping(self) -> bool:
        """Whether its catch-up waits for a bulk build (nothing is read meanwhile)."""
        return self._catchup is not None and self._catchup.bootstrapping

    @property
    def catchup(self) -> CatchUp | None:
        """The running catch-up (``None``: none), for the loop's log lines and metrics."""
        return self._catchup

    # -- receiver --------------------------------------------------------------------------

    def follow(self, layout: AppLayout) -> None:
        """Act on the control state (after the loop read what ``owned`` says): register
        purges, start or follow this receiver's catch-up, or drop one no longer wanted."""
        state = self._watcher.state
        self._voice.check_newest()
        self._moved.sync(state)
        scale = state.scaling
        incoming = (
            []
            if scale is None
            else [h for h in scale.incoming(self.processor) if h.phase is not HandoffPhase.COMPLETE]
        )
        if scale is None or not incoming or scale.generation in self._failed:
            if self._catchup is not None:
                self._catchup.close()
                self._catchup = None
            return
        try:
            self._join(layout, scale, incoming)
        except ProcessorFencedError:
            raise  # a replaced run writes nothing more
        except ProcessorStoppedError as error:
            self._stop_catch_up(scale, error)

    def _join(self, layout: AppLayout, scale: Scale, incoming: list[Handoff]) -> None:
        """Start (or follow) this receiver's catch-up for ``scale``."""
        state = self._watcher.state
        if self._catchup is None or self._catchup.generation != scale.generation:
            if self._catchup is not None:
                self._catchup.close()
            self._moved.finish()  # an older purge must not delete keys rebuilt from now on
            self._catchup = start_catch_up(
                self._app,
                self.processor,
                scale,
                state=state,
                layout=layout,
                kafka=self._kafka,
                database=self._database,
                records=self._records,
            )
        for handoff in incoming:
            if handoff.phase is HandoffPhase.PLANNED:
                self._voice.send(scale.generation, handoff, HandoffEvent.START_CATCH_UP)
            elif handoff.phase is HandoffPhase.RELEASED:
                self._catchup.release(handoff)
                self._voice.heard_release(scale.generation, handoff)

    def _stop_catch_up(self, scale: Scale, error: ProcessorStoppedError) -> None:
        """The catch-up cannot go on: stop it (not the processor's own partitions), say why in
        the control log for ``status``, and wait for a fix and a restart, or an abort."""
        if self._catchup is not None:
            self._catchup.close()
            self._catchup = None
        self._failed[scale.generation] = str(error)
        self._voice.catch_up_stopped(scale.generation, error)

    def catch_up(self) -> int:
        """One step of the running catch-up; CAUGHT_UP and COMPLETE when due. Returns how
        many records it took in order (applied, or passed over as not gained)."""
        scale = self._watcher.state.scaling
        try:
            return self._follow_catch_up()
        except ProcessorFencedError:
            raise  # a replaced run writes nothing more
        except ProcessorStoppedError as error:
            if scale is None:
                raise
            self._stop_catch_up(scale, error)
            return 0

    def _follow_catch_up(self) -> int:
        catchup = self._catchup
        assert catchup is not None
        scale = self._watcher.state.scaling
        incoming = [] if scale is None else scale.incoming(self.processor)
        # once caught up, RELEASE may come any moment: wait for records only briefly
        ready = any(h.phase in _RELEASING for h in incoming)
        read = catchup.step(self._config.scaling.catchup_batch, 0.01 if ready else 0.05)
        if scale is None:
            return read
        self._voice.resume_when_past(scale, catchup)
        for handoff in incoming:
            if handoff.phase is HandoffPhase.CATCHING_UP and catchup.caught_up(
                handoff, self._config.scaling.ready_lag
            ):
                self._voice.send(scale.generation, handoff, HandoffEvent.CAUGHT_UP)
            elif (
                handoff.phase is HandoffPhase.RELEASED
                and not self._voice.sent(
                    (scale.generation, handoff.source, handoff.target, "COMPLETE")
                )
                and catchup.finished(handoff)
            ):
                catchup.complete(handoff)
                end = self._voice.send(scale.generation, handoff, HandoffEvent.COMPLETE)
                if end is not None:  # owned before the log is read that far
                    self._watcher.remember_written(end)
                self._completed.setdefault(scale.generation, set()).update(handoff.partitions)
                seconds = self._kafka.clock.monotonic() - catchup.started
                what = (catchup.replayed, seconds, catchup.bootstrapped)
                bootstrap = self._config.bootstrap
                log.info("%s", took_over(self.processor, handoff, *what, bootstrap=bootstrap))
        return read

    # -- old owner -------------------------------------------------------------------------

    @property
    def release_due(self) -> bool:
        """Whether a handoff of this processor is READY (to release at this boundary)."""
        scale = self._watcher.state.scaling
        outgoing = [] if scale is None else scale.outgoing(self.processor)
        return any(h.phase is HandoffPhase.READY for h in outgoing)

    def releases(self, layout: AppLayout) -> Iterator[Release]:
        """At a batch boundary: the READY handoffs to give away now, each at its offsets F.

        Lazy: each is worked out when the loop asks for it, and the loop stops reading its
        partitions and calls ``release`` before asking for the next. Partitions yielded count
        as released from then on (``owned`` leaves them out).
        """
        scale = self._watcher.state.scaling
        if scale is None:
            return
        if scale.stopped:
            # a receiver of this scale stopped: releasing now would make the scale impossible
            # to abort while it may never finish; wait until it moves again or an abort
            note = f"generation {scale.generation}: releases wait for {sorted(scale.stopped)}"
            if note not in self._notes:
                self._notes.add(note)
                log.warning("processor %d: %s", self.processor, note)
            return
        for handoff in scale.outgoing(self.processor):
            if handoff.phase is not HandoffPhase.READY:
                continue
            key = (scale.generation, handoff.source, handoff.target, HandoffEvent.RELEASE.value)
            if self._voice.sent(key):
                continue
            moved = set(handoff.partitions)
            final = final_offsets(
                self.processor,
                moved,
                database=self._database,
                consumer=self._consumer,
                inputs=layout.inputs,
                notes=self._notes,
            )
            if final is None:
                continue  # still rebuilding state the group already committed: not yet
            self._released.setdefault(scale.generation, set()).update(moved)
            yield Release(scale.generation, handoff, frozenset(moved), final)

    def release(self, release: Release) -> None:
        """Note F in the state, commit F to the group, then write RELEASE (the loop no longer
        reads them); under exactly-once in a transaction, so that a fenced instance stops
        before either; a run the log says was replaced stops before either too.

        F is the state's offset already, unless the state had none there (nothing read: an
        empty partition, or one whose records retention deleted). Noted first, it is where
        this processor resumes if the partitions come back to it (a RELEASE the log refused,
        or a crash before RELEASE): the group's F is then no offset its state lacks, which
        would mean a rebuild from offset 0.
        """
        self._voice.check_newest()
        batch = self._database.begin()
        for (topic, partition), final in release.offsets.items():
            batch.set_offset(topic, partition, final)
        batch.commit()
        if self._transactions is None:
            self._consumer.commit(release.offsets)
        else:
            commit_offsets(self._transactions, self._consumer, release.offsets, self.processor)
        request = self._release_requests[
            (release.generation, release.handoff.source, release.handoff.target)
        ] = uuid.uuid4().hex  # found by its id if the log ignores it
        self._voice.send(
            release.generation,
            release.handoff,
            HandoffEvent.RELEASE,
            release.offsets,
            request=request,
        )
        what = f"{sorted(release.partitions)} to processor {release.handoff.target}"
        log.info("processor %d released %s at %s", self.processor, what, release.offsets)

    @property
    def forgetting(self) -> bool:
        """Whether keys given away are still to be forgotten (``forget_step``)."""
        return self._moved.pending

    def forget_step(self) -> None:
        """One bounded step of deleting the state of keys given away."""
        self._moved.step()

    def forget_all(self) -> None:
        """Delete the rest of the keys given away (before the processor stops for good)."""
        self._moved.finish()

    # -- both ------------------------------------------------------------------------------

    def report_stop(self, error: ProcessorStoppedError) -> None:
        """A receiver that stops during a scale says why in the control log (for
        ``status``; ``RunVoice.processor_stopped``)."""
        self._voice.processor_stopped(self._watcher.state.scaling, error)

    def close(self) -> None:
        """Close the running catch-up, if any."""
        if self._catchup is not None:
            self._catchup.close()
