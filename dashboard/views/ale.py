"""Accumulated local effects of the feature, read off its ICE tensor (SIPA, seed 002)."""

from __future__ import annotations

import numpy as np
from dash import dcc, html

import compute

from .. import components, figures, ids
from ..state import int_field
from .base import PROFILES, View, empty

ALE_INTERVALS = "ale-intervals"  # number input: K, the number of ALE intervals
DEFAULT_ALE_K = 20  # R iml's and PyALE's default
MAX_ALE_K = 200
# K is part of the state: in the URL as ale_k, shown and set by the number input
ALE_K = int_field("ale_k", DEFAULT_ALE_K, low=2, high=MAX_ALE_K, control=(ALE_INTERVALS, "value"))


def render(ctx, inp) -> dict:
    prof = inp.profile
    if prof is None:
        return {"figure": empty("Waiting for the ICE/ICI pass…")}
    if prof.categorical:
        note = (
            f"ALE needs a numeric feature: {inp.label(inp.feature)} is categorical (its levels have no order to "
            "accumulate along). The PI and ICE views show its levels."
        )
        return {"figure": figures.empty_figure(note, height=140)}
    try:
        ale = compute.ale_from_profile(prof, n_intervals=inp.state["ale_k"])
        gone = int(np.isnan(np.asarray(prof.x, float)).sum()) if prof.has_missing_point else 0
        note = (
            f"{gone:,} of {len(prof.rows):,} explained rows have no {inp.label(inp.feature)} and are left out "
            "(ALE needs "
            "an ordered axis; the PI and ICE views show 'missing')"
            if gone
            else ""
        )
        return {"figure": figures.ale_figure(ale, feature=inp.feature, subtitle=note, label=inp.label(inp.feature))}
    except compute.ExplainError as exc:
        return {"figure": empty(str(exc))}


def library(inp) -> dict:
    """The ALE curve at the state's K (``compute.ale_from_profile``)."""
    prof = inp.profile
    if prof is None or prof.categorical:
        return {}
    ale = compute.ale_from_profile(prof, n_intervals=inp.state["ale_k"])
    return {"ALE": ale["ale"].to_numpy(float), "grid": ale["grid"].to_numpy(float)}


VIEW = View(
    name="ale",
    section="feature",
    order=130,
    title="Accumulated local effects",
    question="What is the feature's own effect on the prediction, without extrapolating?",
    method=(
        "Accumulated local effects read off the ICE tensor (Scholbeck et al., Sec. 3), on K intervals bounded"
        " by quantiles of the explained rows' values on the curves' grid (fewer where values tie; K = 20 by "
        "default, as R iml and PyALE)."
    ),
    outputs={"figure": (ids.ALE_GRAPH, "figure")},
    render=render,
    body=lambda: [components.graph(ids.ALE_GRAPH, filename="ale")],
    extra=lambda: html.Label(
        [
            "intervals K ",
            dcc.Input(
                id=ALE_INTERVALS,
                type="number",
                min=2,
                max=MAX_ALE_K,
                step=1,
                value=DEFAULT_ALE_K,
                debounce=True,
                style={"width": "70px"},
            ),
        ]
    ),
    needs=frozenset({PROFILES}),
    reads=frozenset({"ws", "model", "feature"}),  # and its own ale_k
    state=(ALE_K,),
    library=library,
)
