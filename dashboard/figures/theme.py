"""The look every figure shares: colours, the template, margins, and the one place data-only
text is escaped (:func:`_style`)."""

from __future__ import annotations

import copy
import html
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

# Colours that carry a meaning come from Okabe & Ito (2008), "Color Universal Design": eight
# colours told apart with protan, deutan and tritan vision alike. One thing keeps one colour on
# every chart, and colour is never its only mark: lines also differ in dash and marker symbol,
# bars in hatch pattern, signed bars carry their sign in text (tests/test_dash_colours.py
# checks both, and the colours' distances under simulated colour blindness).
OKABE_ITO = dict(
    black="#000000",
    orange="#E69F00",
    sky_blue="#56B4E9",
    bluish_green="#009E73",
    yellow="#F0E442",  # too light on white for a line or a bar: unused
    blue="#0072B2",
    vermillion="#D55E00",
    reddish_purple="#CC79A7",
)
BAR_COLOR = OKABE_ITO["blue"]  # one series of bars: a single model's importance, CI and CU
ALL_COLOR = OKABE_ITO["black"]  # the summary of all (eligible) rows: PI, PD and ALE lines, a prediction
CURVE_COLOR = "#8c8c8c"  # background ICI/ICE curves and marginal distribution
CURVE_OPACITY = 0.25
# model k (bars, lines, calibration curves); the first three stay apart under every simulated
# colour blindness, and every model also has its own hatch (bars) and symbol (lines, dots)
MODEL_COLORS = tuple(
    OKABE_ITO[c] for c in ("blue", "orange", "bluish_green", "reddish_purple", "sky_blue", "vermillion", "black")
)
MODEL_PATTERNS = ("", "/", ".", "x", "\\", "+", "-")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "cross", "star")
# the subgroup, its complement, ... (PI curves, residual plots), each with its own dash
GROUP_COLORS = tuple(OKABE_ITO[c] for c in ("vermillion", "blue", "bluish_green", "reddish_purple", "orange"))
GROUP_DASHES = ("dashdot", "dot", "longdash", "longdashdot", "dash")  # "dash": the global PFI line
# more and less: raises / lowers the output, largest / smallest ICI integral. Vermillion and a
# dark blue (Paul Tol's high-contrast blue, darker than Okabe-Ito's): told apart in every
# simulated colour blindness and in lightness too (a greyscale print), each 3:1 against white
POSITIVE_COLOR = LARGEST_COLOR = OKABE_ITO["vermillion"]
NEGATIVE_COLOR = SMALLEST_COLOR = "#004488"
SELECTED_COLOR = OKABE_ITO["sky_blue"]  # the selected observation (its ICI/ICE curve, as edited)
BEFORE_COLOR = "#374151"  # the selected observation before a what-if edit (dashed, open markers)
WARNING_COLOR = OKABE_ITO["vermillion"]  # a mark that says "look here" (CIU out of range), always with text
# how the highlighted curves differ besides colour: (dash, marker symbol)
LARGEST_STYLE, SMALLEST_STYLE, SELECTED_STYLE = ("solid", "triangle-up"), ("dash", "triangle-down"), ("dot", "diamond")
MINUS = "\u2212"  # the minus sign of a signed label ("−0.8"): a screen reader says "minus"

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
        colorway=list(MODEL_COLORS),
        hoverlabel=dict(align="left"),
        hovermode="closest",
        xaxis=_AXIS,
        yaxis=_AXIS,
    )
)
MARGIN = dict(l=10, r=10, t=85, b=40)
CI_OPACITY = 0.35  # CIU: CI transparent, CU solid (seed 003, Fig. 3)
PX_PER_FEATURE, MIN_HEIGHT = 28, 300
MISSING_LABEL = "(missing)"
DIAMOND = "diamond"


# a legend of several long entries: below the plot, clear of the title and subtitle
LEGEND_BELOW = dict(orientation="h", yref="container", yanchor="bottom", y=0.0, xanchor="left", x=0.0)


@dataclass(frozen=True)
class SeriesStyle:
    """How one series (a model's bars, dots and lines) is told apart: colour, hatch, symbol."""

    color: str
    pattern: str
    symbol: str


def model_style(k: int) -> SeriesStyle:
    """Model (or series) k's colour, bar hatch and marker symbol."""
    return SeriesStyle(
        MODEL_COLORS[k % len(MODEL_COLORS)], MODEL_PATTERNS[k % len(MODEL_PATTERNS)], SYMBOLS[k % len(SYMBOLS)]
    )


