"""A single-node Apache Kafka broker (KRaft, broker + controller) on 127.0.0.1.

``LocalBroker(directory)`` owns one directory: ``server.properties``, the KRaft data under
``data/``, logs under ``logs/`` and ``broker.json`` with the running process and its ports.
Starting formats the storage on first use and reuses it afterwards (a restart keeps topics
and offsets); the broker runs detached, so it outlives the command that started it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from framework.errors import SplitstateError
from framework.jvm import find_java, kafka_classpath

__all__ = ["BrokerError", "BrokerInfo", "LocalBroker", "free_port", "new_cluster_id"]

_HOST = "127.0.0.1"
_STATE_FILE = "broker.json"
_LOG_TAIL_LINES = 40


class BrokerError(SplitstateError):
    """The local broker could not be started, stopped or found."""


@dataclass(frozen=True)
class BrokerInfo:
    """Where a local broker runs."""

    pid: int
    port: int
    controller_port: int
    cluster_id: str

    @property
    def bootstrap_servers(self) -> str:
        """The ``bootstrap.servers`` value clients use."""
        return f"{_HOST}:{self.port}"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((_HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _port_in_use(port: int) -> bool:
    """Whether something listens on ``port`` (a port in TIME_WAIT is free, as for Kafka)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((_HOST, port))
        except OSError:
            return True
    return False


def new_cluster_id() -> str:
    """A Kafka cluster id: a random UUID in URL-safe base64 without padding.

    Like Kafka's ``Uuid.randomUuid``, it never starts with ``-`` (a command line would take
    it for an option).
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _process_alive(pid: int) -> bool:
    try:
        # Reap it if it is our own exited child, so it does not linger as a zombie.
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


class LocalBroker:
    """Start, stop and inspect the Kafka broker that lives in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory.expanduser().resolve()

    @property
    def log_file(self) -> Path:
        """The broker's main log."""
        return self.directory / "logs" / "server.log"

    @property
    def _properties_file(self) -> Path:
        return self.directory / "server.properties"

    def _recorded(self) -> BrokerInfo | None:
        try:
            data = json.loads((self.directory / _STATE_FILE).read_text())
            return BrokerInfo(**data)
        except (OSError, ValueError, TypeError):
            return None

    def _owns(self, pid: int) -> bool:
        """Whether ``pid`` is alive and is the broker of this directory (not a reused pid)."""
        if not _process_alive(pid):
            return False
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return str(self._properties_file).encode() in cmdline

    def status(self) -> BrokerInfo | None:
        """The running broker of this directory, or ``None`` when none runs."""
        recorded = self._recorded()
        if recorded is not None and self._owns(recorded.pid):
            return recorded
        return None

    def start(self, port: int | None = None, timeout: float = 120.0) -> BrokerInfo:
        """Start the broker (formatting its storage on first use) and wait until it answers."""
        running = self.status()
        if running is not None:
            if port is not None and port != running.port:
                raise BrokerError(
                    f"A broker already runs from {self.directory} on port {running.port}. "
                    f"Fix: `splitstate broker stop --dir {self.directory}` first, "
                    "or use another --dir."
                )
            return running
        java = find_java()
        classpath = kafka_classpath()
        recorded = self._recorded()
        port = port if port is not None else (recorded.port if recorded else free_port())
        if _port_in_use(port):
            raise BrokerError(
                f"Port {port} on {_HOST} is already in use. Fix: pick a free port with "
                "--port PORT, omit --port to get a free one, or stop what listens there."
            )
        controller_port = recorded.controller_port if recorded else free_port()
        if controller_port == port or _port_in_use(controller_port):
            controller_port = free_port()
        cluster_id = recorded.cluster_id if recorded else new_cluster_id()
        (self.directory / "logs").mkdir(parents=True, exist_ok=True)
        self._write_properties(port, controller_port)
        if not (self.directory / "data" / "meta.properties").exists():
            self._format(java.executable, classpath, cluster_id)
        process = self._launch(java.executable, classpath)
        info = BrokerInfo(process.pid, port, controller_port, cluster_id)
        (self.directory / _STATE_FILE).write_text(json.dumps(asdict(info)) + "\n")
        self._wait_until_ready(process, info, timeout)
        return info

    def stop(self, timeout: float = 60.0) -> BrokerInfo | None:
        """Stop the broker and wait for it to exit; returns what was stopped, if anything."""
        running = self.status()
        if running is None:
            return None
        os.kill(running.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _process_alive(running.pid):
                return running
            time.sleep(0.2)
        with contextlib.suppress(ProcessLookupError):
            os.kill(running.pid, signal.SIGKILL)
        while _process_alive(running.pid):
            time.sleep(0.1)
        return running

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the broker's logs (its own log, then its console)."""
        parts = []
        for path in (self.log_file, self.directory / "logs" / "console.log"):
            if path.exists():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- {path} ---\n" + "\n".join(text))
        return "\n".join(parts) or "(no log written)"

    def _write_properties(self, port: int, controller_port: int) -> None:
        properties = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{_HOST}:{controller_port}",
            "listeners": f"PLAINTEXT://{_HOST}:{port},CONTROLLER://{_HOST}:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://{_HOST}:{port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.directory / "data"),
            "auto.create.topics.enable": "false",
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "share.coordinator.state.topic.num.partitions": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        text = "".join(f"{key}={value}\n" for key, value in properties.items())
        self._properties_file.write_text("# Written by `splitstate broker start`.\n" + text)

    def _format(self, java: Path, classpath: str, cluster_id: str) -> None:
        result = subprocess.run(
            [
                str(java),
                "-cp",
                classpath,
                "kafka.tools.StorageTool",
                "format",
                "--ignore-formatted",
                "-t",
                cluster_id,
                "-c",
                str(self._properties_file),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise BrokerError(
                f"Formatting the KRaft storage in {self.directory / 'data'} failed:\n"
                f"{(result.stdout + result.stderr).strip()[-2000:]}\n"
                "Fix: if the directory holds an old or foreign broker, use another --dir."
            )

    def _launch(self, java: Path, classpath: str) -> subprocess.Popen[bytes]:
        log4j = resources.files("framework") / "resources" / "log4j2.properties"
        logs = self.directory / "logs"
        command = [
            str(java),
            "-Xms256m",
            "-Xmx1g",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dkafka.logs.dir={logs}",
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            classpath,
            "kafka.Kafka",
            str(self._properties_file),
        ]
        with (logs / "console.log").open("ab") as console:
            return subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=self.directory,
            )

    def _wait_until_ready(
        self, process: subprocess.Popen[bytes], info: BrokerInfo, timeout: float
    ) -> None:
        from confluent_kafka.admin import AdminClient  # noqa: PLC0415 - heavy import, used here only

        admin = AdminClient({"bootstrap.servers": info.bootstrap_servers, "log_level": 0})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise BrokerError(
                    f"The Kafka broker exited during start (status {process.returncode}).\n"
                    f"{self.log_tail()}\n"
                    "Fix: read the log above; a port taken meanwhile or a damaged data "
                    "directory are the usual causes (use another --port or --dir)."
                )
            try:
                metadata = admin.list_topics(timeout=2)
            except Exception:
                time.sleep(0.3)
                continue
            if metadata.brokers:
                return
        self.stop()
        raise BrokerError(
            f"The Kafka broker did not answer metadata requests within {timeout:.0f}s.\n"
            f"{self.log_tail()}\nFix: read the log above; the broker was stopped."
        )
