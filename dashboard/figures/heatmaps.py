"""Heatmaps: the pairs' interaction matrix and a pair's 2-D partial dependence."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .common import level_label, value_text
from .theme import _figure, _style, empty_figure, esc

#: A sequential scale from white (no interaction) to dark blue, readable without colour
#: names (every cell also carries its number).
INTERACTION_SCALE = [[0.0, "#f8fafc"], [0.5, "#60a5fa"], [1.0, "#1e3a8a"]]


def pair_key(a, b) -> str:
    """A pair as the text the state and a cell's ``customdata`` carry (JSON, two labels)."""
    return json.dumps([str(a), str(b)])


def pair_matrix_figure(pairs: pd.DataFrame, *, selected: tuple | None = None, subtitle: str = "") -> go.Figure:
    """Friedman's H² of every computed pair as a symmetric matrix, each cell written out;
    a click on a cell selects the pair (``customdata``: :func:`pair_key`)."""
    if pairs is None or pairs.empty:
        return empty_figure("No pair of features to compare.")
    features = list(dict.fromkeys([*pairs["feature_1"], *pairs["feature_2"]]))
    labels = [str(f) for f in features]
    k = len(features)
    z = np.full((k, k), np.nan)
    text = np.full((k, k), "", dtype=object)
    hover = np.full((k, k), "", dtype=object)
    keys = np.full((k, k), "", dtype=object)
    position = {f: i for i, f in enumerate(features)}
    for a, b, h2, h in pairs[["feature_1", "feature_2", "h2", "h"]].itertuples(index=False):
        for i, j in ((position[a], position[b]), (position[b], position[a])):
            z[i, j] = h2
            text[i, j] = f"{h2:.2f}"
            hover[i, j] = (
                f"{esc(a)} × {esc(b)}<br>H² = {h2:.3g}: share of their joint effect that is interaction"
                f"<br>h = {h:.3g}: its size, in prediction units"
            )
            keys[i, j] = pair_key(a, b)
    trace = go.Heatmap(
        z=z,
        x=labels,
        y=labels,
        text=text,
        texttemplate="%{text}",
        hovertext=hover,
        hovertemplate="%{hovertext}<extra></extra>",
        customdata=keys,
        colorscale=INTERACTION_SCALE,
        zmin=0.0,
        zmax=max(1e-9, float(np.nanmax(z))) if np.isfinite(z).any() else 1.0,
        colorbar=dict(title=dict(text="H²"), thickness=12),
        xgap=2,
        ygap=2,
    )
    fig = _figure(trace)
    shapes = []
    if selected is not None and selected[0] in position and selected[1] in position:
        i, j = position[selected[0]], position[selected[1]]
        shapes = [_cell_outline(i, j), _cell_outline(j, i)]
    size = 140 + 42 * k
    return _style(
        fig,
        "Which pairs act together (Friedman's H²)",
        "pair-matrix",
        subtitle=subtitle,
        height=max(300, size),
        xaxis=dict(title="feature", type="category", tickangle=-30),
        yaxis=dict(title="feature", type="category", autorange="reversed"),
        shapes=shapes,
    )


def _cell_outline(i: int, j: int) -> dict:
    return dict(
        type="rect",
        xref="x",
        yref="y",
        x0=j - 0.5,
        x1=j + 0.5,
        y0=i - 0.5,
        y1=i + 0.5,
        line=dict(color="#111827", width=2.5),
        fillcolor="rgba(0,0,0,0)",
    )


def pd2_figure(surface: pd.DataFrame, *, value_title: str, subtitle: str = "") -> go.Figure:
    """The 2-D partial dependence of a pair (``InteractionStrength.pd2``): rows the first
    feature's grid, columns the second's."""
    a, b = surface.index.name, surface.columns.name
    y = [_axis_value(v) for v in surface.index]
    x = [_axis_value(v) for v in surface.columns]
    values = surface.to_numpy(float)
    hover = [
        [
            f"{esc(a)} = {esc(value_text(va))}<br>{esc(b)} = {esc(value_text(vb))}<br>{esc(value_title)}: {v:.4g}"
            for vb, v in zip(surface.columns, row, strict=True)
        ]
        for va, row in zip(surface.index, values, strict=True)
    ]
    trace = go.Heatmap(
        z=values,
        x=x,
        y=y,
        hovertext=hover,
        hovertemplate="%{hovertext}<extra></extra>",
        colorscale="Viridis",
        colorbar=dict(title=dict(text=value_title), thickness=12),
    )
    categorical_x = any(isinstance(v, str) for v in x)
    categorical_y = any(isinstance(v, str) for v in y)
    return _style(
        _figure(trace),
        f"Average prediction as {a} and {b} change together",
        "pd2",
        subtitle=subtitle,
        height=420,
        xaxis=dict(title=str(b), **({"type": "category"} if categorical_x else {})),
        yaxis=dict(title=str(a), **({"type": "category"} if categorical_y else {})),
    )


def _axis_value(value):
    """A grid point for an axis: numbers as they are, levels (and missing) as text."""
    if isinstance(value, (int, float, np.integer, np.floating)) and not (isinstance(value, float) and np.isnan(value)):
        return value
    return level_label(value)
