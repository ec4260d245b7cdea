"""`splitstate broker start|stop|status` as a user runs it, in a directory of its own."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.harness import splitstate

pytestmark = pytest.mark.integration


def bootstrap_from(output: str) -> str:
    last = output.strip().splitlines()[-1]
    assert last.startswith("bootstrap.servers=127.0.0.1:"), output
    return last.split("=", 1)[1]


def test_start_stop_twice_keeps_data(tmp_path: Path) -> None:
    directory = str(tmp_path / "broker")
    assert splitstate("broker", "status", "--dir", directory).returncode == 3

    first = splitstate("broker", "start", "--dir", directory)
    assert first.returncode == 0, first.stderr
    bootstrap = bootstrap_from(first.stdout)
    try:
        status = splitstate("broker", "status", "--dir", directory)
        assert status.returncode == 0
        assert bootstrap_from(status.stdout) == bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("kept", 3, 1)])["kept"].result(timeout=30)
    finally:
        stopped = splitstate("broker", "stop", "--dir", directory)
    assert stopped.returncode == 0
    assert "broker stopped" in stopped.stdout
    assert splitstate("broker", "status", "--dir", directory).returncode == 3

    second = splitstate("broker", "start", "--dir", directory)
    assert second.returncode == 0, second.stderr
    try:
        assert bootstrap_from(second.stdout) == bootstrap  # same port again
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = admin.list_topics(timeout=30).topics
        assert "kept" in topics
        assert len(topics["kept"].partitions) == 3
    finally:
        assert splitstate("broker", "stop", "--dir", directory).returncode == 0
    again = splitstate("broker", "stop", "--dir", directory)
    assert again.returncode == 0
    assert "no broker runs" in again.stdout


def test_busy_port_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = splitstate("broker", "start", "--dir", str(tmp_path / "b"), "--port", str(port))
    assert result.returncode == 2
    assert f"Port {port} on 127.0.0.1 is already in use" in result.stderr
    assert "--port" in result.stderr
    assert "Traceback" not in result.stderr
    assert splitstate("broker", "status", "--dir", str(tmp_path / "b")).returncode == 3
