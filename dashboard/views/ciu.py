"""CIU of the selected observation (Främling 2022, Eq. 6, 8; Fig. 3), read off the summary."""

from __future__ import annotations

from dash import html

from .. import components, figures, ids
from .base import PROFILES, View, empty
from .selection import observation_text, selected_row


def render(ctx, inp) -> dict:
    summary = inp.summary
    if summary is None:
        return {"figure": empty("Waiting for the ICE/ICI pass…"), "info": ""}
    row, how = selected_row(summary, inp.state, inp.mask)
    output = f" of P({inp.class_label(inp.ws.output)})" if inp.ws.output is not None else ""
    chosen = str(row) == str(inp.state.get("obs"))  # else the default, the chosen row not being explained
    shown = observation_text(inp.state, row, brief=True) if chosen else f"row {row} (shown by default)"
    fig = figures.ciu_figure(summary.ciu(row), title=f"CIU{output}, {shown}", names=inp.names)
    info = f"Selected: {how}. Output range for CI: {summary.out_range[0]:.4g} … {summary.out_range[1]:.4g}."
    return {"figure": fig, "info": info}


def library(inp) -> dict:
    """The selected row's CI and CU (``ProfileSummary.ciu``) and CI's output range."""
    if inp.summary is None:
        return {}
    row, _ = selected_row(inp.summary, inp.state, inp.mask)
    found = inp.summary.ciu(row)
    low, high = inp.summary.out_range
    return {"CI": found["CI"], "range low": low, "range high": high}


VIEW = View(
    name="ciu",
    section="observation",
    order=80,
    title="CIU of the selected observation",
    question="How much can each feature move this row's output, and how favourable is its value?",
    method=(
        "Contextual importance (transparent bar) and utility (solid share, CI x CU), Främling (2022), Eq. 6 "
        "and 8, Fig. 3."
    ),
    outputs={"figure": (ids.CIU_GRAPH, "figure"), "info": (ids.OBS_INFO, "children")},
    render=render,
    body=lambda: [
        components.graph(ids.CIU_GRAPH, height=None, filename="ciu"),
        html.Div(id=ids.OBS_INFO, className="help"),
    ],
    needs=frozenset({PROFILES}),
    reads=frozenset({"ws", "model", "feature", "subgroup", "obs"}),
    library=library,
)
