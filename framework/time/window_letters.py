"""The dead letter of a window that closed without a result (stage ``window``): its result (the
aggregation's ``merge`` of a sliding window's points, its or the store's ``result``) failed or
could not be written, or a crash guard refused to run it again."""

from __future__ import annotations

from typing import Any

import orjson

from framework.records import DeadLetter
from framework.time.specs import WindowSpec
from framework.time.window_state import Unmerged
from framework.time.windows import Hopping, Tumbling

__all__ = ["window_letter"]


def window_letter(  # noqa: PLR0917 - a window that closed, and why it gave no result
    spec: WindowSpec,
    key: bytes,
    start: int,
    end: int,
    acc: Any,
    why: str,
    origin: tuple[str, int, int],
) -> DeadLetter:
    """The dead letter at ``origin`` (the record or tick that closed it) of the window
    ``[start, end)`` of ``spec`` for ``key``, holding its accumulator ``acc`` (or, an
    ``Unmerged`` one, the points it holds); its reason says ``why``."""
    span = f"[{start}, {end})" if isinstance(spec.kind, Tumbling | Hopping) else f"[{start}, {end}]"
    reason = (
        f"window {span} of store {spec.name!r} failed for key {key!r}: "
        f"{why}. The window closed without a result; "
        "this dead letter holds its accumulator (or, when merging them failed, the "
        "points of a sliding window)."
    )
    held = {"store": spec.name, "start": start, "end": end, "accumulator": acc}
    if isinstance(acc, Unmerged):  # (its merge failed: the points it holds instead)
        held = {**held, "accumulator": None, "points": acc.points}
    topic, partition, offset = origin
    return DeadLetter(topic, partition, offset, key, orjson.dumps(held), (), "window", reason)
