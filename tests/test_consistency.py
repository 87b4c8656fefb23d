"""Issue 39, "Done when": a consistency test walks the X3 demo, the boosters demo and one
upload and finds every PFI value and "±" that names the same (model, rows, repetitions)
equal across page, report and JSON at the digits written.

Each case is computed once, as users get it: ``write_report`` (the demos) or ``python app.py
report`` (the upload: a CSV and two ``.skops`` models) writes the report and its
``numbers.json`` in a fresh interpreter (the boosters' OpenMP never runs in, or forks from,
this process), and the jobs of a few more page states (another model, a subgroup, more
repetitions) run there too. This process then draws the page from the same cache as the
app's callbacks do (``resolve_state`` then ``views.render``; nothing left to compute) and
reads every place a PFI value or its "±" is shown:

* the page: the PFI bars (values, whiskers, hover texts, sample labels), the Subgroups
  table's all-rows columns and its CSV export, the findings' sentences, the bars' copy in
  "Can these importances be trusted?" (values, hovers, its one-line reading, the members'
  "alone" values) and the last point of "Has the ranking settled?";
* the report: the same figures (parsed from its scripts), its tables and its sentences;
* ``numbers.json``: ``pfi.<model>.<feature>.importance/std_error`` and the views' numbers.

Every sighting is keyed by (rows, repetitions, model, feature, value or ±); within a key all
floats carried exactly agree to 1e-12 and every number written in text is the exact value
rounded to the digits it is written with. So the findings writing the spread over the
permutations instead of the standard error, a Subgroups column from another run than the
bars, or a JSON ``std_error`` that is the std each break it (the last test shows they do).
"""

from __future__ import annotations

import copy
import html as html_lib
import importlib.util
import io
import json
import math
import os
import re
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import skops.io as sio
from helpers.components import plotly_array, report_figures, texts
from helpers.written import NUM, agrees
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

import compute
from dashboard import ids, planning, views
from dashboard.callbacks.compute import resolve_state
from dashboard.config import Config
from dashboard.state import default_state, make_context, normalize
from dashboard.views import plan_state

ROOT = Path(__file__).resolve().parent.parent
BOOSTERS = all(importlib.util.find_spec(name) is not None for name in ("xgboost", "lightgbm", "catboost"))
needs_boosters = pytest.mark.skipif(not BOOSTERS, reason="the boosters extra is not installed")
CASES = ["demo-x3", pytest.param("demo-wine", marks=needs_boosters), "upload"]
# the page states drawn besides the report's, per case: another model's Subgroups table, a
# subgroup (other rows), more repetitions (another run of the same model and rows)
EXTRA_STATES = {
    "demo-x3": [{"subgroup": "X3 == 0"}, {"repeats": 20}],
    "demo-wine": [{"model": "LightGBM"}, {"model": "CatBoost"}],
    "upload": [{"model": "logistic"}, {"subgroup": "tenure < 4"}],
}
MARGINAL = "shuffled among all rows (the bars above)"  # the bars' copy in "Can these importances be trusted?"
ALONE = "each shuffled alone, summed"
ALL_ROWS = "all rows"
RTOL = 1e-12

#: computes the report (unless its folder is "") and the given page states into a cache, in a
#: fresh interpreter, as ``python app.py report`` does
JOB = """
import json, sys
from pathlib import Path
from dashboard import jobs, planning
from dashboard.config import Config
from dashboard.doors import write_report
from dashboard.state import default_state, make_context, normalize
from dashboard.views import plan_state
ctx = make_context(Config(cache_dir=sys.argv[1]))
ws = ctx.store.workspace(sys.argv[2])
if sys.argv[3]:
    out = Path(sys.argv[3])
    write_report(ctx, ws, out / "report.html", json_path=out / "numbers.json")
for changes in json.loads(sys.argv[4]):
    state = normalize(ctx, {**default_state(), "ws": ws.id, **changes})[0]
    for _ in range(3):  # the row shown by default is chosen from the curves: a second plan after them
        todo = planning.missing(ctx.store, plan_state(ctx, ws, state)["tasks"])
        if todo:
            jobs.run(ctx.store, ws, todo, policy=ctx.policy)
"""


