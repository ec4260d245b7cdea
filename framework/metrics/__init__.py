"""Prometheus metrics and health of a processor: one HTTP endpoint per processor.

``ProcessorMetrics`` holds a processor's registry (counters fed per batch, gauges read at
scrape time from the loop's newest ``Observation``) and its ``Heartbeat``; ``MetricsServer``
serves ``/metrics``, ``/healthz`` and ``/readyz``. Off unless ``metrics.port`` is set.
"""

from framework.metrics.heartbeat import Heartbeat
from framework.metrics.observation import CatchUpView, HandoffView, Observation
from framework.metrics.processor import ProcessorMetrics
from framework.metrics.server import MetricsPortError, MetricsServer

__all__ = [
    "CatchUpView",
    "HandoffView",
    "Heartbeat",
    "MetricsPortError",
    "MetricsServer",
    "Observation",
    "ProcessorMetrics",
]
