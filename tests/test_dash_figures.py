"""dashboard.figures: the traces carry the results (curves, highlights, clicks, bar order)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.io as pio
import pytest
from numpy.testing import assert_allclose
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import LinearRegression

import compute
from compute import (
    ale_from_profile,
    ciu_from_profiles,
    feature_profile,
    permutation_importance,
    shapley_importance,
)
from compute.datasets import x3_interaction
from dashboard import figures as F


# --- fixtures ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def x3():
    X, y = x3_interaction(300, random_state=0)
    return X, y, RandomForestRegressor(n_estimators=20, max_depth=6, random_state=0).fit(X, y)


@pytest.fixture(scope="module")
def prof(x3):
    X, y, rf = x3
    return feature_profile(rf, X, y, "X1", grid=60)


@pytest.fixture(scope="module")
def ice_only(x3):
    X, _, rf = x3
    return feature_profile(rf, X, None, "X1", grid=20)


@pytest.fixture(scope="module")
def city(clf_data, clf_pipeline):
    X, y = clf_data
    return feature_profile(clf_pipeline, X, y, "city")


@pytest.fixture(scope="module")
def pfi(x3):
    X, y, rf = x3
    lm = LinearRegression().fit(X, y)
    return {
        "forest": permutation_importance(rf, X, y, n_repeats=4),
        "linear": permutation_importance(lm, X, y, n_repeats=4),
    }


@pytest.fixture(scope="module")
def ciu_table(x3):
    X, _, rf = x3
    profiles = {f: feature_profile(rf, X, None, f, grid=15) for f in ["X1", "X2", "X3"]}
    table = ciu_from_profiles(profiles, 0, out_range=(-20.0, 20.0))
    table["out_of_range"] = table.index == "X3"  # one flagged feature, whatever the model does
    return table


def segments(trace):
    """Split a one-trace curve bundle at its gaps: [(x, y, customdata), ...] per curve."""
    x, y, cd = (np.asarray(v, dtype=object) for v in (trace.x, trace.y, trace.customdata))
    gap = np.array([v is None or (isinstance(v, float) and np.isnan(v)) for v in y])
    ends = np.flatnonzero(gap)
    starts = np.r_[0, ends[:-1] + 1]
    return [(x[a:b], y[a:b].astype(float), cd[a:b]) for a, b in zip(starts, ends)]


def named(fig, prefix):
    return [t for t in fig.data if (t.name or "").startswith(prefix)]


# --- PI ------------------------------------------------------------------------------------
def test_pi_figure_all_curve_is_prof_pi(prof):
    """The "all" curve is prof.pi on prof.grid, in the bottom subplot."""
    fig = F.pi_figure(prof)
    (line,) = named(fig, "all (n=300)")
    assert_allclose(np.asarray(line.x, float), prof.grid)
    assert_allclose(np.asarray(line.y, float), prof.pi)
    assert line.yaxis == "y2"


def test_pi_figure_group_curves_are_subset_pi(prof, x3):
    """Each group's curve is prof.subset(mask).pi; an empty group is skipped."""
    X = x3[0]
    groups = {"X3 = 0": X.X3.to_numpy() == 0, "X3 = 1": X.X3.to_numpy() == 1, "none": np.zeros(300, bool)}
    fig = F.pi_figure(prof, groups)
    for label in ("X3 = 0", "X3 = 1"):
        sub = prof.subset(groups[label])
        (line,) = named(fig, f"{label} (n={len(sub.rows)})")
        assert_allclose(np.asarray(line.y, float), sub.pi)
    assert not named(fig, "none")


def test_pi_figure_global_pfi_line(prof):
    """A dashed horizontal line sits at the global PFI, labelled."""
    fig = F.pi_figure(prof, global_pfi=prof.importance)
    (shape,) = fig.layout.shapes
    assert shape.y0 == shape.y1 == pytest.approx(prof.importance)
    assert shape.line.dash == "dash"
    assert any(a.text == "all rows' PFI from the curves" for a in fig.layout.annotations)


