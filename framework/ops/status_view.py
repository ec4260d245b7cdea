"""``splitstate status`` as text: topics, processors, partitions, a scale in progress, notes.

Much of it is read from outside (the control log, the progress topic, the snapshot store):
every line is shown through ``framework.ops.escape.printable``, so no text in it reaches the
terminal as an escape sequence, a carriage return or a line of its own.
"""

from __future__ import annotations

from framework.growth.placement import UNPLACED_CAUSE, UNPLACED_FIX
from framework.ops.escape import printable
from framework.ops.status import AppStatus

__all__ = ["note_lines", "render_status", "size_text", "warning_lines"]


def _number(value: int | None) -> str:
    return "-" if value is None else str(value)


def _size(value: int | None) -> str:
    if value is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}"
        value //= 1024
    return f"{value} TiB"


def size_text(value: int | None) -> str:
    """A byte count as the report shows it (``-``: unknown)."""
    return _size(value)


def _retention_warning(status: AppStatus) -> list[str]:
    """A line naming the input partitions whose early records were deleted (a replay, which
    reads from offset 0, can no longer rebuild their keys)."""
    truncated = sorted(
        (p for processor in status.processors for p in processor.partitions if p.start > 0),
        key=lambda p: (p.topic, p.partition),
    )
    if not truncated or status.bootstrap == "snapshot":
        return []  # snapshots need only what came after them (see the snapshot lines)
    parts = ", ".join(f"{p.topic}[{p.partition}] starts at offset {p.start}" for p in truncated)
    return [
        f"warning: retention deleted the first records of {parts}: scaling out/in by replay "
        "is no longer possible for these partitions; use bootstrap: spark with an archive"
    ]


def warning_lines(status: AppStatus) -> list[str]:
    """The report's warnings about the inputs: history retention deleted (when it matters),
    records written by producers that bypass the growth fence, and those of them dead-lettered
    as misplaced (escaped: ``printable``)."""
    lines = _retention_warning(status) + _unfenced_line(status) + _unplaced_lines(status)
    return [printable(line) for line in lines]


def note_lines(status: AppStatus) -> list[str]:
    """The report's closing notes: processors that reported but are not running, records
    skipped after crashes, the control log's ignored records, uneven key shares (escaped:
    ``printable``)."""
    return [printable(line) for line in _notes(status)]


def render_status(status: AppStatus) -> str:
    """A plain-text report (each line escaped: ``printable``)."""
    lines = [
        f"app {status.app_id}: generation {status.generation}, "
        f"{len(status.processors)} processors (initial {status.initial_processors}), "
        f"outputs {status.guarantee}",
    ]
    for topic_status in status.topics:
        lines.extend(topic_status.render())
    lines.extend(_retention_warning(status))
    lines.extend(_unfenced_line(status))
    lines.extend(_unplaced_lines(status))
    lines.extend(_processor_lines(status))
    lines.extend(_scale_lines(status))
    if status.snapshots is not None:
        lines.extend(status.snapshots.render())
    lines.extend(_notes(status))
    return "\n".join(printable(line) for line in lines)


def _unfenced_line(status: AppStatus) -> list[str]:
    lines: list[str] = []
    if status.unfenced:
        where = ", ".join(f"{t}[{p}] {n}" for (t, p), n in sorted(status.unfenced.items()))
        total = sum(status.unfenced.values())
        lines.append(
            f"{total} record{'s' if total != 1 else ''} without a splitstate.count header "
            f"(written by producers that bypass the growth fence): {where}"
        )
    return lines


def _unplaced_lines(status: AppStatus) -> list[str]:
    if not status.unplaced:
        return []
    where = ", ".join(f"{t}[{p}] {n}" for (t, p), n in sorted(status.unplaced.items()))
    total = sum(status.unplaced.values())
    return [
        f"warning: {total} record{'s' if total != 1 else ''} without a splitstate.count header "
        "dead-lettered (stage placement), as linear hashing does not place their keys where "
        f"they are: {where}",
        f"  {UNPLACED_CAUSE}. Fix: {UNPLACED_FIX}; then send them again from the dead-letter topic",
    ]


