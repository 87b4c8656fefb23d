"""Issue 41, item 5: a LightGBM file named ``.model`` (the suffix LightGBM's own examples
use) and XGBoost files named ``.model`` / ``.bst`` are read by their content; XGBoost's
binary format from before 1.0 and anything else are refused, saying what to do. The
models are trained and saved in a fresh interpreter (a forked job of a process that ran
OpenMP hangs), and the review's error equals the one from the library's own predictions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dashboard.loading import LoadError
from dashboard.loading.sniff import suffix_by_content

ROOT = Path(__file__).resolve().parent.parent

WRITE = textwrap.dedent(
    """
    import numpy as np, pandas as pd, lightgbm, xgboost
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(200, 3)), columns=["a", "b", "c"])
    y = 2 * X.a + X.b * X.c + rng.normal(scale=0.1, size=200)
    X.assign(y=y).to_csv("data.csv", index=False)
    lgb = lightgbm.LGBMRegressor(n_estimators=20, verbose=-1).fit(X, y)
    lgb.booster_.save_model("lgb.model")
    np.save("lgb.npy", lgb.predict(X))
    xgb = xgboost.XGBRegressor(n_estimators=20, max_depth=3).fit(X, y)
    xgb.save_model("xgb.json")
    xgb.save_model("xgb.ubj")
    np.save("xgb.npy", xgb.predict(X))
    """
)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ambiguous")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-c", WRITE], cwd=folder, check=True, env=env, timeout=300)
    (folder / "xgb.json").rename(folder / "xgb.model")  # XGBoost's JSON under an old example's suffix
    (folder / "xgb.ubj").rename(folder / "xgb.bst")
    return folder


def test_the_content_says_the_format(files, tmp_path):
    assert suffix_by_content(files / "lgb.model", "lgb.model") == ".txt"
    assert suffix_by_content(files / "xgb.model", "xgb.model") == ".json"
    assert suffix_by_content(files / "xgb.bst", "xgb.bst") == ".ubj"
    old = tmp_path / "0001.model"
    old.write_bytes(b"\x00\x00\x00\x3f" + bytes(200))  # base_score 0.5 first: the pre-1.0 binary learner
    with pytest.raises(LoadError, match=r"binary format of XGBoost before 1\.0.*save_model\('model\.json'\)"):
        suffix_by_content(old, old.name)
    junk = tmp_path / "notes.bst"
    junk.write_bytes(b"hello, these are notes")
    with pytest.raises(LoadError, match=r"notes\.bst: its content is none of the model formats"):
        suffix_by_content(junk, junk.name)


def test_the_review_reads_them_and_its_error_is_the_librarys(files):
    """``app.py report --model lgb.model --model xgb.bst``: both load, and each model's
    squared error in numbers.json is that of the library's own predictions (1e-6)."""
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "app.py"),
            "report",
            "--model",
            "lgb.model",
            "--model",
            "xgb.bst",
            "--data",
            "data.csv",
            "--target",
            "y",
            "--out",
            "r.html",
            "--json",
            "n.json",
            "--cache-dir",
            "cache",
        ],
        cwd=files,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    numbers = json.loads((files / "n.json").read_text())
    y = pd.read_csv(files / "data.csv")["y"].to_numpy()
    for model, saved in (("lgb", "lgb.npy"), ("xgb", "xgb.npy")):
        expected = float(np.mean((y - np.load(files / saved)) ** 2))
        assert abs(numbers["performance"][model]["loss"] - expected) <= 1e-6 * max(1.0, expected), model
