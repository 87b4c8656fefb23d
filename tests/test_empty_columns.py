"""Issue 41, item 3: empty (all-missing) columns the model can read.

A column with no values in the rows given is accepted when the model predicts with it
missing (HistGradientBoosting, XGBoost, a pipeline with an imputer), with a note naming it;
refused, naming it, only where the model cannot predict. Like a constant column it gets no
curve (its panel says why) and a PFI of exactly 0 (shuffling missing values among themselves
changes no prediction); the other panels and the report are drawn. Through the Python door
and the command line (``app.py report``, an XGBoost 1.6 file from tests/data/old_models).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline

from dashboard import views
from dashboard.callbacks.compute import resolve_state, run_request
from dashboard.config import Config
from dashboard.doors import open_workspace, report_numbers
from dashboard.html_report import report_html
from dashboard.loading import LoadError, read_data
from dashboard.loading.checks import check_model_data
from dashboard.server import create_app
from dashboard.state import default_state, normalize
from dashboard.store import Failed
from dashboard.views import plan_state

ROOT = Path(__file__).resolve().parent.parent
OLD = ROOT / "tests" / "data" / "old_models"
FEATURES = ["income_k", "age", "f0", "region"]


def _frames(n: int = 400):
    """Training rows (f0 has values there) and the rows given, where f0 is empty and region
    holds one value."""
    rng = np.random.default_rng(0)
    train = pd.DataFrame(
        {
            "income_k": rng.normal(50, 10, n),
            "age": rng.normal(40, 10, n),
            "f0": rng.normal(size=n),
            "region": rng.integers(0, 3, n).astype(float),
        }
    )
    train["spend"] = 0.1 * train.income_k + 0.05 * train.age + train.f0 + rng.normal(scale=0.5, size=n)
    given = train.assign(f0=np.nan, region=0.0)
    return train, given


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return create_app(Config(cache_dir=str(tmp_path_factory.mktemp("empty-columns")), max_curves=300))._wip_context


@pytest.fixture(scope="module")
def opened(ctx):
    """A random forest trained with some of f0 missing (scikit-learn's trees then send missing
    values down a learnt side). Not a histogram gradient boosting model here: its OpenMP pool,
    started in this process, would hang the forked job processes."""
    train, given = _frames()
    train.loc[train.index % 5 == 0, "f0"] = np.nan
    model = RandomForestRegressor(n_estimators=20, random_state=0).fit(train[FEATURES], train.spend)
    return open_workspace(ctx, {"forest": model}, given, "spend", title="spend")


def _computed(ctx, ws, **changes) -> dict:
    state = normalize(ctx, {**default_state(), "ws": ws.id, **changes})[0]
    done = run_request(ctx, {"state": state})
    assert done.get("ok") and "error" not in done, done
    resolved = resolve_state(ctx, state, done).results
    assert "error" not in resolved and not resolved.get("pending"), resolved
    return {"state": state, "keys": plan_state(ctx, ws, state)["keys"]}


def _annotation(figure) -> str:
    text = " ".join(a.text for a in figure.layout.annotations) if figure.layout.annotations else ""
    return text.replace("-<br>", "-").replace("<br>", " ")


def test_a_model_that_reads_missing_values_is_loaded_with_a_note(opened):
    notes = [w for w in opened.warnings if "no values (all missing)" in w]
    assert len(notes) == 1 and "'f0'" in notes[0] and "forest" in notes[0], opened.warnings
    assert "no curve and a PFI of 0" in notes[0]
    assert opened.features == tuple(FEATURES)


def test_the_empty_column_has_no_curve_and_a_pfi_of_exactly_zero(ctx, opened):
    results = _computed(ctx, opened, feature="f0")
    assert isinstance(ctx.store.get(results["keys"]["profiles"]["f0"]), Failed)
    assert isinstance(ctx.store.get(results["keys"]["profiles"]["region"]), Failed)  # constant: likewise
    said = _annotation(views.render(ctx, "ice", results)["figure"])
    assert "f0" in said and "could not be computed" in said, said
    pfi = views.load_inputs(ctx, results).pfi["forest"]
    assert pfi.importance["f0"] == 0.0 and pfi.importance["region"] == 0.0
    assert pfi.importance["income_k"] > 0
    info = views.render(ctx, "pfi", results)["info"]
    assert "f0 holds no values (all missing) and region holds one value (0) in these rows" in info, info
    assert "their PFI is 0 and they have no curves" in info


def test_every_other_panel_and_the_report_are_drawn(ctx, opened):
    results = _computed(ctx, opened, feature="age")
    inp = views.load_inputs(ctx, results)
    assert inp.profile is not None and "f0" not in inp.summary.features
    for name in ("pfi", "performance", "findings", "ciu"):
        shown = " ".join(str(v) for v in views.render(ctx, name, results).values())
        assert "could not be computed" not in shown, name
    numbers = report_numbers(ctx, results)
    assert numbers["pfi"]["forest"]["f0"]["importance"] == 0.0 and numbers["performance"]["forest"]["skill"]
    html = report_html(ctx, results)
    assert "<h3>What we found</h3>" in html and "<h3>Permutation feature importance</h3>" in html


def test_the_rule_follows_what_the_model_can_predict():
    """The load's check itself (in this process): a histogram gradient boosting model and a
    pipeline with an imputer read the empty columns, a bare linear model cannot."""
    train, given = _frames(120)
    given = given.assign(age=np.nan)
    hgb = HistGradientBoostingRegressor(max_iter=10, random_state=0).fit(train[FEATURES], train.spend)
    X, _ = check_model_data(hgb, given, "spend", name="hgb", order_confirmed=None)
    assert any("input columns 'age', 'f0'" in n and "all missing" in n for n in X.attrs["notes"])
    with pytest.raises(LoadError, match=r"'age', 'f0' of the data hold no values"):
        check_model_data(LinearRegression().fit(train[FEATURES], train.spend), given, "spend", name="linear")


def test_a_model_that_cannot_read_them_is_refused_naming_them(ctx):
    train, given = _frames(120)
    given = given.assign(age=np.nan)
    linear = LinearRegression().fit(train[FEATURES], train.spend)
    with pytest.raises(LoadError, match=r"input columns 'age', 'f0' of .* no values \(all missing\).*cannot predict"):
        open_workspace(ctx, {"linear": linear}, given, "spend")
    imputed = make_pipeline(SimpleImputer(), LinearRegression()).fit(train[FEATURES], train.spend)
    ws = open_workspace(ctx, {"imputed": imputed}, given, "spend")
    assert any("'age', 'f0'" in w and "all missing" in w for w in ws.warnings), ws.warnings


def test_a_data_file_with_an_empty_column_is_read(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a,f0,y\n1,,2\n3,,4\n")
    frame = read_data(path)
    assert list(frame.columns) == ["a", "f0", "y"] and frame.f0.isna().all()


@pytest.mark.skipif(importlib.util.find_spec("xgboost") is None, reason="the boosters extra is not installed")
def test_the_command_line_report_is_intact_with_a_constant_and_an_empty_column(tmp_path):
    """The issue's story: an XGBoost model whose input b is empty in every row given, and c
    holds one value. The report is written, every section is there, b and c have a PFI of 0
    and each panel that needs their curves says why."""
    data = pd.read_csv(OLD / "data.csv")[["a", "b", "c", "y"]].assign(b=np.nan, c=2)
    data.to_csv(tmp_path / "data.csv", index=False)
    (tmp_path / "model.json").write_bytes((OLD / "xgboost-1.6.2-regression.json").read_bytes())
    command = [sys.executable, str(ROOT / "app.py"), "report", "--model", "model.json", "--data", "data.csv"]
    command += ["--target", "y", "--out", "r.html", "--json", "n.json", "--cache-dir", "cache"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    said = done.stdout + done.stderr
    assert "The input column 'b' of data.csv holds no values (all missing)" in said, said[-2000:]
    numbers = json.loads((tmp_path / "n.json").read_text())
    pfi = numbers["pfi"]["model"]
    assert pfi["b"]["importance"] == 0.0 and pfi["c"]["importance"] == 0.0 and pfi["a"]["importance"] > 0
    assert numbers["performance"]["model"]["loss"] > 0
    html = (tmp_path / "r.html").read_text()
    for section in ("What we found", "How good is each model, and where?", "Permutation feature importance"):
        assert f"<h3>{section}</h3>" in html, section
    said = "b holds no values (all missing) and c holds one value (2) in these rows, so shuffling them changes"
    assert said in html and "their PFI is 0 and they have no curves" in html
