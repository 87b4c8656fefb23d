"""Contextual importance and utility of one observation (seed 003, Fig. 3)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .common import _bar_axis, _json_label, shown_name
from .theme import (
    BAR_COLOR,
    BEFORE_COLOR,
    CI_OPACITY,
    LEGEND_BELOW,
    MARGIN,
    WARNING_COLOR,
    _style,
    empty_figure,
    esc,
)


def ciu_figure(
    ciu: pd.DataFrame,
    *,
    title: str | None = None,
    subtitle: str = "",
    reference: pd.DataFrame | None = None,
    names: Mapping[str, str] | None = None,
) -> go.Figure:
    """Contextual importance and utility of one instance, as Fig. 3 of seed 003.

    CI is a half-transparent bar; CU a solid, narrower bar of length CI * CU inside it
    (overlay), so the solid share of each bar is the utility (opacity and width tell them
    apart, not hue). Features sorted by CI, largest on top;
    features whose CI or CU left [0, 1] (``out_of_range``) carry a marker. ``reference``
    (the same row before a what-if edit) adds its CI and CI x CU as open markers, in the
    what-if curve's "before" colour. ``names``: column name -> label (ticks, hover).
    """
    if ciu is None or ciu.empty:
        return empty_figure("No contextual importance computed yet.")
    order = list(ciu["CI"].sort_values(ascending=False, na_position="last", kind="stable").index)
    df = ciu.reindex(order)
    y = [str(f) for f in order]
    keys = [_json_label(f) for f in order]
    rows = zip(order, df["CI"], df["CU"], df["ymin"], df["ymax"], df["y"], df["out_of_range"])
    hover = [
        f"{esc(shown_name(names, f))}<br>CI = {ci:.3g}, CU = {_cu_text(cu)}<br>ymin = {low:.4g}, ymax = {high:.4g},"
        f" y = {at:.4g}" + (" <br>out of range: the model over/undershoots" if out else "")
        for f, ci, cu, low, high, at, out in rows
    ]
    common = dict(y=y, orientation="h", customdata=keys, hovertext=hover, hovertemplate="%{hovertext}<extra></extra>")
    traces = [
        go.Bar(
            _validate=False,
            x=df["CI"].to_numpy(float),
            name="CI (contextual importance)",
            marker=dict(color=BAR_COLOR),
            opacity=CI_OPACITY,
            **common,
        ),
        go.Bar(
            _validate=False,
            x=(df["CI"] * df["CU"]).to_numpy(float),
            name="CI × CU (contextual utility)",
            marker=dict(color=BAR_COLOR),
            width=0.5,
            **common,
        ),
    ]
    flagged = df["out_of_range"].to_numpy(bool)
    if flagged.any():
        traces.append(_out_of_range_trace(df, flagged, common))
    if reference is not None:
        traces += _before_traces(reference.reindex(order), order, common, names=names)
    yaxis, height = _bar_axis(order, None, names=names)
    default = "Contextual importance (transparent bar) and utility (solid share of it)"
    extra: dict = {}
    if reference is not None:  # five legend entries: below the plot, clear of the title
        height += 70
        extra = dict(
            legend=LEGEND_BELOW,
            margin=dict(l=10, r=10, t=85, b=120),
        )
    if flagged.any():  # room for the "out of range" labels right of the bars
        extra["margin"] = {**extra.get("margin", MARGIN), "r": 95}
    return _style(
        traces,
        title or default,
        "ciu",
        subtitle=subtitle,
        barmode="overlay",
        height=height,
        yaxis=yaxis,
        xaxis=dict(title="CI: share of the output range the feature spans; solid: CI × CU", zeroline=True),
        **extra,
    )


def _out_of_range_trace(df: pd.DataFrame, flagged: np.ndarray, common: dict) -> go.Scatter:
    """A marker and the words "out of range" at the end of each ``flagged`` feature's CI bar
    (``common``: the bars' y, customdata and hover text, one per feature of ``df``)."""
    return go.Scatter(
        _validate=False,
        x=df["CI"].to_numpy(float)[flagged],
        y=np.array(common["y"], dtype=object)[flagged],
        customdata=np.array(common["customdata"], dtype=object)[flagged].tolist(),
        mode="markers+text",
        text=["out of range"] * int(flagged.sum()),
        textposition="middle right",
        cliponaxis=False,  # the label may stand right of the plot area
        marker=dict(symbol="triangle-left", color=WARNING_COLOR, size=10),
        name="out of range",
        hovertext=np.array(common["hovertext"], dtype=object)[flagged],
        hovertemplate="%{hovertext}<extra></extra>",
    )


def _before_traces(before: pd.DataFrame, order: list, common: dict, *, names: Mapping[str, str] | None) -> list:
    """The row's CI and CI x CU before the what-if edit (``before``, in ``order``) as open
    markers on the bars."""
    traces = []
    for x, name, symbol in (
        (before["CI"], "CI before the edit", "line-ns-open"),
        (before["CI"] * before["CU"], "CI × CU before the edit", "circle-open"),
    ):
        traces.append(
            go.Scatter(
                _validate=False,
                x=x.to_numpy(float),
                y=common["y"],
                customdata=common["customdata"],
                hovertext=[esc(shown_name(names, f)) for f in order],
                mode="markers",
                marker=dict(symbol=symbol, color=BEFORE_COLOR, size=11, line=dict(width=2)),
                name=name,
                hovertemplate="%{hovertext}: " + name + " %{x:.3g}<extra></extra>",
            )
        )
    return traces


def _cu_text(cu: float) -> str:
    """CU as the hover writes it: undefined (NaN) where the output does not move with the
    feature (ymin = ymax: a feature holding one value, or none, in the rows)."""
    return f"{cu:.3g}" if np.isfinite(cu) else "undefined (the output does not move with it)"
