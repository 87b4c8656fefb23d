"""The selected observation's prediction as a sum of feature contributions (Shapley values).

Interventional Shapley values of the prediction (``compute.shapley_contributions``, the
coalition engine of SFIMP, Casalicchio et al. 2018, Sec. 5, on the value function of SHAP,
Lundberg & Lee 2017): the mean prediction over a seeded background sample plus one
contribution per raw column adds up to the prediction, in its own units (percentage
points of a class probability). Computed in the job for the selected observation of the
selected model; CIU (Främling 2022) explains the same row in the panel beside it.
"""

from __future__ import annotations

from dash import html

import compute

from .. import components, figures, planning
from . import whatif
from .base import ALL_FIELDS, PROFILES, View, csv_download, empty
from .selection import observation_text, sentence

GRAPH = "contributions-graph"
TABLE = "contributions-table"
INFO = "contributions-info"
EXPORT = "contributions-export"
KIND = "contributions"
N_BACKGROUND = 100
MAX_ROWS = 400_000  # model rows per explanation: about 2 s for a 30-feature gradient boosting
EXACT_PLAYERS = 12  # compute.shapley_contributions' exact_max_players: exact values up to this many inputs


def params(state: dict, ws) -> dict | None:
    """The task's parameters: the selected observation and its what-if edits, if any (none
    selected: nothing to plan)."""
    if state.get("obs") is None:
        return None
    found = {"obs": str(state["obs"]), "n_background": N_BACKGROUND}
    return {**found, "edit": dict(state["edit"])} if state.get("edit") else found


def contributions(model, X, y, ws, params, n_jobs):
    """The task (in the isolated job): the selected row's contributions, as edited."""
    row = planning.row_label(params["obs"], X.index)
    instance = row
    if params.get("edit"):
        instance = compute.apply_edits(X, X.loc[[row]], whatif.edits_for(X, params["edit"]))[1]
    return compute.shapley_contributions(
        model,
        X,
        instance,
        n_background=params["n_background"],
        output=ws.output,
        random_state=planning.SEED,
        tol=0.02,
        exact_max_players=EXACT_PLAYERS,
        max_rows=MAX_ROWS,
        n_jobs=n_jobs,
    )


TASK = planning.TaskSpec(
    KIND,
    params,
    contributions,
    models="focus",
    label="Shapley contributions of the selected row",
    cost=lambda ws, task, data: [cost(ws, task, data)],
)


def cost(ws, task, data) -> int:
    """Model rows of the explanation: every coalition of the model's inputs on each background
    row when there are at most EXACT_PLAYERS of them (exact Shapley values), else the row
    budget the sampled orderings may use."""
    players = len(ws.model(task.model).features)
    if players <= EXACT_PLAYERS:
        return (2**players - 1) * min(task.params["n_background"], len(data)) + 1  # the full coalition: the row itself
    return MAX_ROWS


def render(ctx, inp) -> dict:
    state = inp.state
    found = inp.results(KIND).get(state["model"])
    if state.get("obs") is None or found is None:  # the default observation comes with the curves
        waiting = "Computing the contributions…" if state.get("obs") is not None else "Waiting for the ICE/ICI pass…"
        return {"figure": empty(waiting), "data": [], "columns": [], "info": ""}
    res: compute.ShapleyContributions = found
    row = planning.row_label(state["obs"], inp.data.index)
    values = inp.data.loc[row].copy()
    edit = whatif.edits_for(inp.data, state.get("edit") or {})
    for column, value in edit.items():  # the edited row (a level as its text: shown as such)
        values[column] = value
    shown = {name: figures.value_text(values[cols[0]]) if len(cols) == 1 else "…" for name, cols in res.players.items()}
    labels = {name: f"{inp.label(name)} = {value}" for name, value in shown.items()}
    classifier = res.output is not None
    scale, unit = (100.0, "pp") if classifier else (1.0, "")
    what = (
        f"probability of {inp.class_label(figures.level_label(res.output))}"
        if classifier
        else f"predicted {inp.ws.target}"
    )
    fig = figures.waterfall_figure(
        res.values,
        labels=labels,
        base=res.base_value,
        prediction=res.prediction,
        title=f"Why row {row}{' (as edited)' if edit else ''} gets its {what}",
        subtitle=f"{state['model']}: mean over {res.n_background} background rows plus each feature's contribution",
        scale=scale,
        unit=unit,
    )
    frame = res.to_frame()
    frame.insert(0, "value", [shown[k] for k in frame.index])
    frame.index = [inp.label(k) for k in frame.index]  # the features as people read them
    frame = frame.rename(
        columns={"contribution": f"contribution{' (pp)' if unit else ''}", "std_error": "± standard error"}
    )
    if scale != 1.0:  # a probability in percentage points (x 1.0 changes no number)
        frame.iloc[:, 1:] = frame.iloc[:, 1:] * scale
    rows, cols = figures.table_data(frame, index_name="feature", digits=3)
    how = "exact over all coalitions" if res.exact else f"{res.n_orderings:,} sampled feature orderings"
    info = (
        f"{sentence(observation_text(state, row))}"
        f"{' as edited' if edit else ''}: {what} {figures.prediction_text(res.prediction * scale, unit)} = mean "
        f"{figures.prediction_text(res.base_value * scale, unit)}"
        f" over {res.n_background} background rows + the contributions ({how}; the standard errors come from the "
        f"background sample). Each contribution compares with that mean prediction over the rows: + raises this "
        f"row above it, − lowers it (interventional Shapley values: a feature's average effect on this prediction "
        f"when it joins the others in every order). Contextual influence (below) compares with another baseline."
    )
    return {"figure": fig, "data": rows, "columns": cols, "info": info}


def export_csv(ctx, inp):
    found = inp.results(KIND).get(inp.state["model"])
    if found is None:
        return None
    return csv_download(found.to_frame(), f"contributions-row-{inp.state['obs']}.csv", index_label="feature")


def library(inp) -> dict:
    """The row's Shapley contributions, the mean prediction and the prediction, in the
    page's units (``compute.shapley_contributions``)."""
    res = inp.results(KIND).get(inp.state["model"]) if inp.state.get("obs") is not None else None
    if res is None:
        return {}
    scale = 100.0 if res.output is not None else 1.0
    return {"contribution": res.values * scale, "mean prediction": res.base_value * scale}


VIEW = View(
    name="contributions",
    section="observation",
    order=85,
    title="Why this prediction: feature contributions",
    question="Why does this row get its prediction? One contribution per feature, in the prediction's units.",
    method=(
        "Interventional Shapley values of the prediction (Lundberg & Lee 2017) with the coalition engine of "
        "SFIMP (Casalicchio et al. 2018, Sec. 5): the mean prediction over a seeded background sample plus "
        "the contributions adds up to the prediction."
    ),
    outputs={
        "figure": (GRAPH, "figure"),
        "data": (TABLE, "data"),
        "columns": (TABLE, "columns"),
        "info": (INFO, "children"),
    },
    render=render,
    body=lambda: [
        components.graph(GRAPH, height=None, filename="contributions"),
        html.Div(id=INFO, className="help"),
        components.table(TABLE),
        html.Div([html.Button("Export CSV", id=EXPORT, className="button small")], className="panel-foot"),
    ],
    tasks=(TASK,),
    exports={EXPORT: export_csv},
    needs=frozenset({PROFILES}),  # the default observation comes with the curves
    reads=ALL_FIELDS,
    library=library,
)
