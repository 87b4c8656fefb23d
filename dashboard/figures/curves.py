"""Curves over a feature's range: PI with the marginal distribution, ICI and ICE (seed 000,
Fig. 4 and 6), ALE."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go

import compute
from compute.results import FeatureProfile

from .common import (
    _category_axis,
    _labels_array,
    _line,
    _loss_name,
    _mask_array,
    _missing_axis,
    _position,
    _x_values,
    level_label,
)
from .theme import (
    ALL_COLOR,
    CURVE_COLOR,
    CURVE_OPACITY,
    GROUP_COLORS,
    GROUP_DASHES,
    LARGEST_COLOR,
    LARGEST_STYLE,
    LEGEND_BELOW,
    SELECTED_COLOR,
    SELECTED_STYLE,
    SMALLEST_COLOR,
    SMALLEST_STYLE,
    SYMBOLS,
    _merge,
    _stacked,
    _style,
    empty_figure,
    esc,
)


def pi_figure(
    prof: FeatureProfile,
    groups: Mapping[str, np.ndarray] | None = None,
    *,
    global_pfi: float | None = None,
    x_all=None,
    label: str | None = None,
) -> go.Figure:
    """PI curve of all explained rows and of subgroups, over the feature's distribution.

    Seed 000, Fig. 4 (conditional PI curves: all / X3 = 0 / X3 = 1) with the marginal
    distribution of Fig. 6 on top. ``groups`` maps a label to a boolean mask over
    ``prof.rows``; each group's curve is ``prof.subset(mask).pi`` (same grid, no new
    predictions); empty groups are skipped. ``x_all``: the feature's values in the whole
    data (default: the explained rows' values ``prof.x``). All rows' curve is a solid black
    line; group k has its colour and its dash (``GROUP_DASHES``), or its own marker symbol
    where a categorical feature's levels are dots. ``label``: the feature as people read it
    (its label; default its column name), in the titles.
    """
    if not prof.has_target:
        return empty_figure("PI curves need the target: this data has no target column.")
    feature = label or str(prof.feature)
    x = _x_values(prof)
    loss = _loss_name(prof.params)
    top, bottom = _stacked(0.2)
    layout = top.pop("layout")
    traces = _distribution_traces(prof, x, prof.x if x_all is None else x_all, top)
    traces += _pi_traces(prof, x, groups or {}, bottom)
    if global_pfi is not None:
        layout.update(_pfi_line(float(global_pfi)))
    layout["annotations"] = layout.get("annotations", []) + _missing_axis(prof, "x2")
    _merge(layout["xaxis2"], dict(title=dict(text=feature), **_category_axis(prof)))
    _merge(layout["xaxis"], _category_axis(prof))
    _merge(layout["yaxis"], dict(title=dict(text="count")))
    _merge(layout["yaxis2"], dict(title=dict(text=f"PI: mean change in {loss}")))
    title = f"PI curves of {feature}: mean change in {loss} when {feature} is set to x"
    return _style(
        traces,
        title,
        f"pi-{prof.feature}",
        height=540,
        legend=LEGEND_BELOW,
        margin=dict(l=10, r=10, t=60, b=100),
        **layout,
    )


def _distribution_traces(prof: FeatureProfile, x: np.ndarray, values, top: dict) -> list:
    """The top panel of :func:`pi_figure`: the feature's ``values`` as rows per level
    (categorical; the grid's levels first), else a histogram with a bar of the missing
    values at "missing"."""
    if prof.categorical:
        labels = pd.Series([level_label(v) for v in np.asarray(values, dtype=object)])
        counts = labels.value_counts()
        levels = list(x) + [lv for lv in counts.index if lv not in set(x)]
        return [
            go.Bar(
                _validate=False,
                x=levels,
                y=counts.reindex(levels, fill_value=0).to_numpy(),
                name="distribution",
                marker_color=CURVE_COLOR,
                showlegend=False,
                hovertemplate="%{x}: %{y} rows<extra></extra>",
                **top,
            )
        ]
    vals = np.asarray(values, dtype=float)
    traces = [
        go.Histogram(
            _validate=False,
            x=vals[np.isfinite(vals)],
            nbinsx=40,
            name="distribution",
            marker_color=CURVE_COLOR,
            showlegend=False,
            hovertemplate="%{x}: %{y} rows<extra></extra>",
            **top,
        )
    ]
    n_missing = int(np.isnan(vals).sum())
    if prof.has_missing_point and n_missing:
        traces.append(
            go.Bar(
                _validate=False,
                x=[x[-1]],
                y=[n_missing],
                width=[0.03 * (x[-1] - x[0])],
                name="missing",
                marker_color=CURVE_COLOR,
                showlegend=False,
                hovertemplate="missing: %{y} rows<extra></extra>",
                **top,
            )
        )
    return traces


def _pi_traces(prof: FeatureProfile, x: np.ndarray, groups: Mapping[str, np.ndarray], bottom: dict) -> list:
    """The bottom panel of :func:`pi_figure`: all rows' PI curve, then each non-empty
    group's (``prof.subset(mask).pi``) in its colour, dash and marker symbol."""
    # unordered levels: one dot per level (a line through them would suggest an order)
    mode = "markers" if prof.categorical else "lines"
    traces = [
        go.Scatter(
            _validate=False,
            **_line(prof, x, prof.pi, mode, dict(color=ALL_COLOR, size=12)),
            name=f"all (n={len(prof.rows)})",
            line=dict(color=ALL_COLOR, width=3),
            hovertemplate="all: PI(%{x}) = %{y:.4g}<extra></extra>",
            **bottom,
        )
    ]
    for k, (label, mask) in enumerate(groups.items()):
        mask = _mask_array(prof, mask)
        if not mask.any():
            continue
        sub = prof.subset(mask)
        color, dash = GROUP_COLORS[k % len(GROUP_COLORS)], GROUP_DASHES[k % len(GROUP_DASHES)]
        symbol = SYMBOLS[(k + 2) % len(SYMBOLS)]  # circle and square: all rows, models
        traces.append(
            go.Scatter(
                _validate=False,
                **_line(prof, x, sub.pi, mode, dict(color=color, size=10, symbol=symbol)),
                name=f"{label} (n={len(sub.rows)})",
                line=dict(color=color, width=2.5, dash=dash),
                hovertemplate=f"{esc(label)}: PI(%{{x}}) = %{{y:.4g}}<extra></extra>",
                **bottom,
            )
        )
    return traces


def _pfi_line(y: float) -> dict:
    """All rows' PFI as a dashed line across the PI panel, with its note (layout shapes and
    annotations)."""
    line = dict(dash="dash", color="black", width=1)
    return {
        "shapes": [dict(type="line", xref="x2 domain", x0=0, x1=1, yref="y2", y0=y, y1=y, line=line)],
        "annotations": [
            dict(
                text="all rows' PFI from the curves",
                xref="x2 domain",
                x=0,
                yref="y2",
                y=y,
                showarrow=False,
                xanchor="left",
                yanchor="bottom",
            )
        ],
    }


def ici_figure(
    prof: FeatureProfile,
    *,
    max_curves: int = 2000,
    n_points: int = 120,
    highlight: int = 1,
    selected=None,
    mask=None,
    centered: bool = False,
    random_state: int = 0,
    label: str | None = None,
    output_label: str | None = None,
) -> go.Figure:
    """ICI curves with the PI curve on top, as Fig. 6 of seed 000.

    The ``highlight`` observations with the largest ICI integral (local importance) are
    drawn in LARGEST_COLOR, solid with upward triangles, those with the smallest in
    SMALLEST_COLOR, dashed with downward triangles; the ``selected`` row is drawn on top of
    everything, dotted with diamonds (theme's ``*_STYLE``), each named in the legend.
    ``mask`` restricts the eligible observations to a subgroup, whose PI is then drawn.
    ``centered`` subtracts each curve's value at the first grid point. See
    :func:`_curves_figure` for sampling and thinning. ``label`` / ``output_label``: the
    feature and the explained class as people read them (their labels; default the column
    name and the class value).
    """
    if not prof.has_target:
        return empty_figure("ICI curves need the target: this data has no target column.")
    return _curves_figure(
        prof,
        "ICI",
        max_curves=max_curves,
        n_points=n_points,
        highlight=highlight,
        selected=selected,
        mask=mask,
        centered=centered,
        random_state=random_state,
        label=label,
        output_label=output_label,
    )


def ice_figure(
    prof: FeatureProfile,
    *,
    max_curves: int = 2000,
    n_points: int = 120,
    highlight: int = 1,
    selected=None,
    mask=None,
    centered: bool = False,
    random_state: int = 0,
    label: str | None = None,
    output_label: str | None = None,
) -> go.Figure:
    """ICE curves (or centred ICE) with the PD curve on top.

    Highlights mark the same rows as in :func:`ici_figure` (largest / smallest ICI
    integral) when the profile has a target, none otherwise. ``label``, ``output_label``
    as in :func:`ici_figure`.
    """
    return _curves_figure(
        prof,
        "ICE",
        max_curves=max_curves,
        n_points=n_points,
        highlight=highlight,
        selected=selected,
        mask=mask,
        centered=centered,
        random_state=random_state,
        label=label,
        output_label=output_label,
    )


@dataclass(frozen=True)
class _Drawing:
    """What a curves figure draws: the rows (eligible, drawn as background, highlighted,
    selected, as positions in ``prof.rows``), the grid columns of the background lines,
    the x positions, the row labels and each level's text (a strip)."""

    eligible: np.ndarray
    drawn: np.ndarray
    cols: np.ndarray
    largest: np.ndarray
    smallest: np.ndarray
    selected: int | None
    position: np.ndarray
    labels: np.ndarray
    level_text: np.ndarray | None
    feature: str = ""  # the feature as written (its label)
    output: str | None = None  # the explained class as written (its label)


def _curves_figure(
    prof: FeatureProfile,
    kind: str,
    *,
    max_curves: int,
    n_points: int,
    highlight: int,
    selected,
    mask,
    centered: bool,
    random_state: int,
    label: str | None = None,
    output_label: str | None = None,
) -> go.Figure:
    """Shared ICI/ICE drawing.

    All background curves form ONE SVG ``Scatter`` trace, each curve followed by a gap (NaN in
    x and y, which plotly.js breaks lines at; typed arrays, y as float32 since it is shown to
    4 digits). One SVG path of 1,000 curves draws in about 0.15 s where WebGL took 1.5 s in
    place and 3.5 s fresh without a GPU (SwiftShader), see ``benchmarks/speed_dashboard.py``;
    only a strip of more than 5,000 dots stays WebGL (SVG dots are DOM nodes). A
    categorical feature's levels have no order, so nothing is drawn between them: each curve
    is a dot per level, jittered sideways around the level's position (a strip), the PI/PD
    and the highlighted rows are marks on the level itself. Curves are a seeded random sample of at
    most ``max_curves`` eligible rows, over at most ``n_points`` evenly spaced grid positions
    (first and last kept). The summary line (``FeatureProfile.mean_curve``) keeps the full
    grid; highlight and selected curves are separate traces on top, drawn whether or not
    they were sampled. Every curve point's ``customdata`` is its row label.
    """
    n_obs = len(prof.rows)
    eligible = np.arange(n_obs) if mask is None else np.flatnonzero(_mask_array(prof, mask))
    if eligible.size == 0:
        return empty_figure(f"The subgroup selects none of the {n_obs} explained rows.")
    rng = np.random.default_rng(random_state)
    drawing = _drawing(
        prof, eligible, rng, max_curves=max_curves, n_points=n_points, highlight=highlight, selected=selected
    )
    output = None if prof.output is None else (output_label or str(prof.output))
    drawing = replace(drawing, feature=label or str(prof.feature), output=output)
    curves = prof.curves(kind, centered=centered)
    summary = prof.mean_curve(kind, mask=_mask_array(prof, mask) if mask is not None else None, centered=centered)
    traces = _background(prof, kind, curves, drawing, rng)
    traces.append(_summary_trace(prof, kind, summary, drawing, scope="all" if mask is None else "subgroup"))
    local = prof.local_importance if prof.has_target else np.full(len(prof.rows), np.nan)
    for pos in drawing.largest:
        label = f"largest integral: row {prof.rows[pos]} ({local[pos]:.3g})"
        traces.append(_row_trace(prof, curves, drawing, pos, label, style=(LARGEST_COLOR, *LARGEST_STYLE), width=2.5))
    for pos in drawing.smallest:
        label = f"smallest integral: row {prof.rows[pos]} ({local[pos]:.3g})"
        traces.append(_row_trace(prof, curves, drawing, pos, label, style=(SMALLEST_COLOR, *SMALLEST_STYLE), width=2.5))
    sel = drawing.selected
    if sel is not None:
        note = "" if np.isin(sel, eligible) else ", not in subgroup"
        value = f" ({local[sel]:.3g}{note})" if local is not None else (f" ({note[2:]})" if note else "")
        name = f"selected: row {prof.rows[sel]}{value}"
        traces.append(_row_trace(prof, curves, drawing, sel, name, style=(SELECTED_COLOR, *SELECTED_STYLE), width=4))
    return _curves_layout(traces, prof, kind, drawing, masked=mask is not None, centered=centered)


def _drawing(
    prof: FeatureProfile, eligible, rng, *, max_curves: int, n_points: int, highlight: int, selected
) -> _Drawing:
    """The rows and grid columns to draw: a seeded sample of the eligible rows, evenly
    spaced grid columns, the rows of the largest and smallest ICI integral (the tables' rule,
    ``compute.rank_extremes``) and the selected row."""
    drawn = eligible
    if eligible.size > max_curves:
        drawn = np.sort(rng.choice(eligible, size=max(int(max_curves), 0), replace=False))
    x = _x_values(prof)
    n_grid = x.size
    cols = np.arange(n_grid)
    if n_grid > n_points:
        cols = np.unique(np.round(np.linspace(0, n_grid - 1, max(int(n_points), 2))).astype(int))
    largest, smallest = np.array([], dtype=int), np.array([], dtype=int)
    if prof.has_target and highlight > 0:
        top, bottom = compute.rank_extremes(prof.local_importance[eligible], int(highlight))
        largest, smallest = eligible[top], eligible[bottom]  # a row is drawn once
    strip = prof.categorical
    return _Drawing(
        eligible=eligible,
        drawn=drawn,
        cols=cols,
        largest=largest,
        smallest=smallest,
        selected=_position(prof.rows, selected),
        position=np.arange(n_grid, dtype=float) if strip else x,  # levels at 0, 1, 2, ...
        labels=_labels_array(prof.rows),
        level_text=np.array([esc(v) for v in x], dtype=object) if strip else None,
    )


def _hover(prof: FeatureProfile, feature: str) -> str:
    where = "%{text}" if prof.categorical else "%{x}"
    return "row %{customdata}<br>" + f"{esc(feature)} = " + where + "<br>y = %{y:.4g}<extra></extra>"


def _background(prof: FeatureProfile, kind: str, curves: np.ndarray, d: _Drawing, rng) -> list:
    """The sampled rows' curves as one trace (each followed by a gap), and their values at
    "missing" as a strip of dots right of the lines."""
    strip, missing, drawn = prof.categorical, prof.has_missing_point, d.drawn
    line_cols = d.cols[:-1] if missing else d.cols
    width = line_cols.size + 1  # each curve is followed by a gap (NaN)
    xs = np.full((drawn.size, width), np.nan)
    ys = np.full((drawn.size, width), np.nan)
    xs[:, :-1], ys[:, :-1] = d.position[line_cols], curves[np.ix_(drawn, line_cols)]
    if strip:  # seeded sideways jitter: the dots of one level spread into a strip
        xs[:, :-1] += rng.uniform(-0.28, 0.28, size=(drawn.size, d.cols.size))
    style: dict = dict(mode="lines", line=dict(color=CURVE_COLOR, width=1), opacity=CURVE_OPACITY)
    if strip:
        assert d.level_text is not None
        texts = np.full((drawn.size, width), "", dtype=object)
        texts[:, :-1] = d.level_text[line_cols]
        style = dict(mode="markers", marker=dict(color=CURVE_COLOR, size=4), opacity=0.45, text=texts.ravel().tolist())
    # thousands of SVG markers (a strip over many levels) would be thousands of DOM nodes
    many_dots = strip and drawn.size * d.cols.size > 5000
    traces = [
        (go.Scattergl if many_dots else go.Scatter)(
            _validate=False,
            x=xs.ravel(),
            y=ys.ravel().astype(np.float32),
            customdata=np.repeat(d.labels[drawn], width),
            connectgaps=False,
            name=f"{kind} curves ({drawn.size})" if not strip else f"{kind} values ({drawn.size} rows)",
            hovertemplate=_hover(prof, d.feature),
            **style,
        )
    ]
    if missing:  # each drawn curve's value at "missing": a strip of dots right of the lines
        x = _x_values(prof)
        span = float(x[-1] - x[0]) or 1.0
        traces.append(
            go.Scatter(
                _validate=False,
                x=x[-1] + rng.uniform(-0.015, 0.015, size=drawn.size) * span,
                y=curves[drawn, -1],
                customdata=d.labels[drawn],
                mode="markers",
                marker=dict(color=CURVE_COLOR, size=4),
                opacity=0.45,
                showlegend=False,
                name=f"{kind} at missing",
                hovertemplate=f"row %{{customdata}}<br>{esc(d.feature)} missing<br>y = %{{y:.4g}}<extra></extra>",
            )
        )
    return traces


def _summary_trace(prof: FeatureProfile, kind: str, summary: np.ndarray, d: _Drawing, scope: str):
    """The PD (ICE) or PI (ICI) line of the eligible rows, over the full grid."""
    what = {"ICI": "PI", "ICE": "PD"}[kind]
    strip = prof.categorical
    where = "%{text}" if strip else "%{x}"
    marker = dict(color=ALL_COLOR, size=26, symbol="line-ew", line=dict(width=4, color=ALL_COLOR))
    return go.Scatter(
        _validate=False,
        **_line(
            prof,
            d.position,
            summary,
            "markers" if strip else "lines",
            marker if strip else dict(color=ALL_COLOR, symbol="line-ew-open", line=dict(width=4)),
        ),
        line=dict(color=ALL_COLOR, width=4),
        text=d.level_text,
        name=f"{what} ({scope}, n={d.eligible.size})",
        hovertemplate=f"{what}: {where}, %{{y:.4g}}<extra></extra>",
    )


#: a highlighted curve's marker symbols: at most this many along it
ROW_MARKS = 10


def _row_trace(
    prof: FeatureProfile, curves: np.ndarray, d: _Drawing, pos: int, name: str, *, style: tuple, width: float
):
    """One row's curve on top (a highlighted or the selected row). ``style``: (colour, dash,
    marker symbol); a line carries its symbol every few grid points (``marker.maxdisplayed``:
    plotly.js staggers the traces, so two curves of one row both show), a strip's dots are
    that symbol."""
    color, dash, symbol = style
    n_grid = d.position.size
    if prof.categorical:
        drawn = _line(prof, d.position, curves[pos], "markers", dict(color=color, symbol=symbol, size=4 + 2 * width))
    else:
        drawn = _line(prof, d.position, curves[pos], "lines", dict(color=color, symbol=symbol, size=9))
        drawn["mode"] = "lines+markers"
        if prof.has_missing_point:  # symbols every few points, and the lone point at "missing"
            sizes = np.zeros(n_grid + 1)
            step = max(1, -(-(n_grid - 1) // ROW_MARKS))
            sizes[: n_grid - 1 : step], sizes[-1] = 9, 11
            drawn["marker"] = {**drawn["marker"], "size": sizes}
        else:
            drawn["marker"] = {**drawn["marker"], "maxdisplayed": ROW_MARKS}
    return go.Scatter(
        _validate=False,
        **drawn,
        customdata=np.repeat(d.labels[pos : pos + 1], n_grid + int(prof.has_missing_point)).tolist(),
        name=name,
        line=dict(color=color, width=width, dash=dash),
        text=d.level_text,
        hovertemplate=_hover(prof, d.feature),
    )


def _curves_layout(fig, prof: FeatureProfile, kind: str, d: _Drawing, *, masked: bool, centered: bool) -> go.Figure:
    """Title (how many of the eligible rows are drawn), axes and legend."""
    x = _x_values(prof)
    n_grid = x.size
    shown = np.concatenate([d.drawn, d.largest, d.smallest, [] if d.selected is None else [d.selected]]).astype(int)
    n_shown = np.intersect1d(shown, d.eligible).size
    loss = _loss_name(prof.params)
    what = {"ICI": "PI", "ICE": "PD"}[kind]
    if kind == "ICI":
        ytitle = f"ICI: change in {loss}"
    else:
        ytitle = "prediction" if d.output is None else f"predicted P({d.output})"
    if centered:
        ytitle += f" (centred at {d.feature} = {x[0]})"
    xaxis: dict = dict(title=d.feature)
    if prof.categorical:
        xaxis.update(
            tickmode="array", tickvals=list(range(n_grid)), ticktext=[esc(v) for v in x], range=[-0.6, n_grid - 0.4]
        )
    title = (
        f"{'centred ' if centered else ''}{kind} curves of {d.feature}{' in the subgroup' if masked else ''}: "
        f"{n_shown} of {d.eligible.size} observations drawn, {what} on top"
    )
    fig = _style(
        fig,
        title,
        f"{kind.lower()}-{prof.feature}",
        height=540,
        xaxis=xaxis,
        yaxis=dict(title=ytitle),
        legend=LEGEND_BELOW,
        margin=dict(l=10, r=10, t=85, b=120),
        annotations=_missing_axis(prof),
    )
    if d.cols.size < n_grid:
        fig.layout.title.subtitle.text = f"curves on {d.cols.size} of {n_grid} grid points"
    return fig


def ale_figure(ale: pd.DataFrame, *, feature, subtitle: str = "", label: str | None = None) -> go.Figure:
    """Accumulated local effects (centred) with the rows per interval below.

    ``ale``: columns grid, ale, weight, n_obs as :func:`compute.ale_from_profile` returns;
    ``n_obs[k]`` counts the rows in the interval ending at ``grid[k]``, drawn as a bar over
    that interval. ``label``: the feature as people read it (default its column name).
    """
    shown = label or str(feature)
    if ale is None or ale.empty:
        return empty_figure(f"No ALE computed for {shown}.")
    grid = ale["grid"].to_numpy(float)
    top, bottom = _stacked(0.78)
    layout = top.pop("layout")
    traces = [
        go.Scatter(
            _validate=False,
            x=grid,
            y=ale["ale"].to_numpy(float),
            mode="lines+markers",
            name="ALE",
            line=dict(color=ALL_COLOR, width=3),
            hovertemplate=f"{esc(shown)} = %{{x:.4g}}<br>ALE %{{y:.4g}}<extra></extra>",
            **top,
        ),
        go.Bar(
            _validate=False,
            x=(grid[1:] + grid[:-1]) / 2,
            y=ale["n_obs"].to_numpy()[1:],
            width=0.95 * np.diff(grid),
            name="rows per interval",
            marker_color=CURVE_COLOR,
            showlegend=False,
            hovertemplate="%{y} rows in this interval<extra></extra>",
            **bottom,
        ),
    ]
    _merge(layout["xaxis2"], dict(title=dict(text=shown)))
    # short: a longer title runs past the top panel into the "rows" title below it (axis
    # titles are escaped, so no line break); the view's question says what it measures
    _merge(layout["yaxis"], dict(title=dict(text="ALE: centred effect")))
    _merge(layout["yaxis2"], dict(title=dict(text="rows")))
    title = f"ALE of {shown}: accumulated local effects on {grid.size - 1} intervals"
    return _style(traces, title, f"ale-{feature}", subtitle=subtitle, height=420, showlegend=False, **layout)
