"""Marker records of `splitstate expand`: written by it, never given to a processor function.

A marker carries the header ``splitstate.marker`` naming the step of the topic's history it
belongs to (the step index is the index in the registry's ``counts`` of the count it brought):

- a **growth marker** ``<topic>/<step>/<count>/<child>`` sits in the parent of ``child``: its
  offset is where ``child``'s keys end there (the child's threshold);
- a **drain marker** ``<topic>/<step>/<count>/<deleted>/drain`` sits in a partition the
  shrink deleted: its offset bounds the records of that partition's last life (KIP-253's
  ``upperOffsetThreshold``);
- ``<topic>/<count>/<child>``: a growth marker written before ids named their step (an old
  registry's growths), taken as the first growth to ``count``.

The step is named because a count and a partition can repeat (4 -> 6 -> 4 -> 6). A marker has
no key, except on a compacted topic, where Kafka refuses records without one: there its key
is its id (``marker_key``); readers recognize a marker by its header.

Anyone who may write to an input topic can write such a record, so a processor trusts a
marker only when the topic registry records its step (``unrecorded_marker``): ``expand``
records the step's count, then the fenced partitions' end offsets (``fence_ends``), and only
then writes the markers, then records their offsets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from framework.coordination.registry import Growth
from rebalance import Grow, Shrink, TopicHistory, parent

__all__ = [
    "MARKER_HEADER",
    "MarkerName",
    "is_marker",
    "is_marker_record",
    "marker_fence",
    "marker_growth",
    "marker_key",
    "marker_step",
    "unrecorded_marker",
]

#: Header naming the step a marker record belongs to.
MARKER_HEADER = "splitstate.marker"

_SHOWN = 100  # bytes of a header value a reason shows
_DRAIN = "drain"


@dataclass(frozen=True)
class MarkerName:
    """What a marker's header names: the step to ``count`` partitions (``step``: its index in
    the history's counts; ``None`` for an id written before ids named it) and ``partition``:
    the grown child of a growth marker, the deleted partition of a drain marker (``drain``)."""

    count: int
    partition: int
    step: int | None = None
    drain: bool = False

    def marker_id(self, topic: str) -> str:
        """The header value of this marker of ``topic``."""
        parts = [topic, *([] if self.step is None else [str(self.step)])]
        parts += [str(self.count), str(self.partition), *([_DRAIN] if self.drain else [])]
        return "/".join(parts)


def is_marker(headers: Any) -> bool:
    """Whether a record with these headers is a marker (or claims to be one)."""
    return bool(headers) and any(name == MARKER_HEADER for name, _ in headers)


def is_marker_record(topic: str, key: bytes | None, headers: Any) -> bool:
    """Whether a record of ``topic`` with ``key`` and ``headers`` is a marker (or claims to
    be one): a ``splitstate.marker`` header and no key, or (a compacted topic's marker) its
    one such header's value as key. Any other keyed record is an ordinary record. (Cheap for
    keyed records: a marker's key starts with its topic's name.)"""
    if key is None:
        return is_marker(headers)
    if not key.startswith(topic.encode() + b"/"):
        return False
    values = [value for name, value in headers or () if name == MARKER_HEADER]
    return len(values) == 1 and values[0] == key


def marker_key(marker_id: str, compacted: bool) -> bytes | None:
    """The key of the marker ``marker_id``: none, but on a compacted topic (``cleanup.policy``
    with ``compact``: Kafka refuses a record without a key there) its id."""
    return marker_id.encode() if compacted else None


def marker_growth(topic: str, headers: Any) -> MarkerName | None:
    """The step a marker of ``topic`` names (its only ``splitstate.marker`` header: see the
    module docstring), or ``None`` for headers of another shape."""
    values = [value for name, value in headers or () if name == MARKER_HEADER]
    if len(values) != 1 or not isinstance(values[0], bytes):
        return None
    try:
        parts = values[0].decode().split("/")
    except UnicodeDecodeError:
        return None
    drain = len(parts) == 5 and parts[-1] == _DRAIN
    numbers = parts[1:-1] if drain else parts[1:]
    if parts[0] != topic or len(numbers) not in (2, 3) or not all(map(_number, numbers)):
        return None
    if drain and len(numbers) != 3:
        return None
    *step, count, partition = (int(n) for n in numbers)
    return MarkerName(count, partition, step[0] if step else None, drain)


def _number(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 9


def marker_step(history: TopicHistory, name: MarkerName) -> int | None:
    """The index in ``history.counts`` of the step ``name`` names, if the history has such a
    step: a growth for a growth marker, a shrink for a drain marker, to ``name.count``
    partitions. An id without a step (written before ids named it, while counts only grew)
    names the first growth to its count."""
    counts, steps = history.counts, history.steps
    kind = Shrink if name.drain else Grow
    if name.step is None:
        if name.drain:
            return None
        found = [i for i in range(1, len(counts)) if counts[i] == name.count]
        candidates = found[:1]
    else:
        candidates = [name.step]
    for i in candidates:
        if 1 <= i < len(counts) and counts[i] == name.count and isinstance(steps[i - 1], kind):
            return i
    return None


def unrecorded_marker(  # noqa: PLR0911 - one return per way a marker can be refused
    where: tuple[str, int, int],
    headers: Any,
    history: TopicHistory | None,
    growth: Growth | None,
) -> str | None:
    """Why the marker at ``where`` (topic, partition, offset) is not the marker of a step that
    the topic registry (``history``, and ``growth``: the change in progress, of the topic)
    records; ``None`` if it is: the step grew its child from this partition (a growth marker)
    or deleted this partition (a drain marker), and the registry records the marker's offset
    (whichever marker of it this is: a resumed or a second concurrent `expand` writes one
    twice) or, the step in progress, its fence, and the marker lies at or after its
    partition's fence end (``fence_ends``: every run of `expand` writes its markers after the
    fence ends the registry kept, the first recorded: ``framework.coordination.entry_order``;
    a marker before them was written during the lease wait, by something else)."""
    topic, partition, offset = where
    name = marker_growth(topic, headers)
    if name is None:
        shown = [
            value[:_SHOWN] if isinstance(value, bytes) else value
            for name, value in headers
            if name == MARKER_HEADER
        ]
        return _refused(
            topic,
            f"its {MARKER_HEADER} header{'s' if len(shown) > 1 else ''} "
            f"{', '.join(repr(v) for v in shown)} {'are' if len(shown) > 1 else 'is'} not the "
            f"one header {topic}/<step>/<partition count>/<new partition> (or "
            f"{topic}/<step>/<partition count>/<deleted partition>/drain) that `splitstate "
            "expand` writes",
        )
    what = "a shrink" if name.drain else "a growth"
    role = "its deleted partition" if name.drain else "its partition"
    at = "" if name.step is None else f" at step {name.step}"
    step_text = f"{what} of {topic!r} to {name.count} partitions{at} ({role} {name.partition})"
    step = None if history is None else marker_step(history, name)
    if step is None:
        recorded = " -> ".join(str(c) for c in history.counts) if history else "none"
        return _refused(
            topic,
            f"it names {step_text}, which the topic registry does not record (its partition "
            f"counts: {recorded})",
        )
    assert history is not None
    before = history.counts[step - 1]
    low, high = (name.count, before) if name.drain else (before, name.count)
    if not low <= name.partition < high:
        did = "deleted" if name.drain else "created"
        return _refused(
            topic, f"it names {step_text}, but that step {did} partitions {low}..{high - 1}"
        )
    home = name.partition if name.drain else parent(name.partition, history.initial_partitions)
    if home != partition:
        belongs = (
            f"whose drain marker belongs in {topic}[{home}], not in"
            if name.drain
            else f"which was split from {topic}[{home}], not from"
        )
        return _refused(
            topic, f"it names {step_text}, {belongs} {topic}[{partition}] where this record is"
        )
    if name.partition in _recorded(history, step):
        return None  # its fence is the registry's offset (``marker_fence``)
    last = len(history.counts) - 1
    kind = "shrink" if name.drain else "grow"
    if (
        step != last
        or growth is None
        or (growth.kind, growth.partitions) != (kind, name.count)
        or growth.fence_ends is None
    ):
        return _refused(
            topic,
            f"the topic registry records {step_text}, but not yet its fence, which "
            "`splitstate expand` records before it writes the markers",
        )
    fence_end = growth.fence_ends.get(partition)
    if fence_end is None or offset < fence_end:
        return _refused(
            topic,
            f"it names {step_text} and lies before that step's fence end in "
            f"{topic}[{partition}] ({'none recorded' if fence_end is None else fence_end}), "
            "and `splitstate expand` writes the markers only after it",
        )
    return None


def _recorded(history: TopicHistory, step: int) -> dict[int, int]:
    """The marker offsets the registry records for step ``step`` (index in counts)."""
    found = history.steps[step - 1]
    return dict(found.markers if isinstance(found, Grow) else found.drains)


def marker_fence(
    where: tuple[str, int, int], name: MarkerName, history: TopicHistory | None
) -> tuple[int, int, int]:
    """The fence ``(child, count, threshold)`` of a recorded growth marker
    (``unrecorded_marker`` is ``None``) at ``where``: the registry's marker offset of its step
    if it records one, else the marker's own offset."""
    step = None if history is None else marker_step(history, name)
    recorded = None if step is None or history is None else _recorded(history, step)
    offset = None if recorded is None else recorded.get(name.partition)
    return name.partition, name.count, where[2] if offset is None else offset


def _refused(topic: str, why: str) -> str:
    return (
        f"unrecorded marker: a record with a {MARKER_HEADER} header, but {why}. So it is no "
        f"marker of `splitstate expand` and fences nothing: the records after it are judged "
        f"as if it were not there. Fix: find what writes records with a {MARKER_HEADER} "
        f"header to {topic!r} (only `splitstate expand` may) and stop it; nothing else is "
        "needed."
    )
