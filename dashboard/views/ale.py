"""Accumulated local effects of the feature, read off its ICE tensor (SIPA, seed 002)."""

from __future__ import annotations

import compute

from .. import figures, ids, layout
from .base import PROFILES, View, empty


def render(ctx, inp) -> dict:
    prof = inp.profile
    if prof is None:
        return {"figure": empty("Waiting for the ICE/ICI pass…")}
    if prof.categorical:
        return {"figure": empty(f"ALE needs a numeric feature; {inp.feature} is categorical.")}
    try:
        return {"figure": figures.ale_figure(compute.ale_from_profile(prof), feature=inp.feature)}
    except compute.ExplainError as exc:
        return {"figure": empty(str(exc))}


VIEW = View(
    name="ale",
    title="Accumulated local effects",
    question="ALE of the feature read off its ICE tensor (Scholbeck et al., Sec. 3).",
    outputs={"figure": (ids.ALE_GRAPH, "figure")},
    render=render,
    body=lambda: [layout.graph(ids.ALE_GRAPH, filename="ale")],
    needs=frozenset({PROFILES}),
)
