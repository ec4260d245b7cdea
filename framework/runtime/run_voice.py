"""What a run of a processor says in the control log, and whether it may still speak.

Every record a run writes names it (its ``instance``), and it writes only while the log
names it as the processor's newest run (``check_newest``: else ``ProcessorReplacedError``;
readers ignore such records anyway). Before the run reads partitions it gained, it checks
that its state directory holds every handoff the log says is COMPLETE (``check_held``: else
``StaleDirectoryError``, and the next start replaces the directory). A receiver's stop is
written with where it happened (``stopped``), and a later run ends it once past that point
with no lag left (``resume_when_past``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from framework.coordination.control_log import ControlLog, ControlWatcher
from framework.errors import (
    ProcessorFencedError,
    ProcessorReplacedError,
    ProcessorStoppedError,
    SplitstateError,
)
from framework.runtime.completions import Completions, StaleDirectoryError
from framework.runtime.faults import maybe_crash
from rebalance import HandoffEvent
from rebalance.control import ControlState, Handoff, Scale, handoff_record
from rebalance.control_records import instance_record
from rebalance.control_stops import (
    CONTROL_FORMAT,
    Stop,
    format_record,
    resumed_record,
    stopped_record,
)
from rebalance.positions import Position
from statestore import ProcessorDatabase

__all__ = ["CatchUpProgress", "RunVoice", "record_run"]

# the processor's lines keep the loop's logger name (they were written there)
log = logging.getLogger("framework.runtime.loop")


def record_run(control: ControlLog, watcher: ControlWatcher, processor: int, instance: str) -> None:
    """Record run ``instance`` of ``processor`` in the control log (after the records that
    switch an older log to this format), and read the log to there: it is the processor's
    newest run from then on (under exactly-once its producer fenced the earlier ones' already),
    and it acts knowing so."""
    upgrade = [format_record(CONTROL_FORMAT)] if watcher.state.format < CONTROL_FORMAT else []
    control.append(*upgrade, instance_record(processor, instance))
    watcher.catch_up(watcher.end_offset())


class CatchUpProgress(Protocol):
    """What ``resume_when_past`` reads of a running catch-up."""

    positions: dict[Position, int]

    @property
    def bootstrapping(self) -> bool: ...

    def lag(self) -> dict[Position, int]: ...


class RunVoice:
    """Run ``instance`` of processor ``processor``: its writes to ``control``, checked
    against what ``watcher`` read (and ``completions``, what ``database`` holds)."""

    def __init__(
        self,
        processor: int,
        instance: str,
        *,
        watcher: ControlWatcher,
        control: ControlLog,
        database: ProcessorDatabase,
        completions: Completions,
        state_dir: Path,
    ) -> None:
        self.processor = processor
        self.instance = instance
        self._watcher = watcher
        self._control = control
        self._database = database
        self._completions = completions
        self._checked: object = None  # the control state ``check_held`` last checked
        self._resumed: set[int] = set()  # generations this run resumed
        #: ``(generation, source, target, event)`` of the handoff events this run wrote
        self._sent: set[tuple[int, int, int, str]] = set()
        #: the handoffs ``(generation, source, target)`` whose RELEASE this run logged reading
        self._heard: set[tuple[int, int, int]] = set()
        self._state_dir = state_dir

    def check_newest(self) -> None:
        """Raise ``ProcessorReplacedError`` when the log names a newer run of this processor
        (what this run would write is ignored; it stops instead)."""
        newest = self._watcher.state.instances.get(self.processor)
        if newest != self.instance:
            raise ProcessorReplacedError(self.processor, self.instance, newest)

    def append(self, record: Mapping[str, Any]) -> int:
        """Write ``record`` (made with this run's instance), if this run is the newest;
        returns the offset after it (0: the delivery report gave none)."""
        self.check_newest()
        return self._control.append(record)

    def sent(self, key: tuple[int, int, int, str]) -> bool:
        """Whether this run wrote the handoff event ``(generation, source, target, event)``."""
        return key in self._sent

    def unsend(self, key: tuple[int, int, int, str]) -> None:
        """Let ``send`` write that event again (a RELEASE the log refused)."""
        self._sent.discard(key)

    def send(
        self,
        generation: int,
        handoff: Handoff,
        event: HandoffEvent,
        offsets: dict[Position, int] | None = None,
        *,
        request: str | None = None,
    ) -> int | None:
        """Write ``event`` of ``handoff`` in ``generation`` (once per run; ``request``: an id
        to find it by); returns the offset after it (``None``: written already)."""
        key = (generation, handoff.source, handoff.target, event.value)
        if key in self._sent:
            return None
        self._sent.add(key)
        maybe_crash(f"before:{event.value}", self.processor, self._state_dir)
        end = self.append(
            handoff_record(
                generation,
                handoff.source,
                handoff.target,
                event,
                offsets,
                request=request,
                instance=self.instance,
            )
        )
        maybe_crash(f"after:{event.value}", self.processor, self._state_dir)
        log.info(
            "processor %d: generation %d handoff %d -> %d: %s",
            self.processor,
            generation,
            handoff.source,
            handoff.target,
            event.value,
        )
        return end

    def heard_release(self, generation: int, handoff: Handoff) -> None:
        """Log, once per run and handoff, that this receiver read its RELEASE (a mark of the
        handoff pause, which ``bench/scale.py`` splits into its parts)."""
        key = (generation, handoff.source, handoff.target)
        if key in self._heard:
            return
        self._heard.add(key)
        log.info(
            "processor %d: generation %d handoff %d -> %d: read RELEASE of %s at %s",
            self.processor,
            generation,
            handoff.source,
            handoff.target,
            sorted(handoff.partitions),
            dict(handoff.released),
        )

    def check_held(self, state: ControlState) -> None:
        """Raise ``StaleDirectoryError`` when the log says a handoff into this processor is
        COMPLETE and this directory did not complete it (the next start replaces the
        directory: ``framework.runtime.state_dir``); tidy ended catch-ups."""
        if state is self._checked:
            return
        self._checked = state
        missed = self._completions.missed(state)
        if missed:
            generation, handoff = missed[0]
            raise StaleDirectoryError(
                f"processor {self.processor}: another run of it completed handoff "
                f"{handoff.source} -> {handoff.target} of generation {generation} while this "
                "run started; this run exits, and the next start replaces its state "
                "directory as a lost one. Fix: restart it (the supervisor does)."
            )
        self._completions.tidy(state)

    def stopped(self, generation: int, error: ProcessorStoppedError, during: str) -> None:
        """Say that this receiver stopped in ``generation``, why and where (the record, or
        the whole processor; ``during``: in its catch-up, or in its own processing)."""
        self.append(
            stopped_record(
                generation,
                self.processor,
                str(error),
                at=error.at,
                instance=self.instance,
                during=during,
            )
        )

    def catch_up_stopped(self, generation: int, error: ProcessorStoppedError) -> None:
        """This receiver's catch-up for ``generation`` stopped (not its own partitions): say
        why in the log and in the control log (for ``status``)."""
        how = (
            "it resumes by itself once it has read past that record"
            if error.at is not None
            else "then resume the scale with `splitstate scale MODULE:APP --resume`"
        )
        log.error(
            "processor %d stopped catching up for generation %d: %s Abandon the scale with "
            "`splitstate scale MODULE:APP --abort`, or fix the cause and restart processor %d "
            "(%s).",
            self.processor,
            generation,
            error,
            self.processor,
            how,
        )
        self.stopped(generation, error, "catch-up")

    def processor_stopped(self, scale: Scale | None, error: ProcessorStoppedError) -> None:
        """The whole processor stops: as a receiver of ``scale`` (the scale in progress) say
        why in the control log, unless fenced (the run that fenced it speaks for it now); a
        failure to say so is logged."""
        if scale is None or not scale.incoming(self.processor):
            return
        if isinstance(error, ProcessorFencedError):
            return
        try:
            self.stopped(scale.generation, error, "processing")
        except SplitstateError as failure:
            log.warning("could not record the stop in the control log: %s", failure)

    def resume_when_past(self, scale: Scale, catchup: CatchUpProgress) -> None:
        """A stop of this receiver at a record, written by an earlier run: write ``resumed``
        once this run has read past that record and has no lag on any open incoming handoff
        (then its sources may release again)."""
        stop = scale.stopped.get(self.processor)
        if stop is None or stop.at is None or stop.instance == self.instance:
            return
        if scale.generation in self._resumed or not self._past(stop, catchup):
            return
        if catchup.bootstrapping or any(catchup.lag().values()):
            return
        self.append(resumed_record(scale.generation, self.processor, stop, instance=self.instance))
        self._resumed.add(scale.generation)
        log.info(
            "processor %d: read past the record it had stopped %s, with no lag left: "
            "generation %d goes on",
            self.processor,
            stop.where,
            scale.generation,
        )

    def _past(self, stop: Stop, catchup: CatchUpProgress) -> bool:
        """Whether this run has read past the record ``stop`` names: in its catch-up, or,
        for a stop of its own processing, in its state (a partition of its own can be an
        ancestor its catch-up reads only up to a growth threshold)."""
        assert stop.at is not None
        topic, partition, offset = stop.at
        position = (topic, partition)
        if stop.during == "catch-up" and position in catchup.positions:
            return catchup.positions[position] > offset
        return (self._database.offsets().get(position) or 0) > offset
