"""Issue 26: the review without a browser, from the command line and from Python objects."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import joblib
import nbformat
import numpy as np
import pandas as pd
import pytest
import skops.io as sio
from helpers.ports import free_port
from nbclient import NotebookClient
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import compute
import dashboard
from dashboard import planning, session_models

ROOT = Path(__file__).resolve().parent.parent
TARGET = "churn"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("doors")
    rng = np.random.default_rng(0)
    n = 400
    X = pd.DataFrame({"income": rng.normal(size=n), "age": rng.normal(size=n), "tenure": rng.normal(size=n)})
    X["spend"] = 0.9 * X["income"] + 0.3 * rng.normal(size=n)
    y = 2 * X["income"] + X["age"] * X["tenure"] + rng.normal(scale=0.3, size=n)
    forest = RandomForestRegressor(n_estimators=20, random_state=0).fit(X, y)
    ridge = make_pipeline(StandardScaler(), Ridge()).fit(X, y)
    sio.dump(forest, folder / "forest.skops")
    joblib.dump(ridge, folder / "ridge.joblib")
    X.assign(**{TARGET: y}).to_csv(folder / "data.csv", index=False)
    return {"folder": folder, "X": X, "y": y, "forest": forest, "ridge": ridge}


def _cli(files, *args: str) -> subprocess.CompletedProcess:
    folder = files["folder"]
    return subprocess.run(
        [sys.executable, str(ROOT / "app.py"), "report", "--cache-dir", str(folder / "cache"), *args],
        capture_output=True,
        text=True,
        cwd=folder,
        timeout=600,
    )


def _library_pfi(model, X, y) -> compute.PermutationImportance:
    """What the dashboard computes for its PFI bars: the default repetitions and seed, the row budget."""
    return compute.permutation_importance(
        model, X, y, n_repeats=10, random_state=planning.SEED, n_obs=planning.pfi_sample(X.shape[1])
    )


def test_the_command_line_writes_the_report_and_its_numbers(files):
    folder = files["folder"]
    done = _cli(
        files,
        *("--model", "forest.skops", "--model", "ridge.joblib", "--data", "data.csv", "--target", TARGET),
        *("--out", "review.html", "--json", "review.json"),
    )
    assert done.returncode == 0, done.stderr
    assert "warning: loading ridge.joblib runs the code it holds" in done.stderr  # a pickle: the operator's own
    assert re.search(r"\[#+\] 100%", done.stderr)  # the progress bar reached its end
    html = (folder / "review.html").read_text()
    for title in ("Permutation feature importance", "Shapley feature importance (SFIMP)", "Subgroups found for you"):
        assert f"<h3>{title}</h3>" in html
    # the figures carry the data's column names, and the report looks at the most important feature
    assert all(f'"{c}"' in html for c in files["X"].columns)
    numbers = json.loads((folder / "review.json").read_text())
    assert numbers["data"]["models"] == ["forest", "ridge"] and numbers["state"]["feature"] == "income"
    for name in ("forest", "ridge"):
        pfi = _library_pfi(files[name], files["X"], files["y"])
        got = pd.DataFrame(numbers["pfi"][name]).T
        np.testing.assert_allclose(got["importance"], pfi.importance[got.index], rtol=1e-12)
        # std_error is the "±" the page writes (issue 39): the standard error over rows and permutations
        np.testing.assert_allclose(got["std_error"], pfi.uncertainty[got.index], rtol=1e-12)
        np.testing.assert_allclose(numbers["views"]["pfi"][f"{name}: std_error"]["income"], got["std_error"]["income"])
    assert numbers["views"]["subgroup_finder"] and numbers["views"]["sfimp"]
    # the verdict's numbers: each model against the mean, and the best one
    data = files["X"].assign(**{TARGET: files["y"]})
    preds = {n: compute.predict_rows(files[n], files["X"]) for n in ("forest", "ridge")}
    for name, pred in preds.items():
        skill = compute.model_skill(pred, data[TARGET], loss="squared_error")
        got = numbers["performance"][name]
        np.testing.assert_allclose(
            [got["loss"], got["baseline_loss"], got["skill"], got["skill_low"], got["skill_high"]],
            [skill.model_error, skill.baseline_error, skill.skill, skill.low, skill.high],
            rtol=1e-9,
        )
    best = compute.compare_models(preds, data[TARGET], loss="squared_error")
    assert numbers["performance"]["best"] == best.best and numbers["performance"]["best_is_clear"] == best.clear
    assert html.index("<h3>What we found</h3>") < html.index(f"{best.best} is ")  # the verdict opens the findings


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--model", "forest.skops", "--data", "data.csv", "--target", "revenue"), "'revenue'"),
        (("--model", "missing.skops", "--data", "data.csv", "--target", TARGET), "missing.skops"),
        (("--model", "forest.skops", "--data", "nowhere.csv", "--target", TARGET), "nowhere.csv"),
        (("--model", "data.csv", "--data", "data.csv", "--target", TARGET), "data.csv: not a model file"),
    ],
)
def test_bad_input_exits_non_zero_with_one_line_naming_it(files, args, named):
    done = _cli(files, *args, "--out", "bad.html")
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and named in errors[0], done.stderr
    assert not (files["folder"] / "bad.html").exists()


def test_report_from_python_objects(files, tmp_path):
    """dashboard.report hands the objects to a fresh interpreter; the numbers are the library's."""
    numbers = dashboard.report(
        {"ridge": files["ridge"]},
        files["X"].assign(**{TARGET: files["y"]}),
        TARGET,
        tmp_path / "py.html",
        cache_dir=tmp_path / "cache",
        progress=False,
    )
    pfi = _library_pfi(files["ridge"], files["X"], files["y"])
    got = pd.DataFrame(numbers["pfi"]["ridge"]).T
    np.testing.assert_allclose(got["importance"], pfi.importance[got.index], rtol=1e-12)
    assert "<h3>Which features act together?</h3>" in (tmp_path / "py.html").read_text()
    with pytest.raises(dashboard.ReportError, match="'revenue' is not in the data"):
        dashboard.report(files["ridge"], files["X"], "revenue", tmp_path / "x.html", cache_dir=tmp_path / "cache")
    with pytest.raises(dashboard.ReportError, match="could not be handed"):
        dashboard.report({"m": lambda X: X}, files["X"], "income", tmp_path / "y.html", cache_dir=tmp_path / "cache")


