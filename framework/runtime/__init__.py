"""One processor at work: the loop, its batches, and its parts in a scale.

``ProcessorRuntime`` polls a batch, runs it through the app's functions (``batches``),
produces its outputs (``delivery``), commits state and offsets atomically, then, between
batches, plays its parts in a scale (``handoffs``: release at F as the old owner, ``catchup``
to build gained keys as the receiver, ``moved_keys`` to forget keys given away).
"""

from framework.runtime.loop import ProcessorRuntime, RuntimeStats

__all__ = [
    "ProcessorRuntime",
    "RuntimeStats",
]
