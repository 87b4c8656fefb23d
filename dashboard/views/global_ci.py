"""Global contextual importance (Främling 2022, Sec. 4.1) over the explained rows."""

from __future__ import annotations

from .. import components, figures
from .base import PROFILES, Select, View, empty

GLOBAL_CI_GRAPH = "global-ci-graph"  # clicking it selects the feature


def render(ctx, inp) -> dict:
    summary = inp.summary
    if summary is None:
        return {"figure": empty("Waiting for the ICE/ICI pass…")}
    return {"figure": figures.global_ci_figure(summary.global_ci(inp.mask), selected=inp.feature, names=inp.names)}


def library(inp) -> dict:
    """Global CI and its spread over the rows (``ProfileSummary.global_ci``)."""
    if inp.summary is None:
        return {}
    found = inp.summary.global_ci(inp.mask)
    return {"mean CI": found["CI"], "CI std": found["CI_std"]}


VIEW = View(
    name="global_ci",
    section="overview",
    order=110,
    title="Global contextual importance",
    question="Over the explained rows, how much of the output range can each feature move?",
    method=(
        "Global contextual importance, Främling (2022), Sec. 4.1: the mean CI over the explained rows of the selection."
    ),
    outputs={"figure": (GLOBAL_CI_GRAPH, "figure")},
    render=render,
    body=lambda: [components.graph(GLOBAL_CI_GRAPH, height=None, filename="global-ci")],
    needs=frozenset({PROFILES}),
    reads=frozenset({"ws", "model", "feature", "subgroup"}),
    selects=(Select(GLOBAL_CI_GRAPH, "feature"),),
    library=library,
)
