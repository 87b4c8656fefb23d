"""Importance bars: PFI with its repetitions and convergence, grouped PFI, SFIMP, CIU influence
and global CI (seed 000, seed 003)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

import compute

from .common import _bar_axis, _json_label, _loss_name, _outline, _sort_features, loss_words, shown_name
from .theme import (
    BAR_COLOR,
    CURVE_COLOR,
    LEGEND_BELOW,
    NEGATIVE_COLOR,
    POSITIVE_COLOR,
    _style,
    empty_figure,
    esc,
    model_style,
    signed,
)


def pfi_figure(
    pfi: Mapping[str, compute.PermutationImportance],
    *,
    selected=None,
    title: str | None = None,
    subtitle: str = "",
    names: Mapping[str, str] | None = None,
) -> go.Figure:
    """Permutation feature importance of one or more models as horizontal grouped bars.

    Seed 000, Eq. (4) estimated by Eq. (8): one bar per model and feature (mean over the
    permutations, ``error_x`` = its ``uncertainty``, the standard error written after every
    "±") and a faint dot per permutation (repeat) so the spread is visible. Features are
    sorted by the mean importance across models, largest on top; each bar's and dot's
    ``customdata`` is the feature name. Model k has its colour, hatch and dot symbol
    (:func:`.theme.model_style`), so no model is told by colour alone. ``names``: column
    name -> label, shown on the ticks and in the hover text (every builder takes it).
    """
    if not pfi:
        return empty_figure("No permutation importance computed yet.")
    models = list(pfi)
    order = _order([res.importance for res in pfi.values()])
    first = pfi[models[0]]
    kind, loss = first.kind, loss_words(first.loss)
    style = {m: model_style(k) for k, m in enumerate(models)}
    bars = [
        Bars(
            res.importance,
            str(m),
            res.uncertainty,
            text=_sample_labels(res),
            color=style[m].color,
            pattern=style[m].pattern,
        )
        for m, res in pfi.items()
    ]
    axis_text = (
        f"increase in {loss} when the feature is permuted"
        if kind == "difference"
        else f"{loss} permuted / {loss} original"
    )
    what = f"difference in {loss}" if kind == "difference" else f"ratio of {loss}"
    keys = [_json_label(f) for f in order]
    dots = []
    for model, res in pfi.items():  # a faint dot per permutation, beside its bar
        repeats = res.repeats.reindex(order).to_numpy(float)
        if not repeats.size:
            continue
        dots.append(
            go.Scatter(
                _validate=False,
                x=repeats.ravel(),
                y=np.repeat([str(f) for f in order], repeats.shape[1]),
                customdata=np.repeat(np.array(keys, dtype=object), repeats.shape[1]).tolist(),
                hovertext=np.repeat([esc(shown_name(names, f)) for f in order], repeats.shape[1]).tolist(),
                mode="markers",
                marker=dict(
                    color=style[model].color, symbol=style[model].symbol, size=4, opacity=0.45, line=dict(width=0)
                ),
                showlegend=False,
                offsetgroup=str(model) if len(models) > 1 else None,
                legendgroup=str(model),
                name=f"{model} repeats",
                hovertemplate=f"{esc(model)}<br>%{{hovertext}}: one permutation %{{x:.4g}}<extra></extra>",
            )
        )
    fig = bar_figure(
        bars,
        title=title or f"PFI ({what}), mean ± {first.uncertainty_words}",
        x_title=axis_text,
        uirevision="pfi",
        selected=selected,
        subtitle=subtitle,
        order=order,
        extra=dots,
        names=names,
    )
    fig.layout.scattermode = "group"
    return fig


def convergence_figure(
    conv: compute.PfiConvergence,
    *,
    loss: str,
    selected=None,
    top: int = 6,
    title: str = "",
    subtitle: str = "",
    names: Mapping[str, str] | None = None,
) -> go.Figure:
    """PFI after 1..R permutations (the running mean) with its confidence band, for the
    ``top`` features of the final ranking (and the selected feature), seed 001, caveat 2.
    Each band is one closed, filled polygon under its line; each line has its own colour and
    marker symbol, named in the legend."""
    final = conv.importance.iloc[:, -1].sort_values(ascending=False, kind="stable")
    shown = list(final.index[:top])
    if selected is not None and selected in final.index and selected not in shown:
        shown.append(selected)
    r = np.asarray(conv.importance.columns, dtype=float)
    traces = []
    for k, feature in enumerate(shown):
        color, symbol = model_style(k).color, model_style(k).symbol
        lower, upper = conv.lower.loc[feature].to_numpy(float), conv.upper.loc[feature].to_numpy(float)
        keep = np.isfinite(lower) & np.isfinite(upper)
        if keep.sum() >= 2:
            traces.append(
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
                    name=f"{shown_name(names, feature)} band",
                )
            )
        width = 3.5 if feature == selected else 2
        traces.append(
            go.Scatter(
                _validate=False,
                x=r,
                y=conv.importance.loc[feature].to_numpy(float),
                mode="lines+markers",
                line=dict(color=color, width=width),
                marker=dict(size=7 if feature == selected else 6, symbol=symbol),
                name=shown_name(names, feature),
                legendgroup=str(feature),
                customdata=np.stack([lower, upper], axis=1),
                hovertemplate=f"{esc(shown_name(names, feature))}<br>after %{{x}} permutations: %{{y:.4g}}"
                "<br>band %{customdata[0]:.4g} to %{customdata[1]:.4g}<extra></extra>",
            )
        )
    n = conv.n_repeats
    return _style(
        traces,
        title or f"PFI after 1 to {n} permutations",
        "convergence",
        subtitle=subtitle,
        height=420,
        xaxis=dict(title="number of permutations", range=[0.5, n + 0.5], dtick=max(1, n // 10)),
        yaxis=dict(title=f"PFI: increase in {loss}", zeroline=True),
        legend=LEGEND_BELOW,
        margin=dict(l=10, r=10, t=85, b=100),
    )


def conditional_pfi_figure(
    rows: pd.DataFrame, *, loss: str, subtitle: str = "", selected=None, names: Mapping[str, str] | None = None
) -> go.Figure:
    """Importance once the other features are known (cs-PFI) beside the marginal (the PFI bars):
    per feature (``rows`` indexed by feature, columns ``marginal``, ``conditional`` and their
    ``*_std_error``) a solid bar for the feature shuffled among all rows (as the PFI bars) and a
    hatched one for it shuffled within similar rows."""
    if rows.empty:
        return empty_figure("Importance once the other features are known: not computed.", height=200)
    marginal = Bars(
        rows["marginal"], "shuffled among all rows (the bars above)", rows["marginal_std_error"], color=BAR_COLOR
    )
    conditional = Bars(
        rows["conditional"],
        "shuffled within similar rows (once the others are known)",
        rows["conditional_std_error"],
        color=BAR_COLOR,
        pattern="/",
    )
    fig = bar_figure(
        [marginal, conditional],
        title="Importance once the other features are known",
        x_title=f"increase in {loss} when shuffled",
        uirevision="cs-pfi",
        selected=selected,
        subtitle=subtitle,
        legend=LEGEND_BELOW,
        names=names,
    )
    fig.layout.margin = dict(l=10, r=10, t=85, b=100)
    return fig


def group_pfi_figure(rows: pd.DataFrame, *, loss: str, title: str = "", subtitle: str = "") -> go.Figure:
    """Grouped PFI against the parts (seed 001, caveat 3): per group (``rows`` indexed by the
    group's label, columns ``together``, ``alone_sum`` and ``alone_text``) one bar for the
    columns shuffled together (solid) and one for the sum of the members' own PFI bars (grey,
    hatched)."""
    if rows.empty:
        return empty_figure("No strongly dependent features: nothing to shuffle together.", height=200)
    order = list(rows.sort_values("together", ascending=False).index)
    together = Bars(
        rows["together"],
        "shuffled together",
        hover={g: f"{esc(g)} shuffled together: {v:.4g}" for g, v in rows["together"].items()},
        color=BAR_COLOR,
    )
    alone = Bars(
        rows["alone_sum"],
        "each shuffled alone, summed",
        hover={g: f"{esc(t)}<br>sum: {v:.4g}" for g, t, v in zip(rows.index, rows["alone_text"], rows["alone_sum"])},
        color=CURVE_COLOR,
        pattern="x",
    )
    fig = bar_figure(
        [together, alone],
        title=title or "Shuffled together or one at a time",
        x_title=f"PFI: increase in {loss}",
        uirevision="group-pfi",
        subtitle=subtitle,
        order=order,
        y_title="features shuffled",
        wrap=28,
        legend=LEGEND_BELOW,
    )
    fig.layout.margin = dict(l=10, r=10, t=85, b=90)
    return fig


def _sample_labels(res: compute.PermutationImportance) -> dict | None:
    """On a row sample, each bar's label is its standard error from that sample ("±0.012")."""
    sampled = getattr(res, "sampled", False) or getattr(res, "n_pairs", None) is not None
    if not sampled or res.row_std_error is None:
        return None
    return {f: (f"±{v:.2g}" if np.isfinite(v) else "") for f, v in res.row_std_error.items()}


