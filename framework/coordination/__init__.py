"""Coordination through Kafka: the app's control log, the topic registry, the topic watch.

The control log (one compacted topic per app) holds the app's definition, its generations,
scales, handoffs, growths and aborts; every processor replays it into
``rebalance.ControlState`` and follows it as it grows (``ControlWatcher``). The topic registry
(one compacted topic per cluster) holds each topic's initial and current partition counts.
``prepare_app`` checks on start that topics, registry and control log agree;
``request_scale`` and ``abort_scale`` are the operator's appends.
"""

from framework.coordination.control_log import ControlLog, ControlWatcher
from framework.coordination.layout import AppLayout, prepare_app
from framework.coordination.registry import REGISTRY_TOPIC, Growth, TopicEntry, TopicRegistry
from framework.coordination.scaling import abort_scale, read_control, request_scale, resume_scale
from framework.coordination.topic_watch import TopicWatcher

__all__ = [
    "REGISTRY_TOPIC",
    "AppLayout",
    "ControlLog",
    "ControlWatcher",
    "Growth",
    "TopicEntry",
    "TopicRegistry",
    "TopicWatcher",
    "abort_scale",
    "prepare_app",
    "read_control",
    "request_scale",
    "resume_scale",
]
