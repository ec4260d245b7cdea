"""The docs say what the code does: every dead-letter stage the code writes is documented, the
config reference is the table generated from the config's models (every field described there,
in its ``Field(description=...)``: one source, so that code and docs cannot drift, issue 37), the
tutorial shows a typed store and the Quix side by side, the comparison shows
examples/sensors/app.py as it is and the same app in each other tool, every relative link of
README.md and docs/ resolves (to a page, and to a heading there when it names one; the
generated parts included), and every page is in the site's navigation; the references
generated from the code (config, CLI, control-log records, handoff phases) hold what the code
has."""

from __future__ import annotations

import ast
import re
import typing
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from framework import AppConfig
from framework.ops.reference import (
    cli_markdown,
    config_fields,
    config_fields_markdown,
    config_sections,
    control_records_markdown,
    handoff_phases_markdown,
)
from framework.records import DeadLetterStage
from rebalance.control_schema import KINDS
from rebalance.states import HANDOFF_MACHINE
from tests.docs_pages import (
    DOCS,
    ROOT,
    anchors,
    code_blocks,
    page_file,
    pages,
    relative_links,
)
from tools.docs_hooks import GENERATED, on_page_markdown

DEAD_LETTERS = (DOCS / "reference" / "dead-letters.md").read_text()
CONFIG = (DOCS / "reference" / "config.md").read_text()


@pytest.mark.parametrize("stage", typing.get_args(DeadLetterStage))
def test_every_dead_letter_stage_is_documented(stage: str) -> None:
    assert re.search(rf"^\| `{stage}` \|", DEAD_LETTERS, re.MULTILINE), stage


def test_every_config_field_has_a_description() -> None:
    undescribed = [field.path for field in config_fields() if not field.description.strip()]
    assert not undescribed


def test_the_config_page_is_the_generated_reference_and_no_hand_table() -> None:
    """The page holds the generated tables (one per section, a row per field) and no table of
    its own: one source, the models, so that code and docs cannot drift (issue 37)."""
    assert "<!-- generated: config-fields -->" in CONFIG
    assert not re.search(r"^\|", CONFIG, re.MULTILINE), "a hand-written table"
    shown = on_page_markdown(CONFIG)
    assert config_fields_markdown() in shown
    sections = dict(
        re.findall(r"^## ([^\n]+)\n\n(\| field \|.*?)(?=\n\n|\Z)", shown, re.MULTILINE | re.DOTALL)
    )
    for paths, model in config_sections():
        title = ", ".join(f"`{path}`" for path in paths) if paths != [""] else "Top level"
        rows = set(re.findall(r"^\| `([a-z_]+)` \|", sections[title], re.MULTILINE))
        nested = {name for name, info in model.model_fields.items() if _is_section(info.annotation)}
        assert rows == set(model.model_fields) - nested, title


def _is_section(annotation: object) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def test_a_description_links_the_docs_relative_to_docs_and_the_page_resolves_them() -> None:
    """Descriptions link relative to docs/ (``how-to/metrics.md``), readable wherever they are
    shown; the config page's tables link from docs/reference/ (every link of the page, the
    generated ones too, is checked by ``test_every_relative_link_resolves``)."""
    described = " ".join(field.description for field in config_fields())
    assert "](how-to/metrics.md#metrics-and-health)" in described
    assert "](../how-to/metrics.md#metrics-and-health)" in config_fields_markdown()
    page = DOCS / "reference" / "config.md"
    assert "../how-to/metrics.md#metrics-and-health" in relative_links(page)


def test_the_dead_letter_topic_default_is_what_the_config_holds() -> None:
    """A dead_letter_topic documented as ``<app_id>-dead-letters`` once read ``None``."""
    (field,) = [f for f in config_fields() if f.path == "dead_letter_topic"]
    assert "`<app_id>-dead-letters`" in field.description
    config = AppConfig.load(None, app_id="shop", inputs=[{"topic": "orders"}], initial_processors=1)
    assert config.dead_letter_topic == config.dead_letters == "shop-dead-letters"


def test_the_tutorial_shows_a_typed_store_and_the_quix_side_by_side() -> None:
    first = [b.code for b in code_blocks(DOCS / "tutorial" / "first-app.md")]
    assert any(".store(" in code and "BaseModel" in code for code in first), (
        "the tutorial shows a typed store: app.store(name, Model)"
    )
    windows = [b for b in code_blocks(DOCS / "tutorial" / "windows.md") if b.language == "python"]
    assert len([b for b in windows if not b.compile_only]) >= 3, "window, its test, the timer"
    assert any("tumbling_window" in b.code for b in windows), "the Quix side by side"


