"""Large data (issue 12): the dashboard's first full view and a subgroup switch on 200k rows,
a 1M-row upload with the job's peak memory, and the library's row-sampled PFI.

Targets, on this 2-core machine:

1. 200,000 rows x 8 columns (Titanic-like passengers, missing ages and ports), 2 models (a
   histogram gradient boosting pipeline and a logistic regression with imputers): first full
   view <= 30 s, subgroup switch <= 5 s.
2. 1,000,000 rows x 20 columns (regression, a histogram gradient boosting pipeline): Load (read
   the CSV, check it against the model, keep it) and the first view <= 90 s, with the peak
   memory of the job process <= 4 GB.
3. ``permutation_importance(..., n_obs=5000)`` on 100,000 x 50 (HGB regressor) at <= 1.2x the
   raw predict of the rows it uses (one ``model.predict`` of the same 5000 x 50 x 10 rows, built
   beforehand), with results equal to calling it on that sample directly (same seed).
4. One job over Celery workers: the first view's job of case 1 run whole by one process (as
   without Celery) and split into parts between the job and one Celery worker process (Redis
   started here), one thread per process; the speed-up is printed (the issue asks for close
   to N with N workers).

"First full view" is the server's work for a new data set: plan the default state, run every
planned task (``jobs.run``: model loads, the ICE/ICI pass of every feature, PFI, the views'
own tasks) and render every view (``views.render_all``), in a process forked for it like a
dashboard job (its peak RSS read from ``getrusage``). The browser's drawing comes on top
(about 1 s, ``speed_dashboard.py``). "Subgroup switch": the same for the state with a subgroup
once the first view is cached (the ICE/ICI pass is reused; PFI reuses the all-rows
permutations' pairs inside the subgroup, and the grouped PFI runs on all rows and is
restricted the same way); then SFIMP on request for that subgroup (its own row sample, within
4,000,000 model rows per model). Models are trained on separate rows before the clock starts.

Run: ``python benchmarks/large_data.py [--only 200k 1m library celery] [--rows-200k N]``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import resource
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import compute  # noqa: E402
from dashboard import budgets, jobs, planning, views  # noqa: E402
from dashboard.config import Config  # noqa: E402
from dashboard.loading import check_model_data, read_data  # noqa: E402
from dashboard.server import create_app  # noqa: E402
from dashboard.state import (
    default_state,  # noqa: E402
    normalize,  # noqa: E402
)
from dashboard.store import ModelEntry, Workspace, new_workspace_id  # noqa: E402
from dashboard.views import plan_state  # noqa: E402


def passengers(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    pclass = rng.choice([1, 2, 3], n, p=[0.24, 0.21, 0.55])
    sex = rng.choice(["male", "female"], n, p=[0.65, 0.35])
    age = rng.gamma(4.0, 7.5, n).round(0)
    sibsp = rng.poisson(0.5, n)
    parch = rng.poisson(0.4, n)
    fare = (rng.gamma(2.0, 12.0, n) * (4 - pclass)).round(2)
    embarked = rng.choice(["S", "C", "Q"], n, p=[0.72, 0.19, 0.09]).astype(object)
    deck = np.where(pclass == 1, rng.choice(list("ABCDE"), n), rng.choice(list("DEFG"), n)).astype(object)
    logit = 2.2 * (sex == "female") - 0.9 * (pclass - 2) - 0.03 * (age - 30) - 0.3 * sibsp + rng.normal(0, 1, n)
    frame = pd.DataFrame(
        {
            "pclass": pclass,
            "sex": sex,
            "age": age,
            "sibsp": sibsp,
            "parch": parch,
            "fare": fare,
            "embarked": embarked,
            "deck": deck,
        }
    )
    frame.loc[rng.uniform(size=n) < 0.2, "age"] = np.nan
    frame.loc[rng.uniform(size=n) < 0.02, "embarked"] = np.nan
    frame["survived"] = (logit > 0).astype(int)
    return frame


def passenger_models(train: pd.DataFrame):
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

    X, y = train.drop(columns="survived"), train.survived
    text = ["sex", "embarked", "deck"]
    numbers = ["pclass", "age", "sibsp", "parch", "fare"]
    hgb = make_pipeline(
        ColumnTransformer(
            [("cat", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1), text)],
            remainder="passthrough",
        ),
        HistGradientBoostingClassifier(max_iter=100, random_state=0),
    ).fit(X, y)
    logistic = make_pipeline(
        ColumnTransformer(
            [
                ("num", make_pipeline(SimpleImputer(strategy="median"), StandardScaler()), numbers),
                (
                    "cat",
                    make_pipeline(SimpleImputer(strategy="most_frequent"), OneHotEncoder(handle_unknown="ignore")),
                    text,
                ),
            ]
        ),
        LogisticRegression(max_iter=500),
    ).fit(X, y)
    return {"gradient boosting": hgb, "logistic regression": logistic}


def wide_regression(n: int, p: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)).astype(np.float64)
    y = X[:, 0] * 3 + np.sin(X[:, 1]) * 2 + X[:, 2] * X[:, 3] + 0.5 * X[:, 4:].sum(axis=1) + rng.normal(0, 1, n)
    frame = pd.DataFrame(X, columns=[f"x{j:02d}" for j in range(p)])
    frame["y"] = y
    return frame


def register(ctx, data: pd.DataFrame, models: dict, target: str, task: str, loss: str, title: str) -> Workspace:
    import skops.io as sio

    data_rel, data_sha = ctx.store.keep_data(data)
    entries = []
    for name, model in models.items():
        path = ctx.store.root / "demos" / f"bench-{name.replace(' ', '_')}.skops"
        path.parent.mkdir(parents=True, exist_ok=True)
        sio.dump(model, path)
        rel, sha = ctx.store.keep_model(path, ".skops")
        features = tuple(str(c) for c in data.columns if c != target)
        # as the model's check on Load records it: the exact tree walk computes its PFI (a larger sample)
        walked = compute.pfi_engine(model, data[list(features)]) == compute.TREE_WALK
        entries.append(ModelEntry(name=name, path=rel, sha=sha, features=features, walked=walked))
    ws = Workspace(
        id=new_workspace_id(),
        title=title,
        data_path=data_rel,
        data_sha=data_sha,
        target=target,
        task=task,
        loss=loss,
        output=1 if task == "classification" else None,
        models=tuple(entries),
        demo=False,
        features=entries[0].features,
        data_role="held-out",
    )
    ctx.store.save_workspace(ws)
    return ws


def _view(cache_dir: str, ws_id: str, changes: dict, out) -> None:
    """In a child process (like a dashboard job): plan, run every missing task, render every
    view. Spawned, not forked: the parent trained models with OpenMP threads, and OpenMP does
    not survive a fork (the dashboard's job processes fork from workers that never ran a model)."""
    ctx = create_app(Config(cache_dir=cache_dir, warm=False, secret_key="bench", upload_limit_mb=1024))._wip_context
    ws = ctx.store.workspace(ws_id)
    start = time.perf_counter()
    state, error = normalize(ctx, {**default_state(), "ws": ws.id, **changes})
    assert error is None, error
    planned = plan_state(ctx, ws, state)
    todo = planning.missing(ctx.store, planned["tasks"])
    kinds: dict[str, int] = {}
    for t in todo:
        kinds[t["kind"]] = kinds.get(t["kind"], 0) + 1
    said: list[tuple[float, float]] = []  # (when, seconds the progress label says are left)

    def progress(done, total, label) -> None:
        found = re.search(r"about (\d+) (s|min) left$", str(label))
        if found is not None:
            said.append((time.perf_counter(), float(found[1]) * (60 if found[2] == "min" else 1)))

    jobs.run(ctx.store, ws, todo, policy=ctx.policy, n_jobs=ctx.config.n_jobs, progress=progress)
    computed = time.perf_counter() - start
    end = time.perf_counter()
    # the time-left label against the time really left, at each label that gave a number (issue 40:
    # within a factor 2 once a tenth of the work is done; before, the label says "estimating")
    eta = [left / max(end - when, 1e-9) for when, left in said if end - when >= 1.0]
    drawn = views.render_all(ctx, {"state": state, "keys": planned["keys"]})
    failed = [
        name
        for name, outputs in drawn.items()
        if any(isinstance(v, str) and "could not be drawn" in v for v in outputs.values())
    ]
    out.put(
        {
            "seconds": time.perf_counter() - start,
            "computed": computed,
            "tasks": kinds,
            "failed_views": failed,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "eta": (min(eta), max(eta), len(eta)) if eta else None,
        }
    )


def _view_or_error(cache_dir: str, ws_id: str, changes: dict, out) -> None:
    try:
        _view(cache_dir, ws_id, changes, out)
    except BaseException:
        import traceback

        out.put({"error": traceback.format_exc()})


def timed_view(ctx, ws, changes: dict) -> dict:
    spawn = mp.get_context("spawn")
    queue = spawn.Queue()
    proc = spawn.Process(target=_view_or_error, args=(str(ctx.config.cache_dir), ws.id, changes, queue))
    proc.start()
    try:
        result = queue.get(timeout=1800)
        if "error" in result:
            raise RuntimeError(result["error"])
        return result
    finally:
        proc.join(timeout=60)


def case_200k(rows: int) -> list[dict]:
    tmp = Path(tempfile.mkdtemp(prefix="wip-large-"))
    try:
        ctx = create_app(Config(cache_dir=str(tmp), warm=False, secret_key="bench"))._wip_context
        models = passenger_models(passengers(20_000, seed=1))
        data = passengers(rows, seed=2)
        ws = register(ctx, data, models, "survived", "classification", "log_loss", f"passengers ({rows:,} rows)")
        first = timed_view(ctx, ws, {})
        switch = timed_view(ctx, ws, {"subgroup": "pclass == 3"})
        sfimp = timed_view(ctx, ws, {"subgroup": "pclass == 3", "sfimp": True})
        print(f"\n1. {rows:,} rows x 8 columns, 2 models (HGB pipeline, logistic regression with imputers)")
        cases = (
            ("first full view", first, 30),
            ("subgroup switch (pclass == 3)", switch, 5),
            ("then SFIMP on request", sfimp, 30),
        )
        for label, r, target in cases:
            print(
                f"   {label:32s} {r['seconds']:6.1f} s (tasks {r['computed']:.1f} s: {r['tasks']}), peak RSS "
                f"{r['peak_rss_mb']:,.0f} MB, views failing: {r['failed_views'] or 'none'}   target <= {target} s   "
                f"{'PASS' if r['seconds'] <= target and not r['failed_views'] else 'FAIL'}"
            )
            if r["eta"] is not None:
                low, high, n = r["eta"]
                print(
                    f"   {'':32s} time left said / real: {low:.2f}-{high:.2f} over {n} labels   target 0.5-2   "
                    f"{'PASS' if 0.5 <= low and high <= 2 else 'FAIL'}"
                )
        return [
            {"what": f"{rows:,} rows: first full view", "value": first["seconds"], "target": 30.0},
            {"what": f"{rows:,} rows: subgroup switch", "value": switch["seconds"], "target": 5.0},
            {"what": f"{rows:,} rows: SFIMP on request", "value": sfimp["seconds"], "target": 30.0},
        ]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def case_1m(rows: int = 1_000_000, p: int = 20) -> list[dict]:
    from sklearn.ensemble import HistGradientBoostingRegressor

    tmp = Path(tempfile.mkdtemp(prefix="wip-large-"))
    try:
        # a 1M x 20 CSV is ~150 MB with 4 decimals: above the default upload limit (200 MB) only at
        # full precision; the operator raises --upload-limit-mb for such data
        ctx = create_app(Config(cache_dir=str(tmp), warm=False, secret_key="bench", upload_limit_mb=1024))._wip_context
        train = wide_regression(50_000, p, seed=1)
        model = HistGradientBoostingRegressor(max_iter=100, random_state=0).fit(train.drop(columns="y"), train.y)
        data = wide_regression(rows, p, seed=2)
        csv = tmp / "wide.csv"
        data.round(4).to_csv(csv, index=False)
        size_mb = csv.stat().st_size / 2**20
        del data
        start = time.perf_counter()
        frame = read_data(csv, name="wide.csv", policy=ctx.policy)
        check_model_data(model, frame, "y", name="hgb.skops")
        loaded = time.perf_counter() - start
        ws = register(ctx, frame, {"hgb": model}, "y", "regression", "squared_error", f"wide ({rows:,} rows)")
        registered = time.perf_counter() - start
        del frame
        first = timed_view(ctx, ws, {})
        total = registered + first["seconds"]
        ok = total <= 90 and first["peak_rss_mb"] <= 4096 and not first["failed_views"]
        print(f"\n2. {rows:,} rows x {p} columns ({size_mb:,.0f} MB CSV), HGB regressor")
        print(
            f"   read + check {loaded:.1f} s, kept {registered - loaded:.1f} s; "
            f"first full view {first['seconds']:.1f} s "
            f"(tasks {first['computed']:.1f} s: {first['tasks']}); total {total:.1f} s (target <= 90 s); job peak "
            f"RSS {first['peak_rss_mb']:,.0f} MB (target <= 4,096 MB); views failing: "
            f"{first['failed_views'] or 'none'}   {'PASS' if ok else 'FAIL'}"
        )
        return [
            {"what": f"{rows:,} rows: load + first view", "value": total, "target": 90.0},
            {"what": f"{rows:,} rows: job peak memory (MB)", "value": first["peak_rss_mb"], "target": 4096.0},
        ]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def case_library(rows: int = 100_000, p: int = 50, k: int = 5000, repeats: int = 10) -> list[dict]:
    from sklearn.ensemble import HistGradientBoostingRegressor

    data = wide_regression(rows, p, seed=3)
    X, y = data.drop(columns="y"), data.y.to_numpy()
    model = HistGradientBoostingRegressor(max_iter=100, random_state=0).fit(X, y)
    times, raw_times = [], []
    result = None
    for _ in range(3):
        start = time.perf_counter()
        result = compute.permutation_importance(model, X, y, n_obs=k, n_repeats=repeats, random_state=0)
        times.append(time.perf_counter() - start)
    assert result is not None
    sample = X.loc[result.rows].to_numpy()
    rng = np.random.default_rng(0)
    big = np.repeat(sample[None, :, :], repeats, axis=0).reshape(-1, p)  # the rows, built beforehand
    for _ in range(3):
        rows_all = []
        for j in range(p):
            block = big.copy()
            block[:, j] = sample[rng.permutation(k * repeats) % k, j]
            rows_all.append(block)
        stacked = np.concatenate(rows_all)
        start = time.perf_counter()
        with warnings.catch_warnings():  # an array, not a frame: the raw cost without column checks
            warnings.simplefilter("ignore", UserWarning)
            model.predict(stacked)
        raw_times.append(time.perf_counter() - start)
        del stacked, rows_all
    direct = compute.permutation_importance(
        model, X.loc[result.rows], y[np.asarray(result.rows)], n_repeats=repeats, random_state=0
    )
    equal = bool(np.allclose(result.repeats.to_numpy(), direct.repeats.to_numpy(), rtol=1e-12, atol=0))
    ours, raw = statistics.median(times), statistics.median(raw_times)
    print(f"\n3. permutation_importance(n_obs={k:,}, n_repeats={repeats}) on {rows:,} x {p} (HGB regressor)")
    print(
        f"   {ours:.2f} s vs raw predict of the same {k * p * repeats:,} rows {raw:.2f} s: {ours / raw:.2f}x "
        f"(target <= 1.2x); equal to the call on the sample itself: {equal}   "
        f"{'PASS' if ours / raw <= 1.2 and equal else 'FAIL'}"
    )
    return [{"what": "library n_obs / raw predict", "value": ours / raw, "target": 1.2}]


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def case_celery(rows: int) -> list[dict]:
    """One job split over Celery workers: the first full view's tasks of the 200k case run
    whole by the job (1 process, as without Celery) and split by the job plus one Celery worker
    process (2 processes),
    each on a fresh cache; Redis and the worker are started here. Each process uses one
    thread (the machine has 2 cores; HGB's OpenMP would otherwise already use both in one
    process), so the ratio is the split's own scaling, as with one worker per machine."""
    import subprocess

    from dashboard.callbacks.compute import _run_split

    redis = shutil.which("redis-server")
    if not redis:
        print("\n4. Celery split: skipped (redis-server is missing: apt-get install redis-server)")
        return []
    port = _free_port()
    server = subprocess.Popen(
        [redis, "--port", str(port), "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL
    )
    broker = f"redis://127.0.0.1:{port}/0"
    models = passenger_models(passengers(20_000, seed=1))
    data = passengers(rows, seed=2)
    seconds = {}
    try:
        time.sleep(1.0)
        for processes in (1, 2):
            tmp = Path(tempfile.mkdtemp(prefix="wip-celery-"))
            worker = None
            try:
                config = Config(cache_dir=str(tmp), warm=False, secret_key="bench", celery_broker=broker)
                ctx = create_app(config)._wip_context
                ws = register(ctx, data, models, "survived", "classification", "log_loss", "passengers")
                if processes == 2:
                    env = {
                        **os.environ,
                        **ONE_THREAD,
                        "WIP_CELERY_BROKER": broker,
                        "WIP_CACHE_DIR": str(tmp),
                        "WIP_SECRET_KEY": "bench",
                    }
                    worker = subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "celery",
                            "-A",
                            "app:celery_app",
                            "worker",
                            "--concurrency",
                            "1",
                            "--pool",
                            "prefork",
                            "--loglevel",
                            "WARNING",
                            "--without-gossip",
                            "--without-mingle",
                        ],
                        cwd=ROOT,
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                    time.sleep(12)  # imports and broker connection
                state, _ = normalize(ctx, {**default_state(), "ws": ws.id})
                todo = planning.missing(ctx.store, plan_state(ctx, ws, state)["tasks"])
                parts, joins = jobs.split(ws, todo)
                from threadpoolctl import threadpool_limits

                with threadpool_limits(1):  # one core per process: the split's own scaling
                    start = time.perf_counter()
                    if processes == 1:  # the job as a server without Celery runs it: whole, unsplit
                        jobs.run(ctx.store, ws, todo, policy=ctx.policy)
                    else:
                        _run_split(ctx, ws, parts, joins, lambda *_: None, "bench")
                    seconds[processes] = time.perf_counter() - start
                assert not planning.missing(ctx.store, todo)
            finally:
                if worker is not None:
                    worker.terminate()
                    worker.wait(timeout=30)
                shutil.rmtree(tmp, ignore_errors=True)
    finally:
        server.terminate()
        server.wait(timeout=10)
    speedup = seconds[1] / seconds[2]
    print(f"\n4. the first view's job of the {rows:,}-row case split into parts (ICE/ICI per feature, PFI per block)")
    print(
        f"   the job whole (1 process, no split) {seconds[1]:.1f} s; split, the job + 1 Celery worker process (2) "
        f"{seconds[2]:.1f} s: "
        f"speed-up {speedup:.2f}x (2 processes on 2 cores; target close to 2)"
    )
    return [{"what": "Celery split: 2 processes vs 1 (speed-up)", "value": speedup, "target": float("nan")}]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("200k", "1m", "library", "celery"), nargs="*", default=None)
    parser.add_argument("--rows-200k", type=int, default=200_000)
    args = parser.parse_args(argv)
    budget = f"PFI budget {planning.PFI_BUDGET:,} rows (x{budgets.WALKED_PFI_FACTOR} walked)"
    print(f"cores {os.cpu_count()}; load average {os.getloadavg()[0]:.2f}; {budget}")
    rows: list[dict] = []
    only = set(args.only or ("200k", "1m", "library", "celery"))
    if "200k" in only:
        rows += case_200k(args.rows_200k)
    if "1m" in only:
        rows += case_1m()
    if "library" in only:
        rows += case_library()
    if "celery" in only:
        rows += case_celery(args.rows_200k)
    print("\nFINAL")
    failed = 0
    for r in rows:
        if r["target"] != r["target"]:  # a measure without a pass/fail target (NaN)
            print(f"  {r['what']:40s} {r['value']:10.2f}")
            continue
        ok = r["value"] <= r["target"]
        failed += not ok
        print(f"  {r['what']:40s} {r['value']:10.2f}   target <= {r['target']:g}   {'PASS' if ok else 'FAIL'}")
    print(f"load average after {os.getloadavg()[0]:.2f}; SUMMARY: {len(rows) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
