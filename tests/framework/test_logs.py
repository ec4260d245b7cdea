"""`--log-format json`: one JSON object per line naming the app, processor and generation."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import orjson
import pytest

from framework.config import AppConfig, ConfigError
from framework.config_checks import check_environment
from framework.ops.cli import build_parser
from framework.ops.logs import ContextFilter, JsonFormatter, default_log_format
from framework.ops.supervisor import Supervisor
from framework.runtime.log_context import LOG_CONTEXT, note_generation
from rebalance.control import ControlState, Generation


@pytest.fixture(autouse=True)
def _context_kept() -> Iterator[None]:
    saved = (LOG_CONTEXT.app, LOG_CONTEXT.processor, LOG_CONTEXT.generation)
    yield
    LOG_CONTEXT.app, LOG_CONTEXT.processor, LOG_CONTEXT.generation = saved


def _json_logger() -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(ContextFilter())
    logger = logging.getLogger("test.json-logs")
    logger.handlers = [handler]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    return logger, stream


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in stream.getvalue().splitlines()]


def test_each_record_is_one_json_line_with_the_context_as_of_then() -> None:
    logger, stream = _json_logger()
    LOG_CONTEXT.app, LOG_CONTEXT.processor = "wordcount", 2
    note_generation(ControlState())  # no generation yet
    logger.info("starting %s", "up")
    note_generation(ControlState(generation=Generation(3, 4)))  # a scale completed
    logger.warning('a "quoted"\nmessage')
    first, second = _lines(stream)
    assert first["message"] == "starting up" and first["generation"] is None
    assert second["message"] == 'a "quoted"\nmessage' and second["generation"] == 3
    for line in (first, second):
        assert line["app"] == "wordcount" and line["processor"] == 2
        assert line["logger"] == "test.json-logs"
        assert str(line["time"]).endswith("Z") and "T" in str(line["time"])
    assert [first["level"], second["level"]] == ["INFO", "WARNING"]


def test_an_exception_is_a_string_field() -> None:
    logger, stream = _json_logger()
    try:
        raise ValueError("bad value")
    except ValueError:
        logger.exception("it failed")
    [line] = _lines(stream)
    assert line["message"] == "it failed"
    assert isinstance(line["exception"], str)
    assert "Traceback" in line["exception"] and "ValueError: bad value" in line["exception"]


def test_the_format_comes_from_the_option_else_the_environment() -> None:
    assert default_log_format({}) == "text"
    assert default_log_format({"SPLITSTATE_LOG_FORMAT": "json"}) == "json"
    with pytest.raises(ConfigError, match=r"SPLITSTATE_LOG_FORMAT=xml is not a log format"):
        default_log_format({"SPLITSTATE_LOG_FORMAT": "xml"})
    # the variable is one the framework reads: the config check does not reject it
    assert check_environment(AppConfig, {"SPLITSTATE_LOG_FORMAT": "json"}) == []


def test_log_format_is_taken_before_or_after_run() -> None:
    parser = build_parser()
    before = parser.parse_args(["--log-format", "json", "run", "m:app", "--all"])
    after = parser.parse_args(["run", "m:app", "--all", "--log-format", "json"])
    neither = parser.parse_args(["run", "m:app", "--all"])
    assert (before.log_format, after.log_format, neither.log_format) == ("json", "json", None)
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "m:app", "--all", "--log-format", "xml"])


def test_the_supervisors_children_log_as_it_does() -> None:
    supervisor = Supervisor.__new__(Supervisor)  # command() needs only these
    supervisor.app_spec, supervisor.config_file, supervisor.log_format = "m:app", None, "json"
    command = supervisor.command(3)
    assert command[command.index("run") :] == [
        "run", "m:app", "--processor-id", "3", "--supervised", "--log-format", "json",
    ]  # fmt: skip


def _one_line(stream: io.StringIO, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    """The one JSON line written, with nothing on stderr (no "--- Logging error ---")."""
    [line] = stream.getvalue().splitlines()
    assert capsys.readouterr().err == ""
    parsed = orjson.loads(line)  # strict: valid UTF-8, no lone surrogate escapes
    assert isinstance(parsed, dict)
    return parsed


def test_a_message_with_lone_surrogates_is_still_a_json_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logger, stream = _json_logger()
    logger.warning("file %s is bad", "caf\udce9.txt")  # a name os.fsdecode could not decode
    line = _one_line(stream, capsys)
    assert line["message"] == "file caf\\udce9.txt is bad" and line["level"] == "WARNING"


def test_a_message_whose_arguments_do_not_fit_its_format_is_still_logged(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logger, stream = _json_logger()
    logger.info("%d records", "x")
    line = _one_line(stream, capsys)
    assert line["message"] == "'%d records' ('x',)" and line["level"] == "INFO"


def test_an_int_above_64_bits_is_still_a_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    logger, stream = _json_logger()
    logger.handlers[0].filters.clear()  # the context from the record's extra fields
    logger.info("huge", extra={"app": "a", "processor": 1, "generation": 2**70})
    line = _one_line(stream, capsys)
    assert line["message"] == "huge" and line["generation"] == 2**70


def test_a_field_whose_str_fails_is_still_a_json_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no")

    logger, stream = _json_logger()
    logger.handlers[0].filters.clear()
    logger.info("odd", extra={"app": Unprintable(), "processor": None, "generation": None})
    line = _one_line(stream, capsys)
    assert line["message"] == "odd"
    assert line["app"] == "<Unprintable: str() raised RuntimeError>"
