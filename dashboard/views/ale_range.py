"""How far each feature's accumulated local effect moves the prediction: the range (max - min)
of its ALE curve at the ALE view's K, one bar per numeric feature, read off the ICE tensors the
profiles task already caches (no model call). A click on a bar selects the feature; "top N"
(``ale_top``, in the URL) shows the N largest.

README's recipe, worked: this module and its test, nothing else.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from dash import dcc, html

import compute

from .. import components, figures
from ..state import int_field
from . import ale
from .base import PROFILES, Select, View, empty

GRAPH = "ale-range-graph"
TOP = "ale-range-top"
ALE_TOP = int_field("ale_top", 10, low=1, high=50, control=(TOP, "value"))
K = ale.ALE_K.name  # the ALE view's number of intervals (its field, read by reference below)


def ranges(inp) -> pd.Series | None:
    """ALE max - min of every numeric feature at the state's K (``compute.ale_from_profile``),
    largest first; None while a profile is missing. Categorical features and features whose
    explained rows take one value have no ALE curve and no bar."""
    found = {}
    for feature in inp.summary.features:
        prof = inp.profile_of(feature)
        if prof is None:
            return None
        if prof.categorical:
            continue
        try:
            curve = compute.ale_from_profile(prof, n_intervals=inp.state[K])["ale"].to_numpy(float)
        except compute.ExplainError:  # one value in these rows, none within the grid
            continue
        found[feature] = float(np.nanmax(curve) - np.nanmin(curve))
    return pd.Series(found, dtype=float).sort_values(ascending=False, kind="stable")


def render(ctx, inp) -> dict:
    values = None if inp.summary is None else ranges(inp)
    if values is None:
        return {"figure": empty("Waiting for the ICE/ICI pass…")}
    if values.empty:
        return {"figure": empty("No numeric feature has an ALE curve in these rows.")}
    shown = values.head(inp.state["ale_top"])
    unit = "prediction" if inp.ws.output is None else "probability"
    figure = figures.bar_figure(
        shown,
        title=f"The top {len(shown)} by the range of their ALE curve",
        x_title=f"range of the ALE curve, max − min ({unit})",
        uirevision="ale-range",
        name="ALE range",
        selected=inp.feature,
        subtitle=f"{inp.state['model']} · ALE on {inp.state[K]} intervals, as in the feature's ALE view",
        names=inp.names,
    )
    return {"figure": figure}


def library(inp) -> dict:
    """The bars' values: ALE max - min per numeric feature at the state's K."""
    values = None if inp.summary is None else ranges(inp)
    return {} if values is None else {"ALE range": values.head(inp.state["ale_top"])}


VIEW = View(
    name="ale_range",
    section="overview",
    order=125,
    title="How far each feature's own effect moves the prediction",
    question="Whose own effect, without extrapolating, spans the widest range? Click a bar to pick a feature.",
    method=(
        "The range (maximum − minimum) of each numeric feature's accumulated local effects curve (Scholbeck et"
        " al. 2019, Sec. 3), on the ALE view's K intervals, read off the ICE tensors already computed: a"
        " feature-effect ranking, not a performance one (PFI answers that)."
    ),
    outputs={"figure": (GRAPH, "figure")},
    render=render,
    body=lambda: [components.graph(GRAPH, height=None, filename="ale_range")],
    extra=lambda: html.Label(
        ["top ", dcc.Input(id=TOP, type="number", min=1, max=50, step=1, value=10, style={"width": "60px"})]
    ),
    needs=frozenset({PROFILES}),
    reads=frozenset({"ws", "model", "feature", ale.ALE_K}),  # the ALE view's K (a reference); its own ale_top
    selects=(Select(GRAPH, "feature"),),
    state=(ALE_TOP,),
    library=library,
)
