"""Gradient-boosting files (issue 24): PFI and the curves through the loaded file cost what the
booster's own predict costs on the same rows.

On 100,000 x 50 (regression, numeric), for XGBoost and LightGBM (CatBoost printed for
information), each model saved in its native format and loaded as the dashboard loads it
(``dashboard.loading.load_model``: checked, then wrapped in ``BoosterModel``):

1. ``compute.permutation_importance(model, X, y, n_obs=5000, n_repeats=10)`` (the dashboard's
   row budget) against one raw ``inplace_predict`` / ``predict`` of the booster on the same
   5000 x 50 x 10 permuted rows, built beforehand as one float array;
2. ``compute.feature_profile`` of one feature on 1,000 explained rows over a 300-point grid
   (the dashboard's budgets: ``--max-curves`` 1000, ``--grid-budget`` 300,000) against the
   booster's raw predict of those rows plus the off-grid rows the pass also predicts.

Target: both ratios <= 1.05 (the wrapper adds no predict pass and little conversion). What
remains above 1.0 is the work the raw call is spared: drawing the 500 permutations (each
Fisher-Yates step a bounded random draw, ~15 ms on 2 cores), writing the rows (the curves'
tensor, PFI's permuted columns into the reused buffer and back), the losses, and one model
call per 16 MiB chunk instead of one. It shows most on XGBoost, whose 100 trees of depth 6
predict a row in ~0.37 us on 2 cores. Each line also splits our time into the time inside
the booster's own predict and the time outside it (our work), medians of the same runs:
the outside part is what the wrapper and the pass add, and varies less than the ratio on a
shared machine.
Run: ``python benchmarks/speed_boosters.py [--rows N] [--repeats R]``. Runs in one process
(nothing is forked after the boosters start their OpenMP pools).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import time_interleaved
from large_data import wide_regression

import compute
from dashboard.loading import load_model


def train(library: str, X, y, folder: str):
    if library == "xgboost":
        import xgboost as xgb

        model = xgb.XGBRegressor(n_estimators=100, max_depth=6, tree_method="hist", random_state=0).fit(X, y)
        path = os.path.join(folder, "model.ubj")
        model.save_model(path)
        booster = model.get_booster()
        return path, lambda A: booster.inplace_predict(A), model.__module__.split(".")[0], _version(xgb)
    if library == "lightgbm":
        import lightgbm as lgb

        model = lgb.LGBMRegressor(n_estimators=100, num_leaves=63, random_state=0, verbose=-1).fit(X, y)
        path = os.path.join(folder, "model.txt")
        model.booster_.save_model(path)
        booster = model.booster_
        return path, lambda A: booster.predict(A), "lightgbm", _version(lgb)
    import catboost as cb

    model = cb.CatBoostRegressor(iterations=100, depth=6, random_seed=0, verbose=0, allow_writing_files=False)
    model.fit(X, y)
    path = os.path.join(folder, "model.cbm")
    model.save_model(path)
    return path, lambda A: model.predict(A), "catboost", _version(cb)


#: the booster's own predict, as the loaded wrapper calls it (timed to split our time in two)
PREDICT = {"xgboost": ("xgboost", "Booster", "inplace_predict"), "lightgbm": ("lightgbm", "Booster", "predict")}


class Inside:
    """Time spent inside the library's predict while it is installed (``with Inside(lib)``)."""

    def __init__(self, library: str) -> None:
        self.spec, self.seconds = PREDICT.get(library), 0.0

    def __enter__(self) -> Inside:
        if self.spec is not None:
            module, cls, name = self.spec
            owner = getattr(__import__(module), cls)
            self.original = getattr(owner, name)

            def timed(booster, *args, **kwargs):
                start = time.perf_counter()
                try:
                    return self.original(booster, *args, **kwargs)
                finally:
                    self.seconds += time.perf_counter() - start

            setattr(owner, name, timed)
        return self

    def __exit__(self, *exc) -> None:
        if self.spec is not None:
            module, cls, name = self.spec
            setattr(getattr(__import__(module), cls), name, self.original)


def outside(library: str, run, repeats: int) -> float | None:
    """Median seconds of ``run`` spent outside the booster's predict (None: not measurable)."""
    if library not in PREDICT:
        return None
    found = []
    for _ in range(repeats):
        with Inside(library) as inside:
            start = time.perf_counter()
            run()
            total = time.perf_counter() - start
        found.append(total - inside.seconds)
    return float(np.median(found))


def _version(module) -> str:
    return str(getattr(module, "__version__", "?"))


