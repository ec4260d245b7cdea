"""moto's S3 server on 127.0.0.1 with a bucket ``snapshots``: a snapshot store reached by URL,
as processors on other machines reach one."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow.fs as pafs

#: what the server accepts (moto takes any credentials), for clients' environments
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextmanager
def s3_server() -> Iterator[str]:
    """Run the server on a free port; yields its ``host:port``."""
    from moto.server import ThreadedMotoServer  # noqa: PLC0415 - only for the tests using it

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    admin = pafs.S3FileSystem(
        access_key=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        secret_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        region=CREDENTIALS["AWS_DEFAULT_REGION"],
        endpoint_override=f"{host}:{port}",
        scheme="http",
        allow_bucket_creation=True,
    )
    admin.create_dir("snapshots")
    try:
        yield f"{host}:{port}"
    finally:
        server.stop()


def snapshot_url(endpoint: str) -> str:
    """A fresh prefix of the bucket, as a pyarrow.fs URL."""
    return f"s3://snapshots/{uuid.uuid4().hex[:8]}?endpoint_override={endpoint}&scheme=http"
