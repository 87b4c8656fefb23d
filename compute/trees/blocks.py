"""The walk's blocks of rows and the threads they run on (:mod:`.compiled`, :mod:`.masks`).

A walk cuts its rows into blocks (:func:`blocks`), each block's sums small enough to stay in
the cache while it goes through every tree, and runs them on a pool of threads kept between
walks (the kernels release the GIL; each block writes its own rows of the result, so the
numbers do not depend on the threads)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

#: Floats of a block's sums (rows x grid or queries x outputs): a block of rows goes through
#: the trees one tree at a time, its sums (about 2 MB) staying in the cache meanwhile.
BLOCK_FLOATS = 250_000


def blocks(n: int, floats_per_row: int, most: int | None = None) -> list[tuple[int, int]]:
    step = max(16, BLOCK_FLOATS // max(1, floats_per_row))
    step = step if most is None else min(step, most)
    return [(a, min(a + step, n)) for a in range(0, n, step)]


MAX_THREADS = 8  # most threads a walk runs its blocks on
#: Threads the walk runs on when set (a benchmark matching a model's own thread count);
#: None: :func:`threads` decides.
THREADS: int | None = None


def threads() -> int:
    """Threads the walk's blocks run on (its kernels release the GIL): as many as the
    models' own OpenMP predicts take, ``OMP_NUM_THREADS`` when set, else the cores this
    process may run on; at most :data:`MAX_THREADS` (:data:`THREADS` when set)."""
    if THREADS is not None:
        return max(1, THREADS)
    told = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    n = int(told) if told.isdigit() else 0
    if n <= 0:
        n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(n, MAX_THREADS))


def each_block(blocks: list[tuple[int, int]], work) -> None:
    """``work(a, b)`` for each block of rows, on :func:`threads` threads when there are
    several blocks. Each block writes its own rows of the result, and each kernel call has
    its own scratch arrays, so the numbers do not depend on the threads."""
    workers = min(threads(), len(blocks))
    if workers < 2:
        for a, b in blocks:
            work(a, b)
        return
    for _ in _pool(workers).map(lambda block: work(*block), blocks):
        pass


_POOLS: dict[int, ThreadPoolExecutor] = {}


def _pool(workers: int) -> ThreadPoolExecutor:
    """The process's pool of ``workers`` threads, kept between walks: starting threads for
    each call cost a PFI of 3 features on 10,000 rows 4 ms of its 80 (XGBoost, 2 threads).
    A forked child starts its own (:func:`_forget_pools`): its parent's threads are not in it."""
    pool = _POOLS.get(workers)
    if pool is None:
        pool = _POOLS[workers] = ThreadPoolExecutor(workers, thread_name_prefix="tree-walk")
    return pool


def _forget_pools() -> None:
    _POOLS.clear()


os.register_at_fork(after_in_child=_forget_pools)
