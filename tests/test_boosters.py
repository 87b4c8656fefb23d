"""XGBoost, LightGBM and CatBoost files (issue 24): equal to the model itself, and hostile
files refused with a message, never a crash.

The models are trained in a fresh interpreter (tests/helpers/train_boosters.py), which also
records the in-memory model's own predictions on its training frame. This process never
runs the libraries itself (their OpenMP pools must not be started in a process that forks
model processes): every load and prediction below runs in the dashboard's isolated child.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

import compute
from dashboard.callbacks.load import load_workspace
from dashboard.config import Config
from dashboard.isolation import Limits, isolated
from dashboard.loading import LoadError, Policy, load_model, model_versions
from dashboard.server import create_app

# Found, never imported here: the boosters' OpenMP pools and mapped libraries stay out of the
# test process (every load and prediction below runs in a fresh or isolated process; a pytest
# process holding them forks job children that start near their address-space limit).
_missing = [name for name in ("xgboost", "lightgbm", "catboost") if importlib.util.find_spec(name) is None]
if _missing:
    pytest.skip(f"the boosters extra is not installed ({', '.join(_missing)})", allow_module_level=True)

HERE = Path(__file__).resolve().parent
LIMITS = Limits(seconds=120, memory_bytes=4 << 30)


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    out = tmp_path_factory.mktemp("boosters")
    done = subprocess.run(
        [sys.executable, str(HERE / "helpers" / "train_boosters.py"), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return create_app(Config(cache_dir=str(tmp_path_factory.mktemp("cache"))))._wip_context


def upload(ctx, path: str, name: str | None = None) -> dict:
    name = name or os.path.basename(path)
    token, dest = ctx.store.new_upload(name)
    dest.write_bytes(Path(path).read_bytes())
    return {"id": token, "name": name, "size": dest.stat().st_size}


def _dashboard_predictions(ctx, ws_id: str) -> tuple[np.ndarray, list, list[str]]:
    """What the dashboard's jobs compute: each stored model loaded from the workspace's file
    (with the labels the Load stored), fed the stored data through compute's predictor."""
    ws = ctx.store.workspace(ws_id)
    data = ctx.store.data(ws)
    out = []
    for entry in ws.models:
        model = load_model(ctx.store.path(entry.path), name=entry.name, classes=list(entry.classes) or None)
        predictor, X = compute.validation.make_predictor(model, data.drop(columns=ws.target), ws.output)
        out.append(predictor.raw(predictor.design.block(np.arange(len(X)), {})))
    return np.asarray(out[0]), [list(map(str, getattr(m, "classes", ()))) for m in ws.models], list(ws.warnings)


def dashboard_predictions(ctx, ws_id: str):
    return isolated(_dashboard_predictions, ctx, ws_id, limits=LIMITS)


def load(ctx, files: list[str], csv: str, target: str, *, labels=None, names=None):
    models = [upload(ctx, f, n) for f, n in zip(files, names or [None] * len(files))]
    return load_workspace(ctx, models, upload(ctx, csv), target, None, None, [], False, None, "training", False, labels)


def _ids(case) -> str:
    return f"{case['library']}-{case['task']}-{case['kind']}"


ALL = [
    (library, task, kind, fmt)
    for library, formats in (("xgboost", (".json", ".ubj")), ("lightgbm", (".txt",)), ("catboost", (".cbm", ".json")))
    for task in ("regression", "count", "binary", "multi")
    for kind in ("numeric", "categorical")
    for fmt in formats
    if not (task == "count" and kind == "categorical")
]