def test_pi_figure_histogram_shows_x_all(prof, x3):
    """The top row is a histogram of the whole data's feature values."""
    fig = F.pi_figure(prof, x_all=x3[0].X1)
    (hist,) = [t for t in fig.data if t.type == "histogram"]
    assert_allclose(np.asarray(hist.x, float), x3[0].X1.to_numpy())


def test_pi_figure_categorical_levels(city, clf_data):
    """Categorical PI: x are level labels with "(missing)"; the top bars count levels."""
    X = clf_data[0]
    fig = F.pi_figure(city, x_all=X.city)
    (line,) = named(fig, "all")
    assert list(line.x) == ["oslo", "paris", "rome", "(missing)"]
    assert_allclose(np.asarray(line.y, float), city.pi)
    (bars,) = [t for t in fig.data if t.type == "bar"]
    counts = dict(zip(bars.x, np.asarray(bars.y)))
    assert counts["(missing)"] == X.city.isna().sum()
    assert counts["rome"] == (X.city == "rome").sum()


def test_pi_figure_without_target_is_empty(ice_only):
    """Without a target the PI figure is an empty figure saying so."""
    fig = F.pi_figure(ice_only)
    assert not fig.data and "target" in fig.layout.annotations[0].text


# --- ICI / ICE -----------------------------------------------------------------------------
def test_ici_curves_in_one_svg_scatter_with_one_gap_per_curve(prof):
    """All background curves are one SVG Scatter (no WebGL trace anywhere: WebGL without a GPU
    took 1.5-3.5 s to draw 1,000 curves); gaps (NaN/None) == number of curves."""
    fig = F.ici_figure(prof, n_points=1000)
    curve = fig.data[0]
    assert curve.type == "scatter" and len(named(fig, "ICI curves")) == 1
    assert {t.type for t in fig.data} == {"scatter"}
    y = np.asarray(curve.y, float)
    assert np.isnan(y).sum() == len(prof.rows) == len(segments(curve))


def test_ici_curve_points_carry_their_row_label(prof):
    """Each curve's customdata is one row label and its y is that row's ICI curve."""
    fig = F.ici_figure(prof, n_points=1000)
    for _x, y, cd in segments(fig.data[0])[:20]:
        (label,) = set(cd.tolist())
        assert_allclose(y, prof.ici[prof.rows.get_loc(label)])


def test_ici_summary_is_pi_without_customdata(prof):
    """The thick summary line is prof.pi on the full grid and carries no customdata."""
    fig = F.ici_figure(prof, n_points=50)
    (pi,) = named(fig, "PI")
    assert_allclose(np.asarray(pi.y, float), prof.pi)
    assert pi.customdata is None


def test_ici_highlights_largest_and_smallest_integral(prof):
    """The largest-integral style (colour, dash, symbol) marks the row with the largest local
    importance, the smallest-integral style the smallest."""
    fig = F.ici_figure(prof)
    (largest,) = [t for t in fig.data if (t.line.dash, t.marker.symbol) == F.LARGEST_STYLE]
    (smallest,) = [t for t in fig.data if (t.line.dash, t.marker.symbol) == F.SMALLEST_STYLE]
    assert largest.line.color == F.LARGEST_COLOR and smallest.line.color == F.SMALLEST_COLOR
    big, small = prof.extremes(1)
    assert set(np.asarray(largest.customdata).tolist()) == {big[0]}
    assert set(np.asarray(smallest.customdata).tolist()) == {small[0]}
    assert_allclose(np.asarray(largest.y, float), prof.ici[prof.rows.get_loc(big[0])])
    assert f"row {big[0]}" in largest.name


