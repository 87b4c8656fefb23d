"""The exact tree engine (issue 42): ICE/PD, PFI, Friedman's H and cs-PFI of tree models,
against the raw predict of the same materialised block.

On ``make_regression`` and a binary ``make_classification`` (10,000 x 20; 100,000 x 50 with
``--large``), for HistGradientBoosting (100 iterations), a full-depth random forest and one
of depth 10 (100 trees), XGBoost and LightGBM (100 trees of depth 6 / 31 leaves; skipped
when not installed), each side on the same number of threads (``--threads``, default 1):
the models' predict (``n_jobs``, OpenMP limited with threadpoolctl) and the walk
(``compute.trees.blocks.THREADS``). The page's jobs run both on every core the process has.

1. ICE/PD: ``compute.feature_profile(model, X, None, feature, grid=50, engine=...)`` against
   one raw ``predict`` (``predict_proba`` for the classifier) of the n x 50 intervened rows,
   built beforehand as one float array;
2. PFI: ``compute.permutation_importance(model, X, y, features=[3 features], n_repeats=10,
   engine=...)`` against one raw predict of the 3 x 10 x n permuted rows, built beforehand;
3. H: ``compute.interaction_strength(model, X, features=[4 features], pairs="all",
   n_obs=200)`` (per feature and the 6 pairs) against the raw predict of as many rows as the
   batched predict evaluates (``model_rows``), and against the batched predict itself;
4. cs-PFI: ``compute.conditional_importance(model, X, y, features=[3 features], n_repeats=5,
   max_depth=2)`` likewise (its marginal and conditional permutations: 2 x 3 x 5 x n rows).

Each ratio is our time over the raw predict's, medians of interleaved repetitions
(``_timing.time_interleaved``); ``engine="trees"`` is the exact walk, ``engine="predict"``
today's batched predict (shown for reference). The walk is compiled with numba
(``compute/trees/compiled.py``, its blocks of rows on threads; the NumPy walk without numba).
The memory column is tracemalloc's peak (NumPy reports its arrays to it) during one call.
Run: ``python benchmarks/speed_trees.py [--large] [--threads N] [--repeats R] [--skip-others] [--models NAME ...]``.
"""

from __future__ import annotations

import argparse
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import time_interleaved

import compute

GRID = 50
REPEATS = 10
#: Threads of both sides: the models' predict and the walk (``--threads``).
THREADS = 1
PFI_FEATURES = 3


def _walk_kind() -> str:
    from compute.trees import walk

    if not walk.COMPILED:
        return "plain NumPy (numba not installed)"
    import numba

    return f"compiled, numba {numba.__version__}"


def _booster_versions() -> str:
    found = ""
    for name in ("xgboost", "lightgbm"):
        try:
            found += f", {name} {__import__(name).__version__}"
        except ImportError:
            pass
    return found


def data(task: str, n: int, p: int):
    from sklearn.datasets import make_classification, make_regression

    if task == "regression":
        X, y = make_regression(n, p, n_informative=min(p, 10), noise=1.0, random_state=0)
    else:
        X, y = make_classification(n, p, n_informative=min(p, 10), random_state=0)
    return pd.DataFrame(X, columns=[f"x{j}" for j in range(p)]), y


def models(task: str):
    from sklearn.ensemble import (
        HistGradientBoostingClassifier,
        HistGradientBoostingRegressor,
        RandomForestClassifier,
        RandomForestRegressor,
    )

    if task == "regression":
        return {
            "HistGradientBoosting": HistGradientBoostingRegressor(max_iter=100, random_state=0),
            "forest full depth": RandomForestRegressor(100, n_jobs=-1, random_state=0),
            "forest depth 10": RandomForestRegressor(100, max_depth=10, n_jobs=-1, random_state=0),
        }
    return {
        "HistGradientBoosting": HistGradientBoostingClassifier(max_iter=100, random_state=0),
        "forest full depth": RandomForestClassifier(100, n_jobs=-1, random_state=0),
        "forest depth 10": RandomForestClassifier(100, max_depth=10, n_jobs=-1, random_state=0),
    }


def boosters(task: str) -> dict:
    """XGBoost and LightGBM of the same size, where installed (on the run's threads)."""
    found = {}
    try:
        import xgboost

        kind = xgboost.XGBRegressor if task == "regression" else xgboost.XGBClassifier
        found["XGBoost"] = kind(n_estimators=100, max_depth=6, n_jobs=THREADS, random_state=0)
    except ImportError:
        pass
    try:
        import lightgbm

        kind = lightgbm.LGBMRegressor if task == "regression" else lightgbm.LGBMClassifier
        found["LightGBM"] = kind(n_estimators=100, num_leaves=31, n_jobs=THREADS, verbose=-1, random_state=0)
    except ImportError:
        pass
    return found


def raw_predict(model):
    return model.predict_proba if hasattr(model, "predict_proba") else model.predict


def ice_block(X: pd.DataFrame, feature: str) -> pd.DataFrame:
    grid = compute.feature_profile(_Constant(), X, None, feature, grid=GRID).grid
    block = np.repeat(X.to_numpy(), grid.size, axis=0)
    block[:, X.columns.get_loc(feature)] = np.tile(grid, len(X))
    return pd.DataFrame(block, columns=X.columns)


def pfi_block(X: pd.DataFrame, features: list) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    parts = []
    for feature in features:
        for _ in range(REPEATS):
            part = X.to_numpy().copy()
            j = X.columns.get_loc(feature)
            part[:, j] = part[rng.permutation(len(X)), j]
            parts.append(part)
    return pd.DataFrame(np.concatenate(parts), columns=X.columns)


