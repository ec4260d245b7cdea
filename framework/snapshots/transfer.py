"""Transfer by snapshot: a receiver starts its catch-up from its sources' snapshots.

For each source of a scale, the receiver waits for a snapshot the source took after the scale
began that covers the partitions it hands over (the source takes one as soon as it sees the
scale), copies it, reads only the keys it gains from that source (``bucket(h, B, P') == J``
and ``bucket(h, B, P) == source``: stored keys are ordered by bucket, so these are a few
ranges, scanned without reading the source's other keys), writes them as SST files and
ingests them with the offsets they cover (``bulk_load`` into the catch-up scope
``<scope>-from-<source>``). Every step copies or reads a bounded slice, so a receiver that
owns partitions keeps processing them meanwhile. Once every source is in, it writes the
catch-up's progress (per partition, the lowest offset any source's snapshot covers) and the
loaded flag in one batch; the catch-up reads on from there and applies a record of a key
gained from source ``s`` only at or past that source's offset (``source_starts``).

Where a snapshot covers a partition's keys: on each partition the source owned, up to the
snapshot's offset; on an ancestor it did not own, up to the growth threshold (its state holds
every record of its keys below it: it read them, or released the ancestor only past it).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from framework.clock import Clock
from framework.snapshots.source_starts import (
    catch_up_starts,
    mark_scope,
    replayed_from_0,
    snapshot_marks,
    source_mark_scope,
    source_scope,
)
from framework.snapshots.transfer_progress import TransferProgress
from rebalance import TopicHistory
from rebalance.key_ranges import KeyRange
from rebalance.plan import read_set
from rebalance.positions import Position
from statestore import ProcessorDatabase, StateStoreError
from statestore.checkpoints import open_checkpoint, scan_ranges
from statestore.rocks import write_sst_file
from statestore.snapshot_copy import SnapshotDownload
from statestore.snapshot_manifest import SnapshotManifest
from statestore.snapshot_names import local_path
from statestore.snapshot_store import SnapshotStore, store_errors

__all__ = ["SnapshotTransfer"]

log = logging.getLogger(__name__)
_POLL_SECONDS = 0.5
_KEYS_PER_STEP = 20_000
_WAIT_NOTE_SECONDS = 60.0
_REPORT_SECONDS = 1.0


@dataclass
class _Source:
    """One source's part: its handoff's partitions, its S2 with bounds, and where it is."""

    source: int
    partitions: frozenset[Position]
    reads: dict[Position, int | None]
    manifest: SnapshotManifest | None = None
    download: SnapshotDownload | None = None
    stores: list[str] = field(default_factory=list)
    resume_after: bytes | None = None
    files: dict[str, list[Path]] = field(default_factory=dict)
    keys: int = 0
    done: bool = False


class SnapshotTransfer:
    """Builds receiver ``processor``'s gained keys from its sources' snapshots, in slices."""

    polled_every = False

    def __init__(
        self,
        processor: int,
        generation: int,
        *,
        scope: str,
        loaded_flag: str,
        handoffs: Mapping[int, frozenset[Position]],
        topics: Mapping[str, TopicHistory],
        gained: Mapping[int, Sequence[KeyRange]],
        database: ProcessorDatabase,
        store: SnapshotStore,
        work_dir: Path,
        clock: Clock,
        slice_bytes: int,
        fault: Callable[[str], None] = lambda _point: None,
        epoch: str | None = None,
        fallback_seconds: float = 600.0,
        released: Callable[[], Collection[Position]] = frozenset,
    ) -> None:
        self.processor = processor
        self.generation = generation
        self._scope = scope
        self._flag = loaded_flag
        #: per source, the ranges of stored keys gained from it
        self._gained = {source: list(ranges) for source, ranges in gained.items()}
        self._database = database
        self._store = store
        self.directory = work_dir
        self._clock = clock
        self._slice = slice_bytes
        #: crash tests kill the process at named points (``SPLITSTATE_FAULT``)
        self._fault = fault
        self._epoch = epoch
        self._polled = -_POLL_SECONDS
        #: per source, snapshots that could not be used (a file missing or damaged)
        self._failed: dict[int, set[str]] = {}
        #: per source, when its missing snapshot was last logged
        self._waiting_noted: dict[int, float] = {}
        #: per source without any snapshot of this app history (or that released its
        #: partitions), since when (after ``fallback_seconds``: replayed from 0 instead)
        self._no_snapshot_since: dict[int, float] = {}
        self._fallback_seconds = fallback_seconds
        self._released = released  # the partitions whose RELEASE the receiver read
        self.keys = 0
        self.copied = 0
        now = clock.time()
        self._progress = TransferProgress(processor, started=now, updated=now)
        self._reported = -_REPORT_SECONDS
        self._sources: list[_Source] = []
        for source, partitions in sorted(handoffs.items()):
            reads = {
                (r.topic, r.partition): r.end_offset for r in read_set(topics, sorted(partitions))
            }
            part = _Source(source, partitions, reads)
            part.done = bool(database.progress(source_scope(scope, source)))
            self._sources.append(part)

    def describe(self) -> str:
        """Where it is, for the log and ``status``."""
        waiting = [s.source for s in self._sources if not s.done and s.manifest is None]
        if waiting:
            return f"waiting for snapshots of processors {waiting}"
        return f"copying sources' snapshots: {self.copied} bytes copied, {self.keys} keys kept"

    def poll(self) -> int | None:
        """One bounded step; once every source is in, record the progress and return the
        keys ingested (``None`` until then)."""
        part = next((s for s in self._sources if not s.done), None)
        if part is None:
            return self._finish()
        self._report(part)
        if self._database.bulk_load_pending:  # an ingest that failed: try it again
            self._database.resume_bulk_load()
            part.done = bool(self._database.progress(source_scope(self._scope, part.source)))
            return None
        try:
            if part.manifest is None:
                self._find(part)
            elif part.download is not None:
                self._copy(part)
            else:
                self._filter(part)
        except store_errors(StateStoreError) as error:
            log.warning(
                "processor %d: snapshot %s of processor %d could not be used (%s); it takes "
                "the newest other one",
                self.processor,
                part.manifest.id if part.manifest else "?",
                part.source,
                error,
            )
            if part.manifest is not None and not self._database.bulk_load_pending:
                self._failed.setdefault(part.source, set()).add(part.manifest.id)
            self._reset(part)
        return None

    def _report(self, part: _Source) -> None:
        """Rewrite the progress report (``status`` reads it) at most once a second, and at
        once when the phase changes."""
        if part.manifest is None:
            phase = "waiting"
        elif part.download is not None:
            phase = "copying"
        else:
            phase = "filtering" if part.stores else "ingesting"
        now = self._clock.monotonic()
        if phase == self._progress.phase and now - self._reported < _REPORT_SECONDS:
            return
        self._reported = now
        progress = self._progress
        progress.phase = phase
        progress.bytes_copied = self.copied
        progress.bytes_total = sum(s.manifest.size for s in self._sources if s.manifest)
        progress.keys_kept = self.keys
        progress.waiting_for = [s.source for s in self._sources if not s.done and not s.manifest]
        progress.updated = self._clock.time()
        try:
            progress.write(self.directory)
        except OSError as error:
            log.debug("could not write the transfer's progress: %s", error)

    def _find(self, part: _Source) -> None:
        """Take a usable snapshot of the source, if there is one yet: the first taken in
        this scale; once one could not be used, the newest other one (its source keeps every
        one that covers an open handoff), and when there is none, the failed ones again (the
        failure may have passed)."""
        now = self._clock.monotonic()
        if now - self._polled < _POLL_SECONDS:
            return
        self._polled = now
        listed = self._store.manifests(part.source)
        manifests = [m for m in listed if self._usable(part, m)]
        failed = self._failed.setdefault(part.source, set())
        fresh = [m for m in manifests if m.id not in failed]
        if fresh:
            manifest = fresh[-1] if failed else fresh[0]
        elif manifests:
            manifest = manifests[0]
            failed.clear()
        else:
            identity = self._database.identity
            ours = any(m.belongs_to(identity.app_id, identity.fixed, self._epoch) for m in listed)
            gone = part.partitions <= set(self._released())  # no snapshot can cover them now
            if gone or not ours:
                waited = now - self._no_snapshot_since.setdefault(part.source, now)
                if waited >= self._fallback_seconds:
                    self._replay_instead(part, waited, gone)
                    return
            else:
                self._no_snapshot_since.pop(part.source, None)
            if now - self._waiting_noted.setdefault(part.source, now - _WAIT_NOTE_SECONDS) >= (
                _WAIT_NOTE_SECONDS
            ):
                self._waiting_noted[part.source] = now
                log.warning(
                    "processor %d: waiting for a snapshot processor %d takes for generation %d "
                    "in %s (is processor %d running, and do both reach snapshots.url?)",
                    self.processor,
                    part.source,
                    self.generation,
                    self._store,
                    part.source,
                )
            return
        part.manifest = manifest  # its id checked again: an absolute one would be deleted
        target = local_path(self.directory / f"from-{part.source}", manifest.id, "snapshot id")
        shutil.rmtree(target, ignore_errors=True)
        part.download = SnapshotDownload(self._store, manifest, target)
        self._fault("transfer:found")

    def _replay_instead(self, part: _Source, waited: float, released: bool) -> None:
        """The source has no snapshot at all, or released the partitions with none of the
        scale covering them: its gained keys are rebuilt by replaying its partitions from 0
        (recorded: ``replayed_from_0``; the catch-up stops if retention deleted any)."""
        why = (self.processor, waited, released)
        replayed_from_0(self._database, self._scope, part.source, part.reads, why=why)
        part.done = True

    def _usable(self, part: _Source, manifest: SnapshotManifest) -> bool:
        """Of this control log (its epoch), taken in this scale, covering the handoff's
        partitions, and every ancestor it did not own has a known threshold."""
        identity = self._database.identity
        return (
            manifest.belongs_to(identity.app_id, identity.fixed, self._epoch)
            and manifest.generation >= self.generation
            and manifest.covers(part.partitions)
            and all(p in manifest.offsets or b is not None for p, b in part.reads.items())
        )

    def _copy(self, part: _Source) -> None:
        download = part.download
        assert download is not None
        before = download.copied
        finished = download.step(self._slice)
        self.copied += download.copied - before
        self._fault("transfer:copying")
        if finished:
            download.close()
            part.download = None
            part.stores = [
                s for s in self._database.store_names() if s in _stores_of(download.target)
            ]

    def _filter(self, part: _Source) -> None:
        """Keep a slice of the gained keys of the snapshot's next store; ingest when done."""
        assert part.manifest is not None
        if not part.stores:
            self._ingest(part)
            return
        store = part.stores[0]
        backend = open_checkpoint(self.directory / f"from-{part.source}" / part.manifest.id)
        kept: list[tuple[bytes, bytes]] = []
        seen = 0
        try:
            gained = self._gained.get(part.source, [])
            for key, value in scan_ranges(backend, store, gained, part.resume_after):
                seen += 1
                part.resume_after = key
                kept.append((key, value))
                if seen >= _KEYS_PER_STEP:
                    break
        finally:
            backend.close()
        if kept:
            runs = part.files.setdefault(store, [])
            path = self.directory / f"from-{part.source}" / f"{store}-{len(runs):05d}.sst"
            write_sst_file(path, kept)
            runs.append(path)
            part.keys += len(kept)
            self.keys += len(kept)
        if seen < _KEYS_PER_STEP:
            part.stores.pop(0)
            part.resume_after = None

    def _ingest(self, part: _Source) -> None:
        """Ingest the source's kept keys with the offsets its snapshot covers."""
        manifest = part.manifest
        assert manifest is not None
        starts = {
            position: (
                min(manifest.offsets[position], bound)
                if position in manifest.offsets and bound is not None
                else manifest.offsets.get(position, bound or 0)
            )
            for position, bound in part.reads.items()
        }
        backend = open_checkpoint(self.directory / f"from-{part.source}" / manifest.id)
        try:  # (a canonical app's marks there: its catch-up goes on from them)
            marks = snapshot_marks(backend, starts, manifest.id)
        finally:
            backend.close()
        self._database.bulk_load(
            part.files,
            starts,
            scope=source_scope(self._scope, part.source),
            recorded=lambda: self._fault("transfer:ingesting"),
            progress={source_mark_scope(self._scope, part.source): marks} if marks else None,
        )
        self._fault("transfer:ingested")
        part.done = True
        log.info(
            "processor %d: took %d keys gained from processor %d out of its snapshot %s "
            "(%d bytes; %.1fs since the transfer began); catching up from %s",
            self.processor,
            part.keys,
            part.source,
            manifest.id,
            manifest.size,
            self._clock.time() - self._progress.started,
            dict(sorted(starts.items())),
        )
        shutil.rmtree(self.directory / f"from-{part.source}", ignore_errors=True)

    def _finish(self) -> int:
        """Every source is in: write where the catch-up reads each partition from, with the
        marks there a snapshot gave (``catch_up_starts``), and the loaded flag."""
        reads = {part.source: (part.partitions, part.reads) for part in self._sources}
        firsts, marks = catch_up_starts(self._database, self._scope, reads)
        batch = self._database.begin()
        for (topic, partition), first in firsts.items():
            batch.set_progress(self._scope, topic, partition, first)
        for (topic, partition), mark in marks.items():
            batch.set_progress(mark_scope(self._scope), topic, partition, mark)
        batch.set_flag(self._flag)
        batch.commit()
        shutil.rmtree(self.directory, ignore_errors=True)
        return self.keys

    def _reset(self, part: _Source) -> None:
        if part.download is not None:
            part.download.close()
        if self._database.bulk_load_pending:
            return  # its files stay: the next poll (or the next start) finishes the load
        part.manifest = part.download = part.resume_after = None
        part.stores, part.files, part.keys = [], {}, 0
        shutil.rmtree(self.directory / f"from-{part.source}", ignore_errors=True)

    def cancel(self) -> None:
        """Stop and delete what was copied (nothing ingested is undone), except the files of
        a recorded bulk load that is not finished: the next start finishes it."""
        for part in self._sources:
            if part.download is not None:
                part.download.close()
        if not self._database.bulk_load_pending:
            shutil.rmtree(self.directory, ignore_errors=True)


def _stores_of(checkpoint: Path) -> set[str]:
    """The stores (column families) of the database in ``checkpoint``."""
    backend = open_checkpoint(checkpoint)
    try:
        return set(backend.store_names())
    finally:
        backend.close()
