"""The processor loop runs Python's cycle collector less often, and puts it back after."""

from __future__ import annotations

import gc

import pytest

from framework.runtime.gc_tuning import YOUNG_THRESHOLD, fewer_collections


def test_collections_are_rarer_inside_and_as_before_after() -> None:
    before = gc.get_threshold()
    frozen = gc.get_freeze_count()
    with fewer_collections():
        assert gc.get_threshold()[0] >= YOUNG_THRESHOLD
        assert gc.get_freeze_count() > frozen  # objects made before the loop are not scanned
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == frozen


def test_the_collector_is_put_back_when_the_loop_raises() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError("the loop failed")
    assert gc.get_threshold() == before