def test_ici_highlights_within_mask(prof, x3):
    """Under a mask the highlights are the subgroup's extremes and the summary its PI."""
    mask = x3[0].X3.to_numpy() == 1
    fig = F.ici_figure(prof, mask=mask, highlight=2)
    sub = prof.subset(mask)
    largest = [np.asarray(t.customdata)[0] for t in fig.data if t.line.color == F.LARGEST_COLOR]
    smallest = [np.asarray(t.customdata)[0] for t in fig.data if t.line.color == F.SMALLEST_COLOR]
    big, small = sub.extremes(2)
    assert largest == list(big) and smallest == list(small)
    (pi,) = named(fig, "PI")
    assert_allclose(np.asarray(pi.y, float), sub.pi)
    assert {cd[0] for _, _, cd in segments(fig.data[0])} == set(sub.rows)


def test_ici_selected_outside_subgroup_is_drawn_not_counted(prof, x3):
    """A selected row outside the mask (a Series here) is drawn, noted, and not counted."""
    mask = x3[0].X3 == 1
    outside = int(np.flatnonzero(~mask.to_numpy())[0])
    fig = F.ici_figure(prof, mask=mask, selected=outside, highlight=0)
    assert fig.data[-1].name.endswith("not in subgroup)")
    assert f": {mask.sum()} of {mask.sum()} observations" in fig.layout.title.text


def test_ici_sampling_caps_and_keeps_highlighted_and_selected(prof):
    """With max_curves the background has that many curves; highlights and selection stay."""
    big, small = prof.extremes(1)
    sampled = set(range(300))
    for seed in range(50):  # a seed whose sample misses a highlighted row
        fig = F.ici_figure(prof, max_curves=10, selected=5, random_state=seed)
        sampled = {cd[0] for _, _, cd in segments(fig.data[0])}
        if not {big[0], small[0], 5} <= sampled:
            break
    assert len(sampled) == 10
    drawn = {np.asarray(t.customdata)[0] for t in fig.data[2:]}
    assert drawn == {big[0], small[0], 5}
    assert fig.data[-1].line.color == F.SELECTED_COLOR and "row 5" in fig.data[-1].name


def test_ici_sampling_is_seeded(prof):
    """The same random_state draws the same curves; another one different curves."""
    rows = [
        [cd[0] for _, _, cd in segments(F.ici_figure(prof, max_curves=10, random_state=s).data[0])] for s in (1, 1, 2)
    ]
    assert rows[0] == rows[1] != rows[2]


def test_ici_thins_grid_to_n_points(prof):
    """Background curves use n_points evenly spaced grid points, first and last included."""
    fig = F.ici_figure(prof, n_points=25)
    x, _, _ = segments(fig.data[0])[0]
    assert len(x) == 25
    assert x[0] == prof.grid[0] and x[-1] == prof.grid[-1]
    assert "25 of 60 grid points" in fig.layout.title.subtitle.text


def test_ici_title_counts(prof):
    """The title states drawn and eligible observation counts."""
    fig = F.ici_figure(prof, max_curves=40, highlight=0)
    assert fig.layout.title.text.startswith("ICI curves of X1: 40 of 300 observations drawn")


def test_ici_string_row_labels(gbm, reg_data):
    """String row labels reach customdata as strings, and selection matches them."""
    X, y = reg_data
    p = feature_profile(gbm, X, y, "x1")
    fig = F.ici_figure(p, selected="r7")
    assert fig.data[-1].name.startswith("selected: row r7")
    assert set(np.asarray(fig.data[-1].customdata).tolist()) == {"r7"}


def test_ice_summary_is_pd_and_centred(prof):
    """ICE shows prof.pd on top; centred, the summary and curves start at zero."""
    (pd_line,) = named(F.ice_figure(prof), "PD")
    assert_allclose(np.asarray(pd_line.y, float), prof.pd)
    fig = F.ice_figure(prof, centered=True, n_points=1000)
    (pd_line,) = named(fig, "PD")
    assert_allclose(np.asarray(pd_line.y, float), prof.centered_ice.mean(axis=0))
    _, y, cd = segments(fig.data[0])[3]
    assert_allclose(y, prof.centered_ice[prof.rows.get_loc(cd[0])])