def _statements(source: str) -> list[str]:
    """The source's top-level statements (as ``_code_only`` keeps them), each dumped, without
    an ``if __name__ == "__main__":`` block."""
    kept = ast.parse(_code_only(source, dump=False))
    return [
        ast.dump(statement)
        for statement in kept.body
        if not (isinstance(statement, ast.If) and "__main__" in ast.unparse(statement.test))
    ]


@pytest.mark.parametrize(
    "page",
    [page for page in pages() if page_file(page) != page],
    ids=lambda page: str(page.relative_to(ROOT)),
)
def test_a_block_that_shows_an_example_file_is_that_file(page: Path) -> None:
    """A page that says a block is ``examples/.../app.py`` shows the file's code as it is
    (its docstrings and comments aside), then may go on (a test of it, say): the wordcount
    block was a paraphrase nothing compared with the file (issue 37)."""
    example = page_file(page)
    first = next(b for b in code_blocks(page) if b.language == "python" and not b.compile_only)
    wanted = _statements(example.read_text())
    assert _statements(first.code)[: len(wanted)] == wanted, (
        f"{page.relative_to(ROOT)}:{first.line} is not {example.relative_to(ROOT)} as it is"
    )


def _code_only(source: str, dump: bool = True) -> str:
    """The source's syntax tree without its docstrings and ``__future__`` imports (``dump``:
    as ``ast.dump``, else as source)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            node.body = [  # type: ignore[attr-defined]
                statement
                for i, statement in enumerate(body)
                if not (isinstance(statement, ast.ImportFrom) and statement.module == "__future__")
                and not (
                    i == 0
                    and isinstance(statement, ast.Expr)
                    and isinstance(statement.value, ast.Constant)
                    and isinstance(statement.value.value, str)
                )
            ]
    return ast.dump(tree) if dump else ast.unparse(tree)


def test_the_comparison_shows_the_sensors_example_as_it_is_and_each_tools_app() -> None:
    blocks = code_blocks(DOCS / "comparison.md")
    (ours,) = [b for b in blocks if b.language == "python" and not b.compile_only]
    example = (ROOT / "examples" / "sensors" / "app.py").read_text()
    assert _code_only(ours.code) == _code_only(example)
    shown = "\n".join(b.code for b in blocks)
    # Quix Streams, Faust, Kafka Streams, Flink, Bytewax
    for window in (
        "tumbling_window(",
        ".tumbling(",
        "ofSizeAndGrace(",
        "EventTimeWindows",
        "Windower(",
    ):
        assert window in shown, window


@pytest.mark.parametrize("page", pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    for link in relative_links(page):
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        assert path.exists(), f"{page.relative_to(ROOT)}: {link}"
        if anchor and path.suffix == ".md":
            assert anchor in anchors(path), f"{page.relative_to(ROOT)}: {link}"


def test_every_docs_page_is_in_the_navigation() -> None:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda *_: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)  # noqa: S506 - SafeLoader

    def listed(nav: object) -> set[str]:
        if isinstance(nav, str):
            return {nav}
        if isinstance(nav, list):
            return set().union(*(listed(item) for item in nav))
        if isinstance(nav, dict):
            return set().union(*(listed(item) for item in nav.values()))
        return set()

    on_disk = {str(page.relative_to(DOCS)) for page in DOCS.rglob("*.md")}
    assert listed(config["nav"]) == on_disk


def test_every_generated_marker_names_a_generator_and_is_filled_in() -> None:
    names = {
        name
        for page in DOCS.rglob("*.md")
        for name in re.findall(r"^<!-- generated: ([\w-]+) -->$", page.read_text(), re.MULTILINE)
    }
    assert names == set(GENERATED), (names, set(GENERATED))
    page = "a\n<!-- generated: handoff-phases -->\n<!-- snippet: compile-only, why -->\nb"
    filled = on_page_markdown(page)
    assert "<!--" not in filled and "stateDiagram-v2" in filled


def test_the_cli_reference_holds_every_command() -> None:
    reference = cli_markdown()
    for command in ("broker start", "run", "topics create", "scale", "status", "state dump"):
        assert f"## `splitstate {command}`" in reference, command
    assert "--processor-id" in reference and "--abort" in reference


def test_the_control_log_reference_holds_every_kind_and_transition() -> None:
    records = control_records_markdown()
    assert all(f"| `{kind}` |" in records for kind in KINDS), KINDS
    phases = handoff_phases_markdown()
    for (state, event), after in HANDOFF_MACHINE.table.items():
        assert f"| `{state}` | `{event}` | `{after}` |" in phases