@pytest.mark.parametrize("library,task,kind,fmt", ALL, ids=["-".join(c) for c in ALL])
def test_the_uploaded_file_predicts_as_the_model_itself(cases, ctx, library, task, kind, fmt):
    """The predictions the dashboard computes from the uploaded file and the CSV equal the
    in-memory model's predict / predict_proba on its training frame (1e-6; CatBoost's JSON
    stores doubles too, so the same bound holds for it)."""
    case = next(c for c in cases if (c["library"], c["task"], c["kind"]) == (library, task, kind))
    file = next(f for f in case["files"] if f.endswith(fmt))
    result = load(ctx, [file], case["csv"], case["target"])
    assert "ws" in result, result
    got, _classes, warnings = dashboard_predictions(ctx, result["ws"])
    reference = np.load(case["reference"])
    ws = ctx.store.workspace(result["ws"])
    if task in ("binary", "multi"):
        assert ws.task == "classification"
        assert_allclose(got, reference, rtol=0, atol=1e-6)
        stored = [str(c) for c in ws.models[0].classes]
        if library == "catboost":  # from the file
            assert stored == []
        elif library == "xgboost":  # integer targets 0..k-1: no guess needed, no note
            assert stored == case["classes"] and not any("sorted order" in w for w in warnings)
        else:  # LGBMClassifier's LabelEncoder order, said in a note
            assert stored == case["classes"] and any("sorted order" in w for w in warnings)
    else:
        assert ws.task == "regression"
        assert_allclose(got, reference, rtol=0, atol=1e-6 * max(1.0, np.abs(reference).max()))
    assert ws.models[0].features == tuple(["a", "b"] + (["c"] if kind == "categorical" else []))


def test_categorical_levels_follow_the_training_order_not_the_alphabet(cases, ctx):
    """The same XGBoost and LightGBM files predict differently if 'c' were coded
    alphabetically (blue, green, red) instead of in training order (red, green, blue): the
    reference equality above would fail. Checked directly: recoding the CSV's levels by the
    alphabet changes the predictions by more than the tolerance."""
    for library in ("xgboost", "lightgbm"):
        case = next(c for c in cases if (c["library"], c["task"], c["kind"]) == (library, "regression", "categorical"))
        frame = pd.read_csv(case["csv"])
        swapped = frame.assign(c=frame.c.map({"red": "blue", "blue": "red", "green": "green"}))
        path = Path(case["csv"]).with_name(f"{library}-swapped.csv")
        swapped.to_csv(path, index=False)
        result = load(ctx, [case["files"][0]], str(path), "regression")
        got, _, _ = dashboard_predictions(ctx, result["ws"])
        assert np.abs(got - np.load(case["reference"])).max() > 0.5


def test_a_level_the_model_never_saw_is_handled_as_its_library_does(cases, ctx):
    """Rows 2, 5, 7 hold 'purple', a level no model saw. LightGBM predicts it as a missing
    value: the load notes the column, level and rows, and the predictions equal the in-memory
    model's on that frame. CatBoost takes any text: equal to the in-memory model, no note.
    XGBoost refuses unknown levels ("Found a category not in the training set"; 3.2's pandas
    path silently reads one as the first level): the load is refused, naming the column,
    level and rows."""
    picked = {c["library"]: c for c in cases if c["task"] == "regression" and c["kind"] == "categorical"}
    for library in ("lightgbm", "catboost"):
        case = picked[library]
        result = load(ctx, [case["files"][0]], case["unseen_csv"], "regression")
        got, _, notes = dashboard_predictions(ctx, result["ws"])
        assert_allclose(got, np.load(case["unseen_reference"]), atol=1e-6 if library == "lightgbm" else 1e-5)
        noted = [n for n in notes if "never saw" in n]
        if library == "lightgbm":
            assert len(noted) == 1 and "'c': 3 rows" in noted[0] and "'purple'" in noted[0], noted
            assert "'red', 'green', 'blue'" in noted[0] and "missing value" in noted[0]
        else:
            assert noted == []
    for file in picked["xgboost"]["files"]:
        refused = load(ctx, [file], picked["xgboost"]["unseen_csv"], "regression")
        message = refused["errors"]["data"]
        assert "'c'" in message and "'purple'" in message and "3 rows, first: 2, 5, 7" in message, message


def test_models_of_all_formats_compare_side_by_side(cases, ctx):
    """One XGBoost .ubj, one LightGBM .txt and one CatBoost .cbm regressor on the same CSV."""
    picked = {c["library"]: c for c in cases if c["task"] == "regression" and c["kind"] == "categorical"}
    files = [picked["xgboost"]["files"][1], picked["lightgbm"]["files"][0], picked["catboost"]["files"][0]]
    result = load(ctx, files, picked["xgboost"]["csv"], "regression", names=["xgb.ubj", "lgb.txt", "cat.cbm"])
    ws = ctx.store.workspace(result["ws"])
    assert [m.name for m in ws.models] == ["xgb", "lgb", "cat"]


