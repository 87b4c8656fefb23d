"""Shapley feature importance (Casalicchio et al. 2018, Eq. 10-11, Fig. 5a), on request."""

from __future__ import annotations

from dash import html

from .. import components, figures, ids, planning
from .base import SFIMP, Select, View, empty

SFIMP_GRAPH = "sfimp-graph"  # clicking it selects the feature


def render(ctx, inp) -> dict:
    if not inp.state.get("sfimp"):
        return {
            "figure": empty("Press “Compute SFIMP” (it costs many model calls)."),
            "info": "",
            "button": "Compute SFIMP",
        }
    sfimp = inp.sfimp
    if not sfimp:
        return {"figure": empty("Waiting for SFIMP…"), "info": "", "button": "Hide SFIMP"}
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
    return {"figure": figures.sfimp_figure(sfimp, selected=inp.feature), "info": info, "button": "Hide SFIMP"}


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
    },
    placeholder=lambda message: {"figure": empty(message), "info": "", "button": "Compute SFIMP"},
    render=render,
    body=lambda: [
        components.graph(SFIMP_GRAPH, height=None, filename="sfimp"),
        html.Div(id=ids.SFIMP_INFO, className="help"),
    ],
    extra=lambda: html.Button("Compute SFIMP", id=ids.SFIMP_RUN, className="button small"),
    needs=frozenset({SFIMP}),
    reads=frozenset({"ws", "model", "feature", "subgroup", "exclude", "sfimp", "pfi_all"}),
    selects=(Select(SFIMP_GRAPH, "feature"),),
    library=library,
)