def test_ice_without_target_has_no_highlights(ice_only):
    """ICE of a profile without target draws curves and PD, no highlighted rows."""
    fig = F.ice_figure(ice_only, selected=3)
    assert [t.name.split(" ")[0] for t in fig.data] == ["ICE", "PD", "selected:"]


def test_ici_without_target_is_empty(ice_only):
    """ICI needs the target: an empty figure explains it."""
    assert not F.ici_figure(ice_only).data


def test_ici_categorical_levels_are_a_strip_not_lines(city):
    """Issue 11, defect 9: unordered levels get no line through them. Each curve is a dot per
    level, jittered around the level's position (labelled with the level, missing shown as
    "(missing)"); PI and the highlighted rows are marks on the levels."""
    levels = ["oslo", "paris", "rome", "(missing)"]
    for fig in (F.ici_figure(city), F.ice_figure(city)):
        assert all(t.mode == "markers" for t in fig.data), [t.mode for t in fig.data]
        assert list(fig.layout.xaxis.ticktext) == levels and list(fig.layout.xaxis.tickvals) == [0, 1, 2, 3]
        curves = city.ici if "ICI" in fig.layout.title.text else city.ice
        drawn = segments(fig.data[0])
        assert len(drawn) == len(city.rows)
        for x, y, cd in drawn:
            x = x.astype(float)
            assert_allclose(np.round(x), np.arange(4))
            assert (np.abs(x - np.round(x)) <= 0.28).all() and np.ptp(x - np.round(x)) > 0  # jittered
            assert_allclose(y, curves[city.rows.get_loc(cd[0])])
        summary = fig.data[1]
        assert_allclose(np.asarray(summary.x, float), np.arange(4))
        assert list(summary.text) == levels, summary.text
    assert_allclose(np.asarray(F.ici_figure(city).data[1].y, float), city.pi)


def test_pi_categorical_levels_are_dots(city):
    fig = F.pi_figure(city)
    assert [t.mode for t in fig.data if t.type == "scatter"] == ["markers"]


# --- bars ----------------------------------------------------------------------------------
def test_pfi_bars_sorted_with_feature_customdata(pfi):
    """Bars follow the mean importance across models, largest first; customdata = feature."""
    fig = F.pfi_figure(pfi)
    bars = [t for t in fig.data if t.type == "bar"]
    assert [b.name for b in bars] == ["forest", "linear"]
    mean = (pfi["forest"].importance + pfi["linear"].importance) / 2
    order = list(mean.sort_values(ascending=False).index)
    for b in bars:
        assert list(b.y) == order and list(b.customdata) == order
        assert_allclose(np.asarray(b.x, float), pfi[b.name].importance[order])
        # the whisker is the standard error written after every "±" (issue 39), not the spread
        assert_allclose(np.asarray(b.error_x.array, float), pfi[b.name].uncertainty[order])
        assert_allclose(np.asarray(b.error_x.array, float), pfi[b.name].row_std_error[order])  # rows and permutations
    assert list(fig.layout.yaxis.categoryarray) == order[::-1]  # largest on top


def test_pfi_repeat_dots(pfi):
    """One legend-less scatter per model holds every repeat, with feature customdata."""
    fig = F.pfi_figure(pfi)
    dots = [t for t in fig.data if t.type == "scatter"]
    assert len(dots) == 2 and not any(d.showlegend for d in dots)
    reps = pfi["forest"].repeats
    assert_allclose(np.sort(np.asarray(dots[0].x, float)), np.sort(reps.to_numpy().ravel()))
    assert set(dots[0].customdata) == set(reps.index)


def test_pfi_selected_feature_bold_and_outlined(pfi):
    """The selected feature's tick is bold and its bars outlined."""
    fig = F.pfi_figure(pfi, selected="X2")
    ticks = dict(zip(fig.layout.yaxis.tickvals, fig.layout.yaxis.ticktext))
    assert ticks["X2"] == "<b>X2</b>" and ticks["X1"] == "X1"
    bar = fig.data[0]
    assert bar.marker.line.width[list(bar.y).index("X2")] > 0


