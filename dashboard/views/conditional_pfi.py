"""PFI within the subgroup: all rows, the subgroup and its complement (Eq. 9, Sec. 6.1).

A feature's PFI for a model, rows and repetitions is one number on the page, so the all-rows
column is the Overview bars' own result on all rows (Eq. 8), read from the cache, not the ICI
curves' estimate of it (which differs by the permutations' noise and the curves' row sample).
The subgroup, complement and kept-rows columns are not what any bars compute (each row of the
group takes the feature's values of all rows, Sec. 6.1): they come from the ICI curves and are
headed so.
"""

from __future__ import annotations

import dataclasses

import pandas as pd
from dash import html

import compute

from .. import components, figures, ids, planning, tasks
from . import pfi as pfi_view
from .base import PROFILES, View, csv_download

INFO = "conditional-pfi-info"
KIND = "pfi_all_rows"  # the focus model's all-rows PFI bars, as this view reads them
NAME = "PFI within the subgroup"  # this view's method; the caveats' cs-PFI is "importance once the others are known"
CURVES = "from the ICI curves"  # the columns estimated from the curves, not from the bars' permutations
BARS = "PFI as the Overview bars on all rows"
ERROR = "all: ± standard error"  # the bars' whisker (``PermutationImportance.uncertainty``)


def _whole(p: planning.PlanInput) -> planning.PlanInput:
    """The state's plan input on all rows: no subgroup, nothing excluded (the Overview bars
    of the unselected page, with the state's model, repetitions and row budget)."""
    return dataclasses.replace(p, state={**p.state, "subgroup": "", "exclude": []})


def plan(p: planning.PlanInput, spec: planning.TaskSpec) -> planning.Planned:
    """One task for the focus model: a copy of its all-rows PFI bars (``derive``), keyed by
    the model, repetitions and row budget only, so every subgroup reads the one result. When
    the state's own bars are on other rows, the bars' all-rows task is planned before it
    (the built-in PFI task, so the number is computed once, as the Overview computes it)."""
    focus, whole = p.focus.name, _whole(p)
    bars = tasks.PFI.planned(whole)
    own = {t.key for t in tasks.PFI.planned(p).tasks}
    before = [t for t in bars.tasks if t.model == focus and t.key not in own]
    params = {"n_repeats": p.n_repeats, "n_obs": whole.pfi_n_obs[focus], "bars": bars.keys[tasks.PFI.kind][focus]}
    key = spec.key(spec.kind, p.ws, p.focus, seed=planning.SEED, **params)
    written = {k: k for t in before for k in (t.key, *t.also)}  # a state's plan names every key its job writes
    keys = {spec.kind: {focus: key}, f"{spec.kind}:bars": written}
    return planning.Planned(keys, [*before, planning.Task(spec.kind, key, focus, params)])


def derive(store, ws, task: planning.Task, data) -> bool:
    """The bars' all-rows result, copied under this view's key once it is cached (no model call)."""
    found = store.get(task.params["bars"])
    if found is None:
        return False
    store.put(task.key, found)
    return True


def run(model, X, y, ws, params, n_jobs):
    """Only if the bars' result was lost before ``derive`` ran: the same call on all rows
    (seed, loss, repetitions, row sample), so the same numbers."""
    return tasks.permutation_importance(model, X, y, ws, params, n_jobs)


TASK = planning.TaskSpec(
    KIND,
    run=run,
    models="focus",
    label="permutation importance on all rows",
    cost=lambda ws, task, data: [1],  # a copy: the bars' own task is priced where it is planned
    split=lambda ws, task: planning.Split([], task),  # after the parts: the bars' task is joined first
    plan=plan,
    derive=derive,
)


def table(inp) -> pd.DataFrame | None:
    """All rows' PFI (the Overview bars' result) and its standard error, then each group's
    PFI from the ICI curves, headed with what it is and its rows; None before both are cached."""
    summary = inp.summary
    whole = inp.results(KIND).get(inp.state["model"])
    if summary is None or whole is None:
        return None
    curves = summary.conditional_pfi(inp.mask, inp.state.get("exclude"))
    counts = curves.attrs["counts"]
    n = f"{whole.n_rows} of {whole.n_total}" if whole.sampled else f"{whole.n_rows}"
    columns = {
        f"all (n={n}): {BARS}": whole.importance,
        ERROR: whole.uncertainty,
    }
    for group in curves.columns.drop("all"):
        within = "PFI within" if group in ("subgroup", "complement") else "PFI"
        columns[f"{group} (n={counts[group]}): {within}, {CURVES}"] = curves[group]
    frame = pd.DataFrame(columns)  # every feature with bars (one without curves has no group's number)
    return frame.sort_values(frame.columns[0], ascending=False, kind="stable")


