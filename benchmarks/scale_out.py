"""Past one machine (issue 44): the first full view of a large Parquet data set, computed by
Celery workers that share only Redis with the job, each on a cache folder of its own.

1. Writes a synthetic data set as a folder of Parquet files (1,000,000 rows each, row groups
   of 100,000): ``--rows`` x ``--features`` float32 columns and a regression target, and
   trains a HistGradientBoosting model (100 iterations) on its first 200,000 rows, saved as
   a ``.skops`` file.
2. For 1 and 2 computing processes: a fresh Redis database and fresh cache folders, the
   workspace opened as ``dashboard.show`` opens it (data and model kept and published
   through Redis: the data set as the column chunks of its row groups), then the page's job for the default
   state (``callbacks.compute.run_request``: the performance pass on every row, PFI and the
   curves within their budgets, the findings). The job computes parts itself; "2 processes"
   adds one Celery worker (``celery -A app:celery_app worker -c 1``, its own folder). Every
   process runs one thread (``OMP_NUM_THREADS=1``), as one core of a machine each.
3. Prints the job's time for each, the speed-up, the bytes through Redis (its ``INFO``
   counters), each process's peak memory, and, from the per-part times of a calibration run
   (every part timed alone in this process), the time 8 workers on 8 machines would take
   (the serial planning, samples and joins, and the rest of the one-process run outside its
   parts (the web process's plan, the second round), plus the parts scheduled longest first,
   in the messages ``send_parts`` sends them in, and one message per part).
4. Prints this machine's two-process ceiling for the work: the model's predict of one row
   group alone and with a second process doing the same at once. Where two such processes
   slow each other (shared caches, the hypervisor), the speed-up two processes can reach is
   below 2x whatever the job does; the speed-up is also printed as a share of that ceiling.

This machine has 2 cores: two processes are the most it can run side by side.
Run: ``python benchmarks/scale_out.py [--rows 2000000] [--features 100]`` (the issue's case:
``--rows 10000000``; it needs the rows in memory once, 4 GB at float32, to open the workspace).
"""

from __future__ import annotations

import os

os.environ["OMP_NUM_THREADS"] = "1"  # before NumPy/scikit-learn load: one core per process

import argparse  # noqa: E402
import heapq  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FILE_ROWS, GROUP_ROWS, TRAIN_ROWS = 1_000_000, 100_000, 200_000
SECRET = "scale-out-benchmark"


