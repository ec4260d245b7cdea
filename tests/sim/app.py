"""The app every simulated world runs: each key's state is a fold of its records.

Producers write values ``"<producer>:<seq>"`` with ``seq`` counting 1, 2, ... per key and
producer. The processor function keeps, per key, how many records it applied, the last
``seq`` of each producer, and how many records broke a producer's order (a ``seq`` not above
that producer's last: a double apply or a reorder). It emits ``[producer, seq, count,
topic, partition, offset]`` for every record, so the checks can see which record each
output came from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from framework import App, AppConfig, BatchConfig, KafkaConfig, KeyState, Output, Record
from framework.config import ScalingConfig, TopicConfig

__all__ = ["INPUT", "OUTPUT", "FoldState", "make_app"]

INPUT = "sim-in"
OUTPUT = "sim-out"

#: ``{"n": records applied, "last": {producer: last seq}, "bad": order violations}``
FoldState = dict[str, Any]


def fold(state: FoldState | None, value: str) -> FoldState:
    """``state`` after one more record ``value``."""
    producer, seq_text = value.rsplit(":", 1)
    seq = int(seq_text)
    current: FoldState = state or {"n": 0, "last": {}, "bad": 0}
    last = dict(current["last"])
    bad = current["bad"] + (1 if seq <= last.get(producer, 0) else 0)
    last[producer] = max(seq, last.get(producer, 0))
    return {"n": current["n"] + 1, "last": last, "bad": bad}


def make_app(
    state_dir: Path,
    *,
    partitions: int,
    initial_processors: int,
    max_records: int,
    lease_ms: int,
    ready_lag: int,
) -> App:
    """The fold app over ``partitions`` input partitions."""
    config = AppConfig(
        app_id="sim",
        kafka=KafkaConfig(bootstrap_servers="simulated:9092"),
        inputs=[
            TopicConfig(
                topic=INPUT,
                partitions=partitions,
                producer_lease_ms=lease_ms,
                producer_delivery_timeout_ms=lease_ms // 2,
            )
        ],
        outputs=[TopicConfig(topic=OUTPUT, partitions=2)],
        initial_processors=initial_processors,
        processors=initial_processors,
        state_dir=state_dir,
        batch=BatchConfig(max_records=max_records, max_wait_ms=20),
        scaling=ScalingConfig(ready_lag=ready_lag, catchup_batch=max(1, max_records)),
    )
    app = App(config)
    app.store("folds")

    @app.processor()
    def apply(record: Record[bytes | None], state: KeyState[FoldState]) -> Output:
        """Fold the record into its key's state and say so."""
        value = (record.value or b"").decode()
        new = fold(state.get(), value)
        state.set(new)
        producer, seq = value.rsplit(":", 1)
        where = [record.topic, record.partition, record.offset]
        return Output([producer, int(seq), new["n"], *where])

    return app
