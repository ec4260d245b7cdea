"""Receivers that stopped catching up in the scale in progress: what the control log says of
each, what ends the stop, and whether an abort would be refused (for ``status`` and
``splitstate scale --resume``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rebalance import HandoffPhase
from rebalance.control import Scale
from rebalance.control_stops import Stop

__all__ = ["StoppedReceiver", "stopped_receivers"]


@dataclass(frozen=True)
class StoppedReceiver:
    """A receiver of the scale in progress that stopped catching up."""

    processor: int
    generation: int
    stop: Stop
    #: a newer run of the processor recorded itself since the stop (it was restarted;
    #: ``None``: unknown, a stop written before stops named their run)
    restarted: bool | None
    #: handoffs of the scale released already (``"0->2"``): an abort is then refused
    released: tuple[str, ...]

    def lines(self) -> list[str]:
        """What ``status`` says of it: the stop, what ends it, and the way out."""
        j, stop = self.processor, self.stop
        lines = [f"processor {j} STOPPED catching up {stop.where}: {stop.reason}"]
        if stop.at is not None:
            lines.append(
                f"  Its sources hold their releases. Fix the cause and restart processor {j}: "
                "it resumes by itself once it has read past that record with no lag left."
            )
            if self.restarted:
                lines.append(f"  Processor {j} was restarted since; it has not got past yet.")
        else:
            lines.append(
                "  Its sources hold their releases. It stopped as a whole, so only you "
                f"end the stop: fix the cause, restart processor {j}, then run "
                "`splitstate scale MODULE:APP --resume`."
            )
            if self.restarted is False:
                lines.append(f"  (--resume is refused until processor {j} is restarted.)")
        if self.released:
            lines.append(
                f"  The scale cannot be aborted: {', '.join(self.released)} released their "
                "partitions already, so it can only finish."
            )
        else:
            lines.append(
                "  Or abandon the scale (old owners keep their partitions): "
                "splitstate scale MODULE:APP --abort"
            )
        return lines


def stopped_receivers(scale: Scale | None, instances: Mapping[int, str]) -> list[StoppedReceiver]:
    """The stopped receivers of ``scale`` (the scale in progress), by processor id
    (``instances``: each processor's newest run in the control log)."""
    if scale is None:
        return []
    released = tuple(
        f"{h.source}->{h.target}"
        for h in sorted(scale.handoffs.values(), key=lambda h: (h.source, h.target))
        if h.phase in (HandoffPhase.RELEASED, HandoffPhase.COMPLETE)
    )
    return [
        StoppedReceiver(
            processor,
            scale.generation,
            stop,
            restarted=(
                None if stop.instance is None else instances.get(processor) != stop.instance
            ),
            released=released,
        )
        for processor, stop in sorted(scale.stopped.items())
    ]
