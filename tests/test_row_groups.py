"""Data read by row groups (issue 44): the store keeps a data set in row groups, a range of
rows is read from the groups holding it alone, and the all-rows prediction pass split into
one part per group (each reading only its rows, no data set loaded) joins to exactly the
numbers of one pass."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

import compute
from dashboard import jobs, planning, row_groups
from dashboard.config import Config
from dashboard.server import create_app
from dashboard.state import default_state, normalize
from dashboard.store import Store
from dashboard.views import plan_state


def test_a_data_set_is_kept_in_row_groups_and_a_range_is_read_from_its_groups(tmp_path, monkeypatch):
    monkeypatch.setattr(row_groups, "ROW_GROUP_ROWS", 1_000)
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=10_500), "b": rng.integers(0, 9, 10_500), "c": ["x", "y", "z"] * 3_500})
    store = Store(tmp_path)
    rel, _ = store.keep_data(frame)
    assert row_groups.sizes(store.root / rel) == [1_000] * 10 + [500]
    assert row_groups.covering([1_000] * 10 + [500], 2_500, 4_100) == ([2, 3, 4], 500)
    assert row_groups.covering([1_000] * 10 + [500], 10_000, 10_500) == ([10], 0)
    with pytest.raises(ValueError, match="outside"):
        row_groups.covering([1_000] * 10 + [500], 0, 10_501)

    class _Ws:
        data_path = rel

    for a, b in ((2_500, 4_100), (0, 1_000), (999, 1_001), (10_000, 10_500), (7, 7)):
        got = store.rows(_Ws, (a, b), ["a", "c"])  # type: ignore[arg-type]
        want = frame.iloc[a:b][["a", "c"]].reset_index(drop=True)
        pd.testing.assert_frame_equal(got, want)
    read = []
    original = row_groups.read_groups
    monkeypatch.setattr(
        row_groups, "read_groups", lambda src, groups, cols: read.append(groups) or original(src, groups, cols)
    )
    store.rows(_Ws, (2_500, 4_100), ["a"])  # type: ignore[arg-type]
    assert read == [[2, 3, 4]]  # the groups holding those rows, no other


def _ctx(tmp_path, name):
    return create_app(Config(cache_dir=str(tmp_path / name), max_curves=150, warm=False))._wip_context


@pytest.mark.parametrize("demo", ["demo-cancer", "demo-x3"])
def test_the_prediction_pass_split_by_rows_joins_to_one_pass(tmp_path, monkeypatch, demo):
    """Parts of 50 rows (the demo's data in groups of 50), run in any order with the data set
    never loaded for them, then joined: the predictions of one pass within 1e-9 of their
    range (a linear model's BLAS sums and a forest's threaded sum over trees may round
    differently on fewer rows)."""
    monkeypatch.setattr(row_groups, "ROW_GROUP_ROWS", 50)
    found = {}
    for name in ("whole", "split"):
        ctx = _ctx(tmp_path, name)
        ws = ctx.store.workspace(demo)
        assert ws.n_rows == len(ctx.store.data(ws)) > 100
        state = normalize(ctx, {**default_state(), "ws": ws.id})[0]
        planned = plan_state(ctx, ws, state)
        todo = planning.missing(ctx.store, [t for t in planned["tasks"] if t["kind"] == "predictions"])
        assert len(todo) == len(ws.models)
        if name == "split":
            parts, joins = jobs.split(ws, todo)
            assert {p["kind"] for p in parts} == {"predictions_part"}
            assert len(parts) == len(ws.models) * -(-ws.n_rows // 50)
            with monkeypatch.context() as lean:  # a part reads its own rows: the data set is never loaded
                lean.setattr(type(ctx.store), "data", lambda self, ws: pytest.fail("a part loaded the data set"))
                for k in np.random.default_rng(1).permutation(len(parts)):
                    jobs.run(ctx.store, ws, [parts[k]], policy=ctx.policy)
            jobs.run(ctx.store, ws, joins, policy=ctx.policy)
        else:
            jobs.run(ctx.store, ws, todo, policy=ctx.policy)
        assert planning.missing(ctx.store, todo) == []
        found[name] = {t["model"]: ctx.store.get(t["key"]) for t in todo}
    for model, whole in found["whole"].items():
        split = found["split"][model]
        spread = max(1.0, float(np.ptp(whole.raw)))
        assert float(np.max(np.abs(whole.raw - split.raw))) <= 1e-9 * spread, model
        assert whole.rows.equals(split.rows) and whole.output_index == split.output_index


def test_a_part_of_one_row_group_keeps_about_a_megabyte():
    """A part's result at the real group size: a binary classifier's probabilities of
    ROW_GROUP_ROWS rows, pickled, about 1 MB (and no copy of the rows themselves)."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(row_groups.ROW_GROUP_ROWS, 30)), columns=[f"x{i}" for i in range(30)])
    model = LogisticRegression().fit(X.iloc[:2_000], (X.iloc[:2_000, 0] > 0).astype(int))
    size = len(pickle.dumps(compute.predict_rows(model, X)))
    assert 1_000_000 < size <= 1.1 * 2**20, size


def test_predictions_of_parts_refuse_to_join_across_models():
    classes = np.array([0, 1])
    a = compute.Predictions(np.zeros((3, 2)), pd.RangeIndex(3), classes, True, 1)
    b = compute.Predictions(np.zeros((2, 2)), pd.RangeIndex(2), classes, True, 0)
    c = compute.Predictions(np.ones((2, 2)), pd.RangeIndex(3, 5), classes, True, 1)
    with pytest.raises(compute.InputError, match="different models"):
        compute.Predictions.concat([a, b])
    with pytest.raises(compute.InputError, match="5 predictions for 4 rows"):
        compute.Predictions.concat([a, c], rows=range(4))
    joined = compute.Predictions.concat([a, c])
    assert list(joined.rows) == [0, 1, 2, 3, 4] and joined.raw[3:].sum() == 4


FRAMES = {
    "mixed types, a named text index": pd.DataFrame(
        {
            "a": pd.array([1, None, 3] * 30_000, dtype="Int64"),
            "b": pd.Categorical(["x", "y", "x"] * 30_000),
            "c": [1.5, 2.5, np.nan] * 30_000,
            "d": ["p", None, "r"] * 30_000,
            "t": pd.to_datetime(["2020-01-01"] * 90_000).tz_localize("UTC"),
            "e": [True, False, True] * 30_000,
            "o": [None] * 90_000,  # no values in any group
        },
        index=pd.Index([f"r{i}" for i in range(90_000)], name="id"),
    ),
    "float32 over 4 groups, a stepped range index": pd.DataFrame(
        {"x": np.arange(200_000, dtype=np.float32), "y": 1}, index=pd.RangeIndex(5, 400_005, 2)
    ),
    "number labels": pd.DataFrame(np.ones((5, 3)), columns=[0, 1, 2]),
    "an integer index": pd.DataFrame({"x": [1.0, 2.0]}, index=[10, 20]),
    "no rows": pd.DataFrame({"x": pd.Series([], dtype=float)}),
}


@pytest.mark.parametrize("name", list(FRAMES))
def test_a_data_set_written_a_group_at_a_time_and_read_a_column_at_a_time_is_pandas_own(tmp_path, name):
    """The store writes a frame a row group at a time and reads it back a column at a time
    (to hold one copy of a large data set, not three): the file reads as ``to_parquet``'s
    does, in the same row groups, and the frame read back is ``pd.read_parquet``'s, types,
    index and labels included."""
    frame = FRAMES[name]
    ours, pandas_own = tmp_path / "ours.parquet", tmp_path / "pandas.parquet"
    row_groups.write(frame, ours)
    frame.to_parquet(pandas_own, row_group_size=row_groups.ROW_GROUP_ROWS)
    assert row_groups.sizes(ours) == row_groups.sizes(pandas_own)
    expected = pd.read_parquet(pandas_own)
    pd.testing.assert_frame_equal(pd.read_parquet(ours), expected)
    pd.testing.assert_frame_equal(row_groups.read_frame(ours), expected)
    pd.testing.assert_frame_equal(row_groups.read_frame(pandas_own), expected)


def test_decimal_columns_are_written_plain_and_the_others_with_a_dictionary(tmp_path):
    """Decimal numbers rarely repeat: Parquet's dictionary, tried first by default, only slows
    the write (10x at 1,000,000 x 100). Text and whole numbers keep it."""
    import pyarrow.parquet as pq

    frame = FRAMES["float32 over 4 groups, a stepped range index"].assign(text=lambda f: (f["x"] % 3).astype(str))
    path = tmp_path / "data.parquet"
    row_groups.write(frame, path)
    column = {pq.ParquetFile(path).metadata.row_group(0).column(k).path_in_schema: k for k in range(3)}
    encodings = {name: pq.ParquetFile(path).metadata.row_group(0).column(k).encodings for name, k in column.items()}
    assert not any("DICTIONARY" in e for e in encodings["x"]), encodings
    assert any("DICTIONARY" in e for e in encodings["y"]) and any("DICTIONARY" in e for e in encodings["text"])
