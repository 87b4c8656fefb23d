"""Speed of ``shapley_importance`` (SFIMP) against SAGE's permutation estimator and the floor.

Workload (full): ``make_friedman1`` (p = 10 features x0..x9, noise 1), a 100-tree
RandomForestRegressor fitted on 500 separate training rows, evaluated on n = 500 rows.

* Peer: ``sage-importance`` (optional, ``pip install sage-importance``): MarginalImputer on a
  seeded 128-row background sample of the n evaluation rows (SFIMP draws its donors from all
  n rows through ``n_obs_permutations`` permutations) + PermutationEstimator('mse'),
  default convergence threshold 0.025. SAGE's ``thresh`` is max(std) / (max(value) -
  min(value)); both sides are compared on the same measure, max(SE) / |sum of values|.
  SAGE's model rows are counted by wrapping the model in a counting callable.
* SFIMP is stopped at the relative SE SAGE reached (``tol``). Its reported SE is conditional
  on the observation permutations tau_l it shares across coalitions, so the script also
  measures the seed-to-seed spread (which includes the tau_l noise) and converts our rows
  to the rows needed at SAGE's SE, assuming that variance falls as 1/n_obs_permutations.
  SAGE's SE is likewise conditional on its background sample (not re-drawn here: too slow).
* The definitions differ: SAGE averages the model's *predictions* over the background
  before taking the loss, v(S) = -E_x L(E_bg f(x_S, x_bg), y); SFIMP averages the *losses*
  over observation permutations, GE_S = E L(f(x_S, x_C^tau), y) (Casalicchio et al. 2018,
  Eq. 5/6). The values therefore differ (SFIMP's total is larger: it also counts the
  model's own variance when features are marginalised); the rankings should agree.
* The floor is ONE raw ``model.predict`` (DataFrame input) on a pre-built block of the very
  rows the method evaluated, recorded from a run: row order matters to a forest (SAGE's
  rows repeat each observation over the background and predict faster than random rows).
  SFIMP's rows are used whole up to 500k rows, else every k-th row (500k); SAGE's floor is
  its first iteration (batch_size x (p + 1) x background rows). Larger counts are
  extrapolated linearly from the block.
* Everything single-threaded: forest n_jobs=1, compute and SAGE n_jobs=1, BLAS 1 thread.
  Only the cheap runs are repeated (interleaved, medians); SAGE and exact mode run once.
  Ratios to the floor use process CPU time, which other jobs on a shared machine disturb
  less than wall time (single-threaded, the two agree on an idle machine).

Run: ``python benchmarks/speed_shapley.py [--quick]``. ``--quick`` uses n = 200, a 20-tree forest
(cheaper per row, so the cost of building the rows weighs more against the raw predict), a
64-row background, SAGE thresh 0.05 and exact mode on n = 100.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import sklearn
from sklearn.datasets import make_friedman1
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import Ridge
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from compute import shapley_importance

try:
    import sage

    SAGE_SKIP = None
except (ImportError, AttributeError, RuntimeError, ValueError) as exc:  # optional peer: skip it
    sage, SAGE_SKIP = None, f"{type(exc).__name__}: {exc}"

P = 10
FULL = {"n": 500, "n_trees": 100, "background": 128, "sage_thresh": 0.025, "repeats": 5, "seeds": 10, "exact_n": 500}
QUICK = {"n": 200, "n_trees": 20, "background": 64, "sage_thresh": 0.05, "repeats": 3, "seeds": 4, "exact_n": 100}
N_OBS_PERM = 5
SAGE_BATCH = 512  # PermutationEstimator's default batch_size (samples per iteration)
RAW_BLOCK = 500_000
RAW_TARGET = 1.2


def make_models(cfg: dict):
    """Forest and ridge fitted on n training rows; (X, y) are n separate evaluation rows."""
    n = cfg["n"]
    X, y = make_friedman1(n_samples=2 * n, n_features=P, noise=1.0, random_state=0)
    X = pd.DataFrame(X, columns=[f"x{j}" for j in range(P)])
    X_tr, X_te, y_tr, y_te = X.iloc[:n], X.iloc[n:].reset_index(drop=True), y[:n], y[n:]
    forest = RandomForestRegressor(n_estimators=cfg["n_trees"], n_jobs=1, random_state=0).fit(X_tr, y_tr)
    return forest, Ridge(alpha=1.0).fit(X_tr, y_tr), X_te, y_te


def timed(fn):
    """(array [wall seconds, process CPU seconds], result of fn)."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return np.array([time.perf_counter() - wall, time.process_time() - cpu]), out


