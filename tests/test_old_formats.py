"""Issue 41: models as others saved them.

1. Files written by old XGBoost (1.0.2, 1.4.2, 1.5.2, 1.6.2), LightGBM (2.0.12, 2.2.3,
   2.3.1, 3.3.5: DART, GOSS, linear trees) and CatBoost (1.0.6: .cbm and .json, a categorical
   feature, a multiclass model with class names) releases (tests/data/old_models, written by
   its make.py with those releases) are uploaded through the page's upload route, loaded as the
   page loads them, and predict what the old library itself predicted (1e-6), including
   XGBoost 1.6's categorical JSON whose categorical nodes hold NaN thresholds; and through
   ``app.py report``.
2. A ``.model`` (LightGBM text) and a ``.bst`` (XGBoost UBJSON) file go through the same
   route, are read by their content and predict as the library does (1e-6).
3. A version too old to read is refused naming it; a NaN threshold on a numeric node is
   still refused.

This process never imports the boosters: every load and prediction runs in the dashboard's
isolated child (or, to write files, a fresh interpreter).
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import compute
from dashboard.callbacks.load import load_workspace
from dashboard.config import Config
from dashboard.isolation import Limits, isolated
from dashboard.loading import LoadError, load_model
from dashboard.server import create_app

_missing = [name for name in ("xgboost", "lightgbm") if importlib.util.find_spec(name) is None]
if _missing:
    pytest.skip(f"the boosters extra is not installed ({', '.join(_missing)})", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
OLD = ROOT / "tests" / "data" / "old_models"
LIMITS = Limits(seconds=120, memory_bytes=4 << 30)
FILES = sorted(
    p.name
    for p in OLD.iterdir()
    if p.suffix in (".json", ".ubj", ".txt", ".cbm") and ".pred." not in p.name and ".classes." not in p.name
)
FEATURES = ["a", "b", "c"]


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    return create_app(
        Config(cache_dir=str(tmp_path_factory.mktemp("cache")), upload_per_minute=10_000, upload_mb_per_hour=100_000)
    )


def post(app, kind: str, name: str, blob: bytes) -> dict:
    """An upload through the page's route (what assets/upload.js sends)."""
    client = app.server.test_client()
    answer = client.post(
        "/upload", data={"kind": kind, "file": (io.BytesIO(blob), name)}, content_type="multipart/form-data"
    )
    body = answer.get_json()
    assert answer.status_code == 200, body
    return body


def _predictions(ctx, ws_id: str) -> np.ndarray:
    """What the jobs compute: the stored model loaded from the workspace's file, fed the
    stored data through compute's predictor (the positive class's probability for a classifier)."""
    ws = ctx.store.workspace(ws_id)
    entry = ws.models[0]
    model = load_model(ctx.store.path(entry.path), name=entry.name, classes=list(entry.classes) or None)
    predictor, X = compute.validation.make_predictor(model, ctx.store.data(ws)[list(ws.features)], ws.output)
    out = np.asarray(predictor.raw(predictor.design.block(np.arange(len(X)), {})), dtype=np.float64)
    return out[:, -1] if out.ndim == 2 and out.shape[1] == 2 else out


def load_through_the_page(app, model: tuple[str, bytes], data: tuple[str, bytes], target: str) -> dict:
    ctx = app._wip_context
    files = [post(app, "model", *model)]
    return load_workspace(ctx, files, post(app, "data", *data), target, None, None, [], False, None, "training", True)


def _close(got, expected) -> None:
    expected = np.asarray(expected, dtype=np.float64).reshape(np.shape(got))
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6 * max(1.0, float(np.abs(expected).max())))


# --- 1. files written by old releases -------------------------------------------------------
@pytest.mark.parametrize("name", FILES)
def test_an_old_file_predicts_as_the_old_library_did(app, name):
    target = "label" if "-binary" in name else "tier" if "-multiclass" in name else "y"
    data = pd.read_csv(OLD / "data.csv")[[*FEATURES, target]]  # in the model's order, as the tick says
    result = load_through_the_page(
        app, (name, (OLD / name).read_bytes()), ("data.csv", data.to_csv(index=False).encode()), target
    )
    assert "ws" in result, result
    got = isolated(_predictions, app._wip_context, result["ws"], limits=LIMITS)
    _close(got, json.loads((OLD / f"{name}.pred.json").read_text()))
    if "-multiclass" in name:  # the class names the file stores, in the old library's order
        ws = app._wip_context.store.workspace(result["ws"])
        assert [str(c) for c in ws.models[0].classes] in ([], json.loads((OLD / f"{name}.classes.json").read_text()))


def test_the_fixtures_cover_the_old_formats():
    """What the issue names: XGBoost JSON from 1.0 and 1.6's categorical JSON with NaN
    thresholds on categorical nodes; LightGBM format v2 (2.0, with no 'end of trees' line,
    and 2.2) and v3 with DART, GOSS and linear trees."""
    assert {"xgboost-1.0.2-regression.json", "xgboost-1.6.2-categorical.json", "xgboost-1.6.2-regression.ubj"} <= set(
        FILES
    )
    assert "NaN" in (OLD / "xgboost-1.6.2-categorical.json").read_text()
    assert "end of trees" not in (OLD / "lightgbm-2.0.12-dart.txt").read_text()
    formats = {(OLD / f).read_text().splitlines()[1] for f in FILES if f.startswith("lightgbm")}
    assert formats == {"version=v2", "version=v3"}
    assert "is_linear=1" in (OLD / "lightgbm-3.3.5-linear.txt").read_text()
    assert {"catboost-1.0.6-regression.cbm", "catboost-1.0.6-regression.json", "catboost-1.0.6-multiclass.cbm"} <= set(
        FILES
    )


