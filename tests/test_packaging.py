"""The release ``python -m build`` makes (an sdist, and a wheel built from that sdist) holds the
whole framework, its Maven poms and the ``splitstate`` command, and installs into a fresh
virtualenv where a new app passes its test (issue 37 §3: `pip install .` into a fresh
virtualenv must give a working `splitstate`; `python -m build` makes a wheel and sdist that
install and pass a smoke test in CI)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("framework", "statestore", "rebalance")
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def package_files() -> set[str]:
    """Every file of our packages in this checkout, relative to it."""
    return {
        path.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for path in (ROOT / package).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run ``command``; its standard output, or a failed assertion showing both outputs."""
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=600
    )
    assert done.returncode == 0, f"{command}: {done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_release_builds_installs_into_a_fresh_virtualenv_and_runs(tmp_path: Path) -> None:
    run([sys.executable, "-m", "build", "--outdir", str(tmp_path / "dist"), str(ROOT)], ROOT)
    (sdist,) = (tmp_path / "dist").glob("splitstate-*.tar.gz")
    (wheel,) = (tmp_path / "dist").glob("splitstate-*.whl")
    assert sdist.name == f"splitstate-{VERSION}.tar.gz"
    assert wheel.name.startswith(f"splitstate-{VERSION}-py3-none-any")

    top = f"splitstate-{VERSION}/"
    with tarfile.open(sdist) as archive:
        in_sdist = {name.removeprefix(top) for name in archive.getnames()}
    assert {"pyproject.toml", "README.md", *package_files()} <= in_sdist

    with zipfile.ZipFile(wheel) as archive:
        in_wheel = set(archive.namelist())
        entry_points = next(n for n in in_wheel if n.endswith(".dist-info/entry_points.txt"))
        assert "splitstate = framework.ops.cli:main" in archive.read(entry_points).decode()
    assert package_files() - in_wheel == set(), "files of the packages the wheel leaves out"
    assert {name.split("/")[0] for name in in_wheel} == {
        *PACKAGES,
        f"splitstate-{VERSION}.dist-info",
    }

    # a fresh virtualenv with the wheel installed; its dependencies are this environment's
    # (a .pth line adds their directory without its .pth files, so not this checkout)
    # (nothing of this process's Python: a PYTHONPATH holding this checkout, which a Spark
    # session of an earlier test sets, made pip find splitstate installed and skip the wheel)
    fresh = tmp_path / "fresh"
    bin_dir = fresh / "bin"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTHON", "PIP_")) and key != "VIRTUAL_ENV"
    }
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    run([sys.executable, "-m", "venv", str(fresh)], tmp_path, env)
    pip = [str(bin_dir / "pip"), "install", "-q", "--no-deps", "--no-index", str(wheel)]
    run(pip, tmp_path, env)
    fresh_site = run(
        [str(bin_dir / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        tmp_path,
        env,
    ).strip()
    (Path(fresh_site) / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")

    where = run(
        [str(bin_dir / "python"), "-c", "import framework; print(framework.__file__)"],
        tmp_path,
        env,
    )
    assert Path(where.strip()).is_relative_to(Path(fresh_site)), where
    assert run(["splitstate", "--version"], tmp_path, env).strip() == f"splitstate {VERSION}"
    poms = run(
        [
            str(bin_dir / "python"),
            "-c",
            "from importlib import resources\n"
            "print(sorted(p.name for p in (resources.files('framework') / 'resources').iterdir()))",
        ],
        tmp_path,
        env,
    )
    assert "kafka-broker.pom.xml" in poms and "spark-kafka.pom.xml" in poms, poms
    run(["splitstate", "new", "probe", "--directory", "made"], tmp_path, env)
    tested = run(
        [str(bin_dir / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "made/probe"],
        tmp_path,
        env,
    )
    assert " passed" in tested, tested
