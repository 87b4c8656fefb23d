"""dashboard.figures, issue 28: colour is never the only carrier of meaning, and the colours
that carry one stay apart with colour-blind vision.

Colour blindness is simulated with the matrices of Machado, Oliveira & Fernandes (2009), "A
Physiologically-based Model for Simulation of Color Vision Deficiency", severity 1.0
(dichromacy), applied to linear RGB; distances are CIE 1976 ΔE in CIELAB (D65).
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import plotly.colors
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
from sklearn.linear_model import LinearRegression, Ridge

import compute
from compute import ciu_from_profiles, feature_profile, permutation_importance, shapley_importance
from compute.datasets import x3_interaction
from dashboard import figures as F
from dashboard.figures.heatmaps import INTERACTION_SCALE, PD2_SCALE, WRITTEN_SIDE, pair_matrix_figure, pd2_figure

# --- colour vision ---------------------------------------------------------------------------
MACHADO = {
    "normal": np.eye(3),
    "protan": np.array(
        [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]]
    ),
    "deutan": np.array(
        [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]]
    ),
    "tritan": np.array(
        [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]]
    ),
}
RED_GREEN = ("normal", "protan", "deutan")  # 8 % of men see with one of the first two
MIN_APART = 20.0  # ΔE between two colours that mean different things on one chart
OLD_UP_DOWN = ("#1a9850", "#d73027")  # the green / red the figures used before issue 28


def _linear(color: str) -> np.ndarray:
    if color.startswith("rgb"):
        srgb = np.array([float(v) for v in color[color.index("(") + 1 : -1].split(",")[:3]]) / 255
    else:
        srgb = np.array([int(color[i : i + 2], 16) for i in (1, 3, 5)]) / 255
    return np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)


def lab(color: str, vision: str = "normal") -> np.ndarray:
    """CIELAB of ``color`` as seen with ``vision``."""
    rgb = np.clip(MACHADO[vision] @ _linear(color), 0, 1)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ rgb
    t = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(t > (6 / 29) ** 3, np.cbrt(t), t / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def delta_e(a: str, b: str, vision: str = "normal") -> float:
    return float(np.linalg.norm(lab(a, vision) - lab(b, vision)))


def contrast_with_white(color: str) -> float:
    """WCAG 2.1 contrast ratio of ``color`` against the white page."""
    luminance = float(np.array([0.2126, 0.7152, 0.0722]) @ _linear(color))
    return 1.05 / (luminance + 0.05)


def test_the_simulation_loses_red_against_green_and_keeps_blue_against_orange():
    """Known answers: white stays white in every vision; with deuteranopia the old green and
    red come within the distance of two shades of one colour, blue and orange stay far apart."""
    for vision in MACHADO:
        assert lab("#ffffff", vision) == pytest.approx([100, 0, 0], abs=0.5)
    assert delta_e(*OLD_UP_DOWN) > 100 and delta_e(*OLD_UP_DOWN, "deutan") < 30
    assert delta_e("#0072B2", "#E69F00", "deutan") > 100
    assert contrast_with_white("#000000") == pytest.approx(21.0)


def apart(a: str, b: str, visions=RED_GREEN, minimum: float = MIN_APART) -> bool:
    return all(delta_e(a, b, v) >= minimum for v in visions)


def test_raises_and_lowers_stay_apart_in_every_vision_and_in_greyscale():
    """The sign colours (waterfall, contextual influence) differ by ΔE ≥ 40 with normal,
    protan, deutan and tritan vision, by 15 in lightness (a greyscale print), and each stands
    3:1 against the white page (WCAG 1.4.11): the old green / red pair fails all three."""
    up, down = F.POSITIVE_COLOR, F.NEGATIVE_COLOR
    assert apart(up, down, MACHADO, minimum=40)
    assert abs(lab(up)[0] - lab(down)[0]) >= 15
    assert min(contrast_with_white(up), contrast_with_white(down)) >= 3
    old_up, old_down = OLD_UP_DOWN
    assert not apart(old_up, old_down, MACHADO, minimum=40)
    assert abs(lab(old_up)[0] - lab(old_down)[0]) < 15


# --- the figures ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def x3():
    X, y = x3_interaction(200, random_state=0)
    return X, y, RandomForestRegressor(n_estimators=15, max_depth=6, random_state=0).fit(X, y)


@pytest.fixture(scope="module")
def prof(x3):
    X, y, rf = x3
    return feature_profile(rf, X, y, "X1", grid=40)


@pytest.fixture(scope="module")
def city(clf_data, clf_pipeline):
    X, y = clf_data
    return feature_profile(clf_pipeline, X, y, "city")


@pytest.fixture(scope="module")
def pfi(x3):
    X, y, rf = x3
    models = {"forest": rf, "linear": LinearRegression().fit(X, y), "ridge": Ridge(alpha=30.0).fit(X, y)}
    return {name: permutation_importance(m, X, y, n_repeats=4, random_state=0) for name, m in models.items()}


@pytest.fixture(scope="module")
def ciu_table(x3):
    X, _, rf = x3
    profiles = {f: feature_profile(rf, X, None, f, grid=15) for f in ["X1", "X2", "X3"]}
    table = ciu_from_profiles(profiles, 0, out_range=(-20.0, 20.0))
    return table.assign(out_of_range=table.index == "X3")


def _groups(prof):
    mask = np.asarray(prof.x, dtype=float) > np.median(prof.x) if not prof.categorical else None
    if mask is None:
        mask = np.asarray([str(v) == "rome" for v in prof.x])
    return {"upper half": mask, "not (upper half)": ~mask}


def _calibration():
    rng = np.random.default_rng(0)
    frame = lambda: pd.DataFrame(  # noqa: E731
        {"predicted": np.linspace(0.05, 0.95, 10), "observed": rng.uniform(size=10), "n": rng.integers(1, 50, 10)}
    )
    curves = []
    for k, model in enumerate(["forest", "logistic"]):
        for part, dash in (("subgroup", "solid"), ("rest", "dash")):
            curves.append((f"{model}: {part}", frame(), F.MODEL_COLORS[k], dash))
    return F.calibration_figure(curves, output="yes", title="calibration")


def _scatter():
    rng = np.random.default_rng(0)
    groups = [(name, rng.normal(size=30), rng.normal(size=30), c) for name, c in zip(["sub", "rest"], F.GROUP_COLORS)]
    return F.scatter_figure(groups, title="fit", x_title="observed", y_title="predicted", diagonal=True)


def _whatif(categorical: bool):
    grid = np.array(["a", "b", "c"], dtype=object) if categorical else np.linspace(0, 1, 20)
    curves = np.vstack([np.linspace(0, 1, grid.size), np.linspace(1, 2, grid.size)])
    points = (("a", 0.0), ("c", 2.0)) if categorical else ((0.2, 0.2), (0.8, 1.8))
    return F.whatif_figure(grid, curves, points, categorical=categorical, feature="x", title="what if")


def _conditional():
    rows = pd.DataFrame(
        {"marginal": [0.5, 0.2], "conditional": [0.1, 0.15], "marginal_std_error": 0.01, "conditional_std_error": 0.02},
        index=["a", "b"],
    )
    return F.conditional_pfi_figure(rows, loss="squared error")


def _grouped():
    rows = pd.DataFrame({"together": [0.9], "alone_sum": [0.4], "alone_text": ["a 0.2 + b 0.2"]}, index=["a + b"])
    return F.group_pfi_figure(rows, loss="squared error")


@pytest.fixture(scope="module")
def charts(prof, city, pfi, ciu_table, x3):
    """Every figure in which several things are drawn, built as the views build them."""
    X, y, rf = x3
    models = {"forest": rf, "linear": LinearRegression().fit(X, y)}
    sfimp = {m: shapley_importance(est, X, y, n_obs_permutations=2) for m, est in models.items()}
    return {
        "ICI": F.ici_figure(prof, selected=prof.rows[7]),
        "ICI, the selected row is the largest": F.ici_figure(prof, selected=prof.extremes(1)[0][0]),
        "ICE": F.ice_figure(prof, selected=prof.rows[7]),
        "ICI strip": F.ici_figure(city, selected=city.rows[3]),
        "PI": F.pi_figure(prof, _groups(prof), global_pfi=prof.importance),
        "PI strip": F.pi_figure(city, _groups(city)),
        "PFI, three models": F.pfi_figure(pfi, selected="X2"),
        "SFIMP, two models": F.sfimp_figure(sfimp),
        "convergence": F.convergence_figure(compute.pfi_convergence(pfi["forest"]), loss="squared error"),
        "importance once the others are known": _conditional(),
        "grouped PFI": _grouped(),
        "calibration": _calibration(),
        "scatter": _scatter(),
        "what-if": _whatif(False),
        "what-if, levels": _whatif(True),
        "CIU before and after": F.ciu_figure(ciu_table, reference=ciu_table.assign(CU=ciu_table.CU / 2)),
    }


CHARTS = [
    "ICI",
    "ICI, the selected row is the largest",
    "ICE",
    "ICI strip",
    "PI",
    "PI strip",
    "PFI, three models",
    "SFIMP, two models",
    "convergence",
    "importance once the others are known",
    "grouped PFI",
    "calibration",
    "scatter",
    "what-if",
    "what-if, levels",
    "CIU before and after",
]


def colour(trace) -> str:
    """The colour a trace is drawn in (a line's, else its markers', a band's fill)."""
    if trace.type in ("bar", "histogram"):
        return trace.marker.color
    if trace.fill == "toself":
        return trace.fillcolor
    return trace.line.color if "lines" in (trace.mode or "") and trace.line.color else trace.marker.color


def carriers(trace) -> tuple:
    """What tells a trace apart once colour is taken away: its kind, a bar's hatch, width
    and opacity, a line's dash and width, its markers' symbol."""
    if trace.type == "bar":
        return ("bar", trace.marker.pattern.shape or "", trace.width, trace.opacity)
    mode = trace.mode or ""
    lines, markers = "lines" in mode, "markers" in mode
    symbol = trace.marker.symbol
    return (
        trace.type,
        (trace.line.dash or "solid") if lines else None,
        trace.line.width if lines else None,
        str(symbol if symbol is not None else "circle") if markers else None,
        trace.opacity,
    )


def legend(fig) -> list:
    """The traces the legend names (each one thing the chart tells apart)."""
    assert fig.layout.showlegend is not False, "the legend is hidden"
    return [t for t in fig.data if t.showlegend is not False]


@pytest.mark.parametrize("chart", CHARTS)
def test_without_colour_every_legend_entry_still_looks_different(charts, chart):
    """Take the colour away (greyscale, or a colour vision that merges two hues): every entry
    of the legend is still told from every other by its name and by a dash, a marker symbol,
    a hatch, a width or an opacity. Catches two models' bars, two subgroups' curves or two
    highlighted rows that differ by colour alone (as the ICI extremes, PI groups, marginal
    against conditional bars and calibration models did)."""
    shown = legend(charts[chart])
    assert len(shown) >= 2
    names = [t.name for t in shown]
    assert all(names) and len(set(names)) == len(names), names
    for a, b in itertools.combinations(shown, 2):
        assert carriers(a) != carriers(b), f"{a.name!r} and {b.name!r} differ by colour alone: {carriers(a)}"


@pytest.mark.parametrize("chart", CHARTS)
def test_colours_that_share_a_chart_stay_apart_with_red_green_colour_blindness(charts, chart):
    """Every two colours the legend uses differ by ΔE ≥ 20 with normal, protan and deutan
    vision (Machado et al. 2009): a red and a green, or two greens, would merge."""
    used = list(dict.fromkeys(colour(t) for t in legend(charts[chart])))
    for a, b in itertools.combinations(used, 2):
        worst = min(RED_GREEN, key=lambda v: delta_e(a, b, v))
        assert apart(a, b), f"{a} and {b}: ΔE {delta_e(a, b, worst):.1f} with {worst} vision"


def test_the_first_model_colours_stay_apart_with_red_green_colour_blindness():
    """Three models side by side (the booster demo) are told apart by colour in every red-green
    vision too; beyond, their hatches and symbols (all distinct) carry them."""
    for a, b in itertools.combinations(F.MODEL_COLORS[:3], 2):
        assert apart(a, b)
    assert len(set(F.MODEL_PATTERNS)) == len(F.MODEL_PATTERNS) and len(set(F.SYMBOLS)) == len(F.SYMBOLS)
    styles = [F.model_style(k) for k in range(len(F.MODEL_COLORS))]
    assert len({(s.pattern, s.symbol) for s in styles}) == len(styles)


# --- the highlighted rows, one thing one colour ---------------------------------------------
def _row(fig, prefix):
    """The legend's trace whose name starts with ``prefix``."""
    (trace,) = [t for t in fig.data if (t.name or "").startswith(prefix) and t.showlegend is not False]
    return trace


@pytest.mark.parametrize("chart", ["ICI", "ICE"])
def test_highlighted_rows_differ_in_dash_and_symbol_and_show_their_symbols(charts, chart):
    """Largest, smallest and selected rows each have their own dash and their own marker
    symbol, drawn at a few points along the line (maxdisplayed), and neither is the PI/PD
    line's look: a colour-blind reader matches each curve to its legend entry."""
    fig = charts[chart]
    rows = [_row(fig, p) for p in ("largest integral", "smallest integral", "selected")]
    assert len({r.line.dash for r in rows}) == 3 and len({r.marker.symbol for r in rows}) == 3
    assert all("markers" in r.mode and 0 < r.marker.maxdisplayed <= 12 for r in rows)
    summary = fig.data[1]
    assert summary.mode == "lines" and all(carriers(r) != carriers(summary) for r in rows)


def test_a_row_with_a_missing_point_keeps_its_symbols_and_the_point(reg_data, gbm):
    """With a "missing" point the row's markers are sized one by one: a symbol every few grid
    points and the lone missing point larger, none on the gap."""
    X, y = reg_data
    X = X.copy()
    X.loc[X.index[:5], "x1"] = np.nan
    model = HistGradientBoostingRegressor(max_iter=20, random_state=0).fit(X, y)
    p = feature_profile(model, X, y, "x1", grid=30)
    assert p.has_missing_point
    trace = _row(F.ici_figure(p), "largest integral")
    sizes = np.asarray(trace.marker.size, dtype=float)
    assert sizes[-1] > 0 and sizes[-2] == 0 and 2 <= (sizes[:-2] > 0).sum() <= 12
    assert trace.marker.symbol == F.LARGEST_STYLE[1] and trace.line.dash == F.LARGEST_STYLE[0]


def test_one_thing_keeps_one_colour_across_charts(charts):
    """The selected row is one colour on the ICI curves and as edited in the what-if; before
    the edit one colour in the what-if and in CIU; all rows' summary one colour in PI, ICI
    and ICE; the marginal bars the PFI bars' colour (their legend says "the bars above")."""
    selected = colour(_row(charts["ICI"], "selected"))
    assert selected == F.SELECTED_COLOR == colour(_row(charts["what-if"], "as edited"))
    before = colour(_row(charts["what-if"], "before the edit"))
    assert before == colour(_row(charts["CIU before and after"], "CI before")) == F.BEFORE_COLOR
    assert colour(_row(charts["PI"], "all")) == colour(charts["ICI"].data[1]) == colour(charts["ICE"].data[1])
    marginal = _row(charts["importance once the others are known"], "shuffled among all rows")
    assert colour(marginal) == colour(charts["PFI, three models"].data[0]) == F.BAR_COLOR


# --- signed bars -----------------------------------------------------------------------------
def test_influence_bars_carry_their_sign_in_text(ciu_table):
    """Each contextual-influence bar is labelled with its signed value, "+" or the minus
    sign "−", agreeing with the bar's direction: the sign is not in the colour alone."""
    table = ciu_table.assign(influence=[0.3, -0.05, 0.012])
    (bar,) = F.influence_figure(table).data
    for x, text in zip(bar.x, bar.text):
        assert text[0] == ("+" if x > 0 else "\u2212")
        assert float(text.replace("\u2212", "-")) == pytest.approx(x, rel=0.05)


def test_waterfall_contributions_carry_their_sign_in_text():
    """Each contribution of the waterfall is labelled "+1.2 pp" or "−0.8 pp" (the minus sign,
    which a screen reader reads out), the two totals (probabilities) in % without a sign; raises and lowers are
    the theme's colours, the totals the summary's black."""
    contributions = pd.Series({"a": 0.012, "b": -0.3, "c": 0.2})
    fig = F.waterfall_figure(contributions, labels={}, base=0.5, prediction=0.412, title="t", scale=100.0, unit="pp")
    (trace,) = fig.data
    relative = [(x, t) for m, x, t in zip(trace.measure, trace.x, trace.text) if m == "relative"]
    assert [t for _, t in relative] == ["+1.2 pp", "+20.0 pp", "\u221230.0 pp"]
    assert trace.text[0] == "50.0 %" and trace.text[-1] == "41.2 %"  # the totals are probabilities
    assert trace.increasing.marker.color == F.POSITIVE_COLOR and trace.decreasing.marker.color == F.NEGATIVE_COLOR
    assert apart(trace.totals.marker.color, F.NEGATIVE_COLOR) and apart(trace.totals.marker.color, F.POSITIVE_COLOR)


def test_signed_writes_plus_and_the_minus_sign():
    assert [F.signed(v) for v in (1.234, -0.8, 0.0, -1e-5)] == ["+1.23", "\u22120.8", "+0", "\u22121e-05"]


# --- heatmaps ---------------------------------------------------------------------------------
def _lightness(scale, vision: str) -> np.ndarray:
    samples = plotly.colors.sample_colorscale(scale, list(np.linspace(0, 1, 21)))
    return np.array([lab(c if c.startswith("#") else c, vision)[0] for c in samples])


@pytest.mark.parametrize("vision", list(MACHADO))
def test_heatmap_scales_change_lightness_steadily_in_every_vision(vision):
    """H² (white to dark blue) gets darker and the 2-D PD's Viridis lighter at every step, over
    at least 60 L*, in every simulated colour vision: a rainbow ("Jet") or a red-green
    diverging scale goes up and down in lightness, or flat with deuteranopia."""
    scales = {"H²": INTERACTION_SCALE, "PD": plotly.colors.get_colorscale(PD2_SCALE)}
    for name, scale in scales.items():
        light = _lightness(scale, vision)
        steps = np.diff(light) * (-1 if name == "H²" else 1)
        assert (steps > 0).all(), (name, np.round(light))
        assert abs(light[-1] - light[0]) >= 60, name
    jet = _lightness(plotly.colors.get_colorscale("Jet"), vision)
    assert not (np.diff(jet) > 0).all() and not (np.diff(jet) < 0).all()


def test_pair_matrix_writes_every_cell():
    """Every computed pair's cell of the H² matrix writes its number (the colour is a second
    reading of it)."""
    pairs = pd.DataFrame({"feature_1": ["a", "a", "b"], "feature_2": ["b", "c", "c"], "h2": [0.4, 0.0005, 0.02]})
    fig = pair_matrix_figure(pairs.assign(h=pairs.h2))
    (trace,) = fig.data
    text = np.asarray(trace.text, dtype=object)
    z = np.asarray(trace.z, dtype=float)
    assert trace.texttemplate == "%{text}"
    assert all(text[i, j] for i, j in zip(*np.nonzero(np.isfinite(z))))
    assert sorted(set(text[np.isfinite(z)])) == ["0.02", "0.4", "<0.001"]


def test_pd2_writes_its_values_on_a_small_grid_only():
    """A small 2-D PD (a binary feature against five levels) writes each cell's value; a
    20-point grid, whose numbers plotly would shrink past reading, leaves them to the hover."""

    def surface(n_rows: int, n_cols: int) -> pd.DataFrame:
        values = np.arange(float(n_rows * n_cols)).reshape(n_rows, n_cols)
        return pd.DataFrame(values, index=pd.Index(range(n_rows), name="a"), columns=pd.Index(range(n_cols), name="b"))

    assert 5 <= WRITTEN_SIDE < 20
    assert pd2_figure(surface(2, 5), value_title="average prediction").data[0].texttemplate == "%{z:.3g}"
    for shape in ((2, 20), (20, 20)):
        assert pd2_figure(surface(*shape), value_title="average prediction").data[0].texttemplate is None