@dataclass(frozen=True)
class Seen:
    """One PFI value or "±" where it is shown: ``exact`` a float carried as is (figure data,
    a table cell, JSON), ``written`` a number as text (a hover, a sentence, a report cell)."""

    where: str
    rows: str
    repeats: int
    model: str
    feature: str
    what: str  # "PFI" or "±"
    exact: float | None = None
    written: str | None = None


@dataclass
class Walk:
    """One case: its context, the report's and the page states' outputs."""

    ctx: object
    ws: object
    numbers: dict
    html: str
    pages: dict  # label -> {"state", "results", "outputs": {view: out}, "export": csv text}


def _run(args: list[str], cwd: Path) -> None:
    done = subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    assert done.returncode == 0, done.stderr[-3000:]


def _job(cache: Path, ws_id: str, out: Path | None, states: list[dict]) -> None:
    _run([sys.executable, "-c", JOB, str(cache), ws_id, str(out) if out else "", json.dumps(states)], ROOT)


def _upload(folder: Path, cache: Path) -> str:
    """A churn CSV and two .skops models through ``python app.py report``; the workspace id."""
    rng = np.random.default_rng(3)
    n = 360
    frame = pd.DataFrame(
        {
            "income_k": np.round(rng.normal(50, 12, n), 1),
            "tenure": rng.integers(0, 12, n),
            "calls": rng.poisson(2, n),
            "plan": rng.choice(["basic", "plus", "pro"], n),
        }
    )
    score = -0.04 * (frame["income_k"] - 50) - 0.25 * frame["tenure"] + 0.5 * frame["calls"] + rng.normal(0, 1, n)
    frame["churn"] = (score > 0).astype(int)
    X = pd.get_dummies(frame[["income_k", "tenure", "calls"]].assign(plan_pro=frame["plan"] == "pro"))
    X = X.astype(float)
    forest = RandomForestClassifier(n_estimators=40, min_samples_leaf=5, random_state=0).fit(X, frame["churn"])
    logistic = LogisticRegression(max_iter=1000).fit(X, frame["churn"])
    sio.dump(forest, folder / "forest.skops")
    sio.dump(logistic, folder / "logistic.skops")
    X.assign(churn=frame["churn"]).to_csv(folder / "churn.csv", index=False)
    args = [sys.executable, str(ROOT / "app.py"), "report", "--cache-dir", str(cache)]
    args += ["--model", "forest.skops", "--model", "logistic.skops", "--data", "churn.csv", "--target", "churn"]
    _run([*args, "--out", "report.html", "--json", "numbers.json"], folder)
    found = [p.stem for p in (cache / "workspaces").glob("*.json") if not p.stem.startswith("demo-")]
    assert len(found) == 1, found
    return found[0]


def _page(ctx, ws, changes: dict) -> dict:
    """A page state's outputs as the app draws them: every result cached, nothing to compute."""
    state, error = normalize(ctx, {**default_state(), "ws": ws.id, **changes})
    assert error is None, error
    assert not planning.missing(ctx.store, plan_state(ctx, ws, state)["tasks"]), changes
    results = resolve_state(ctx, state, None).results
    assert isinstance(results, dict) and "sigs" in results and "error" not in results, results
    names = ("pfi", "conditional_pfi", "findings", "pfi_caveats", "pfi_convergence")
    outputs = {name: views.render(ctx, name, results) for name in names}
    download = views.export(ctx, ids.EXPORT_PFI, results)
    return {"state": state, "results": results, "outputs": outputs, "export": download["content"]}


@pytest.fixture(scope="module")
def walks(tmp_path_factory):
    """Each case walked once (on first use), in one cache shared by the fresh interpreters."""
    root = tmp_path_factory.mktemp("consistency")
    cache = root / "cache"
    found: dict = {}

    def walk(case: str) -> Walk:
        if case in found:
            return found[case]
        folder = root / case
        folder.mkdir(exist_ok=True)
        if case == "upload":
            ws_id = _upload(folder, cache)
            _job(cache, ws_id, None, EXTRA_STATES[case])
        else:
            ws_id = case
            _job(cache, ws_id, folder, EXTRA_STATES[case])
        ctx = make_context(Config(cache_dir=str(cache)))  # what `app.py report` and the server use
        ws = ctx.store.workspace(ws_id)
        numbers = json.loads((folder / "numbers.json").read_text())
        report_state = {"sfimp": True, "feature": numbers["state"]["feature"]}  # write_report's last state
        pages = {"report": _page(ctx, ws, report_state)}
        for changes in EXTRA_STATES[case]:
            pages[json.dumps(changes)] = _page(ctx, ws, changes)
        found[case] = Walk(ctx, ws, numbers, (folder / "report.html").read_text(encoding="utf-8"), pages)
        return found[case]

    return walk


