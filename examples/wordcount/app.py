"""Wordcount: the running count of each word.

Input topic ``words``: key = the word (UTF-8), value ignored. Output topic ``word-counts``:
key = the word, value = ``{"word": ..., "count": N}`` with N the running count.

Run: python examples/wordcount/app.py --all (every processor, from any directory), or
splitstate run examples.wordcount.app:app --all
"""

from __future__ import annotations

from pathlib import Path

from framework import App, KeyState, Output, Record

app = App(config_file=Path(__file__).with_name("config.yaml"))
app.store("counts")


@app.processor()
def count(record: Record[bytes | None], state: KeyState[int]) -> Output:
    """Add one to the word's count and emit the new count (to the output topic)."""
    total = (state.get() or 0) + 1
    state.set(total)
    return Output({"word": record.key_text, "count": total})


if __name__ == "__main__":
    app.run()