def write_dataset(folder: Path, rows: int, features: int) -> None:
    """The synthetic data set, written file by file (never all in memory)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for k, start in enumerate(range(0, rows, FILE_ROWS)):
        n = min(FILE_ROWS, rows - start)
        X = rng.normal(size=(n, features)).astype(np.float32)
        y = 3 * X[:, 0] + 2 * np.sin(X[:, 1]) + X[:, 2] * X[:, 3] + 0.5 * rng.normal(size=n)
        columns = {f"x{j}": X[:, j] for j in range(features)}
        table = pa.table({**columns, "y": y.astype(np.float64)})
        pq.write_table(table, folder / f"part-{k:04d}.parquet", row_group_size=GROUP_ROWS)


def read_dataset(folder: Path) -> pd.DataFrame:
    """The data set as one frame, a file at a time, each read as the store reads its data
    (a column at a time: twice the data at the peak, not the 3.5x of ``pd.read_parquet``)."""
    import pyarrow as pa

    from dashboard import row_groups

    frame = pd.concat([row_groups.read_frame(f) for f in sorted(folder.glob("*.parquet"))], ignore_index=True)
    pa.default_memory_pool().release_unused()  # the files' frames, copied into one
    return frame


def train(folder: Path, out: Path) -> Path:
    import skops.io as sio
    from sklearn.ensemble import HistGradientBoostingRegressor

    first = pd.read_parquet(sorted(folder.glob("*.parquet"))[0]).iloc[:TRAIN_ROWS]
    model = HistGradientBoostingRegressor(max_iter=100, random_state=0).fit(first.drop(columns="y"), first["y"])
    path = out / "hgb.skops"
    sio.dump(model, path)
    return path


def _predict_times(model, rows: pd.DataFrame, calls: int, start, out) -> None:
    """In a child process: ``calls`` predicts of ``rows`` once ``start`` is set, their median to ``out``."""
    model.predict(rows)
    start.wait()
    times = []
    for _ in range(calls):
        begin = time.perf_counter()
        model.predict(rows)
        times.append(time.perf_counter() - begin)
    out.put(float(np.median(times)))


def ceiling(model_path: Path, folder: Path, calls: int = 9) -> tuple[float, float]:
    """This machine's two-process ceiling for the job's main work: the model's raw predict of
    one stored row group (a part of the prediction pass), its median alone and with a second
    process predicting the same at the same time (each in a process of its own, one thread).
    Two processes can be at most ``2 x alone / together`` times faster than one."""
    import multiprocessing

    import skops.io as sio

    from dashboard.row_groups import ROW_GROUP_ROWS

    model = sio.load(model_path, trusted=sio.get_untrusted_types(file=model_path))  # our own file
    rows = pd.read_parquet(sorted(folder.glob("*.parquet"))[0]).drop(columns="y").iloc[:ROW_GROUP_ROWS]
    medians = []
    fork = multiprocessing.get_context("fork")
    for n in (1, 2):
        start, out = fork.Event(), fork.Queue()
        procs = [fork.Process(target=_predict_times, args=(model, rows, calls, start, out)) for _ in range(n)]
        for proc in procs:
            proc.start()
        time.sleep(1.0)  # both loaded and warm
        start.set()
        medians.append(max(out.get(timeout=600) for _ in procs))
        for proc in procs:
            proc.join()
    return medians[0], medians[1]


def start_redis(folder: Path) -> tuple[subprocess.Popen, str]:
    import redis

    from tests.helpers.ports import free_port

    port = free_port()
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"],
        cwd=folder,
        stdout=subprocess.DEVNULL,
    )
    client = redis.Redis(host="127.0.0.1", port=port)
    for _ in range(100):
        try:
            client.ping()
            return proc, f"redis://127.0.0.1:{port}/0"
        except redis.RedisError:
            time.sleep(0.1)
    raise SystemExit("redis-server did not start (apt-get install redis-server)")


def redis_bytes(url: str) -> int:
    import redis

    stats = redis.Redis.from_url(url).info("stats")
    return int(stats["total_net_input_bytes"]) + int(stats["total_net_output_bytes"])


class Peaks:
    """Each process's peak resident memory (VmHWM), sampled while it runs."""

    def __init__(self):
        self.peak: dict[str, int] = {}
        self.watch: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def add(self, pid: int, label: str) -> None:
        self.watch[pid] = label

    def _tree(self):
        for pid, label in list(self.watch.items()):
            yield pid, label
            for child in Path("/proc").glob(f"{pid}/task/*/children"):
                for c in child.read_text().split():
                    yield int(c), f"{label} (child)"

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            for pid, label in self._tree():
                try:
                    text = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                found = [line.split()[1] for line in text.splitlines() if line.startswith("VmHWM")]
                if found:  # a process ending (a zombie) has none
                    self.peak[label] = max(self.peak.get(label, 0), int(found[0]) * 1024)

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join()
        return self.peak


def start_worker(url: str, cache: Path, log: Path) -> subprocess.Popen:
    env = {
        **os.environ,
        "WIP_CELERY_BROKER": url,
        "WIP_CACHE_DIR": str(cache),
        "WIP_SECRET_KEY": SECRET,
        "OMP_NUM_THREADS": "1",
    }
    cmd = [sys.executable, "-m", "celery", "-A", "app:celery_app", "worker", "--concurrency", "1"]
    cmd += ["--pool", "prefork", "--loglevel", "INFO", "--without-gossip", "--without-mingle", "--without-heartbeat"]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while "ready" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.time() > deadline:
            raise SystemExit("the Celery worker did not start:\n" + log.read_text(errors="replace")[-3000:])
        time.sleep(0.3)
    return proc