def signed(value: float, spec: str = ".3g") -> str:
    """A signed number as a label: "+1.2", "−0.8" (the minus sign, not a hyphen)."""
    text = f"{value:+{spec}}"
    return MINUS + text[1:] if text.startswith("-") else text


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


SUBTITLE_CHARS = 95  # about what a half-width panel shows at 12 px: a longer subtitle was cut


def _wrapped(text: str, width: int = SUBTITLE_CHARS) -> str:
    """A subtitle longer than ``width`` broken onto a second line at its last "; " that fits
    (its parts are separate facts: models; what ± is; which rows), so none is cut at the
    chart's right edge. Plotly does not wrap a subtitle itself."""
    if len(text) <= width or "<br>" in text:
        return text
    cut = text.rfind("; ", 0, width)
    return text if cut <= 0 else f"{text[: cut + 1]}<br>{text[cut + 2 :]}"


SUBTITLE_LINE = 15  # px of top margin one more subtitle line takes (12 px text)


def add_subtitle(fig: go.Figure, text: str) -> go.Figure:
    """``fig`` with ``text`` as more lines under its subtitle (a note on how it was computed):
    plain text, escaped and wrapped at :data:`SUBTITLE_CHARS`, the top margin grown by a line
    each. An empty figure (a message, no traces) or an empty ``text`` is left as it is."""
    if not text or not fig.data:
        return fig
    lines = [esc(line) for line in textwrap.wrap(text, SUBTITLE_CHARS, break_on_hyphens=False)]
    shown = fig.layout.title.subtitle.text
    fig.layout.title.subtitle = dict(
        text="<br>".join([shown, *lines] if shown else lines), font=dict(size=12, color="#6b7280")
    )
    top = fig.layout.margin.t
    fig.layout.margin.t = (MARGIN["t"] if top is None else top) + SUBTITLE_LINE * len(lines)
    return fig


def _escape_data_text(traces: Sequence, spec: dict) -> None:
    """Escape, in place, the texts that hold only data (see the module docstring)."""
    title = spec.get("title")
    if isinstance(title, dict):
        if isinstance(title.get("text"), str):
            title["text"] = esc(title["text"])
        sub = title.get("subtitle")
        if isinstance(sub, dict) and isinstance(sub.get("text"), str):
            sub["text"] = _wrapped(esc(sub["text"]))
    for key, axis in spec.items():
        if not (key.startswith(("xaxis", "yaxis")) and isinstance(axis, dict)):
            continue
        if isinstance(axis.get("title"), dict) and isinstance(axis["title"].get("text"), str):
            axis["title"]["text"] = esc(axis["title"]["text"])
        for name in _AXIS_DATA:
            if axis.get(name) is not None:
                axis[name] = _plain(axis[name])
    for trace in traces:
        for name in _DATA_TEXT:
            value = trace[name] if name in trace else None
            if value is not None:
                escaped = _plain(value)
                if escaped is not value:
                    trace[name] = escaped


def _figure(*traces) -> go.Figure:
    """A figure born with our template (setting one later first copies plotly's default)."""
    return go.Figure(data=list(traces) or None, layout=dict(template=TEMPLATE), _validate=False)


def _style(fig: go.Figure | Sequence, title: str, uirevision: str, *, subtitle: str = "", **layout) -> go.Figure:
    """The figure with our title, legend, margins and ``layout`` merged into its layout.

    ``fig``: a figure, or the traces of one (built with ``_validate=False``): the figure is
    then made once, here, with our template. Built as one plain layout dict and wrapped
    without validation: ``update_layout`` parses and validates every key path (~15 ms a
    call), and ``add_trace`` validates every property of the trace again (~1 ms a bar
    chart), most of a view's server time."""
    if isinstance(fig, go.Figure):
        traces, spec = fig.data, fig.layout.to_plotly_json()
    else:
        traces, spec = tuple(fig), dict(template=copy.deepcopy(TEMPLATE))
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
    _escape_data_text(traces, spec)
    return go.Figure(data=traces or None, layout=spec, _validate=False)


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


def empty_figure(message: str, *, height: int = MIN_HEIGHT) -> go.Figure:
    """A blank figure showing ``message`` in its centre (no data, missing target, errors);
    ``height``: smaller for a lasting note (a view that does not apply) than for a wait."""
    import textwrap

    text = "<br>".join(esc(line) for line in textwrap.wrap(str(message), 60)) or " "
    note = dict(
        text=text, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False, font=dict(size=15, color="#555555")
    )
    return _style(
        [], "", "empty", height=height, xaxis=dict(visible=False), yaxis=dict(visible=False), annotations=[note]
    )
