"""Records that Java clients and confluent-kafka's Python producer cannot write, written
through librdkafka's C API (ctypes): header names that are not UTF-8 (confluent-kafka's
producer turns a bytes name into its ``repr``; any librdkafka or raw-protocol client can send
them). Uses the librdkafka that confluent-kafka's wheel ships."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path

import confluent_kafka

__all__ = ["produce_raw"]

# rd_kafka_producev()'s argument tags (librdkafka's rd_kafka_vtype_t) and flags
_END, _TOPIC, _PARTITION, _VALUE, _KEY, _MSGFLAGS, _HEADERS = 0, 1, 3, 4, 5, 7, 10
_MSG_F_COPY = 0x2
_PRODUCER = 0


class _Message(ctypes.Structure):
    """The start of librdkafka's rd_kafka_message_t, as a delivery report gives it."""

    _fields_ = (
        ("err", ctypes.c_int),
        ("rkt", ctypes.c_void_p),
        ("partition", ctypes.c_int32),
        ("payload", ctypes.c_void_p),
        ("len", ctypes.c_size_t),
        ("key", ctypes.c_void_p),
        ("key_len", ctypes.c_size_t),
        ("offset", ctypes.c_int64),
    )


_DeliveryReport = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(_Message), ctypes.c_void_p)


def _librdkafka() -> ctypes.CDLL:
    libs = Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs"
    found = sorted(libs.glob("librdkafka*.so*"))
    assert found, f"no librdkafka in {libs} (confluent-kafka's wheel ships one)"
    lib = ctypes.CDLL(str(found[0]))
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_conf_set.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    lib.rd_kafka_conf_set_dr_msg_cb.argtypes = [ctypes.c_void_p, _DeliveryReport]
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_headers_new.restype = ctypes.c_void_p
    lib.rd_kafka_headers_new.argtypes = [ctypes.c_size_t]
    lib.rd_kafka_header_add.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_ssize_t,
        ctypes.c_char_p,
        ctypes.c_ssize_t,
    ]
    lib.rd_kafka_headers_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_flush.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_err2str.restype = ctypes.c_char_p
    lib.rd_kafka_err2str.argtypes = [ctypes.c_int]
    return lib


def produce_raw(
    bootstrap: str,
    topic: str,
    partition: int,
    *,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[bytes, bytes]],
) -> int:
    """Write one record to ``topic[partition]`` with ``headers`` as raw bytes (names and
    values); returns its offset once Kafka acknowledged it."""
    lib = _librdkafka()
    error = ctypes.create_string_buffer(512)
    conf = lib.rd_kafka_conf_new()
    for name, setting in ((b"bootstrap.servers", bootstrap.encode()), (b"acks", b"all")):
        assert lib.rd_kafka_conf_set(conf, name, setting, error, 512) == 0, error.value
    reports: list[tuple[int, int]] = []

    def delivered(_rk: int | None, message: ctypes._Pointer[_Message], _opaque: int | None) -> None:
        reports.append((message.contents.err, message.contents.offset))

    callback = _DeliveryReport(delivered)  # kept alive until the producer is destroyed
    lib.rd_kafka_conf_set_dr_msg_cb(conf, callback)
    producer = lib.rd_kafka_new(_PRODUCER, conf, error, 512)
    assert producer, error.value
    try:
        listed = lib.rd_kafka_headers_new(len(headers))
        for name, raw in headers:
            assert lib.rd_kafka_header_add(listed, name, len(name), raw, len(raw)) == 0
        code = lib.rd_kafka_producev(
            ctypes.c_void_p(producer),
            ctypes.c_int(_TOPIC),
            ctypes.c_char_p(topic.encode()),
            ctypes.c_int(_PARTITION),
            ctypes.c_int32(partition),
            ctypes.c_int(_VALUE),
            ctypes.c_char_p(value),
            ctypes.c_size_t(len(value or b"")),
            ctypes.c_int(_KEY),
            ctypes.c_char_p(key),
            ctypes.c_size_t(len(key or b"")),
            ctypes.c_int(_MSGFLAGS),
            ctypes.c_int(_MSG_F_COPY),
            ctypes.c_int(_HEADERS),
            ctypes.c_void_p(listed),
            ctypes.c_int(_END),
        )
        if code != 0:
            lib.rd_kafka_headers_destroy(listed)  # librdkafka owns them only once produced
            raise AssertionError(f"rd_kafka_producev: {lib.rd_kafka_err2str(code)!r}")
        lib.rd_kafka_flush(ctypes.c_void_p(producer), 30_000)
    finally:
        lib.rd_kafka_destroy(ctypes.c_void_p(producer))
    assert len(reports) == 1, f"no delivery report within 30 s: {reports}"
    ((code, offset),) = reports
    assert code == 0, f"not delivered: {lib.rd_kafka_err2str(code)!r}"
    return offset
