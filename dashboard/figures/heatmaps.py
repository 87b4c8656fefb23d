"""Heatmaps: the pairs' interaction matrix and a pair's 2-D partial dependence."""

from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .common import level_label, shown_name, value_text
from .theme import _style, empty_figure, esc

#: A sequential scale from white (no interaction) to dark blue: one hue whose lightness falls
#: steadily with H², so it reads the same with any colour vision and in greyscale (every cell
#: also carries its number; tests/test_dash_colours.py checks the lightness).
INTERACTION_SCALE = [[0.0, "#f8fafc"], [0.5, "#60a5fa"], [1.0, "#1e3a8a"]]
#: The 2-D partial dependence: Viridis, perceptually uniform and colour-blind safe (its
#: lightness rises steadily); a grid of at most WRITTEN_SIDE x WRITTEN_SIDE cells also has its
#: values written (in a wider one plotly shrinks the numbers past reading).
PD2_SCALE = "Viridis"
WRITTEN_SIDE = 10


def pair_key(a, b) -> str:
    """A pair as the text the state and a cell's ``customdata`` carry (JSON, two labels)."""
    return json.dumps([str(a), str(b)])


def pair_matrix_figure(
    pairs: pd.DataFrame,
    *,
    selected: tuple | None = None,
    order: list | None = None,
    subtitle: str = "",
    names: Mapping[str, str] | None = None,
) -> go.Figure:
    """Friedman's H² of every computed pair as a symmetric matrix on a fixed 0-1 scale, each
    cell written out; a click on a cell selects the pair (``customdata``: :func:`pair_key`).
    ``order``: the features' order (default: as the pairs name them); ``names``: column
    name -> label, written on the ticks and in the hover text (the cells' keys stay the
    column names)."""
    if pairs is None or pairs.empty:
        return empty_figure("No pair of features to compare.")
    named = set(pairs["feature_1"]) | set(pairs["feature_2"])
    features = [f for f in (order or []) if f in named]
    features += [f for f in dict.fromkeys([*pairs["feature_1"], *pairs["feature_2"]]) if f not in features]
    labels = [str(f) for f in features]
    k = len(features)
    z = np.full((k, k), np.nan)
    text = np.full((k, k), "", dtype=object)
    hover = np.full((k, k), "", dtype=object)
    keys = np.full((k, k), "", dtype=object)
    position = {f: i for i, f in enumerate(features)}
    for a, b, h2, h in zip(pairs["feature_1"], pairs["feature_2"], pairs["h2"], pairs["h"]):
        for i, j in ((position[a], position[b]), (position[b], position[a])):
            z[i, j] = h2
            text[i, j] = "0" if h2 == 0 else ("<0.001" if h2 < 0.001 else f"{h2:.2g}")
            hover[i, j] = (
                f"{esc(shown_name(names, a))} × {esc(shown_name(names, b))}"
                f"<br>H² = {h2:.3g}: share of their joint effect that is interaction"
                f"<br>h = {h:.3g}: its size, in prediction units"
            )
            keys[i, j] = pair_key(a, b)
    trace = go.Heatmap(
        _validate=False,
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
        zmax=1.0,  # a share: 0.02 is near white whatever the largest pair
        colorbar=dict(title=dict(text="H²"), thickness=12),
        xgap=2,
        ygap=2,
    )
    shapes = []
    if selected is not None and selected[0] in position and selected[1] in position:
        i, j = position[selected[0]], position[selected[1]]
        shapes = [_cell_outline(i, j), _cell_outline(j, i)]
    size = 140 + 42 * k
    ticks = dict(tickmode="array", tickvals=labels, ticktext=[esc(shown_name(names, f)) for f in features])
    return _style(
        [trace],
        "Which pairs act together (Friedman's H²)",
        "pair-matrix",
        subtitle=subtitle,
        height=max(300, size),
        xaxis=dict(title="feature", type="category", **ticks),
        yaxis=dict(title="feature", type="category", autorange="reversed", **ticks),
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


def pd2_figure(
    surface: pd.DataFrame, *, value_title: str, subtitle: str = "", names: Mapping[str, str] | None = None
) -> go.Figure:
    """The 2-D partial dependence of a pair (``InteractionStrength.pd2``): rows the first
    feature's grid, columns the second's; on a small grid each cell's value is written
    (a 20-point grid's numbers would be too small to read: hover shows them). ``names``:
    column name -> label of the two features."""
    a, b = shown_name(names, surface.index.name), shown_name(names, surface.columns.name)
    y = _axis_values(surface.index)
    x = _axis_values(surface.columns)
    values = surface.to_numpy(float)
    hover = [
        [
            f"{esc(a)} = {esc(value_text(va))}<br>{esc(b)} = {esc(value_text(vb))}<br>{esc(value_title)}: {v:.4g}"
            for vb, v in zip(surface.columns, row, strict=True)
        ]
        for va, row in zip(surface.index, values, strict=True)
    ]
    trace = go.Heatmap(
        _validate=False,
        z=values,
        x=x,
        y=y,
        hovertext=hover,
        hovertemplate="%{hovertext}<extra></extra>",
        colorscale=PD2_SCALE,
        **(dict(texttemplate="%{z:.3g}") if max(values.shape) <= WRITTEN_SIDE else {}),
        colorbar=dict(title=dict(text=esc(value_title)), thickness=12),
    )
    categorical_x = any(isinstance(v, str) for v in x)
    categorical_y = any(isinstance(v, str) for v in y)
    return _style(
        [trace],
        f"Average prediction as {a} and {b} change together",
        "pd2",
        subtitle=subtitle,
        height=420,
        xaxis=dict(title=str(b), **({"type": "category"} if categorical_x else {})),
        yaxis=dict(title=str(a), **({"type": "category"} if categorical_y else {})),
    )


#: A numeric feature with at most this many grid points is drawn as levels (0 and 1, not a
#: continuous axis from -0.5 to 1.5).
FEW_VALUES = 5


def _axis_values(values: pd.Index) -> list:
    """Grid points for an axis: numbers as they are, levels (and missing) as text; a few
    numbers as text too, so the axis shows exactly them."""
    numeric = [
        isinstance(v, (int, float, np.integer, np.floating)) and not (isinstance(v, float) and np.isnan(v))
        for v in values
    ]
    if all(numeric) and len(values) > FEW_VALUES:
        return list(values)
    return [value_text(v) if is_number else level_label(v) for v, is_number in zip(values, numeric, strict=True)]
