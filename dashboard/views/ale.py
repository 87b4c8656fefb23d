"""Accumulated local effects of the feature, read off its ICE tensor (SIPA, seed 002)."""

from __future__ import annotations

import compute

from .. import figures, ids, layout
from .base import PROFILES, View, empty

#: Number K of ALE intervals, as R iml (FeatureEffect grid.size) and PyALE (grid_size) default;
#: ALEPlot's 40 suits a full training set, the dashboard explains at most max_curves rows.
ALE_INTERVALS = 20


def render(ctx, inp) -> dict:
    prof = inp.profile
    if prof is None:
        return {"figure": empty("Waiting for the ICE/ICI pass…")}
    if prof.categorical:
        return {"figure": empty(f"ALE needs a numeric feature; {inp.feature} is categorical.")}
    try:
        ale = compute.ale_from_profile(prof, n_intervals=ALE_INTERVALS)
        return {"figure": figures.ale_figure(ale, feature=inp.feature)}
    except compute.ExplainError as exc:
        return {"figure": empty(str(exc))}


VIEW = View(
    name="ale",
    title="Accumulated local effects",
    question=(f"ALE of the feature read off its ICE tensor (Scholbeck et al., Sec. 3), on {ALE_INTERVALS} "
              "intervals bounded by quantiles of the explained rows' values, taken on the curves' grid "
              "(fewer where values tie)."),
    outputs={"figure": (ids.ALE_GRAPH, "figure")},
    render=render,
    body=lambda: [layout.graph(ids.ALE_GRAPH, filename="ale")],
    needs=frozenset({PROFILES}),
)
