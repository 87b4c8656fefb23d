"""Warm model processes: a click's small task (a what-if) answered at once.

A background job forks a process, loads the model, computes, and the page polls for the
end: 0.9-2.2 s from a what-if edit to its prediction. A task whose spec is ``quick`` (a
single row's what-if) is computed instead by a warm process of its data set and model,
asked directly by the request that needs it. It keeps the trust boundary of
:mod:`dashboard.isolation`:

- the model runs only in the warm process: forked from the web worker like every model
  process, it dies with it and has the job's address-space limit;
- the web worker gets back a few JSON fields (results go through the cache, as a job's),
  never an object;
- a request that takes longer than :data:`QUICK_SECONDS` kills the process, and the task
  goes to a background job (with its time and memory limits, progress and Cancel), as does
  a task the warm process fails on (the job then reports the error the usual way);
- an idle process exits after :data:`IDLE_SECONDS`; a web worker keeps at most
  :data:`MAX_WARM` (the least recently used one is stopped), and one request at a time
  runs in each, so quick work is bounded by the server's workers, not by its visitors.
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

from . import jobs
from .isolation import die_with_parent, limit_memory, name_process

log = logging.getLogger(__name__)

QUICK_SECONDS = 5.0  # longest a request waits for a warm process before the job takes over
IDLE_SECONDS = 600.0  # a warm process unused this long exits
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
    die_with_parent(parent)
    name_process(PROCESS_NAME)
    limit_memory(ctx.job_limits.memory_bytes)
    models: dict = {}  # loaded once, kept for every later request
    while True:
        message = _recv(requests, IDLE_SECONDS)
        if message is None:  # idle, or the web worker closed the pipe
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


class WarmProcess:
    """One warm process of a data set's model (see the module's docstring)."""

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
        self.written = 0

    def ask(self, tasks: list[dict], seconds: float) -> list[dict] | None:
        """Compute ``tasks`` into the cache; the ones not done (another process computing
        them), or None when the process failed or took too long (it is then stopped).
        ``written``: the result bytes it has stored for this object's requests."""
        if not self.lock.acquire(timeout=seconds):
            return None  # busy with another request: the job takes this one
        try:
            if not self.alive:
                return None
            try:
                _send(self.requests, {"tasks": tasks})
            except OSError:  # it exited (idle) or died: the next request starts another
                self.stop()
                return None
            reply = _recv(self.replies, seconds)
            if reply is None or "busy" not in reply:
                if reply is not None:
                    log.info("warm model process: %s", reply.get("error"))
                if reply is None or reply.get("error") == "memory":  # too slow, crashed, out of memory
                    self.failed = True
                    self.stop()
                return None
            self.written += int(reply.get("bytes") or 0)
            busy = set(reply["busy"])
            return [t for t in tasks if t["key"] in busy]
        finally:
            self.lock.release()

    def stop(self) -> None:
        self.alive = False
        for fd in (self.requests, self.replies):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass

    def exited(self) -> bool:
        """Whether the process ended by itself (idle; reaped here)."""
        try:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return True
        return pid != 0


_POOL: OrderedDict = OrderedDict()
_POOL_LOCK = threading.Lock()
_COLD: dict = {}  # keys whose process was too slow or failed -> until when the job is used


def _key(ctx, ws, model: str) -> str:
    return json.dumps([str(ctx.store.root), ws.id, model, os.getpid()])


def _process(ctx, ws, model: str) -> WarmProcess | None:
    """The warm process of the model (started if need be), or None while it is cold."""
    key = _key(ctx, ws, model)
    with _POOL_LOCK:
        if _COLD.get(key, 0.0) > time.monotonic():
            return None
        found = _POOL.get(key)
        if found is not None and (not found.alive or found.exited()):
            found.stop()
            found = None
        if found is None:
            found = _POOL[key] = WarmProcess(ctx, ws)
        _POOL.move_to_end(key)
        while len(_POOL) > MAX_WARM:
            _, oldest = _POOL.popitem(last=False)
            oldest.stop()
        return found


def run_quick(ctx, ws, tasks: list[dict]) -> tuple[list[dict], int]:
    """Compute the tasks in warm model processes (one per model); returns those left for a
    background job (not done: failed, too slow, or being computed by another process) and
    the result bytes stored."""
    left: list[dict] = []
    written = 0
    for model in dict.fromkeys(t["model"] for t in tasks):
        mine = [t for t in tasks if t["model"] == model]
        seconds = min(QUICK_SECONDS, ctx.job_limits.seconds or QUICK_SECONDS)
        try:
            process = _process(ctx, ws, model)
            before = 0 if process is None else process.written
            undone = None if process is None else process.ask(mine, seconds)
            written += 0 if process is None else process.written - before
            if process is not None and process.failed:  # too slow, or it crashed: jobs for a while
                _COLD[_key(ctx, ws, model)] = time.monotonic() + IDLE_SECONDS
        except OSError as exc:  # no process could be started (the host's limits)
            log.warning("no warm model process: %s", exc)
            undone = None
        left += mine if undone is None else undone
    return left, written


def stop_all() -> None:
    """Stop this worker's warm processes (tests; a worker's exit kills them anyway)."""
    with _POOL_LOCK:
        _COLD.clear()
        while _POOL:
            _, process = _POOL.popitem()
            process.stop()
