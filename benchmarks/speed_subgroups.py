"""Speed of "Subgroups found for you" (issue 13): suggestions from cached ICI curves.

Target: subgroup suggestions for a feature with 1,000 ICI curves in < 200 ms of server time
from cache (no model call).

Workload: the dashboard benchmark's (``speed_dashboard.py``): the X3 simulation with 1,000
test rows and the demo's random forest, cached by running the planned tasks once. Timed,
per feature (median of N after one warm-up):

- ``view``: what the server does to draw the view for a state whose results are cached:
  the results record (``resolve_state``), the per-process memos emptied first, so the
  profile is read from the disk cache, then ``views.render(ctx, "subgroup_finder", ...)``,
  which runs ``compute.suggest_subgroups`` on the feature's ICI curves and builds the list.
- ``library``: ``compute.suggest_subgroups`` alone, on the profile in memory.
- ``predict``: the raw model cost it replaces: one ``model.predict`` over the 1,000 rows x
  the feature's grid (the rows an ICE/ICI pass predicts), to print the ratio.

Run: ``python benchmarks/speed_subgroups.py [--repeats N]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _timing import time_interleaved  # noqa: E402
from speed_dashboard import MAX_CURVES, N_ROWS, build_workspace, warm_cache  # noqa: E402

import compute  # noqa: E402
from dashboard import views  # noqa: E402
from dashboard.callbacks.compute import resolve_state  # noqa: E402
from dashboard.config import Config  # noqa: E402
from dashboard.server import create_app  # noqa: E402
from dashboard.state import (
    default_state,  # noqa: E402
    normalize,  # noqa: E402
)

TARGET_MS = 200.0


def median_ms(fn, repeats: int) -> float:
    return 1e3 * time_interleaved({"run": fn}, repeats)["run"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    print(f"cores {os.cpu_count()}; load average {os.getloadavg()[0]:.2f}; {N_ROWS} rows, max_curves={MAX_CURVES}")
    tmp = Path(tempfile.mkdtemp(prefix="wip-bench-sub-"))
    failed = 0
    try:
        app = create_app(Config(cache_dir=str(tmp), max_curves=MAX_CURVES, warm=False, secret_key="bench"))
        ctx = app._wip_context
        ws = build_workspace(ctx)
        warm_cache(ctx, ws)
        data = ctx.store.data(ws)
        import skops.io as sio

        path = ctx.store.path(ws.models[0].path)
        model = sio.load(path, trusted=sio.get_untrusted_types(file=path))
        print(
            f"\n{'feature':8s} {'curves':>6s} {'grid':>5s} {'view ms':>8s} {'library ms':>10s} "
            f"{'predict ms':>10s} {'view/predict':>12s}  top suggestion (share)   target     result"
        )
        for feature in ws.features:
            state, error = normalize(ctx, {**default_state(), "ws": ws.id, "feature": feature})
            assert error is None

            def view():
                views._INPUTS.items.clear()  # read the profile from the disk cache each time
                views.base._RESULTS.items.clear()
                results = resolve_state(ctx, state, None).results
                return views.render(ctx, "subgroup_finder", results)

            out = view()
            assert out["list"], out["info"]
            inp = views.load_inputs(ctx, resolve_state(ctx, state, None).results)
            prof = inp.profile
            others = [f for f in ws.features if f != feature]
            found = compute.suggest_subgroups(prof, data, features=others)
            t_view = median_ms(view, args.repeats)
            t_lib = median_ms(lambda: compute.suggest_subgroups(prof, data, features=others), args.repeats)
            X = data[list(ws.features)].loc[prof.rows]
            rows = X.loc[X.index.repeat(len(prof.grid))].copy()
            if not prof.categorical:
                rows[feature] = np.tile(np.asarray(prof.grid, float), len(X))
            t_pred = median_ms(lambda: model.predict(pd.DataFrame(rows)), max(3, args.repeats // 4))
            top = found.splits[0]
            ok = t_view < TARGET_MS
            failed += not ok
            print(
                f"{feature!s:8s} {len(prof.rows):6d} {len(prof.grid):5d} {t_view:8.1f} {t_lib:10.1f} {t_pred:10.1f} "
                f"{t_view / t_pred:12.3f}  {top.left:14s} ({top.share:4.0%})    < {TARGET_MS:.0f} ms   "
                f"{'PASS' if ok else 'FAIL'}"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nload average after {os.getloadavg()[0]:.2f}")
    print(f"SUMMARY: {'all passed' if not failed else f'{failed} failed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
