"""The wheel ``pip install .`` builds holds the whole framework, its Maven poms and the
``splitstate`` command, and works from where it is installed, not only from this checkout
(issue 37 §3: `pip install .` into a fresh virtualenv must give a working `splitstate`)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("framework", "statestore", "rebalance")


def test_the_wheel_holds_every_file_of_the_packages_and_runs_from_where_it_is(
    tmp_path: Path,
) -> None:
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check"]
    built = subprocess.run(
        [*pip, "-w", str(tmp_path / "dist"), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("splitstate-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        archive.extractall(tmp_path / "installed")
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        assert "splitstate = framework.ops.cli:main" in archive.read(entry_points).decode()
    ours = {
        path.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for path in (ROOT / package).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert ours - names == set(), "files of the packages the wheel leaves out"
    assert {name.split("/")[0] for name in names} == {
        *PACKAGES,
        wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info",
    }

    # from the unpacked wheel (first on the path), not from this checkout
    probe = (
        "import framework, framework.jvm, framework.ops.cli\n"
        "from importlib import resources\n"
        "print(framework.__file__)\n"
        "print(sorted(p.name for p in (resources.files('framework') / 'resources').iterdir()))\n"
        "framework.ops.cli.main(['new', 'probe', '--directory', 'made'])\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "installed")},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    where, poms, *_ = ran.stdout.splitlines()
    assert Path(where).is_relative_to(tmp_path / "installed"), where
    assert "kafka-broker.pom.xml" in poms and "spark-kafka.pom.xml" in poms, poms
    assert (tmp_path / "made" / "probe" / "app.py").is_file()