def info(inp, whole: compute.PermutationImportance) -> str:
    """One sentence on why the curves' columns are another estimate (none when there are none),
    and one on why the subgroup's column differs from the bars on a subgroup."""
    if inp.mask is None and not inp.state.get("exclude"):
        return ""
    summary = inp.summary
    n_curves = len(summary.rows) if summary is not None else 0
    text = (
        f"The all-rows column is the Overview bars' PFI on all rows ({whole.n_repeats} shuffles of "
        f"{whole.n_rows:,} rows); the other columns come from the ICI curves instead, each of their {n_curves:,} "
        "rows taking every value of the feature's grid in turn rather than one shuffled-in value, so they estimate "
        "PFI another way and can differ from the bars by about the all-rows standard error for that reason alone."
    )
    return f"{text} {WHY_THEY_DIFFER}" if inp.mask is not None else text


def render(ctx, inp) -> dict:
    frame = table(inp)
    if frame is None:
        return {"data": [], "columns": [], "info": ""}
    rows, cols = figures.table_data(frame.rename(index=inp.label), index_name="feature")
    for col in cols:  # the whisker to the digits the bars' hover writes it with ("± 7.86")
        if col["id"] == ERROR:
            col["format"] = {"specifier": ",.3~r"}
    return {"data": rows, "columns": cols, "info": info(inp, inp.results(KIND)[inp.state["model"]])}


# One line on why these numbers and the permutation bars (Overview) can disagree on a subgroup.
WHY_THEY_DIFFER = (
    "Why the subgroup's column can differ from the Overview bars on a subgroup: here each row of the subgroup "
    "takes the feature's values of all rows, so a feature that defines the subgroup (constant inside it) can "
    "still matter a lot; the bars shuffle the feature among the subgroup's own rows only, so such a feature "
    "gets 0 there."
)


def export_csv(ctx, inp):
    frame = table(inp)
    if frame is None:
        return None
    for name, pfi in inp.pfi.items():
        frame[f"{name}: PFI as the Overview bars on {inp.selection}"] = pfi.importance
        frame[f"{name}: ± standard error on {inp.selection}"] = pfi.uncertainty
    return csv_download(frame, "pfi.csv", index_label="feature")


def library(inp) -> dict:
    """All rows' PFI bars (``PermutationImportance.importance`` and ``uncertainty``) and each
    group's PFI from the curves (``ProfileSummary.conditional_pfi``, Eq. 9)."""
    frame = table(inp)
    return {} if frame is None else {str(c): frame[c] for c in frame.columns}


VIEW = View(
    name="conditional_pfi",
    section="subgroups",
    order=30,
    title=f"{NAME}: all rows, subgroup, complement",
    question="Do the features matter as much in the subgroup as in the rest?",
    method=(
        "All rows: permutation feature importance, Casalicchio et al. (2018), Eq. 8, the Overview bars' result. "
        f"{NAME} and its complement (and the rows left after exclusions): Eq. 9 and Sec. 6.1, the mean ICI "
        "integral over the group's rows, each row taking the feature's values of all rows; no new model calls."
    ),
    outputs={
        "data": (ids.PFI_TABLE, "data"),
        "columns": (ids.PFI_TABLE, "columns"),
        "info": (INFO, "children"),
    },
    render=render,
    body=lambda: [
        components.table(ids.PFI_TABLE),
        html.Div(id=INFO, className="help"),
        html.Div([html.Button("Export CSV", id=ids.EXPORT_PFI, className="button small")], className="panel-foot"),
    ],
    needs=frozenset({PROFILES}),
    tasks=(TASK,),
    exports={ids.EXPORT_PFI: export_csv},
    reads=frozenset({"ws", "model", "subgroup", "exclude", pfi_view.REPEATS, pfi_view.PFI_ALL}),
    library=library,
)