def _processor_lines(status: AppStatus) -> list[str]:
    lines = [""]
    lines.append(
        f"{'processor':>9} {'host':<16} {'pid':>7} {'share':>7} {'state':>9} {'lag':>9}  partitions"
    )
    for processor in status.processors:
        parts = ", ".join(f"{p.topic}[{p.partition}]" for p in processor.partitions)
        host = printable(processor.host or "-")[-16:]  # the end holds a pod's ordinal
        lines.append(
            f"{processor.processor:>9} {host:<16} {processor.pid or '-':>7} "
            f"{float(processor.share):>7.1%} {_size(processor.state_bytes):>9} "
            f"{processor.lag:>9}  {parts}"
        )
    lines.append("")
    lines.append(f"{'partition':<28} {'owner':>5} {'committed':>10} {'end':>10} {'lag':>8}")
    for processor in status.processors:
        for part in sorted(processor.partitions, key=lambda s: (s.topic, s.partition)):
            committed = "-" if part.committed is None else str(part.committed)
            lines.append(
                f"{part.topic + '[' + str(part.partition) + ']':<28} {part.owner:>5} "
                f"{committed:>10} {part.end:>10} {part.lag:>8}"
            )
    return lines


def _scale_lines(status: AppStatus) -> list[str]:
    lines: list[str] = []
    if status.scaling_to is not None:
        lines.append("")
        lines.append(f"scaling to {status.scaling_to} processors:")
        header = ("handoff", "phase", "partition", "T1", "T2", "F", "lag")
        lines.append("{:>9} {:<13} {:<24} {:>9} {:>9} {:>9} {:>8}".format(*header))
        for handoff in status.handoffs:
            for topic, partition, t1, t2, final in handoff.partitions:
                lag = "-" if t1 is None or t2 is None else str(max(0, (final or t1) - t2))
                lines.append(
                    f"{f'{handoff.source}->{handoff.target}':>9} {handoff.phase:<13} "
                    f"{f'{topic}[{partition}]':<24} {_number(t1):>9} {_number(t2):>9} "
                    f"{_number(final):>9} {lag:>8}"
                )
        for bootstrap in status.bootstraps:
            lines.append(bootstrap.render())
        for stopped in status.stopped:
            lines.extend(stopped.lines())
    if status.aborted is not None:
        generation, old, new, reason = status.aborted
        lines.append("")
        lines.append(
            f"the scale of generation {generation} ({old} -> {new} processors) was aborted: "
            f"{reason}"
        )
    return lines


def _notes(status: AppStatus) -> list[str]:
    lines: list[str] = []
    silent = [p.silence for p in status.processors if p.silence is not None]
    if silent:
        lines.append("")
        lines.extend(silence.render() for silence in silent)
    if status.skipped:
        lines.append("")
    for processor_id, records in sorted(status.skipped.items()):
        for record in records:
            where = f"{record.topic}[{record.partition}]@{record.offset}"
            lines.append(
                f"processor {processor_id} dropped {len(record.keys)} key(s)' timer or window "
                f"result at the tick {where}: it killed the processor {record.crashes} times "
                "(see the dead-letter topic, stages timer and window)"
                if record.keys
                else f"processor {processor_id} skipped {where}: it killed the processor "
                f"{record.crashes} times (see the dead-letter topic, stage crash)"
            )
    if status.ignored:
        lines.append("")
        if status.ignored == 1:
            what = "1 record ignored, refused when it was written"
        else:
            what = f"{status.ignored} records ignored, each refused when it was written"
            what += f" (the last {len(status.last_ignored)} below)"
        lines.append(f"control log: {what}, e.g. the later of two scale requests:")
        lines.extend(f"  - {reason}" for reason in status.last_ignored)
    uneven = len({p.share for p in status.processors}) > 1
    if uneven:
        lines.append("")
        lines.append(
            "note: shares are uneven because the processor count is not initial_processors "
            "times a power of two; split processors carry half the keys of the others."
        )
    return lines
