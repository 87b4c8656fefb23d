"""What-if: change the selected observation's values and see its prediction, curve and CIU move.

The edited values are part of the drill-down state (``edit`` in the URL, cleaned against the
data by ``planning.clean_edits``), so a what-if is shared by its link. The task runs
``compute.what_if`` in the isolated job: in one prediction pass the row as it is and as
edited, the ICE curve of both over every feature's grid (Goldstein et al. 2015) and their
CIU (Främling 2022, Eq. 6 and 8) read off those curves. The contributions view explains the
edited row as well (its task takes the same edits).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd
from dash import dcc, html

import compute
from compute.sampling import is_categorical

from .. import components, figures, ids, labels, planning, predictions
from .base import ALL_FIELDS, PROFILES, Lru, View, csv_download, empty
from .selection import observation_text

GRAPH = "whatif-graph"
CIU_GRAPH = "whatif-ciu-graph"
FORM = "whatif-form"
INFO = "whatif-info"
EXPORT = "whatif-export"
KIND = "whatif"
GRID = 50  # grid points of a numeric feature's curve
GRIDS_KIND = "whatif_grids"  # the cache key's kind of the grids kept for a data set and model
_COLUMNS = Lru(64)  # per data set (its checksum) and column: its levels, or whether whole and its range


def params(state: dict, ws) -> dict | None:
    """The task's parameters: the selected observation and its (cleaned) edits."""
    if state.get("obs") is None:
        return None
    return {"obs": str(state["obs"]), "edit": dict(state.get("edit") or {}), "grid": GRID}


def edits_for(X: pd.DataFrame, edit: dict) -> dict:
    """The state's edits (keyed by column text) keyed by the data's column labels."""
    return {col: edit[str(col)] for col in X.columns if str(col) in (edit or {})}


def what_if(model, X, y, ws, params, n_jobs, *, out_range=None, grids=None):
    """The task (in the isolated job): the row as it is and as edited; ``out_range``: CIU's
    output range when known (else a pass over every row gives it); ``grids``: the features'
    grids when kept (else built from X)."""
    row = planning.row_label(params["obs"], X.index)
    return compute.what_if(
        model,
        X,
        row,
        edits_for(X, params["edit"]),
        grid=params["grid"],
        output=ws.output,
        n_jobs=n_jobs,
        out_range=out_range,
        grids=grids,
    )


def execute(job, task: planning.Task, model) -> None:
    """The task, with CIU's output range off the predictions on every row when cached (the
    what-if then predicts only its two rows' curves, never every row again) and the grids
    kept for the data set (:data:`GRIDS`), read by the what-if of every row."""
    job.say(f"{task.model}: {TASK.label}", 0)
    X = job.X(task.model)
    every_row = predictions.every_row_key(job.ws, job.ws.model(task.model)) if job.ws.task == "regression" else None
    out_range = predictions.known_output_range(job, every_row, len(X))
    grids = kept_grids(job, task, X)
    found = what_if(model, X, job.y, job.ws, task.params, job.n_jobs, out_range=out_range, grids=grids)
    job.store.put(task.key, found)


def kept_grids(job, task: planning.Task, X: pd.DataFrame) -> dict | None:
    """The what-if's grids of the model's features on this data set, as the grids task
    (:data:`GRIDS`, planned with the curves) keeps them; None when the cache does not hold
    them (the what-if then builds its own, ``compute.what_if_grids``: 4.7 s at 2,000,000 x
    100, and the grids task of the state's job keeps them)."""
    found = job.store.get(grids_key(job.ws, task.model, task.params["grid"]))
    return found if isinstance(found, dict) and list(found) == list(X.columns) else None


def grids_key(ws, model: str, grid: int, spec: planning.TaskSpec | None = None) -> str:
    """The cache key of the grids kept for a data set and model (the data's hash in it)."""
    return (spec or GRIDS).key(GRIDS_KIND, ws, ws.model(model), grid=grid)


# --- the grids, built in the first round (they do not depend on the row) ----------------------
#: Features per part of a split job's grids (each part reads its features' columns alone).
GRIDS_BLOCK = 10


def _grids_plan(p: planning.PlanInput, spec: planning.TaskSpec) -> planning.Planned:
    """The focus model's grids, planned with the curves: the default row's what-if (planned
    once the curves name it) then finds them, and a split job builds them in parts."""
    entry = p.focus
    key = grids_key(p.ws, entry.name, GRID, spec)
    task = planning.Task(GRIDS_KIND, key, entry.name, {"grid": GRID})
    return planning.Planned({GRIDS_KIND: {entry.name: key}}, [task])


