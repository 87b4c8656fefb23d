"""Speed of ``feature_profile`` and ``permutation_importance`` against the floor and peers.

Workload (full): one feature, n = 1,000 observations x m = 100 grid points on ``make_friedman1``
(10 features) for (a) a 100-tree random forest regressor, (b) a ridge regression and (c) a
100-tree random forest classifier (``predict_proba``; target: y above its median).

* The floor is building the intervened rows with numpy plus ONE raw model call on them, fed
  the way the library feeds the model (a DataFrame wrapping the numpy block, ``copy=False``).
* Peers: ``sklearn.inspection.partial_dependence`` (brute, kind="both", same grid),
  dalex ``predict_profile`` (optional) and ``sklearn.inspection.permutation_importance``.
* Everything is single-threaded (forests ``n_jobs=1``, library and scikit-learn ``n_jobs=1``,
  BLAS/OpenMP limited to one thread) so the ratios compare work, not cores.
* Repeats are interleaved (each repeat times every contender once), after one warm-up call
  each; medians are reported. Peak memory is the tracemalloc peak increase (numpy included).

Run: ``python benchmarks/speed_profile.py [--quick] [--repeats N]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import tracemalloc
import warnings
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import sklearn
from sklearn.datasets import make_friedman1
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.inspection import partial_dependence
from sklearn.inspection import permutation_importance as sk_permutation_importance
from sklearn.linear_model import Ridge
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from _timing import time_interleaved

from compute import feature_profile, permutation_importance
from compute.intervention import Design
from compute.prediction import CHUNK_BYTES, default_chunk_rows

try:
    import dalex as dx
except ImportError:  # optional peer
    dx = None
warnings.filterwarnings("ignore", message="Parameter `variable_splits` overrides")  # dalex

FULL = {"n": 1000, "m": 100, "n_trees": 100, "n_repeats": 10}
QUICK = {"n": 200, "m": 20, "n_trees": 20, "n_repeats": 3}
FEATURE = "x0"
P = 10  # make_friedman1 features
# feature_profile target vs floor; permutation_importance target vs floor (None: no target)
PROFILE_TARGET = {"rf_regressor": 1.1, "ridge": 2.0, "rf_classifier": 1.1}
PFI_TARGET = {"rf_regressor": 1.3, "ridge": None, "rf_classifier": 1.3}
PFI_SKLEARN_SPEEDUP = 3.0


def make_models(cfg: dict) -> dict:
    """{name: (model, X_test, y_test)}: models fitted on a DataFrame (columns x0..x9)."""
    n = cfg["n"]
    X, y = make_friedman1(n_samples=2 * n, n_features=P, noise=1.0, random_state=0)
    X = pd.DataFrame(X, columns=[f"x{j}" for j in range(P)])
    X_tr, X_te = X.iloc[:n], X.iloc[n:].reset_index(drop=True)
    y_tr, y_te = y[:n], y[n:]
    label = (y > np.median(y_tr)).astype(int)
    forest = {"n_estimators": cfg["n_trees"], "n_jobs": 1, "random_state": 0}
    return {
        "rf_regressor": (RandomForestRegressor(**forest).fit(X_tr, y_tr), X_te, y_te),
        "ridge": (Ridge(alpha=1.0).fit(X_tr, y_tr), X_te, y_te),
        "rf_classifier": (RandomForestClassifier(**forest).fit(X_tr, label[:n]), X_te, label[n:]),
    }


def raw_call(model):
    return model.predict_proba if hasattr(model, "predict_proba") else model.predict


def profile_floor(model, X, grid):
    """The n*m intervened rows built with numpy, then one raw model call."""
    base = X.to_numpy(dtype=float)
    block = np.repeat(base, grid.size, axis=0)
    block[:, X.columns.get_loc(FEATURE)] = np.tile(grid, len(X))
    return raw_call(model)(pd.DataFrame(block, columns=X.columns, copy=False))


def pfi_floor(model, X, n_repeats, rng):
    """The p * n_repeats * n permuted rows built with numpy, then one raw model call."""
    base = X.to_numpy(dtype=float)
    n = len(base)
    block = np.tile(base, (P * n_repeats, 1))
    for j in range(P):
        donors = np.concatenate([rng.permutation(n) for _ in range(n_repeats)])
        block[j * n_repeats * n : (j + 1) * n_repeats * n, j] = base[donors, j]
    return raw_call(model)(pd.DataFrame(block, columns=X.columns, copy=False))


def run_profile(model, X, y, grid, chunk_rows=None):
    """The library's ICE, ICI, PI and importance, from one call with y."""
    prof = feature_profile(model, X, y, FEATURE, grid=grid, chunk_rows=chunk_rows)
    return prof.ici, prof.pi, prof.importance


