"""The README says what the code does: the tour's Python blocks run, every dead-letter stage
the code writes is documented, and the defaults and paths it names are the code's (found by a
new user: an undocumented typed store and stages, a dead_letter_topic documented as
``<app_id>-dead-letters`` that read ``None``, and a jar cache the README placed elsewhere)."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest

from framework import AppConfig
from framework.jvm import cache_dir
from framework.records import DeadLetterStage

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    """The README's text from the heading ``## title`` to the next ``## `` heading."""
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def test_the_tours_python_blocks_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", section("A 5-minute tour"), re.DOTALL)
    assert len(blocks) >= 4, "the app, the producer, the test driver, a typed store"
    namespace: dict[str, object] = {
        "__file__": str(ROOT / "examples" / "wordcount" / "app.py"),
        "__name__": "readme_tour",
    }
    ran = 0
    for block in blocks:
        code = compile(block, "README.md", "exec")
        if "127.0.0.1:PORT" in block:
            continue  # needs a broker: compiled only
        exec(code, namespace)  # noqa: S102 - the README's own code
        ran += 1
    assert ran >= 3
    assert any(".store(" in block and "BaseModel" in block for block in blocks), (
        "the tour shows a typed store: app.store(name, Model)"
    )


@pytest.mark.parametrize("stage", typing.get_args(DeadLetterStage))
def test_every_dead_letter_stage_is_documented(stage: str) -> None:
    assert re.search(rf"^\| `{stage}` \|", README, re.MULTILINE), stage


def test_the_dead_letter_topic_default_is_what_the_config_holds() -> None:
    row = re.search(r"^\| `dead_letter_topic` \| `([^`]*)` \|", README, re.MULTILINE)
    assert row is not None
    config = AppConfig.load(None, app_id="shop", inputs=[{"topic": "orders"}], initial_processors=1)
    assert row[1].replace("<app_id>", "shop") == config.dead_letter_topic == config.dead_letters


def test_the_jar_cache_is_where_the_readme_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPLITSTATE_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache_dir() == (Path.home() / ".cache" / "splitstate").resolve()
    assert "`~/.cache/splitstate/jvm`" in README
    assert "`$XDG_CACHE_HOME/splitstate/jvm`" in README
    assert "`SPLITSTATE_CACHE_DIR`" in README
    make = (ROOT / "Makefile").read_text()
    assert "export SPLITSTATE_CACHE_DIR ?= $(CURDIR)/.cache" in make  # make's `.cache/jvm`


def test_the_time_sections_python_blocks_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # (the sensors block names its config relative to the checkout)
    blocks = re.findall(
        r"```python\n(.*?)```", section("Time: windows, timers, values that expire"), re.DOTALL
    )
    ours = [block for block in blocks if "quixstreams" not in block]
    assert len(ours) >= 3, "the sensors window, its test, the session timer"
    namespace: dict[str, object] = {"__name__": "readme_time"}
    for block in ours:
        exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the README's own code
    assert any("tumbling_window" in block for block in blocks), "the Quix side by side"