def sfimp_figure(sfimp: Mapping[str, Any], *, selected=None, names: Mapping[str, str] | None = None) -> go.Figure:
    """Shapley feature importance (SFIMP) per model, as Fig. 5a of seed 000.

    Bars of each player's Shapley value (``error_x`` = its standard error,
    ``ShapleyImportance.total_std_error``), labelled with its share of the explained
    performance in percent; legend entries give each model's error. Sorting, ``customdata``,
    selection marking and each model's colour and hatch as :func:`pfi_figure`.
    """
    if not sfimp:
        return empty_figure("No Shapley feature importance computed yet.")
    models = list(sfimp)
    loss = _loss_name(getattr(sfimp[models[0]], "params", None))
    bars = []
    for k, (model, res) in enumerate(sfimp.items()):
        share = {f: ("" if np.isnan(s) else f"{round(100 * s) + 0:.0f}%") for f, s in res.proportions.items()}
        error = res.total_std_error
        hover = {
            f: f"{esc(model)}<br>{esc(shown_name(names, f))}: SFIMP {v:.4g} ± {error[f]:.3g}<br>share {share[f]}"
            for f, v in res.values.items()
        }
        bars.append(
            Bars(
                res.values,
                f"{model}: error {res.model_error:.3g}",
                error,
                hover=hover,
                text=share,
                text_position="inside",
                color=model_style(k).color,
                pattern=model_style(k).pattern,
            )
        )
    fig = bar_figure(
        bars,
        title=f"SFIMP (drop in {loss}) ± std. error; labels: share of the total",
        x_title=f"SFIMP (drop in {loss} the feature earns)",
        uirevision="sfimp",
        selected=selected,
        names=names,
    )
    fig.layout.showlegend = True  # each model's error
    return fig


