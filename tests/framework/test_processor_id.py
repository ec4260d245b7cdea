"""Which processor `splitstate run` runs: the flag, the environment, a StatefulSet ordinal."""

from __future__ import annotations

import pytest

from framework.config import ConfigError
from framework.ops.cli import build_parser
from framework.ops.processor_id import resolve_processor_id
from framework.ops.supervisor import Supervisor

ORDINAL = {"SPLITSTATE_PROCESSOR_ID": "ordinal"}


def test_the_flag_wins_over_the_environment() -> None:
    found = resolve_processor_id(2, {"SPLITSTATE_PROCESSOR_ID": "5"}, "wordcount-7")
    assert found == (2, "--processor-id")


def test_the_environment_names_the_id() -> None:
    found = resolve_processor_id(None, {"SPLITSTATE_PROCESSOR_ID": " 5 "}, "wordcount-7")
    assert found == (5, "SPLITSTATE_PROCESSOR_ID")


def test_a_statefulset_pod_takes_its_ordinal_when_asked() -> None:
    processor, source = resolve_processor_id(None, ORDINAL, "wordcount-processor-12")
    assert processor == 12
    assert "wordcount-processor-12" in source


def test_a_hostname_is_no_id_unless_asked() -> None:
    with pytest.raises(ConfigError, match=r"no processor id given.*SPLITSTATE_PROCESSOR_ID"):
        resolve_processor_id(None, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, "build-2")


@pytest.mark.parametrize("hostname", ["wordcount", "wordcount-", "WORD-3x", "node-3.local"])
def test_a_hostname_without_an_ordinal_is_refused(hostname: str) -> None:
    with pytest.raises(ConfigError, match=f"hostname {hostname!r} has no StatefulSet ordinal"):
        resolve_processor_id(None, ORDINAL, hostname)


@pytest.mark.parametrize("value", ["three", "", "1.5", "1_0", "+3", "-1", "\u0663"])
def test_a_malformed_environment_value_is_named(value: str) -> None:
    with pytest.raises(ConfigError, match=r"SPLITSTATE_PROCESSOR_ID=.* is neither"):
        resolve_processor_id(None, {"SPLITSTATE_PROCESSOR_ID": value}, None)


def test_a_negative_flag_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"processor id -1 \(from --processor-id\) is negative"):
        resolve_processor_id(-1, {}, None)


def test_a_processor_started_by_run_all_says_so() -> None:
    """Found by a new user: under `run --all` each processor logged "id from
    --processor-id", a flag they never gave."""
    supervisor = Supervisor.__new__(Supervisor)  # command() needs only these
    supervisor.app_spec, supervisor.config_file, supervisor.log_format = "m:app", None, "text"
    command = supervisor.command(3)
    args = build_parser().parse_args(command[command.index("run") :])
    found = resolve_processor_id(args.processor_id, {}, supervised=args.supervised)
    assert found == (3, "the supervisor of `splitstate run --all`")
    alone = build_parser().parse_args(["run", "m:app", "--processor-id", "3"])
    assert resolve_processor_id(alone.processor_id, {}, supervised=alone.supervised) == (
        3,
        "--processor-id",
    )
