"""A change of an app's input partition count (a growth or a shrink: `splitstate expand`)
holds the app's control log, so that no scale overlaps it.

Holding is a conditional append: ``acquire_growth`` writes a ``growth`` record with a random
request id, reads the log back, and goes ahead only if the state machine accepted *that*
record (it refuses one while a scale or another change is in progress). The record is a
``growth`` record whatever the direction: it names the topic and the new count. A rerun of
the same expand adopts the unfinished change of the same topic and count instead of writing
another. ``release_growth`` appends ``growth_done``; from then on scales are accepted again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from framework.coordination.control_log import ControlLog
from framework.growth.expand_checks import ExpandError
from rebalance.control import InputGrowth, Scale

__all__ = ["ExpandError", "acquire_growth", "release_growth"]


def acquire_growth(
    control: ControlLog,
    topic: str,
    partitions: int,
    needed: bool,
    report: Callable[[str], None],
    *,
    noun: str = "growth",
) -> tuple[InputGrowth | None, bool]:
    """Hold ``control`` for changing ``topic`` to ``partitions``: the hold to release later,
    and whether this call appended it (``False``: it resumes the hold of an earlier run, which
    may still be going on under it).

    ``needed``: whether the registry says there is anything to change or finish; when not,
    nothing is written unless an unfinished change of the topic must be released. Raises
    ``ExpandError`` when a scale or another change holds the log. ``noun``: ``"growth"`` or
    ``"shrink"``, for what it reports.
    """
    state = control.read()
    current = state.growth
    if current is not None and (current.topic, current.partitions) == (topic, partitions):
        report(f"resuming the {noun} of {topic} to {partitions} partitions held in {control.topic}")
        return current, False
    if not needed and (current is None or current.topic != topic):
        return None, False
    _refuse(control.topic, state.scaling, current)
    wanted = InputGrowth(topic, partitions, uuid.uuid4().hex)
    control.append(wanted.to_record())
    after, reason = control.outcome(wanted.request)
    if after.growth is not None and after.growth.request == wanted.request:
        return wanted, True
    if after.growth is not None and (after.growth.topic, after.growth.partitions) == (
        topic,
        partitions,
    ):
        raise ExpandError(
            f"another `splitstate expand` of {topic!r} to {partitions} partitions was written "
            f"to {control.topic!r} first and is running. Fix: let it finish; if it stopped, run "
            f"this command again (it resumes the {noun})."
        )
    _refuse(control.topic, after.scaling, after.growth)
    raise ExpandError(
        f"the {noun} of {topic!r} to {partitions} partitions was not accepted in "
        f"{control.topic!r}: {reason or 'unknown'}. Fix: check `splitstate status`, then run "
        "this command again."
    )


def release_growth(control: ControlLog | None, held: InputGrowth | None) -> None:
    """Let scales go ahead again: append ``growth_done`` for ``held`` (if any)."""
    if control is not None and held is not None:
        control.append(held.to_record(done=True))


def _refuse(control_topic: str, scale: Scale | None, growth: InputGrowth | None) -> None:
    if scale is not None:
        raise ExpandError(
            f"the app of {control_topic!r} is scaling to {scale.new_processors} processors "
            f"(generation {scale.generation}); changing its inputs' partition counts now "
            "would leave partitions out of the handoffs. Fix: wait until the scale completes "
            "(`splitstate status`), then expand."
        )
    if growth is not None:
        raise ExpandError(
            f"`splitstate expand` of {growth.topic!r} to {growth.partitions} partitions holds "
            f"{control_topic!r}. Fix: finish it first (`splitstate expand ... --topic "
            f"{growth.topic} --partitions {growth.partitions}`), then change it again."
        )
