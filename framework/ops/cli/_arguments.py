"""Arguments that several subcommands take, as argparse parents (``parents=[...]``)."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["app_arguments"]


def app_arguments() -> argparse.ArgumentParser:
    """A parent parser of ``MODULE:APP [--config FILE]``: which app, and its config file."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "app",
        metavar="MODULE:APP",
        help="e.g. examples.wordcount.app:app, or a file: examples/wordcount/app.py:app",
    )
    parent.add_argument("--config", type=Path, help="config file (YAML or TOML)")
    return parent
