"""Which features act together? Friedman's H statistics (``compute.interaction_strength``):
per feature against all others (bars), per pair (a matrix) and the selected pair's 2-D
partial dependence (a heatmap). The pair is part of the state (``pair`` in the URL), set by
the dropdown or a click on a cell of the matrix; it only chooses which computed pair to
draw: the task's pairs are planned from the state's rows and the budget alone."""

from __future__ import annotations

import json
from math import comb

import pandas as pd
from dash import dcc, html

import compute
from compute.findings import possessive
from compute.sampling import distinct_up_to

from .. import components, figures, planning
from ..figures.heatmaps import pair_key, pair_matrix_figure, pd2_figure
from ..figures.theme import esc
from ..state import Field
from .base import View, empty
from .engine_note import engine_note, joined

KIND = "interactions"
N_OBS = 200  # rows explained (and averaged over): the statistic costs n^2 model rows per feature
GRID = 12  # points per feature of the pair heatmap
TOP = 6  # pairs of the 6 features interacting most (15 pairs)
BARS = "interactions-graph"
MATRIX = "interactions-matrix"
PD2 = "interactions-pd2"
PAIR_SELECT = "interactions-pair"
INFO = "interactions-info"


def _pair(raw) -> str:
    """A pair as canonical JSON text (two labels of at most 200 characters), else ValueError."""
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except RecursionError:  # nested past the parser's limit: unreadable like any other text
        raise ValueError("not a pair of feature names") from None
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(v, str) and 0 < len(v) <= 200 for v in value)
        or value[0] == value[1]
    ):
        raise ValueError("not a pair of feature names")
    return pair_key(*value)


def _clean_pair(raw) -> str | None:
    try:
        return _pair(raw)
    except (ValueError, TypeError):
        return None


# the selected pair: None for the strongest (the dropdown then shows it as its placeholder); a
# pair the result does not hold draws the strongest
PAIR = Field("pair", None, _clean_pair, _pair, str, control=(PAIR_SELECT, "value"), clicks=((MATRIX, "clickData"),))


def params(state: dict, ws) -> dict | None:
    """The task's parameters from the state alone (the planner adds the rows: ``rows=True``)."""
    if len(ws.features) < 2:
        return None
    return {"n_obs": N_OBS, "grid_size": GRID, "top": TOP}


def cost(ws, task, data) -> list[int]:
    """Model rows: per feature its distinct values (at most n) x n rows, and per pair at most
    its grid's value pairs x n plus n x n (the time-left estimate reads this: counting n x n
    for a feature of few values made it 3x too long on large data)."""
    n = min(len(data), task.params["n_obs"])
    features = list(ws.model(task.model).features)
    # distinct values up to n, read off the first rows when they hold more
    distinct = [min(n, distinct_up_to(data[f], n)) if f in data.columns else n for f in features]
    pairs = comb(min(len(features), task.params["top"]), 2)
    return [n * sum(distinct) + pairs * (n + min(n, task.params["grid_size"] ** 2)) * n]


def run(model, X, y, ws, params, n_jobs, *, inside=None):
    """The task (in the isolated job): H statistics on a seeded sample of the selected rows."""
    chosen = X if inside is None else X[inside]
    return compute.interaction_strength(
        model,
        chosen,
        n_obs=params["n_obs"],
        grid_size=params["grid_size"],
        top=params["top"],
        output=ws.output,
        random_state=planning.SEED,
        n_jobs=n_jobs,
    )


TASK = planning.TaskSpec(
    KIND, params, run, models="focus", label="which features act together (H statistics)", rows=True, cost=cost
)


def _pairs(result: compute.InteractionStrength) -> list[tuple]:
    """The result's pairs as (feature_1, feature_2, h2, h), strongest first."""
    pairs = result.pairs
    return list(zip(pairs["feature_1"], pairs["feature_2"], pairs["h2"], pairs["h"]))


def chosen_pair(result: compute.InteractionStrength, state: dict) -> tuple | None:
    """The state's pair when the result holds it, else the strongest pair."""
    if result.pairs.empty:
        return None
    pairs = _pairs(result)
    by_text = {pair_key(a, b): (a, b) for a, b, _, _ in pairs} | {pair_key(b, a): (a, b) for a, b, _, _ in pairs}
    return by_text.get(state.get("pair") or "", pairs[0][:2])


def _sample_text(result: compute.InteractionStrength, inp) -> str:
    if not result.sampled:
        return f"{inp.state['model']}; {inp.selection}"
    return f"{inp.state['model']}; a seeded sample of {result.n_rows:,} of {inp.selection}"


def reading(result: compute.InteractionStrength, pair: tuple | None, label=str) -> str:
    """One line: the strongest pair and what H² and h say, or that nothing interacts;
    ``label`` writes a feature as people read it."""
    if pair is None:
        return ""
    strongest = result.pairs.iloc[0]
    if strongest["h2"] < 0.05:
        share = "1 %" if strongest["h2"] < 0.01 else f"{strongest['h2']:.0%}"
        return (
            f"The model is close to additive: no pair's joint effect is more than {share} interaction, so "
            "each feature's curve tells its story alone."
        )
    a, b = label(strongest["feature_1"]), label(strongest["feature_2"])
    return (
        f"{a} and {b} act together most: {strongest['h2']:.0%} of their joint effect on the prediction is "
        f"interaction (H² = {figures.shown_number(strongest['h2'], 3)}; its size h = "
        f"{figures.shown_number(strongest['h'], 3)} in prediction units), so "
        f"{possessive(a)} effect depends on {b}. Look at their curves on subgroups of {b} (or {a})."
    )


