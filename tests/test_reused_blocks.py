"""One reused buffer per thread for streams that cycle through rows (PFI's repeats, the
interaction passes), for a model that declares
``input_read_only``: the model must see exactly the rows a freshly built block would hold."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import GradientBoostingRegressor

import compute
from compute import importance, prediction
from compute.intervention import Design
from compute.prediction import predict_segments
from compute.segments import GridSpec, _fill_cycle, cycle_segment, cycled, repeated
from compute.validation import make_predictor, resolve_loss


class Recorder:
    """Wraps a fitted model: records a copy of every block it is fed, in order, and
    declares ``input_read_only`` (or not). ``dtype`` mimics XGBoost's float32 declaration."""

    def __init__(self, model, *, read_only: bool, dtype=None):
        self.model = model
        self.feature_names_in_ = model.feature_names_in_
        self.n_features_in_ = model.n_features_in_
        if read_only:
            self.input_read_only = True
        if dtype is not None:
            self.input_dtype = dtype
        self.blocks: list[np.ndarray] = []

    def predict(self, X):
        values = np.array(X, copy=True)
        self.blocks.append(values)
        return self.model.predict(pd.DataFrame(values.astype(np.float64), columns=self.feature_names_in_))


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = pd.DataFrame(rng.normal(size=(90, 4)), columns=["a", "b", "c", "d"])
    X.index = [f"r{i}" for i in range(len(X))]
    y = X.a + X.b * X.c + 0.3 * np.sin(3 * X.d) + 0.1 * rng.normal(size=len(X))
    return X, y.to_numpy()


@pytest.fixture(scope="module")
def fitted(data):
    X, y = data
    return GradientBoostingRegressor(n_estimators=20, max_depth=3, random_state=0).fit(X, y)


@pytest.fixture
def counted(monkeypatch):
    """How many blocks went through a reused buffer."""
    calls = {"n": 0}
    original = prediction._CycleBuffer.block

    def block(self, specs):
        calls["n"] += 1
        return original(self, specs)

    monkeypatch.setattr(prediction._CycleBuffer, "block", block)
    return calls


def _passes(model, X, y, chunk_rows, n_jobs):
    """PFI on a sample and on all rows, one feature's curves on a sample and on all rows, and
    the interaction statistics: every cycling stream."""
    return {
        "pfi_sample": compute.permutation_importance(
            model, X, y, n_obs=37, n_repeats=3, random_state=4, chunk_rows=chunk_rows, n_jobs=n_jobs
        ),
        "pfi_all": compute.permutation_importance(
            model, X, y, n_repeats=2, random_state=4, chunk_rows=chunk_rows, n_jobs=n_jobs
        ),
        "curves_sample": compute.feature_profile(
            model, X, y, "b", grid=11, n_obs=29, random_state=1, chunk_rows=chunk_rows, n_jobs=n_jobs
        ),
        "curves_all": compute.feature_profile(model, X, y, "c", grid=7, chunk_rows=chunk_rows, n_jobs=n_jobs),
        "interaction": compute.interaction_strength(
            model, X, n_obs=31, grid_size=5, pairs=[("b", "c")], chunk_rows=chunk_rows, n_jobs=n_jobs
        ),
    }


def _same(a: dict, b: dict) -> None:
    for key in ("pfi_sample", "pfi_all"):
        pd.testing.assert_frame_equal(a[key].to_frame(), b[key].to_frame(), check_exact=True)
        assert a[key].model_error == b[key].model_error
    for key in ("curves_sample", "curves_all"):
        assert np.array_equal(a[key].pred, b[key].pred) and np.array_equal(a[key].base_pred, b[key].base_pred)
        assert np.array_equal(a[key].loss_grid, b[key].loss_grid)
    pd.testing.assert_frame_equal(a["interaction"].overall, b["interaction"].overall, check_exact=True)
    pd.testing.assert_frame_equal(a["interaction"].pairs, b["interaction"].pairs, check_exact=True)


