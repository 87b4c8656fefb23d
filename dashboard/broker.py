"""What machines share when they share only the broker (issue 44).

With ``--celery-broker redis://...`` web and compute machines each keep a cache folder of
their own (a cache, never the only copy). Everything a process on another machine must
see travels through Redis:

- results (:meth:`dashboard.store.Store.put`), uploaded files, data and model files, and
  workspace records, as signed, chunked values with a time to live (:meth:`Broker.put`);
- the coordination a shared folder gave through ``flock``: one computation per task, a
  split job's "still alive", a job's record (running, done, cancelled), as Redis locks that
  expire when their holder stops renewing them (:meth:`Broker.lock`), however it ended.

Every value is signed with an HMAC-SHA-256 of the deployment's secret key (the one every
machine is given) over its name and bytes: a value altered, truncated, or moved under
another name in Redis is refused (logged, treated as absent, so it is computed or fetched
again), never unpickled or shown. The key itself is never written to Redis.

With an object store (``--object-store``, :mod:`dashboard.object_store`) the values go there
instead, one object each, signed the same way; Redis keeps the locks, the job queue and the
job records (:meth:`Broker.put_json`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

from .object_store import ObjectStore, ObjectStoreError

log = logging.getLogger(__name__)

PREFIX = "wip:"
CHUNK = 4 * 2**20  # bytes per Redis value: large results and files travel in pieces
TTL_S = 7 * 86400  # results and files: a cache, kept a week (each machine keeps its own copy)
LOCK_TTL_S = 6.0  # a lock whose holder died frees itself this long after its last renewal
SIGNED = b"why-it-performs signed value 1\n"  # an object: this, its signature (64 hex digits), its bytes


class BrokerError(RuntimeError):
    """The broker could not be reached, or a value is over the size limit; the message says
    which, for the page."""


def unreachable(exc: BaseException) -> str | None:
    """What to tell the page of an exception that means the broker or the object store could
    not be reached (ours, Redis's or Celery's, or one they caused); None for any other."""
    seen: BaseException | None = exc
    for _ in range(8):  # the exception and what caused it
        if seen is None:
            return None
        if isinstance(seen, BrokerError):
            return str(seen)
        module = type(seen).__module__.split(".")[0]
        if module in ("redis", "kombu", "celery", "amqp") and type(seen).__name__ in _NETWORK:
            return f"the broker could not be reached ({type(seen).__name__}: {str(seen)[:200]})"
        seen = seen.__cause__ or seen.__context__
    return None


_NETWORK = {"ConnectionError", "TimeoutError", "OperationalError", "BusyLoadingError"}


class _Head(NamedTuple):
    """What a value's head in Redis says: its chunks, size, writer's nonce and signature."""

    n: int
    size: int
    nonce: str
    mac: str


class Broker:
    """Signed values and expiring locks in Redis (``url``: ``redis://`` or ``rediss://``);
    the values in ``objects`` instead, when given (an S3-compatible store)."""

    def __init__(
        self,
        url: str,
        secret: str,
        *,
        max_bytes: int = 512 * 2**20,
        ttl_s: int = TTL_S,
        objects: ObjectStore | None = None,
    ):
        import redis

        if not secret:
            raise ValueError("a broker needs the deployment's secret key (--secret-key, WIP_SECRET_KEY)")
        self.url, self.max_bytes, self.ttl_s, self.objects = url, int(max_bytes), int(ttl_s), objects
        self._key = hashlib.sha256(b"why-it-performs broker\0" + secret.encode()).digest()
        self._redis = redis
        self.client = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=30, health_check_interval=30)

    def __repr__(self) -> str:  # no password of the URL in logs
        return f"Broker({self.url.rsplit('@', 1)[-1]!r})"

    def _call(self, what: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except self._redis.RedisError as exc:
            raise BrokerError(
                f"the broker ({self.url.rsplit('@', 1)[-1]}) could not be reached to {what}: {type(exc).__name__}"
            ) from exc

    def _sign(self, name: str, data: bytes | memoryview) -> str:
        mac = hmac.new(self._key, name.encode() + b"\0", hashlib.sha256)
        mac.update(data)
        return mac.hexdigest()

    def ping(self) -> None:
        """Raise :class:`BrokerError` naming the broker (or the object store) unless both answer."""
        try:
            self.client.ping()
        except self._redis.RedisError as exc:
            raise BrokerError(
                f"the broker ({self.url.rsplit('@', 1)[-1]}) could not be reached: {type(exc).__name__}"
            ) from exc
        if self.objects is not None:
            self._obj(self.objects.ping)

    def _obj(self, fn, *args):
        """An object store call; its failure is the broker's (:class:`BrokerError`, naming the store)."""
        try:
            return fn(*args)
        except ObjectStoreError as exc:
            raise BrokerError(str(exc)) from exc

    # --- values ----------------------------------------------------------------------
    def put(self, name: str, data: bytes) -> bool:
        """Keep ``data`` under ``name``, signed: in the object store when there is one, else
        in Redis (:meth:`_redis_put`). True when kept."""
        if len(data) > self.max_bytes:
            raise BrokerError(
                f"{len(data) / 2**20:,.0f} MiB is over the broker's limit of {self.max_bytes / 2**20:,.0f} MiB "
                "for one value (--upload-limit-mb sets it)"
            )
        if self.objects is None:
            return self._redis_put(name, data)
        self._obj(self.objects.write, name, SIGNED + self._sign(name, data).encode(), data)
        return True

    def get(self, name: str) -> bytes | None:
        """The bytes kept under ``name``, or None: absent, expired, or refused (altered,
        truncated, or kept under another name: the signature is wrong)."""
        if self.objects is None:
            return self._redis_get(name)
        raw = self._obj(self.objects.read, name)
        if raw is None:
            return None
        mark = len(SIGNED) + 64
        data = memoryview(raw)[mark:]
        if not raw.startswith(SIGNED) or not hmac.compare_digest(
            self._sign(name, data).encode(), raw[len(SIGNED) : mark]
        ):
            log.warning("object store value %s fails its signature; refused", name)
            return None
        return bytes(data)

    def exists(self, name: str) -> bool:
        if self.objects is not None:
            return bool(self._obj(self.objects.exists, name))
        return bool(self._call("look up a value", self.client.exists, f"{PREFIX}v:{name}"))

    def delete(self, name: str) -> None:
        if self.objects is not None:
            self._obj(self.objects.delete, name)
            return
        self._call("delete a value", self.client.delete, f"{PREFIX}v:{name}")

    def _redis_put(self, name: str, data: bytes, *, ttl_s: int | None = None, only_new: bool = False) -> bool:
        """Keep ``data`` under ``name`` in Redis: its chunks first, then the signed head that
        names them (a reader never sees a head before its chunks). ``only_new``: unless a value
        is kept there already. True when kept."""
        ttl = int(ttl_s or self.ttl_s)
        view = memoryview(data)
        n = max(1, -(-len(data) // CHUNK))
        nonce = os.urandom(8).hex()  # a writer's chunks never mix with another's
        head = {"n": n, "size": len(data), "nonce": nonce, "mac": self._sign(name, data)}
        pipe = self.client.pipeline(transaction=False)
        for i in range(n):
            pipe.set(f"{PREFIX}c:{name}:{nonce}:{i}", bytes(view[i * CHUNK : (i + 1) * CHUNK]), ex=ttl)
        self._call("store a value", pipe.execute)
        kept = self._call(
            "store a value", self.client.set, f"{PREFIX}v:{name}", json.dumps(head), ex=ttl, nx=only_new or None
        )
        return bool(kept)

    def _redis_get(self, name: str) -> bytes | None:
        """The bytes kept under ``name`` in Redis, or None: absent, expired, or refused (a
        chunk missing, the size or the signature wrong)."""
        return self._redis_get_many([name])[0]

    def get_many(self, names: list[str]) -> list[bytes | None]:
        """:meth:`get` of each name, in two round trips to Redis (the heads, then every
        chunk they name), each value checked against its own signature."""
        if self.objects is not None:
            return [self.get(name) for name in names]
        return self._redis_get_many(list(names))

    def _redis_get_many(self, names: list[str]) -> list[bytes | None]:
        if not names:
            return []
        raws = self._call("read a value", self.client.mget, [f"{PREFIX}v:{name}" for name in names])
        heads = [self._head(name, raw) for name, raw in zip(names, raws)]
        keys = [f"{PREFIX}c:{name}:{h.nonce}:{i}" for name, h in zip(names, heads) if h for i in range(h.n)]
        pieces = iter(self._call("read a value", self.client.mget, keys) if keys else [])
        found: list[bytes | None] = []
        for name, head in zip(names, heads):
            found.append(None if head is None else self._checked(name, head, [next(pieces) for _ in range(head.n)]))
        return found

    def _head(self, name: str, raw) -> _Head | None:
        """A value's head, None when absent or damaged."""
        if raw is None:
            return None
        try:
            head = json.loads(raw)
            n, size, nonce, mac = int(head["n"]), int(head["size"]), str(head["nonce"]), str(head["mac"])
        except (ValueError, KeyError, TypeError):
            log.warning("broker value %s has a damaged head; refused", name)
            return None
        if not 0 < n <= self.max_bytes // CHUNK + 1:
            log.warning("broker value %s names %s chunks; refused", name, n)
            return None
        return _Head(n, size, nonce, mac)

    def _checked(self, name: str, head: _Head, chunks: list) -> bytes | None:
        """The value of its chunks when they are all there and its size and signature hold."""
        if any(c is None for c in chunks):
            return None  # expired in part
        data = b"".join(chunks)
        if len(data) != head.size or not hmac.compare_digest(self._sign(name, data), head.mac):
            log.warning("broker value %s fails its signature; refused", name)
            return None
        return data

    # job records: small, with a time to live, always in Redis
    def put_json(self, name: str, value, *, ttl_s: int | None = None) -> None:
        self._redis_put(name, json.dumps(value, default=str).encode(), ttl_s=ttl_s)

    def get_json(self, name: str):
        data = self._redis_get(name)
        if data is None:
            return None
        try:
            return json.loads(data)
        except ValueError:
            return None

    def add_json(self, name: str, value, *, ttl_s: int) -> bool:
        """Keep ``value`` under ``name`` unless something is there already; True if kept."""
        return self._redis_put(name, json.dumps(value, default=str).encode(), ttl_s=ttl_s, only_new=True)

    # --- locks -----------------------------------------------------------------------
    @contextmanager
    def lock(self, name: str, *, wait: bool = True, ttl_s: float = LOCK_TTL_S) -> Iterator[bool]:
        """An exclusive lock across machines; yields True once held (False at once with
        ``wait=False`` when another holds it). Renewed every ``ttl_s / 3`` by a thread while
        held; a holder that dies (killed, its machine gone) frees it ``ttl_s`` later."""
        lock = self.client.lock(f"{PREFIX}l:{name}", timeout=ttl_s, sleep=0.05, thread_local=False)
        if not self._call("take a lock", lock.acquire, blocking=wait):
            yield False
            return
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(ttl_s / 3):
                try:
                    lock.reacquire()
                except Exception:  # lost (expired while this process was stopped) or unreachable
                    log.warning("lock %s could not be renewed", name)

        keeper = threading.Thread(target=renew, name=f"lock {name[:40]}", daemon=True)
        keeper.start()
        try:
            yield True
        finally:
            stop.set()
            keeper.join(timeout=5)
            try:
                lock.release()
            except Exception:  # expired meanwhile, or the broker went away: it frees itself
                pass

    def held(self, name: str) -> bool:
        """Whether some process holds the lock ``name`` now."""
        return bool(self._call("look up a lock", self.client.exists, f"{PREFIX}l:{name}"))

    def wait_free(self, name: str, timeout: float) -> bool:
        """Wait until the lock ``name`` is free (at most ``timeout`` s); True if it is."""
        deadline = time.monotonic() + timeout
        while self.held(name):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True


def broker_for(url: str, secret: str, *, max_bytes: int, object_store: str = "") -> Broker | None:
    """The broker results and files travel through, for a Celery broker URL: Redis ones; None
    for none (one machine, or a broker of another kind with a shared cache folder). With
    ``object_store`` (an ``s3://`` URL) the values travel through that store instead."""
    if not url.startswith(("redis://", "rediss://", "unix://")):
        if url:
            log.warning("the Celery broker is not Redis: results travel only through a shared cache folder")
        return None
    objects = ObjectStore(object_store) if object_store else None
    return Broker(url, secret, max_bytes=max_bytes, objects=objects)
