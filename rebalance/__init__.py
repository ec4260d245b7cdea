"""The pure core: linear hashing, partition lineage, scale plans, metadata hash, handoff states.

Nothing in this package does I/O; everything else asks it who owns what.
"""

from rebalance.lineage import ReadRange, TopicHistory
from rebalance.linear_hash import (
    ancestors,
    bucket,
    bucket_array,
    check_layout,
    expected_shares,
    key_hash,
    key_hashes,
    level,
    parent,
)
from rebalance.metadata_hash import group_hash, topic_hash, topic_hash_bytes
from rebalance.plan import PartitionMove, ReceiverPlan, ScalePlan, plan_scale
from rebalance.positions import OffsetRange, Position
from rebalance.states import (
    HANDOFF_MACHINE,
    HandoffEvent,
    HandoffPhase,
    InvalidTransitionError,
    StateMachine,
)
from rebalance.steps import Boundary, Grow, PartitionGate, Shrink, Step, survivor

__all__ = [
    "HANDOFF_MACHINE",
    "Boundary",
    "Grow",
    "HandoffEvent",
    "HandoffPhase",
    "InvalidTransitionError",
    "OffsetRange",
    "PartitionGate",
    "PartitionMove",
    "Position",
    "ReadRange",
    "ReceiverPlan",
    "ScalePlan",
    "Shrink",
    "StateMachine",
    "Step",
    "TopicHistory",
    "ancestors",
    "bucket",
    "bucket_array",
    "check_layout",
    "expected_shares",
    "group_hash",
    "key_hash",
    "key_hashes",
    "level",
    "parent",
    "plan_scale",
    "survivor",
    "topic_hash",
    "topic_hash_bytes",
]
