"""Importance bars: PFI with its repetitions and convergence, grouped PFI, SFIMP, CIU influence
and global CI (seed 000, seed 003)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

import compute

from .common import _bar_axis, _json_label, _loss_name, _outline, _sort_features
from .theme import (
    ALL_COLOR,
    CURVE_COLOR,
    LEGEND_BELOW,
    MODEL_COLORS,
    NEGATIVE_COLOR,
    POSITIVE_COLOR,
    _figure,
    _style,
    empty_figure,
    esc,
)


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
                error_x=dict(type="data", array=res.total_std_error.reindex(order).to_numpy(float), thickness=1.2),
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


def bar_figure(
    values: pd.Series,
    *,
    title: str,
    x_title: str,
    uirevision: str,
    name: str = "value",
    selected=None,
    error: pd.Series | None = None,
    hover: Mapping | None = None,
    subtitle: str = "",
) -> go.Figure:
    """One value per feature as horizontal bars, largest at the top: click a bar to select its
    feature (``customdata`` = the feature), the ``selected`` one outlined and its tick bold;
    ``error``: a bar's ± spread (``error_x``); ``hover``: each feature's hover text (escaped
    names and our markup; default: the feature and its value to 3 significant digits)."""
    order = _sort_features(values.to_frame())
    shown = values.reindex(order)
    text = [hover[f] if hover is not None else f"{esc(f)}<br>{esc(name)} = {v:.3g}" for f, v in shown.items()]
    fig = _figure(
        go.Bar(
            _validate=False,
            x=shown.to_numpy(float),
            y=[str(f) for f in order],
            orientation="h",
            customdata=[_json_label(f) for f in order],
            hovertext=text,
            hovertemplate="%{hovertext}<extra></extra>",
            **(
                {}
                if error is None
                else {"error_x": dict(type="data", array=error.reindex(order).to_numpy(float), thickness=1.2)}
            ),
            name=name,
            marker=dict(color=ALL_COLOR, line=_outline(order, selected)),
        )
    )
    yaxis, height = _bar_axis(order, selected)
    return _style(
        fig,
        title,
        uirevision,
        subtitle=subtitle,
        height=height,
        yaxis=yaxis,
        showlegend=False,
        xaxis=dict(title=x_title, zeroline=True),
    )


def global_ci_figure(global_ci: pd.DataFrame, *, selected=None) -> go.Figure:
    """Global CI (seed 003, Sec. 4.1): the mean CI over instances, ``error_x`` = its std."""
    if global_ci is None or global_ci.empty:
        return empty_figure("No global contextual importance computed yet.")
    share = global_ci["out_of_range_share"] if "out_of_range_share" in global_ci else pd.Series(np.nan, global_ci.index)
    hover = {
        f: f"{esc(f)}<br>mean CI = {ci:.3g} ± {sd:.3g}" + ("" if np.isnan(s) else f"<br>out of range: {100 * s:.0f}%")
        for f, ci, sd, s in zip(global_ci.index, global_ci["CI"], global_ci["CI_std"], share.to_numpy(float))
    }
    return bar_figure(
        global_ci["CI"],
        title="Global contextual importance: mean CI over instances ± std",
        x_title="mean CI (share of the output range)",
        uirevision="global-ci",
        name="global CI",
        selected=selected,
        error=global_ci["CI_std"],
        hover=hover,
    )
