"""Issue 25: the page shows compute's numbers, never its own. Every registered view declares
the numbers it shows as the library defines them (``View.library``); each view is rendered
for states that give it something to show, and each declared number is found in what it
drew, unchanged: a labelled Series as a bar series or a table column (aligned by label), an
array as a curve, at 1e-12; a float written in a sentence to the digits it is written with.

A new view cannot skip this: a view without ``library`` fails the first test, and one whose
declared numbers are not on the page fails the second."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from dashboard import jobs, views
from dashboard.callbacks.compute import resolve_state
from dashboard.config import Config
from dashboard.server import create_app
from dashboard.state import default_state, normalize
from dashboard.views import plan_state

# states that give every view numbers to show: a classifier with a subgroup, an excluded
# row, a what-if edit and SFIMP; a regressor with its selected row
STATES = {
    "x3": {
        "ws": "demo-x3",
        "feature": "X1",
        "subgroup": "X3 == 0",
        "obs": "12",
        "exclude": ["4"],
        "sfimp": True,
        "edit": {"X1": 0.25},
    },
    "diabetes": {"ws": "demo-diabetes", "model": "random forest", "feature": "bmi", "obs": "7", "sfimp": True},
}
RTOL = ATOL = 1e-12


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return create_app(Config(cache_dir=str(tmp_path_factory.mktemp("numbers")), max_curves=150))._wip_context


@pytest.fixture(scope="module")
def drawn(ctx) -> dict:
    """Per state: the Inputs and every view's rendered outputs, all results computed."""
    found = {}
    for name, changes in STATES.items():
        state, error = normalize(ctx, {**default_state(), **changes})
        assert error is None, error
        ws = ctx.store.workspace(state["ws"])
        jobs.run(ctx.store, ws, plan_state(ctx, ws, state)["tasks"], policy=ctx.policy)
        results = resolve_state(ctx, state, None).results
        assert isinstance(results, dict) and "sigs" in results and "error" not in results
        inp = views.load_inputs(ctx, results)
        found[name] = (inp, {v.name: views.render(ctx, v, results, inp) for v in views.REGISTRY})
    return found


def _numeric(values) -> np.ndarray | None:
    if values is None:
        return None
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        return None
    return arr.ravel() if arr.size else None


def _labels(values) -> list | None:
    if values is None or _numeric(values) is not None:
        return None
    return [str(v) for v in np.asarray(values, dtype=object).ravel()]


def _shown(out: dict) -> tuple[list[pd.Series], list[np.ndarray], str]:
    """What a view drew: labelled series (bars by category, table columns by first column),
    numeric arrays (each curve, split at gaps), and all its text."""
    series: list[pd.Series] = []
    arrays: list[np.ndarray] = []
    texts: list[str] = []
    for value in out.values():
        if isinstance(value, go.Figure):
            texts.append(json.dumps(value.layout.to_plotly_json(), default=str))
            for trace in value.data:
                texts.append(str(getattr(trace, "name", "") or ""))
                x, y = getattr(trace, "x", None), getattr(trace, "y", None)
                errors = [getattr(getattr(trace, axis, None), "array", None) for axis in ("error_x", "error_y")]
                for labels, numbers in ((_labels(y), _numeric(x)), (_labels(x), _numeric(y))):
                    if labels is not None and numbers is not None and len(labels) == len(numbers):
                        series.append(pd.Series(numbers, index=labels))
                        for err in errors:
                            e = _numeric(err)
                            if e is not None and len(e) == len(labels):
                                series.append(pd.Series(e, index=labels))
                z = getattr(trace, "z", None)
                if z is not None and np.ndim(z) == 2 and _labels(x) is not None and _labels(y) is not None:
                    cells = np.asarray(z, dtype=float)  # a heatmap's cells by "row label × column label"
                    index = [f"{r} × {c}" for r in _labels(y) for c in _labels(x)]
                    series.append(pd.Series(cells.ravel(), index=index).dropna())
                for values in (x, y, z, getattr(trace, "base", None), *errors):
                    arr = _numeric(values)
                    if arr is None:
                        continue
                    arrays += [arr, arr[~np.isnan(arr)]]  # a missing point drawn after a gap
                    gaps = np.flatnonzero(np.isnan(arr))
                    arrays += [part for part in np.split(arr, gaps) if part.size]  # curves joined by gaps
                    arrays += [part[1:] for part in np.split(arr, gaps)[1:] if part.size > 1]
        elif isinstance(value, list) and value and all(isinstance(r, dict) for r in value):  # table records
            columns = list(value[0])
            text_columns = [c for c in columns if any(isinstance(r.get(c), str) for r in value)]
            keys = [  # a row's label: its first cell, or its text cells joined (model | rows)
                [str(r.get(columns[0])) for r in value],
                [" | ".join(str(r.get(c)) for c in text_columns) for r in value],
            ]
            for column in columns:
                numbers = _numeric([r.get(column) if r.get(column) is not None else np.nan for r in value])
                if numbers is not None:
                    series += [pd.Series(numbers, index=index) for index in keys]
                texts += [str(r.get(column)) for r in value]
        else:
            texts.append(json.dumps(value, default=str))
    return series, arrays, "\n".join(texts)


