"""Issue 14 targets: the performance view's one prediction pass and one row's Shapley
contributions on each built-in demo, against the raw predict cost of the rows they use.

    python benchmarks/speed_views.py

Contributions use the dashboard's settings (100 background rows, at most 400k model rows);
target: < 2 s per row. Printed: seconds, model rows, and the ratio to one raw predict of as
many rows (the floor: building the intervened rows and calling the model).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import compute  # noqa: E402
from dashboard.demos import build_demo  # noqa: E402
from dashboard.loading import load_model  # noqa: E402
from dashboard.store import Store  # noqa: E402
from dashboard.views import contributions  # noqa: E402


def raw_predict(model, X, n_rows: int, proba: bool) -> float:
    rows = X.iloc[np.arange(n_rows) % len(X)]
    start = time.perf_counter()
    (model.predict_proba if proba else model.predict)(rows)
    return time.perf_counter() - start


def main() -> None:
    store = Store(tempfile.mkdtemp(prefix="bench-views-"), build_demo=build_demo)
    print(f"{'demo':15} {'model':22} {'what':14} {'seconds':>8} {'rows':>9} {'x raw':>6}")
    worst = 0.0
    for ws_id in ("demo-x3", "demo-diabetes", "demo-cancer"):
        ws = store.workspace(ws_id)
        for entry in ws.models:
            model = load_model(store.path(entry.path), name=entry.name)
            X = store.data(ws)[list(entry.features)]
            proba = ws.task == "classification"
            start = time.perf_counter()
            compute.predict_rows(model, X, output=ws.output)
            t_pred = time.perf_counter() - start
            raw = raw_predict(model, X, len(X), proba)
            print(f"{ws_id:15} {entry.name:22} {'predictions':14} {t_pred:8.3f} {len(X):9,} {t_pred / raw:6.2f}")
            times = []
            for row in X.index[:3]:
                start = time.perf_counter()
                res = contributions.contributions(
                    model, X, None, ws, {"obs": str(row), "n_background": contributions.N_BACKGROUND}, 1
                )
                times.append(time.perf_counter() - start)
            t = float(np.median(times))
            raw = raw_predict(model, X, res.n_rows, proba)
            worst = max(worst, t)
            print(f"{ws_id:15} {entry.name:22} {'contributions':14} {t:8.3f} {res.n_rows:9,} {t / raw:6.2f}")
    print(f"slowest contributions of one row: {worst:.2f} s (target < 2 s): {'met' if worst < 2 else 'MISSED'}")


if __name__ == "__main__":
    main()
