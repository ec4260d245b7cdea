"""The KIP-1101 metadata hash, checked against values computed by Kafka's own code."""

from __future__ import annotations

import random
import subprocess
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.ops.broker import find_java, kafka_classpath
from rebalance import group_hash, topic_hash

WORDS_ID = uuid.UUID("3f6e0c8e-8f4a-4b53-9d2c-1a2b3c4d5e6f")
ONE_ID = uuid.UUID(int=1)
ODD_ID = uuid.UUID("ffffffff-ffff-ffff-8000-000000000000")
ODD_RACKS = [["😀r", "\uff41z"], [], [], ["eu-west-1a"]]  # Java sorts U+FF41 after 😀
JAVA_VECTORS = Path(__file__).parent.parent / "vectors" / "KafkaMetadataHash.java"

# Computed by tests/vectors/KafkaMetadataHash.java: "xxh3" by Kafka 4.3.1's
# Utils.computeTopicHash / computeGroupHash, "murmur3" by hash4j's Murmur3 x64/128.
FIXED = [
    ("xxh3", WORDS_ID, "words", [["rack-a", "rack-b"], ["rack-b"], []], 2259791131925376002),
    ("murmur3", WORDS_ID, "words", [["rack-a", "rack-b"], ["rack-b"], []], -3425401828375077576),
    ("xxh3", ONE_ID, "t", [], -3909432519847850310),
    ("murmur3", ONE_ID, "t", [], 1262691778850236363),
    ("xxh3", ODD_ID, "wörter-😀", ODD_RACKS, -3782567594183985190),
    ("murmur3", ODD_ID, "wörter-😀", ODD_RACKS, 6210928052355776884),
]


@pytest.mark.parametrize(("algorithm", "topic_id", "name", "racks", "expected"), FIXED)
def test_topic_hash_matches_kafka(
    algorithm: str, topic_id: uuid.UUID, name: str, racks: list[list[str]], expected: int
) -> None:
    assert topic_hash(topic_id, name, racks, algorithm) == expected


def test_group_hash_matches_kafka() -> None:
    hashes = {"words": 2259791131925376002, "clicks": -3909432519847850310}
    assert group_hash(hashes, "xxh3") == -428739351670479071
    assert group_hash(hashes, "murmur3") == 8661501779065909447
    assert group_hash({}, "murmur3") == 0
    assert group_hash({}, "xxh3") == 0


def test_swapping_two_topics_hashes_changes_the_group_hash() -> None:
    a, b = 2259791131925376002, -3909432519847850310
    for algorithm in ("murmur3", "xxh3"):
        assert group_hash({"clicks": a, "words": b}, algorithm) != group_hash(
            {"clicks": b, "words": a}, algorithm
        )
    assert group_hash({"clicks": a, "words": b}, "xxh3") == -8848772056684388780


@given(st.lists(st.lists(st.text(max_size=6), max_size=4), max_size=6), st.randoms())
def test_rack_order_does_not_matter(racks: list[list[str]], rng: random.Random) -> None:
    shuffled = [rng.sample(r, len(r)) for r in racks]
    for algorithm in ("murmur3", "xxh3"):
        assert topic_hash(WORDS_ID, "t", racks, algorithm) == topic_hash(
            WORDS_ID, "t", shuffled, algorithm
        )


def test_every_field_changes_the_hash() -> None:
    base = topic_hash(WORDS_ID, "words", [["a"], ["b"]])
    assert topic_hash(ONE_ID, "words", [["a"], ["b"]]) != base
    assert topic_hash(WORDS_ID, "Words", [["a"], ["b"]]) != base
    assert topic_hash(WORDS_ID, "words", [["a"], ["b"], []]) != base
    assert topic_hash(WORDS_ID, "words", [["a"], ["c"]]) != base
    assert -(2**63) <= base < 2**63


def test_unknown_algorithm_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown hash algorithm 'md5'"):
        topic_hash(WORDS_ID, "t", [], "md5")


@pytest.mark.integration
def test_random_topics_match_kafka_on_the_jvm() -> None:
    """Many random topics hashed here and by Kafka's classes in one JVM run."""
    rng = random.Random(20261121)
    alphabet = "abcxyz-_.0é漢😀"
    cases = []
    for _ in range(40):
        name = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
        racks = [
            ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 5))) for _ in range(k)]
            for k in (rng.randint(0, 3) for _ in range(rng.randint(0, 7)))
        ]
        racks = [sorted(set(r)) for r in racks]
        cases.append(
            (rng.choice(["xxh3", "murmur3"]), uuid.UUID(int=rng.getrandbits(128)), name, racks)
        )
    lines = []
    for algorithm, topic_id, name, racks in cases:
        spec = "|".join(",".join(r) for r in racks) if racks else "-"
        lines.append(f"topic\t{algorithm}\t{topic_id}\t{name}\t{spec}")
    java = find_java().executable
    result = subprocess.run(
        [str(java), "-cp", kafka_classpath(), str(JAVA_VECTORS)],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=True,
    )
    kafka = [int(v) for v in result.stdout.split()]
    ours = [topic_hash(t, n, r, a) for a, t, n, r in cases]
    assert ours == kafka
