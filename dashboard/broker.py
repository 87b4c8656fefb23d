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

log = logging.getLogger(__name__)

PREFIX = "wip:"
CHUNK = 4 * 2**20  # bytes per Redis value: large results and files travel in pieces
TTL_S = 7 * 86400  # results and files: a cache, kept a week (each machine keeps its own copy)
LOCK_TTL_S = 6.0  # a lock whose holder died frees itself this long after its last renewal


class BrokerError(RuntimeError):
    """The broker could not be reached, or a value is over the size limit; the message says
    which, for the page."""


class Broker:
    """Signed values and expiring locks in Redis (``url``: ``redis://`` or ``rediss://``)."""

    def __init__(self, url: str, secret: str, *, max_bytes: int = 512 * 2**20, ttl_s: int = TTL_S):
        import redis

        if not secret:
            raise ValueError("a broker needs the deployment's secret key (--secret-key, WIP_SECRET_KEY)")
        self.url, self.max_bytes, self.ttl_s = url, int(max_bytes), int(ttl_s)
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

    # --- values ----------------------------------------------------------------------
    def put(self, name: str, data: bytes, *, ttl_s: int | None = None, only_new: bool = False) -> bool:
        """Keep ``data`` under ``name``: its chunks first, then the signed head that names
        them (a reader never sees a head before its chunks). ``only_new``: unless a value is
        kept there already. True when kept."""
        if len(data) > self.max_bytes:
            raise BrokerError(
                f"{len(data) / 2**20:,.0f} MiB is over the broker's limit of {self.max_bytes / 2**20:,.0f} MiB "
                "for one value (--upload-limit-mb sets it)"
            )
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

    def get(self, name: str) -> bytes | None:
        """The bytes kept under ``name``, or None: absent, expired, or refused (a chunk
        missing, the size or the signature wrong)."""
        raw = self._call("read a value", self.client.get, f"{PREFIX}v:{name}")
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
        chunks = self._call("read a value", self.client.mget, [f"{PREFIX}c:{name}:{nonce}:{i}" for i in range(n)])
        if any(c is None for c in chunks):
            return None  # expired in part
        data = b"".join(chunks)
        if len(data) != size or not hmac.compare_digest(self._sign(name, data), mac):
            log.warning("broker value %s fails its signature; refused", name)
            return None
        return data

    def exists(self, name: str) -> bool:
        return bool(self._call("look up a value", self.client.exists, f"{PREFIX}v:{name}"))

    def delete(self, name: str) -> None:
        self._call("delete a value", self.client.delete, f"{PREFIX}v:{name}")

    def put_json(self, name: str, value, *, ttl_s: int | None = None) -> None:
        self.put(name, json.dumps(value, default=str).encode(), ttl_s=ttl_s)

    def get_json(self, name: str):
        data = self.get(name)
        if data is None:
            return None
        try:
            return json.loads(data)
        except ValueError:
            return None

    def add_json(self, name: str, value, *, ttl_s: int) -> bool:
        """Keep ``value`` under ``name`` unless something is there already; True if kept."""
        return self.put(name, json.dumps(value, default=str).encode(), ttl_s=ttl_s, only_new=True)

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


def broker_for(url: str, secret: str, *, max_bytes: int) -> Broker | None:
    """The broker results and files travel through, for a Celery broker URL: Redis ones; None
    for none (one machine, or a broker of another kind with a shared cache folder)."""
    if not url.startswith(("redis://", "rediss://", "unix://")):
        if url:
            log.warning("the Celery broker is not Redis: results travel only through a shared cache folder")
        return None
    return Broker(url, secret, max_bytes=max_bytes)