# --- reading the places a PFI is shown --------------------------------------------------------


def _traces(figure) -> list[dict]:
    """A figure's traces as dicts of plain lists (a page's go.Figure or a report's JSON)."""
    data = figure.to_plotly_json()["data"] if hasattr(figure, "to_plotly_json") else figure
    out = []
    for trace in data:
        error = trace.get("error_x") or {}
        out.append(
            {
                "type": trace.get("type"),
                "name": trace.get("name"),
                "x": plotly_array(trace.get("x")),
                "y": plotly_array(trace.get("y")),
                "error": plotly_array(error.get("array")) if isinstance(error, dict) else None,
                "hover": plotly_array(trace.get("hovertext")),
                "text": plotly_array(trace.get("text")),
            }
        )
    return out


def _is_pfi_figure(traces: list[dict], models) -> bool:
    bars = [t for t in traces if t["type"] == "bar"]
    return (
        bool(bars)
        and all(t["name"] in models for t in bars)
        and any(t["name"] == f"{bars[0]['name']} repeats" for t in traces)
    )


def _hover(text: str) -> tuple[str, str, str | None] | None:
    """(feature, value, ±) of a bar's hover: "[model<br>]feature: 0.3234 ± 0.0577"."""
    last = html_lib.unescape(str(text).split("<br>")[-1])
    found = re.fullmatch(rf"(?P<f>.+): (?P<v>{NUM})(?: ± (?P<e>{NUM}))?", last)
    return None if found is None else (found["f"], found["v"], found["e"])


def _bars(traces, names: dict, where: str, rows: str, repeats: int) -> list[Seen]:
    """Bars as drawn: per trace named in ``names`` (trace name -> model), each bar's value
    and whisker, and the numbers its hover and label write."""
    seen = []
    for t in traces:
        if t["type"] != "bar" or t["name"] not in names:
            continue
        model = names[t["name"]]
        for i, feature in enumerate(t["y"]):
            seen.append(Seen(where, rows, repeats, model, feature, "PFI", exact=float(t["x"][i])))
            if t["error"] is not None:
                seen.append(Seen(where, rows, repeats, model, feature, "±", exact=float(t["error"][i])))
            parsed = _hover(t["hover"][i]) if t["hover"] else None
            if parsed is not None:
                assert parsed[0] == feature, (where, parsed, feature)
                seen.append(Seen(f"{where} (hover)", rows, repeats, model, feature, "PFI", written=parsed[1]))
                if parsed[2] is not None:
                    seen.append(Seen(f"{where} (hover)", rows, repeats, model, feature, "±", written=parsed[2]))
            label = t["text"][i] if t["text"] else ""
            if label:  # a sampled bar's label: its standard error ("±0.012")
                seen.append(Seen(f"{where} (label)", rows, repeats, model, feature, "±", written=label.lstrip("±")))
    return seen


def _alone(traces, model: str, where: str, rows: str, repeats: int) -> list[Seen]:
    """The members' bars written in the grouped figure's hover ("flavanoids alone 0.3764")."""
    seen = []
    for t in traces:
        if t["name"] != ALONE or not t["hover"]:
            continue
        for hover in t["hover"]:
            parts = html_lib.unescape(hover.split("<br>")[0])
            for found in re.finditer(rf"(?:^|, )(?P<f>[^,]+?) alone (?P<v>{NUM})", parts):
                seen.append(Seen(where, rows, repeats, model, found["f"], "PFI", written=found["v"]))
    return seen


