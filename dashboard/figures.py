"""Pure figure builders: a result object in, a plotly ``go.Figure`` out.

No model calls, no I/O, nothing global set at import; the only randomness is a seeded
``np.random.default_rng(random_state)`` choosing which ICI/ICE curves to draw. Every bar and
curve point a user may click carries ``customdata`` naming the feature or the observation
(row label; the big curve trace keeps it a numeric array, sent as a compact typed array:
plotly.js leaves that out of a WebGL click event, so a clientside callback reads it from the
graph by point number), so callbacks read the selection from ``clickData`` and never from the figure's
data arrays.

Text a visitor controls (column names, levels, class and model names, subgroup text) is never
drawn as markup: Plotly draws a subset of HTML in every text it shows (links, styles). Callers
pass plain text. :func:`_style` escapes what holds only data (titles, subtitles, axis titles,
category values in x, y, ``categoryarray`` and ``tickvals``, trace names); builders escape
with :func:`esc` each name they write into text that holds our own markup (hover templates,
``hovertext``, ``text``, ``ticktext``), and hover shows the escaped axis value, never raw
``customdata``.

Papers: seed 000 = Casalicchio, Molnar & Bischl (2018), "Visualizing the Feature Importance
for Black Box Models" (PFI, PI/ICI curves, SFIMP); seed 003 = Främling (2022), contextual
importance and utility (CIU).
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

import compute
from compute.results import FeatureProfile

# --- theme -------------------------------------------------------------------------------
# The look of plotly's "plotly_white", spelled out: naming the template makes plotly.py copy
# and validate all of it for every figure (~90 ms each, most of a view switch's time).
_GRID = "#EBF0F8"
_AXIS = dict(
    gridcolor=_GRID,
    linecolor=_GRID,
    zerolinecolor=_GRID,
    zerolinewidth=2,
    automargin=True,
    ticks="",
    title=dict(standoff=15),
)
TEMPLATE = dict(
    layout=dict(
        paper_bgcolor="white",
        plot_bgcolor="white",
        font=dict(color="#2a3f5f"),
        colorway=["#636efa", "#EF553B", "#00cc96", "#ab63fa", "#FFA15A", "#19d3f3", "#FF6692", "#B6E880"],
        hoverlabel=dict(align="left"),
        hovermode="closest",
        xaxis=_AXIS,
        yaxis=_AXIS,
    )
)
MARGIN = dict(l=10, r=10, t=85, b=40)
ALL_COLOR = "#4c72b0"  # all data: PI/PD summary line, single-model bars
CURVE_COLOR = "#8c8c8c"  # background ICI/ICE curves and marginal distribution
CURVE_OPACITY = 0.25
MODEL_COLORS = ("#4c72b0", "#dd8452", "#8172b3", "#937860", "#da8bc3", "#64b5cd", "#8c8c8c")
GROUP_COLORS = ("#e7298a", "#7570b3", "#e6ab02", "#66a61e", "#a6761d", "#17becf")
LARGEST_COLOR = "#1a9850"  # largest ICI integral (Fig. 6)
SMALLEST_COLOR = "#d73027"  # smallest ICI integral (Fig. 6)
SELECTED_COLOR = "#ff7f00"  # the selected observation
POSITIVE_COLOR, NEGATIVE_COLOR = LARGEST_COLOR, SMALLEST_COLOR
CI_OPACITY = 0.35  # CIU: CI transparent, CU solid (seed 003, Fig. 3)
PX_PER_FEATURE, MIN_HEIGHT = 28, 300
MISSING_LABEL = "(missing)"
DIAMOND = "diamond"
# a legend of several long entries: below the plot, clear of the title and subtitle
LEGEND_BELOW = dict(orientation="h", yref="container", yanchor="bottom", y=0.0, xanchor="left", x=0.0)


def esc(value) -> str:
    """``value`` as text Plotly draws as it is: ``<``, ``>`` and ``&`` as entities (Plotly
    turns entities back into the characters, and draws tags only from raw ``<``)."""
    return html.escape(str(value), quote=False)


def _plain(values):
    """Strings among ``values`` (a scalar, list, tuple or array) escaped; numbers untouched."""
    if isinstance(values, str):
        return esc(values)
    if isinstance(values, np.ndarray):
        if values.dtype.kind != "O" and values.dtype.kind != "U":
            return values
        return np.array([esc(v) if isinstance(v, str) else v for v in values.ravel()], dtype=object).reshape(
            values.shape
        )
    if isinstance(values, (list, tuple)):
        return [esc(v) if isinstance(v, str) else v for v in values]
    return values


_DATA_TEXT = ("x", "y", "name")  # trace properties that hold only data (no markup of ours)
_AXIS_DATA = ("categoryarray", "tickvals")


def _escape_data_text(fig: go.Figure, spec: dict) -> None:
    """Escape, in place, the texts that hold only data (see the module docstring)."""
    title = spec.get("title")
    if isinstance(title, dict):
        if isinstance(title.get("text"), str):
            title["text"] = esc(title["text"])
        sub = title.get("subtitle")
        if isinstance(sub, dict) and isinstance(sub.get("text"), str):
            sub["text"] = esc(sub["text"])
    for key, axis in spec.items():
        if not (key.startswith(("xaxis", "yaxis")) and isinstance(axis, dict)):
            continue
        if isinstance(axis.get("title"), dict) and isinstance(axis["title"].get("text"), str):
            axis["title"]["text"] = esc(axis["title"]["text"])
        for name in _AXIS_DATA:
            if axis.get(name) is not None:
                axis[name] = _plain(axis[name])
    for trace in fig.data:
        for name in _DATA_TEXT:
            value = trace[name] if name in trace else None
            if value is not None:
                escaped = _plain(value)
                if escaped is not value:
                    trace[name] = escaped


def _figure(*traces) -> go.Figure:
    """A figure born with our template (setting one later first copies plotly's default)."""
    return go.Figure(data=list(traces) or None, layout=dict(template=TEMPLATE), _validate=False)


def _style(fig: go.Figure, title: str, uirevision: str, *, subtitle: str = "", **layout) -> go.Figure:
    """The figure with our title, legend, margins and ``layout`` merged into its layout.

    Built as one plain layout dict and wrapped without validation: ``update_layout`` parses
    and validates every key path (~15 ms a call), most of a view's server time."""
    spec = fig.layout.to_plotly_json()
    _merge(
        spec,
        dict(
            margin=dict(MARGIN),  # a copy: the figure's own margin is merged into it
            uirevision=uirevision,
            title=dict(text=title, x=0.01, xanchor="left", y=0.99, yref="container", yanchor="top", font=dict(size=14))
            | (dict(subtitle=dict(text=subtitle, font=dict(size=12, color="#6b7280"))) if subtitle else {}),
            legend=dict(orientation="h", yanchor="bottom", y=1.01, xanchor="right", x=1.0),
        ),
    )
    _merge(spec, layout)
    for key, axis in spec.items():  # Plotly.js drops a plain-string axis title: give it as text
        if key.startswith(("xaxis", "yaxis")) and isinstance(axis, dict) and isinstance(axis.get("title"), str):
            axis["title"] = dict(text=axis["title"])
    _escape_data_text(fig, spec)
    return go.Figure(data=fig.data, layout=spec, _validate=False)


def _stacked(top_share: float, gap: float = 0.03) -> tuple[dict, dict]:
    """Axes of two plots stacked over one shared x axis, named as ``make_subplots(rows=2,
    shared_xaxes=True)`` names them (top x/y, bottom x2/y2) without its ~50 ms. Returns the
    (top, bottom) trace axis refs; the layout part is in ``top["layout"]``."""
    split = 1.0 - top_share
    layout = dict(
        xaxis=dict(anchor="y", domain=[0.0, 1.0], matches="x2", showticklabels=False),
        yaxis=dict(anchor="x", domain=[split + gap / 2, 1.0]),
        xaxis2=dict(anchor="y2", domain=[0.0, 1.0]),
        yaxis2=dict(anchor="x2", domain=[0.0, split - gap / 2]),
    )
    return {"xaxis": "x", "yaxis": "y", "layout": layout}, {"xaxis": "x2", "yaxis": "y2"}


def _merge(into: dict, extra: dict) -> dict:
    """Deep-merge plain dicts (plotly objects are turned into dicts first)."""
    for key, value in extra.items():
        if hasattr(value, "to_plotly_json"):
            value = value.to_plotly_json()
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value
    return into


# --- small helpers -------------------------------------------------------------------------
def _is_missing(value) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, (float, np.floating)) and np.isnan(value)