#: What each isolated process may add to the one it forks from (``--job-memory-mb``): a job
#: that reads the data set holds it, 3.8 GiB at 10,000,000 x 100 float32 (the default 4,096
#: MiB is that and little more)
JOB_MEMORY_MB = 16_384


def context(cache: Path, url: str = ""):
    from dashboard.config import Config
    from dashboard.state import make_context

    config = Config(cache_dir=str(cache), celery_broker=url, secret_key=SECRET, warm=False, job_memory_mb=JOB_MEMORY_MB)
    return make_context(config)


def one_run(frame: pd.DataFrame, model_path: Path, work: Path, processes: int) -> dict:
    """The first full view with ``processes`` computing processes (the job, and a worker)."""
    import redis

    from dashboard import row_groups
    from dashboard.callbacks.compute import run_request
    from dashboard.doors import open_workspace
    from dashboard.state import default_state

    row_groups._FRAMES.clear()  # each run's job reads the data set itself, as a fresh job process does
    redis_proc, url = start_redis(work)
    Path("/proc/self/clear_refs").write_text("5")  # this process's peak from here (VmHWM reset)
    peaks = Peaks()
    peaks.add(os.getpid(), "job (this process)")
    worker = None
    try:
        ctx = context(work / "web", url)
        start = time.perf_counter()
        ws = open_workspace(ctx, {"HGB": model_path}, frame, "y", title="scale-out")
        opened = time.perf_counter() - start
        if processes > 1:
            worker = start_worker(url, work / "worker", work / "worker.log")
            peaks.add(worker.pid, "Celery worker")
        before = redis_bytes(url)
        start = time.perf_counter()
        outcome = run_request(ctx, {"state": {**default_state(), "ws": ws.id}, "nonce": "0123456789abcdef"})
        seconds = time.perf_counter() - start
        if not outcome.get("ok"):
            raise SystemExit(f"the job failed: {outcome}")
        moved = redis_bytes(url) - before
        held = int(redis.Redis.from_url(url).info("memory")["used_memory"])
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(timeout=60)
        redis_proc.terminate()
        redis_proc.wait(timeout=30)
    # the store's frame of the data set, the one this process keeps: the caller's goes
    frame = ctx.store.data(ws)
    return {"seconds": seconds, "opened": opened, "moved": moved, "held": held, "peaks": peaks.stop(), "frame": frame}


def calibrate(frame: pd.DataFrame, model_path: Path, work: Path) -> tuple[list[float], float]:
    """Each part of the job timed alone in this process (a fresh cache, no broker), and the
    serial rest: the plan, the samples the parts read, the joins and the tasks that are no part."""
    from dashboard import jobs, planning, views
    from dashboard.doors import open_workspace
    from dashboard.state import default_state, normalize

    ctx = context(work / "calibration")
    ws = open_workspace(ctx, {"HGB": model_path}, frame, "y", title="scale-out")
    start = time.perf_counter()
    state = normalize(ctx, {**default_state(), "ws": ws.id})[0]
    todo = planning.missing(ctx.store, views.plan_state(ctx, ws, state)["tasks"])
    parts, joins = jobs.split(ws, todo)
    models: dict = {}  # the model loaded once, as a worker loads it once per message of parts
    ahead = [p for p in parts if jobs.spec_for(p["kind"]).first]  # the samples: kept by the job before it sends
    jobs.run(ctx.store, ws, ahead, policy=ctx.policy, models=models)
    serial = time.perf_counter() - start
    times = []
    for part in parts[len(ahead) :]:
        start = time.perf_counter()
        jobs.run(ctx.store, ws, [part], policy=ctx.policy, models=models)
        times.append(time.perf_counter() - start)
    start = time.perf_counter()
    jobs.run(ctx.store, ws, joins, policy=ctx.policy, models=models)
    return times, serial + time.perf_counter() - start


