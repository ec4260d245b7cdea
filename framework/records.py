"""What a processor function receives (``Record``) and returns (``Output``), and what the
runtime makes of its outputs and failures (``EncodedOutput``, with values as bytes:
``encode_value``; ``DeadLetter``)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

import orjson
from pydantic import BaseModel

__all__ = [
    "UNREADABLE_HEADERS",
    "UNREADABLE_HEADERS_HEADER",
    "DeadLetter",
    "DeadLetterStage",
    "EncodedOutput",
    "InputMessage",
    "Output",
    "Record",
    "StoredMessage",
    "encode_input",
    "encode_value",
    "output_items",
    "readable_headers",
]

V = TypeVar("V")


class InputMessage(Protocol):
    """A consumed record, as confluent-kafka's ``Message`` presents it."""

    def topic(self) -> str | None: ...
    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def timestamp(self) -> tuple[int, int]: ...
    def headers(self) -> Any: ...


#: What a consumed message whose headers could not be read holds instead (``readable_headers``)
_UNREADABLE: list[tuple[str, bytes | None]] = []

#: ``message.headers()``, called so that CPython always checks the result: a call site the
#: interpreter specialized (3.11+) takes what a C method returns as is, and confluent-kafka's
#: ``headers()`` returns a broken list (and leaves an exception pending) for a header name it
#: cannot decode; ``methodcaller`` calls through ``PyObject_VectorcallMethod``, which turns
#: that into a ``SystemError``.
_HEADERS = operator.methodcaller("headers")


def readable_headers(message: InputMessage) -> Sequence[tuple[str, bytes | None]] | None:
    """The record's headers (``()`` for none), or ``None`` when they cannot be read: a header
    name that is not UTF-8 text. Every reader of a consumed record's headers goes through here.

    confluent-kafka cannot decode such a name: its ``headers()`` builds a list holding a
    missing name, keeps it, and returns it with a ``UnicodeDecodeError`` pending (seen with
    confluent-kafka 2.16). Python reports that as a ``SystemError`` only where it checks the
    result (``_HEADERS``); reading the list crashes the interpreter, and a second
    ``headers()`` returns it again. So the message's headers are replaced (``set_headers``)
    by a list of our own, known by its identity, the first time.
    Java clients, and so Spark's Kafka source, read such a name with U+FFFD in place of the bad
    bytes: a name holding U+FFFD (or, from a test, one that is no text) counts as unreadable
    too, and every path that reads records skips the same ones.
    """
    try:
        headers = _HEADERS(message)
    except (SystemError, UnicodeDecodeError):
        repair = getattr(message, "set_headers", None)
        if repair is not None:
            repair(_UNREADABLE)
        return None
    if headers is _UNREADABLE:
        return None
    if not headers:
        return ()
    for name, _value in headers:
        if type(name) is not str or not (name.isascii() or _plain_text(name)):
            return None
    return headers  # type: ignore[no-any-return]


def _plain_text(name: str) -> bool:
    """Whether a (non-ASCII) header name is UTF-8 text as sent: no U+FFFD, no surrogates."""
    if "\ufffd" in name:
        return False
    try:
        name.encode()
    except UnicodeEncodeError:
        return False
    return True


#: The header a dead letter carries when the record's own headers could not be read
#: (``readable_headers``); none of them are in the dead letter then.
UNREADABLE_HEADERS_HEADER = "splitstate.headers"
#: Its value
UNREADABLE_HEADERS = (
    b"unreadable: a header name of the record is not UTF-8 text, so its headers are not "
    b"in this dead letter (its key and value are)"
)


class Record(Generic[V]):
    """One input record: its key, its decoded value and where it came from.

    ``timestamp`` and ``headers`` are read from the Kafka message only when asked for.
    """

    __slots__ = ("_message", "key", "offset", "partition", "topic", "value")

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes,
        value: V,
        *,
        message: InputMessage | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self._message = message

    @property
    def timestamp(self) -> int | None:
        """The record's timestamp in milliseconds, if it has one."""
        if self._message is None:
            return None
        kind, value = self._message.timestamp()
        return value if kind else None

    @property
    def headers(self) -> tuple[tuple[str, bytes | None], ...]:
        """The record's headers, in order."""
        return () if self._message is None else tuple(self._message.headers() or ())

    @property
    def raw(self) -> bytes | None:
        """The value as received (``None``: none, or a record not read from a message)."""
        return None if self._message is None else self._message.value()

    @property
    def key_text(self) -> str:
        """The key as UTF-8 text (undecodable bytes replaced)."""
        return self.key.decode("utf-8", errors="replace")

    def header(self, name: str) -> bytes | None:
        """The last value of header ``name``, or ``None``."""
        found = None
        for header_name, value in self.headers:
            if header_name == name:
                found = value
        return found

    def __repr__(self) -> str:
        return (
            f"Record(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
            f"key={self.key!r}, value={self.value!r})"
        )


@dataclass(slots=True)
class Output:
    """A record to write to an output topic.

    ``value`` may be bytes, text, a pydantic model (written as JSON), ``None`` (a tombstone)
    or any JSON-able value. ``topic`` defaults to the app's only output topic; ``key`` to the
    input record's key.
    """

    value: Any
    topic: str | None = None
    key: bytes | None = None
    headers: Mapping[str, bytes] | None = None