def level_label(value) -> str:
    """Axis label of a categorical level; missing values become "(missing)"."""
    return MISSING_LABEL if _is_missing(value) else str(value)


def value_text(value) -> str:
    """A value for people: numbers to 4 significant digits, levels as text, missing values
    as "(missing)"."""
    if isinstance(value, (float, np.floating)) and not _is_missing(value):
        return f"{value:.4g}"
    return level_label(value)


def prediction_text(value: float, unit: str, sign: str = "") -> str:
    """A prediction: percentage points (``unit`` "pp") with one decimal, else 4 significant
    digits; ``sign="+"`` for a change."""
    return f"{value:{sign}.1f} pp" if unit == "pp" else f"{value:{sign}.4g}"


def _json_label(value):
    """A row or feature label as clickData returns it: ints stay ints, the rest strings."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return value
    return value if isinstance(value, str) else str(value)


def _labels_array(index: pd.Index) -> np.ndarray:
    """Row labels for customdata: an int array for integer labels, else an object array of str."""
    if pd.api.types.is_integer_dtype(index.dtype):
        return np.asarray(index, dtype=np.int64)
    return np.array([_json_label(v) for v in index], dtype=object)


def _x_values(prof: FeatureProfile) -> np.ndarray:
    """The grid as x values: floats, or level labels (strings) for a categorical feature.
    A numeric grid's missing point (NaN) is placed a little right of the largest value
    (:func:`_missing_x`), drawn as a marker apart from the lines."""
    if prof.categorical:
        return np.array([level_label(v) for v in prof.grid], dtype=object)
    x = np.asarray(prof.grid, dtype=float).copy()
    if prof.has_missing_point:
        x[-1] = _missing_x(x[:-1])
    return x


def _missing_x(finite: np.ndarray) -> float:
    """Where a numeric feature's "missing" point is drawn: 8 % of the range right of the maximum."""
    low, high = float(np.min(finite)), float(np.max(finite))
    return high + 0.08 * ((high - low) or 1.0)


def _line(prof: FeatureProfile, x: np.ndarray, y: np.ndarray, mode: str, marker: dict) -> dict:
    """x, y, mode and marker of a curve over the grid: with a missing point, the line stops at
    the largest value and the missing point is a lone marker after a gap."""
    if not prof.has_missing_point or mode != "lines":
        return dict(x=x, y=y, mode=mode, marker=marker)
    sizes = np.zeros(x.size + 1)
    sizes[-1] = 11
    return dict(
        x=np.r_[x[:-1], np.nan, x[-1]],
        y=np.r_[np.asarray(y, float)[:-1], np.nan, np.asarray(y, float)[-1]],
        mode="lines+markers",
        marker={**marker, "size": sizes},
    )


def _missing_axis(prof: FeatureProfile, axis_ref: str = "x") -> list[dict]:
    """Annotations marking the missing point on the x axis (none without one)."""
    if not prof.has_missing_point:
        return []
    share = float(prof.grid_weights[-1])
    return [
        dict(
            x=_x_values(prof)[-1],
            xref=axis_ref,
            y=0,
            yref="paper",
            yanchor="top",
            yshift=-22,
            text=f"missing ({share:.0%})",
            showarrow=False,
            font=dict(size=11, color="#6b7280"),
        )
    ]


def _category_axis(prof: FeatureProfile) -> dict:
    if not prof.categorical:
        return {}
    return dict(type="category", categoryorder="array", categoryarray=list(_x_values(prof)))


def _mask_array(prof: FeatureProfile, mask) -> np.ndarray:
    """A boolean array over ``prof.rows`` from a boolean array or a Series indexed by row labels."""
    if isinstance(mask, pd.Series):
        return mask.reindex(prof.rows, fill_value=False).to_numpy(dtype=bool)
    return np.asarray(mask, dtype=bool)


def _position(rows: pd.Index, label) -> int | None:
    """Position of a row label among ``rows`` (also matching its string form), or None."""
    if label is None or isinstance(label, (list, tuple, dict)):
        return None
    hits = np.flatnonzero(rows == label)
    if hits.size == 0:
        hits = np.flatnonzero(rows.astype(str) == str(label))
    return int(hits[0]) if hits.size else None


def _loss_name(params: Mapping[str, Any] | None, default: str = "loss") -> str:
    name = (params or {}).get("loss")
    return str(name) if name else default


def _sort_features(values: pd.DataFrame) -> list:
    """Features by mean value across columns (models), largest first; NaN last."""
    mean = values.mean(axis=1, skipna=True)
    return list(mean.sort_values(ascending=False, na_position="last", kind="stable").index)


def _bar_axis(order: list, selected, n_traces: int = 1) -> tuple[dict, int]:
    """Category y axis with the largest at the top and the selected tick in bold; the height."""
    text = [f"<b>{esc(f)}</b>" if selected is not None and f == selected else esc(f) for f in order]
    axis = dict(
        title=dict(text="feature"),
        type="category",
        categoryorder="array",
        categoryarray=[str(f) for f in order[::-1]],
        tickmode="array",
        tickvals=[str(f) for f in order],
        ticktext=text,
        automargin=True,
    )
    height = max(MIN_HEIGHT, 110 + int(PX_PER_FEATURE * len(order) * max(1.0, n_traces**0.5)))
    return axis, height


