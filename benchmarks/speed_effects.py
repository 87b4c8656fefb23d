"""Speed of the effect measures in ``compute.effects`` against the raw predict cost.

Workload: ``make_friedman1`` (10 features), n = 2,000 rows, a 100-tree random forest and a
ridge regression, single-threaded (BLAS limited to one thread).

* ``ale_curve`` and ``marginal_effects`` (one feature) each predict 2 n intervened rows:
  their floor is ONE raw model call on 2 n rows. Target: within 1.2x of it for the forest.
* ``ice_impact`` and ``pd_importance`` aggregate a cached profile (n x m = 2,000 x 100)
  without predicting: reported as a fraction of the ``feature_profile`` time that made it.
  Target: below 5 % for the forest. (The ridge predicts in about a millisecond, so fixed
  costs, wrapping the model and building the design, dominate its ratios: reported only.)

Medians of interleaved repeats after one warm-up. Run:
``python benchmarks/speed_effects.py [--quick] [--repeats N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import pandas as pd
from sklearn.datasets import make_friedman1
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import Ridge
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from compute import feature_profile
from compute.effects import ale_curve, ice_impact, marginal_effects, pd_importance

FULL = {"n": 2000, "m": 100, "n_trees": 100}
QUICK = {"n": 300, "m": 20, "n_trees": 20}
FEATURE = "x0"


def median_time(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run(cfg: dict, repeats: int) -> pd.DataFrame:
    X, y = make_friedman1(n_samples=cfg["n"], n_features=10, noise=1.0, random_state=0)
    X = pd.DataFrame(X, columns=[f"x{j}" for j in range(10)])
    models = {
        "rf_regressor": RandomForestRegressor(cfg["n_trees"], n_jobs=1, random_state=0).fit(X, y),
        "ridge": Ridge().fit(X, y),
    }
    doubled = pd.concat([X, X], ignore_index=True)
    rows = []
    for name, model in models.items():
        floor = median_time(lambda: model.predict(doubled), repeats)
        ale = median_time(lambda: ale_curve(model, X, FEATURE, n_intervals=20), repeats)
        ame = median_time(lambda: marginal_effects(model, X, features=[FEATURE]), repeats)
        profile = median_time(lambda: feature_profile(model, X, None, FEATURE, grid=cfg["m"]), repeats)
        prof = feature_profile(model, X, None, FEATURE, grid=cfg["m"])
        agg = median_time(lambda: (ice_impact(prof, alpha=1.0), pd_importance(prof)), repeats)
        rows.append(
            {
                "model": name,
                "floor_s": floor,
                "ale_ratio": ale / floor,
                "ame_ratio": ame / floor,
                "aggregation_share": agg / profile,
            }
        )
    return pd.DataFrame(rows).set_index("model")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with threadpool_limits(1):
        table = run(QUICK if args.quick else FULL, args.repeats)
    print(table.to_string(float_format=lambda v: f"{v:.3f}"))
    forest = table.loc["rf_regressor"]
    print(
        f"forest: ALE within 1.2x of floor: {forest.ale_ratio <= 1.2}; "
        f"AME within 1.2x: {forest.ame_ratio <= 1.2}; "
        f"aggregation below 5% of profile: {forest.aggregation_share < 0.05}"
    )


if __name__ == "__main__":
    main()