def interleaved(contenders: dict, repeats: int) -> dict:
    """Median [wall, CPU] seconds per contender: one warm-up each, then repeats interleaved."""
    for fn in contenders.values():
        fn()
    times = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            times[name].append(timed(fn)[0])
    return {name: np.median(ts, axis=0) for name, ts in times.items()}


def recording(model, fn):
    """Run fn() with model.predict recording its input rows: (result, rows as one array)."""
    blocks, original = [], model.predict
    model.predict = lambda block: (blocks.append(np.array(block, dtype=float)), original(block))[1]
    try:
        out = fn()
    finally:
        del model.predict  # back to the class's method
    return out, np.concatenate(blocks)


def raw_floor(
    model, rows: np.ndarray, n_rows: int, columns, repeats: int, cap: int | None = RAW_BLOCK
) -> tuple[np.ndarray, str]:
    """[wall, CPU] seconds of one raw predict of n_rows rows like ``rows`` (median of repeats);
    above ``cap`` rows, every k-th row is kept."""
    if cap is not None and len(rows) > cap:
        rows = rows[:: -(-len(rows) // cap)]
    block = pd.DataFrame(np.ascontiguousarray(rows), columns=columns, copy=False)
    seconds = interleaved({"raw": lambda: model.predict(block)}, repeats)["raw"]
    how = "measured" if len(rows) == n_rows else f"extrapolated from {len(rows):,} of its rows"
    return seconds * n_rows / len(rows), how


class CountingModel:
    """The callable SAGE sees: counts rows, keeps the first ``keep`` of them, feeds a DataFrame."""

    def __init__(self, model, columns, keep: int) -> None:
        self.model, self.columns, self.keep, self.rows, self.kept = model, list(columns), keep, 0, []

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.rows < self.keep:
            self.kept.append(x.copy())
        self.rows += len(x)
        return self.model.predict(pd.DataFrame(x, columns=self.columns, copy=False))


def run_sage(model, X, y, cfg: dict, repeats: int) -> dict:
    base = X.to_numpy(dtype=float)
    background = base[np.random.default_rng(0).choice(len(base), cfg["background"], replace=False)]
    counter = CountingModel(model, X.columns, keep=SAGE_BATCH * (P + 1) * len(background))
    estimator = sage.PermutationEstimator(sage.MarginalImputer(counter, background), "mse", n_jobs=1, random_state=0)
    seconds, expl = timed(lambda: estimator(base, y, batch_size=SAGE_BATCH, thresh=cfg["sage_thresh"], bar=False))
    values, std = np.asarray(expl.values), np.asarray(expl.std)
    floor, how = raw_floor(model, np.concatenate(counter.kept), counter.rows, X.columns, repeats, cap=None)
    return {
        "values": pd.Series(values, index=X.columns),
        "std": pd.Series(std, index=X.columns),
        "rows": counter.rows,
        "seconds": seconds,
        "rel_se": std.max() / abs(values.sum()),
        "perms": counter.rows // ((P + 1) * len(background)),
        "floor": floor,
        "how": how,
        "thresh_ratio": std.max() / (values.max() - values.min()),
    }


def sampled(model, X, y, tol: float, seed: int = 0):
    return shapley_importance(
        model, X, y, n_obs_permutations=N_OBS_PERM, random_state=seed, exact_max_players=1, tol=tol, n_jobs=1
    )


def exact(model, X, y):
    return shapley_importance(model, X, y, n_obs_permutations=N_OBS_PERM, exact_max_players=12, n_jobs=1)


def rel_se(res) -> float:
    return float(res.std_error.max() / abs(res.total))


def seed_spread(model, X, y, tol: float, seeds: int) -> float:
    """max_j SD over seeds of SFIMP_j / |mean total|: includes the tau_l noise."""
    runs = [sampled(model, X, y, tol, seed) for seed in range(seeds)]
    values = np.array([r.values.to_numpy() for r in runs])
    return float(values.std(axis=0, ddof=1).max() / abs(np.mean([r.total for r in runs])))


def exact_rows(models: dict, X, y, repeats: int) -> list:
    """One timed exact run per model; floor on the rows of an untimed, recorded run (the
    intervened rows depend on the data and the seed only, so the ridge's serve every model)."""
    first = next(iter(models.values()))
    _, rows = recording(first, lambda: exact(first, X, y))
    out = []
    for name, model in models.items():
        seconds, res = timed(lambda model=model: exact(model, X, y))
        floor, how = raw_floor(model, rows, res.n_rows, X.columns, repeats)
        out.append(
            {
                "name": name,
                "n": len(X),
                "rows": res.n_rows,
                "bound": 2**P * len(X) * N_OBS_PERM,
                "seconds": seconds,
                "floor": floor,
                "how": how,
            }
        )
    return out


def ranking(values: pd.Series) -> str:
    return " > ".join(values.sort_values(ascending=False).index)


def top5(values: pd.Series) -> list:
    """The informative features' order (x5..x9 are pure noise: their order is chance)."""
    return list(values.sort_values(ascending=False).index[:5])


def verdict(ok: bool | None) -> str:
    return "SKIP" if ok is None else ("PASS" if ok else "FAIL")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small workload, well under a minute")
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    reps = cfg["repeats"]
    print(
        f"python {platform.python_version()}, cores {os.cpu_count()}; numpy {np.__version__}, "
        f"pandas {pd.__version__}, scikit-learn {sklearn.__version__}, sage-importance "
        f"{'not available' if sage is None else 'importable'}; load average {os.getloadavg()[0]:.2f}"
    )
    print("single-threaded: forest n_jobs=1, compute n_jobs=1, SAGE n_jobs=1, BLAS 1 thread")
    print(
        f"workload: make_friedman1 p={P}, n={cfg['n']} evaluation rows, {cfg['n_trees']}-tree forest, "
        f"n_obs_permutations={N_OBS_PERM}; SAGE background {cfg['background']} rows, "
        f"thresh {cfg['sage_thresh']}" + (" [quick]" if args.quick else "")
    )
    forest, ridge, X, y = make_models(cfg)

    # --- SAGE (one run), then SFIMP stopped at the relative SE SAGE reached ----------------
    peer = None
    if sage is None:
        print(f"\nSAGE skipped: sage-importance does not import ({SAGE_SKIP})")
    else:
        peer = run_sage(forest, X, y, cfg, reps)
    tol = peer["rel_se"] if peer else 0.01
    res, rows = recording(forest, lambda: sampled(forest, X, y, tol))
    block = pd.DataFrame(rows, columns=X.columns, copy=False)
    med = interleaved({"ours": lambda: sampled(forest, X, y, tol), "raw": lambda: forest.predict(block)}, reps)
    spread = seed_spread(forest, X, y, tol, cfg["seeds"])
    rows_equiv = res.n_rows * max(1.0, (spread / tol) ** 2)

    print(
        f"\nSampled Shapley on the forest (rel SE = max SE / |sum of values|, target {tol:.4f}; "
        f"x raw = CPU s / CPU s of one raw predict of the same rows)"
    )
    print(
        f"  {'method':34s} {'rows':>11s} {'orderings':>9s} {'wall s':>7s} {'CPU s':>7s} {'rel SE':>7s} "
        f"{'x raw':>6s}  raw predict"
    )
    print(
        f"  {'compute.shapley_importance':34s} {res.n_rows:11,d} {res.n_orderings:9d} {med['ours'][0]:7.2f} "
        f"{med['ours'][1]:7.2f} {rel_se(res):7.4f} {med['ours'][1] / med['raw'][1]:6.2f}  "
        f"measured, medians of {reps} interleaved"
    )
    print(
        f"  {'  same, SE incl. tau noise (seeds)':34s} {rows_equiv:11,.0f} {'':9s} {'':7s} {'':7s} "
        f"{spread:7.4f} {'':6s}  rows scaled to SE {tol:.4f} (SD over {cfg['seeds']} seeds)"
    )
    if peer:
        print(
            f"  {'sage PermutationEstimator':34s} {peer['rows']:11,d} {peer['perms']:9d} {peer['seconds'][0]:7.2f} "
            f"{peer['seconds'][1]:7.2f} {peer['rel_se']:7.4f} {peer['seconds'][1] / peer['floor'][1]:6.2f}  "
            f"{peer['how']} (1st iteration), one run; SAGE's own measure {peer['thresh_ratio']:.4f}"
        )
        print(
            f"  rows SAGE / ours: {peer['rows'] / res.n_rows:.1f}x at reported SE, "
            f"{peer['rows'] / rows_equiv:.1f}x with our tau noise included; "
            f"CPU seconds SAGE / ours: {peer['seconds'][1] / med['ours'][1]:.1f}x"
        )

    print("\nValues (SAGE averages predictions before the loss, SFIMP averages losses: scales differ)")
    table = pd.DataFrame({"sfimp": res.values, "sfimp_se": res.std_error, "sfimp_share": res.proportions})
    if peer:
        table["sage"], table["sage_se"] = peer["values"], peer["std"]
        table["sage_share"] = peer["values"] / peer["values"].sum()
    print(table.round(4).to_string())
    print(
        f"  totals: SFIMP {res.total:.3f} (GE_empty {res.baseline_error:.3f} - GE_P {res.model_error:.3f})"
        + (f", SAGE {peer['values'].sum():.3f}" if peer else "")
    )
    print(f"  SFIMP ranking: {ranking(res.values)}")
    agree = None
    if peer:
        print(f"  SAGE  ranking: {ranking(peer['values'])}")
        agree = top5(res.values) == top5(peer["values"])
        print(
            f"  informative features (top 5; x5..x9 are pure noise, their order is chance): "
            f"{'same order' if agree else 'DIFFERENT order'}"
        )

    # --- exact mode -------------------------------------------------------------------------
    Xe, ye = X.iloc[: cfg["exact_n"]].reset_index(drop=True), y[: cfg["exact_n"]]
    ex = exact_rows({"ridge": ridge, f"forest ({cfg['n_trees']} trees)": forest}, Xe, ye, reps)
    print(f"\nExact mode (2^{P} = {2**P} coalitions, n_obs_permutations={N_OBS_PERM}, one timed run each)")
    print(
        f"  {'model':20s} {'n':>4s} {'rows':>11s} {'bound':>11s} {'wall s':>7s} {'CPU s':>7s} "
        f"{'x raw':>6s}  raw predict"
    )
    for e in ex:
        print(
            f"  {e['name']:20s} {e['n']:4d} {e['rows']:11,d} {e['bound']:11,d} {e['seconds'][0]:7.2f} "
            f"{e['seconds'][1]:7.2f} {e['seconds'][1] / e['floor'][1]:6.2f}  {e['how']}"
        )
    if args.quick:
        guess = ex[1]["seconds"][1] * 2**P * 500 * N_OBS_PERM / ex[1]["rows"]
        print(
            f"  this {cfg['n_trees']}-tree forest at n=500 (not run in --quick): ~{guess:.0f} CPU s estimated "
            f"(scaled linearly in rows from n={ex[1]['n']})"
        )

    # --- summary ------------------------------------------------------------------------------
    checks = [
        (
            "(a) rows(ours) < rows(SAGE) at SAGE's SE, tau noise included",
            None if peer is None else rows_equiv < peer["rows"],
        ),
        (f"(b) ours <= {RAW_TARGET}x raw predict of our rows (CPU)", med["ours"][1] <= RAW_TARGET * med["raw"][1]),
        ("(c) exact rows <= 2^p x n x n_obs_permutations", all(e["rows"] <= e["bound"] for e in ex)),
    ]
    if agree is not None:
        checks.append(("(d) informative-feature ranking agrees with SAGE", agree))
    load = os.getloadavg()[0]
    print(
        f"\nload average at the end {load:.2f} on {os.cpu_count()} cores"
        + (": other jobs share the cores, timings are noisy" if load > 1.5 else "")
    )
    print(
        "SUMMARY: "
        + "; ".join(f"{name}: {verdict(ok)}" for name, ok in checks)
        + (f" [SAGE skipped: {SAGE_SKIP}]" if sage is None else "")
        + (" [quick]" if args.quick else "")
    )
    return 0


if __name__ == "__main__":
    with threadpool_limits(limits=1):
        sys.exit(main())
