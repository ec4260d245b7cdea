"""A joining processor's bootstrap job: adopting finished output, and failures explained."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from framework import App, AppConfig
from framework.bootstrap import Manifest, TargetState
from framework.bootstrap.child_process import BootstrapRun, _running, bootstrap_directory
from framework.processing import ProcessorStoppedError
from rebalance.positions import OffsetRange


def make_app(tmp_path: Path, spec: str | None = "examples.wordcount.app:app") -> App:
    app = App(
        AppConfig.load(
            None,
            app_id="joiner",
            inputs=[{"topic": "words", "partitions": 4}],
            initial_processors=2,
            state_dir=str(tmp_path / "state"),
        )
    )
    app.store("counts")
    app.spec = spec
    return app


def start(app: App) -> BootstrapRun:
    return BootstrapRun.start(
        app,
        processor=2,
        generation=1,
        processors=3,
        gained_from=(2, [0]),
        ranges={("words", 2): OffsetRange(0, 10)},
        covers=[("words", 2)],
    )


def test_a_finished_output_is_adopted_without_running_again(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    output = bootstrap_directory(app, 2, 1) / "output"
    output.mkdir(parents=True)
    Manifest({2: TargetState({}, 0, {("words", 2): 10})}).write(output)
    run = start(app)
    assert not (run.directory / "request.json").exists()  # nothing was started
    manifest = run.poll()
    assert manifest is not None
    assert manifest.targets[2].offsets == {("words", 2): 10}


def test_a_failed_job_stops_the_joiner_with_its_reason(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    directory = bootstrap_directory(app, 2, 1)
    directory.mkdir(parents=True)
    (directory / "job.log").write_text(
        "INFO starting\nsplitstate bootstrap error: Java was not found. Fix: install Java\n"
    )
    run = BootstrapRun(directory, None)  # as adopted after a restart, job gone
    with pytest.raises(ProcessorStoppedError) as error:
        run.poll()
    assert "Java was not found" in str(error.value)
    assert "bootstrap: replay" in str(error.value)


def test_an_app_without_a_spec_cannot_start_a_job(tmp_path: Path) -> None:
    with pytest.raises(ProcessorStoppedError, match="splitstate run MODULE:APP"):
        start(make_app(tmp_path, spec=None))


@pytest.mark.parametrize("module", ["framework.bootstrap.child_main", "framework.bootstrap_job"])
def test_a_running_job_is_recognised_by_its_module_old_name_or_new(
    tmp_path: Path, module: str
) -> None:
    """A job a processor started before an upgrade (module ``framework.bootstrap_job``) is
    still running: a restarted processor must adopt it, not start a second job."""
    directory = tmp_path / "processor-1-generation-2"
    directory.mkdir()
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", module, str(directory)]
    )
    try:
        (directory / "pid").write_text(str(child.pid))
        deadline = time.monotonic() + 10  # until the child has exec'd (its cmdline is ours before)
        while not _running(directory) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _running(directory)
        assert not _running(tmp_path)  # another directory's job
    finally:
        child.kill()
        child.wait()
    assert not _running(directory)