def influence_figure(ciu: pd.DataFrame, subtitle: str = "", names: Mapping[str, str] | None = None) -> go.Figure:
    """Contextual influence CI * (CU - phi0) with phi0 = 0.5 (the middle of the output's range
    as the feature varies), Eq. (10) of seed 003: signed bars sorted by
    absolute influence (largest on top), each labelled with its signed value ("+0.12",
    "−0.05"); positive ones (raise the output) in POSITIVE_COLOR, negative in NEGATIVE_COLOR.
    ``subtitle`` names the row."""
    if ciu is None or ciu.empty:
        return empty_figure("No contextual influence computed yet.")
    order = list(ciu["influence"].abs().sort_values(ascending=False, na_position="last", kind="stable").index)
    influence = ciu["influence"]
    bars = Bars(
        influence,
        "influence",
        hover={
            f: f"{esc(shown_name(names, f))}: influence {v:.4g} ({'raises' if v >= 0 else 'lowers'})"
            for f, v in influence.items()
        },
        text={f: signed(v, ".2g") for f, v in influence.items() if np.isfinite(v)},
        color=lambda v: POSITIVE_COLOR if v >= 0 else NEGATIVE_COLOR,
    )
    fig = bar_figure(
        [bars],
        title="Contextual influence: + pushes the output up, − down",
        subtitle=subtitle,
        x_title="CI × (CU − 0.5): from the middle of the output's range",
        uirevision="influence",
        order=order,
        names=names,
    )
    fig.layout.xaxis.zerolinecolor = "black"
    values = influence.to_numpy(float)
    values = values[np.isfinite(values)]
    if values.size:  # room for the signed labels beside the bars, clear of the feature names
        low, high = min(0.0, float(values.min())), max(0.0, float(values.max()))
        pad = 0.18 * max(high - low, 1e-12)
        fig.layout.xaxis.range = [low - (pad if low < 0 else pad / 10), high + (pad if high > 0 else pad / 10)]
    return fig


