"""The pure core: linear hashing, partition lineage, scale plans, metadata hash, state machines.

Nothing in this package does I/O.
"""

__all__: list[str] = []
