"""``splitstate new NAME``: a new app's directory, whose test passes and which runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from framework.ops.scaffold import new_app

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``new`` subcommand."""
    new = commands.add_parser(
        "new",
        help="write a new app (app.py, config.yaml, test_app.py, README.md) into a new "
        "directory, a Python package",
    )
    new.add_argument(
        "name",
        metavar="NAME",
        help="the app's name (a lowercase Python name): its directory, package and app_id",
    )
    new.add_argument(
        "--directory", type=Path, default=Path(), help="where to make it (default: here)"
    )
    new.set_defaults(handler=_new)


def _new(args: argparse.Namespace) -> int:
    directory = new_app(args.name, args.directory)
    print(f"wrote {directory}/: app.py, config.yaml, test_app.py, README.md, __init__.py")
    print(f"next: cd {directory} && pytest test_app.py; its README says how to run it")
    return 0