def test_pfi_title_and_height(pfi):
    """Title names loss, kind and repeats; height grows with the features (min 300)."""
    fig = F.pfi_figure(pfi)
    assert fig.layout.title.text == (
        "PFI (difference in squared error), mean ± standard error over the 300 rows used and 4 permutations"
    )
    assert fig.layout.height >= 300
    repeats = pd.DataFrame(
        {"repeat_1": np.arange(40.0), "repeat_2": np.arange(40.0) + 0.2}, index=[f"f{i}" for i in range(40)]
    )
    many = {"m": compute.PermutationImportance(repeats=repeats, model_error=1.0, loss="squared_error")}
    assert F.pfi_figure(many).layout.height >= 40 * 28


def test_sfimp_shares_and_legend(x3):
    """SFIMP bars are the values, labels the shares (summing to ~100%), legend the error."""
    X, y, rf = x3
    res = shapley_importance(rf, X, y, n_obs_permutations=2)
    (bar,) = F.sfimp_figure({"forest": res}).data
    order = list(res.values.sort_values(ascending=False).index)
    assert list(bar.customdata) == order
    assert_allclose(np.asarray(bar.x, float), res.values[order])
    assert sum(float(t.rstrip("%")) for t in bar.text) == pytest.approx(100, abs=2)
    assert bar.name == f"forest: error {res.model_error:.3g}"


def test_ciu_solid_bar_is_ci_times_cu(ciu_table):
    """CIU: transparent CI bar, solid bar of length CI * CU, sorted by CI, overlay."""
    fig = F.ciu_figure(ciu_table)
    ci, cu = fig.data[0], fig.data[1]
    order = list(ciu_table.CI.sort_values(ascending=False).index)
    assert list(ci.customdata) == order and fig.layout.barmode == "overlay"
    assert_allclose(np.asarray(ci.x, float), ciu_table.CI[order])
    assert_allclose(np.asarray(cu.x, float), (ciu_table.CI * ciu_table.CU)[order])
    assert ci.opacity < 1 and cu.opacity is None


def test_ciu_out_of_range_marker(ciu_table):
    """Features flagged out_of_range get a marker trace."""
    (marker,) = named(F.ciu_figure(ciu_table), "out of range")
    assert list(marker.customdata) == ["X3"]


def test_influence_sorted_by_magnitude_and_signed_colours(ciu_table):
    """Influence bars are sorted by |influence|, positive in the raising colour, negative in
    the lowering one."""
    table = ciu_table.assign(influence=[0.3, -0.5, 0.1])
    (bar,) = F.influence_figure(table).data
    assert list(bar.y) == ["X2", "X1", "X3"]
    assert list(bar.marker.color) == [F.NEGATIVE_COLOR, F.POSITIVE_COLOR, F.POSITIVE_COLOR]


def test_global_ci_bars_with_std():
    """Global CI bars are sorted by CI with error_x = CI_std and feature customdata."""
    table = pd.DataFrame({"CI": [0.2, 0.6], "CI_std": [0.05, 0.1]}, index=["a", "b"])
    (bar,) = F.global_ci_figure(table, selected="a").data
    assert list(bar.customdata) == ["b", "a"]
    assert_allclose(np.asarray(bar.error_x.array, float), [0.1, 0.05])


def test_ale_figure_carries_ale_and_counts(x3):
    """ALE line = the ale column; the bars count rows per interval."""
    X, _, rf = x3
    ale = ale_from_profile(feature_profile(rf, X, None, "X1", grid=11))
    fig = F.ale_figure(ale, feature="X1")
    assert_allclose(np.asarray(fig.data[0].y, float), ale.ale)
    assert_allclose(np.asarray(fig.data[1].y, float), ale.n_obs[1:])