def test_report_with_relative_paths_writes_where_the_caller_is(files, tmp_path, monkeypatch):
    """Relative paths are the caller's: the report, its numbers and the cache land in the
    caller's working folder, not in the folder the dashboard's process runs from."""
    monkeypatch.chdir(tmp_path)
    dashboard.report(
        {"ridge": files["ridge"]},
        files["X"].assign(**{TARGET: files["y"]}),
        TARGET,
        "relative.html",
        json_path="relative.json",
        cache_dir="relative-cache",
        progress=False,
    )
    assert (tmp_path / "relative.html").stat().st_size > 10_000
    assert json.loads((tmp_path / "relative.json").read_text())["pfi"]
    assert (tmp_path / "relative-cache").is_dir()
    assert not (ROOT / "relative.html").exists() and not (ROOT / "relative-cache").exists()


def test_a_session_model_another_process_does_not_hold_says_so():
    path, sha = session_models.keep(Ridge())
    assert session_models.is_session_model(path) and len(sha) == 64
    assert session_models.get(path, "ridge") is not None
    with pytest.raises(compute.ModelError, match="Python session that opened this data set"):
        session_models.get("memory:" + "0" * 32, "gone")


def test_show_in_a_notebook_puts_the_page_inline(tmp_path):
    """A real Jupyter kernel (nbclient) runs a notebook that calls dashboard.show on an
    in-memory pipeline: the cell's output holds the page as an inline frame and a link."""

    cells = [
        "import numpy as np, pandas as pd\n"
        "from sklearn.linear_model import Ridge\n"
        "from sklearn.pipeline import make_pipeline\n"
        "from sklearn.preprocessing import StandardScaler\n"
        "rng = np.random.default_rng(1)\n"
        "df = pd.DataFrame({'size': rng.normal(size=200), 'rooms': rng.normal(size=200)})\n"
        "df['price'] = 2 * df['size'] + rng.normal(size=200)\n"
        "model = make_pipeline(StandardScaler(), Ridge()).fit(df[['size', 'rooms']], df['price'])",
        f"import dashboard\nshown = dashboard.show(model, df, 'price', cache_dir={str(tmp_path / 'cache')!r})\nshown",
        "shown.stop()\nprint('stopped', shown.server.alive)",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    shown = notebook.cells[1].outputs
    html = next(o["data"]["text/html"] for o in shown if "text/html" in o.get("data", {}))
    assert re.search(r'<iframe src="http://127\.0\.0\.1:\d+/\?ws=[\w-]+"', html), html
    assert "Open the dashboard in a new tab" in html
    assert "stopped False" in notebook.cells[2].outputs[0]["text"]


def test_show_again_adds_a_data_set_to_the_same_server(files, tmp_path):
    import requests

    data = files["X"].assign(**{TARGET: files["y"]})
    first = dashboard.show({"ridge": files["ridge"]}, data, TARGET, cache_dir=tmp_path / "cache")
    try:
        second = dashboard.show(files["ridge"], data.iloc[:200], TARGET, cache_dir=tmp_path / "cache")
        assert second.server is first.server and second.ws != first.ws
        for shown in (first, second):
            assert requests.get(shown.url, timeout=30).status_code == 200
        with pytest.raises(dashboard.ShowError, match="'revenue' is not in the data"):
            dashboard.show(files["ridge"], data, "revenue", cache_dir=tmp_path / "cache")
        assert first.server.alive  # a refused data set leaves the server serving
    finally:
        first.stop()
    assert not first.server.alive


def test_the_command_line_opens_the_server_on_the_operators_data(files):
    import requests

    folder = files["folder"]
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "app.py"), "--model", "forest.skops", "--data", "data.csv", "--target", TARGET]
        + ["--port", str(port), "--cache-dir", str(folder / "cache-serve"), "--no-warm"],
        cwd=folder,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        url = ""
        for line in proc.stderr:
            found = re.search(r"http://127\.0\.0\.1:\d+/\?ws=[\w-]+", line)
            if found:
                url = found.group()
                break
        assert url, "no URL printed"
        for _ in range(100):
            try:
                response = requests.get(url, timeout=5)
                break
            except requests.ConnectionError:
                time.sleep(0.1)
        assert response.status_code == 200
        ws = url.split("ws=")[1]
        record = json.loads((folder / "cache-serve" / "workspaces" / f"{ws}.json").read_text())
        assert record["target"] == TARGET and record["features"] == list(files["X"].columns)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)