def _found_series(expected: pd.Series, series: list[pd.Series]) -> bool:
    labels = [" | ".join(map(str, i)) if isinstance(i, tuple) else str(i) for i in expected.index]
    want = pd.Series(np.asarray(expected, dtype=float), index=labels)
    for got in series:
        if set(got.index) >= set(want.index) and got.index.is_unique:
            values = got.reindex(want.index).to_numpy(float)
            if np.allclose(values, want.to_numpy(float), rtol=RTOL, atol=ATOL, equal_nan=True):
                return True
    return False


def _found_array(expected: np.ndarray, arrays: list[np.ndarray]) -> bool:
    want = np.asarray(expected, dtype=float).ravel()
    return any(
        got.shape == want.shape and np.allclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True) for got in arrays
    )


NUMBER = re.compile(r"[-−]?\d[\d,]*\.?\d*(?:e[-+]?\d+)?")


def _found_in_text(value: float, text: str) -> bool:
    """A float written in a sentence: some number in the text, of 2 or more significant
    digits, is the value rounded to them (a percentage: the value times 100)."""
    for match in NUMBER.finditer(text):
        word = match.group().replace(",", "").replace("−", "-").rstrip(".")
        try:
            written = float(word)
        except ValueError:
            continue
        digits = len(word.split("e")[0].lstrip("-").replace(".", "").lstrip("0"))
        if digits < 2 or written == 0:
            continue
        target = value * 100 if text[match.end() : match.end() + 1] == "%" else value
        unit = 10.0 ** (np.floor(np.log10(abs(written))) - digits + 1)
        if abs(target - written) <= 0.5 * unit * (1 + 1e-9):
            return True
    return False


def test_every_view_declares_the_numbers_it_shows():
    undeclared = [v.name for v in views.REGISTRY if v.library is None]
    assert not undeclared, f"views without View(library=...): {undeclared}"


@pytest.mark.parametrize("view", [v.name for v in views.REGISTRY])
def test_a_view_shows_the_librarys_numbers_unchanged(drawn, view):
    spec = views.BY_NAME[view]
    assert spec.library is not None
    checked = 0
    for name, (inp, outs) in drawn.items():
        expected = spec.library(inp)
        series, arrays, text = _shown(outs[view])
        for what, value in expected.items():
            if isinstance(value, pd.Series):
                ok = _found_series(value, series)
            elif isinstance(value, np.ndarray):
                ok = _found_array(value, arrays)
            else:
                ok = _found_in_text(float(value), text)
            assert ok, f"{view} on {name}: {what} = {value!r} is not what the view shows"
            checked += 1
    assert checked, f"{view} showed no number on any state: give it a state that does"


def test_the_check_catches_a_number_the_dashboard_changed(drawn):
    """The finder is not lenient: a bar off by 1e-9, a curve rounded to 4 digits, a sentence
    with the wrong third digit are not found."""
    inp, outs = drawn["diabetes"]
    series, arrays, _ = _shown(outs["pfi"])
    importance = next(iter(inp.pfi.values())).importance
    assert _found_series(importance, series)
    assert not _found_series(importance + 1e-9, series)
    pd_curve = inp.profile.mean_curve("ICE")
    _, curve_arrays, _ = _shown(outs["ice"])
    assert _found_array(pd_curve, curve_arrays)
    assert not _found_array(np.round(pd_curve, 4), curve_arrays)
    assert _found_in_text(0.1234, "PFI 0.123 vs 0.5") and not _found_in_text(0.1254, "PFI 0.123 vs 0.5")
    assert _found_in_text(0.42, "explains 42% of") and not _found_in_text(0.45, "explains 42% of")