def test_the_command_line_reads_old_files(tmp_path):
    """``app.py report`` with several old models at once (one names no inputs:
    ``--columns-in-order``): each model's squared error is that of the old library's own
    predictions (1e-6)."""
    names = ["xgboost-1.0.2-regression.json", "xgboost-1.6.2-categorical.json", "lightgbm-2.0.12-dart.txt"]
    names += ["lightgbm-3.3.5-linear.txt", "catboost-1.0.6-categorical.cbm"]
    data = pd.read_csv(OLD / "data.csv")[[*FEATURES, "y"]]
    data.to_csv(tmp_path / "data.csv", index=False)
    command = [sys.executable, str(ROOT / "app.py"), "report", "--data", "data.csv", "--target", "y"]
    for name in names:
        (tmp_path / name).write_bytes((OLD / name).read_bytes())
        command += ["--model", name]
    command += ["--columns-in-order", "--out", "r.html", "--json", "n.json", "--cache-dir", "cache"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    numbers = json.loads((tmp_path / "n.json").read_text())
    for name in names:
        expected = float(np.mean((data.y.to_numpy() - json.loads((OLD / f"{name}.pred.json").read_text())) ** 2))
        got = numbers["performance"][Path(name).stem]["loss"]
        assert abs(got - expected) <= 1e-6 * max(1.0, expected), name


# --- 2. .model / .bst through the upload route --------------------------------------------
WRITE = textwrap.dedent(
    """
    import numpy as np, pandas as pd, lightgbm, xgboost
    rng = np.random.default_rng(41)
    X = pd.DataFrame(rng.normal(size=(150, 3)).round(4), columns=["a", "b", "c"])
    y = (2 * X.a + X.b * X.c + rng.normal(scale=0.1, size=150)).round(4)
    X.assign(y=y).to_csv("data.csv", index=False)
    X = pd.read_csv("data.csv")[["a", "b", "c"]]
    lgb = lightgbm.LGBMRegressor(n_estimators=10, num_leaves=4, verbose=-1).fit(X, y)
    lgb.booster_.save_model("lgb.model")
    np.save("lgb.npy", lgb.predict(X))
    xgb = xgboost.XGBRegressor(n_estimators=10, max_depth=3).fit(X, y)
    xgb.save_model("xgb.ubj")
    np.save("xgb.npy", xgb.predict(X))
    """
)


@pytest.fixture(scope="module")
def ambiguous(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ambiguous-upload")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-c", WRITE], cwd=folder, check=True, env=env, timeout=300)
    (folder / "xgb.ubj").rename(folder / "xgb.bst")  # XGBoost's UBJSON under an old example's suffix
    return folder


@pytest.mark.parametrize("name,reference", [("lgb.model", "lgb.npy"), ("xgb.bst", "xgb.npy")])
def test_model_and_bst_files_upload_and_predict_as_the_library(app, ambiguous, name, reference):
    data = ("data.csv", (ambiguous / "data.csv").read_bytes())
    result = load_through_the_page(app, (name, (ambiguous / name).read_bytes()), data, "y")
    assert "ws" in result, result
    got = isolated(_predictions, app._wip_context, result["ws"], limits=LIMITS)
    _close(got, np.load(ambiguous / reference))


def test_a_bst_that_is_no_model_is_refused_at_load_by_its_content(app, ambiguous):
    data = ("data.csv", (ambiguous / "data.csv").read_bytes())
    result = load_through_the_page(app, ("notes.bst", b"hello, these are notes"), data, "y")
    assert "none of the model formats" in result["errors"]["model"], result


def test_the_pickers_and_the_route_accept_model_and_bst(app):
    accept = (ROOT / "assets" / "upload.js").read_text()
    line = next(x for x in accept.splitlines() if x.strip().startswith("model:"))
    assert ".model" in line and ".bst" in line
    client = app.server.test_client()
    refused = client.post(
        "/upload", data={"kind": "model", "file": (io.BytesIO(b"x"), "m.bin")}, content_type="multipart/form-data"
    )
    assert refused.status_code == 400 and ".model, .bst" in refused.get_json()["error"]


# --- 3. too old, and NaN where it means something -----------------------------------------
def test_a_lightgbm_file_older_than_2_0_is_refused_naming_its_format(tmp_path):
    text = (OLD / "lightgbm-2.0.12-dart.txt").read_text()
    for version, said in (("", "no format version"), ("version=v1\n", "format v1")):
        path = tmp_path / "old.txt"
        path.write_text(text.replace("version=v2\n", version))
        with pytest.raises(LoadError, match=rf"old\.txt is a LightGBM text model with {said}.*LightGBM 2\.0 and later"):
            load_model(path)


def test_an_xgboost_file_before_1_0_is_refused_naming_its_version(tmp_path):
    doc = json.loads((OLD / "xgboost-1.0.2-regression.json").read_text())
    doc["version"] = [0, 90, 0]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(LoadError, match=r"old\.json was written by XGBoost 0\.90\.0; .*from XGBoost 1\.0 on"):
        load_model(path)


def test_a_nan_threshold_on_a_numeric_node_is_still_refused(tmp_path):
    doc = json.loads((OLD / "xgboost-1.6.2-categorical.json").read_text())
    tree = doc["learner"]["gradient_booster"]["model"]["trees"][0]
    numeric = next(i for i, kind in enumerate(tree["split_type"]) if kind == 0 and tree["left_children"][i] >= 0)
    tree["split_conditions"][numeric] = float("nan")
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(LoadError, match=r"tree 0's thresholds hold a non-finite value"):
        load_model(path)
