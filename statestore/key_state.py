"""``KeyState``: one key's value in one store, as a processor function sees it (through a
``StoreBatch``: reads see the batch's writes, writes wait for its commit)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from statestore.batch import StoreBatch

__all__ = ["KeyState"]

V = TypeVar("V")


class KeyState(Generic[V]):
    """The state of one key in one store; all a processor function may touch."""

    __slots__ = ("_key", "_store")

    def __init__(self, store: StoreBatch[V], key: bytes) -> None:
        self._store = store
        self._key = key

    @property
    def key(self) -> bytes:
        """The record key this state belongs to."""
        return self._key

    @property
    def store_name(self) -> str:
        """The name of the store this state is in."""
        return self._store.name

    def get(self, default: Any = None) -> Any:
        """A new copy of the key's value, or ``default`` when it has none (changing the copy
        changes nothing until it is ``set``)."""
        return self._store.get(self._key, default)

    def set(self, value: V, ttl: object = None) -> None:
        """Replace the key's value with ``value`` as it is now. (``ttl`` is refused: only a
        store declared with one, ``app.store(name, ttl=...)``, takes it.)"""
        if ttl is not None:
            raise TypeError(
                f"store {self._store.name!r} was declared without a ttl, so its values do not "
                f"expire. Fix: declare it with app.store({self._store.name!r}, ttl=...) "
                "(ttl=True there lets each set() choose)."
            )
        self._store.set(self._key, value)

    def delete(self) -> None:
        """Remove the key's value."""
        self._store.delete(self._key)

    def get_field(self, field: str, default: Any = None) -> Any:
        """One field of the key's value (a dict or model), or ``default``."""
        value = self._store.get(self._key)
        if value is None:
            return default
        if isinstance(value, dict):
            return value.get(field, default)
        return getattr(value, field, default)

    def set_field(self, field: str, value: Any) -> None:
        """Set one field of the key's dict value (created empty when missing)."""
        current = self._store.get(self._key)
        if current is None:
            current = {}
        if not isinstance(current, dict):
            raise TypeError(
                f"set_field needs a dict value; store {self._store.name!r} holds "
                f"{type(current).__name__} for this key. Fix: use set() with a new value."
            )
        self._store.set(self._key, {**current, field: value})  # type: ignore[arg-type]