# chunks that cut the cycles anywhere (7, 37: not multiples of the sample sizes), one
# chunk per cycle turn or less, and the default budget
@pytest.mark.parametrize("chunk_rows", [None, 7, 37, 400])
@pytest.mark.parametrize("dtype", [None, np.float32])
def test_a_reused_buffer_feeds_the_model_the_rows_of_fresh_blocks(data, fitted, counted, chunk_rows, dtype):
    """Block by block, a model declaring ``input_read_only`` is fed exactly the rows that
    a model without the declaration gets in freshly built blocks (so every column written
    into the buffer for one chunk is put back before the next), and every result is equal."""
    X, y = data
    fresh, reused = Recorder(fitted, read_only=False, dtype=dtype), Recorder(fitted, read_only=True, dtype=dtype)
    a = _passes(fresh, X, y, chunk_rows, 1)
    assert counted["n"] == 0  # without the declaration, no buffer is reused
    b = _passes(reused, X, y, chunk_rows, 1)
    assert counted["n"] > 0
    # the same rows in the same order (the chunks may be cut elsewhere: a reused buffer has
    # its own budget, and a chunk ends where cycled rows meet others)
    seen, fed = np.concatenate(fresh.blocks), np.concatenate(reused.blocks)
    assert seen.dtype == fed.dtype and np.array_equal(seen, fed)
    _same(a, b)


def test_threads_each_reuse_their_own_buffer(data, fitted, counted):
    """With n_jobs=2 (each thread its own buffer) the results equal the serial ones."""
    X, y = data
    serial = _passes(Recorder(fitted, read_only=False), X, y, 23, 1)
    threaded = _passes(Recorder(fitted, read_only=True), X, y, 23, 2)
    assert counted["n"] > 0
    _same(serial, threaded)


class _Keeper(Recorder):
    """Keeps the very arrays it is fed (not copies), as a model holding on to its input would."""

    def predict(self, X):
        self.blocks.append(X)
        return self.model.predict(pd.DataFrame(np.asarray(X, dtype=np.float64), columns=self.feature_names_in_))


@pytest.mark.parametrize("read_only", [False, True])
def test_only_a_read_only_model_gets_the_curve_chunks_in_one_reused_array(data, fitted, read_only):
    """A curve tensor's chunks go into one reused array per thread only for a model that
    declares ``input_read_only``; any other model may keep what it is fed, so it gets a new
    array per chunk (the rows both are fed are compared in the test above)."""
    X, y = data
    model = _Keeper(fitted, read_only=read_only)
    compute.feature_profile(model, X, y, "b", grid=11, n_obs=29, random_state=1, chunk_rows=40)
    blocks = [np.asarray(b) for b in model.blocks]
    assert len(blocks) >= 8  # 29 x 11 tensor rows and the off-grid ones, 40 per chunk
    shared = [np.shares_memory(a, b) for a, b in zip(blocks, blocks[1:])]
    assert all(shared) if read_only else not any(shared)


def test_a_cycle_longer_than_the_buffer_budget_is_gathered_instead(data, fitted, counted, monkeypatch):
    """A buffer holds a chunk plus one turn of the cycle: a cycle longer than the buffers'
    budget (here 50 rows of 4 float64; PFI on all 90 rows) is gathered as before, not copied
    whole into every thread's buffer."""
    X, y = data
    monkeypatch.setattr(prediction, "REUSED_CHUNK_BYTES", 50 * 4 * 8)
    a = compute.permutation_importance(Recorder(fitted, read_only=True), X, y, n_repeats=2, chunk_rows=40)
    assert counted["n"] == 0
    b = compute.permutation_importance(Recorder(fitted, read_only=False), X, y, n_repeats=2, chunk_rows=40)
    pd.testing.assert_frame_equal(a.to_frame(), b.to_frame(), check_exact=True)


