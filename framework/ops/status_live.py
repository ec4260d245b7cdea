"""``splitstate status --watch`` on a terminal: the status as rich tables and progress bars.

Pure rendering: ``live_status(status, handoffs, updated=..., every=...)`` turns one
``AppStatus`` (and the catch-up progress computed from successive samples) into one rich
renderable: the app line, inputs, a processors table (host, pid, key share, state size, lag,
partitions), a partitions table (committed offset, end, lag), the handoffs of a scale in
progress with bars, records/s and ETA, the Spark bootstraps and snapshot transfers with bars,
then the snapshot lines and notes of the plain report.

Text read from outside (a report's host, an abort or stop reason, a phase) is shown escaped
(``framework.ops.escape.printable``) and as ``rich.text.Text``, never as a string rich would
read markup in: a ``[bold]`` in a reason is shown as it is.
"""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from framework.ops.escape import printable
from framework.ops.progress import HandoffProgress
from framework.ops.status import AppStatus, BootstrapStatus
from framework.ops.status_view import note_lines, size_text, warning_lines
from framework.snapshots.transfer_progress import TransferProgress, copied_text

__all__ = ["live_status"]

_BAR_WIDTH = 24


def live_status(
    status: AppStatus,
    handoffs: list[HandoffProgress],
    *,
    updated: str,
    every: float,
    problem: str | None = None,
) -> RenderableType:
    """The whole view; ``updated`` is when ``status`` was read, ``problem`` why the last
    refresh failed (the view then shows the last status that could be read)."""
    header = Text.assemble(
        (f"app {status.app_id}", "bold"),
        f": generation {status.generation}, {len(status.processors)} processors "
        f"(initial {status.initial_processors}), outputs {status.guarantee}",
    )
    footer = Text(f"updated {updated}, every {every:g}s; Ctrl-C to exit", style="dim")
    parts: list[RenderableType] = [header]
    if problem is not None:
        parts.append(_text(f"cannot refresh: {problem} (retrying)", style="bold red"))
    for topic in status.topics:
        parts.extend(_text(line) for line in topic.render())
    parts.extend(Text(line, style="yellow") for line in warning_lines(status))
    parts.append(_processors(status))
    parts.append(_partitions(status))
    parts.extend(_scale(status, handoffs))
    if status.snapshots is not None:
        parts.extend(_text(line) for line in status.snapshots.render())
    parts.extend(Text(line) for line in note_lines(status))
    parts.append(footer)
    return Group(*parts)


def _text(text: str, style: str = "") -> Text:
    """``text`` escaped, as a ``Text`` (no markup read in it)."""
    return Text(printable(text), style=style)


def _row(table: Table, *cells: str | RenderableType) -> None:
    """Add a row; a string cell is shown escaped and as plain text (``_text``)."""
    table.add_row(*(_text(cell) if isinstance(cell, str) else cell for cell in cells))


_TEXT_COLUMNS = frozenset(
    {"host", "partition", "partitions", "phase", "progress", "build", "detail"}
)


def _table(*columns: str) -> Table:
    """A table whose text columns are aligned left and numbers right."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for name in columns:
        table.add_column(name, justify="left" if name in _TEXT_COLUMNS else "right")
    return table


def _lag(lag: int) -> Text:
    return Text(f"{lag:,}", style="yellow" if lag else "green")


def _processors(status: AppStatus) -> Table:
    table = _table("processor", "host", "pid", "share", "state", "lag", "partitions")
    for processor in status.processors:
        _row(
            table,
            str(processor.processor),
            processor.host or "-",
            str(processor.pid or "-"),
            f"{float(processor.share):.1%}",
            size_text(processor.state_bytes),
            _lag(processor.lag),
            ", ".join(f"{p.topic}[{p.partition}]" for p in processor.partitions),
        )
    return table


def _partitions(status: AppStatus) -> Table:
    table = _table("partition", "owner", "committed", "end", "lag")
    rows = sorted(
        (p for processor in status.processors for p in processor.partitions),
        key=lambda p: (p.topic, p.partition),
    )
    for part in rows:
        _row(
            table,
            f"{part.topic}[{part.partition}]",
            str(part.owner),
            "-" if part.committed is None else f"{part.committed:,}",
            f"{part.end:,}",
            _lag(part.lag),
        )
    return table


def _bar(done: float, total: float) -> ProgressBar:
    return ProgressBar(total=max(total, 1), completed=min(done, max(total, 1)), width=_BAR_WIDTH)


def _scale(status: AppStatus, handoffs: list[HandoffProgress]) -> list[RenderableType]:
    parts: list[RenderableType] = []
    if status.scaling_to is not None:
        parts.append(Text(f"scaling to {status.scaling_to} processors:", style="bold"))
        table = _table("handoff", "phase", "progress", "", "T2 of goal", "records/s", "ETA")
        for handoff in handoffs:
            goal = handoff.goal if handoff.goal > 0 else 1
            done = handoff.done if handoff.goal > 0 else 1
            _row(
                table,
                f"{handoff.source} -> {handoff.target}",
                _text(handoff.phase, style="cyan"),
                _bar(done, goal),
                f"{handoff.fraction:.0%}",
                f"{handoff.done:,} of {handoff.goal:,}",
                "-" if handoff.rate is None else f"{handoff.rate:,.0f}",
                "-" if handoff.eta is None else f"{handoff.eta:.0f}s",
            )
        parts.append(table)
        if status.bootstraps:
            parts.append(_bootstraps(status.bootstraps))
        for stopped in status.stopped:
            parts.append(_text_lines(stopped.lines(), style="bold red"))
    if status.aborted is not None:
        generation, old, new, reason = status.aborted
        parts.append(
            _text(
                f"the scale of generation {generation} ({old} -> {new} processors) was "
                f"aborted: {reason}"
            )
        )
    return parts


def _bootstraps(bootstraps: list[BootstrapStatus | TransferProgress]) -> Table:
    """Spark bootstraps (a bar over the current stage's tasks) and snapshot transfers (a bar
    over the bytes of the snapshots found so far)."""
    table = _table("processor", "build", "phase", "progress", "detail")
    for item in bootstraps:
        if isinstance(item, BootstrapStatus):
            _row(
                table,
                str(item.processor),
                "Spark bootstrap",
                item.phase,
                _bar(item.tasks_done, item.tasks_total),
                f"tasks {item.tasks_done}/{item.tasks_total}, {item.records_read:,} records "
                f"read, {item.records_applied:,} folded, {item.seconds:.0f}s",
            )
        else:
            waiting = f", waiting for a snapshot of {item.waiting_for}" if item.waiting_for else ""
            _row(
                table,
                str(item.processor),
                "snapshot transfer",
                item.phase,
                _bar(item.bytes_copied, item.bytes_total),
                f"{copied_text(item.bytes_copied, item.bytes_total)}, "
                f"{item.keys_kept:,} keys kept{waiting}, {item.updated - item.started:.0f}s",
            )
    return table


def _text_lines(lines: list[str], style: str = "") -> Text:
    """``lines``, each escaped (``_text``), as one ``Text``."""
    return Text("\n".join(printable(line) for line in lines), style=style)
