"""A key's stored interval-join buffer: its JSON form, values that are no UTF-8 text, and a
damaged one."""

from __future__ import annotations

import orjson
import pytest

from framework.joins import DamagedJoinError, JoinBuffer
from framework.joins.buffer import Buffered


def test_a_buffer_is_stored_as_json_and_read_back_alike() -> None:
    buffer = JoinBuffer(
        [Buffered(100, 0, 7, 99, b'{"n": 1}', matched=True)],
        [Buffered(90, 1, 3, None, b"\xff\xfe"), Buffered(95, 1, 4, None, None)],
    )
    stored = buffer.encode()
    assert stored is not None
    assert orjson.loads(stored) == {
        "l": [[100, 0, 7, 99, '{"n": 1}', 1]],
        "r": [[90, 1, 3, None, {"b64": "//4="}, 0], [95, 1, 4, None, None, 0]],
    }
    again = JoinBuffer.decode(stored)
    assert again.sides == buffer.sides
    assert JoinBuffer().encode() is None
    assert JoinBuffer.decode(None).sides == {"l": [], "r": []}


@pytest.mark.parametrize(
    "stored",
    [
        [1, 2],
        {"x": []},
        {"l": "no"},
        {"l": [[1, 2, 3]]},
        {"l": [["1", 0, 0, None, None, 0]]},
        {"l": [[1, 0, 0, "t", None, 0]]},
        {"l": [[1, 0, 0, None, 5, 0]]},
        {"l": [[1, 0, 0, None, None, 2]]},
    ],
)
def test_a_damaged_buffer_is_refused(stored: object) -> None:
    with pytest.raises(DamagedJoinError):
        JoinBuffer.decode(orjson.dumps(stored))
    with pytest.raises(DamagedJoinError):
        JoinBuffer.decode(b"{no json")
