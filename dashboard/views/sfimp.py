"""Shapley feature importance (Casalicchio et al. 2018, Eq. 10-11, Fig. 5a), on request."""

from __future__ import annotations

from dash import html

from .. import components, figures, ids, planning, tasks
from ..state import Event, bool_field
from .base import SFIMP, Select, View, empty

SFIMP_GRAPH = "sfimp-graph"  # clicking it selects the feature


def run_sfimp(value: bool) -> bool:
    """SFIMP on or off: off, later subgroups and data sets no longer compute it."""
    return not value


SFIMP_ON = bool_field("sfimp", events=(Event(ids.SFIMP_RUN, run_sfimp),))  # ``sfimp=1`` in the URL


def render(ctx, inp) -> dict:
    by_itself = tasks.sfimp_by_itself(inp.ws, len(inp.data))
    if not inp.state.get("sfimp") and not by_itself:
        cost = tasks.sfimp_rows(inp.ws, len(inp.data))
        return {
            "figure": empty(
                f"Shapley feature importance shares the model's performance out among the features, interactions "
                f"split fairly, where PFI counts an interaction once per feature. It costs about {cost:,} model "
                "rows here: press “Compute SFIMP”."
            ),
            "info": "",
            "button": "Compute SFIMP",
            "button_style": {},
        }
    sfimp = inp.sfimp
    # computed by itself (cheap): no button to press or to hide it with
    button, style = ("Compute SFIMP", {"display": "none"}) if by_itself else ("Hide SFIMP", {})
    if not sfimp:
        return {"figure": empty("Waiting for SFIMP…"), "info": "", "button": button, "button_style": style}
    info = "; ".join(
        f"{name}: {'exact' if s.exact else f'{s.n_orderings} orderings'}, {s.n_rows:,} model rows, "
        f"error {s.model_error:.4g} vs {s.baseline_error:.4g} with no feature"
        for name, s in sfimp.items()
    )
    sampled = [s for s in sfimp.values() if getattr(s, "sampled", False)]
    if sampled:
        first = sampled[0]
        info = (
            f"SFIMP on a seeded sample of {len(first.rows):,} of the {first.n_total:,} selected rows (to keep "
            f"within {planning.SFIMP_BUDGET:,} model rows per model): each error bar combines the Monte-Carlo "
            "error of the permutations and orderings with the sample's (each row's own Shapley values, their "
            "spread over the rows). 'Use all rows' (under the PFI bars) computes on every row. " + info
        )
    figure = figures.sfimp_figure(sfimp, selected=inp.feature, names=inp.names)
    return {"figure": figure, "info": info, "button": button, "button_style": style}


def library(inp) -> dict:
    """Each model's SFIMP bars and their standard errors (``compute.shapley_importance``)."""
    found: dict = {}
    for name, res in (inp.sfimp if inp.state.get("sfimp") else {}).items():
        found[f"{name}: SFIMP"], found[f"{name}: standard error"] = res.values, res.total_std_error
    return found


VIEW = View(
    name="sfimp",
    section="overview",
    order=20,
    title="Shapley feature importance (SFIMP)",
    question="How is each model's performance shared out among the features?",
    method=(
        "Shapley feature importance (SFIMP), Casalicchio et al. (2018), Eq. 10-11 and Fig. 5a: each feature's"
        " Shapley share of the drop in error the model achieves; computed on request (many model calls)."
    ),
    outputs={
        "figure": (SFIMP_GRAPH, "figure"),
        "info": (ids.SFIMP_INFO, "children"),
        "button": (ids.SFIMP_RUN, "children"),
        "button_style": (ids.SFIMP_RUN, "style"),
    },
    placeholder=lambda message: {"figure": empty(message), "info": "", "button": "Compute SFIMP", "button_style": {}},
    render=render,
    body=lambda: [
        components.graph(SFIMP_GRAPH, height=None, filename="sfimp"),
        html.Div(id=ids.SFIMP_INFO, className="help"),
    ],
    extra=lambda: html.Button("Compute SFIMP", id=ids.SFIMP_RUN, className="button small"),
    needs=frozenset({SFIMP}),
    reads=frozenset({"ws", "model", "feature", "subgroup", "exclude", "pfi_all"}),
    state=(SFIMP_ON,),
    selects=(Select(SFIMP_GRAPH, "feature"),),
    library=library,
)
