"""Run untrusted work (model files, uploaded data) in a child process with limits.

Everything that reads a visitor's file or calls a visitor's model goes through
:func:`isolated`: a forked child that

- starts as every process the server forks does (:func:`become_child`): it closes the
  sockets it inherits (the server's listening socket and its clients' connections) and
  dies with its parent (``PR_SET_PDEATHSIG``), so a cancelled or killed job takes its
  model process with it and no child of a stopped server keeps its port;
- has an address-space limit (``RLIMIT_AS``; works in a container without cgroups) of
  what it maps when it starts (the forked web worker, with its imports and its threads'
  malloc arenas) plus the job's budget, so a file that decompresses or allocates without
  bound gets a ``MemoryError`` in the child, never gigabytes in the web worker;
- has a wall-clock limit enforced by the parent, which kills the child with ``SIGKILL``
  (an ONNX ``Loop`` of 2^62 iterations, a crafted tree that never reaches a leaf).

Failures come back as :class:`compute.ModelError` with a message for the page; exceptions
raised by the function itself are re-raised in the caller.
"""

from __future__ import annotations

import os
import pickle
import queue
import resource
import select
import signal
import socket
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

import compute


@dataclass(frozen=True)
class Limits:
    """Wall-clock seconds, and address-space bytes one isolated call may map beyond what it
    starts with, for one isolated call (None: no limit)."""

    seconds: float | None = None
    memory_bytes: int | None = None
    option: str = ""  # the operator option that sets them, named in messages


