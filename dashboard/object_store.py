"""Large values in an S3-compatible object store (``--object-store``, issue 44).

With ``--celery-broker`` and ``--object-store s3://bucket/prefix?endpoint=http://host:port``
the values :class:`dashboard.broker.Broker` would keep in Redis as chunks (results, uploaded
files, data and model files, workspace records) are kept as one object each under
``prefix/``; Redis keeps the locks, the job queue and the job records. Each object is the
value's signature (HMAC-SHA-256 of the deployment's key over its name and bytes, as in
Redis) followed by its bytes: an object altered, truncated or copied under another name is
refused by :meth:`dashboard.broker.Broker.get`, never unpickled.

The client is PyArrow's own ``pyarrow.fs.S3FileSystem`` (PyArrow is a dependency already;
no other S3 library is needed), with connect and request timeouts and one retry, so a store
that cannot be reached fails a write with :class:`ObjectStoreError` naming it within
seconds, never hangs. Credentials come from the standard AWS variables
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``) or
files (``~/.aws``), never from the URL. Object names are the broker's names (content hashes,
server-made tokens and ids), quoted into one path segment: nothing a visitor sends chooses one.
"""

from __future__ import annotations

import atexit
import os
from urllib.parse import parse_qs, quote, urlsplit

CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 30.0  # a transfer stalled this long (no byte moving) fails
_OPTIONS = {"endpoint", "region"}


class ObjectStoreError(RuntimeError):
    """The object store could not be reached (or refused a request); the message names it."""


def parse_url(url: str) -> tuple[str, dict]:
    """``s3://bucket[/prefix][?endpoint=http(s)://host:port][&region=...]`` as (the bucket
    and prefix path, the S3FileSystem's options); ValueError with the reason otherwise."""
    parts = urlsplit(url)
    query = parse_qs(parts.query, keep_blank_values=True)
    if parts.scheme != "s3" or not parts.hostname:
        raise ValueError(f"the object store must be an s3://bucket/prefix URL (got {url[:120]!r})")
    if parts.username or parts.password:
        raise ValueError("the object store URL holds no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
    unknown = set(query) - _OPTIONS
    if unknown or any(len(v) != 1 for v in query.values()):
        raise ValueError(
            f"the object store URL takes ?endpoint=http(s)://host:port and &region=... (got {url[:120]!r})"
        )
    options: dict = {}
    if "endpoint" in query:
        endpoint = urlsplit(query["endpoint"][0])
        if endpoint.scheme not in ("http", "https") or not endpoint.netloc:
            raise ValueError(f"the object store's endpoint must be http(s)://host:port (got {query['endpoint'][0]!r})")
        options.update(scheme=endpoint.scheme, endpoint_override=endpoint.netloc)
    if "region" in query:
        options["region"] = query["region"][0]
    prefix = parts.path.strip("/")
    return f"{parts.hostname}/{prefix}" if prefix else parts.hostname, options


class ObjectStore:
    """One value per object under ``bucket/prefix`` (``url``: see :func:`parse_url`)."""

    def __init__(
        self, url: str, *, connect_timeout: float = CONNECT_TIMEOUT_S, request_timeout: float = REQUEST_TIMEOUT_S
    ):
        self.url = url
        self.root, options = parse_url(url)
        self._options = {**options, "connect_timeout": connect_timeout, "request_timeout": request_timeout}
        self._fs: dict[int, object] = {}  # per process: a forked child makes its own client

    def __repr__(self) -> str:
        return f"ObjectStore({self.url!r})"

    def where(self) -> str:
        """The store as the page names it."""
        return self.url.split("?", 1)[0]

    def _client(self):
        pid = os.getpid()
        if pid not in self._fs:
            from pyarrow import fs as pafs

            if not _OPEN:  # after PyArrow's own exit hook, so it runs before: S3 is finalized with no client left
                atexit.register(_close)
            self._fs[pid] = pafs.S3FileSystem(
                **self._options, retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=2)
            )
            _OPEN.append(self._fs)
        return self._fs[pid]

    def _path(self, name: str) -> str:
        return f"{self.root}/{quote(name, safe='')}"

    def _fail(self, what: str, exc: Exception) -> ObjectStoreError:
        first = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        return ObjectStoreError(f"the object store ({self.where()}) could not be reached to {what}: {first}")

    def write(self, name: str, *parts: bytes) -> None:
        """Keep ``parts`` as the object ``name``, one after the other (an S3 object appears
        once its upload completes; one cut short fails its signature when read)."""
        try:
            with self._client().open_output_stream(self._path(name)) as out:
                for part in parts:
                    out.write(part)
        except (OSError, ValueError) as exc:
            raise self._fail("store a value", exc) from exc

    def read(self, name: str) -> bytes | None:
        """The object's bytes, None when there is none."""
        try:
            with self._client().open_input_stream(self._path(name)) as src:
                return src.read()
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise self._fail("read a value", exc) from exc

    def exists(self, name: str) -> bool:
        from pyarrow import fs as pafs

        try:
            info = self._client().get_file_info(self._path(name))
        except (OSError, ValueError) as exc:
            raise self._fail("look up a value", exc) from exc
        return info.type != pafs.FileType.NotFound

    def delete(self, name: str) -> None:
        try:
            self._client().delete_file(self._path(name))
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            raise self._fail("delete a value", exc) from exc

    def ping(self) -> None:
        """Raise :class:`ObjectStoreError` unless the bucket answers."""
        self.exists(".ping")


_OPEN: list[dict] = []


def _close() -> None:  # clients dropped before PyArrow's own exit hook finalizes S3
    for clients in _OPEN:
        clients.clear()
