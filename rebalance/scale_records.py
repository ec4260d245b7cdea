"""The ``scale`` record made a ``Scale``: each input's partition history as the record carries
it, the plan's moves grouped into (source, target) handoffs, each PLANNED; and an ``abort``
record applied to the scale in progress (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from rebalance.control_records import (
    AppDefinition,
    Handoff,
    Scale,
    history_from_record,
    request_of,
)
from rebalance.lineage import TopicHistory
from rebalance.plan import plan_scale
from rebalance.states import HANDOFF_MACHINE, HandoffEvent

__all__ = ["apply_abort", "scale_of"]


def scale_of(
    app: AppDefinition, processors: int, number: int, record: Mapping[str, Any]
) -> Scale | str:
    """The scale to generation ``number`` that ``record`` asks for, from ``processors`` in
    force, or why the record does not fit ``app`` (it is then ignored)."""
    counts = {str(k): int(v) for k, v in dict(record["partitions"]).items()}
    recorded = dict(record.get("histories") or {})
    histories: dict[str, TopicHistory] = {}
    try:
        for topic, initial in sorted(app.inputs.items()):
            count = counts.get(topic, initial)
            if topic in recorded:
                history = history_from_record(topic, recorded[topic])
            else:  # written before scales carried histories: no thresholds known
                history = TopicHistory.of(
                    topic, [initial] if count == initial else [initial, count]
                )
            if history.initial_partitions != initial or history.partitions != count:
                raise ValueError(
                    f"topic {topic!r}: history {list(history.counts)} does not match "
                    f"N={initial} and {count} partitions"
                )
            histories[topic] = history
        plan = plan_scale(
            app.initial_processors,
            list(histories.values()),
            processors,
            int(record["processors"]),
        )
    except (ValueError, KeyError, TypeError) as error:
        return f"scale to generation {number}: {error}"
    handoffs: dict[tuple[int, int], Handoff] = {}
    for move in plan.moves:
        pair = (move.source, move.target)
        previous = handoffs.get(pair)
        parts = (previous.partitions if previous else ()) + ((move.topic, move.partition),)
        handoffs[pair] = Handoff(move.source, move.target, parts)
    return Scale(
        number,
        plan.old_processors,
        plan.new_processors,
        counts,
        handoffs,
        dict(plan.receivers),
        # only histories the record carried: a reader of an older record keeps the
        # registry's thresholds instead of a history that has none
        {topic: h for topic, h in histories.items() if topic in recorded},
        request=request_of(record),
    )


def apply_abort(scale: Scale | None, record: Mapping[str, Any]) -> Scale | str:
    """The scale in progress (``scale``) aborted by ``record``, or why the record is ignored
    (no such scale in progress, or a handoff of it released its partitions already: it can
    only finish)."""
    number = int(record["generation"])
    if scale is None or scale.generation != number:
        return f"an abort of generation {number}, which is not in progress"
    moved = sorted(
        f"{h.source}->{h.target}"
        for h in scale.handoffs.values()
        if not HANDOFF_MACHINE.can_apply(h.phase, HandoffEvent.ABORT)
    )
    if moved:
        return (
            f"an abort of generation {number}: handoffs {moved} already released their "
            "partitions, so the scale can only finish"
        )
    handoffs = {
        pair: replace(h, phase=HANDOFF_MACHINE.apply(h.phase, HandoffEvent.ABORT))
        for pair, h in scale.handoffs.items()
    }
    reason = str(record.get("reason") or "aborted")
    return replace(scale, handoffs=handoffs, aborted=reason)