def test_typed_class_labels_are_used_in_the_models_order(cases, ctx):
    """A LightGBM classifier's outputs are matched to labels the user types (here the
    reverse of the sorted order): the explained class's probability moves with them."""
    case = next(c for c in cases if (c["library"], c["task"], c["kind"]) == ("lightgbm", "binary", "numeric"))
    result = load(ctx, case["files"], case["csv"], "binary", labels="yes, no")
    ws = ctx.store.workspace(result["ws"])
    assert ws.models[0].classes == ("yes", "no")
    got, _, warnings = dashboard_predictions(ctx, result["ws"])
    reference = np.load(case["reference"])
    assert_allclose(got, reference, atol=1e-6)  # columns in the model's order, now labelled yes, no
    assert not any("sorted order" in w for w in warnings)
    wrong = load(ctx, case["files"], case["csv"], "binary", labels="a, b, c")
    assert "2 classes; 3 distinct labels" in wrong["errors"]["output"]


def test_text_in_a_numeric_column_is_named(cases, ctx):
    case = next(c for c in cases if (c["library"], c["task"], c["kind"]) == ("lightgbm", "regression", "numeric"))
    frame = pd.read_csv(case["csv"]).astype({"b": object})
    frame.loc[3, "b"] = "unknown"
    path = Path(case["csv"]).with_name("text-in-b.csv")
    frame.to_csv(path, index=False)
    result = load(ctx, case["files"], str(path), "regression")
    assert "'b' holds text" in result["errors"]["data"]


def test_a_missing_column_is_named_against_the_models(cases, ctx):
    case = next(c for c in cases if (c["library"], c["task"], c["kind"]) == ("xgboost", "regression", "categorical"))
    frame = pd.read_csv(case["csv"]).drop(columns="c")
    path = Path(case["csv"]).with_name("no-c.csv")
    frame.to_csv(path, index=False)
    for file in case["files"]:
        result = load(ctx, [file], str(path), "regression")
        assert "lacks 1 column(s)" in result["errors"]["data"] and "'c'" in result["errors"]["data"]


def test_versions_are_read_without_loading(cases):
    case = next(c for c in cases if (c["library"], c["task"], c["kind"]) == ("xgboost", "regression", "numeric"))
    assert model_versions(case["files"][0])["XGBoost"].count(".") == 2
    case = next(c for c in cases if c["library"] == "lightgbm")
    assert model_versions(case["files"][0]) == {"LightGBM format": "v4"}


def test_refused_objectives_are_named(tmp_path, cases):
    """A ranking objective: refused by name before any prediction."""
    case = next(c for c in cases if (c["library"], c["task"], c["kind"]) == ("lightgbm", "regression", "numeric"))
    text = Path(case["files"][0]).read_text().replace("objective=regression", "objective=lambdarank")
    path = tmp_path / "rank.txt"
    path.write_text(text)
    with pytest.raises(LoadError, match="objective lambdarank") as info:
        isolated(load_model, str(path), limits=LIMITS)
    assert info.value.field == "model"
    doc = json.loads(Path(next(c for c in cases if c["library"] == "xgboost")["files"][0]).read_text())
    doc["learner"]["objective"]["name"] = "rank:pairwise"
    (tmp_path / "rank.json").write_text(json.dumps(doc))
    with pytest.raises(LoadError, match="objective rank:pairwise"):
        isolated(load_model, str(tmp_path / "rank.json"), limits=LIMITS)


def test_a_missing_library_is_named(tmp_path, cases, monkeypatch):
    case = next(c for c in cases if c["library"] == "catboost")

    def run():
        import builtins

        real = builtins.__import__

        def fake(name, *args, **kwargs):
            if name == "catboost":
                raise ImportError("No module named 'catboost'")
            return real(name, *args, **kwargs)

        builtins.__import__ = fake
        import importlib

        real_import_module = importlib.import_module
        importlib.import_module = lambda n, *a: fake(n) if n == "catboost" else real_import_module(n, *a)
        return load_model(case["files"][0])

    with pytest.raises(LoadError, match="catboost is not installed on this server") as info:
        isolated(run, limits=LIMITS)
    assert "why-it-performs[boosters]" in str(info.value)


