"""Intervention stage (SIPA, Scholbeck et al. 2019, Sec. 4): build intervened rows.

An intervened block is ``n_rows`` copies of chosen observations in which some columns are
overwritten with other values (grid values for ICE/ICI, permuted values for PFI and SFIMP).
Blocks are built with whole-array operations, never row by row:

* all-numeric data takes a fast path: one float array, fancy-indexed rows and a column
  write, wrapped without a copy in a DataFrame when the model wants column names;
* mixed data (strings, categories, booleans) goes through ``DataFrame.take`` and keeps
  every column's dtype, so scikit-learn pipelines with a ``ColumnTransformer`` see exactly
  the dtypes they were fitted on.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import numpy as np
import pandas as pd

#: A block of fewer than ``n_rows / FEW_ROWS`` rows of a design whose whole array is not built
#: reads its rows from the frame (:meth:`Design.block`): building the array would copy every row
FEW_ROWS = 64


class Design:
    """The model's input columns of X, ready to be copied and intervened on.

    Parameters
    ----------
    X : DataFrame
        Data with (at least) the model's input columns, in the model's order.
    as_frame : bool
        Whether the model is fed DataFrames (it was fitted with column names) or arrays.
    block_dtype : numpy float dtype, optional
        The dtype of the numeric blocks fed to the model: float64 (default), or float32 for a
        model that computes in float32 whatever it is fed (it declares ``input_dtype =
        numpy.float32``, as the XGBoost wrapper does). The model then sees exactly the values
        it would compute with, and each block costs half the bytes to build.
    numeric_frames : bool, default True
        Whether an all-numeric block goes to a model fed DataFrames as a DataFrame. False for
        a model that reads a float array of its columns, in its order, as that frame (it
        declares ``takes_float_arrays = True``, as the booster wrapper does): no DataFrame to
        build per call, nor for the model to take apart.
    typed : bool, default False
        Whether the model must get every column in its own dtype even when all are numbers (a
        CatBoost model with categorical features: it refuses a float where it expects a
        category's integer code). Blocks are then DataFrames of X's dtypes.
    """

    def __init__(
        self, X: pd.DataFrame, *, as_frame: bool, block_dtype=np.float64, numeric_frames=True, typed=False
    ) -> None:
        self.frame = X
        self.columns = list(X.columns)
        self._index = pd.Index(self.columns)  # built once: a list would be re-parsed per block
        self.as_frame = as_frame
        self.numeric_frames = bool(numeric_frames)
        self.numeric = (
            not typed
            and all(pd.api.types.is_numeric_dtype(dt) and not pd.api.types.is_bool_dtype(dt) for dt in X.dtypes)
            and not any(isinstance(dt, pd.CategoricalDtype) for dt in X.dtypes)
        )
        self._array: np.ndarray | None = None  # the float array of all rows, built when first read
        self._position = {col: j for j, col in enumerate(self.columns)}
        self.block_dtype = np.dtype(np.float32 if np.dtype(block_dtype) == np.float32 else np.float64)
        self._rows: np.ndarray | None = None

    @property
    def n_rows(self) -> int:
        return len(self.frame)

    @functools.cached_property
    def every_row(self) -> np.ndarray:
        """The positions of all rows, 0 .. n_rows - 1: one array per design, so the passes
        that cycle through all its rows name the same cycle (see ``segments.CycleSpec``)."""
        return np.arange(self.n_rows)

    def subset(self, positions: np.ndarray) -> Design:
        """The design of rows ``positions`` only (row i of the subset is row positions[i]).

        Blocks that cycle over a row sample many times (PFI's repetitions) gather from this
        small array, which stays in the CPU cache, instead of from all of X: the same values,
        about 3x faster to copy (measured on 5,000 of 100,000 rows x 50 columns)."""
        sub = Design.__new__(Design)
        sub.frame = self.frame.take(positions)
        sub.columns, sub._index, sub._position = self.columns, self._index, self._position
        sub.as_frame, sub.numeric, sub.numeric_frames = self.as_frame, self.numeric, self.numeric_frames
        # the sample's rows only, row-major as blocks are gathered (never a copy of all rows)
        sub._array = self.take_numbers(positions) if self.numeric else None
        sub.block_dtype, sub._rows = self.block_dtype, None
        return sub

    @property
    def array(self) -> np.ndarray | None:
        """The float array of all rows of an all-numeric design (None for mixed data)."""
        return self.numbers() if self.numeric else None

    def numbers(self) -> np.ndarray:
        """The float array of an all-numeric design (the fast path), row-major.

        Built on first use, not with the design: a pass over a sample of the rows (a profile's
        ``n_obs`` curves, a PFI sample) reads only the sample's rows (:meth:`subset`,
        :meth:`take_numbers`), so a call on a large frame never copies all of it. Row-major,
        because blocks are gathered by rows: ``np.take`` of a column-major array (what pandas'
        ``to_numpy`` gives for one dtype) would first copy the whole array to row-major."""
        assert self.numeric  # only called on the fast path
        if self._array is None:
            self._array = np.ascontiguousarray(self.frame.to_numpy(dtype=float, na_value=np.nan))
        return self._array

    def take_numbers(self, positions: np.ndarray) -> np.ndarray:
        """``numbers()[positions]`` (row-major), read from the frame when the whole array was not
        built: the same float64 values, at the cost of the rows taken rather than of all rows."""
        if self._array is not None:
            return np.ascontiguousarray(self._array[positions])
        return np.ascontiguousarray(self.frame.take(positions).to_numpy(dtype=float, na_value=np.nan))

    def read_numbers(self, positions: np.ndarray) -> np.ndarray:
        """:meth:`take_numbers` for a caller that only reads the result, in any memory order:
        every row in order gives the whole array itself where built, else the frame's own
        array (pandas' read-only, column-major view of one float64 block), not a copy (40 MB
        at 100,000 x 50, written to fresh pages)."""
        if not (self.numeric and positions.size == self.n_rows and np.array_equal(positions, self.every_row)):
            return self.take_numbers(positions)
        if self._array is not None:
            return self._array
        return self.frame.to_numpy(dtype=float, na_value=np.nan)

    def rows_array(self) -> np.ndarray:
        """The float array blocks are gathered from (the data in ``block_dtype``)."""
        array = self.numbers()
        if self.block_dtype == array.dtype:
            return array
        if self._rows is None:
            self._rows = array.astype(self.block_dtype)
        return self._rows

    def max_abs(self) -> float:
        """The largest absolute number of an all-numeric design (NaN ignored; 0 for no rows),
        column by column: no copy of all rows when the whole array was not built."""
        if self._array is not None:
            return float(np.nanmax(np.abs(self._array), initial=0.0))
        columns = (self.frame[c].to_numpy(dtype=float, na_value=np.nan) for c in self.columns)
        return max((float(np.nanmax(np.abs(v), initial=0.0)) for v in columns), default=0.0)

    def position(self, column) -> int:
        return self._position[column]

    def column_values(self, column, positions: np.ndarray) -> np.ndarray | pd.api.extensions.ExtensionArray:
        """Values of ``column`` at row ``positions``, in the form ``block`` expects."""
        if self.numeric:
            if self._array is not None:
                return self._array[positions, self._position[column]]
            return self.frame[column].to_numpy(dtype=float, na_value=np.nan)[positions]
        return self.frame[column].array.take(positions)

    def cast(self, column, values: np.ndarray):
        """Turn grid values (floats or an object array of levels) into the column's kind."""
        if self.numeric:
            return np.asarray(values, dtype=float)
        dtype = self.frame[column].dtype
        if isinstance(dtype, pd.CategoricalDtype):
            return pd.Categorical(values, dtype=dtype)
        if pd.api.types.is_bool_dtype(dtype) and not any(v is None for v in values):
            return np.asarray(values, dtype=bool)
        if pd.api.types.is_numeric_dtype(dtype):
            # an integer column keeps its dtype for integral grid values; quantiles or
            # finite-difference steps between integers become floats
            floats = np.asarray(values, dtype=float)
            if pd.api.types.is_integer_dtype(dtype) and np.all(floats == np.round(floats)):
                return pd.array(floats.astype(np.int64), dtype=dtype)
            return floats
        return pd.array(values, dtype=dtype)

    def wrap(self, rows: np.ndarray):
        """A float array of rows as the model takes it (a DataFrame view when it wants names)."""
        return pd.DataFrame(rows, columns=self._index, copy=False) if self.as_frame and self.numeric_frames else rows

    def concat(self, blocks: list):
        """Stack blocks made by :meth:`block` (all arrays or all DataFrames) into one."""
        if len(blocks) == 1:
            return blocks[0]
        if isinstance(blocks[0], pd.DataFrame):
            if self.numeric:
                return self.wrap(np.concatenate([b.to_numpy() for b in blocks]))
            return pd.concat(blocks, ignore_index=True)
        return np.concatenate(blocks)

    def block(self, positions: np.ndarray, replace: Mapping[object, object]):
        """Rows ``positions`` of X with the columns in ``replace`` overwritten.

        ``replace`` maps a column to values aligned with ``positions`` (one per block row),
        as produced by :meth:`column_values` or by indexing the result of :meth:`cast`.
        Returns what the model's ``predict`` takes: an ndarray or a DataFrame.
        """
        if self.numeric:
            if self._array is None and np.size(positions) * FEW_ROWS < self.n_rows:
                # a few rows of a large design (a row's contributions, a block of a what-if):
                # read those alone rather than build the whole array (6 s at 2,000,000 x 100)
                rows = self.take_numbers(np.asarray(positions)).astype(self.block_dtype, copy=False)
            else:
                rows = np.take(self.rows_array(), positions, axis=0)  # 3-4x faster than fancy indexing
            for column, values in replace.items():
                rows[:, self._position[column]] = values
            return self.wrap(rows)
        rows = self.frame.take(positions)
        rows.index = pd.RangeIndex(len(positions))
        for column, values in replace.items():
            rows[column] = values
        return rows if self.as_frame else rows.to_numpy()

    def mixed_block(self, own: np.ndarray, donor: np.ndarray, from_donor: np.ndarray):
        """Rows whose columns come either from row ``own`` or from row ``donor``.

        ``from_donor`` is a boolean array of shape (n_rows, n_columns): True where the
        column of that block row is taken from its donor (marginalised, Eq. 5/6 of
        Casalicchio et al. 2018), False where it keeps the observation's own value.
        """
        sources = np.where(from_donor, donor[:, None], own[:, None])
        if self.numeric:
            rows = self.numbers()[sources, np.arange(len(self.columns))[None, :]]
            return self.wrap(rows)
        rows = pd.DataFrame({col: self.frame[col].array.take(sources[:, j]) for j, col in enumerate(self.columns)})
        return rows if self.as_frame else rows.to_numpy()