def _running_mean(traces, features, model: str, where: str, rows: str, repeats: int) -> list[Seen]:
    """ "Has the ranking settled?": each line's last point is the PFI after every permutation."""
    seen = []
    for t in traces:
        if t["type"] == "scatter" and t["name"] in features and t["y"]:
            assert len(t["y"]) == repeats, (where, t["name"], len(t["y"]))
            seen.append(Seen(where, rows, repeats, model, t["name"], "PFI", exact=float(t["y"][-1])))
    return seen


def _findings(sentences, focus: str, where: str, rows: str, repeats: int) -> list[Seen]:
    """Every PFI and "±" the findings write: the features relied on ("X2 (125 ± 7.86)", "by
    0.376 ± 0.0123", "next is X3 (…)") and the importance inflated by dependence."""
    seen = []
    for sentence in sentences:
        sentence = html_lib.unescape(sentence)
        prefix = re.match(r"For (?P<m>.+?) \(the model chosen for the curves\), ", sentence)
        about = prefix["m"] if prefix else focus
        rely = re.search(r"(?P<m>[^.;]+?)'s performance relies most on (?P<rest>.*)", sentence)
        if rely:
            model, rest = rely["m"], rely["rest"]
            for found in re.finditer(rf"(?P<f>[^\s(),]+) \((?P<v>{NUM}) ± (?P<e>{NUM})\)", rest):
                seen.append(Seen(where, rows, repeats, model, found["f"], "PFI", written=found["v"]))
                seen.append(Seen(where, rows, repeats, model, found["f"], "±", written=found["e"]))
            single = re.match(rf"(?P<f>[^:]+): shuffling it raises the .+? by (?P<v>{NUM}) ± (?P<e>{NUM}),", rest)
            if single:
                seen.append(Seen(where, rows, repeats, model, single["f"], "PFI", written=single["v"]))
                seen.append(Seen(where, rows, repeats, model, single["f"], "±", written=single["e"]))
            assert single or " apart: " in rest, sentence  # a sentence shape this walk does not read
        inflated = re.search(
            rf"(?P<f>\S+)'s importance is inflated by dependence: (?P<v>{NUM}) when shuffled", sentence
        )
        if inflated:
            seen.append(Seen(where, rows, repeats, about, inflated["f"], "PFI", written=inflated["v"]))
    return seen


def _reading(text: str, model: str, where: str, rows: str, repeats: int) -> list[Seen]:
    """The caveats' one-line reading: "flavanoids: 0.376 → 0.0732 once total_phenols is known"."""
    return [
        Seen(where, rows, repeats, model, found["f"], "PFI", written=found["v"])
        for found in re.finditer(rf"(?P<f>[^\s:]+): (?P<v>{NUM}) → {NUM} once ", html_lib.unescape(text))
    ]


def _table_columns(frame: pd.DataFrame, where: str, rows: str, repeats: int, model: str, exact: bool) -> list[Seen]:
    """The Subgroups table's all-rows columns, by feature (exact cells, or text as written)."""
    seen = []
    for column in frame.columns:
        what = "PFI" if str(column).startswith("all (n=") else "±" if column == "all: ± standard error" else None
        if what is None:
            continue
        for feature, value in frame[column].items():
            if exact:
                seen.append(Seen(where, ALL_ROWS, repeats, model, str(feature), what, exact=float(value)))
            elif str(value).strip():
                seen.append(Seen(where, ALL_ROWS, repeats, model, str(feature), what, written=str(value)))
    return seen


def _rows_of(state: dict) -> str:
    excluded = state.get("exclude") or []
    rows = state.get("subgroup") or ALL_ROWS
    return rows + (f" without {sorted(excluded)}" if excluded else "")