def test_unknown_suffix_message_names_the_booster_formats(tmp_path):
    path = tmp_path / "m.bin"
    path.write_bytes(b"x")
    with pytest.raises(LoadError, match="LightGBM .txt"):
        load_model(path, policy=Policy())


# --- the whole dashboard on booster workspaces ------------------------------------------------
def _run_all(ctx, ws_id: str, **changes):
    """Plan the default state's tasks and run them, as the background job does (in the
    isolated child: this process never starts the boosters' OpenMP pools)."""
    from dashboard import jobs
    from dashboard.state import default_state, normalize
    from dashboard.views import plan_state

    state, error = normalize(ctx, {**default_state(), "ws": ws_id, **changes})
    assert error is None, error
    ws = ctx.store.workspace(ws_id)
    planned = plan_state(ctx, ws, state)
    isolated(functools.partial(jobs.run, ctx.store, ws, planned["tasks"], policy=ctx.policy), limits=LIMITS)
    return {"state": state, "keys": planned["keys"]}


def _rendered_text(out) -> str:
    return json.dumps(out, default=lambda v: v.to_plotly_json() if hasattr(v, "to_plotly_json") else str(v))


@pytest.mark.parametrize("task", ["regression", "binary"])
def test_every_view_renders_and_the_performance_numbers_are_scikit_learns(cases, ctx, task):
    """An uploaded booster (XGBoost .ubj with a categorical column): every view renders with no
    error, and the performance table's unrounded R² / AUC and log loss equal scikit-learn's on
    the in-memory model's predictions."""
    from sklearn import metrics

    from dashboard import views
    from dashboard.views import performance

    case = next(c for c in cases if (c["library"], c["task"], c["kind"]) == ("xgboost", task, "categorical"))
    result = load(ctx, [case["files"][1]], case["csv"], case["target"])
    results = _run_all(ctx, result["ws"])
    rendered = views.render_all(ctx, results)
    text = _rendered_text(rendered)
    assert "could not be drawn" not in text and "Waiting for" not in text.replace("Waiting for results", "")
    table = performance.metrics_table(views.load_inputs(ctx, results))
    row = table.xs("all rows", level="rows").iloc[0]
    y = pd.read_csv(case["csv"])[case["target"]]
    reference = np.load(case["reference"])
    if task == "regression":
        assert_allclose(row["R²"], metrics.r2_score(y, reference), rtol=1e-9)
        assert_allclose(row["MAE"], metrics.mean_absolute_error(y, reference), rtol=1e-9)
    else:
        assert_allclose(row["AUC"], metrics.roc_auc_score(y, reference[:, 1]), rtol=1e-12)
        assert_allclose(row["log loss (PFI's loss)"], metrics.log_loss(y, reference), rtol=1e-6)


def test_the_wine_demo_compares_the_three_libraries(ctx):
    """The built-in gradient-boosting demo: three formats side by side, every view drawn, the
    three PFI results present, and each model's accuracy that of its own probabilities."""
    from dashboard import views
    from dashboard.demos import DEMOS
    from dashboard.views import performance

    assert "demo-wine" in DEMOS
    ws = ctx.store.workspace("demo-wine")
    assert [Path(m.path).suffix for m in ws.models] == [".ubj", ".txt", ".cbm"]
    assert ws.models[0].classes == ("cultivar 0", "cultivar 1", "cultivar 2")
    results = _run_all(ctx, "demo-wine")
    text = _rendered_text(views.render_all(ctx, results))
    assert "could not be drawn" not in text
    assert all(ctx.store.get(key) is not None for key in results["keys"]["pfi"].values())
    table = performance.metrics_table(views.load_inputs(ctx, results)).xs("all rows", level="rows")
    assert list(table.index) == ["XGBoost", "LightGBM", "CatBoost"]
    assert (table["accuracy"] > 0.85).all()  # the cultivars are easy to tell apart: labels matched right


def test_the_test_process_never_imported_a_booster_library():
    """Every booster load and prediction above ran in a fresh or isolated process: the pytest
    process (like a web worker) never maps the libraries nor starts their OpenMP pools, which
    would leave the job processes it forks near their address-space limit or hung in libgomp."""
    assert not {"xgboost", "lightgbm", "catboost"} & set(sys.modules)
