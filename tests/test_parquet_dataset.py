"""Parquet data sets (issue 44): a folder of files, or a glob, read as one table at the
command line's ``--data``; files that disagree on columns or types are refused, naming the
file and the column."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dashboard.config import Config, parse_args
from dashboard.loading import LoadError
from dashboard.loading.data import parquet_set_files, read_data
from dashboard.loading.errors import Policy

ROOT = Path(__file__).resolve().parent.parent


def _frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"a": rng.normal(size=n), "b": rng.integers(0, 5, n), "c": rng.choice(["x", "y"], n)})
    frame["y"] = 2 * frame.a - frame.b + rng.normal(0, 0.1, n)
    return frame


def _write_set(folder: Path, parts: list[pd.DataFrame]) -> None:
    folder.mkdir(parents=True)
    for i, part in enumerate(parts):
        sub = folder / f"region={i % 2}"  # partition folders, as Spark writes them
        sub.mkdir(exist_ok=True)
        pq.write_table(
            pa.Table.from_pandas(part, preserve_index=False), sub / f"part-{i:05d}.parquet", row_group_size=50
        )
    (folder / "_SUCCESS").write_text("")


def test_a_folder_and_a_glob_read_as_the_concatenation_of_their_files(tmp_path):
    parts = [_frame(120, s) for s in range(4)]
    _write_set(tmp_path / "set", parts)
    files = parquet_set_files(str(tmp_path / "set"))
    assert len(files) == 4 and all(f.endswith(".parquet") for f in files)
    whole = pd.concat([parts[i] for i in (0, 2, 1, 3)], ignore_index=True)  # name order: region=0 first
    got = read_data(tmp_path / "set", name="set")
    pd.testing.assert_frame_equal(got, whole)
    assert got.attrs["name"] == "set"
    globbed = read_data(str(tmp_path / "set" / "region=0" / "*.parquet"), name="region 0")
    pd.testing.assert_frame_equal(globbed, pd.concat([parts[0], parts[2]], ignore_index=True))


def test_a_column_empty_in_one_file_and_whole_numbers_in_another_fit(tmp_path):
    parts = [_frame(30, 0), _frame(30, 1)]
    parts[1]["a"] = None  # written as a null-typed column
    parts[1]["b"] = parts[1]["b"].astype(float)  # pandas writes decimals once a value is missing
    _write_set(tmp_path / "set", parts)
    got = read_data(tmp_path / "set")
    assert got["a"].isna().sum() == 30 and got["a"].notna().sum() == 30
    np.testing.assert_array_equal(got["b"].to_numpy(float), np.r_[parts[0].b, parts[1].b])


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda f: f.drop(columns="c"), "part-00001.parquet lacks column 'c'"),
        (lambda f: f.assign(extra=1.0), "part-00001.parquet has column 'extra'"),
        (
            lambda f: f.assign(b=f.b.astype(str)),
            "column 'b' holds text in region=1/part-00001.parquet but numbers in region=0/part-00000.parquet",
        ),
        (
            lambda f: f.assign(c=f.c == "x"),
            "column 'c' holds true/false values in region=1/part-00001.parquet but text",
        ),
    ],
)
def test_files_that_disagree_are_refused_naming_the_file_and_the_column(tmp_path, change, said):
    _write_set(tmp_path / "set", [_frame(20, 0), change(_frame(20, 1))])
    with pytest.raises(LoadError) as caught:
        read_data(tmp_path / "set", name="set")
    assert said in str(caught.value) and caught.value.field == "data"


def test_limits_hold_over_the_whole_set_and_an_empty_folder_is_named(tmp_path):
    _write_set(tmp_path / "set", [_frame(60, 0), _frame(60, 1)])
    with pytest.raises(LoadError, match="more than this server reads"):
        read_data(tmp_path / "set", policy=Policy(max_rows=100))
    (tmp_path / "empty").mkdir()
    with pytest.raises(LoadError, match="no .parquet files found"):
        read_data(tmp_path / "empty", name="empty")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(LoadError, match="x.parquet is not a valid Parquet file"):
        read_data(tmp_path / "bad")


def test_the_operators_max_rows_decides_how_many_rows_a_set_may_hold(tmp_path):
    """``--max-rows`` (``WIP_MAX_ROWS``) reaches the load policy: 120 rows are refused at 100,
    naming the option, and read whole at 120; below 1 it is refused at start-up."""
    from dashboard.state import make_context

    _write_set(tmp_path / "set", [_frame(60, 0), _frame(60, 1)])
    small = parse_args(["--max-rows", "100", "--cache-dir", str(tmp_path / "c1")], environ={})
    assert make_context(small).policy.max_rows == 100
    with pytest.raises(LoadError, match="reads \\(100 rows: --max-rows"):
        read_data(tmp_path / "set", policy=make_context(small).policy)
    enough = parse_args(["--cache-dir", str(tmp_path / "c2")], environ={"WIP_MAX_ROWS": "120"})
    assert len(read_data(tmp_path / "set", policy=make_context(enough).policy)) == 120
    with pytest.raises(ValueError, match="--max-rows"):
        Config(max_rows=0)


def test_the_command_line_reports_on_a_parquet_folder(tmp_path):
    """``app.py report --data FOLDER``: the report is written from the set's rows."""
    import skops.io as sio
    from sklearn.linear_model import LinearRegression

    parts = [_frame(80, s) for s in range(3)]
    _write_set(tmp_path / "set", parts)
    whole = pd.concat(parts, ignore_index=True)
    model = LinearRegression().fit(whole[["a", "b"]], whole.y)
    sio.dump(model, tmp_path / "lin.skops")
    parts = [part.drop(columns="c") for part in parts]
    (tmp_path / "set2").mkdir()
    for i, part in enumerate(parts):
        part.to_parquet(tmp_path / "set2" / f"p{i}.parquet", index=False)
    out = tmp_path / "report.html"
    done = subprocess.run(
        [sys.executable, "app.py", "report", "--model", str(tmp_path / "lin.skops"), "--data", str(tmp_path / "set2")]
        + ["--target", "y", "--out", str(out), "--cache-dir", str(tmp_path / "cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "all 240 rows" in out.read_text()


def test_report_takes_a_parquet_folder_and_names_a_bad_file(tmp_path):
    """``dashboard.report(model, "folder/", ...)``: the same numbers as on the frame itself;
    a file that disagrees is a ReportError naming it."""
    from sklearn.linear_model import LinearRegression

    import dashboard

    parts = [_frame(60, s).drop(columns="c") for s in range(3)]
    (tmp_path / "set").mkdir()
    for i, part in enumerate(parts):
        part.to_parquet(tmp_path / "set" / f"p{i}.parquet", index=False)
    whole = pd.concat(parts, ignore_index=True)
    model = LinearRegression().fit(whole[["a", "b"]], whole.y)
    cache = tmp_path / "cache"
    from_folder = dashboard.report(model, tmp_path / "set", "y", tmp_path / "a.html", cache_dir=cache, progress=False)
    from_frame = dashboard.report(model, whole, "y", tmp_path / "b.html", cache_dir=cache, progress=False)
    assert from_folder["pfi"] == from_frame["pfi"] and from_folder["pfi"]
    parts[1].assign(b=parts[1].b.astype(str)).to_parquet(tmp_path / "set" / "p1.parquet", index=False)
    with pytest.raises(dashboard.ReportError, match="column 'b' holds text in p1.parquet"):
        dashboard.report(model, str(tmp_path / "set"), "y", tmp_path / "c.html", cache_dir=cache, progress=False)


def test_show_s_door_opens_a_workspace_on_a_parquet_folder(tmp_path):
    """``show(model, "folder/", ...)`` hands the path to its server, whose door reads it."""
    from sklearn.linear_model import LinearRegression

    from dashboard.config import Config
    from dashboard.doors import open_workspace
    from dashboard.state import make_context

    parts = [_frame(40, s).drop(columns="c") for s in range(2)]
    (tmp_path / "set").mkdir()
    for i, part in enumerate(parts):
        part.to_parquet(tmp_path / "set" / f"p{i}.parquet", index=False)
    whole = pd.concat(parts, ignore_index=True)
    ctx = make_context(Config(cache_dir=str(tmp_path / "cache"), warm=False, secret_key="k"))
    ws = open_workspace(ctx, {"lin": LinearRegression().fit(whole[["a", "b"]], whole.y)}, str(tmp_path / "set"), "y")
    pd.testing.assert_frame_equal(ctx.store.data(ws), whole)
    assert ws.title.startswith("set:")