def test_permutations_drawn_in_threads_are_the_serial_ones(data, fitted, monkeypatch):
    """Each item has its own generator, so drawing the permutations in threads gives the
    serial draw, repeat by repeat (and the donors stored for subgroups)."""
    X, y = data
    serial = importance.permutation_block(fitted, X, y, n_repeats=4, random_state=9, keep_pairs=True)
    monkeypatch.setattr(importance, "PARALLEL_DRAWS", 0)
    threaded = importance.permutation_block(fitted, X, y, n_repeats=4, random_state=9, keep_pairs=True)
    pd.testing.assert_frame_equal(serial.to_frame(), threaded.to_frame(), check_exact=True)
    assert np.array_equal(serial.pairs.donors, threaded.pairs.donors)


@pytest.mark.parametrize("period", [1, 3, 10])
def test_fill_cycle_writes_a_strided_column_period_by_period(period):
    """``_fill_cycle`` against its definition, on a column of a row-major array (strided),
    at every phase and for lengths shorter than, equal to and many times the period."""
    values = np.arange(period, dtype=np.float32) + 0.5
    for phase in range(period):
        for size in (1, period, period + 1, 5 * period + 2):
            array = np.full((size + 3, 4), -1.0, dtype=np.float32)
            _fill_cycle(array[1 : size + 1, 2], values, phase)
            expected = np.full((size + 3, 4), -1.0, dtype=np.float32)
            expected[1 : size + 1, 2] = values[(phase + np.arange(size)) % period]
            assert np.array_equal(array, expected)


def test_cycled_is_the_cycle_of_observations():
    rows = np.array([5, 2, 9, 7])
    for a in range(0, 9):
        for b in range(a, 15):
            assert np.array_equal(cycled(rows, a, b), rows[np.arange(a, b) % rows.size])