def run_pfi(model, X, y, n_repeats, chunk_rows=None):
    return permutation_importance(model, X, y, n_repeats=n_repeats, random_state=0, n_jobs=1, chunk_rows=chunk_rows)


def profile_contenders(model, X, y, grid) -> dict:
    out = {
        "floor (numpy + 1 call)": lambda: profile_floor(model, X, grid),
        "compute.feature_profile": lambda: run_profile(model, X, y, grid),
        "sklearn partial_dependence": lambda: partial_dependence(
            model, X, [FEATURE], kind="both", method="brute", custom_values={FEATURE: grid}
        ),
    }
    if dx is not None:
        explainer = dx.Explainer(model, X, y, verbose=False)  # setup, not timed
        out["dalex predict_profile"] = lambda: explainer.predict_profile(
            X, variables=[FEATURE], variable_splits={FEATURE: grid}, verbose=False
        )
    return out


def pfi_contenders(model, X, y, n_repeats) -> dict:
    scoring = "neg_log_loss" if hasattr(model, "predict_proba") else "neg_mean_squared_error"
    rng = np.random.default_rng(0)
    return {
        "floor (numpy + 1 call)": lambda: pfi_floor(model, X, n_repeats, rng),
        "compute.permutation_importance": lambda: run_pfi(model, X, y, n_repeats),
        "sklearn permutation_importance": lambda: sk_permutation_importance(
            model, X, y, scoring=scoring, n_repeats=n_repeats, n_jobs=1, random_state=0
        ),
    }


def peak_mib(fn, *args, **kwargs) -> float:
    """Peak traced memory increase (MiB) while ``fn(*args, **kwargs)`` runs, its result included."""
    gc.collect()
    tracemalloc.start()
    baseline = tracemalloc.get_traced_memory()[0]
    result = fn(*args, **kwargs)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del result
    return (peak - baseline) / 2**20


def judge(medians: dict, ours: str, floor_target: float | None, peer_speedup: float) -> list:
    """Table rows (contender, median, x floor, vs ours, target, verdict) of one group."""
    floor, mine = medians["floor (numpy + 1 call)"], medians[ours]
    rows = []
    for name, sec in medians.items():
        if name.startswith("floor"):
            target, verdict = "-", "-"
        elif name == ours:
            target = "-" if floor_target is None else f"<= {floor_target:.1f}x floor"
            verdict = "-" if floor_target is None else ("PASS" if sec <= floor_target * floor else "FAIL")
        else:
            target = f"compute >= {peer_speedup:g}x faster" if peer_speedup > 1 else "compute faster"
            verdict = "PASS" if sec >= peer_speedup * mine else "FAIL"
        rows.append((name, sec, sec / floor, sec / mine, target, verdict))
    return rows


def print_table(title: str, rows: list) -> None:
    print(f"\n{title}")
    print(f"  {'contender':32s} {'median s':>9s} {'x floor':>8s} {'x compute':>9s}  {'target':26s} result")
    for name, sec, x_floor, x_ours, target, verdict in rows:
        print(f"  {name:32s} {sec:9.4f} {x_floor:8.2f} {x_ours:9.2f}  {target:26s} {verdict}")


