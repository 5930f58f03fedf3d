"""An S3-compatible server on 127.0.0.1 for benchmarks and tests: moto's server mode in a
thread of this process, at a free port (what s3fs's own suite uses). Nothing leaves the
host; the credentials are dummies the server accepts."""

from __future__ import annotations

import logging
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def s3_server() -> Iterator[str]:
    """Start the server (empty), yield its endpoint URL, always stop it."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        # moto keeps its buckets in this process, not in the server: an earlier server's
        # are still there, so the new one is emptied first
        urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")).close()
        yield endpoint
    finally:
        server.stop()


def new_bucket(endpoint: str, name: str, *, anonymous: bool = False) -> tuple[str, dict[str, object]]:
    """A new empty bucket ``name`` on the server at ``endpoint``: its ``s3://`` URI and the
    storage options that reach it (the endpoint and dummy credentials). ``anonymous``: a
    bucket anyone may read and write, reached with unsigned requests (options without
    credentials, as where they come from the environment or a profile)."""
    import s3fs

    options: dict[str, object] = {"endpoint_url": endpoint, "key": "testing-key-id",
                                  "secret": "testing-secret-value"}
    s3fs.S3FileSystem(**options).mkdir(name, **({"acl": "public-read-write"} if anonymous else {}))
    return f"s3://{name}", {"endpoint_url": endpoint, "anon": True} if anonymous else options
