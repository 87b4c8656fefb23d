"""Speed of ``contextual_importance`` / ``global_contextual_importance`` against py-ciu.

Models: (a) a 100-tree random forest regressor on ``make_friedman1`` (2,000 rows, x0..x9),
(b) a logistic regression and (c) a 100-tree random forest classifier on scikit-learn's
breast cancer data (569 rows, 30 features; CIU of the probability of class 1).

For each model, (1) one instance and (2) global CI over 200 instances, n_samples=100:

* Rows are counted by a thin wrapper that forwards predict / predict_proba / classes_ /
  feature_names_in_ to the model and adds up len(X) of every call.
* "raw predict" is ONE call of the bare model's predict (predict_proba for classifiers) on a
  prebuilt block of as many rows (rows of X, a DataFrame wrapping a numpy block, as the
  library feeds the model); every contender is divided by the raw predict of its own rows.
* py-ciu gets ``nsamples = n_samples + 3``: its sweep is then the instance, the feature's min
  and max and n_samples uniform draws, as ours; it also predicts the instance once per feature.
  Its global CI is ``CIU.explain_all`` (its batch API: a Python loop over ``explain``).
* The regressor's output range (MIN, MAX) is the min/max of its predictions over X, computed
  beforehand and passed to both (``out_range`` / ``out_minmaxs``), so the extra predict over X
  is excluded from the timings; classifiers use (0, 1) in both.
* Single-threaded (forests n_jobs=1, BLAS/OpenMP 1 thread). Repeats are interleaved and
  medians reported; the first, counting run of each explainer is its warm-up, except py-ciu's
  global run (minutes long), which is timed once (that counting run; warm from the single runs).

Targets: ours <= 1.5x the raw predict of its rows; ours >= 20x faster than py-ciu for global CI.
Run: ``python benchmarks/speed_ciu.py [--quick] [--repeats N]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
import pandas as pd
import sklearn
from sklearn.datasets import load_breast_cancer, make_friedman1
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from _timing import time_interleaved

from compute import contextual_importance, global_contextual_importance

try:
    import ciu as pyciu

    PEER_SKIP = None
except Exception as exc:  # optional peer: any import failure means "skip it"
    pyciu, PEER_SKIP = None, f"{type(exc).__name__}: {exc} (pip install py-ciu)"

FULL = {"n_trees": 100, "n_instances": 200, "n_samples": 100, "repeats": 5}
QUICK = {"n_trees": 20, "n_instances": 10, "n_samples": 100, "repeats": 3}
RAW_TARGET, PEER_SPEEDUP = 1.5, 20.0


class CountingRegressor:
    """Forwards predict and feature_names_in_ to ``model``, counting calls and rows."""

    def __init__(self, model):
        self.model, self.rows, self.calls = model, 0, 0
        self.feature_names_in_ = model.feature_names_in_

    def reset(self):
        self.rows = self.calls = 0

    def _count(self, X):
        self.rows, self.calls = self.rows + len(X), self.calls + 1

    def predict(self, X):
        self._count(X)
        return self.model.predict(X)


class CountingClassifier(CountingRegressor):
    """Also forwards predict_proba and classes_."""

    def __init__(self, model):
        super().__init__(model)
        self.classes_ = model.classes_

    def predict_proba(self, X):
        self._count(X)
        return self.model.predict_proba(X)


def make_models(cfg: dict) -> list:
    """[(name, model, X, out_range, labels of the explained instances)]."""
    forest = {"n_estimators": cfg["n_trees"], "n_jobs": 1, "random_state": 0}
    Xf, yf = make_friedman1(n_samples=2000, n_features=10, noise=1.0, random_state=0)
    Xf = pd.DataFrame(Xf, columns=[f"x{j}" for j in range(10)])
    rf_reg = RandomForestRegressor(**forest).fit(Xf, yf)
    pred = rf_reg.predict(Xf)  # output range computed once, outside every timing
    Xb, yb = load_breast_cancer(return_X_y=True, as_frame=True)
    rng = np.random.default_rng(0)
    labels = {
        n: list(X.index[np.sort(rng.choice(len(X), cfg["n_instances"], replace=False))])
        for n, X in (("friedman", Xf), ("cancer", Xb))
    }
    return [
        ("rf_regressor (friedman1)", rf_reg, Xf, (float(pred.min()), float(pred.max())), labels["friedman"]),
        ("logistic (breast cancer)", LogisticRegression(max_iter=10_000).fit(Xb, yb), Xb, (0.0, 1.0), labels["cancer"]),
        (
            "rf_classifier (breast cancer)",
            RandomForestClassifier(**forest).fit(Xb, yb),
            Xb,
            (0.0, 1.0),
            labels["cancer"],
        ),
    ]


def raw_method(model):
    return model.predict_proba if hasattr(model, "predict_proba") else model.predict


def raw_block(X: pd.DataFrame, n_rows: int) -> pd.DataFrame:
    """n_rows rows of X (cycled), as a DataFrame wrapping one numpy block."""
    block = X.to_numpy(dtype=float)[np.resize(np.arange(len(X)), n_rows)]
    return pd.DataFrame(block, columns=X.columns, copy=False)


def ours(wrapped, X, out_range, cfg):
    output = 1 if hasattr(wrapped, "classes_") else None
    single = lambda label: contextual_importance(
        wrapped, X, label, output=output, n_samples=cfg["n_samples"], out_range=out_range
    )
    glob = lambda labels: global_contextual_importance(
        wrapped, X, instances=labels, output=output, n_samples=cfg["n_samples"], out_range=out_range
    )
    return single, glob


def peer(wrapped, X, out_range, cfg):
    """py-ciu's single-instance and global CI as Series of CI by feature (np.random seeded)."""
    if hasattr(wrapped, "classes_"):
        explainer = pyciu.CIU(wrapped.predict_proba, ["0", "1"], data=X, output_inds=[1], nsamples=cfg["n_samples"] + 3)
    else:
        minmax = pd.DataFrame({"mins": [out_range[0]], "maxs": [out_range[1]]}, index=["y"])
        explainer = pyciu.CIU(
            wrapped.predict, ["y"], data=X, out_minmaxs=minmax, output_inds=[0], nsamples=cfg["n_samples"] + 3
        )

    def single(label):
        np.random.seed(0)
        return explainer.explain(X.loc[[label]])

    def glob(labels):
        np.random.seed(0)
        return explainer.explain_all(X.loc[labels]).groupby("feature", sort=False)["CI"].mean()

    return single, glob


