"""Issue 39: panels fail alone. A task that cannot run for this feature or subgroup fails
only the panels that need it, each saying why; every other panel, the findings (without the
sentence that needs it) and the performance table are drawn."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers.components import texts
from sklearn.ensemble import RandomForestClassifier

from dashboard import views
from dashboard.callbacks.compute import resolve_state, run_request
from dashboard.config import Config
from dashboard.doors import open_workspace, report_numbers
from dashboard.html_report import report_html
from dashboard.server import create_app
from dashboard.state import default_state, normalize
from dashboard.store import Failed
from dashboard.views import plan_state


@pytest.fixture(scope="module")
def opened(tmp_path_factory):
    ctx = create_app(Config(cache_dir=str(tmp_path_factory.mktemp("fail-alone")), max_curves=300))._wip_context
    rng = np.random.default_rng(0)
    n = 400
    df = pd.DataFrame(
        {
            "income_k": rng.normal(50, 10, n),
            "age": rng.normal(40, 10, n),
            "tenure": rng.integers(0, 10, n).astype(float),
            "region": np.zeros(n),  # one market: a single value in every row
        }
    )
    df.loc[rng.random(n) < 0.2, "income_k"] = np.nan
    df["churn"] = (rng.random(n) < 0.3 + 0.2 * (df["tenure"] < 3)).astype(int)
    features = ["income_k", "age", "tenure", "region"]
    model = RandomForestClassifier(n_estimators=20, random_state=0).fit(df[features], df["churn"])
    ws = open_workspace(ctx, {"forest": model}, df, "churn", title="churn")
    return ctx, ws


def _computed(ctx, ws, **changes) -> dict:
    state = normalize(ctx, {**default_state(), "ws": ws.id, **changes})[0]
    done = run_request(ctx, {"state": state})
    assert done.get("ok") and "error" not in done, done  # the job answers: it did not fail as a whole
    resolved = resolve_state(ctx, state, done).results
    assert "error" not in resolved and not resolved.get("pending"), resolved  # the page is complete
    return {"state": state, "keys": plan_state(ctx, ws, state)["keys"]}


def _annotation(figure) -> str:
    """A figure's message as read (its lines joined)."""
    text = " ".join(a.text for a in figure.layout.annotations) if figure.layout.annotations else ""
    return text.replace("-<br>", "-").replace("<br>", " ")


def test_a_subgroup_where_the_chosen_feature_is_missing_keeps_every_panel(opened):
    """The issue's case: subgroup 'income_k is missing' with income_k chosen. income_k is empty
    in these rows: its grid is the missing point alone (issue 41), so the pairs are computed for
    the other features and income_k's H² is exactly 0 (its curves come from all rows)."""
    ctx, ws = opened
    results = _computed(ctx, ws, feature="income_k", subgroup="income_k is missing")
    pairs = views.render(ctx, "interactions", results)
    assert not _annotation(pairs["bars"]), _annotation(pairs["bars"])
    strength = views.load_inputs(ctx, results).results("interactions")["forest"]
    assert strength.overall.loc["income_k", "h2"] == 0.0 and strength.overall.loc["income_k", "h"] == 0.0
    assert np.isfinite(strength.overall.to_numpy(float)).all() and strength.overall.loc["age", "h"] > 0
    performance = views.render(ctx, "performance", results)
    assert performance["data"] and any(r["rows"] == "subgroup" for r in performance["data"])
    said = _annotation(performance["by_feature"])  # not an empty scatter: it says why
    assert "income_k is missing on every row of subgroup income_k is missing" in said, said
    assert "Choose another feature" in said and not performance["by_feature"].data
    bars = next(t for t in views.render(ctx, "pfi", results)["figure"].data if t.type == "bar")
    assert sorted(bars.y) == ["age", "income_k", "region", "tenure"] and np.isfinite(np.asarray(bars.x, float)).all()
    sentences = texts(views.render(ctx, "findings", results)["list"])
    assert sentences and sentences[0].startswith("forest is ") and "always answering" in sentences[0]
    assert not any("could not be computed" in s for s in sentences)
    numbers = report_numbers(ctx, results)
    assert numbers["performance"]["forest"]["skill"] and numbers["pfi"]["forest"]["income_k"]
    assert "error" not in numbers["views"].get("interactions", {})
    html = report_html(ctx, results)
    assert "<h3>What we found</h3>" in html and "<h3>Which features act together?</h3>" in html


def test_a_constant_column_loses_its_curves_alone_and_gets_a_pfi_of_zero(opened):
    ctx, ws = opened
    results = _computed(ctx, ws, feature="region")
    inp = views.load_inputs(ctx, results)
    key = results["keys"]["profiles"]["region"]
    assert isinstance(ctx.store.get(key), Failed)
    ice = views.render(ctx, "ice", results)["figure"]
    assert "region" in _annotation(ice) and "could not be computed" in _annotation(ice)
    assert inp.pfi["forest"].importance["region"] == 0.0  # shuffling one value changes nothing
    other = _computed(ctx, ws, feature="age")  # the other features' curves are there
    assert views.load_inputs(ctx, other).profile is not None
    assert "region" not in views.load_inputs(ctx, other).summary.features
    for name in ("pfi", "performance", "findings", "ciu"):
        out = views.render(ctx, name, other)
        shown = " ".join(str(v) for v in out.values())
        assert "could not be computed" not in shown, name
