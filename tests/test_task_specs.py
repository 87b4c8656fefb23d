"""Issue 25: every task is a TaskSpec, built-ins included. The planner and the job runner are
loops over specs: no module outside the specs names a task kind; each spec prices its own
model rows, says how it splits, and carries a version in every cache key it writes; a
``rows=True`` task gets the selected rows from the planner, not from its view."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from dashboard import jobs, planner, planning, tasks, views
from dashboard.config import Config
from dashboard.planning import PlanInput, Task, TaskSpec
from dashboard.server import create_app
from dashboard.state import default_state, normalize

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return create_app(Config(cache_dir=str(tmp_path_factory.mktemp("specs")), max_curves=100, warm=False))._wip_context


def _input(ctx, ws_id: str, **fields) -> PlanInput:
    ws = ctx.store.workspace(ws_id)
    state = normalize(ctx, {**default_state(), "ws": ws.id, **fields})[0]
    data = ctx.store.data(ws)
    return PlanInput(ws, state, len(data), max_curves=100, grid_budget=ctx.config.grid_budget, data=data)


def _every_spec() -> list[TaskSpec]:
    return [*tasks.BUILT_IN, *tasks.PARTS, *views.task_specs(), *(s for v in views.REGISTRY for s in v.parts)]


def test_the_runner_the_planner_and_the_callbacks_name_no_task_kind():
    """The kinds are the specs' business: a string equal to a kind in the planner, the job
    runner, the compute callbacks or the registry would be a special case creeping back."""
    kinds = {spec.kind for spec in _every_spec()}
    for relative in (
        "dashboard/planner.py",
        "dashboard/planning.py",
        "dashboard/resolve.py",
        "dashboard/jobs.py",
        "dashboard/callbacks/compute.py",
    ):
        tree = ast.parse((ROOT / relative).read_text())
        named = {
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in kinds
        }
        assert not named, f"{relative} names task kinds {sorted(named)}"
    source = (ROOT / "dashboard/views/__init__.py").read_text()
    assert not any(f'"{kind}"' in source for kind in kinds)


def test_the_generic_planner_names_no_view_and_no_pfi():
    """Issue 45, item 3: ``dashboard/planner.py`` (TaskSpec, plan, missing) knows no view and
    nothing of PFI: no name, attribute, import or string of its code (docstrings aside) says
    pfi, sfimp, repeats, pairs or a view's name; PFI's facts are registered from
    ``dashboard/pfi_plan.py``, and the row budgets live in ``dashboard/budgets.py``."""
    tree = ast.parse((ROOT / "dashboard/planner.py").read_text())
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and ast.get_docstring(node) is not None
    }
    named = {v.name for v in views.REGISTRY}
    said = []
    for node in ast.walk(tree):
        text = None
        if isinstance(node, ast.Name):
            text = node.id
        elif isinstance(node, ast.Attribute):
            text = node.attr
        elif isinstance(node, ast.alias):
            text = node.name
        elif isinstance(node, ast.ImportFrom):
            text = node.module or ""
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            text = node.value
        tokens = re.split(r"[^a-z0-9]+", (text or "").lower())
        if any(t.startswith(("pfi", "sfimp", "repeat", "pair")) or t in named for t in tokens if t):
            said.append(text)
    assert said == []
    assert "pfi_n_obs" in planner._FACTS and "via_pairs" in planner._FACTS  # PFI registered them itself


def test_kinds_are_unique_and_every_view_need_is_a_built_in_spec():
    kinds = [spec.kind for spec in _every_spec()]
    assert len(kinds) == len(set(kinds))
    assert views.needed_tasks() <= {spec.kind for spec in tasks.BUILT_IN}
    assert jobs.spec_for("pfi") is tasks.PFI
    with pytest.raises(KeyError):
        jobs.spec_for("no-such-kind")


def test_a_spec_needs_run_or_execute_and_a_known_models_rule():
    with pytest.raises(ValueError, match="needs run"):
        TaskSpec("nothing")
    with pytest.raises(ValueError, match="'all' or 'focus'"):
        TaskSpec("x", run=lambda *a: None, models="some")


def test_a_specs_version_is_in_every_key_it_writes_and_only_its_own(ctx):
    """Bumping one spec's version orphans its cached results, and no other spec's."""
    p = _input(ctx, "demo-x3", sfimp=True, obs=3)
    for spec in [*tasks.BUILT_IN, *views.task_specs()]:
        before = spec.planned(p)
        after = dataclasses.replace(spec, version=spec.version + 1).planned(_input(ctx, "demo-x3", sfimp=True, obs=3))
        assert before.tasks, spec.kind  # the state asks for every task
        old = [k for t in before.tasks for k in (t.key, *t.also)]
        new = [k for t in after.tasks for k in (t.key, *t.also)]
        assert len(old) == len(new) and not set(old) & set(new), spec.kind
    # and the split parts of a built-in spec carry it too (their keys from the spec)
    pfi_task = tasks.PFI.planned(p).tasks[0]
    bumped = dataclasses.replace(tasks.PFI, version=2)
    assert tasks.PFI.key("pfi_part", p.ws, p.focus, of="x") != bumped.key("pfi_part", p.ws, p.focus, of="x")
    parts = jobs.spec_for("pfi").parts(p.ws, pfi_task).parts
    assert [part.kind for part in parts[:1]] == ["sample"]  # the rows the others read
    assert all(part.key.startswith("pfi_part:") for part in parts[1:]) and len(parts) > 1


def test_a_rows_task_gets_the_selected_rows_from_the_planner(ctx):
    """``TaskSpec(rows=True)``: the view's params say nothing of rows; the planner adds the
    subgroup and the excluded rows of the state (and ``via_pairs`` when the bars come from
    the all-rows pairs), so the task computes on the rows PFI uses."""
    seen = {}

    def params(state, ws):
        seen.update(state)
        return {"n_repeats": 2}

    spec = TaskSpec("row-task", params, run=lambda *a, **k: None, models="focus", rows=True)
    p = _input(ctx, "demo-x3", subgroup="X3 == 0", exclude=["5", "9"])
    planned = spec.planned(p)
    (task,) = planned.tasks
    assert task.params == {"n_repeats": 2, "condition": "X3 == 0", "excluded": ["5", "9"]}
    assert "pfi_via_pairs" not in seen and "via_pairs" not in task.params  # small data: the subgroup's own PFI
    assert seen == p.state  # the params get the state as it is: the planner adds no key of its own
    assert planned.keys == {"row-task": {p.focus.name: task.key}}
    plain = dataclasses.replace(spec, rows=False).planned(p).tasks[0]
    assert plain.params == {"n_repeats": 2}


def test_a_declared_spec_prices_its_own_rows_and_the_default_is_one_pass(ctx):
    ws = ctx.store.workspace("demo-x3")
    data = ctx.store.data(ws)
    task = Task("ame", "k", ws.models[0].name, {})
    p = len(ws.model(task.model).features)
    plain = TaskSpec("ame", run=lambda *a: None)
    assert plain.estimate(ws, task, data) == [len(data)]
    priced = dataclasses.replace(plain, cost=lambda ws, task, data: [2 * len(data) * p])
    assert priced.estimate(ws, task, data) == [2 * len(data) * p]


def test_every_spec_prices_every_task_it_plans_and_its_parts(ctx):
    """The time-left estimate: each planned task and part has one positive row count per
    progress step, and the ICE/ICI pass one step per feature."""
    ctx_p = _input(ctx, "demo-diabetes", sfimp=True, obs=1, subgroup="bmi > 0")
    data = ctx_p.data
    planned = planning.plan(ctx_p, views.needed_specs())
    records = planned["tasks"]
    parts, joins = jobs.split(ctx_p.ws, records)
    kinds = {t["kind"] for t in records + parts + joins}
    assert {"profiles", "pfi", "sfimp", "profile_part", "pfi_part", "sfimp_part", "whatif"} <= kinds
    for record in records + parts + joins:
        task = Task.from_dict(record)
        steps = jobs.step_rows(ctx_p.ws, task, data)
        assert steps and all(isinstance(s, int) and s > 0 for s in steps), task.kind
        if task.kind == "profiles":
            assert len(steps) == len(ctx_p.ws.model(task.model).features)
    caveats = next(Task.from_dict(t) for t in records if t["kind"] == "pfi_groups")
    rows = caveats.params["n_obs"] or len(data)
    p = len(ctx_p.ws.model(caveats.model).features)
    assert jobs.step_rows(ctx_p.ws, caveats, data) == [
        min(rows, len(data)) * (p // 2) * caveats.params["n_repeats"] + min(rows, len(data))
    ]


def test_a_task_without_parts_is_one_part_and_a_split_task_is_joined(ctx):
    p = _input(ctx, "demo-diabetes", sfimp=True)
    records = [t.to_dict() for t in tasks.SFIMP.planned(p).tasks + tasks.PFI.planned(p).tasks]
    parts, joins = jobs.split(p.ws, records)
    assert len(joins) == len(records)
    assert {t["key"] for t in joins} == {t["key"] for t in records}
    assert all(set(t["params"]["parts"]) <= {part["key"] for part in parts} for t in joins)
    # a sampled SFIMP (30 players: its orderings drawn until the error is small) is one part
    wide = _input(ctx, "demo-cancer", sfimp=True)
    sampled = [t.to_dict() for t in tasks.SFIMP.planned(wide).tasks]
    assert jobs.split(wide.ws, sampled) == (sampled, [])
    # a declared spec (no split hook) is its own part
    performance = next(s for s in views.task_specs() if s.kind == "predictions")
    record = performance.planned(p).tasks[0].to_dict()
    assert jobs.split(p.ws, [record]) == ([record], [])
