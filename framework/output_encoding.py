"""Turning what a processor (or timer) function returned into encoded outputs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from framework.records import EncodedOutput, Output, encode_value, output_items

__all__ = ["OutputEncoder"]


class OutputEncoder:
    """Encodes ``Output``s to the app's declared output topics (``default``: its only one)."""

    def __init__(self, outputs: set[str], default: str | None) -> None:
        self.outputs = outputs
        self.default = default

    def encode(
        self,
        result: Output | Iterable[Output] | None,
        key: bytes,
        origin: tuple[str, int, int],
        function: Callable[..., Any],
    ) -> list[EncodedOutput]:
        """The outputs of ``result`` (keyed ``key`` unless they name one), from the record
        at ``origin``; ``ValueError`` for an output to no declared topic."""
        if result is None:
            return []
        if type(result) is Output and result.topic is None and self.default is not None:
            # The common case, kept short: one output to the app's only output topic.
            value = encode_value(result.value)
            headers = _header_list(result.headers)
            return [
                EncodedOutput(
                    self.default,
                    key if result.key is None else result.key,
                    value,
                    headers,
                    origin,
                )
            ]
        if type(result) is list:  # (a time path's outputs: windows that closed, kept short)
            fast = self._list(result, key, origin)
            if fast is not None:
                return fast
        encoded = []
        for output in output_items(result, _name(function)):
            topic = output.topic or self.default
            if topic is None:
                raise ValueError(
                    f"Output without a topic, but the app has {len(self.outputs)} output "
                    f"topics {sorted(self.outputs)}. Fix: name one, Output(value, topic=...)."
                )
            if topic not in self.outputs:
                raise ValueError(
                    f"output topic {topic!r} is not declared; declared outputs: "
                    f"{sorted(self.outputs)}. Fix: add it under `outputs` in the config."
                )
            encoded.append(
                EncodedOutput(
                    topic,
                    key if output.key is None else output.key,
                    encode_value(output.value),
                    _header_list(output.headers),
                    origin,
                )
            )
        return encoded

    def _list(
        self, outputs: list[Any], key: bytes, origin: tuple[str, int, int]
    ) -> list[EncodedOutput] | None:
        """``encode`` of a list of ``Output``s to declared topics (``None`` when one is not:
        ``encode`` then says what is wrong)."""
        encoded = []
        default, declared = self.default, self.outputs
        for output in outputs:
            if type(output) is not Output:
                return None
            topic = output.topic or default
            if topic not in declared:
                return None
            encoded.append(
                EncodedOutput(
                    topic,
                    key if output.key is None else output.key,
                    encode_value(output.value),
                    _header_list(output.headers),
                    origin,
                )
            )
        return encoded


def _header_list(
    headers: Mapping[str, bytes] | None,
) -> list[tuple[str, str | bytes | None]] | None:
    return [(name, value) for name, value in headers.items()] if headers else None


def _name(function: Callable[..., Any]) -> str:
    """The function's name, for errors (its repr only when it has none: a repr can be long and
    slow, e.g. a bound method of a dataclass)."""
    name = getattr(function, "__name__", None)
    return name if isinstance(name, str) else repr(function)
