"""Whose state a database holds (``DatabaseIdentity``) and its named stores (``StoreSpec``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from statestore.layout import FORMAT_VERSION, check_store_name

__all__ = ["DatabaseIdentity", "StoreSpec"]


@dataclass(frozen=True)
class StoreSpec:
    """A named store and the type of its values (``None``: any JSON-able value)."""

    name: str
    value_type: type[Any] | None = None

    def __post_init__(self) -> None:
        check_store_name(self.name)


@dataclass(frozen=True)
class DatabaseIdentity:
    """Whose database this is; ``fixed`` holds the app's parameters that may never change."""

    app_id: str
    processor: int
    fixed: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The identity as stored in the ``meta`` record."""
        return {
            "format": FORMAT_VERSION,
            "app_id": self.app_id,
            "processor": self.processor,
            "fixed": dict(self.fixed),
        }
