"""A CatBoost model with categorical features given as integer codes (``cat_features=["k"]`` on
an int column) refuses floats: compute feeds it frames of the data's own dtypes
(``validation._categorical_codes``), so its curves and PFI are computed, and equal brute force;
by the batched predict, the reason naming the categorical features (the tree walk reads none).
Run in a process of its own: this pytest process never imports a booster library
(``tests/test_boosters.py``)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

if importlib.util.find_spec("catboost") is None:  # looked up, never imported here
    pytest.skip("catboost is not installed", allow_module_level=True)

SCRIPT = textwrap.dedent(
    """
    import numpy as np, pandas as pd
    from catboost import CatBoostClassifier, CatBoostRegressor
    import compute

    rng = np.random.default_rng(0)
    n = 400
    X = pd.DataFrame({"b": rng.normal(size=n), "k": rng.integers(0, 4, n), "a": rng.normal(size=n)})
    y = X["a"] + (X["k"] == 2) * 1.5 - X["k"] * 0.3 + rng.normal(scale=0.1, size=n)
    kw = dict(iterations=30, depth=3, verbose=0, random_seed=0, allow_writing_files=False, cat_features=["k"])
    reg = CatBoostRegressor(**kw).fit(X, y)
    try:
        reg.predict(X.to_numpy(dtype=float))
        raise SystemExit("CatBoost took floats for a categorical feature: the case tests nothing")
    except Exception:
        pass
    shuffled = X[["a", "k", "b"]]  # another column order: compute puts the model's order back
    for feature in ("k", "a"):
        p = compute.feature_profile(reg, shuffled, None, feature, grid=6)
        grid = np.asarray(p.grid)
        for g, value in enumerate(grid):
            rows = X.copy()
            rows[feature] = int(value) if feature == "k" else value
            np.testing.assert_allclose(p.ice[:, g], reg.predict(rows), rtol=1e-12, atol=1e-12)
    pfi = compute.permutation_importance(reg, shuffled, y, n_repeats=3, random_state=0)
    assert min(pfi.importance["k"], pfi.importance["a"]) > 10 * abs(pfi.importance["b"]), pfi.importance
    # the batched predict, the reason naming the categorical features and what CatBoost computes from them
    why = "CatBoost's categorical features (k) are computed from one-hot splits and CTR statistics"
    assert pfi.engine == "batched predict" and why in pfi.engine_reason, pfi.engine_reason
    assert why in p.params["engine_reason"], p.params["engine_reason"]
    clf = CatBoostClassifier(**kw)
    clf.fit(X, (y > y.median()).astype(int))
    p = compute.feature_profile(clf, X, None, "k", grid=6)
    for g, value in enumerate(np.asarray(p.grid)):
        rows = X.assign(k=int(value))
        np.testing.assert_allclose(p.ice[:, g], clf.predict_proba(rows)[:, 1], rtol=1e-12, atol=1e-12)
    assert why in p.params["engine_reason"], p.params["engine_reason"]
    try:
        compute.permutation_importance(clf, X, (y > y.median()).astype(int), engine="trees")
        raise SystemExit("engine='trees' walked a CatBoost model with categorical features")
    except compute.ModelError as exc:
        assert why in str(exc), exc
    print("ok", pfi.engine)
    """
)


def test_integer_coded_categories_reach_catboost_as_integers():
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.split()[:1] == ["ok"]
