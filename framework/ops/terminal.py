"""Where a command's live views go, and whether they redraw in place or print plain lines.

Every command that shows a live view asks ``terminal(stream)`` once. A terminal (rich's
``Console.is_terminal``: a TTY, or ``FORCE_COLOR`` set) that is not dumb (``TERM=dumb`` or
``unknown``) gets live tables and progress bars redrawn in place; anything else (a pipe, a
file, CI) gets plain text: no ANSI escapes, no redraw, one line or report at a time.
``NO_COLOR`` keeps the redraw but drops colours (rich reads it).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TextIO

from rich.console import Console

__all__ = ["Terminal", "terminal"]


@dataclass(frozen=True)
class Terminal:
    """A stream and how to write to it: ``live`` views (redrawn) or plain lines."""

    console: Console
    live: bool

    def line(self, text: str) -> None:
        """Write one plain line (no markup, no escapes in plain mode) and flush it."""
        if self.live:
            self.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            stream = self.console.file
            stream.write(text + "\n")
            stream.flush()


def terminal(stream: TextIO | None = None) -> Terminal:
    """How to show live views on ``stream`` (default: stdout)."""
    file = sys.stdout if stream is None else stream
    console = Console(file=file, highlight=False)
    live = console.is_terminal and not console.is_dumb_terminal
    if not live:
        # plain text: never any escape sequence, whatever the environment forces
        console = Console(
            file=file, highlight=False, color_system=None, force_terminal=False, no_color=True
        )
    return Terminal(console, live)
