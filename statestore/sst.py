"""Writing sorted runs of a store's values as SST files, for bulk load.

``SstRunWriter`` stores user keys as the database does (``KeyLayout.stored``), encodes values
with the store's codec (the same bytes a batch would write) and streams them into SST files of
at most ``max_items`` items each, holding nothing in memory. Items must come in strictly
increasing order of their stored keys (``KeyLayout.sorted_items`` sorts a run that fits in
memory).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from statestore.codec import Codec, JsonCodec
from statestore.key_layout import KeyLayout
from statestore.rocks import check_order, write_sst_file

__all__ = ["SstRunWriter", "write_sst_file"]


class SstRunWriter:
    """Write one store's sorted ``(key, value)`` run as numbered SST files in a directory."""

    def __init__(
        self,
        directory: Path,
        codec: Codec[Any] | None = None,
        max_items: int = 5_000_000,
        *,
        layout: KeyLayout,
    ) -> None:
        self.directory = directory
        self.layout = layout
        self.codec: Codec[Any] = codec or JsonCodec()
        self.max_items = max_items
        self.files: list[Path] = []

    def write(self, items: Iterable[tuple[bytes, Any]]) -> list[Path]:
        """Encode and write ``(user key, value)`` items (in stored order); returns every file
        written so far."""
        self.directory.mkdir(parents=True, exist_ok=True)
        encoded = self._encoded(items)
        for first in encoded:
            path = self.directory / f"run-{len(self.files):05d}.sst"
            chunk = itertools.chain([first], itertools.islice(encoded, self.max_items - 1))
            write_sst_file(path, chunk)
            self.files.append(path)
        return list(self.files)

    def _encoded(self, items: Iterable[tuple[bytes, Any]]) -> Iterator[tuple[bytes, bytes]]:
        encode, stored = self.codec.encode, self.layout.stored
        previous: bytes | None = None
        for key, value in items:
            stored_key = stored(key)
            check_order(previous, stored_key)
            previous = stored_key
            yield stored_key, encode(value)
