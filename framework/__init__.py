"""splitstate's runtime: the App API, config, processor loop, producer, control log and CLI."""

from framework.app import App
from framework.config import AppConfig, BatchConfig, ConfigError, KafkaConfig, TopicConfig
from framework.errors import SplitstateError
from framework.records import Output, Record

__all__ = [
    "App",
    "AppConfig",
    "BatchConfig",
    "ConfigError",
    "KafkaConfig",
    "Output",
    "Record",
    "SplitstateError",
    "TopicConfig",
]
