"""Warm model processes: a click's small task (a what-if) answered at once.

A background job forks a process, loads the model, computes, and the page polls for the
end: 0.9-2.2 s from a what-if edit to its prediction. A task whose spec is ``quick`` (a
single row's what-if) is computed instead by a warm process of its data set and model,
asked directly by the request that needs it. It keeps the trust boundary of
:mod:`dashboard.isolation`:

- the model runs only in the warm process: forked from the web worker like every model
  process (by one long-lived thread of the worker, so it dies with the worker and not with
  the request thread that first needed it), with the job's address-space limit; it closes
  the sockets it inherits at once (the worker's listening socket and its clients'
  connections are not the model's to hold, nor to read);
- the web worker gets back a few checked JSON fields (results go through the cache, as a
  job's), never an object;
- a request that takes longer than :data:`QUICK_SECONDS` kills the process, and one that
  takes longer than :data:`SLOW_SECONDS` (or crashes, or runs out of memory) sends the
  model to background jobs for :data:`IDLE_SECONDS` (with their time and memory limits,
  progress and Cancel); a task the warm process fails on goes to the job, which reports
  the error the usual way;
- a request never waits for a busy warm process (the job takes the task), a client has one
  quick request at a time per worker, a web worker keeps at most :data:`MAX_WARM` processes
  (stopping only an idle one to start another) and stops one unused for
  :data:`IDLE_SECONDS`: quick work is bounded by the server's workers, not by its visitors.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import struct
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from . import jobs
from .isolation import become_child, in_forking_thread, limit_memory, name_process

log = logging.getLogger(__name__)

QUICK_SECONDS = 5.0  # longest a request waits for a warm process before the job takes over
SLOW_SECONDS = 2.0  # an answer slower than this sends the model to background jobs for a while
IDLE_SECONDS = 600.0  # a warm process unused this long is stopped
MAX_BYTES = 1 << 34  # most result bytes one answer may say it stored
MAX_WARM = 3  # warm processes per web worker
PROCESS_NAME = "wip-warm-model"  # as ps shows a warm process
_HEADER = struct.Struct("!I")
_MAX_MESSAGE = 1 << 20


def _send(fd: int, message: dict) -> None:
    body = json.dumps(message, default=str).encode()
    view = memoryview(_HEADER.pack(len(body)) + body)
    while view:
        view = view[os.write(fd, view) :]


def _recv(fd: int, seconds: float | None) -> dict | None:
    """One message, or None on EOF, a malformed message or when ``seconds`` pass first."""
    deadline = None if seconds is None else time.monotonic() + seconds
    header = _read(fd, _HEADER.size, deadline)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > _MAX_MESSAGE:
        return None
    body = _read(fd, size, deadline)
    try:
        found = json.loads(body) if body is not None else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _read(fd: int, size: int, deadline: float | None) -> bytes | None:
    chunks, got = [], 0
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    while got < size:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return None
        if not poller.poll(None if left is None else max(1, int(left * 1000))):
            continue
        chunk = os.read(fd, size - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _serve(ctx, ws, requests: int, replies: int, parent: int) -> None:
    """The warm process: load the model on the first request, then answer each one."""
    become_child(parent)
    name_process(PROCESS_NAME)
    limit_memory(ctx.job_limits.memory_bytes)
    models: dict = {}  # loaded once, kept for every later request
    while True:
        message = _recv(requests, IDLE_SECONDS + 60)  # the worker stops it first; this is a safety net
        if message is None:  # the web worker closed the pipe (or is gone)
            return
        before = ctx.store.bytes_written
        try:
            busy = jobs.run(
                ctx.store, ws, message["tasks"], policy=ctx.policy, n_jobs=ctx.config.n_jobs, models=models, wait=False
            )
            reply: dict = {"busy": [t["key"] for t in busy], "bytes": ctx.store.bytes_written - before}
        except MemoryError:
            _send(replies, {"error": "memory"})
            return  # a process out of memory is not reused
        except Exception as exc:  # noqa: BLE001 - the job computes it again and says why
            reply = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        _send(replies, reply)


@dataclass(frozen=True)
class Answer:
    """A warm process's answer: the tasks it left undone (another process computing them)
    and the result bytes it stored."""

    undone: list
    written: int


class WarmProcess:
    """One warm process of a data set's model (see the module's docstring). Its pipes and
    pid are closed and reaped once, under its lock: an ask in progress is never cut off by
    another thread, and no descriptor number is closed twice (it may be another's by then)."""

    def __init__(self, ctx, ws):
        requests_r, self.requests = os.pipe()
        self.replies, replies_w = os.pipe()
        parent = os.getpid()
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns
            code = 0
            try:
                os.close(self.requests)
                os.close(self.replies)
                _serve(ctx, ws, requests_r, replies_w, parent)
            except BaseException:  # noqa: BLE001
                code = 1
            finally:
                os._exit(code)
        os.close(requests_r)
        os.close(replies_w)
        self.lock = threading.Lock()
        self.alive, self.failed = True, False
        self.used = time.monotonic()

    def ask(self, tasks: list[dict], seconds: float) -> Answer | None:
        """Compute ``tasks`` into the cache, or None when the process is busy with another
        request, failed or took too long (then it is stopped, and ``failed`` says so)."""
        if not self.lock.acquire(blocking=False):
            return None  # busy with another request: the job takes this one
        try:
            if not self.alive:
                return None
            start = time.monotonic()
            try:
                _send(self.requests, {"tasks": tasks})
            except OSError:  # it died
                self._close()
                return None
            reply = _recv(self.replies, seconds)
            if reply is not None and "error" in reply and reply["error"] != "memory":
                log.info("warm model process: %s", str(reply["error"])[:300])
                self.used = time.monotonic()
                return None  # a task it failed on: the job computes it and says why; the process stays
            answer = _answer(reply, tasks)
            if answer is None:  # too slow, crashed, out of memory, or a reply out of shape
                self.failed = True
                self._close()
                return None
            self.used = time.monotonic()
            if self.used - start > SLOW_SECONDS:  # too slow to answer a click: jobs for a while
                self.failed = True
                self._close()
            return answer
        finally:
            self.lock.release()

    def idle(self) -> bool:
        return time.monotonic() - self.used > IDLE_SECONDS

    def stop(self, wait: bool = True) -> bool:
        """Stop the process (``wait=False``: only when no request is using it); whether it
        is stopped."""
        if wait:
            _kill(self.pid)  # an ask in progress reads EOF at once and lets go of the lock
        if not self.lock.acquire(blocking=wait):
            return False
        try:
            self._close()
            return True
        finally:
            self.lock.release()

    def _close(self) -> None:
        """Under the lock: kill, close the pipes and reap, once."""
        if not self.alive and self.pid < 0:
            return
        self.alive = False
        pid, self.pid = self.pid, -1  # never signalled again once reaped (its number may be reused)
        if pid > 0:
            _kill(pid)
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        for fd in (self.requests, self.replies):
            try:
                os.close(fd)
            except OSError:
                pass
        self.requests = self.replies = -1


def _kill(pid: int) -> None:
    if pid > 0:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _answer(reply: dict | None, tasks: list[dict]) -> Answer | None:
    """The reply checked: ``busy`` a list of the tasks' keys, ``bytes`` a whole number
    (clamped to [0, MAX_BYTES]); None for an error reply or one out of shape."""
    if reply is None or "error" in reply:
        return None
    busy, written = reply.get("busy"), reply.get("bytes")
    if not isinstance(busy, list) or not isinstance(written, int) or isinstance(written, bool):
        return None
    keys = {t["key"] for t in tasks}
    if not all(isinstance(k, str) and k in keys for k in busy):
        return None
    return Answer([t for t in tasks if t["key"] in set(busy)], min(max(written, 0), MAX_BYTES))


def _start(ctx, ws) -> WarmProcess:
    """A new warm process, forked by the worker's forking thread (PR_SET_PDEATHSIG fires when
    the thread that forked a child exits: a request thread of the development server ends
    with its connection)."""
    try:
        return in_forking_thread(lambda: WarmProcess(ctx, ws))
    except Exception as exc:  # noqa: BLE001 - the job takes the task
        raise OSError(f"no warm model process: {exc}") from exc


# --- the pool -----------------------------------------------------------------------------
_POOL: OrderedDict = OrderedDict()
_POOL_LOCK = threading.Lock()
_COLD: dict = {}  # keys whose process was too slow or failed -> until when the job is used
_ASKING: dict = {}  # client -> its quick requests running in this worker


def _key(ctx, ws, model: str) -> str:
    return json.dumps([str(ctx.store.root), ws.id, model, os.getpid()])


def _process(ctx, ws, model: str) -> WarmProcess | None:
    """The warm process of the model (started if need be), or None while it is cold or
    every process of the worker is busy."""
    key = _key(ctx, ws, model)
    with _POOL_LOCK:
        if _COLD.get(key, 0.0) > time.monotonic():
            return None
        found = _POOL.get(key)
        if found is not None and (not found.alive or found.idle()):
            if not found.stop(wait=False):
                return None  # in use (its ask will find it failed): the job this time
            del _POOL[key]
            found = None
        if found is None:
            for old_key, old in list(_POOL.items()):  # room for it: stop idle ones, oldest first
                if len(_POOL) < MAX_WARM:
                    break
                if old.stop(wait=False):
                    del _POOL[old_key]
            if len(_POOL) >= MAX_WARM:
                return None  # all busy: the job takes the task
            found = _POOL[key] = _start(ctx, ws)
        _POOL.move_to_end(key)
        return found


def run_quick(ctx, ws, tasks: list[dict], client: str = "") -> tuple[list[dict], int]:
    """Compute the tasks in warm model processes (one per model); returns those left for a
    background job (not done: failed, too slow, busy, or being computed by another process)
    and the result bytes stored. A client has one quick request at a time in this worker."""
    with _POOL_LOCK:
        if _ASKING.get(client, 0) >= 1:
            return tasks, 0
        _ASKING[client] = _ASKING.get(client, 0) + 1
    try:
        return _run_quick(ctx, ws, tasks)
    finally:
        with _POOL_LOCK:
            _ASKING[client] -= 1
            if not _ASKING[client]:
                del _ASKING[client]


def _run_quick(ctx, ws, tasks: list[dict]) -> tuple[list[dict], int]:
    left: list[dict] = []
    written = 0
    for model in dict.fromkeys(t["model"] for t in tasks):
        mine = [t for t in tasks if t["model"] == model]
        seconds = min(QUICK_SECONDS, ctx.job_limits.seconds or QUICK_SECONDS)
        answer = None
        try:
            process = _process(ctx, ws, model)
            answer = None if process is None else process.ask(mine, seconds)
            if process is not None and process.failed:  # too slow, or it crashed: jobs for a while
                with _POOL_LOCK:
                    _COLD[_key(ctx, ws, model)] = time.monotonic() + IDLE_SECONDS
        except OSError as exc:  # no process could be started (the host's limits)
            log.warning("no warm model process: %s", exc)
        if answer is None:
            left += mine
        else:
            left += answer.undone
            written += answer.written
    return left, written


def stop_all() -> None:
    """Stop this worker's warm processes (tests; a worker's exit kills them anyway)."""
    with _POOL_LOCK:
        _COLD.clear()
        while _POOL:
            _, process = _POOL.popitem()
            process.stop()