def memory_rows(model, X, y, cfg, grid) -> list:
    """Peak memory of both functions at the default chunk budget, 10x smaller, and forced chunks."""
    default = default_chunk_rows(Design(X, as_frame=True))
    bytes_per_row = CHUNK_BYTES / default
    profile_rows, pfi_rows = len(X) * grid.size, P * cfg["n_repeats"] * len(X)
    rng = np.random.default_rng(0)
    rows = [
        ("feature_profile floor", None, profile_rows, peak_mib(profile_floor, model, X, grid), None),
        ("permutation floor", None, pfi_rows, peak_mib(pfi_floor, model, X, cfg["n_repeats"], rng), None),
    ]
    for label, fn, args, total in (
        ("feature_profile", run_profile, (model, X, y, grid), profile_rows),
        ("permutation_importance", run_pfi, (model, X, y, cfg["n_repeats"]), pfi_rows),
    ):
        for chunk in (default, default // 10, max(1, total // 10)):
            # bound: one chunk at the library's own bytes-per-row budget, 4 floats per row kept,
            # 1 MiB for fixed overheads (validation, model temporaries, result objects)
            bound = (min(chunk, total) * bytes_per_row + 4 * 8 * total) / 2**20 + 1.0
            rows.append((label, chunk, total, peak_mib(fn, *args, chunk_rows=chunk), bound))
    return rows


def print_memory(title: str, rows: list) -> tuple[int, int]:
    print(f"\n{title}")
    print(f"  {'function':24s} {'chunk_rows':>10s} {'rows':>8s} {'peak MiB':>9s} {'bound MiB':>10s} result")
    fails = 0
    for label, chunk, total, peak, bound in rows:
        verdict = "-" if bound is None else ("PASS" if peak <= bound else "FAIL")
        fails += verdict == "FAIL"
        chunk_s, bound_s = ("-" if chunk is None else str(chunk)), ("-" if bound is None else f"{bound:.1f}")
        print(f"  {label:24s} {chunk_s:>10s} {total:8d} {peak:9.1f} {bound_s:>10s} {verdict}")
    return sum(r[4] is not None for r in rows) - fails, fails


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description="Speed of feature_profile and permutation_importance vs the floor and peers."
    )
    parser.add_argument("--quick", action="store_true", help="small, fast workload")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats (default 5, quick 3)")
    args = parser.parse_args(argv)
    if args.repeats is not None and args.repeats < 1:
        parser.error("--repeats must be at least 1")
    cfg = QUICK if args.quick else FULL
    repeats = args.repeats or (3 if args.quick else 5)

    print(
        f"python {platform.python_version()}, cores {os.cpu_count()}; numpy {np.__version__}, "
        f"pandas {pd.__version__}, scikit-learn {sklearn.__version__}, joblib {joblib.__version__}, "
        f"dalex {dx.__version__ if dx else 'not installed'}"
    )
    print("single-threaded: forests n_jobs=1, compute and sklearn n_jobs=1, BLAS/OpenMP 1 thread")
    print(
        f"workload: feature {FEATURE!r}, n={cfg['n']}, m={cfg['m']} grid points, "
        f"{cfg['n_trees']} trees, permutation n_repeats={cfg['n_repeats']}; {repeats} repeats, medians"
    )
    if dx is None:
        print("note: dalex is not importable; its predict_profile is skipped (pip install dalex)")

    passed = failed = 0
    for name, (model, X, y) in make_models(cfg).items():
        col = X[FEATURE].to_numpy()
        grid = np.linspace(col.min(), col.max(), cfg["m"])
        groups = [
            (
                f"feature_profile [{name}] ({cfg['n']} x {cfg['m']} rows)",
                "compute.feature_profile",
                profile_contenders(model, X, y, grid),
                PROFILE_TARGET[name],
                1.0,
            ),
            (
                f"permutation_importance [{name}] ({P} x {cfg['n_repeats']} x {cfg['n']} rows)",
                "compute.permutation_importance",
                pfi_contenders(model, X, y, cfg["n_repeats"]),
                PFI_TARGET[name],
                PFI_SKLEARN_SPEEDUP,
            ),
        ]
        for title, ours, contenders, floor_target, speedup in groups:
            rows = judge(time_interleaved(contenders, repeats), ours, floor_target, speedup)
            print_table(title, rows)
            passed += sum(r[5] == "PASS" for r in rows)
            failed += sum(r[5] == "FAIL" for r in rows)
        ok, bad = print_memory(
            f"peak memory [{name}] (tracemalloc, default chunk_rows = compute.prediction.default_chunk_rows)",
            memory_rows(model, X, y, cfg, grid),
        )
        passed, failed = passed + ok, failed + bad

    print(
        f"\nSUMMARY: {passed} passed, {failed} failed"
        + ("" if dx else " (dalex skipped)")
        + (" [quick workload]" if args.quick else "")
    )
    return 0


if __name__ == "__main__":
    with threadpool_limits(limits=1):
        sys.exit(main())
