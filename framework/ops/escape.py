"""Text from outside (the control log, the progress topic, the snapshot store, errors) made
safe to show on a terminal.

Anyone who can write to a topic the app reads can put terminal escape sequences (retitle the
window, clear the screen, hide what follows), carriage returns or newlines (to overwrite or
forge a line) in an abort reason or a report's host. ``printable`` shows every character that
is not printable (``str.isprintable``: control characters, format characters such as
bidirectional overrides, line separators) as a Python escape (``\\x1b``, ``\\r``, ``\\n``,
``\\u202e``), so the operator sees the text and the terminal does nothing with it. Rich markup
is not this module's concern: the live view shows such text as ``rich.text.Text``, which
never reads markup.
"""

from __future__ import annotations

__all__ = ["printable"]

_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def printable(text: str) -> str:
    """``text`` with every character that is not printable (space aside) shown escaped."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escaped(char) for char in text)


def _escaped(char: str) -> str:
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"