def test_repeated_is_each_row_repeated():
    rows = np.array([5, 2, 9, 7])
    for times in (1, 3):
        for a in range(0, rows.size * times + 1):
            for b in range(a, rows.size * times + 1):
                assert np.array_equal(repeated(rows, times, a, b), rows[np.arange(a, b) // times])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_grid_spec_writes_the_rows_of_the_tensor_at_any_cut(data, dtype):
    """Rows start:stop of a curve tensor (an observation per grid sweep), whole or cut inside
    an observation at either end, equal the rows indexed one by one (the brute force)."""
    X, _ = data
    design = Design(X, as_frame=False, block_dtype=dtype)
    base = np.array([7, 3, 3, 40, 0])
    grid = np.array([-1.5, 0.25, 2.0])
    n_total = base.size * grid.size
    for start in range(n_total):
        for stop in range(start + 1, n_total + 1):
            flat = np.arange(start, stop)
            expected = X.to_numpy()[base[flat // grid.size]].astype(dtype)
            expected[:, 2] = grid[flat % grid.size]
            block = GridSpec(design, base, "c", grid, start, stop).block()
            assert block.dtype == dtype and np.array_equal(block, expected), (start, stop)
            out = np.full((stop - start + 2, 4), np.nan, dtype=dtype)
            GridSpec(design, base, "c", grid, start, stop).write(out[1:-1])  # only its slice
            assert np.array_equal(out[1:-1], expected) and np.isnan(out[[0, -1]]).all()


@pytest.mark.parametrize("read_only", [False, True])
@pytest.mark.parametrize("chunk_rows", [2, 4, 6, 100])
def test_the_losses_of_cycles_read_their_target_from_each_row_observation(data, fitted, read_only, chunk_rows):
    """Segments cycling through the same observations, one ending mid-turn (5 rows of a
    3-row turn) before the next starts at its turn's beginning: each row's loss is against
    its own observation's target (a chunk spanning both cannot be read off one tiled turn)."""
    X, y = data
    predictor, _ = make_predictor(Recorder(fitted, read_only=read_only), X, None)
    loss = resolve_loss("absolute_error", predictor)
    base, observations = np.array([4, 11, 30]), np.array([4, 11, 30])
    sizes = (5, 7, 6)
    segments = [cycle_segment(predictor.design, base, k, lambda a, b: {}, observations) for k in sizes]
    values, losses = predict_segments(predictor, segments, y_enc=y, loss=loss, chunk_rows=chunk_rows)
    rows = np.concatenate([observations[np.arange(k) % 3] for k in sizes])
    assert np.array_equal(values, fitted.predict(X.iloc[rows]))
    assert np.allclose(losses, np.abs(y[rows] - values), rtol=0, atol=1e-12)


class _Outputs:
    """A regressor returning the given outputs, whatever it is fed."""

    def __init__(self, outputs):
        self.outputs = np.asarray(outputs, dtype=float)
        self.n_features_in_ = 1

    def predict(self, X):
        return self.outputs[: len(X)]


@pytest.mark.parametrize(
    ("outputs", "bad"),
    [
        ([1.0, np.inf, -np.inf, 2.0], 2),  # the sum is NaN
        ([np.nan, 1.0, 2.0, 3.0], 1),
        ([1e308, 1e308, 1.0, 2.0], 0),  # the sum overflows, every value is finite
        ([1.0, 2.0, 3.0, 4.0], 0),
    ],
)
def test_the_finite_check_counts_exactly_the_bad_rows(outputs, bad):
    """The check of a model's outputs sums them first (no boolean array per call): an
    infinite or NaN value is never missed, and finite values whose sum overflows pass."""
    from compute.errors import ModelError
    from compute.validation import make_predictor

    predictor, _ = make_predictor(_Outputs(outputs), pd.DataFrame({"x": [0.0, 1.0, 2.0, 3.0]}), None)
    block = np.zeros((4, 1))
    if bad:
        with pytest.raises(ModelError, match=f"NaN or infinite values for {bad} of 4 rows"):
            predictor.raw(block)
    else:
        assert np.array_equal(predictor.raw(block), np.asarray(outputs))


class _Kinds(Recorder):
    """Records the kind of every block (frame or array); may declare takes_float_arrays."""

    def __init__(self, model, *, arrays: bool):
        super().__init__(model, read_only=True)
        if arrays:
            self.takes_float_arrays = True
        self.kinds: set = set()

    def predict(self, X):
        self.kinds.add(type(X).__name__)
        if isinstance(X, pd.DataFrame):
            assert list(X.columns) == list(self.feature_names_in_)
        return super().predict(X)


def test_a_model_taking_float_arrays_gets_numeric_blocks_as_arrays(data, fitted):
    """A model fitted on named columns that declares ``takes_float_arrays`` (the booster
    wrapper) is fed all-numeric blocks as the float array, in its column order, with the same
    results; one without the declaration gets DataFrames with its column names."""
    X, y = data
    shuffled = X[["d", "b", "a", "c"]]  # the data's order is not the model's
    plain, arrays = _Kinds(fitted, arrays=False), _Kinds(fitted, arrays=True)
    a, b = _passes(plain, shuffled, y, None, 1), _passes(arrays, shuffled, y, None, 1)
    assert plain.kinds == {"DataFrame"} and arrays.kinds == {"ndarray"}
    _same(a, b)


def test_a_curve_tensor_goes_to_the_model_row_by_row(data, fitted):
    """The curve tensor reaches the model observation by observation, each over the whole
    grid (consecutive rows differ in the feature only), not grid point by grid point: a tree
    ensemble predicting row after row (LightGBM) was measured 3x slower in grid-major order."""
    X, y = data
    model = Recorder(fitted, read_only=True)
    profile = compute.feature_profile(model, X, y, "b", grid=6, n_obs=10, random_state=2, chunk_rows=17)
    fed = np.concatenate(model.blocks)[: 10 * 6]
    n_grid = profile.grid.size
    rows = X.loc[profile.rows].to_numpy()
    assert np.array_equal(fed[:, 1], np.tile(profile.grid, 10))
    others = [0, 2, 3]
    assert np.array_equal(fed[:, others], np.repeat(rows[:, others], n_grid, axis=0))
