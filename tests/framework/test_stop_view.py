"""What ``status`` says of a stopped receiver: where it stopped, what ends the stop, and
whether an abort would be refused."""

from __future__ import annotations

from framework.coordination.scaling import _check_resumable
from framework.ops.stops import stopped_receivers
from rebalance import HandoffEvent
from rebalance.control import handoff_record
from rebalance.control_records import instance_record
from rebalance.control_stops import format_record, stopped_record
from tests.rebalance.test_control import scale, started


def test_a_stop_at_a_record_resumes_by_itself_and_the_scale_can_still_be_aborted() -> None:
    state = scale(started(2).apply(format_record(2)), 1, 3).apply(instance_record(2, "a"))
    state = state.apply(stopped_record(1, 2, "a bug", at=("words", 2, 40), instance="a"))
    [receiver] = stopped_receivers(state.scaling, state.instances)
    text = "\n".join(receiver.lines())
    assert "STOPPED catching up at words[2]@40: a bug" in text
    assert "resumes by itself once it has read past that record" in text
    assert "--abort" in text and "cannot be aborted" not in text
    assert not receiver.restarted


def test_a_whole_processor_stop_needs_resume_and_a_release_makes_an_abort_impossible() -> None:
    # 2 -> 4: processor 2 receives from 0, processor 3 from 1; 1 -> 3 released first
    state = scale(started(2).apply(format_record(2)), 1, 4)
    for j in (0, 1, 2, 3):
        state = state.apply(instance_record(j, f"run-{j}"))
    for event in (HandoffEvent.START_CATCH_UP, HandoffEvent.CAUGHT_UP):
        for source, target in ((0, 2), (1, 3)):
            state = state.apply(handoff_record(1, source, target, event, instance=f"run-{target}"))
    offsets = {("words", 3): 9, ("words", 7): 9}
    state = state.apply(
        handoff_record(1, 1, 3, HandoffEvent.RELEASE, offsets, request="r", instance="run-1")
    )
    state = state.apply(stopped_record(1, 2, "history lost", at=None, instance="run-2"))
    state = state.apply(instance_record(2, "run-2b"))  # restarted
    [receiver] = stopped_receivers(state.scaling, state.instances)
    text = "\n".join(receiver.lines())
    assert "STOPPED catching up as a whole: history lost" in text and "--resume" in text
    assert receiver.restarted and "refused until" not in text
    assert "cannot be aborted: 1->3 released" in text and "--abort" not in text


def test_status_and_resume_agree_on_a_stop_written_before_stops_named_their_run() -> None:
    """A format-1 stop (no run named): status does not claim --resume is refused, and
    --resume's check accepts it (review finding: they disagreed)."""
    state = scale(started(2), 1, 3)  # a format-1 log: the previous splitstate wrote it
    state = state.apply({"type": "stopped", "generation": 1, "processor": 2, "reason": "x"})
    state = state.apply(format_record(2)).apply(instance_record(2, "new-run"))
    assert state.scaling is not None
    [receiver] = stopped_receivers(state.scaling, state.instances)
    assert receiver.restarted is None
    assert not any("refused until" in line for line in receiver.lines())
    stop = state.scaling.stopped[2]
    _check_resumable(2, stop, state.scaling, newest="new-run", report=None, now=0.0)