def schedule(times: list[float], workers: int, as_sent: bool) -> float:
    """The parts' finishing time on ``workers`` processes, longest message first (in the
    messages ``send_parts`` sends them in, or one message per part)."""
    from dashboard.callbacks.compute import part_messages

    if as_sent:
        times = [sum(message) for message in part_messages(times)]
    loads = [0.0] * workers
    for t in sorted(times, reverse=True):
        heapq.heapreplace(loads, loads[0] + t)
    return max(loads)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--machines", type=int, default=8, help="the projection's workers")
    args = parser.parse_args(argv)
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is missing: apt-get install redis-server")
    from dashboard.callbacks.compute import part_messages
    from dashboard.row_groups import ROW_GROUP_ROWS

    with tempfile.TemporaryDirectory(prefix="wip-scale-") as tmp:
        work = Path(tmp)
        start = time.perf_counter()
        write_dataset(work / "dataset", args.rows, args.features)
        written = time.perf_counter() - start
        model_path = train(work / "dataset", work)
        frame = read_dataset(work / "dataset")
        print(
            f"data set: {args.rows:,} x {args.features} float32 in {len(list((work / 'dataset').iterdir()))} files, "
            f"row groups of {GROUP_ROWS:,} (written in {written:.1f} s); stored in groups of {ROW_GROUP_ROWS:,}"
        )
        alone, together = ceiling(model_path, work / "dataset")
        print(
            f"this machine: the model's predict of a row group takes {alone:.3f} s alone, {together:.3f} s with a "
            f"second process predicting at the same time: two processes are at most {2 * alone / together:.2f}x "
            "faster than one on this work"
        )
        runs = {}
        for processes in (1, 2):
            runs[processes] = one_run(frame, model_path, work / f"run{processes}", processes)
            r = runs[processes]
            frame = r.pop("frame")  # one copy of the rows in this process: the store's
            print(
                f"{processes} process(es): first full view {r['seconds']:.1f} s (workspace opened and published "
                f"in {r['opened']:.1f} s); through Redis {r['moved'] / 2**20:,.1f} MiB, Redis holding "
                f"{r['held'] / 2**20:,.1f} MiB"
            )
            for label, peak in sorted(r["peaks"].items()):
                print(f"    peak memory, {label}: {peak / 2**20:,.0f} MiB")
        speed_up = runs[1]["seconds"] / runs[2]["seconds"]
        print(
            f"speed-up, 2 processes over 1: {speed_up:.2f}x (target >= 1.8x); "
            f"{speed_up / (2 * alone / together):.0%} of this machine's ceiling"
        )
        times, serial = calibrate(frame, model_path, work)
        # what the one-process run spent outside the parts: the web process's plan, the second
        # round (the default row's what-if and contributions), process starts, model loads
        rest = max(runs[1]["seconds"] - sum(times) - serial, 0.0)
        print(
            f"calibration: {len(times)} parts, {sum(times):.1f} s of part work, {serial:.1f} s serial "
            f"(plan, samples, joins); longest part {max(times):.1f} s; the one-process run's rest "
            f"(its time less these) {rest:.1f} s, counted serial below"
        )
        for how, as_sent in ((f"as sent ({len(part_messages(times))} messages)", True), ("a message per part", False)):
            projected = serial + rest + schedule(times, args.machines + 1, as_sent)  # + the job itself
            print(
                f"projection, {args.machines} workers on {args.machines} machines, {how}: {projected:.1f} s "
                "(target <= 60 s at 10,000,000 x 100)"
            )


if __name__ == "__main__":
    main()
