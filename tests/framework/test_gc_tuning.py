"""The processor loop runs Python's cycle collector less often, and puts it back after."""

from __future__ import annotations

import gc

import pytest

from framework.gc_tuning import YOUNG_THRESHOLD, fewer_collections


def test_collections_are_rarer_inside_and_as_before_after() -> None:
    before = gc.get_threshold()
    with fewer_collections():
        assert gc.get_threshold()[0] >= YOUNG_THRESHOLD
    assert gc.get_threshold() == before


def test_loops_in_one_process_put_it_back_only_when_the_last_ends() -> None:
    """Several loops run in one process (the simulation's processors, tests): one ending
    must not put the collector back under another still running, nor the last end with
    another's setting (the simulation ran 2x slower with that)."""
    before = gc.get_threshold()
    first, second = fewer_collections(), fewer_collections()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert gc.get_threshold()[0] >= YOUNG_THRESHOLD
    second.__exit__(None, None, None)
    assert gc.get_threshold() == before


def test_the_collector_is_put_back_when_the_loop_raises() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError("the loop failed")
    assert gc.get_threshold() == before
