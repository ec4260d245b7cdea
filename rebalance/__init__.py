"""The pure core: linear hashing, partition lineage, scale plans, metadata hash, state machines.

Nothing in this package does I/O; everything else asks it who owns what.
"""

from rebalance.lineage import ReadRange, TopicHistory
from rebalance.linear_hash import (
    ancestors,
    bucket,
    bucket_array,
    buckets_of,
    check_layout,
    expected_shares,
    key_hash,
    key_hashes,
    level,
    parent,
    processor_of_partition,
)
from rebalance.metadata_hash import HashAlgorithm, group_hash, topic_hash, topic_hash_bytes
from rebalance.plan import PartitionMove, ReceiverPlan, ScalePlan, plan_scale
from rebalance.positions import OffsetRange, Position
from rebalance.states import (
    HANDOFF_MACHINE,
    PARTITION_MACHINE,
    PROCESSOR_MACHINE,
    HandoffEvent,
    HandoffPhase,
    InvalidTransitionError,
    PartitionEvent,
    PartitionState,
    ProcessorEvent,
    ProcessorPhase,
    StateMachine,
)

__all__ = [
    "HANDOFF_MACHINE",
    "PARTITION_MACHINE",
    "PROCESSOR_MACHINE",
    "HandoffEvent",
    "HandoffPhase",
    "HashAlgorithm",
    "InvalidTransitionError",
    "OffsetRange",
    "PartitionEvent",
    "PartitionMove",
    "PartitionState",
    "Position",
    "ProcessorEvent",
    "ProcessorPhase",
    "ReadRange",
    "ReceiverPlan",
    "ScalePlan",
    "StateMachine",
    "TopicHistory",
    "ancestors",
    "bucket",
    "bucket_array",
    "buckets_of",
    "check_layout",
    "expected_shares",
    "group_hash",
    "key_hash",
    "key_hashes",
    "level",
    "parent",
    "plan_scale",
    "processor_of_partition",
    "topic_hash",
    "topic_hash_bytes",
]
