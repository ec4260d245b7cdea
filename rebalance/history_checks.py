"""Checks of a partition-count history (pure): a history read from the topic registry or the
control log was written by another process, so every field is checked before it is used.

``check_history`` raises ``ValueError`` naming the topic, the step and the field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rebalance.steps import Grow, Shrink, Step, survivor

__all__ = ["check_history", "survivors"]


def survivors(initial: int, before: int, count: int) -> dict[int, tuple[int, ...]]:
    """Each survivor of a shrink from ``before`` to ``count`` partitions -> the deleted
    partitions whose keys merge into it (``initial``: ``N``)."""
    merged: dict[int, list[int]] = {}
    for deleted in range(count, before):
        merged.setdefault(survivor(deleted, initial, count), []).append(deleted)
    return {t: tuple(ds) for t, ds in sorted(merged.items())}


def check_history(name: str, counts: Sequence[int], steps: Sequence[Step]) -> None:
    """Raise ``ValueError`` unless ``counts`` and ``steps`` form a history (``TopicHistory``)."""
    topic = f"topic {name!r}"
    if not counts:
        raise ValueError(f"{topic}: the partition-count history is empty")
    for count in counts:
        if isinstance(count, bool) or not isinstance(count, int):
            raise ValueError(f"{topic}: a partition count must be an integer, got {count!r}")
    initial = counts[0]
    if initial < 1:
        raise ValueError(f"{topic}: initial partition count must be at least 1")
    if len(steps) != len(counts) - 1:
        raise ValueError(
            f"{topic}: {len(counts)} partition counts need {len(counts) - 1} steps, "
            f"got {len(steps)}"
        )
    for index, (step, before, count) in enumerate(
        zip(steps, counts, counts[1:], strict=False), start=1
    ):
        where = f"{topic}, step {index} ({before} -> {count})"
        if count < initial:
            raise ValueError(
                f"{where}: {count} partitions is below the initial count {initial}; "
                "partitions are never deleted below it"
            )
        if count == before:
            raise ValueError(f"{where}: the count equals the one before; a step changes it")
        if step.count != count:
            raise ValueError(f"{where}: the step's count is {step.count}, not {count}")
        if isinstance(step, Grow):
            _check_grow(where, step, before)
        elif isinstance(step, Shrink):
            _check_shrink(where, step, initial, before)
        else:
            raise ValueError(f"{where}: not a Grow or Shrink step: {step!r}")


def _check_grow(where: str, step: Grow, before: int) -> None:
    if step.count < before:
        raise ValueError(f"{where}: the count goes down, so the step must be a Shrink, not a Grow")
    grown = range(before, step.count)
    _check_offsets(where, "start", step.starts, grown, "is not grown by this step")
    missing = [c for c in grown if c not in step.starts]
    if missing:
        raise ValueError(
            f"{where}: no start offset for grown partition(s) {_listed(missing)} (each grown "
            "partition's end offset is measured before the count is recorded)"
        )
    _check_offsets(where, "marker", step.markers, grown, "is not grown by this step")


def _check_shrink(where: str, step: Shrink, initial: int, before: int) -> None:
    if step.count > before:
        raise ValueError(f"{where}: the count goes up, so the step must be a Grow, not a Shrink")
    kept = survivors(initial, before, step.count)
    _check_offsets(where, "hold", step.holds, kept, "does not survive this shrink")
    missing = [t for t in kept if t not in step.holds]
    if missing:
        raise ValueError(
            f"{where}: no hold offset for survivor(s) {_listed(missing)} (each survivor's end "
            "offset is measured before the count is recorded)"
        )
    deleted = range(step.count, before)
    _check_offsets(where, "drain marker", step.drains, deleted, "is not deleted by this step")


def _check_offsets(
    where: str,
    what: str,
    offsets: Mapping[int, int],
    allowed: Mapping[int, object] | range,
    problem: str,
) -> None:
    for partition, offset in offsets.items():
        if isinstance(partition, bool) or not isinstance(partition, int):
            raise ValueError(f"{where}: a {what} names partition {partition!r}, not an integer")
        if partition not in allowed:
            raise ValueError(
                f"{where}: a {what} offset for partition {partition}, which {problem} "
                f"(it touches {_listed(list(allowed))})"
            )
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(
                f"{where}: the {what} offset of partition {partition} is {offset!r}; "
                "offsets are non-negative integers"
            )


def _listed(partitions: Sequence[int]) -> str:
    return ", ".join(str(p) for p in partitions) or "none"