def _outline(order: list, selected) -> dict:
    """Bar outlines: a black frame around the selected feature's bars."""
    return dict(width=[2.5 if f == selected else 0 for f in order], color="black")


# --- importance bars (seed 000: PFI and SFIMP) -----------------------------------------------
def pfi_figure(
    pfi: Mapping[str, compute.PermutationImportance], *, selected=None, title: str | None = None, subtitle: str = ""
) -> go.Figure:
    """Permutation feature importance of one or more models as horizontal grouped bars.

    Seed 000, Eq. (4) estimated by Eq. (8): one bar per model and feature (mean over the
    permutations, ``error_x`` = std) and a faint dot per permutation (repeat) so the spread
    is visible. Features are sorted by the mean importance across models, largest on top;
    each bar's and dot's ``customdata`` is the feature name.
    """
    if not pfi:
        return empty_figure("No permutation importance computed yet.")
    models = list(pfi)
    table = pd.concat({m: res.importance for m, res in pfi.items()}, axis=1)
    order = _sort_features(table)
    first = pfi[models[0]]
    kind, loss, n_repeats = first.kind, first.loss, first.n_repeats
    fig = _figure()
    for k, (model, res) in enumerate(pfi.items()):
        color = MODEL_COLORS[k % len(MODEL_COLORS)]
        names = [_json_label(f) for f in order]
        fig.add_trace(
            go.Bar(
                _validate=False,
                name=str(model),
                x=res.importance.reindex(order).to_numpy(float),
                y=[str(f) for f in order],
                orientation="h",
                customdata=names,
                marker=dict(color=color, line=_outline(order, selected)),
                error_x=dict(type="data", array=res.std.reindex(order).to_numpy(float), thickness=1.2),
                **_sample_labels(res, order),
                offsetgroup=str(model),
                legendgroup=str(model),
                hovertemplate=f"{esc(model)}<br>%{{y}}: %{{x:.4g}} ± %{{error_x.array:.3g}}<extra></extra>",
            )
        )
        repeats = res.repeats.reindex(order).to_numpy(float)
        if repeats.size:
            fig.add_trace(
                go.Scatter(
                    _validate=False,
                    x=repeats.ravel(),
                    y=np.repeat([str(f) for f in order], repeats.shape[1]),
                    customdata=np.repeat(np.array(names, dtype=object), repeats.shape[1]).tolist(),
                    mode="markers",
                    marker=dict(color=color, size=4, opacity=0.45, line_width=0),
                    showlegend=False,
                    offsetgroup=str(model),
                    legendgroup=str(model),
                    name=f"{model} repeats",
                    hovertemplate=f"{esc(model)}<br>%{{y}}: one permutation %{{x:.4g}}<extra></extra>",
                )
            )
    what = f"difference in {loss}" if kind == "difference" else f"ratio of {loss}"
    axis_text = (
        f"increase in {loss} when the feature is permuted"
        if kind == "difference"
        else f"{loss} permuted / {loss} original"
    )
    default = f"PFI ({what}), mean ± std over {n_repeats} permutations"
    yaxis, height = _bar_axis(order, selected, len(models))
    return _style(
        fig,
        title or default,
        "pfi",
        subtitle=subtitle,
        barmode="group",
        scattermode="group",
        height=height,
        xaxis=dict(title=axis_text, zeroline=True),
        yaxis=yaxis,
        showlegend=len(models) > 1,
    )