def page_sightings(walk: Walk, label: str) -> list[Seen]:
    """Every PFI and "±" one page state shows."""
    page = walk.pages[label]
    state, out = page["state"], page["outputs"]
    rows, reps, focus = _rows_of(state), int(state["repeats"]), str(state["model"])
    models = [m.name for m in walk.ws.models]
    features = list(walk.ws.features)
    seen = _bars(_traces(out["pfi"]["figure"]), {m: m for m in models}, "page: PFI bars", rows, reps)
    table = pd.DataFrame(out["conditional_pfi"]["data"]).set_index("feature")
    seen += _table_columns(table, "page: Subgroups table", rows, reps, focus, exact=True)
    sentences = [t for t in texts(out["findings"]["list"]) if len(t) > 40]
    seen += _findings(sentences, focus, "page: findings", rows, reps)
    caveats = out["pfi_caveats"]
    if hasattr(caveats["cs_figure"], "data") and caveats["cs_figure"].data:
        traces = _traces(caveats["cs_figure"])
        seen += _bars(traces, {MARGINAL: focus}, "page: importance once known, the bars' copy", rows, reps)
    seen += _reading(caveats["cs_info"], focus, "page: importance once known, reading", rows, reps)
    seen += _alone(_traces(caveats["figure"]), focus, "page: shuffled together, alone", rows, reps)
    conv = _traces(out["pfi_convergence"]["figure"])
    seen += _running_mean(conv, features, focus, "page: has the ranking settled", rows, reps)
    export = pd.read_csv(io.StringIO(page["export"]), index_col=0, dtype=str)
    seen += _table_columns(export, "page: Subgroups CSV", rows, reps, focus, exact=False)
    selection = views.load_inputs(walk.ctx, page["results"]).selection
    for model in models:
        for column, what in (
            (f"{model}: PFI as the Overview bars on ", "PFI"),
            (f"{model}: ± standard error on ", "±"),
        ):
            assert column + selection in export.columns, (column, list(export.columns))
            for feature, value in export[column + selection].items():
                seen.append(Seen("page: Subgroups CSV, bars", rows, reps, model, str(feature), what, written=value))
    return seen