def counted(fn, wrapped):
    """One run of fn(): (result, seconds, rows, calls)."""
    wrapped.reset()
    gc.collect()
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start, wrapped.rows, wrapped.calls


def run_task(title, model, X, explainers: dict, repeats: int, peer_repeats: int):
    """Count, then time each explainer and the raw predict of its rows; print the table.

    ``explainers``: {name: (fn, wrapped model)}; returns {name: (seconds, rows, x raw, result)}.
    """
    first = {name: counted(fn, wrapped) for name, (fn, wrapped) in explainers.items()}
    predict = raw_method(model)
    contenders, raws = {}, {}
    for name, (fn, _) in explainers.items():
        block = raw_block(X, first[name][2])
        raws[name] = f"raw predict ({name} rows)"
        predict(block)  # warm-up
        if name == "ours" or peer_repeats:
            contenders[name] = fn
        contenders[raws[name]] = lambda block=block: predict(block)
    med = time_interleaved(contenders, repeats, warmup=False)
    print(f"\n{title}")
    print(f"  {'contender':30s} {'seconds':>9s} {'rows':>9s} {'calls':>6s} {'x raw own rows':>14s} {'x ours':>8s}")
    out = {}
    for name, (result, sec1, rows, _calls) in first.items():
        sec = med.get(name, sec1)
        out[name] = (sec, rows, sec / med[raws[name]], result)
    for name, (sec, rows, x_raw, _) in out.items():
        calls = first[name][3]
        print(f"  {name:30s} {sec:9.4f} {rows:9d} {calls:6d} {x_raw:14.2f} {sec / out['ours'][0]:8.2f}")
        print(f"  {raws[name]:30s} {med[raws[name]]:9.4f} {rows:9d} {1:6d} {1:14.2f} {'-':>8s}")
    return out


def print_side_by_side(name, ours_single, theirs_single, ours_global, theirs_global):
    theirs = theirs_single.set_index("feature")
    table = pd.DataFrame({"CI ours": ours_single["CI"], "CI py-ciu": theirs["CI"].reindex(ours_single.index)})
    table["diff"] = table["CI ours"] - table["CI py-ciu"]
    table["CU ours"], table["CU py-ciu"] = ours_single["CU"], theirs["CU"].reindex(ours_single.index)
    print(f"\n  CIU of one instance [{name}], ours vs py-ciu:")
    print("    " + table.to_string(float_format=lambda v: f"{v:8.4f}").replace("\n", "\n    "))
    gdiff = (ours_global["CI"] - theirs_global.reindex(ours_global.index)).abs()
    print(
        f"    max |CI diff|: one instance {table['diff'].abs().max():.4f}; "
        f"global CI (mean over instances) {gdiff.max():.4f} (mean {gdiff.mean():.4f})"
    )


