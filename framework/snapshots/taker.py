"""Taking a processor's snapshots between batches, and copying them in bounded slices.

At a batch boundary, when one is due, the processor takes a RocksDB checkpoint (hard links:
cheap) into ``<state_dir>/.snapshots-staging`` and starts a ``SnapshotUpload``; every later
boundary copies at most ``snapshots.slice_bytes`` of it, so the loop never waits for a whole
snapshot. When the manifest is written the store keeps the newest ``snapshots.keep``. An
upload that fails is logged and tried again later; it never stops the processor.

A snapshot is due every ``snapshots.interval_seconds`` or ``interval_records`` records, when
what the processor owns changed (it took partitions over, or gave some away), and when a scale
moves some of its partitions and it has none taken since the scale began: the receivers
start from it (``framework.snapshots.transfer``). Each manifest names the run that took it
(``instance``); a run takes none once the control log names a newer run of its processor.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Callable, Iterable

from framework.clock import Clock
from framework.config import AppConfig
from rebalance import HandoffPhase
from rebalance.control import ControlState
from rebalance.positions import Position
from statestore import ProcessorDatabase, StateStoreError
from statestore.snapshot_copy import SnapshotUpload
from statestore.snapshot_lineage import lineage_of
from statestore.snapshot_manifest import SnapshotFile, SnapshotManifest
from statestore.snapshot_store import SnapshotStore, store_errors

__all__ = ["SnapshotTaker", "first_for_scale", "state_generation"]

log = logging.getLogger(__name__)
_RETRY_SECONDS = 30.0
#: the least time between two snapshots taken because what the processor owns changed
_OWNERSHIP_GAP_SECONDS = 1.0
_WANTED_BY_RECEIVERS = (HandoffPhase.PLANNED, HandoffPhase.CATCHING_UP)


def first_for_scale(
    manifests: list[SnapshotManifest],
    generation: int,
    partitions: Iterable[Position],
    of_app: Callable[[SnapshotManifest], bool],
) -> SnapshotManifest | None:
    """The first snapshot (of ``manifests``, oldest first, those ``of_app`` accepts) taken
    in scale ``generation`` or later that covers ``partitions``: the one a receiver of them
    builds from."""
    return next(
        (m for m in manifests if of_app(m) and m.generation >= generation and m.covers(partitions)),
        None,
    )


def state_generation(state: ControlState) -> int:
    """The newest scale generation ``state`` has seen (started, done or aborted)."""
    started = state.scale.generation if state.scale is not None else 0
    return max(started, state.generation.generation if state.generation else 0)


class SnapshotTaker:
    """Processor ``processor``'s snapshots of ``database`` into ``store``."""

    def __init__(
        self,
        config: AppConfig,
        processor: int,
        database: ProcessorDatabase,
        store: SnapshotStore,
        clock: Clock,
        *,
        instance: str,
        fault: Callable[[str], None] = lambda _point: None,
    ) -> None:
        self.processor = processor
        #: this run's id in the control log, named in its manifests
        self.instance = instance
        self._settings = config.snapshots
        self._database = database
        self._store = store
        self._clock = clock
        #: crash tests kill the process at named points (``SPLITSTATE_FAULT``)
        self._fault = fault
        self._staging = config.app_state_dir / ".snapshots-staging" / f"processor-{processor}"
        shutil.rmtree(self._staging, ignore_errors=True)  # our own leftovers from a crash
        self.upload: SnapshotUpload | None = None
        self.latest: SnapshotManifest | None = None
        self._last_taken = clock.monotonic()
        self._records = 0
        self._retry_at = 0.0
        #: an operator's request to answer with the next snapshot ("" for a local request)
        self._requested: str | None = None
        #: the request the upload in progress answers
        self._answering: str | None = None
        self._answered: set[str] = set()
        self.taken = 0
        #: bytes this taker copied to the store (all its uploads, finished or not)
        self.uploaded_bytes = 0
        self._state = ControlState()
        try:
            self.latest = store.newest(processor)
        except store_errors() as error:
            log.warning("processor %d: cannot list snapshots in %s: %s", processor, store, error)

    def request(self, request: str = "") -> None:
        """Take one at the next batch boundary (``request``: the operator's request id)."""
        self._requested = request

    def processed(self, records: int) -> None:
        """Count records processed since the last snapshot."""
        self._records += records

    def step(
        self,
        owned: set[Position],
        state: ControlState,
        before_take: Callable[[], bool] = lambda: True,
    ) -> None:
        """At a batch boundary: copy a slice of the running upload, or take one if due.

        ``before_take`` runs first when one is taken (the loop commits the state's offsets to
        the consumer group, so a snapshot never covers more than the group has: a receiver
        starting from it never starts past T1); ``False`` puts the snapshot off."""
        asked = state.snapshot_request
        if asked is not None and asked.asks(self.processor) and asked.id not in self._answered:
            self._answered.add(asked.id)
            self.request(asked.id)
        self._state = state
        if state.instances.get(self.processor, self.instance) != self.instance:
            self.close()  # a newer run of this processor speaks for it now
            return
        now = self._clock.monotonic()
        if now < self._retry_at:
            return
        try:
            if self.upload is not None:
                self._copy_slice()
            elif (
                not self._database.bulk_load_pending  # never a half-ingested state
                and self._due(owned, state, now)
                and before_take()
            ):
                self._take(owned, state)
        except store_errors(StateStoreError) as error:
            self._give_up(error)

    def _due(self, owned: set[Position], state: ControlState, now: float) -> bool:
        settings = self._settings
        latest = self.latest
        if self._requested is not None or latest is None:
            return True
        if not self._of_this_history(latest):  # of an earlier run of the app
            return True
        if now - self._last_taken >= settings.interval_seconds:
            return True
        if settings.interval_records is not None and self._records >= settings.interval_records:
            return True
        if set(latest.offsets) != owned and now - self._last_taken >= _OWNERSHIP_GAP_SECONDS:
            return True
        scale = state.scaling
        return scale is not None and any(
            h.phase in _WANTED_BY_RECEIVERS
            and (latest.generation < scale.generation or not latest.covers(h.partitions))
            for h in scale.outgoing(self.processor)
        )

    def _take(self, owned: set[Position], state: ControlState) -> None:
        """Checkpoint the database now (a batch boundary) and start copying it."""
        database = self._database
        created = self._clock.time()
        # ids sort by time: never below the newest one's, even if the wall clock stepped back
        newest = int(self.latest.id.split("-", 1)[0]) if self.latest is not None else 0
        snapshot_id = f"{max(int(created * 1000), newest + 1):013d}-{uuid.uuid4().hex[:8]}"
        checkpoint = self._staging / snapshot_id
        lineage = lineage_of(database.backend, database.path)
        offsets = database.offsets()
        base = SnapshotManifest(
            app_id=database.identity.app_id,
            processor=self.processor,
            fixed=dict(database.identity.fixed),
            id=snapshot_id,
            created=created,
            generation=state_generation(state),
            offsets={p: offsets.get(p, 0) for p in owned},
            request=self._requested or None,
            epoch=state.app.epoch if state.app is not None else None,
            instance=self.instance,
        )
        database.snapshot(checkpoint)  # owner-only, its missing parents too
        # a request is answered once the manifest is written (an upload that fails takes the
        # snapshot again); one that came meanwhile stays for the next
        self._answering = self._requested
        self._records = 0
        self._last_taken = self._clock.monotonic()
        self.upload = SnapshotUpload(
            self._store, checkpoint, base, lineage.id, self._known(lineage.id, lineage.inherited)
        )
        self._copy_slice()

    def _known(self, lineage: str, inherited: dict[str, SnapshotFile]) -> dict[str, SnapshotFile]:
        """SST files of this database the store holds: its kept snapshots' of this lineage,
        and those inherited from the snapshot it was restored from."""
        known = dict(inherited)
        for manifest in self._store.manifests(self.processor):
            for file in manifest.files:
                if file.path == f"files/{lineage}/{file.name}":
                    known[file.name] = file
        return known

    def _copy_slice(self) -> None:
        upload = self.upload
        assert upload is not None
        before = upload.copied
        manifest = upload.step(self._settings.slice_bytes)
        self.uploaded_bytes += upload.copied - before
        if manifest is None:
            self._fault("snapshot:copying")
            return
        upload.close()
        self.upload = None
        if self._requested == self._answering:
            self._requested = None
        self.latest = manifest
        self.taken += 1
        self._fault("snapshot:written")
        deleted = self._store.prune(
            self.processor, self._settings.keep, self._pinned(self._store.manifests(self.processor))
        )
        log.info(
            "processor %d: snapshot %s in %s (%d bytes, %d copied, generation %d, offsets %s)%s",
            self.processor,
            manifest.id,
            self._store,
            manifest.size,
            upload.total,
            manifest.generation,
            dict(sorted(manifest.offsets.items())),
            f"; {deleted} files no kept snapshot uses deleted" if deleted else "",
        )

    def _pinned(self, manifests: list[SnapshotManifest]) -> frozenset[str]:
        """The snapshots receivers of the scale in progress may build from (every one of this
        app history taken in it that covers a handoff still open), kept until the handoff
        ends: a receiver that restarts, even after RELEASE (when this processor's newer
        snapshots no longer cover the partitions), finds the one it took, and one that could
        not use a snapshot takes another that is not pruned under it. Their SST files are
        mostly shared, and this processor takes one per interval at most."""
        scale = self._state.scaling
        if scale is None:
            return frozenset()
        open_handoffs = [
            h
            for h in scale.outgoing(self.processor)
            if h.phase not in (HandoffPhase.COMPLETE, HandoffPhase.ABORTED)
        ]
        return frozenset(
            m.id
            for m in manifests
            if self._of_this_history(m)
            and m.generation >= scale.generation
            and any(m.covers(h.partitions) for h in open_handoffs)
        )

    def _of_this_history(self, manifest: SnapshotManifest) -> bool:
        """Whether ``manifest`` is of this app, fixed parameters and control-log epoch."""
        identity = self._database.identity
        epoch = self._state.app.epoch if self._state.app is not None else None
        return manifest.belongs_to(identity.app_id, identity.fixed, epoch)

    def _give_up(self, error: Exception) -> None:
        """Log the failure, drop the upload, and try again in a while."""
        if self.upload is not None:
            self.upload.close()
            self.upload = None
        wait = min(_RETRY_SECONDS, self._settings.interval_seconds)
        self._retry_at = self._clock.monotonic() + wait
        log.warning(
            "processor %d: snapshot to %s failed (%s); processing goes on, it tries again in "
            "%.0fs. Fix: check that snapshots.url is reachable and writable.",
            self.processor,
            self._store,
            error,
            wait,
        )

    def close(self) -> None:
        """Drop an upload in progress (its files stay until a later prune)."""
        if self.upload is not None:
            self.upload.close()
            self.upload = None
