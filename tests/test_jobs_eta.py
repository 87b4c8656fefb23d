"""Issue 12: the job says how long it has left, from its estimated model rows priced by the
steps it has timed. Issue 40, item 4: that estimate was 10-30x too long (a model load and
a probe's per-call cost taken as a rate per row); it must be within a factor 2 of the time
really left once a tenth of the rows are done, and say "estimating" before."""

from __future__ import annotations

import itertools
import re

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


def _seconds(label: str) -> float | None:
    """The seconds an "about N s left" / "about N min left" label says (None: no number)."""
    found = re.search(r"about (\d+) (s|min) left$", label)
    return None if found is None else float(found[1]) * (60 if found[2] == "min" else 1)


def _check(reports: list[tuple[float, str, float]]) -> int:
    """Each (share of the rows done, label, seconds really left): "estimating" before a tenth
    of the rows; after, any number within a factor 2 of the time left. Returns how many
    numbers were checked."""
    checked = 0
    for share, label, truth in reports:
        if share < 0.1:
            assert label.endswith("estimating"), (share, label)
            continue
        said = _seconds(label)
        if said is not None:
            assert truth / 2 <= said <= 2 * truth, (share, label, truth)
            checked += 1
    return checked


def test_one_time_costs_are_not_extrapolated():
    """Model loads of 21 s (the issue's case, then "about 11 min left"; the second model's
    mid-job) and the first step's first-call costs, around fast steps: the estimate comes
    from the steps' own time. Catches extrapolating a load or the first step, or pricing
    rows at the probe's per-call cost."""
    rows = [5_000] * 20 + [300_000, 20_000, 20_000, 1]
    second = 10  # the second model's first step
    fixed, per_row, load, first_call = 0.05, 1e-4, 21.0, 10.0
    took = [fixed + per_row * r for r in rows]
    took[0] += first_call
    now = [0.0]
    eta = jobs.Eta(np.cumsum([0, *rows]), lambda: now[0], loads=2)
    eta.begin()
    assert eta.left(0) == "estimating"  # "loading model ... · estimating"
    with eta.aside(load=True):
        now[0] += load
    eta.probe(fixed)
    end = now[0] + sum(took) + load
    reports = []
    for k, seconds in enumerate(took):
        reports.append((sum(rows[:k]) / sum(rows), eta.left(k), end - now[0]))
        if k == second:
            with eta.aside(load=True):
                now[0] += load
        now[0] += seconds
    assert _check(reports) >= 10
    assert eta.left(len(rows)) == ""  # nothing left


def test_small_steps_pay_a_call_each():
    """Steps of a hundred rows cost a model call each (40 ms), then one of 50,000 rows takes
    5 s: at the small steps' rate per row (0.5 ms) it would look like 25 s."""
    rows = [100] * 60 + [50_000]
    took = [0.04 + 1e-4 * r for r in rows]
    now = [0.0]
    eta = jobs.Eta(np.cumsum([0, *rows]), lambda: now[0])
    eta.begin()
    eta.probe(0.04)
    labels = []
    for k, seconds in enumerate(took):
        labels.append(eta.left(k))
        now[0] += seconds
    tenth = int(np.searchsorted(np.cumsum([0, *rows]), 0.1 * sum(rows)))  # steps done at a tenth of the rows
    assert set(labels[:tenth]) == {"estimating"}
    assert set(labels[tenth:]) == {"about 5 s left"}


def test_models_still_to_load_are_added_at_their_mean_load_time():
    """A load is no rate (30 s for no row), but the models still to load take time too."""
    now = [0.0]
    eta = jobs.Eta(np.cumsum([0, 100, 100, 100, 100, 100]), lambda: now[0], loads=2)
    eta.begin()
    with eta.aside(load=True):
        now[0] += 30.0
    now[0] += 2.0
    assert eta.left(1) == "estimating"  # the first step may hold first-call costs
    now[0] += 2.0
    assert eta.left(2) == "about 36 s left"  # 3 steps of 2 s, and the other model at 30 s
    with eta.aside(load=True):
        now[0] += 10.0
    now[0] += 2.0
    assert eta.left(3) == "about 4 s left"  # every model loaded
    assert jobs.Eta(np.array([0, 10]), lambda: 0.0).left(0) == "estimating"  # nothing timed yet


def test_a_job_with_a_slow_load_is_estimated_within_a_factor_2(tmp_path, monkeypatch):
    """The whole job on a virtual clock: the model takes 21 s to load, its first step 3 s
    more (first-call costs), then each step costs 0.05 s plus 20 us a row. Every label before
    a tenth of the rows says "estimating", every number after is within a factor 2."""
    ctx = create_app(Config(cache_dir=str(tmp_path), max_curves=200))._wip_context
    ws = ctx.store.workspace("demo-x3")
    todo = planning.missing(
        ctx.store, plan_state(ctx, ws, normalize(ctx, {**default_state(), "ws": ws.id})[0])["tasks"]
    )
    data = ctx.store.data(ws)
    rows = [r for t in todo for r in jobs.step_rows(ws, Task.from_dict(t), data)]
    assert sum(rows) >= jobs.PROBE_FROM  # the probe runs
    took = [0.05 + 2e-5 * r for r in rows]
    took[0] += 3.0
    clock = {"loads": 0.0, "at": 0}
    now = lambda: clock["loads"] + sum(took[: clock["at"]])  # noqa: E731
    real_load, real_say = jobs.load, jobs._say

    def slow_load(store, ws, name, models, policy):
        clock["loads"] += 0.0 if name in models else 21.0
        return real_load(store, ws, name, models, policy)

    def say(tell, at, steps):
        inner = real_say(tell, at, steps)

        def moved(label, step):
            clock["at"] = at + step
            inner(label, step)

        return moved

    monkeypatch.setattr(jobs, "load", slow_load)
    monkeypatch.setattr(jobs, "_say", say)
    monkeypatch.setattr(jobs, "_probe", lambda *args: 0.05)
    reports = []
    jobs.run(
        ctx.store,
        ws,
        todo,
        policy=ctx.policy,
        clock=now,
        progress=lambda done, total, label: reports.append((done, label, now())),
    )
    end = clock["loads"] + sum(took)
    assert reports[-1][1] == "done"
    assert _check([(sum(rows[:done]) / sum(rows), label, end - t) for done, label, t in reports[:-1]]) >= 3


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
    assert labels[0].endswith(" · estimating"), labels
    assert any(" · about " in label and label.endswith("left") for label in labels[:-1]), labels