@dataclass(frozen=True)
class Bars:
    """One series of horizontal bars of :func:`bar_figure`: a value per label (a feature, or
    a group's name). ``error``: each bar's ± spread (``error_x``); ``hover``: each label's
    hover text (escaped names and our markup; default: the series' name, the label, its value
    to 4 significant digits and its error to 3); ``text``: a label on each bar, placed at
    ``text_position``; ``color``: one colour, or a function of the value (a colour by sign:
    give the sign in ``text`` too); ``pattern``: a hatch shape (plotly's ``marker.pattern``),
    so series differ by more than colour."""

    values: pd.Series
    name: str = "value"
    error: pd.Series | None = None
    hover: Mapping | None = None
    text: Mapping | None = None
    text_position: str = "outside"
    color: str | Callable[[float], str] = BAR_COLOR
    pattern: str = ""


def bar_figure(
    bars: pd.Series | Sequence[Bars],
    *,
    title: str,
    x_title: str,
    uirevision: str,
    name: str = "value",
    selected=None,
    error: pd.Series | None = None,
    hover: Mapping | None = None,
    subtitle: str = "",
    order: list | None = None,
    y_title: str = "feature",
    wrap: int | None = None,
    legend: dict | None = None,
    extra: Sequence = (),
    names: Mapping[str, str] | None = None,
) -> go.Figure:
    """Horizontal bars, one row per label, largest at the top (by the mean over the series
    unless ``order`` says otherwise): every bar chart of the page. Several series are grouped
    side by side (one per model), with a legend. Click a bar to select its label
    (``customdata`` = the label, as JSON), the ``selected`` one outlined and its tick bold.
    ``bars``: a Series (one series, with ``name``, ``error`` and ``hover``) or :class:`Bars`.
    ``wrap``: long labels broken onto lines of about that many characters; ``extra``: traces
    drawn over the bars (PFI's permutations), on the same category axis; ``names``: column
    name -> label, written on the ticks and in the default hover text (the categories, the
    clicks and ``customdata`` stay the column names)."""
    series = [Bars(bars, name, error, hover)] if isinstance(bars, pd.Series) else list(bars)
    if order is None:
        order = _order([b.values for b in series])
    several = len(series) > 1
    traces = [_bar_trace(b, order, selected=selected, several=several, names=names) for b in series]
    traces.extend(extra)
    yaxis, height = _bar_axis(order, selected, len(series), names)
    yaxis["title"] = dict(text=y_title)
    if wrap:  # long labels ("mean radius + worst radius + ...") on lines of about `wrap` characters
        ticks = ["<br>".join(esc(line) for line in textwrap.wrap(shown_name(names, str(f)), wrap)) for f in order]
        yaxis["ticktext"] = ticks
        height = max(height, 150 + sum(30 + 14 * t.count("<br>") for t in ticks))
    return _style(
        traces,
        title,
        uirevision,
        subtitle=subtitle,
        barmode="group",
        height=height,
        yaxis=yaxis,
        showlegend=several,
        xaxis=dict(title=x_title, zeroline=True),
        **({} if legend is None else {"legend": legend}),
    )


