"""Issue 12: the job says how long it has left, from its estimated model rows priced by a
timed probe and then by the rate it measures."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dashboard import jobs, planning
from dashboard.config import Config
from dashboard.planning import Task
from dashboard.server import create_app
from dashboard.state import default_state, normalize
from dashboard.views import plan_state


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return create_app(Config(cache_dir=str(tmp_path_factory.mktemp("eta-cache")), max_curves=200))._wip_context


def test_eta_uses_the_probe_then_the_measured_rate():
    times = iter([100.0, 102.0, 102.5, 110.0])
    eta = jobs.Eta(np.array([0, 100, 200, 1000]), lambda: next(times))
    eta.probe(0.01)  # seconds per row
    assert eta.left(0) == "about 10 s left"  # 1000 rows x 0.01 s
    assert eta.left(1) == "about 18 s left"  # measured: 2 s for 100 rows -> 900 rows x 0.02 s
    assert eta.left(2) == "about 10 s left"  # 2.5 s for 200 rows -> 800 x 0.0125
    assert eta.left(3) == ""  # nothing left
    slow = jobs.Eta(np.array([0, 10, 100_000]), itertools.count(0.0, 0.1).__next__)
    slow.probe(0.01)
    assert slow.left(0) == "about 17 min left"
    assert jobs.Eta(np.array([0, 10]), lambda: 0.0).left(0) == ""  # no probe, nothing measured yet


def test_profile_rows_are_estimated_as_the_pass_predicts_them(ctx):
    """The estimate of the ICE/ICI pass is the rows it predicts: explained rows x grid points
    per feature (and the output-range pass over every row on the first)."""
    ws = ctx.store.workspace("demo-diabetes")
    state = normalize(ctx, {**default_state(), "ws": ws.id})[0]
    planned = plan_state(ctx, ws, state)
    task = Task.from_dict(next(t for t in planned["tasks"] if t["kind"] == "profiles"))
    data = ctx.store.data(ws)
    estimate = jobs.step_rows(ws, task, data)
    jobs.run(ctx.store, ws, [task.to_dict()], policy=ctx.policy)
    actual = [ctx.store.get(planned["keys"]["profiles"][f]).pred.size for f in ws.model(task.model).features]
    actual[0] += len(data)
    assert estimate == actual


def test_progress_labels_end_with_the_time_left(ctx):
    ws = ctx.store.workspace("demo-x3")
    state = normalize(ctx, {**default_state(), "ws": ws.id, "subgroup": "X1 > 0.5"})[0]
    todo = planning.missing(ctx.store, plan_state(ctx, ws, state)["tasks"])
    assert todo
    labels = []
    ticks = itertools.count(0.0, 3.0)  # every progress report 3 s later: a slow job
    jobs.run(
        ctx.store, ws, todo, policy=ctx.policy, progress=lambda d, t, label: labels.append(label), clock=ticks.__next__
    )
    assert labels[-1] == "done"
    assert any(" · about " in label and label.endswith("left") for label in labels[:-1]), labels