def test_the_rows_can_be_said_held_out_and_the_class_chosen_at_every_door(tmp_path):
    """Issue 39, item 7: the command line (--held-out, --class) and report() (held_out=,
    positive_class=) say what the rows are and which class is explained, as the form does."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(2)
    X = pd.DataFrame({"income": rng.normal(size=300), "age": rng.normal(size=300)})
    y = np.where(X["income"] + rng.normal(scale=0.5, size=300) > 0, "churned", "stayed")
    model = LogisticRegression().fit(X, y)
    sio.dump(model, tmp_path / "churn.skops")
    X.assign(outcome=y).to_csv(tmp_path / "churn.csv", index=False)
    args = ["--model", "churn.skops", "--data", "churn.csv", "--target", "outcome", "--out", "r.html"]
    plain = subprocess.run(
        [sys.executable, str(ROOT / "app.py"), "report", "--cache-dir", str(tmp_path / "c"), *args, "--json", "a.json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert plain.returncode == 0, plain.stderr
    unsaid = (tmp_path / "r.html").read_text()
    assert "not said at Load" in unsaid
    told = subprocess.run(
        [sys.executable, str(ROOT / "app.py"), "report", "--cache-dir", str(tmp_path / "c"), *args]
        + ["--json", "b.json", "--held-out", "--class", "stayed"],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert told.returncode == 0, told.stderr
    html = (tmp_path / "r.html").read_text()
    assert "held out (the models did not train on it)" in html and "not said at Load" not in html
    assert "explained class: stayed" in html
    numbers = dashboard.report(
        model, X.assign(outcome=y), "outcome", tmp_path / "p.html", held_out=True, positive_class="churned",
        cache_dir=tmp_path / "c", progress=False,
    )  # fmt: skip
    page = (tmp_path / "p.html").read_text()
    assert "explained class: churned" in page and "not said at Load" not in page
    assert numbers["performance"]["LogisticRegression"]["skill"] > 0