def _bar_trace(b: Bars, order: list, *, selected, several: bool, names: Mapping[str, str] | None) -> go.Bar:
    """One series' bars in ``order`` (a trace of :func:`bar_figure`): its values, error bars,
    hover text, labels on the bars and, among several series, its offset and legend group."""
    values = _aligned(b.values, order)
    spread = None if b.error is None else _aligned(b.error, order)
    return go.Bar(
        _validate=False,
        name=b.name,
        x=values,
        y=[str(f) for f in order],
        orientation="h",
        customdata=[_json_label(f) for f in order],
        hovertext=_bar_hover(b, order, values, spread, several=several, names=names),
        hovertemplate="%{hovertext}<extra></extra>",
        marker=dict(color=_bar_color(b, values), line=_outline(order, selected), **_pattern(b.pattern)),
        **({} if spread is None else {"error_x": dict(type="data", array=spread, thickness=1.2)}),
        **_bar_text(b, order),
        **(dict(offsetgroup=b.name, legendgroup=b.name) if several else {}),
    )


def _bar_hover(b: Bars, order: list, values, spread, *, several: bool, names: Mapping[str, str] | None) -> list:
    """Each bar's hover text: the series' own, else (the series' name among several,) the
    label, its value to 4 significant digits and its error to 3."""
    if b.hover is not None:
        return [b.hover[f] for f in order]
    head = f"{esc(b.name)}<br>" if several else ""
    return [
        f"{head}{esc(shown_name(names, f))}: {v:.4g}" + ("" if spread is None else f" ± {spread[i]:.3g}")
        for i, (f, v) in enumerate(zip(order, values))
    ]


def _bar_color(b: Bars, values):
    """The series' colour: one for all its bars, or each bar's from its value."""
    return [b.color(v) for v in values] if callable(b.color) else b.color


def _bar_text(b: Bars, order: list) -> dict:
    """The text on each bar and where it stands (none without ``b.text``)."""
    if b.text is None:
        return {}
    placed = (
        dict(textfont=dict(size=10, color="#6b7280"), cliponaxis=False)
        if b.text_position == "outside"
        else dict(insidetextanchor="start")
    )
    return dict(text=[b.text.get(f, "") for f in order], textposition=b.text_position, **placed)


def _order(values: Sequence[pd.Series]) -> list:
    """Labels by their mean value over the series, largest first, NaN last
    (:func:`.common._sort_features` of the series side by side); one float series with
    unique labels is sorted as it is (its own mean), without building the frame."""
    if len(values) == 1 and values[0].dtype == float and values[0].index.is_unique:
        return list(values[0].sort_values(ascending=False, na_position="last", kind="stable").index)
    return _sort_features(pd.concat(dict(enumerate(values)), axis=1))


def _aligned(values: pd.Series, order: list) -> np.ndarray:
    """``values.reindex(order).to_numpy(float)`` (NaN where a label is missing), by position."""
    if not values.index.is_unique:
        return values.reindex(order).to_numpy(float)  # reindex says why it cannot
    at = values.index.get_indexer(order)
    found = values.to_numpy(float)
    out = found[np.maximum(at, 0)] if found.size else np.full(len(order), np.nan)
    out[at < 0] = np.nan
    return out


def _pattern(shape: str) -> dict:
    """A bar's hatch: white lines over its colour (the legend shows it too); none for ""."""
    return dict(pattern=dict(shape=shape, fillmode="overlay", fgcolor="white", size=7, solidity=0.35)) if shape else {}


def global_ci_figure(global_ci: pd.DataFrame, *, selected=None, names: Mapping[str, str] | None = None) -> go.Figure:
    """Global CI (seed 003, Sec. 4.1): the mean CI over instances, ``error_x`` = its std."""
    if global_ci is None or global_ci.empty:
        return empty_figure("No global contextual importance computed yet.")
    share = global_ci["out_of_range_share"] if "out_of_range_share" in global_ci else pd.Series(np.nan, global_ci.index)
    hover = {
        f: f"{esc(shown_name(names, f))}<br>mean CI = {ci:.3g} ± {sd:.3g}"
        + ("" if np.isnan(s) else f"<br>out of range: {100 * s:.0f}%")
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
        names=names,
    )