def versions() -> str:
    def v(pkg):
        try:
            return version(pkg)
        except PackageNotFoundError:
            return "not installed"

    return (
        f"python {platform.python_version()}, cores {os.cpu_count()}; numpy {np.__version__}, "
        f"pandas {pd.__version__}, scikit-learn {sklearn.__version__}, py-ciu {v('py-ciu')}"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Speed of CIU (compute) vs raw predict and py-ciu.")
    parser.add_argument("--quick", action="store_true", help="small workload (20 trees, 10 instances)")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats (default 5, quick 3)")
    args = parser.parse_args(argv)
    cfg = dict(QUICK if args.quick else FULL)
    if args.repeats is not None:
        if args.repeats < 1:
            parser.error("--repeats must be at least 1")
        cfg["repeats"] = args.repeats
    print(versions())
    print(
        f"single-threaded (forests n_jobs=1, BLAS/OpenMP 1 thread); n_samples={cfg['n_samples']}, "
        f"{cfg['n_trees']} trees, global CI over {cfg['n_instances']} instances, {cfg['repeats']} repeats, medians"
    )
    print("regressor out_range = min/max of its predictions over X, computed beforehand (not timed)")
    if PEER_SKIP:
        print(f"py-ciu skipped: {PEER_SKIP}")
    else:
        print(
            f"py-ciu: nsamples={cfg['n_samples'] + 3} (instance + min + max + {cfg['n_samples']} draws, as ours) "
            f"+ 1 instance predict per feature; global = explain_all, timed once (its counting run)"
        )
        print(
            "definitions: same CI = (ymax - ymin) / (MAX - MIN) over the same kind of sweep; different random "
            "draws, so CI differ by sampling noise (both underestimate the true spread); py-ciu sets CU = 0 "
            "where ymax = ymin (ours NaN); py-ciu's output range defaults to [0, 1] (passed for the regressor)"
        )

    checks = []
    for name, model, X, out_range, labels in make_models(cfg):
        wrap = CountingClassifier if hasattr(model, "predict_proba") else CountingRegressor
        w_ours, w_peer = wrap(model), wrap(model)
        o_single, o_global = ours(w_ours, X, out_range, cfg)
        results = {}
        for task, arg in (("one instance", labels[0]), (f"global CI, {len(labels)} instances", labels)):
            is_single = task == "one instance"
            explainers = {"ours": (lambda f=(o_single if is_single else o_global), a=arg: f(a), w_ours)}
            if pyciu is not None:
                p_single, p_global = peer(w_peer, X, out_range, cfg)
                explainers["py-ciu"] = (lambda f=(p_single if is_single else p_global), a=arg: f(a), w_peer)
            res = run_task(f"{task} [{name}]", model, X, explainers, cfg["repeats"], peer_repeats=is_single)
            results[task] = res
            checks.append(
                (
                    f"{name}, {task}: ours <= {RAW_TARGET}x raw predict of its rows",
                    res["ours"][2] <= RAW_TARGET,
                    f"{res['ours'][2]:.2f}x",
                )
            )
            if "py-ciu" in res and not is_single:
                speedup = res["py-ciu"][0] / res["ours"][0]
                checks.append(
                    (
                        f"{name}, {task}: ours >= {PEER_SPEEDUP:g}x faster than py-ciu",
                        speedup >= PEER_SPEEDUP,
                        f"{speedup:.1f}x",
                    )
                )
        if pyciu is not None:
            single, glob = results.values()
            print_side_by_side(name, single["ours"][3], single["py-ciu"][3], glob["ours"][3], glob["py-ciu"][3])

    print("\nCHECKS")
    for label, ok, value in checks:
        print(f"  {'PASS' if ok else 'FAIL'}  {label} ({value})")
    n_pass = sum(ok for _, ok, _ in checks)
    print(
        f"\nSUMMARY: {'PASS' if n_pass == len(checks) else 'FAIL'}: {n_pass} passed, {len(checks) - n_pass} failed"
        + (" (py-ciu skipped)" if pyciu is None else "")
        + (" [quick workload]" if args.quick else "")
    )
    return 0


if __name__ == "__main__":
    with threadpool_limits(limits=1):
        sys.exit(main())
