"""Computation slots shared by every worker: one client's share of the server's processes.

Every computation the page asks for is a process (a background job, with a model process
under it). Without a bound, one visitor opening tabs (or a script posting job requests)
starts as many as it likes, each up to ``--job-memory-mb``. Here at most
``--jobs-per-client`` computations of one client (address, as the upload quota counts it)
run at once, and at most ``--max-jobs`` in all: a client over its share gets a message at
once (its job process ends); a job over the total waits its turn, saying so in the progress
bar. A slot belongs to a process (host, pid and start time): one killed (out-of-memory
killer, Cancel, a crashed worker) frees it for the next request, never leaks it. A slot of
another machine sharing the cache folder (Celery workers) is trusted for ``lease`` seconds
(the job time limit), as its process cannot be looked up from here.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

import compute

from .store import ForkSafeCache

KEY = "slots"
POLL = 0.25  # seconds between looks for a free slot
WINDOW = 3600.0  # seconds: the window of a client's result-bytes budget


def _started(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


class JobSlots:
    """Slots in a small disk cache in the cache folder, read and written in one transaction
    (every gunicorn worker and its job processes count the same slots). An entry is
    ``{slot: [client, pid, process start, running?, registered at, host]}``; waiting entries
    count towards their client's share, so waiting processes are bounded too."""

    def __init__(self, root: Path, *, per_client: int, total: int, lease: float = 3600.0) -> None:
        self.per_client, self.total, self.lease = max(1, per_client), max(1, total), lease
        self.cache = ForkSafeCache(str(Path(root) / "slots"), size_limit=16 * 2**20)
        self.host = socket.gethostname()

    def _alive(self, entry: list) -> bool:
        if entry[5] != self.host:
            return time.time() - entry[4] < self.lease
        return _started(entry[1]) == entry[2]

    def _live(self) -> dict[str, list]:
        """Entries whose process still runs (a killed one's slot is free again)."""
        held = self.cache.get(KEY, default={}) or {}
        return {slot: entry for slot, entry in held.items() if self._alive(entry)}

    def running(self, client: str | None = None) -> int:
        """Processes holding a slot (of ``client``, or of anyone)."""
        with self.cache.transact(retry=True):
            live = self._live()
        return sum(entry[3] and (client is None or entry[0] == client) for entry in live.values())

    def _take(self, slot: str, client: str, pid: int, started: float) -> int | None:
        """Register ``slot`` (first call) and take it if the total allows: None when taken,
        else how many computations run now."""
        with self.cache.transact(retry=True):
            live = self._live()
            if slot not in live:
                mine = sum(entry[0] == client for entry in live.values())
                if mine >= self.per_client:
                    raise compute.InputError(
                        f"{mine} computations of yours are already running or waiting (other tabs or windows "
                        f"of this page); this server runs at most {self.per_client} per visitor at once (option "
                        "--jobs-per-client). Wait for one to finish or cancel it, then press Retry."
                    )
                live[slot] = [client, pid, started, False, time.time(), self.host]
            running = sum(entry[3] for entry in live.values())
            ahead = sum(not e[3] and e[4] < live[slot][4] for e in live.values())  # first come, first served
            if running + ahead < self.total:
                live[slot][3] = True
            self.cache.set(KEY, live)
            return None if live[slot][3] else running

    # --- requests that cost a worker seconds (the report) ------------------------------------
    def admit(self, client: str, kind: str, per_minute: int, now: float | None = None) -> int:
        """0 when ``client`` may make another ``kind`` request now (it is counted), else the
        seconds until it may."""
        now = time.time() if now is None else now
        key = f"rate:{kind}:{client}"
        with self.cache.transact(retry=True):
            recent = [t for t in self.cache.get(key, default=[]) or [] if now - t < 60.0]
            if len(recent) >= per_minute:
                return int(60.0 - (now - min(recent))) + 1
            self.cache.set(key, [*recent, now], expire=60.0)
        return 0

    # --- each client's share of the result cache ---------------------------------------------
    def spent(self, client: str, now: float | None = None) -> int:
        """Result bytes ``client``'s computations stored in the last hour."""
        now = time.time() if now is None else now
        with self.cache.transact(retry=True):
            return sum(b for t, b in self.cache.get(f"bytes:{client}", default=[]) or [] if now - t < WINDOW)

    def charge(self, client: str, nbytes: int, now: float | None = None) -> None:
        """Count ``nbytes`` of results stored for ``client`` now."""
        now = time.time() if now is None else now
        key = f"bytes:{client}"
        with self.cache.transact(retry=True):
            events = [(t, b) for t, b in self.cache.get(key, default=[]) or [] if now - t < WINDOW]
            self.cache.set(key, [*events, (now, int(nbytes))], expire=WINDOW)

    def check_budget(self, client: str, budget: int, now: float | None = None) -> None:
        """Raise ``InputError`` when ``client`` has stored its hour's share of results (so one
        visitor cannot push everyone else's results out of the cache)."""
        now = time.time() if now is None else now
        key = f"bytes:{client}"
        with self.cache.transact(retry=True):
            events = [(t, b) for t, b in self.cache.get(key, default=[]) or [] if now - t < WINDOW]
        if sum(b for _, b in events) < budget:
            return
        wait = int(WINDOW - (now - min(t for t, _ in events))) // 60 + 1
        raise compute.InputError(
            f"Your computations stored {sum(b for _, b in events) / 2**20:,.0f} MiB of new results in the last hour; "
            f"this server allows {budget / 2**20:,.0f} MiB per visitor and hour (option --results-mb-per-hour), so "
            f"that one visitor cannot push everyone else's results out of the cache. Results already computed still "
            f"show; new ones can be computed again in about {wait} minutes."
        )

    def _free(self, slot: str) -> None:
        with self.cache.transact(retry=True):
            live = self._live()
            live.pop(slot, None)
            self.cache.set(KEY, live)

    @contextmanager
    def hold(
        self, client: str, *, timeout: float, waiting: Callable[[int], None] | None = None, pid: int | None = None
    ) -> Iterator[None]:
        """Hold a slot for this process while the block runs. Raises ``InputError`` at once
        when ``client`` already holds its share; waits (calling ``waiting(n_running)``) while
        the server's total is taken, up to ``timeout`` seconds."""
        pid = os.getpid() if pid is None else pid
        started = _started(pid)
        if started is None:
            raise compute.InputError("This computation's process is gone; press Retry.")
        slot = f"{self.host}:{pid}:{started}"
        deadline = time.monotonic() + timeout
        try:
            while (running := self._take(slot, client, pid, started)) is not None:
                if time.monotonic() > deadline:
                    raise compute.InputError(
                        f"The server is busy: {running} computations are running (its limit, option --max-jobs). "
                        "Press Retry in a while."
                    )
                if waiting is not None:
                    waiting(running)
                time.sleep(POLL)
            yield
        finally:
            self._free(slot)
