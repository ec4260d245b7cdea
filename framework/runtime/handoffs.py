"""The processor's parts in a scale (the catch-up protocol, KIP-287), between batches.

As an old owner it releases a READY handoff's partitions at a batch boundary, committing
their final offsets F and writing RELEASE; once the log shows the handoff RELEASED it forgets
the moved keys in steps between batches (``MovedKeys``). As a receiver it
catches up (``CatchUp``, optionally after a Spark bootstrap), declares CAUGHT_UP when
T1 - T2 is small, finishes to F after RELEASE, and takes the partitions over from F
(COMPLETE). Every event it writes is recorded once per run (``Session.sent``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from confluent_kafka import TopicPartition

from framework.app import App
from framework.bootstrap.child_process import BootstrapRun
from framework.config import AppConfig
from framework.processing import ProcessorStoppedError
from framework.runtime.catchup import BootstrapStarter, CatchUp
from framework.runtime.faults import maybe_crash
from framework.runtime.session import Session
from rebalance import HandoffEvent, HandoffPhase, parent
from rebalance.control import Handoff, Scale, handoff_record
from rebalance.positions import OffsetRange, Position

__all__ = ["HandoffProtocol"]

log = logging.getLogger("framework.runtime.loop")


class HandoffProtocol:
    """The scale-related steps of ``ProcessorRuntime`` (a mixin over its session)."""

    app: App
    config: AppConfig
    processor_id: int
    # provided by ProcessorRuntime: read exactly these partitions / drop the gated ones
    _assign: Callable[[Session, set[Position]], None]
    _ungated: Callable[[Session, set[Position]], set[Position]]

    def _coordinate(self, session: Session) -> None:
        """Act on the control state: ownership, joining a scale, releasing, completing."""
        state = session.watcher.state
        self._assign(session, self._ungated(session, session.owned_now(self.processor_id)))
        session.moved.sync(state)
        scale = state.scaling
        incoming = (
            []
            if scale is None
            else [
                h for h in scale.incoming(self.processor_id) if h.phase is not HandoffPhase.COMPLETE
            ]
        )
        if scale is None or not incoming or scale.generation in session.failed:
            if session.catchup is not None:
                session.catchup.close()
                session.catchup = None
            return
        try:
            self._join(session, scale, incoming)
        except ProcessorStoppedError as error:
            self._stop_catch_up(session, scale, error)

    def _join(self, session: Session, scale: Scale, incoming: list[Handoff]) -> None:
        """Start (or follow) this receiver's catch-up for ``scale``."""
        state = session.watcher.state
        if session.catchup is None or session.catchup.generation != scale.generation:
            if session.catchup is not None:
                session.catchup.close()
            session.moved.finish()  # an older purge must not delete keys rebuilt from now on
            assert state.app is not None
            session.catchup = CatchUp(
                self.processor_id,
                state.app.initial_processors,
                scale,
                client=self.config.kafka.client_settings(),
                group_id=self.config.app_id,
                database=session.database,
                records=session.records,
                histories={name: e.history for name, e in session.layout.inputs.items()},
                bootstrap=self._bootstrap_starter(scale)
                if self.config.bootstrap == "spark"
                else None,
            )
        for handoff in incoming:
            if handoff.phase is HandoffPhase.PLANNED:
                self._send(session, scale.generation, handoff, HandoffEvent.START_CATCH_UP)
            elif handoff.phase is HandoffPhase.RELEASED:
                session.catchup.release(handoff)

    def _bootstrap_starter(self, scale: Scale) -> BootstrapStarter:
        def start(
            ranges: dict[Position, OffsetRange], covers: list[Position], sources: frozenset[int]
        ) -> BootstrapRun:
            return BootstrapRun.start(
                self.app,
                processor=self.processor_id,
                generation=scale.generation,
                processors=scale.new_processors,
                gained_from=(scale.old_processors, sources),
                ranges=ranges,
                covers=covers,
            )

        return start

    def _stop_catch_up(self, session: Session, scale: Scale, error: ProcessorStoppedError) -> None:
        """The catch-up cannot go on: stop it (not the processor's own partitions), say why in
        the control log for ``status``, and wait for a fix and a restart, or an abort."""
        if session.catchup is not None:
            session.catchup.close()
            session.catchup = None
        session.failed[scale.generation] = str(error)
        log.error(
            "processor %d stopped catching up for generation %d: %s Abandon the scale with "
            "`splitstate scale MODULE:APP --abort`, or fix the cause and restart processor %d.",
            self.processor_id,
            scale.generation,
            error,
            self.processor_id,
        )
        session.control.append(
            {
                "type": "stopped",
                "generation": scale.generation,
                "processor": self.processor_id,
                "reason": str(error),
            }
        )

    def _catch_up(self, session: Session) -> None:
        scale = session.watcher.state.scaling
        try:
            self._follow_catch_up(session)
        except ProcessorStoppedError as error:
            if scale is None:
                raise
            self._stop_catch_up(session, scale, error)

    def _follow_catch_up(self, session: Session) -> None:
        catchup = session.catchup
        assert catchup is not None
        catchup.step(self.config.scaling.catchup_batch)
        scale = session.watcher.state.scaling
        if scale is None:
            return
        for handoff in scale.incoming(self.processor_id):
            if handoff.phase is HandoffPhase.CATCHING_UP and catchup.caught_up(
                handoff, self.config.scaling.ready_lag
            ):
                self._send(session, scale.generation, handoff, HandoffEvent.CAUGHT_UP)
            elif (
                handoff.phase is HandoffPhase.RELEASED
                and (scale.generation, handoff.source, handoff.target, "COMPLETE")
                not in session.sent
                and catchup.finished(handoff)
            ):
                catchup.complete(handoff)
                self._send(session, scale.generation, handoff, HandoffEvent.COMPLETE)
                elapsed = max(time.monotonic() - catchup.started, 1e-9)
                log.info(
                    "processor %d took over %s from processor %d at %s; replayed %d records "
                    "in %.1fs (%.0f/s); %d records folded by Spark before",
                    self.processor_id,
                    sorted(handoff.partitions),
                    handoff.source,
                    dict(handoff.released),
                    catchup.replayed,
                    elapsed,
                    catchup.replayed / elapsed,
                    catchup.bootstrapped,
                )

    def _release_ready(self, session: Session) -> None:
        """At a batch boundary: give READY handoffs' partitions away at their offsets F."""
        scale = session.watcher.state.scaling
        if scale is None:
            return
        if scale.stopped:
            # a receiver of this scale stopped: releasing now would make the scale impossible
            # to abort while it may never finish; wait until it moves again or an abort
            note = f"generation {scale.generation}: releases wait for {sorted(scale.stopped)}"
            if note not in session.notes:
                session.notes.add(note)
                log.warning("processor %d: %s", self.processor_id, note)
            return
        for handoff in scale.outgoing(self.processor_id):
            if handoff.phase is not HandoffPhase.READY:
                continue
            key = (scale.generation, handoff.source, handoff.target, HandoffEvent.RELEASE.value)
            if key in session.sent:
                continue
            moved = set(handoff.partitions)
            final = self._final_offsets(session, moved)
            if final is None:
                continue  # still rebuilding state the group already committed: not yet
            session.released.setdefault(scale.generation, set()).update(moved)
            self._assign(session, session.owned - moved)
            session.consumer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in final.items()],
                asynchronous=False,
            )
            self._send(session, scale.generation, handoff, HandoffEvent.RELEASE, final)
            log.info(
                "processor %d released %s to processor %d at %s",
                self.processor_id,
                sorted(moved),
                handoff.target,
                final,
            )

    def _final_offsets(self, session: Session, moved: set[Position]) -> dict[Position, int] | None:
        """F for each moved partition: where this processor's state ends, and never below
        the group's committed offset (T1, which the receiver may already have rebuilt to).

        ``None`` while the state is behind the group's offset (a lost or rolled-back state
        directory being rebuilt in restore mode): releasing then would hand over at an F
        below records the receiver already applied, so the release waits. Also ``None`` while
        the state has not passed the growth threshold of a child of a moved partition: below
        it the partition holds records of the child's keys, which the new owner of the
        partition neither owns nor has the state of.
        """
        offsets = session.database.offsets()
        committed = {
            (tp.topic, tp.partition): tp.offset
            for tp in session.consumer.committed(
                [TopicPartition(t, p) for t, p in sorted(moved)], timeout=30
            )
            if tp.offset >= 0
        }
        final = {}
        for position in sorted(moved):
            state = offsets.get(position)
            group = committed.get(position)
            if group is not None and (state is None or state < group):
                note = f"release of {position} waits for restore to {group}"
                if note not in session.notes:
                    session.notes.add(note)
                    log.info(
                        "processor %d: %s[%d] is rebuilt up to %s of the group's committed %d; "
                        "it releases the partition once restored",
                        self.processor_id,
                        *position,
                        state,
                        group,
                    )
                return None
            if state is None:
                low, _high = session.consumer.get_watermark_offsets(
                    TopicPartition(*position), timeout=30
                )
                state = low
            fence = _children_fence(session, position)
            if state < fence:
                note = f"release of {position} waits for threshold {fence}"
                if note not in session.notes:
                    session.notes.add(note)
                    log.info(
                        "processor %d: %s[%d] is processed up to %d; it releases the partition "
                        "once past %d, the growth threshold of a partition split from it",
                        self.processor_id,
                        *position,
                        state,
                        fence,
                    )
                return None
            final[position] = state
        return final

    def _send(
        self,
        session: Session,
        generation: int,
        handoff: Handoff,
        event: HandoffEvent,
        offsets: dict[Position, int] | None = None,
    ) -> None:
        key = (generation, handoff.source, handoff.target, event.value)
        if key in session.sent:
            return
        session.sent.add(key)
        state_dir = self.config.app_state_dir
        maybe_crash(f"before:{event.value}", self.processor_id, state_dir)
        session.control.append(
            handoff_record(generation, handoff.source, handoff.target, event, offsets)
        )
        maybe_crash(f"after:{event.value}", self.processor_id, state_dir)
        log.info(
            "processor %d: generation %d handoff %d -> %d: %s",
            self.processor_id,
            generation,
            handoff.source,
            handoff.target,
            event.value,
        )


def _children_fence(session: Session, position: Position) -> int:
    """The largest growth threshold of a partition split from ``position`` (0 if none)."""
    topic, partition = position
    entry = session.layout.inputs.get(topic)
    if entry is None:
        return 0
    history = entry.history
    return max(
        (
            offset
            for child, offset in history.thresholds.items()
            if parent(child, history.initial_partitions) == partition
        ),
        default=0,
    )
