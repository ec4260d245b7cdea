"""One processor at work: the loop, its batches, and its parts in a scale.

``ProcessorRuntime`` (``loop``) opens a run and runs its ``BatchLoop`` (``batch_loop``): poll a
batch from the partitions ``Assignment`` reads (``assignment``), run it through the app's
functions (``batches``), produce its outputs (``delivery``), commit state and offsets
atomically; then, between batches, ask the ``HandoffCoordinator`` (``handoffs``) what to do in
a scale: what to own, what to release at which F (``final_offsets``), a receiver's catch-up
step (``catchup``), which given-away keys to forget (``moved_keys``).
"""

from framework.runtime.loop import ProcessorRuntime, RuntimeStats

__all__ = [
    "ProcessorRuntime",
    "RuntimeStats",
]