def output_items(result: object, function: str) -> Iterable[Output]:
    """The outputs of what the processor function ``function`` returned (an ``Output``, or
    an iterable of them); anything else raises ``TypeError`` naming it and the fix. A value
    returned bare (a dict, text, a model) is not iterated: its keys or characters are no
    outputs."""
    if isinstance(result, Output):
        return (result,)
    bare = isinstance(result, str | bytes | bytearray | Mapping | BaseModel)
    if bare or not isinstance(result, Iterable):
        raise TypeError(_not_an_output(function, _kind(result)))
    return _each_output(result, function)


def _each_output(items: Iterable[Any], function: str) -> Iterator[Output]:
    for item in items:
        if not isinstance(item, Output):
            raise TypeError(_not_an_output(function, f"an item that is {_kind(item)}"))
        yield item


def _kind(value: object) -> str:
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _not_an_output(function: str, what: str) -> str:
    return (
        f"the processor function {function} returned {what}, not an Output. Fix: return "
        "Output(value) (to the output topic, with the record's key), an iterable of "
        "Outputs, or None"
    )


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A record that did not come from a consumer (test driver, history read by Spark),
    presented as confluent-kafka's ``Message`` presents one."""

    _topic: str
    _partition: int
    _offset: int
    _key: bytes | None
    _value: bytes | None
    _timestamp: int | None
    _headers: list[tuple[str, bytes | None]] | None

    def topic(self) -> str:
        """The record's topic."""
        return self._topic

    def partition(self) -> int:
        """The record's partition."""
        return self._partition

    def offset(self) -> int:
        """The record's offset."""
        return self._offset

    def key(self) -> bytes | None:
        """The record's key."""
        return self._key

    def value(self) -> bytes | None:
        """The record's value."""
        return self._value

    def timestamp(self) -> tuple[int, int]:
        """``(type, epoch ms)`` as confluent-kafka gives it (type 0: none)."""
        return (0, 0) if self._timestamp is None else (1, self._timestamp)

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        """The record's headers."""
        return self._headers


@dataclass(slots=True)
class EncodedOutput:
    """An output ready to produce; ``origin`` is the input record that produced it
    (topic, partition, offset), and ``partition`` where the runtime placed it (-1: not yet)."""

    topic: str
    key: bytes
    value: bytes | None
    headers: list[tuple[str, str | bytes | None]] | None
    origin: tuple[str, int, int] | None = None
    partition: int = -1


#: where a record failed (its dead letter's ``splitstate.stage``; docs/reference/dead-letters.md)
DeadLetterStage = Literal[
    "decode", "route", "placement", "processor", "output", "crash", "late", "timer", "window"
]


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An input record that could not be processed, and why.

    ``headers_unreadable``: the record's headers could not be read (``readable_headers``), so
    ``headers`` is empty and the dead letter says so in header ``splitstate.headers``.
    """

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    stage: DeadLetterStage
    reason: str
    headers_unreadable: bool = False

    @classmethod
    def of(
        cls,
        message: InputMessage,
        where: tuple[str, int, int],
        stage: DeadLetterStage,
        reason: str,
    ) -> DeadLetter:
        """The dead letter of ``message``, at ``where`` (topic, partition, offset): its key,
        value and headers (none, when they cannot be read)."""
        topic, partition, offset = where
        headers = readable_headers(message)
        return cls(
            topic,
            partition,
            offset,
            message.key(),
            message.value(),
            () if headers is None else tuple(headers),
            stage,
            reason,
            headers_unreadable=headers is None,
        )

    def kafka_headers(self) -> list[tuple[str, bytes | None]]:
        """The original headers plus splitstate's explanation."""
        unreadable = [(UNREADABLE_HEADERS_HEADER, UNREADABLE_HEADERS)]
        return [
            *(unreadable if self.headers_unreadable else self.headers),
            ("splitstate.error", self.reason.encode()[:4000]),
            ("splitstate.stage", self.stage.encode()),
            ("splitstate.topic", self.topic.encode()),
            ("splitstate.partition", str(self.partition).encode()),
            ("splitstate.offset", str(self.offset).encode()),
        ]


_FAST_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    dict: orjson.dumps,
    list: orjson.dumps,
    int: orjson.dumps,
    bytes: bytes,
    str: str.encode,
}


def encode_value(value: Any) -> bytes | None:
    """Output value to bytes: bytes as-is, text as UTF-8, models and the rest as JSON."""
    encoder = _FAST_ENCODERS.get(type(value))
    if encoder is not None:
        return encoder(value)
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, BaseModel):
        return value.model_dump_json().encode()
    return orjson.dumps(value)


def encode_input(value: Any, what: str) -> bytes | None:
    """``value`` encoded as ``encode_value`` encodes outputs (what a producer sends);
    ``TypeError`` naming ``what`` and the fix when it cannot be."""
    try:
        return encode_value(value)
    except TypeError as error:  # orjson's JSONEncodeError is one
        raise TypeError(
            f"{what}: a value of type {type(value).__name__} cannot be encoded ({error}). Fix: "
            "pass bytes, str, a pydantic model, or a JSON-able value (dict, list, number)"
        ) from None