# --- misc ----------------------------------------------------------------------------------
def test_empty_figure_message():
    """An empty figure shows the message and hides its axes."""
    fig = F.empty_figure("select a subgroup")
    assert fig.layout.annotations[0].text == "select a subgroup"
    assert fig.layout.xaxis.visible is False and fig.layout.yaxis.visible is False


def test_every_figure_has_template_and_uirevision(prof, pfi):
    """Figures set the template and a stable uirevision per figure; import sets no default."""
    for fig in (F.pfi_figure(pfi), F.ici_figure(prof, max_curves=5), F.pi_figure(prof)):
        assert fig.layout.template.layout.paper_bgcolor is not None and fig.layout.uirevision
    assert pio.templates.default == "plotly"
    assert F.ici_figure(prof, max_curves=5).layout.uirevision == F.ici_figure(prof).layout.uirevision


def test_table_data_round_trip():
    """Records and columns rebuild the frame, floats unrounded; a float column shows them to
    ``digits`` significant digits (its d3 format), as the report writes them."""
    df = pd.DataFrame(
        {"CI": [0.123456, 12345.678], "n": [1, 2], "ok": [True, False], "note": ["a", None]},
        index=pd.Index(["x1", "x2"], name="feature"),
    )
    records, columns = F.table_data(df, digits=3)
    assert [c["id"] for c in columns] == ["feature", "CI", "n", "ok", "note"]
    back = pd.DataFrame(records).set_index("feature")
    assert back.CI.tolist() == [0.123456, 12345.678]
    formats = {c["id"]: c.get("format") for c in columns}
    assert formats == {"feature": None, "CI": {"specifier": ",.3~r"}, "n": None, "ok": None, "note": None}
    assert [F.shown_number(v, 3) for v in back.CI] == ["0.123", "12,300"]
    assert [F.shown_number(v) for v in (0.00012345, -3.14159, 99999.9, 1234, 0.0)] == [
        "0.0001234",
        "-3.142",
        "100,000",
        "1,234",
        "0",
    ]
    assert back.n.tolist() == [1, 2] and back.ok.tolist() == [True, False]
    assert records[1]["note"] is None
    assert F.table_data(df.reset_index(drop=True), index_name="row")[1][0]["id"] == "row"


def test_a_figures_own_margin_never_changes_the_default_for_later_figures():
    """``_style`` merged a figure's margin into the module's MARGIN itself: after one
    convergence figure (bottom margin 100) every later figure had it, depending on which
    requests came first."""
    from dashboard import figures

    before = dict(figures.MARGIN)
    fig = figures._style(figures._figure(), "t", "u", margin=dict(b=123))
    assert fig.layout.margin.b == 123
    assert figures.MARGIN == before
    assert figures.empty_figure("x").layout.margin.b == before["b"]


def test_a_long_subtitle_takes_a_second_line_at_a_fact_boundary():
    """The wine demo's PFI subtitle (three models; what ± is; which rows) was cut at the right
    edge of a half-width panel ("…; all 72 ro"): it now breaks after a "; " that fits."""
    from dashboard.figures.theme import SUBTITLE_CHARS, _figure, _style

    long = "XGBoost, LightGBM, CatBoost; mean ± standard error over the 72 rows used and 10 permutations; all 72 rows"
    text = _style(_figure(), "t", "u", subtitle=long).layout.title.subtitle.text
    first, second = text.split("<br>")
    assert len(first) <= SUBTITLE_CHARS and first.endswith(";") and second == "all 72 rows"
    assert f"{first} {second}" == long  # nothing lost or added but the break
    short = "random forest; all 500 rows"
    assert _style(_figure(), "t", "u", subtitle=short).layout.title.subtitle.text == short
    markup = "a <b> model; " + "x" * 100  # a visitor's markup stays text, wrapped or not
    assert "<b>" not in _style(_figure(), "t", "u", subtitle=markup).layout.title.subtitle.text
