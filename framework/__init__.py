"""splitstate's runtime: the App API, config, processor loop, producer, control log and CLI."""

from framework.errors import SplitstateError

__all__ = ["SplitstateError"]
