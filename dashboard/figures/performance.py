"""Model performance and one observation's contributions: calibration, scatter, waterfall,
what-if."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .common import level_label
from .theme import (
    ALL_COLOR,
    BEFORE_COLOR,
    CURVE_COLOR,
    MIN_HEIGHT,
    MINUS,
    NEGATIVE_COLOR,
    POSITIVE_COLOR,
    PX_PER_FEATURE,
    SELECTED_COLOR,
    SYMBOLS,
    _style,
    esc,
)


def calibration_figure(
    curves: list[tuple[str, pd.DataFrame, str, str]], *, output, title: str, subtitle: str = ""
) -> go.Figure:
    """Calibration curves: the predicted probability of ``output`` (x) against how often it
    occurs (y), one line per ``(name, curve, colour, dash)``; ``curve`` is
    :func:`compute.calibration_curve`'s frame. The dotted diagonal is a perfectly calibrated
    model; marker area grows with the rows in the bin. Curves of one colour (one model) share
    a marker symbol, each colour its own, so a model is told by its symbol too."""
    traces = [
        go.Scatter(
            _validate=False,
            x=[0, 1],
            y=[0, 1],
            mode="lines",
            line=dict(color=CURVE_COLOR, dash="dot", width=1),
            name="perfectly calibrated",
            hoverinfo="skip",
        )
    ]
    symbols = {c: SYMBOLS[k % len(SYMBOLS)] for k, c in enumerate(dict.fromkeys(c for _, _, c, _ in curves))}
    for name, curve, color, dash in curves:
        n = curve["n"].to_numpy(float)
        traces.append(
            go.Scatter(
                _validate=False,
                x=curve["predicted"].to_numpy(float),
                y=curve["observed"].to_numpy(float),
                customdata=n,
                mode="lines+markers",
                name=name,
                line=dict(color=color, dash=dash, width=2),
                marker=dict(
                    color=color, symbol=symbols[color], size=np.clip(4 + 12 * np.sqrt(n / max(n.max(), 1)), 4, 16)
                ),
                hovertemplate=f"{esc(name)}<br>predicted %{{x:.1%}}, observed %{{y:.1%}} (%{{customdata:,}} rows)"
                "<extra></extra>",
            )
        )
    label = level_label(output)
    return _style(
        traces,
        title,
        "calibration",
        height=400,
        subtitle=subtitle,
        xaxis=dict(title=f"predicted probability of {label}", range=[-0.02, 1.02], tickformat=".0%"),
        yaxis=dict(title=f"share that is {label}", range=[-0.02, 1.02], tickformat=".0%"),
    )


SVG_MAX_POINTS = 5_000  # scatter points drawn as SVG (DOM nodes); more go to WebGL


def scatter_figure(
    groups: list[tuple[str, np.ndarray, np.ndarray, str]],
    *,
    title: str,
    subtitle: str = "",
    x_title: str,
    y_title: str,
    diagonal: bool = False,
    zero_line: bool = False,
    categorical: bool = False,
    y_percent: bool = False,
) -> go.Figure:
    """Points ``(name, x, y, colour)`` per group, group k with marker symbol k (circle,
    square, ...) besides its colour, e.g. predicted against observed
    (``diagonal``: the line y = x) or residuals against a feature (``zero_line``). A
    categorical x is drawn on a category axis. SVG up to SVG_MAX_POINTS points in all: a
    browser without a GPU (a virtual desktop, headless Chromium 13x and later) has no WebGL
    and shows "WebGL is not supported" instead of the chart; only more points go to WebGL.
    ``y_percent``: y is a probability (0 to 1), written in % as the calibration chart does."""
    traces = []
    y_hover = "%{y:.1%}" if y_percent else "%{y:.4g}"
    n_points = sum(len(y) for _, _, y, _ in groups)
    trace = go.Scattergl if n_points > SVG_MAX_POINTS else go.Scatter
    values = [np.asarray(y, float) for _, _, y, _ in groups if len(y)]
    if diagonal and values:
        xs = [np.asarray(x, float) for _, x, _, _ in groups if len(x)]
        low = float(min(min(v.min() for v in values), min(v.min() for v in xs)))
        high = float(max(max(v.max() for v in values), max(v.max() for v in xs)))
        traces.append(
            go.Scatter(
                _validate=False,
                x=[low, high],
                y=[low, high],
                mode="lines",
                line=dict(color=CURVE_COLOR, dash="dot", width=1),
                name="predicted = observed",
                hoverinfo="skip",
            )
        )
    for k, (name, x, y, color) in enumerate(groups):
        points: Any = [level_label(v) for v in x] if categorical else np.asarray(x, float)
        traces.append(
            trace(
                _validate=False,
                x=points,
                y=np.asarray(y, float),
                mode="markers",
                name=name,
                marker=dict(color=color, symbol=SYMBOLS[k % len(SYMBOLS)], size=6, opacity=0.55, line=dict(width=0)),
                hovertemplate=f"{esc(name)}<br>{esc(x_title)}: %{{x}}<br>{esc(y_title)}: {y_hover}<extra></extra>",
            )
        )
    shapes = []
    if zero_line:
        shapes.append(
            dict(type="line", xref="paper", x0=0, x1=1, y0=0, y1=0, line=dict(color="#555555", width=1, dash="dot"))
        )
    return _style(
        traces,
        title,
        "scatter",
        height=400,
        subtitle=subtitle,
        xaxis=dict(title=x_title, type="category" if categorical else "-"),
        yaxis=dict(title=y_title) | (dict(tickformat=".0%") if y_percent else {}),
        shapes=shapes,
        showlegend=len(groups) > 1 or diagonal,
    )


def waterfall_figure(
    contributions: pd.Series,
    *,
    labels: Mapping[Any, str],
    base: float,
    prediction: float,
    title: str,
    subtitle: str = "",
    scale: float = 1.0,
    unit: str = "",
    top: int = 12,
) -> go.Figure:
    """A horizontal waterfall from the mean prediction (bottom) to this prediction (top):
    one bar per player, ``labels`` naming it ("age = 38"), the ``top`` largest by absolute
    value and the rest summed into one bar. Values are multiplied by ``scale`` (100 for
    probabilities, ``unit`` "pp": the mean and this prediction in %, the contributions in
    percentage points). Each contribution's label carries its
    sign ("+1.2", "−0.8"), not only its colour (raises POSITIVE_COLOR, lowers
    NEGATIVE_COLOR); the mean and this prediction are black."""
    order = contributions.abs().sort_values(ascending=False, kind="stable").index
    shown = list(order[:top])
    rest = contributions.drop(index=shown)
    names = [labels.get(k, str(k)) for k in shown]
    values = [float(contributions[k]) * scale for k in shown]
    if len(rest):
        names.append(f"{len(rest)} other features")
        values.append(float(rest.sum()) * scale)
    names, values = names[::-1], values[::-1]  # largest at the top, next to the prediction
    suffix = f" {unit}" if unit else ""
    level = " %" if unit == "pp" else suffix  # the mean and this prediction: a probability in %

    def fmt(v: float, sign: str = "") -> str:
        text = f"{v:{sign}.1f}{suffix if sign else level}" if unit == "pp" else f"{v:{sign}.3g}{suffix}"
        return MINUS + text[1:] if text.startswith("-") else text

    text = [fmt(v, "+") for v in values]
    trace = go.Waterfall(
        _validate=False,
        orientation="h",
        measure=["absolute", *["relative"] * len(values), "total"],
        y=["mean prediction", *names, "this prediction"],
        x=[base * scale, *values, prediction * scale],
        text=[fmt(base * scale), *text, fmt(prediction * scale)],
        textposition="outside",
        cliponaxis=False,
        increasing=dict(marker=dict(color=POSITIVE_COLOR)),
        decreasing=dict(marker=dict(color=NEGATIVE_COLOR)),
        totals=dict(marker=dict(color=ALL_COLOR)),
        connector=dict(line=dict(color="#9ca3af", width=1)),
        hovertemplate="%{y}: %{text}<extra></extra>",
    )
    height = max(MIN_HEIGHT, PX_PER_FEATURE * (len(values) + 2) + 130)
    ends = np.concatenate([[0.0, base * scale], base * scale + np.cumsum(values), [prediction * scale]])
    low, high = float(ends.min()), float(ends.max())
    pad = max(high - low, 1e-12) * 0.22  # room for the labels outside the bars on both sides
    return _style(
        [trace],
        title,
        "waterfall",
        subtitle=subtitle,
        height=height,
        xaxis=dict(
            title="predicted probability (%)" if unit == "pp" else f"prediction{suffix}" if unit else "prediction",
            range=[low - pad, high + pad],
        ),
        yaxis=dict(title="feature = value in this row", automargin=True, type="category"),
        showlegend=False,
        margin=dict(l=10, r=60, t=85, b=40),
    )


def whatif_figure(
    grid: np.ndarray,
    curves: np.ndarray,
    points: tuple,
    *,
    categorical: bool,
    feature,
    title: str,
    subtitle: str = "",
    y_title: str = "prediction",
    scale: float = 1.0,
    percent: bool = False,
) -> go.Figure:
    """One row's ICE curve over a feature before (dashed, dark grey, an open circle) and after
    (solid, the selected row's colour, a filled circle) a what-if edit, each with a marker
    where the row's own value puts it; the legend shows each one's dash and marker. ``curves``: (2, n_grid);
    ``points``: ((x before, y before), (x after, y after)); a categorical feature's levels
    are dots (its levels have no order to draw a line through). ``percent``: the prediction is
    a probability (``scale`` 100), written "94.5 %" in the legend and the hovers."""
    x = np.array([level_label(v) for v in grid], dtype=object) if categorical else np.asarray(grid, dtype=float)
    traces = []
    styles = (("before the edit", BEFORE_COLOR, "dash"), ("as edited", SELECTED_COLOR, "solid"))
    y_hover = "%{y:.1f} %" if percent else "%{y:.4g}"
    for k, (name, color, dash) in enumerate(styles):
        traces.append(
            go.Scatter(
                _validate=False,
                x=x,
                y=np.asarray(curves[k], dtype=float) * scale,
                mode="markers" if categorical else "lines",
                line=dict(color=color, dash=dash, width=2),
                marker=dict(color=color, size=8, symbol="circle" if k else "circle-open"),
                name=f"{name}: curve",
                showlegend=False,
                hovertemplate=f"{esc(feature)} = %{{x}}<br>{esc(y_title)}: {y_hover}<extra>{name}</extra>",
            )
        )
    for k, (name, color, dash) in enumerate(styles):
        (px, py) = points[k]
        shown = level_label(px) if categorical else px
        traces.append(
            go.Scatter(
                _validate=False,
                x=[shown],
                y=[py * scale],
                mode="markers" if categorical else "lines+markers",  # one point: the legend shows the dash
                line=dict(color=color, dash=dash, width=2),
                marker=dict(color=color, size=13, symbol="circle" if k else "circle-open", line=dict(width=2)),
                name=f"{name}: {feature} = {shown if categorical else f'{px:.4g}'}, "
                + (f"{py * scale:.1f} %" if percent else f"{py * scale:.4g}"),
                hovertemplate=f"{name}<br>{esc(feature)} = %{{x}}<br>{esc(y_title)}: {y_hover}<extra></extra>",
            )
        )
    xaxis: dict = dict(title=str(feature))
    if categorical:
        xaxis.update(type="category", categoryorder="array", categoryarray=list(x))
    return _style(
        traces,
        title,
        "whatif",
        subtitle=subtitle,
        height=360,
        xaxis=xaxis,
        yaxis=dict(title=y_title),
        legend=dict(orientation="h", yanchor="top", y=-0.2, xanchor="left", x=0.0),
        margin=dict(l=10, r=10, t=85, b=80),
    )