def pfi_case(library, loaded, raw, X, y, k: int, repeats: int, timing_repeats: int) -> tuple:
    result = compute.permutation_importance(loaded, X, y, n_obs=k, n_repeats=repeats, random_state=0)
    sample = X.loc[result.rows].to_numpy()
    p = X.shape[1]
    rng = np.random.default_rng(0)
    big = np.repeat(sample[None, :, :], repeats, axis=0).reshape(-1, p)
    blocks = []
    for j in range(p):
        block = big.copy()
        block[:, j] = sample[rng.permutation(k * repeats) % k, j]
        blocks.append(block)
    stacked = np.concatenate(blocks)
    del blocks, big
    times = time_interleaved(
        {
            "ours": lambda: compute.permutation_importance(loaded, X, y, n_obs=k, n_repeats=repeats, random_state=0),
            "raw": lambda: raw(stacked),
        },
        timing_repeats,
    )
    direct = raw(X.loc[result.rows].to_numpy())
    equal = bool(np.allclose(loaded.predict(X.loc[result.rows]), direct, rtol=1e-12, atol=1e-12))
    ours = lambda: compute.permutation_importance(loaded, X, y, n_obs=k, n_repeats=repeats, random_state=0)  # noqa: E731
    return times["ours"], times["raw"], equal, outside(library, ours, timing_repeats)


def curve_case(library, loaded, raw, X, y, timing_repeats: int) -> tuple:
    """One feature's ICE/ICI pass at the dashboard's budget: 1,000 explained rows x a 300-point
    grid (n_obs x n_grid <= 300,000, ``--grid-budget``). Raw: the same 300,000 rows plus the rows
    whose own value is not a grid point (the pass predicts them too, for each row's own
    prediction), built beforehand."""
    rows = X.iloc[:1000]
    grid = np.quantile(X["x00"], np.linspace(0, 1, 300))
    block = np.repeat(rows.to_numpy(), len(grid), axis=0)  # in the pass's order: row by row over the grid
    block[:, 0] = np.tile(grid, len(rows))
    off_grid = rows.to_numpy()[~np.isin(rows["x00"].to_numpy(), grid)]
    stacked = np.concatenate([block, off_grid])
    times = time_interleaved(
        {
            "ours": lambda: compute.feature_profile(loaded, rows, y[:1000], "x00", grid=grid),
            "raw": lambda: raw(stacked),
        },
        timing_repeats,
    )
    ours = lambda: compute.feature_profile(loaded, rows, y[:1000], "x00", grid=grid)  # noqa: E731
    return times["ours"], times["raw"], outside(library, ours, timing_repeats)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per contender (median)")
    parser.add_argument("--libraries", nargs="*", default=["xgboost", "lightgbm", "catboost"])
    args = parser.parse_args()
    data = wide_regression(args.rows, 50, seed=3)
    X, y = data.drop(columns="y"), data.y.to_numpy()
    ok = True
    print("PFI (n_obs=5000, 10 repeats: 2,500,000 model rows) and one feature's curves (1,000 rows x 300 points)")
    print(f"on {args.rows:,} x 50, each booster loaded from its file as the dashboard loads it; ratio = ours / raw\n")
    with tempfile.TemporaryDirectory() as folder:
        for library in args.libraries:
            path, raw, _, version = train(library, X, y, folder)
            loaded = load_model(path)
            pfi, pfi_raw, equal, pfi_out = pfi_case(library, loaded, raw, X, y, 5000, 10, args.repeats)
            curve, curve_raw, curve_out = curve_case(library, loaded, raw, X, y, args.repeats)
            target = library != "catboost"
            passed = pfi / pfi_raw <= 1.05 and curve / curve_raw <= 1.05 and equal
            ok &= passed or not target
            verdict = ("PASS" if passed else "FAIL") if target else "(information)"
            print(
                f"{library} {version} ({Path(path).suffix}): PFI {pfi:.2f} s vs raw {pfi_raw:.2f} s = "
                f"{pfi / pfi_raw:.3f}x; curves {curve * 1000:.0f} ms vs raw {curve_raw * 1000:.0f} ms = "
                f"{curve / curve_raw:.3f}x; predictions equal to the booster's: {equal}   {verdict}"
            )
            if pfi_out is not None and curve_out is not None:
                print(
                    f"    outside the booster's predict: PFI {pfi_out * 1000:.0f} ms ({pfi_out / pfi_raw:.1%} of raw), "
                    f"curves {curve_out * 1000:.1f} ms ({curve_out / curve_raw:.1%} of raw)"
                )
    print("\ntarget: <= 1.05x for XGBoost and LightGBM")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