class _Constant:
    """A model predicting 0, only to read the grid ``feature_profile`` builds."""

    def predict(self, rows):
        return np.zeros(len(rows))


def peak_mb(fn) -> float:
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def one(name: str, model, X: pd.DataFrame, y, repeats: int) -> None:
    feature = X.columns[0]
    features = list(X.columns[:PFI_FEATURES])
    predict = raw_predict(model)
    block, permuted = ice_block(X, feature), pfi_block(X, features)
    ice = time_interleaved(
        {
            "raw": lambda: predict(block),
            "trees": lambda: compute.feature_profile(model, X, None, feature, grid=GRID, engine="trees"),
            "predict": lambda: compute.feature_profile(model, X, None, feature, grid=GRID, engine="predict"),
        },
        repeats,
    )
    pfi = time_interleaved(
        {
            "raw": lambda: predict(permuted),
            "trees": lambda: compute.permutation_importance(
                model, X, y, features=features, n_repeats=REPEATS, engine="trees"
            ),
            "predict": lambda: compute.permutation_importance(
                model, X, y, features=features, n_repeats=REPEATS, engine="predict"
            ),
        },
        repeats,
    )
    memory = peak_mb(lambda: compute.feature_profile(model, X, None, feature, grid=GRID, engine="trees"))
    memory_pfi = peak_mb(
        lambda: compute.permutation_importance(model, X, y, features=features, n_repeats=REPEATS, engine="trees")
    )
    print(
        f"  {name:<22} ICE/PD: raw {ice['raw']:.3f}s, trees {ice['trees'] / ice['raw']:.3f}x "
        f"(predict {ice['predict'] / ice['raw']:.2f}x, peak {memory:.0f} MB) | "
        f"PFI x{REPEATS}: raw {pfi['raw']:.3f}s, trees {pfi['trees'] / pfi['raw']:.3f}x "
        f"(predict {pfi['predict'] / pfi['raw']:.2f}x, peak {memory_pfi:.0f} MB)",
        flush=True,
    )


def others(name: str, model, X: pd.DataFrame, y, repeats: int) -> None:
    """Friedman's H and cs-PFI: the walk against the raw predict of as many rows as the
    batched predict evaluates, and against the batched predict."""
    predict = raw_predict(model)
    h_features = list(X.columns[:4])
    rng = np.random.default_rng(1)

    def h(engine: str):
        return compute.interaction_strength(model, X, features=h_features, pairs="all", n_obs=200, engine=engine)

    def cs(engine: str):
        return compute.conditional_importance(
            model, X, y, features=list(X.columns[:3]), n_repeats=5, max_depth=2, engine=engine
        )

    h_block = X.iloc[rng.integers(0, len(X), h("predict").model_rows)]
    cs_block = X.iloc[rng.integers(0, len(X), 2 * 3 * 5 * len(X))]
    h_times = time_interleaved(
        {"raw": lambda: predict(h_block), "trees": lambda: h("trees"), "predict": lambda: h("predict")}, repeats
    )
    cs_times = time_interleaved(
        {"raw": lambda: predict(cs_block), "trees": lambda: cs("trees"), "predict": lambda: cs("predict")}, repeats
    )
    print(
        f"  {name:<22} H (4 features, 6 pairs, 200 rows): raw {h_times['raw']:.3f}s, trees "
        f"{h_times['trees'] / h_times['raw']:.3f}x (predict {h_times['predict'] / h_times['raw']:.2f}x) | "
        f"cs-PFI (3 features x 5 repeats, depth 2): raw {cs_times['raw']:.3f}s, trees "
        f"{cs_times['trees'] / cs_times['raw']:.3f}x (predict {cs_times['predict'] / cs_times['raw']:.2f}x)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help="also 100,000 x 50")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="threads of the models' predict and of the walk")
    parser.add_argument("--skip-others", action="store_true", help="ICE/PD and PFI only (no H, no cs-PFI)")
    parser.add_argument(
        "--models", nargs="+", metavar="NAME", help="only these models: XGBoost, 'forest full depth', ..."
    )
    args = parser.parse_args()
    import sklearn
    from threadpoolctl import threadpool_limits

    from compute.trees import blocks

    global THREADS
    THREADS = blocks.THREADS = args.threads
    print(
        f"numpy {np.__version__}, pandas {pd.__version__}, scikit-learn {sklearn.__version__}{_booster_versions()}; "
        f"walk: {_walk_kind()}; {THREADS} thread(s) on each side"
    )
    shapes = [(10_000, 20)] + ([(100_000, 50)] if args.large else [])
    for n, p in shapes:
        for task in ("regression", "binary"):
            X, y = data(task, n, p)
            print(f"{task}, {n:,} x {p} (ICE/PD grid {GRID}; PFI {PFI_FEATURES} features x {REPEATS} repeats):")
            fitted = {}
            for name, model in {**models(task), **boosters(task)}.items():
                if args.models and name not in args.models:
                    continue
                model.fit(X, y)
                if hasattr(model, "n_jobs") and "forest" in name:
                    model.set_params(n_jobs=THREADS)  # predict on the run's threads (fitted on every core)
                fitted[name] = model
                with threadpool_limits(THREADS):
                    one(name, model, X, y, args.repeats)
            if not args.skip_others:
                for name, model in fitted.items():
                    with threadpool_limits(THREADS):
                        others(name, model, X, y, args.repeats)


if __name__ == "__main__":
    main()