def die_with_parent(parent: int) -> None:
    """Linux: get SIGKILL when the parent dies."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def close_inherited_sockets() -> None:
    """Close the server's sockets this forked process inherited: every listening socket (the
    server's port, gunicorn's control socket) and every connection accepted on one of their
    ports (its clients'). A child holding them keeps the port bound after the server ends,
    and a connection the server closes open. The connections the child's own work uses stay
    (a Celery worker's Redis connection, through which a job reports its progress), and so
    do its pipes, its files and descriptors 0-2 (under systemd a socket to the journal)."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return
    sockets = []
    for name in names:
        try:
            fd = int(name)
            if fd > 2 and stat.S_ISSOCK(os.fstat(fd).st_mode):
                sockets.append(fd)
        except (OSError, ValueError):
            pass
    found = {fd: _socket_facts(fd) for fd in sockets}
    ports = {port for listening, port in found.values() if listening and port is not None}
    for fd, (listening, port) in found.items():
        if listening or (port is not None and port in ports):
            try:
                os.close(fd)
            except OSError:
                pass


def _socket_facts(fd: int) -> tuple[bool, int | None]:
    """(is it listening, its local TCP/UDP port or None) of an open socket descriptor, which
    stays open."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        return False, None
    try:
        listening = bool(sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))
        address = sock.getsockname()
        port = address[1] if isinstance(address, tuple) and len(address) >= 2 else None
        return listening, port
    except OSError:
        return False, None
    finally:
        sock.detach()  # the descriptor is not this object's to close


# Signals a forked child must not handle as its parent does: the parent's Python handlers
# (gunicorn's worker and master install some) would run in the child and, e.g., make a
# SIGTERM set a flag of a worker object that does not run here instead of ending the child.
_DEFAULT_SIGNALS = ("SIGTERM", "SIGQUIT", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGWINCH", "SIGABRT", "SIGCHLD", "SIGTTIN")


def reset_signals() -> None:
    """Default signal handling in a forked child, SIGINT ignored (a Ctrl-C reaches the whole
    foreground group: the server stops, and its children end with it, without tracebacks),
    and no wake-up descriptor of the parent's."""
    for name in _DEFAULT_SIGNALS:
        try:
            signal.signal(getattr(signal, name), signal.SIG_DFL)
        except (AttributeError, OSError, ValueError):
            pass
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.set_wakeup_fd(-1)
    except (OSError, ValueError):
        pass


def become_child(parent: int) -> None:
    """What every process the server forks does first (job processes, model processes, warm
    processes, the warm-up): hold no socket it does not serve, handle no signal as its
    parent, and end when its parent ends (even by SIGKILL), so nothing re-parented to init
    outlives the server or keeps its port."""
    close_inherited_sockets()
    reset_signals()
    die_with_parent(parent)


def end_descendants() -> int:
    """SIGKILL every descendant of this process (a server stopping: its jobs, model and warm
    processes end with it at once rather than when they finish); how many there were."""
    try:
        found = psutil.Process().children(recursive=True)
    except psutil.Error:
        return 0
    for process in found:
        try:
            process.kill()
        except psutil.Error:
            pass
    return len(found)


# --- the forking thread ------------------------------------------------------------------
# PR_SET_PDEATHSIG fires when the *thread* that forked a child exits, not the process: a
# child forked by a request thread of a development server (one thread per connection)
# would be killed when its request ends. Long-lived children (warm processes, background
# jobs) are therefore forked by one thread of the process that lives as long as it does.
@dataclass
class _Call:
    fn: Callable[[], object]
    done: threading.Event
    result: object = None
    error: BaseException | None = None


_FORKER: dict = {}  # pid -> (its forking thread, its queue of calls)


def _forker(calls: queue.SimpleQueue) -> None:
    while True:
        call = calls.get()
        try:
            call.result = call.fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the asking thread
            call.error = exc
        call.done.set()


def in_forking_thread(fn):
    """``fn()`` called in this process's forking thread (started on first use); its result,
    or its exception raised here. ``fn`` forks the long-lived children."""
    pid = os.getpid()
    found = _FORKER.get(pid)
    if found is None:  # a forked process inherits no thread (nor this entry: _forget_forker)
        calls: queue.SimpleQueue = queue.SimpleQueue()
        thread = threading.Thread(target=_forker, args=(calls,), name="forker", daemon=True)
        found = _FORKER.setdefault(pid, (thread, calls))
        if found[0] is thread:
            thread.start()
    call = _Call(fn, threading.Event())
    found[1].put(call)
    call.done.wait()
    if call.error is not None:
        raise call.error
    return call.result


def _forget_forker() -> None:
    _FORKER.clear()


os.register_at_fork(after_in_child=_forget_forker)


def name_process(name: str) -> None:
    """Linux: the process's name as ``ps`` and ``psutil`` show it (at most 15 bytes)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, name.encode()[:15])  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


def mapped_bytes() -> int:
    """Bytes of address space this process maps now (``VmSize``), 0 where unknown."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def limit_memory(limit: int | None) -> None:
    """Allow ``limit`` bytes of address space beyond what the process maps when it starts.

    An absolute limit would leave a model a budget that depends on the web worker it was
    forked from: the imports done before forking (ONNX Runtime alone maps over a GiB it
    never touches) and a malloc arena per thread the worker ever ran (64 MiB each) count
    against it, so the same file loaded in one worker and failed in another."""
    if not limit:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = mapped_bytes() + limit
    cap = cap if hard == resource.RLIM_INFINITY else min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def _child(fn, args, parent: int, write_fd: int, limits: Limits) -> None:
    code = 0
    try:
        become_child(parent)
        try:
            limit_memory(limits.memory_bytes)
            result = ("ok", fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the parent
            result = ("error", exc)
        try:
            payload = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            detail = f"{type(result[1]).__name__}: {result[1]}" if result[0] == "error" else repr(exc)
            payload = pickle.dumps(("error", compute.ModelError(detail[:500])))
        with os.fdopen(write_fd, "wb") as pipe:
            pipe.write(payload)
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def isolated(fn, *args, what: str = "The model", limits: Limits | None = None):
    """Run ``fn(*args)`` in a forked child process under ``limits`` and return its result.

    A child that crashes, runs out of its memory limit or time limit ends with a
    :class:`compute.ModelError` naming ``what`` and the limit; the caller keeps running.
    Exceptions raised by ``fn`` are re-raised here (as a ``ModelError`` if they cannot be
    pickled).
    """
    limits = limits or Limits()
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_fd)
        _child(fn, args, parent, write_fd, limits)
    os.close(write_fd)
    try:
        payload, timed_out = _read_until(read_fd, limits.seconds)
    finally:
        os.close(read_fd)
    if timed_out:
        _kill(pid)
        hint = f" (option {limits.option})" if limits.option else ""
        raise compute.ModelError(
            f"{what} took longer than {limits.seconds:g} s, the time this server allows{hint}; it was "
            "stopped. A model or file that needs this long may be crafted to never finish, or too large "
            "for this server: try a smaller file, or ask the operator to raise the limit."
        )
    _, status = os.waitpid(pid, 0)
    if not payload:
        if os.WIFSIGNALED(status):
            number = os.WTERMSIG(status)
            how = f"was killed by signal {number} ({signal.Signals(number).name})"
        else:
            how = f"exited with status {os.WEXITSTATUS(status)}"
        raise compute.ModelError(
            f"{what} stopped the process that was running it: it {how}. The file may be damaged or "
            "crafted, or the model needs more memory than the server allows. The server keeps running; "
            "try another model file."
        )
    kind, value = pickle.loads(payload)
    if kind == "error":
        if isinstance(value, MemoryError) and limits.memory_bytes:
            hint = f" (option {limits.option})" if limits.option else ""
            raise compute.ModelError(
                f"{what} needed more memory than this server allows per job "
                f"({limits.memory_bytes / 2**20:,.0f} MiB{hint}). Try a smaller file or a sample of the "
                "rows, or ask the operator to raise the limit."
            ) from None
        raise value
    return value


def _read_until(fd: int, seconds: float | None) -> tuple[bytes, bool]:
    """All bytes from ``fd`` until EOF, or (what arrived, True) when ``seconds`` pass first."""
    deadline = None if seconds is None else time.monotonic() + seconds
    chunks: list[bytes] = []
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    while True:
        if deadline is None:
            timeout_ms = None
        else:
            left = deadline - time.monotonic()
            if left <= 0:
                return b"".join(chunks), True
            timeout_ms = max(1, int(left * 1000))
        if not poller.poll(timeout_ms):
            continue  # the deadline check above ends the loop
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