def render(ctx, inp) -> dict:
    result = inp.results(KIND).get(inp.state["model"])
    if result is None:
        return _empty("Measuring which features act together…")
    pair = chosen_pair(result, inp.state)
    unit = "predicted probability" if result.output is not None else "prediction"
    sample = _sample_text(result, inp)
    overall = result.overall
    hover = {
        f: f"{esc(inp.label(f))}<br>H² = {h2:.3g} (share of its effect that is interaction)<br>h = {h:.3g}"
        for f, h2, h in zip(overall.index, overall["h2"], overall["h"])
    }
    bars = figures.bar_figure(
        result.features,
        title="How much of each feature's effect is interaction with the others",
        x_title="H² (0: acts alone, 1: only together with others)",
        uirevision="interactions",
        name="H²",
        selected=inp.feature,
        hover=hover,
        subtitle=sample,
        names=inp.names,
    )
    # on the same 0-1 scale as the matrix, at least to 0.1: 0.03 looks small
    bars.layout.xaxis.range = [0, max(0.1, 1.1 * float(result.features.max()))]
    options = [
        {"label": f"{inp.label(a)} × {inp.label(b)}  (H² {h2:.2f})", "value": pair_key(a, b)}
        for a, b, h2, _ in _pairs(result)
    ]
    if pair is None:
        return {
            "bars": bars,
            "matrix": empty("One feature: no pair."),
            "pd2": empty("One feature: no pair."),
            "options": [],
            "placeholder": "",
            "info": engine_note(result),
        }
    surface = result.pd2(*pair)
    order = [f for f in result.overall.index]  # the data's column order
    return {
        "bars": bars,
        "matrix": pair_matrix_figure(
            result.pairs, selected=pair, order=order, subtitle=f"{sample}; click a cell to draw it", names=inp.names
        ),
        "pd2": pd2_figure(
            surface,
            value_title=f"average {unit}"
            + (f" of {inp.class_label(result.output)}" if result.output is not None else ""),
            subtitle=f"{sample}; H² = {figures.shown_number(_h2(result, pair), 3)}",
            names=inp.names,
        ),
        "options": options,
        # the pair drawn, when the state names none (or one this result does not hold)
        "placeholder": f"{inp.label(pair[0])} × {inp.label(pair[1])}",
        "info": joined(reading(result, pair, inp.label), engine_note(result)),
    }


def _h2(result: compute.InteractionStrength, pair: tuple) -> float:
    found = {(a, b): h2 for a, b, h2, _ in _pairs(result)}
    return float(found.get(tuple(pair), found.get((pair[1], pair[0]), float("nan"))))


def _empty(message: str) -> dict:
    return {
        "bars": empty(message),
        "matrix": empty(message),
        "pd2": empty(message),
        "options": [],
        "placeholder": "",
        "info": "",
    }


def library(inp) -> dict:
    """H² per feature and per pair (``compute.interaction_strength``)."""
    result = inp.results(KIND).get(inp.state["model"])
    if result is None:
        return {}
    pairs = pd.Series(
        result.pairs["h2"].to_numpy(),
        index=[f"{a} × {b}" for a, b in result.pairs[["feature_1", "feature_2"]].itertuples(index=False)],
    )
    return {"H² per feature": result.features, "H² per pair": pairs}


VIEW = View(
    name="interactions",
    section="overview",
    order=16,
    title="Which features act together?",
    question="Does a feature's effect depend on another feature, and on which?",
    method=(
        "Friedman & Popescu (2008), 'Predictive learning via rule ensembles', Sec. 8.1: H²_jk (Eq. 44) is the share "
        "of the variance of the pair's centred 2-D partial dependence not explained by the sum of their 1-D partial "
        "dependences; H²_j compares the prediction with the feature's partial dependence plus that of all the "
        "others. Partial dependences are evaluated at, and averaged over, a seeded sample of 200 of the selected "
        "rows (the statistic costs rows² model rows per feature and per pair); pairs of the 6 features "
        "interacting most. h: the same gap unnormalised, in prediction units (the hstats package's proposal)."
    ),
    outputs={
        "bars": (BARS, "figure"),
        "matrix": (MATRIX, "figure"),
        "pd2": (PD2, "figure"),
        "options": (PAIR_SELECT, "options"),
        "placeholder": (PAIR_SELECT, "placeholder"),
        "info": (INFO, "children"),
    },
    placeholder=_empty,
    render=render,
    body=lambda: [
        html.Div(id=INFO, className="help"),
        components.graph(BARS, height=None, filename="interaction-strength"),
        components.graph(MATRIX, height=None, filename="interaction-pairs"),
        components.graph(PD2, height=None, filename="pair-partial-dependence"),
    ],
    extra=lambda: html.Div(  # the label beside its dropdown, tied by id (a wrapping label would name its first input)
        [
            html.Label("pair", htmlFor=PAIR_SELECT),
            dcc.Dropdown(id=PAIR_SELECT, options=[], clearable=False, style={"width": "260px"}),
        ],
        style={"display": "flex", "alignItems": "center", "gap": "6px"},
    ),
    tasks=(TASK,),
    reads=frozenset({"ws", "model", "feature", "subgroup", "exclude", "pair"}),
    state=(PAIR,),
    library=library,
)
