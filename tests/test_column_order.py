"""Issue 41, item 1 and rough edges of item 5: a model that does not name its inputs can be
used from every door. The column order is confirmed by ``--columns-in-order`` on the
command line and ``columns_in_order=True`` in Python, each door's refusal naming its own way
(the page keeps its tick box) and showing the order the model would be fed; the command
line lists each model suffix once and writes an error on a line of its own."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import skops.io as sio
from sklearn.ensemble import RandomForestRegressor

from dashboard import cli
from dashboard.config import Config
from dashboard.doors import open_workspace
from dashboard.loading import LoadError
from dashboard.loading.checks import PAGE_CONFIRM
from dashboard.state import make_context

COLUMNS = ["income", "age", "tenure"]


@pytest.fixture(scope="module")
def unnamed(tmp_path_factory):
    """A forest fitted on an array (no feature names recorded), its skops file and a CSV."""
    folder = tmp_path_factory.mktemp("order")
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 3))
    y = 2 * X[:, 0] + X[:, 1] * X[:, 2] + rng.normal(scale=0.2, size=200)
    model = RandomForestRegressor(n_estimators=10, random_state=0).fit(X, y)
    assert not hasattr(model, "feature_names_in_")
    sio.dump(model, folder / "array.skops")
    data = pd.DataFrame(X, columns=COLUMNS).assign(churn=y)
    data.to_csv(folder / "data.csv", index=False)
    ctx = make_context(Config(cache_dir=str(folder / "cache")))
    return {"folder": folder, "model": model, "data": data, "ctx": ctx}


def test_python_refuses_naming_columns_in_order_and_the_order_then_accepts_it(unnamed):
    ctx, model, data = unnamed["ctx"], unnamed["model"], unnamed["data"]
    with pytest.raises(LoadError) as refused:
        open_workspace(ctx, {"forest": model}, data, "churn")
    said = str(refused.value)
    assert "call again with columns_in_order=True" in said and "income, age, tenure" in said, said
    assert "tick" not in said and "press Load" not in said  # not the page's way: there is no box to tick
    ws = open_workspace(ctx, {"forest": model}, data, "churn", columns_in_order=True)
    assert ws.features == tuple(COLUMNS)
    assert any("file order" in w for w in ws.warnings)  # the order used is still said


def test_the_command_line_names_its_flag_and_takes_it(unnamed):
    ctx, folder = unnamed["ctx"], unnamed["folder"]
    paths = ([folder / "array.skops"], folder / "data.csv", "churn")
    with pytest.raises(LoadError, match="run the command again with --columns-in-order"):
        cli.open_files(ctx, *paths)
    ws = cli.open_files(ctx, *paths, columns_in_order=True)
    assert ws.features == tuple(COLUMNS)
    err = io.StringIO()
    status = cli.report_main(
        [
            "--model",
            str(folder / "array.skops"),
            "--data",
            str(folder / "data.csv"),
            "--target",
            "churn",
            "--out",
            str(folder / "r.html"),
            "--cache-dir",
            str(folder / "cache"),
        ],
        stderr=err,
    )
    assert status == 2 and "--columns-in-order" in err.getvalue(), err.getvalue()
    assert "--columns-in-order" in _help()


def _help() -> str:
    parser = cli.argparse.ArgumentParser()
    cli.add_row_options(parser)
    return parser.format_help()


def test_the_page_keeps_its_own_words():
    assert "tick 'the columns are in the order the model was trained on'" in PAGE_CONFIRM


def test_an_unknown_suffix_lists_each_known_one_once(tmp_path):
    path = tmp_path / "model.foo"
    path.write_bytes(b"x")
    with pytest.raises(LoadError) as refused:
        cli._model(path, io.StringIO())
    listed = str(refused.value).split("(", 1)[1].rstrip(").").split(", ")
    assert len(listed) == len(set(listed)) and ".joblib" in listed and ".skops" in listed, listed


def test_an_error_after_the_progress_bar_starts_is_on_a_line_of_its_own(unnamed, monkeypatch):
    folder = unnamed["folder"]

    def failing(ctx, ws, out, *, json_path=None, progress=None):
        progress(3, 10, "permutations")
        raise LoadError("the data file changed while it was read", field="data")

    monkeypatch.setattr(cli, "write_report", failing)
    err = io.StringIO()
    args = ["--model", str(folder / "array.skops"), "--data", str(folder / "data.csv"), "--target", "churn"]
    status = cli.report_main(
        [*args, "--columns-in-order", "--out", str(Path(folder) / "x.html"), "--cache-dir", str(folder / "cache")],
        stderr=err,
    )
    text = err.getvalue()
    assert status == 2 and "\nerror: the data file changed" in text, text
    assert "%  permutations" in text.split("\nerror:")[0]  # the bar was drawn, then the line ended


def test_the_help_lists_every_option_and_the_subcommand():
    """Issue 43, item 5: `app.py --help` did not mention `report` or the data-set options;
    `report --help` showed its required options as optional."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    served = subprocess.run([sys.executable, str(root / "app.py"), "--help"], capture_output=True, text=True)
    for option in ("--model", "--data", "--target", "--held-out", "--class", "--columns-in-order", "--labels"):
        assert option in served.stdout, option
    assert "report" in served.stdout.split("subcommands:")[1]
    review = subprocess.run([sys.executable, str(root / "app.py"), "report", "--help"], capture_output=True, text=True)
    usage = review.stdout.split("\n\n")[0]
    assert "--model FILE [--model FILE ...] --data FILE --target COLUMN --out FILE" in " ".join(usage.split())
    assert "required:" in review.stdout