def _report_table(html: str) -> pd.DataFrame | None:
    """The report's Subgroups table (headers as written, cells as text)."""
    for table in re.findall(r"<table>(.*?)</table>", html, flags=re.S):
        heads = [html_lib.unescape(h) for h in re.findall(r"<th>(.*?)</th>", table)]
        if "all: ± standard error" not in heads:
            continue
        rows = [
            [html_lib.unescape(c) for c in re.findall(r"<td>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", table)
        ]
        body = [r for r in rows if r]
        return pd.DataFrame(body, columns=heads).set_index("feature")
    return None


def report_sightings(walk: Walk) -> list[Seen]:
    """Every PFI and "±" the report shows (its state: all rows, the default repetitions)."""
    state = walk.pages["report"]["state"]
    rows, reps, focus = _rows_of(state), int(state["repeats"]), str(state["model"])
    models = [m.name for m in walk.ws.models]
    html = walk.html
    seen: list[Seen] = []
    for data, _layout in report_figures(html):
        traces = _traces(data)
        if _is_pfi_figure(traces, models):
            seen += _bars(traces, {m: m for m in models}, "report: PFI bars", rows, reps)
        seen += _bars(traces, {MARGINAL: focus}, "report: importance once known, the bars' copy", rows, reps)
        seen += _alone(traces, focus, "report: shuffled together, alone", rows, reps)
        if any(str(t["name"]).endswith(" band") for t in traces):
            seen += _running_mean(traces, list(walk.ws.features), focus, "report: has the ranking settled", rows, reps)
    table = _report_table(html)
    if table is not None:
        seen += _table_columns(table, "report: Subgroups table", rows, reps, focus, exact=False)
    found = re.search(r"<ol class='findings'>(.*?)</ol>", html, flags=re.S)
    sentences = re.findall(r"<li>(.*?)</li>", found.group(1), flags=re.S) if found else []
    seen += _findings(sentences, focus, "report: findings", rows, reps)
    for paragraph in re.findall(r"<p>(.*?)</p>", html, flags=re.S):
        seen += _reading(paragraph, focus, "report: importance once known, reading", rows, reps)
    return seen


def json_sightings(walk: Walk) -> list[Seen]:
    """Every PFI and "±" of ``numbers.json`` (the report's state)."""
    numbers = walk.numbers
    state = walk.pages["report"]["state"]
    rows, reps, focus = _rows_of(state), int(state["repeats"]), str(state["model"])
    assert numbers["state"]["repeats"] == reps and numbers["state"]["model"] == focus
    seen = []
    for model, features in numbers["pfi"].items():
        for feature, found in features.items():
            seen.append(Seen("json: pfi importance", rows, reps, model, feature, "PFI", exact=found["importance"]))
            seen.append(Seen("json: pfi std_error", rows, reps, model, feature, "±", exact=found["std_error"]))
    shown = numbers["views"]
    for name, values in shown.get("pfi", {}).items():
        model, what = name.rsplit(": ", 1)
        for feature, value in values.items():
            kind = "PFI" if what == "PFI" else "±"
            seen.append(Seen(f"json: views.pfi {what}", rows, reps, model, feature, kind, exact=value))
    for name, values in shown.get("conditional_pfi", {}).items():
        what = "PFI" if name.startswith("all (n=") else "±" if name == "all: ± standard error" else None
        if what is not None:
            for feature, value in values.items():
                seen.append(Seen("json: views.conditional_pfi", ALL_ROWS, reps, focus, feature, what, exact=value))
    best = numbers["performance"].get("best", focus)
    for name, value in shown.get("findings", {}).items():  # the findings' features relied on: the best model's
        seen.append(Seen("json: views.findings", rows, reps, best, name.removeprefix("PFI of "), "PFI", exact=value))
    for name, values in shown.get("pfi_convergence", {}).items():
        feature = name.removesuffix(": running mean")
        seen.append(Seen("json: views.pfi_convergence", rows, reps, focus, feature, "PFI", exact=values[-1]))
    return seen


def sightings(walk: Walk) -> list[Seen]:
    return (
        [s for label in walk.pages for s in page_sightings(walk, label)] + report_sightings(walk) + json_sightings(walk)
    )


# --- comparing -----------------------------------------------------------------------------------


def disagreements(seen: list[Seen]) -> list[str]:
    """Within each (rows, repetitions, model, feature, value or ±): every exact float equal to
    the first one seen (the page's bars when they are there) and every written number equal to
    it at its digits. A key with only written numbers has nothing to be checked against."""
    groups: dict = {}
    for s in seen:
        groups.setdefault((s.rows, s.repeats, s.model, s.feature, s.what), []).append(s)
    problems = []
    for key, group in groups.items():
        exact = sorted((s for s in group if s.exact is not None), key=lambda s: not s.where.startswith("page: PFI"))
        if not exact:
            problems.append(f"{key}: only written as {[(s.where, s.written) for s in group]}, never drawn or stored")
            continue
        ref = exact[0]
        for s in group:
            if s.exact is not None:
                ok = math.isclose(s.exact, ref.exact, rel_tol=RTOL, abs_tol=1e-15)
                shown = repr(s.exact)
            else:
                ok = agrees(s.written, ref.exact)
                shown = repr(s.written)
            if not ok:
                problems.append(f"{key}: {s.where} has {shown} where {ref.where} has {ref.exact!r}")
    return problems


KNOWN = "importance once known, the bars' copy"


# --- the tests ------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_every_pfi_value_and_pm_is_one_number(walks, case):
    """Page, report and JSON agree on every PFI and "±" of the same (model, rows, repetitions),
    at 1e-12 where a float is carried and at the digits written where it is text."""
    seen = sightings(walks(case))
    problems = disagreements(seen)
    assert not problems, "\n".join(problems[:40])


@pytest.mark.parametrize("case", CASES)
def test_the_walk_reads_every_place(walks, case):
    """Not vacuous: for the report's state, every model's every feature is seen on the page's
    bars (value, whisker, hover), in the report's figure and in JSON; the chosen model's in the
    Subgroups table (page, CSV, report, JSON); the findings write the best model's top
    features with their ±; and every other page state is read too."""
    walk = walks(case)
    seen = sightings(walk)
    state = walk.pages["report"]["state"]
    reps, focus = int(state["repeats"]), str(state["model"])
    models = [m.name for m in walk.ws.models]
    best = walk.numbers["performance"]["best"]
    where: dict = {}
    for s in seen:
        where.setdefault((s.rows, s.repeats, s.model, s.feature, s.what), set()).add(s.where)
    every = {
        "page: PFI bars",
        "page: PFI bars (hover)",
        "report: PFI bars",
        "report: PFI bars (hover)",
        "page: Subgroups CSV, bars",
    }
    for model in models:
        for feature in walk.ws.features:
            for what, stored in (
                ("PFI", {"json: pfi importance", "json: views.pfi PFI"}),
                ("±", {"json: pfi std_error", "json: views.pfi std_error"}),
            ):
                got = where.get((ALL_ROWS, reps, model, feature, what), set())
                assert every | stored <= got, (model, feature, what, sorted(every | stored - got))
    table = {"page: Subgroups table", "page: Subgroups CSV", "report: Subgroups table", "json: views.conditional_pfi"}
    for feature in walk.ws.features:
        for what in ("PFI", "±"):
            got = where[(ALL_ROWS, reps, focus, feature, what)]
            assert table <= got, (feature, what, sorted(table - got))
    findings = [k for k, w in where.items() if "page: findings" in w and k[2] == best and k[:2] == (ALL_ROWS, reps)]
    assert {k[4] for k in findings} == {"PFI", "±"}, findings
    assert all("report: findings" in where[k] for k in findings)
    assert any("json: views.findings" in where[k] for k in findings)
    assert any("page: has the ranking settled" in w and "report: has the ranking settled" in w for w in where.values())
    for label in walk.pages:
        if label != "report":
            changes = json.loads(label)
            rows = _rows_of({**state, **changes})
            reps_here = int(changes.get("repeats", reps))
            assert any(k[0] == rows and k[1] == reps_here for k in where), label


@pytest.mark.parametrize("case", CASES)
def test_the_bars_copy_in_the_caveats_draws_the_bars_whiskers(walks, case):
    """The hatched/solid pair "importance once the other features are known" draws the PFI bars
    again ("the bars above"): their whiskers and the "±" of their hover are the bars'."""
    seen = sightings(walks(case))
    mine = [s for s in seen if KNOWN in s.where and s.what == "±"]
    assert mine
    keys = {(s.rows, s.repeats, s.model, s.feature) for s in mine}
    bars = [
        s for s in seen if s.what == "±" and (s.rows, s.repeats, s.model, s.feature) in keys and "json: pfi" in s.where
    ]
    problems = disagreements(bars + mine)
    assert not problems, "\n".join(problems[:20])


def test_the_walk_catches_the_mistakes_the_issue_names(walks):
    """The comparison is not lenient: on the X3 demo it flags (1) findings that write the std
    over the permutations after "±", (2) a Subgroups all-rows column from another run of the
    same model and rows (20 repetitions, not 10), (3) a JSON ``std_error`` that is the std."""
    walk = walks("demo-x3")
    assert not disagreements(sightings(walk))
    page = walk.pages["report"]
    inp = views.load_inputs(walk.ctx, page["results"])
    focus = page["state"]["model"]
    pfi = inp.pfi[focus]
    assert not np.allclose(pfi.std, pfi.uncertainty, rtol=0.05)  # the mistakes differ from the truth

    # (1) the findings with the std after "±" (the issue's first defect)
    wrong = compute.findings.reliance(replace(pfi, row_std_error=pfi.std), model=focus, loss="squared error")
    assert wrong is not None
    seen = _findings([wrong.text], focus, "page: findings", ALL_ROWS, int(page["state"]["repeats"]))
    assert any("page: findings has" in p for p in disagreements(sightings(walk) + seen))

    # (2) the Subgroups table's all-rows column from another run: the 20-repetition bars
    other = views.load_inputs(walk.ctx, walk.pages[json.dumps({"repeats": 20})]["results"]).pfi[focus]
    broken = copy.deepcopy(walk)
    table = broken.pages["report"]["outputs"]["conditional_pfi"]
    column = next(c["id"] for c in table["columns"] if c["id"].startswith("all (n="))
    for row in table["data"]:
        row[column] = float(other.importance[row["feature"]])
    problems = disagreements(sightings(broken))
    assert any("page: Subgroups table has" in p for p in problems), problems

    # (3) numbers.json's std_error the std
    broken = copy.deepcopy(walk)
    for feature, found in broken.numbers["pfi"][focus].items():
        found["std_error"] = float(pfi.std[feature])
    problems = disagreements(sightings(broken))
    assert any("json: pfi std_error has" in p for p in problems), problems

    # and the digits: a written number one unit off its last digit is not the value
    assert agrees("0.0479", 0.04794) and not agrees("0.0479", 0.04796)
    assert agrees("1,094", 1093.6) and not agrees("1,094", 1094.6) and not agrees("0", 1e-9)