def _grids_cost(ws, task, data) -> list[int]:
    """The whole task counted as one prediction per row (a part: its share of the features):
    sorting every column costs about what a tree model's prediction of every row does."""
    features = task.params.get("features") or ws.model(task.model).features
    return [int(ws.n_rows) * len(features) // max(1, len(ws.model(task.model).features))]


def _grids_split(ws, task: planning.Task) -> planning.Split:
    """Parts of :data:`GRIDS_BLOCK` features, each reading their columns alone (by row
    groups, on a worker that holds no data set), joined in the features' order."""
    features = list(ws.model(task.model).features)
    parts = []
    for start in range(0, len(features), GRIDS_BLOCK):
        block = features[start : start + GRIDS_BLOCK]
        key = GRIDS.key(GRIDS_PART.kind, ws, ws.model(task.model), of=task.key, features=[str(f) for f in block])
        parts.append(planning.Task(GRIDS_PART.kind, key, task.model, {**task.params, "features": block, "columns": 1}))
    join = planning.Task(task.kind, task.key, task.model, {**task.params, "parts": [t.key for t in parts]})
    return planning.Split(parts, join)


def _grids_execute(job, task: planning.Task, model) -> None:
    """Every feature's grid (``compute.what_if_grids``), or the join of a split job's parts
    (a part the cache no longer holds built again here)."""
    job.say(f"{task.model}: {GRIDS.label}", 0)
    features = list(job.ws.model(task.model).features)
    found: dict = {}
    for key in task.params.get("parts") or []:
        part = job.store.get(key)
        if isinstance(part, dict):
            found.update(part)
    missing = [f for f in features if f not in found]
    if missing:
        found.update(compute.what_if_grids(job.X(task.model)[missing], task.params["grid"]))
    job.store.put(task.key, {f: found[f] for f in features})


def _grids_part_execute(job, task: planning.Task, model) -> None:
    """A block of features' grids, each off its column over every row (:meth:`Job.column`)."""
    job.say(f"{task.model}: {GRIDS.label}", 0)
    columns = pd.DataFrame({f: job.column(f) for f in task.params["features"]})
    job.store.put(task.key, compute.what_if_grids(columns, task.params["grid"]))


def cost(ws, task, data) -> list[int]:
    """Model rows: one curve of GRID points per feature for the row as it is and as edited,
    and (a regressor) CIU's output range over every row (a classifier's is 0 to 1, no rows)."""
    output_range = len(data) if ws.task == "regression" else 0
    return [2 * GRID * len(ws.model(task.model).features) + 2 + output_range]


TASK = planning.TaskSpec(
    KIND,
    params,
    what_if,
    models="focus",
    label="what-if for the selected row",
    cost=cost,
    quick=True,
    execute=execute,
)
GRIDS = planning.TaskSpec(
    GRIDS_KIND,
    models="focus",
    label="what-if grids of every feature",
    cost=_grids_cost,
    split=_grids_split,
    plan=_grids_plan,
    execute=_grids_execute,
)
GRIDS_PART = planning.TaskSpec(
    "whatif_grids_part",
    label=GRIDS.label,
    cost=_grids_cost,
    execute=_grids_part_execute,
    reads_rows=True,  # its features' columns alone (params["columns"])
)


class _About(NamedTuple):
    """A column as the form shows it: its levels, or a number box (whole numbers or not, the
    hint of its range)."""

    kind: str  # "levels" or "number"
    levels: list
    integer: bool = False
    hint: str = ""


def _column(data: pd.DataFrame, feature) -> _About:
    """("levels", its levels as text, sorted) of a categorical column, else ("number",
    whether it holds whole numbers, its range as text)."""
    column = data[feature]
    if is_categorical(column):
        return _About("levels", sorted({str(v) for v in column.dropna().unique()}))
    hint = (
        f"{figures.value_text(column.min())} to {figures.value_text(column.max())}"
        if column.notna().any()
        else "no values in these rows"
    )
    return _About("number", [], bool(pd.api.types.is_integer_dtype(column)), hint)


def _field(data: pd.DataFrame, feature, row, edit: dict, label: str | None = None, data_id=None) -> html.Div:
    """One feature's input: a number box (whole numbers for an integer column) or a list of
    the levels found in the data; an edited field says what the row had. ``label``: the
    feature as people read it (its id keeps the column name); ``data_id``: names the data
    (the workspace and its checksum), under which each column's levels and range are kept."""
    about = (
        _column(data, feature) if data_id is None else _COLUMNS.get((data_id, feature), lambda: _column(data, feature))
    )
    original = data.at[row, feature]
    key = str(feature)
    edited = key in edit
    field_id = {"type": ids.WHATIF_VALUE, "column": key, "row": str(row)}
    control: dcc.Dropdown | dcc.Input
    if about.kind == "levels":
        levels = about.levels
        value = edit.get(key, None if pd.isna(original) else str(original))
        control = dcc.Dropdown(
            id=field_id, options=[{"label": v, "value": v} for v in levels], value=value, clearable=False
        )
        hint = f"{len(levels)} levels"
    else:
        integer, hint = about.integer, about.hint
        number = None if pd.isna(original) else (int(original) if integer else float(original))
        value = edit.get(key, number)
        control = dcc.Input(
            id=field_id,
            type="number",
            value=value,
            step=1 if integer else "any",
            debounce=True,
            className="whatif-number",
        )
    parts: list = [html.Label(label or key, title=key), control, html.Div(hint, className="whatif-hint")]
    if edited:
        parts.insert(1, html.Span(f"was {figures.value_text(original)}", className="whatif-was"))
    return html.Div(parts, className="whatif-field edited" if edited else "whatif-field")


@dataclass(frozen=True)
class Units:
    """How predictions are shown: multiplied by ``scale``, changes in ``unit``, titled ``what``."""

    scale: float
    unit: str
    what: str


def _units(ws, output=None) -> Units:
    """Probabilities in % with their class named (the workspace's explained class, else the
    class the result says it explains); a regressor's prediction in its own units."""
    output = ws.output if ws.output is not None else output
    if output is not None:
        return Units(100.0, "pp", f"probability of {labels.class_label(ws, figures.level_label(output))} (%)")
    return Units(1.0, "", f"predicted {ws.target}")


def render(ctx, inp) -> dict:
    state = inp.state
    if state.get("obs") is None:  # the default observation comes with the curves
        blank = empty("Waiting for the ICE/ICI pass…")
        return {"form": [], "figure": blank, "ciu": blank, "info": "", "reset_style": {"display": "none"}}
    data, edit = inp.data, state.get("edit") or {}
    row = planning.row_label(state["obs"], data.index)
    features = list(inp.ws.model(state["model"]).features)
    form = [_field(data, f, row, edit, inp.label(f), (inp.ws.id, inp.ws.data_sha)) for f in features]
    reset_style: dict = {} if edit else {"display": "none"}
    found = inp.results(KIND).get(state["model"])
    if found is None:
        waiting = empty("Computing the what-if…")
        return {"form": form, "figure": waiting, "ciu": waiting, "info": "", "reset_style": reset_style}
    res: compute.WhatIf = found
    units = _units(inp.ws, res.output)
    scale, unit, what = units.scale, units.unit, units.what
    feature = state["feature"]
    changes = ", ".join(
        f"{inp.label(c)} {figures.value_text(res.values.loc[c, 'original'])} → {figures.value_text(v)}"
        for c, v in res.edits.items()
    )
    subtitle = f"{state['model']}, row {row}" + (f" with {changes}" if changes else " (no value changed yet)")
    flat = _no_curve(res.grids[feature], inp.label(feature))
    figure = (
        empty(flat)
        if flat
        else figures.whatif_figure(
            res.grids[feature],
            res.curves[feature],
            (
                (res.values.loc[feature, "original"], res.original_prediction),
                (res.values.loc[feature, "edited"], res.prediction),
            ),
            categorical=res.categorical[feature],
            feature=inp.label(feature),
            title=f"How the prediction for row {row} moves with {inp.label(feature)}",
            subtitle=subtitle,
            y_title=what,
            scale=scale,
            percent=unit == "pp",
        )
    )
    ciu = figures.ciu_figure(
        res.ciu,
        title=f"CIU of row {row}" + (" as edited" if res.edits else ""),
        subtitle="bars: as edited; open markers: before the edit" if res.edits else "",
        reference=res.original_ciu if res.edits else None,
        names=inp.names,
    )
    before, after = res.original_prediction * scale, res.prediction * scale

    text = figures.prediction_text  # a probability in %, its change in pp

    named = observation_text(state, row)
    said = what.removesuffix(" (%)")  # the axis title's unit: the numbers carry theirs
    if res.edits:
        info = (
            f"{said[0].upper()}{said[1:]} of {named}: {text(before, unit)} → {text(after, unit)} "
            f"({text(res.change * scale, unit, '+')}) with {changes}. The contributions panel explains the edited row; "
            "this page's link keeps the edit."
        )
    else:
        info = (
            f"{said[0].upper()}{said[1:]} of {named}: {text(before, unit)}. Change a value below (press Enter "
            "or leave the box) to see the prediction, the curve and CIU move; click a curve or a table row to "
            "choose another row. Numbers are kept within the range observed in the data."
        )
    return {"form": form, "figure": figure, "ciu": ciu, "info": info, "reset_style": reset_style}


def _no_curve(grid: np.ndarray, label: str) -> str:
    """Why a feature has no what-if curve: it holds no values (all missing) or one value in
    the data; "" when it has one."""
    known = [v for v in grid if not (v is None or (isinstance(v, float) and np.isnan(v)))]
    if not known:
        return f"{label} holds no values in these rows (all missing), so it has no curve: choose another feature."
    if len(grid) < 2:
        return f"{label} holds one value ({figures.value_text(known[0])}) in these rows, so it has no curve."
    return ""


def export_csv(ctx, inp):
    found = inp.results(KIND).get(inp.state["model"])
    if found is None:
        return None
    frame = found.to_frame()
    frame.loc["(prediction)", ["original", "edited"]] = [found.original_prediction, found.prediction]
    return csv_download(frame, f"what-if-row-{inp.state['obs']}.csv")


def library(inp) -> dict:
    """The row's curves over the feature as it is and as edited, its predictions (in the
    page's units: percent for a probability) and CIU as edited (``compute.what_if``)."""
    res = inp.results(KIND).get(inp.state["model"]) if inp.state.get("obs") is not None else None
    if res is None:
        return {}
    scale, feature = _units(inp.ws, res.output).scale, inp.state["feature"]
    curves = np.asarray(res.curves[feature], dtype=float)
    drawn = {} if _no_curve(res.grids[feature], str(feature)) else {"curve before": curves[0] * scale}
    if drawn:
        drawn["curve as edited"] = curves[1] * scale
    return {
        **drawn,
        "prediction": res.prediction * scale,
        "prediction before": res.original_prediction * scale,
        "CI": res.ciu["CI"],
    }


VIEW = View(
    name="whatif",
    section="observation",
    order=83,
    title="What if this observation were different?",
    question="What if this row's values were different?",
    method=(
        "The edited row is predicted again in the isolated job: its prediction, its ICE curve for the chosen "
        "feature and its contextual importance and utility (Främling 2022, Eq. 6 and 8) before and after the "
        "edit."
    ),
    outputs={
        "form": (FORM, "children"),
        "figure": (GRAPH, "figure"),
        "ciu": (CIU_GRAPH, "figure"),
        "info": (INFO, "children"),
        "reset_style": (ids.WHATIF_RESET, "style"),
    },
    render=render,
    body=lambda: [
        html.Div(id=INFO, className="help whatif-info"),
        html.Div(id=FORM, className="whatif-form"),
        html.Div(
            [
                html.Button("Reset to the row's values", id=ids.WHATIF_RESET, className="button small"),
                html.Button("Export CSV", id=EXPORT, className="button small"),
            ],
            className="panel-foot",
        ),
        dcc.Store(id=ids.WHATIF_EDIT),
        html.Div(
            [
                components.graph(GRAPH, height=None, filename="what-if"),
                components.graph(CIU_GRAPH, height=None, filename="what-if-ciu"),
            ],
            className="pair",
        ),
    ],
    placeholder=lambda message: {
        "form": [],
        "figure": empty(message),
        "ciu": empty(message),
        "info": "",
        "reset_style": {"display": "none"},
    },
    tasks=(GRIDS, TASK),  # the grids first: a what-if in the same job then finds them
    parts=(GRIDS_PART,),
    wide=True,
    exports={EXPORT: export_csv},
    needs=frozenset({PROFILES}),  # the default observation comes with the curves
    reads=ALL_FIELDS,
    library=library,
)
