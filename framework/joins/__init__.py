"""Joins of two inputs by key: the interval (stream-stream) join (``App.interval_join``) and
the table-table join (``App.table_join``); the stream-table join is a processor function
reading a ``KeyTable`` (``framework.tables``). See docs/concepts/joins.md."""

from framework.joins.buffer import DamagedJoinError, JoinBuffer
from framework.joins.declare import check_joins, declare_interval_join, declare_table_join
from framework.joins.interval import JOIN_PREFIX, IntervalJoinSpec, JoinLateError, JoinType
from framework.joins.table_join import TableJoinSpec, TableRecords

__all__ = [
    "JOIN_PREFIX",
    "DamagedJoinError",
    "IntervalJoinSpec",
    "JoinBuffer",
    "JoinLateError",
    "JoinType",
    "TableJoinSpec",
    "TableRecords",
    "check_joins",
    "declare_interval_join",
    "declare_table_join",
]