def convergence_figure(
    conv: compute.PfiConvergence, *, loss: str, selected=None, top: int = 6, title: str = "", subtitle: str = ""
) -> go.Figure:
    """PFI after 1..R permutations (the running mean) with its confidence band, for the
    ``top`` features of the final ranking (and the selected feature), seed 001, caveat 2.
    Each band is one closed, filled polygon under its line."""
    final = conv.importance.iloc[:, -1].sort_values(ascending=False, kind="stable")
    shown = list(final.index[:top])
    if selected is not None and selected in final.index and selected not in shown:
        shown.append(selected)
    r = np.asarray(conv.importance.columns, dtype=float)
    fig = _figure()
    for k, feature in enumerate(shown):
        color = MODEL_COLORS[k % len(MODEL_COLORS)]
        lower, upper = conv.lower.loc[feature].to_numpy(float), conv.upper.loc[feature].to_numpy(float)
        keep = np.isfinite(lower) & np.isfinite(upper)
        if keep.sum() >= 2:
            fig.add_trace(
                go.Scatter(
                    _validate=False,
                    x=np.concatenate([r[keep], r[keep][::-1]]),
                    y=np.concatenate([upper[keep], lower[keep][::-1]]),
                    fill="toself",
                    mode="lines",
                    fillcolor=color,
                    opacity=0.15,
                    line=dict(width=0),
                    hoverinfo="skip",
                    showlegend=False,
                    legendgroup=str(feature),
                    name=f"{feature} band",
                )
            )
        width = 3.5 if feature == selected else 2
        fig.add_trace(
            go.Scatter(
                _validate=False,
                x=r,
                y=conv.importance.loc[feature].to_numpy(float),
                mode="lines+markers",
                line=dict(color=color, width=width),
                marker=dict(size=5),
                name=str(feature),
                legendgroup=str(feature),
                customdata=np.stack([lower, upper], axis=1),
                hovertemplate=f"{esc(feature)}<br>after %{{x}} permutations: %{{y:.4g}}"
                "<br>band %{customdata[0]:.4g} to %{customdata[1]:.4g}<extra></extra>",
            )
        )
    n = conv.n_repeats
    return _style(
        fig,
        title or f"PFI after 1 to {n} permutations",
        "convergence",
        subtitle=subtitle,
        height=420,
        xaxis=dict(title="number of permutations", range=[0.5, n + 0.5], dtick=max(1, n // 10)),
        yaxis=dict(title=f"PFI: increase in {loss}", zeroline=True),
        legend=LEGEND_BELOW,
        margin=dict(l=10, r=10, t=85, b=100),
    )


def group_pfi_figure(rows: pd.DataFrame, *, loss: str, title: str = "", subtitle: str = "") -> go.Figure:
    """Grouped PFI against the parts (seed 001, caveat 3): per group (``rows`` indexed by the
    group's label, columns ``together``, ``alone_sum`` and ``alone_text``) one bar for the
    columns shuffled together and one for the sum of the members' own PFI bars."""
    if rows.empty:
        return empty_figure("No strongly dependent features: nothing to shuffle together.", height=200)
    import textwrap

    order = list(rows.sort_values("together", ascending=False).index)
    # long groups ("mean radius + worst radius + ...") wrap onto lines of ~28 characters
    labels = [str(g) for g in order]
    wrapped = ["<br>".join(esc(line) for line in textwrap.wrap(label, 28)) for label in labels]
    fig = _figure(
        go.Bar(
            _validate=False,
            name="shuffled together",
            x=rows.loc[order, "together"].to_numpy(float),
            y=labels,
            orientation="h",
            marker=dict(color=ALL_COLOR),
            hovertemplate="%{y} shuffled together: %{x:.4g}<extra></extra>",
        ),
        go.Bar(
            _validate=False,
            name="each shuffled alone, summed",
            x=rows.loc[order, "alone_sum"].to_numpy(float),
            y=labels,
            orientation="h",
            marker=dict(color=CURVE_COLOR),
            hovertext=[esc(t) for t in rows.loc[order, "alone_text"]],
            hovertemplate="%{hovertext}<br>sum: %{x:.4g}<extra></extra>",
        ),
    )
    yaxis = dict(
        title=dict(text="features shuffled"),
        type="category",
        categoryorder="array",
        categoryarray=labels[::-1],
        tickmode="array",
        tickvals=labels,
        ticktext=wrapped,
        automargin=True,
    )
    return _style(
        fig,
        title or "Shuffled together or one at a time",
        "group-pfi",
        subtitle=subtitle,
        barmode="group",
        height=max(260, 150 + sum(30 + 14 * label.count("<br>") for label in wrapped)),
        xaxis=dict(title=f"PFI: increase in {loss}", zeroline=True),
        yaxis=yaxis,
        legend=LEGEND_BELOW,
        margin=dict(l=10, r=10, t=85, b=90),
    )


def _sample_labels(res: compute.PermutationImportance, order: list) -> dict:
    """On a row sample, each bar's label is its standard error from that sample ("±0.012")."""
    sampled = getattr(res, "sampled", False) or getattr(res, "n_pairs", None) is not None
    if not sampled or res.row_std_error is None:
        return {}
    se = res.row_std_error.reindex(order).to_numpy(float)
    return dict(
        text=[f"±{v:.2g}" if np.isfinite(v) else "" for v in se],
        textposition="outside",
        textfont=dict(size=10, color="#6b7280"),
        cliponaxis=False,
    )


def sfimp_figure(sfimp: Mapping[str, Any], *, selected=None) -> go.Figure:
    """Shapley feature importance (SFIMP) per model, as Fig. 5a of seed 000.

    Bars of each player's Shapley value (``error_x`` = its Monte-Carlo standard error, on a
    row sample combined with the sample's: sqrt(std_error^2 + row_std_error^2)),
    labelled with its share of the explained performance in percent; legend entries give each
    model's error. Sorting, ``customdata`` and selection marking as :func:`pfi_figure`.
    """
    if not sfimp:
        return empty_figure("No Shapley feature importance computed yet.")
    models = list(sfimp)
    order = _sort_features(pd.concat({m: r.values for m, r in sfimp.items()}, axis=1))
    loss = _loss_name(getattr(sfimp[models[0]], "params", None))
    fig = _figure()
    for k, (model, res) in enumerate(sfimp.items()):
        values = res.values.reindex(order).to_numpy(float)
        share = res.proportions.reindex(order).to_numpy(float)
        text = ["" if np.isnan(s) else f"{round(100 * s) + 0:.0f}%" for s in share]
        fig.add_trace(
            go.Bar(
                _validate=False,
                name=f"{model}: error {res.model_error:.3g}",
                x=values,
                y=[str(f) for f in order],
                orientation="h",
                customdata=[_json_label(f) for f in order],
                text=text,
                textposition="inside",
                insidetextanchor="start",
                marker=dict(color=MODEL_COLORS[k % len(MODEL_COLORS)], line=_outline(order, selected)),
                error_x=dict(type="data", array=_sfimp_error(res).reindex(order).to_numpy(float), thickness=1.2),
                hovertemplate=(
                    f"{esc(model)}<br>%{{y}}: SFIMP %{{x:.4g}} ± %{{error_x.array:.3g}}"
                    "<br>share %{text}<extra></extra>"
                ),
            )
        )
    yaxis, height = _bar_axis(order, selected, len(models))
    title = f"SFIMP (drop in {loss}) ± std. error; labels: share of the total"
    return _style(
        fig,
        title,
        "sfimp",
        barmode="group",
        height=height,
        yaxis=yaxis,
        xaxis=dict(title=f"SFIMP (drop in {loss} the feature earns)", zeroline=True),
    )


def _sfimp_error(res) -> pd.Series:
    """The bar's standard error: Monte Carlo, and on a row sample the sample's as well."""
    row = getattr(res, "row_std_error", None)
    if getattr(res, "sampled", False) and row is not None:
        return np.sqrt(res.std_error**2 + row.reindex(res.std_error.index) ** 2)
    return res.std_error


# --- PI curves with the marginal distribution (seed 000, Fig. 4 and 6) ----------------------
def pi_figure(
    prof: FeatureProfile, groups: Mapping[str, np.ndarray] | None = None, *, global_pfi: float | None = None, x_all=None
) -> go.Figure:
    """PI curve of all explained rows and of subgroups, over the feature's distribution.

    Seed 000, Fig. 4 (conditional PI curves: all / X3 = 0 / X3 = 1) with the marginal
    distribution of Fig. 6 on top. ``groups`` maps a label to a boolean mask over
    ``prof.rows``; each group's curve is ``prof.subset(mask).pi`` (same grid, no new
    predictions); empty groups are skipped. ``x_all``: the feature's values in the whole
    data (default: the explained rows' values ``prof.x``).
    """
    if not prof.has_target:
        return empty_figure("PI curves need the target: this data has no target column.")
    x = _x_values(prof)
    loss = _loss_name(prof.params)
    top, bottom = _stacked(0.2)
    layout = top.pop("layout")
    fig = _figure()
    values = prof.x if x_all is None else x_all
    if prof.categorical:
        labels = pd.Series([level_label(v) for v in np.asarray(values, dtype=object)])
        counts = labels.value_counts()
        levels = list(x) + [lv for lv in counts.index if lv not in set(x)]
        fig.add_trace(
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
        )
    else:
        vals = np.asarray(values, dtype=float)
        fig.add_trace(
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
        )
        n_missing = int(np.isnan(vals).sum())
        if prof.has_missing_point and n_missing:
            fig.add_trace(
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
    # unordered levels: one dot per level (a line through them would suggest an order)
    mode = "markers" if prof.categorical else "lines"
    fig.add_trace(
        go.Scatter(
            _validate=False,
            **_line(prof, x, prof.pi, mode, dict(color=ALL_COLOR, size=12)),
            name=f"all (n={len(prof.rows)})",
            line=dict(color=ALL_COLOR, width=3),
            hovertemplate="all: PI(%{x}) = %{y:.4g}<extra></extra>",
            **bottom,
        )
    )
    for k, (label, mask) in enumerate((groups or {}).items()):
        mask = _mask_array(prof, mask)
        if not mask.any():
            continue
        sub = prof.subset(mask)
        fig.add_trace(
            go.Scatter(
                _validate=False,
                **_line(
                    prof, x, sub.pi, mode, dict(color=GROUP_COLORS[k % len(GROUP_COLORS)], size=10, symbol="diamond")
                ),
                name=f"{label} (n={len(sub.rows)})",
                line=dict(color=GROUP_COLORS[k % len(GROUP_COLORS)], width=2.5),
                hovertemplate=f"{esc(label)}: PI(%{{x}}) = %{{y:.4g}}<extra></extra>",
                **bottom,
            )
        )
    if global_pfi is not None:
        y = float(global_pfi)
        layout["shapes"] = [
            dict(
                type="line",
                xref="x2 domain",
                x0=0,
                x1=1,
                yref="y2",
                y0=y,
                y1=y,
                line=dict(dash="dash", color="black", width=1),
            )
        ]
        layout["annotations"] = [
            dict(
                text="global PFI",
                xref="x2 domain",
                x=0,
                yref="y2",
                y=y,
                showarrow=False,
                xanchor="left",
                yanchor="bottom",
            )
        ]
    layout["annotations"] = layout.get("annotations", []) + _missing_axis(prof, "x2")
    _merge(layout["xaxis2"], dict(title=dict(text=str(prof.feature)), **_category_axis(prof)))
    _merge(layout["xaxis"], _category_axis(prof))
    _merge(layout["yaxis"], dict(title=dict(text="count")))
    _merge(layout["yaxis2"], dict(title=dict(text=f"PI: mean change in {loss}")))
    title = f"PI curves of {prof.feature}: mean change in {loss} when {prof.feature} is set to x"
    return _style(
        fig,
        title,
        f"pi-{prof.feature}",
        height=540,
        legend=LEGEND_BELOW,
        margin=dict(l=10, r=10, t=60, b=100),
        **layout,
    )


# --- ICI and ICE curves (seed 000, Fig. 6) --------------------------------------------------
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
) -> go.Figure:
    """ICI curves with the PI curve on top, as Fig. 6 of seed 000.

    The ``highlight`` observations with the largest ICI integral (local importance) are
    green, those with the smallest red; the ``selected`` row is drawn on top of everything.
    ``mask`` restricts the eligible observations to a subgroup, whose PI is then drawn.
    ``centered`` subtracts each curve's value at the first grid point. See
    :func:`_curves_figure` for sampling and thinning.
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
) -> go.Figure:
    """ICE curves (or centred ICE) with the PD curve on top.

    Highlights mark the same rows as in :func:`ici_figure` (largest / smallest ICI
    integral) when the profile has a target, none otherwise.
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
    )


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
    (first and last kept). The summary line keeps the full grid; highlight and selected
    curves are separate traces on top, drawn whether or not they were sampled. Every curve
    point's ``customdata`` is its row label.
    """
    n_obs = len(prof.rows)
    eligible = np.arange(n_obs) if mask is None else np.flatnonzero(_mask_array(prof, mask))
    if eligible.size == 0:
        return empty_figure(f"The subgroup selects none of the {n_obs} explained rows.")
    curves = prof.curves(kind, centered=centered)
    summary = prof.mean_curve(kind, mask=_mask_array(prof, mask) if mask is not None else None, centered=centered)
    x, labels = _x_values(prof), _labels_array(prof.rows)

    rng = np.random.default_rng(random_state)
    drawn = eligible
    if eligible.size > max_curves:
        drawn = np.sort(rng.choice(eligible, size=max(int(max_curves), 0), replace=False))
    n_grid = x.size
    cols = np.arange(n_grid)
    if n_grid > n_points:
        cols = np.unique(np.round(np.linspace(0, n_grid - 1, max(int(n_points), 2))).astype(int))

    largest, smallest = np.array([], dtype=int), np.array([], dtype=int)
    if prof.has_target and highlight > 0:
        top, bottom = compute.rank_extremes(prof.local_importance[eligible], int(highlight))
        largest, smallest = eligible[top], eligible[bottom]  # the tables' rule; a row is drawn once
    sel = _position(prof.rows, selected)

    fig = _figure()
    strip = prof.categorical
    missing = prof.has_missing_point  # the last grid point: drawn as dots apart from the lines
    position = np.arange(n_grid, dtype=float) if strip else x  # levels at 0, 1, 2, ...
    line_cols = cols[:-1] if missing else cols
    width = line_cols.size + 1  # each curve is followed by a gap (NaN)
    xs = np.full((drawn.size, width), np.nan)
    ys = np.full((drawn.size, width), np.nan)
    xs[:, :-1], ys[:, :-1] = position[line_cols], curves[np.ix_(drawn, line_cols)]
    if strip:  # seeded sideways jitter: the dots of one level spread into a strip
        xs[:, :-1] += rng.uniform(-0.28, 0.28, size=(drawn.size, cols.size))
    level_text = np.array([esc(v) for v in x], dtype=object) if strip else None
    where = "%{text}" if strip else "%{x}"
    hover = "row %{customdata}<br>" + f"{esc(prof.feature)} = " + where + "<br>y = %{y:.4g}<extra></extra>"
    background: dict = dict(mode="lines", line=dict(color=CURVE_COLOR, width=1), opacity=CURVE_OPACITY)
    if strip:
        assert level_text is not None
        texts = np.full((drawn.size, width), "", dtype=object)
        texts[:, :-1] = level_text[line_cols]
        background = dict(
            mode="markers", marker=dict(color=CURVE_COLOR, size=4), opacity=0.45, text=texts.ravel().tolist()
        )
    # thousands of SVG markers (a strip over many levels) would be thousands of DOM nodes
    many_dots = strip and drawn.size * cols.size > 5000
    fig.add_trace(
        (go.Scattergl if many_dots else go.Scatter)(
            _validate=False,
            x=xs.ravel(),
            y=ys.ravel().astype(np.float32),
            customdata=np.repeat(labels[drawn], width),
            connectgaps=False,
            name=f"{kind} curves ({drawn.size})" if not strip else f"{kind} values ({drawn.size} rows)",
            hovertemplate=hover,
            **background,
        )
    )
    if missing:  # each drawn curve's value at "missing": a strip of dots right of the lines
        span = float(x[-1] - x[0]) or 1.0
        fig.add_trace(
            go.Scatter(
                _validate=False,
                x=x[-1] + rng.uniform(-0.015, 0.015, size=drawn.size) * span,
                y=curves[drawn, -1],
                customdata=labels[drawn],
                mode="markers",
                marker=dict(color=CURVE_COLOR, size=4),
                opacity=0.45,
                showlegend=False,
                name=f"{kind} at missing",
                hovertemplate=f"row %{{customdata}}<br>{esc(prof.feature)} missing<br>y = %{{y:.4g}}<extra></extra>",
            )
        )
    what = {"ICI": "PI", "ICE": "PD"}[kind]
    scope = "all" if mask is None else "subgroup"
    summary_marker = dict(color=ALL_COLOR, size=26, symbol="line-ew", line=dict(width=4, color=ALL_COLOR))
    fig.add_trace(
        go.Scatter(
            _validate=False,
            **_line(
                prof,
                position,
                summary,
                "markers" if strip else "lines",
                summary_marker if strip else dict(color=ALL_COLOR, symbol="line-ew-open", line=dict(width=4)),
            ),
            line=dict(color=ALL_COLOR, width=4),
            text=level_text,
            name=f"{what} ({scope}, n={eligible.size})",
            hovertemplate=f"{what}: {where}, %{{y:.4g}}<extra></extra>",
        )
    )

    def one(pos: int, name: str, color: str, line_width: float) -> None:
        fig.add_trace(
            go.Scatter(
                _validate=False,
                **_line(
                    prof,
                    position,
                    curves[pos],
                    "markers" if strip else "lines",
                    dict(color=color, size=4 + 2 * line_width),
                ),
                customdata=np.repeat(labels[pos : pos + 1], n_grid + int(missing)).tolist(),
                name=name,
                line=dict(color=color, width=line_width),
                text=level_text,
                hovertemplate=hover,
            )
        )

    local = prof.local_importance if prof.has_target else np.full(len(prof.rows), np.nan)
    for pos in largest:
        one(pos, f"largest integral: row {prof.rows[pos]} ({local[pos]:.3g})", LARGEST_COLOR, 2.5)
    for pos in smallest:
        one(pos, f"smallest integral: row {prof.rows[pos]} ({local[pos]:.3g})", SMALLEST_COLOR, 2.5)
    if sel is not None:
        note = "" if np.isin(sel, eligible) else ", not in subgroup"
        value = f" ({local[sel]:.3g}{note})" if local is not None else (f" ({note[2:]})" if note else "")
        one(sel, f"selected: row {prof.rows[sel]}{value}", SELECTED_COLOR, 4)

    shown = np.concatenate([drawn, largest, smallest, [] if sel is None else [sel]]).astype(int)
    n_shown = np.intersect1d(shown, eligible).size
    label = "" if mask is None else " in the subgroup"
    loss = _loss_name(prof.params)
    if kind == "ICI":
        ytitle = f"ICI: change in {loss}"
    else:
        ytitle = "prediction" if prof.output is None else f"predicted P({prof.output})"
    if centered:
        ytitle += f" (centred at {prof.feature} = {x[0]})"
    xaxis: dict = dict(title=str(prof.feature))
    if strip:
        xaxis.update(
            tickmode="array", tickvals=list(range(n_grid)), ticktext=[esc(v) for v in x], range=[-0.6, n_grid - 0.4]
        )
    title = (
        f"{'centred ' if centered else ''}{kind} curves of {prof.feature}{label}: "
        f"{n_shown} of {eligible.size} observations drawn, {what} on top"
    )
    sub = f"curves on {cols.size} of {n_grid} grid points" if cols.size < n_grid else None
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
    if sub:
        fig.layout.title.subtitle.text = sub
    return fig


# --- CIU (seed 003) --------------------------------------------------------------------------
def ciu_figure(
    ciu: pd.DataFrame, *, title: str | None = None, subtitle: str = "", reference: pd.DataFrame | None = None
) -> go.Figure:
    """Contextual importance and utility of one instance, as Fig. 3 of seed 003.

    CI is a half-transparent bar; CU a solid bar of length CI * CU inside it (overlay), so
    the solid share of each bar is the utility. Features sorted by CI, largest on top;
    features whose CI or CU left [0, 1] (``out_of_range``) carry a marker. ``reference``
    (the same row before a what-if edit) adds its CI and CI x CU as open markers.
    """
    if ciu is None or ciu.empty:
        return empty_figure("No contextual importance computed yet.")
    order = list(ciu["CI"].sort_values(ascending=False, na_position="last", kind="stable").index)
    df = ciu.reindex(order)
    y = [str(f) for f in order]
    names = [_json_label(f) for f in order]
    hover = [
        f"{esc(f)}<br>CI = {r.CI:.3g}, CU = {r.CU:.3g}<br>ymin = {r.ymin:.4g}, ymax = {r.ymax:.4g},"
        f" y = {r.y:.4g}" + (" <br>out of range: the model over/undershoots" if r.out_of_range else "")
        for f, r in zip(order, df.itertuples())
    ]
    common = dict(y=y, orientation="h", customdata=names, hovertext=hover, hovertemplate="%{hovertext}<extra></extra>")
    fig = _figure()
    fig.add_trace(
        go.Bar(
            _validate=False,
            x=df["CI"].to_numpy(float),
            name="CI (contextual importance)",
            marker=dict(color=ALL_COLOR),
            opacity=CI_OPACITY,
            **common,
        )
    )
    fig.add_trace(
        go.Bar(
            _validate=False,
            x=(df["CI"] * df["CU"]).to_numpy(float),
            name="CI × CU (contextual utility)",
            marker=dict(color=ALL_COLOR),
            width=0.5,
            **common,
        )
    )
    flagged = df["out_of_range"].to_numpy(bool)
    if flagged.any():
        fig.add_trace(
            go.Scatter(
                _validate=False,
                x=df["CI"].to_numpy(float)[flagged],
                y=np.array(y, dtype=object)[flagged],
                customdata=np.array(names, dtype=object)[flagged].tolist(),
                mode="markers+text",
                text=["out of range"] * int(flagged.sum()),
                textposition="middle right",
                cliponaxis=False,  # the label may stand right of the plot area
                marker=dict(symbol="triangle-left", color=SMALLEST_COLOR, size=10),
                name="out of range",
                hovertext=np.array(hover, dtype=object)[flagged],
                hovertemplate="%{hovertext}<extra></extra>",
            )
        )
    if reference is not None:
        before = reference.reindex(order)
        for x, name, symbol in (
            (before["CI"], "CI before the edit", "line-ns-open"),
            (before["CI"] * before["CU"], "CI × CU before the edit", "circle-open"),
        ):
            fig.add_trace(
                go.Scatter(
                    _validate=False,
                    x=x.to_numpy(float),
                    y=y,
                    customdata=names,
                    mode="markers",
                    marker=dict(symbol=symbol, color="#111827", size=11, line=dict(width=2)),
                    name=name,
                    hovertemplate="%{y}: " + name + " %{x:.3g}<extra></extra>",
                )
            )
    yaxis, height = _bar_axis(order, None)
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
        fig,
        title or default,
        "ciu",
        subtitle=subtitle,
        barmode="overlay",
        height=height,
        yaxis=yaxis,
        xaxis=dict(title="CI: share of the output range the feature spans; solid: CI × CU", zeroline=True),
        **extra,
    )


def influence_figure(ciu: pd.DataFrame) -> go.Figure:
    """Contextual influence CI * (CU - phi0), Eq. (10) of seed 003: signed bars, positive
    green and negative red, sorted by absolute influence (largest on top)."""
    if ciu is None or ciu.empty:
        return empty_figure("No contextual influence computed yet.")
    order = list(ciu["influence"].abs().sort_values(ascending=False, na_position="last", kind="stable").index)
    infl = ciu["influence"].reindex(order).to_numpy(float)
    fig = _figure(
        go.Bar(
            _validate=False,
            x=infl,
            y=[str(f) for f in order],
            orientation="h",
            customdata=[_json_label(f) for f in order],
            marker_color=[POSITIVE_COLOR if v >= 0 else NEGATIVE_COLOR for v in infl],
            name="influence",
            hovertemplate="%{y}: influence %{x:.4g}<extra></extra>",
        )
    )
    yaxis, height = _bar_axis(order, None)
    return _style(
        fig,
        "Contextual influence CI × (CU − φ0): green raises, red lowers the output",
        "influence",
        height=height,
        yaxis=yaxis,
        showlegend=False,
        xaxis=dict(title="contextual influence", zeroline=True, zerolinecolor="black"),
    )


def global_ci_figure(global_ci: pd.DataFrame, *, selected=None) -> go.Figure:
    """Global CI (seed 003, Sec. 4.1): the mean CI over instances, ``error_x`` = its std."""
    if global_ci is None or global_ci.empty:
        return empty_figure("No global contextual importance computed yet.")
    order = _sort_features(global_ci[["CI"]])
    df = global_ci.reindex(order)
    share = df["out_of_range_share"].to_numpy(float) if "out_of_range_share" in df else np.full(len(df), np.nan)
    hover = [
        f"{esc(f)}<br>mean CI = {ci:.3g} ± {sd:.3g}" + ("" if np.isnan(s) else f"<br>out of range: {100 * s:.0f}%")
        for f, ci, sd, s in zip(order, df["CI"], df["CI_std"], share)
    ]
    fig = _figure(
        go.Bar(
            _validate=False,
            x=df["CI"].to_numpy(float),
            y=[str(f) for f in order],
            orientation="h",
            customdata=[_json_label(f) for f in order],
            hovertext=hover,
            hovertemplate="%{hovertext}<extra></extra>",
            error_x=dict(type="data", array=df["CI_std"].to_numpy(float), thickness=1.2),
            name="global CI",
            marker=dict(color=ALL_COLOR, line=_outline(order, selected)),
        )
    )
    yaxis, height = _bar_axis(order, selected)
    return _style(
        fig,
        "Global contextual importance: mean CI over instances ± std",
        "global-ci",
        height=height,
        yaxis=yaxis,
        showlegend=False,
        xaxis=dict(title="mean CI (share of the output range)", zeroline=True),
    )


# --- ALE ---------------------------------------------------------------------------------------
def ale_figure(ale: pd.DataFrame, *, feature, subtitle: str = "") -> go.Figure:
    """Accumulated local effects (centred) with the rows per interval below.

    ``ale``: columns grid, ale, weight, n_obs as :func:`compute.ale_from_profile` returns;
    ``n_obs[k]`` counts the rows in the interval ending at ``grid[k]``, drawn as a bar over
    that interval.
    """
    if ale is None or ale.empty:
        return empty_figure(f"No ALE computed for {feature}.")
    grid = ale["grid"].to_numpy(float)
    top, bottom = _stacked(0.78)
    layout = top.pop("layout")
    fig = _figure()
    fig.add_trace(
        go.Scatter(
            _validate=False,
            x=grid,
            y=ale["ale"].to_numpy(float),
            mode="lines+markers",
            name="ALE",
            line=dict(color=ALL_COLOR, width=3),
            hovertemplate=f"{esc(feature)} = %{{x:.4g}}<br>ALE %{{y:.4g}}<extra></extra>",
            **top,
        )
    )
    fig.add_trace(
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
        )
    )
    _merge(layout["xaxis2"], dict(title=dict(text=str(feature))))
    _merge(layout["yaxis"], dict(title=dict(text="ALE (centred effect on the prediction)")))
    _merge(layout["yaxis2"], dict(title=dict(text="rows")))
    title = f"ALE of {feature}: accumulated local effects on {grid.size - 1} intervals"
    return _style(fig, title, f"ale-{feature}", subtitle=subtitle, height=420, showlegend=False, **layout)


# --- misc -------------------------------------------------------------------------------------
# --- model performance (issue 14) ------------------------------------------------------------
def calibration_figure(
    curves: list[tuple[str, pd.DataFrame, str, str]], *, output, title: str, subtitle: str = ""
) -> go.Figure:
    """Calibration curves: the predicted probability of ``output`` (x) against how often it
    occurs (y), one line per ``(name, curve, colour, dash)``; ``curve`` is
    :func:`compute.calibration_curve`'s frame. The dotted diagonal is a perfectly calibrated
    model; marker area grows with the rows in the bin."""
    fig = _figure(
        go.Scatter(
            _validate=False,
            x=[0, 1],
            y=[0, 1],
            mode="lines",
            line=dict(color=CURVE_COLOR, dash="dot", width=1),
            name="perfectly calibrated",
            hoverinfo="skip",
        )
    )
    for name, curve, color, dash in curves:
        n = curve["n"].to_numpy(float)
        fig.add_trace(
            go.Scatter(
                _validate=False,
                x=curve["predicted"].to_numpy(float),
                y=curve["observed"].to_numpy(float),
                customdata=n,
                mode="lines+markers",
                name=name,
                line=dict(color=color, dash=dash, width=2),
                marker=dict(color=color, size=np.clip(4 + 12 * np.sqrt(n / max(n.max(), 1)), 4, 16)),
                hovertemplate=f"{esc(name)}<br>predicted %{{x:.2f}}, observed %{{y:.2f}} (%{{customdata:,}} rows)"
                "<extra></extra>",
            )
        )
    label = level_label(output)
    return _style(
        fig,
        title,
        "calibration",
        height=400,
        subtitle=subtitle,
        xaxis=dict(title=f"predicted probability of {label}", range=[-0.02, 1.02], tickformat=".0%"),
        yaxis=dict(title=f"share that is {label}", range=[-0.02, 1.02], tickformat=".0%"),
    )


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
) -> go.Figure:
    """Points ``(name, x, y, colour)`` per group (WebGL), e.g. predicted against observed
    (``diagonal``: the line y = x) or residuals against a feature (``zero_line``). A
    categorical x is drawn on a category axis."""
    fig = _figure()
    values = [np.asarray(y, float) for _, _, y, _ in groups if len(y)]
    if diagonal and values:
        xs = [np.asarray(x, float) for _, x, _, _ in groups if len(x)]
        low = float(min(min(v.min() for v in values), min(v.min() for v in xs)))
        high = float(max(max(v.max() for v in values), max(v.max() for v in xs)))
        fig.add_trace(
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
    for name, x, y, color in groups:
        points: Any = [level_label(v) for v in x] if categorical else np.asarray(x, float)
        fig.add_trace(
            go.Scattergl(
                _validate=False,
                x=points,
                y=np.asarray(y, float),
                mode="markers",
                name=name,
                marker=dict(color=color, size=5, opacity=0.55, line_width=0),
                hovertemplate=f"{esc(name)}<br>{esc(x_title)}: %{{x}}<br>{esc(y_title)}: %{{y:.4g}}<extra></extra>",
            )
        )
    shapes = []
    if zero_line:
        shapes.append(
            dict(type="line", xref="paper", x0=0, x1=1, y0=0, y1=0, line=dict(color="#555555", width=1, dash="dot"))
        )
    return _style(
        fig,
        title,
        "scatter",
        height=400,
        subtitle=subtitle,
        xaxis=dict(title=x_title, type="category" if categorical else "-"),
        yaxis=dict(title=y_title),
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
    probabilities in percentage points, ``unit`` "pp")."""
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

    def fmt(v: float, sign: str = "") -> str:
        return f"{v:{sign}.1f}{suffix}" if unit == "pp" else f"{v:{sign}.3g}{suffix}"

    text = [fmt(v, "+") for v in values]
    fig = _figure(
        go.Waterfall(
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
    )
    height = max(MIN_HEIGHT, PX_PER_FEATURE * (len(values) + 2) + 130)
    ends = np.concatenate([[0.0, base * scale], base * scale + np.cumsum(values), [prediction * scale]])
    low, high = float(ends.min()), float(ends.max())
    pad = max(high - low, 1e-12) * 0.22  # room for the labels outside the bars on both sides
    return _style(
        fig,
        title,
        "waterfall",
        subtitle=subtitle,
        height=height,
        xaxis=dict(title=f"prediction{suffix}" if unit else "prediction", range=[low - pad, high + pad]),
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
) -> go.Figure:
    """One row's ICE curve over a feature before (dashed) and after (solid) a what-if edit,
    each with a marker where the row's own value puts it. ``curves``: (2, n_grid);
    ``points``: ((x before, y before), (x after, y after)); a categorical feature's levels
    are dots (its levels have no order to draw a line through)."""
    x = np.array([level_label(v) for v in grid], dtype=object) if categorical else np.asarray(grid, dtype=float)
    fig = _figure()
    styles = (("before the edit", "#9ca3af", "dash"), ("as edited", SELECTED_COLOR, "solid"))
    for k, (name, color, dash) in enumerate(styles):
        fig.add_trace(
            go.Scatter(
                _validate=False,
                x=x,
                y=np.asarray(curves[k], dtype=float) * scale,
                mode="markers" if categorical else "lines",
                line=dict(color=color, dash=dash, width=2),
                marker=dict(color=color, size=8),
                name=f"{name}: curve",
                showlegend=False,
                hovertemplate=f"{esc(feature)} = %{{x}}<br>{esc(y_title)}: %{{y:.4g}}<extra>{name}</extra>",
            )
        )
    for k, (name, color, _) in enumerate(styles):
        (px, py) = points[k]
        shown = level_label(px) if categorical else px
        fig.add_trace(
            go.Scatter(
                _validate=False,
                x=[shown],
                y=[py * scale],
                mode="markers",
                marker=dict(color=color, size=13, symbol="circle" if k else "circle-open", line=dict(width=2)),
                name=f"{name}: {feature} = {shown if categorical else f'{px:.4g}'}, {py * scale:.4g}",
                hovertemplate=f"{name}<br>{esc(feature)} = %{{x}}<br>{esc(y_title)}: %{{y:.4g}}<extra></extra>",
            )
        )
    xaxis: dict = dict(title=str(feature))
    if categorical:
        xaxis.update(type="category", categoryorder="array", categoryarray=list(x))
    return _style(
        fig,
        title,
        "whatif",
        subtitle=subtitle,
        height=360,
        xaxis=xaxis,
        yaxis=dict(title=y_title),
        legend=dict(orientation="h", yanchor="top", y=-0.2, xanchor="left", x=0.0),
        margin=dict(l=10, r=10, t=85, b=80),
    )


def empty_figure(message: str, *, height: int = MIN_HEIGHT) -> go.Figure:
    """A blank figure showing ``message`` in its centre (no data, missing target, errors);
    ``height``: smaller for a lasting note (a view that does not apply) than for a wait."""
    import textwrap

    fig = _figure()
    text = "<br>".join(esc(line) for line in textwrap.wrap(str(message), 60)) or " "
    fig.add_annotation(
        text=text, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False, font=dict(size=15, color="#555555")
    )
    return _style(fig, "", "empty", height=height, xaxis=dict(visible=False), yaxis=dict(visible=False))


def table_data(df: pd.DataFrame, *, index_name: str | None = None, digits: int = 4) -> tuple[list[dict], list[dict]]:
    """``(records, columns)`` for a dash DataTable: the index as first column, floats rounded
    to ``digits`` significant digits, missing values as None, column ids as strings."""
    frame = df.copy()
    names = [index_name] if index_name is not None and frame.index.nlevels == 1 else list(frame.index.names)
    frame.index.names = [
        str(n) if n is not None else ("index" if frame.index.nlevels == 1 else f"level_{i}")
        for i, n in enumerate(names)
    ]
    frame = frame.reset_index()
    frame.columns = [str(c) for c in frame.columns]

    def cell(v):
        if _is_missing(v):
            return None
        if isinstance(v, (bool, np.bool_)):
            return bool(v)
        if isinstance(v, (int, np.integer)):
            return int(v)
        if isinstance(v, (float, np.floating)):
            return float(f"{float(v):.{digits}g}") if np.isfinite(v) else str(float(v))
        return v if isinstance(v, str) else str(v)

    records = [{c: cell(v) for c, v in zip(frame.columns, row)} for row in frame.itertuples(index=False)]
    columns = [
        {
            "name": c,
            "id": c,
            "type": "numeric"
            if pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])
            else "text",
        }
        for c in frame.columns
    ]
    return records, columns
