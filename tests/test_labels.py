"""Issue 39, item 7 ("What the rows are, and labels"): human labels of features and classes.

A labels file ``{"features": {"income_k": "Yearly income (k$)"}, "classes": {"1": "churned"}}``
given to ``show``/``report`` (``labels=``), to the command line (``--labels``) or at upload
is checked like any upload, kept on the workspace and shown on axes, in tables, in the
findings and in the report, while the column names stay the keys of everything else: the
state and its URL, the cache keys of computations and ``numbers.json``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import skops.io as sio
from sklearn.ensemble import RandomForestClassifier

import dashboard
from dashboard import labels
from dashboard.callbacks.compute import run_request
from dashboard.callbacks.labels_upload import describe_labels
from dashboard.callbacks.load import load_outputs
from dashboard.config import Config
from dashboard.doors import open_workspace, report_numbers, write_report
from dashboard.html_report import report_html
from dashboard.server import create_app
from dashboard.state import default_state, normalize, search_from_state
from dashboard.store import Workspace
from dashboard.views import load_inputs, plan_state, render

ROOT = Path(__file__).resolve().parent.parent
LABELS = {
    "features": {"income_k": "Yearly income (k$)", "tenure": "Years as <b>client</b>"},
    "classes": {"1": "churned", "0": "stayed"},
}
INCOME = "Yearly income (k$)"


# --- reading and checking a labels file ------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"features": {"income_k": "a"', "not valid JSON"),
        ('["income_k"]', "labels are a JSON object"),
        ('{"colours": {"income_k": "a"}}', "'colours'"),
        ('{"features": ["income_k"]}', "'features' must map names to labels"),
        ('{"features": {"income_k": 5}}', "'features.income_k' must be text"),
        ('{"classes": {"1": null}}', "'classes.1' must be text"),
        ('{"features": {"income_k": "   "}}', "'features.income_k' is empty"),
        ('{"features": {"income_k": "' + "x" * 81 + '"}}', "'features.income_k' is 81 characters"),
        ('{"features": {"income_k": "two\\nlines"}}', "'features.income_k' holds a line break"),
        ('{"features": {"income_k": {"deeper": "a"}}}', "nested too deep"),
        ("[" * 5000 + "]" * 5000, "nested too deep"),
        ('{"features": {"income_k": "a", "income_k": "b"}}', "'income_k' is given twice"),
        ('{"features": {"income_k": NaN}}', "NaN is not a label"),
        (b'{"features": {"income_k": "\xff"}}', "not UTF-8"),
    ],
)
def test_a_bad_labels_file_is_refused_naming_the_key_or_field(text, said):
    with pytest.raises(labels.LabelsError) as caught:
        labels.parse_labels(text, name="labels.json")
    assert said in str(caught.value) and str(caught.value).startswith("labels.json: ")
    assert caught.value.field == "labels"


def test_a_labels_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "big.json"
    big.write_text('{"features": {"a": "' + "x" * labels.MAX_BYTES + '"}}')
    with pytest.raises(labels.LabelsError, match="at most 64 KiB"):
        labels.read_labels(big)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(LABELS))
    assert labels.read_labels(good) == LABELS


@pytest.mark.parametrize(
    ("given", "classes", "said"),
    [
        ({"features": {"incme_k": "typo"}}, ["0", "1"], "features.'incme_k' is not a feature of the models"),
        ({"classes": {"2": "moved"}}, ["0", "1"], "classes.'2' is not a class of the target"),
        ({"classes": {"1": "churned"}}, None, "classes.'1': the models are regressors"),
    ],
)
def test_unknown_features_and_classes_are_refused_by_name(given, classes, said):
    with pytest.raises(labels.LabelsError) as caught:
        labels.check_known(given, features=["income_k", "age"], classes=classes, name="labels.json")
    assert said in str(caught.value)


def test_given_labels_takes_a_dict_or_a_path(tmp_path):
    (tmp_path / "l.json").write_text(json.dumps(LABELS))
    assert labels.given_labels(tmp_path / "l.json") == labels.given_labels(str(tmp_path / "l.json")) == LABELS
    assert labels.given_labels({"features": {"a": " A "}}) == {"features": {"a": "A"}}
    assert labels.given_labels(None) == {}
    assert labels.given_labels({"classes": {1: "churned"}}) == {"classes": {"1": "churned"}}  # from Python
    with pytest.raises(labels.LabelsError, match="'classes' has a name that is not text"):
        labels.given_labels({"classes": {(1,): "churned"}})
    with pytest.raises(labels.LabelsError, match="give a dict"):
        labels.given_labels(["income_k"])


def test_sentences_are_relabelled_by_whole_name_and_quoted_class_only():
    ws = Workspace(
        id="x", title="t", data_path="d", data_sha="s", target="churn", task="classification", loss="log_loss",
        labels={"features": {"income": "Income (k$)"}, "classes": {"1": "churned"}},
    )  # fmt: skip
    text = "income and income_2 and net_income: always answering '1' with 1.0 and 'income'."
    assert labels.relabel_text(ws, text) == (
        "Income (k$) and income_2 and net_income: always answering 'churned' with 1.0 and 'Income (k$)'."
    )
    assert labels.option_label(ws, "income") == "Income (k$) (income)" and labels.option_label(ws, "age") == "age"


def test_the_workspace_keeps_its_labels_and_reads_records_saved_without_them():
    ws = Workspace(
        id="x", title="t", data_path="d", data_sha="s", target="churn", task="classification", loss="log_loss",
        labels=LABELS,
    )  # fmt: skip
    assert Workspace.from_json(ws.to_json()).labels == LABELS
    old = json.loads(ws.to_json())
    del old["labels"]
    assert Workspace.from_json(json.dumps(old)).labels == {}
    assert hash(ws) == hash(Workspace.from_json(json.dumps(old)))  # presentation only: not in the hash


# --- on the page and in the report ---------------------------------------------------------------
def _churn(n: int = 300, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {"income_k": rng.normal(50, 10, n), "age": rng.integers(18, 80, n).astype(float), "tenure": rng.normal(size=n)}
    )
    y = ((X["income_k"] - 50) / 10 + X["tenure"] + rng.normal(scale=0.5, size=n) > 0).astype(int)
    return X, y


@pytest.fixture(scope="module")
def shown(tmp_path_factory):
    """One data set opened twice, plain and labelled, its review written for both."""
    folder = tmp_path_factory.mktemp("labels")
    ctx = create_app(Config(cache_dir=str(folder / "cache")))._wip_context
    X, y = _churn()
    model = RandomForestClassifier(n_estimators=20, random_state=0).fit(X, y)
    data = X.assign(churn=y)
    plain = open_workspace(ctx, {"forest": model}, data, "churn", title="churn", data_role="held-out")
    labelled = open_workspace(ctx, {"forest": model}, data, "churn", title="churn", data_role="held-out", labels=LABELS)
    numbers = {}
    for name, ws in (("labelled", labelled), ("plain", plain)):
        numbers[name] = write_report(ctx, ws, folder / f"{name}.html")
    return {"ctx": ctx, "plain": plain, "labelled": labelled, "numbers": numbers, "folder": folder}


def _results(ctx, ws, **changes) -> dict:
    state, error = normalize(ctx, {**default_state(), "ws": ws.id, "feature": "income_k", **changes})
    assert not error
    run_request(ctx, {"state": state})
    return {"state": state, "keys": plan_state(ctx, ws, state)["keys"]}


def test_labels_reach_no_cache_key_state_or_url(shown):
    ctx, plain, labelled = shown["ctx"], shown["plain"], shown["labelled"]
    assert labelled.labels == LABELS and plain.labels == {}
    a, b = _results(ctx, plain), _results(ctx, labelled)
    assert a["keys"] == b["keys"]  # the same results: labels are no part of a computation
    assert {k: v for k, v in a["state"].items() if k != "ws"} == {k: v for k, v in b["state"].items() if k != "ws"}
    url = search_from_state(b["state"])
    assert "income_k" in url and "Yearly" not in url and "churned" not in url


def test_numbers_json_keeps_the_column_names(shown):
    labelled, plain = shown["numbers"]["labelled"], shown["numbers"]["plain"]
    text = json.dumps(labelled)
    assert "Yearly income" not in text and "churned" not in text and "Years as" not in text
    assert set(labelled["pfi"]["forest"]) == {"income_k", "age", "tenure"}
    assert labelled["pfi"] == plain["pfi"] and labelled["views"] == plain["views"]
    assert labelled["performance"] == plain["performance"] and labelled["state"] == plain["state"]


def test_the_report_names_the_labels_as_text(shown):
    folder = shown["folder"]
    page, before = (folder / "labelled.html").read_text(), (folder / "plain.html").read_text()
    assert INCOME in page and INCOME not in before
    assert "explained class: churned" in page or "churned" in page
    assert "<b>client</b>" not in page  # a label is text, never markup
    assert "Years as &lt;b&gt;client&lt;/b&gt;" in page  # the findings' sentence, escaped
    # the report made again from the page's state is the same document (labels from the workspace)
    html = report_html(shown["ctx"], _results(shown["ctx"], shown["labelled"]))
    assert html is not None and INCOME in html


def _ticks(fig, axis: str = "yaxis") -> list:
    return list(getattr(fig.layout, axis).ticktext or [])


def test_labels_are_on_the_axes_of_every_figure_family(shown):
    ctx = shown["ctx"]
    results = _results(ctx, shown["labelled"])
    plain = _results(ctx, shown["plain"])
    pfi = render(ctx, "pfi", results)["figure"]  # bars
    assert any(INCOME in t for t in _ticks(pfi))
    assert not any(INCOME in t for t in _ticks(render(ctx, "pfi", plain)["figure"]))
    assert "income_k" in pfi.data[0].customdata  # a click still selects the column
    assert "Years as &lt;b&gt;client&lt;/b&gt;" in _ticks(pfi)  # escaped: drawn as text
    assert INCOME in pfi.data[0].hovertext[list(pfi.data[0].customdata).index("income_k")]
    ice = render(ctx, "ice", results)["figure"]  # curves
    assert ice.layout.xaxis.title.text == INCOME and "P(churned)" in ice.layout.yaxis.title.text
    assert INCOME in ice.layout.title.text
    pi = render(ctx, "pi", results)["figure"]
    assert pi.layout.xaxis2.title.text == INCOME
    ciu = render(ctx, "ciu", results)["figure"]  # CIU bars
    assert any(INCOME in t for t in _ticks(ciu))
    matrix = render(ctx, "interactions", results)["matrix"]  # heatmaps
    assert any(INCOME in t for t in _ticks(matrix, "xaxis")) and "income_k" in matrix.layout.xaxis.tickvals
    scatter = render(ctx, "performance", results)["by_feature"]  # performance scatter
    assert scatter.layout.xaxis.title.text == INCOME and "churned" in scatter.layout.title.text


def test_labels_are_in_the_tables_and_the_findings(shown):
    ctx = shown["ctx"]
    results = _results(ctx, shown["labelled"])
    table = render(ctx, "conditional_pfi", results)  # the PFI table
    assert {r["feature"] for r in table["data"]} == {INCOME, "age", "Years as <b>client</b>"}
    performance = render(ctx, "performance", results)
    assert "predicted churned" in [c["name"] for c in performance["confusion_columns"]]
    assert {r["actual"] for r in performance["confusion"]} == {"not churned", "churned"}
    impact = render(ctx, "impact", results)
    assert INCOME in {r["feature"] for r in impact["data"]}
    findings = render(ctx, "findings", results)["list"][0]
    sentences = [item.children[0].children for item in findings.children]
    assert any(INCOME in s for s in sentences)
    assert not any("income_k" in s or "tenure" in s for s in sentences)
    assert "'stayed'" in sentences[0]  # the constant answer's class, by its label


def test_the_what_if_names_the_class_by_its_label(shown):
    ctx = shown["ctx"]
    obs = load_inputs(ctx, _results(ctx, shown["labelled"])).state["obs"]  # the row shown by default
    assert obs is not None
    results = _results(ctx, shown["labelled"], obs=obs, edit={"income_k": 20.0})
    out = render(ctx, "whatif", results)
    assert out["info"].startswith(f"Probability of churned of row {obs}: ")
    assert " % → " in out["info"] and f"{INCOME} " in out["info"]
    assert out["figure"].layout.yaxis.title.text == "probability of churned (%)"
    assert out["form"][0].children[0].children == INCOME and out["form"][0].children[0].title == "income_k"
    plain = render(ctx, "whatif", _results(ctx, shown["plain"], obs=obs, edit={"income_k": 20.0}))
    assert plain["info"].startswith(f"Probability of 1 of row {obs}: ")
    numbers = report_numbers(ctx, results)
    assert "churned" not in json.dumps(numbers, default=str)


# --- the doors ---------------------------------------------------------------------------------
def test_unknown_names_are_refused_at_every_door(shown, tmp_path):
    ctx = shown["ctx"]
    X, y = _churn(120, seed=1)
    model = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    with pytest.raises(labels.LabelsError, match=r"features\.'incme_k' is not a feature"):
        open_workspace(ctx, {"m": model}, X.assign(churn=y), "churn", labels={"features": {"incme_k": "x"}})
    with pytest.raises(labels.LabelsError, match=r"classes\.'2' is not a class"):
        open_workspace(ctx, {"m": model}, X.assign(churn=y), "churn", labels={"classes": {"2": "x"}})
    with pytest.raises(dashboard.ReportError, match="labels must be a dict"):
        dashboard.report(model, X.assign(churn=y), "churn", tmp_path / "r.html", labels=["income_k"])


def test_the_command_line_and_report_take_labels(tmp_path):
    X, y = _churn(200, seed=2)
    model = RandomForestClassifier(n_estimators=10, random_state=0).fit(X, y)
    sio.dump(model, tmp_path / "churn.skops")
    X.assign(churn=y).to_csv(tmp_path / "churn.csv", index=False)
    (tmp_path / "labels.json").write_text(json.dumps(LABELS))
    (tmp_path / "bad.json").write_text(json.dumps({"features": {"incme_k": "typo"}}))
    args = ["--model", "churn.skops", "--data", "churn.csv", "--target", "churn", "--out", "r.html"]
    command = [sys.executable, str(ROOT / "app.py"), "report", "--cache-dir", str(tmp_path / "c"), *args]
    done = subprocess.run(
        [*command, "--json", "n.json", "--labels", "labels.json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "r.html").read_text()
    assert INCOME in page and "churned" in page
    numbers = json.loads((tmp_path / "n.json").read_text())
    assert set(numbers["pfi"]["churn"]) == {"income_k", "age", "tenure"} and "Yearly" not in json.dumps(numbers)
    bad = subprocess.run([*command, "--labels", "bad.json"], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1].startswith("error: bad.json: features.'incme_k' is not a feature")
    # report(labels=): a dict, and a path relative to the caller's folder
    for given in (LABELS, tmp_path / "labels.json"):
        found = dashboard.report(
            model, X.assign(churn=y), "churn", tmp_path / "p.html", labels=given, cache_dir=tmp_path / "c",
            progress=False,
        )  # fmt: skip
        assert INCOME in (tmp_path / "p.html").read_text()
        assert set(found["pfi"]["RandomForestClassifier"]) == {"income_k", "age", "tenure"}
    with pytest.raises(dashboard.ReportError, match=r"features\.'incme_k' is not a feature"):
        dashboard.report(
            model, X.assign(churn=y), "churn", tmp_path / "q.html", labels=tmp_path / "bad.json",
            cache_dir=tmp_path / "c", progress=False,
        )  # fmt: skip


# --- the upload form -----------------------------------------------------------------------------
def test_the_upload_form_checks_a_labels_file_beside_its_input(shown):
    ctx = shown["ctx"]

    def upload(text: str, name: str = "labels.json") -> dict:
        token, path = ctx.store.new_upload(name)
        path.write_text(text)
        return {"id": token, "name": name, "size": len(text)}

    facts = {"income_k": {"kind": "number", "classes": []}, "churn": {"kind": "number", "classes": ["0", "1"]}}
    ok = describe_labels(ctx, upload(json.dumps({"features": {"income_k": "Income"}})), facts, "churn")
    assert ok.error is None and "1 feature" in ok.info
    typo = describe_labels(ctx, upload(json.dumps({"features": {"incme_k": "x"}})), facts, "churn")
    assert "features.'incme_k' is not a feature" in typo.error
    cls = describe_labels(ctx, upload(json.dumps({"classes": {"7": "x"}})), facts, "churn")
    assert "classes.'7' is not a class" in cls.error
    shape = describe_labels(ctx, upload('{"features": {"income_k": 3}}'), facts, "churn")
    assert "'features.income_k' must be text" in shape.error
    refused = describe_labels(ctx, {"name": "l.json", "error": "a labels file is at most 64 KiB."})
    assert refused.error == "l.json: a labels file is at most 64 KiB."
    out = load_outputs({"errors": {"labels": "labels.json: features.'x' is not a feature"}})
    assert out["labels_error"] == "labels.json: features.'x' is not a feature" and out["model_error"] is None


def test_the_upload_route_takes_a_small_json_labels_file(tmp_path):
    app = create_app(Config(cache_dir=str(tmp_path / "cache")))
    client = app.server.test_client()

    def post(name: str, body: bytes):
        import io

        return client.post(
            "/upload",
            data={"kind": "labels", "file": (io.BytesIO(body), name)},
            content_type="multipart/form-data",
            headers={"Origin": "http://localhost", "Sec-Fetch-Site": "same-origin"},
        )

    ok = post("labels.json", json.dumps(LABELS).encode())
    assert ok.status_code == 200, ok.get_data(as_text=True)
    assert set(ok.get_json()) == {"id", "name", "size"}
    wrong = post("labels.csv", b"a,b")
    assert wrong.status_code == 400 and "must end in .json" in wrong.get_json()["error"]
    big = post("labels.json", b" " * (labels.MAX_BYTES + 1))
    assert big.status_code == 413 and "at most 64 KiB" in big.get_json()["error"]


def test_show_hands_the_labels_to_its_server(tmp_path):
    from dashboard.store import Store

    X, y = _churn(150, seed=3)
    model = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    cache = tmp_path / "cache"
    shown = dashboard.show(model, X.assign(churn=y), "churn", labels=LABELS, cache_dir=cache)
    try:
        assert Store(cache).workspace(shown.ws).labels == LABELS
        assert "Yearly" not in shown.url
        with pytest.raises(dashboard.ShowError, match=r"classes\.'2' is not a class of the target"):
            dashboard.show(model, X.assign(churn=y), "churn", labels={"classes": {"2": "x"}}, cache_dir=cache)
    finally:
        shown.stop()


def test_the_feature_pickers_show_the_label_and_keep_the_column_as_value(shown):
    """The toolbar's feature dropdown and the subgroup builder's columns read "Yearly income
    (k$) (income_k)"; what they set in the state stays the column name."""
    from dashboard.callbacks.drilldown import control_options

    ctx, labelled, plain = shown["ctx"], shown["labelled"], shown["plain"]
    state, _ = normalize(ctx, {**default_state(), "ws": labelled.id})
    options = control_options(ctx, state)
    feature = {o["value"]: o["label"] for o in options["feature_options"]}
    assert feature["income_k"] == f"{LABELS['features']['income_k']} (income_k)"
    column = {o["value"]: o["label"] for o in options["column_options"]}
    assert column["income_k"] == feature["income_k"] and column["churn"] == "churn"
    state, _ = normalize(ctx, {**default_state(), "ws": plain.id})
    assert all(o["label"] == o["value"] for o in control_options(ctx, state)["feature_options"])
