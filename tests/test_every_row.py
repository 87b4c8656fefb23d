"""One pass over every row serves two views: the performance view's predictions on every row
give the curves' CIU output range (``compute.output_range_of``), so a job predicts all rows
once, not twice (issue 44: the second pass was serial, in the curves' join)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.dummy import DummyRegressor
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import LogisticRegression

import compute
import compute.whatif
from dashboard import jobs, planning, predictions, row_groups
from dashboard.config import Config
from dashboard.server import create_app
from dashboard.state import default_state, normalize
from dashboard.views import plan_state, whatif


def test_the_range_read_off_the_predictions_is_the_range_of_a_pass_over_the_rows():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(300, 3)), columns=["a", "b", "c"])
    y = X.a * 3 - X.b**2 + rng.normal(size=300)
    forest = RandomForestRegressor(n_estimators=20, random_state=0).fit(X, y)
    got = compute.output_range_of(compute.predict_rows(forest, X))
    assert got == compute.output_range(forest, X)
    assert got[0] < got[1] and got != (float(y.min()), float(y.max()))  # the model's range, not the target's
    clf = LogisticRegression().fit(X, y > 0)
    assert compute.output_range_of(compute.predict_rows(clf, X)) == compute.output_range(clf, X) == (0.0, 1.0)
    flat = DummyRegressor().fit(X, y)
    with pytest.raises(compute.InputError, match="constant"):
        compute.output_range_of(compute.predict_rows(flat, X))


def _planned(tmp_path, demo: str):
    ctx = create_app(Config(cache_dir=str(tmp_path / "c"), max_curves=150, warm=False))._wip_context
    ws = ctx.store.workspace(demo)
    state = normalize(ctx, {**default_state(), "ws": ws.id})[0]
    return ctx, ws, state, plan_state(ctx, ws, state)


def test_the_curves_read_their_output_range_off_the_predictions_on_every_row(tmp_path, monkeypatch):
    """The regression demo's job: the predictions task runs first and the curves' summary reads
    its range from it (``compute.output_range`` is never called); the range is the one a pass
    of its own gives. The key the curves read is the one the planner gives the predictions."""
    ctx, ws, state, planned = _planned(tmp_path, "demo-x3")
    profiles = next(t for t in planned["tasks"] if t["kind"] == "profiles")
    every_row = planned["keys"]["predictions"][profiles["model"]]
    assert profiles["params"]["every_row"] == every_row == predictions.every_row_key(ws, ws.model(profiles["model"]))
    todo = planning.missing(ctx.store, planned["tasks"])
    reversed_todo = [t for t in reversed(todo) if t["kind"] in ("profiles", "predictions")]
    assert [t["kind"] for t in jobs._first_first(reversed_todo)][0] == "predictions"
    with monkeypatch.context() as m:
        m.setattr(compute, "output_range", lambda *a, **k: pytest.fail("a second pass over every row"))
        jobs.run(ctx.store, ws, reversed_todo, policy=ctx.policy)  # the curves listed first: run second
    summary = ctx.store.get(profiles["key"])
    model = jobs.load(ctx.store, ws, profiles["model"], {}, ctx.policy)
    data = ctx.store.data(ws)
    want = compute.output_range(model, data[list(ws.model(profiles["model"]).features)])
    assert summary.out_range == pytest.approx(want, abs=1e-9 * (want[1] - want[0]))  # a forest's threads round


def test_without_the_predictions_the_curves_make_their_own_pass(tmp_path):
    """The curves alone (the predictions not cached, or a split job's join before theirs):
    the same range from a pass of their own."""
    ctx, ws, state, planned = _planned(tmp_path, "demo-x3")
    profiles = [t for t in planned["tasks"] if t["kind"] == "profiles"]
    jobs.run(ctx.store, ws, profiles, policy=ctx.policy)
    assert ctx.store.get(planned["keys"]["predictions"][profiles[0]["model"]]) is None
    summary = ctx.store.get(profiles[0]["key"])
    model = jobs.load(ctx.store, ws, profiles[0]["model"], {}, ctx.policy)
    X = ctx.store.data(ws)[list(ws.model(profiles[0]["model"]).features)]
    want = compute.output_range(model, X)
    assert summary.out_range == pytest.approx(want, abs=1e-9 * (want[1] - want[0]))


def test_a_split_job_joins_the_predictions_before_the_curves(tmp_path, monkeypatch):
    monkeypatch.setattr(row_groups, "ROW_GROUP_ROWS", 50)  # the demo's rows in several parts
    ctx, ws, state, planned = _planned(tmp_path, "demo-x3")
    todo = [t for t in planned["tasks"] if t["kind"] in ("profiles", "predictions")]
    _, joins = jobs.split(ws, todo)
    kinds = [j["kind"] for j in joins]
    assert "profiles" in kinds and kinds.index("predictions") < kinds.index("profiles")


def test_the_what_if_reads_its_output_range_off_the_predictions_on_every_row(tmp_path, monkeypatch):
    """The default observation's what-if (a regressor): with the predictions on every row
    cached it makes no pass over every row of its own, and its CIU range is theirs; without
    them it makes one, to the same range."""
    ctx, ws, _, _ = _planned(tmp_path, "demo-x3")
    state = normalize(ctx, {**default_state(), "ws": ws.id, "obs": "7"})[0]
    planned = plan_state(ctx, ws, state)
    asked = next(t for t in planned["tasks"] if t["kind"] == whatif.KIND)
    alone = {**asked, "key": asked["key"] + "-alone"}
    jobs.run(ctx.store, ws, [alone], policy=ctx.policy)  # no predictions cached: its own pass
    jobs.run(ctx.store, ws, [t for t in planned["tasks"] if t["kind"] == "predictions"], policy=ctx.policy)
    with monkeypatch.context() as m:
        m.setattr(compute.whatif, "_default_range", lambda *a, **k: pytest.fail("a pass over every row"))
        jobs.run(ctx.store, ws, [asked], policy=ctx.policy)
    read_off, own = ctx.store.get(asked["key"]), ctx.store.get(alone["key"])
    every_row = ctx.store.get(planned["keys"]["predictions"][asked["model"]])
    assert read_off.out_range == compute.output_range_of(every_row)
    assert read_off.out_range == pytest.approx(own.out_range, abs=1e-9 * (own.out_range[1] - own.out_range[0]))
    assert read_off.prediction == pytest.approx(own.prediction, rel=1e-12)  # a forest's threads round
