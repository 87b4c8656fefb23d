"""Speed of the dashboard with results cached: server time of a switch and browser render time.

Targets (the issues): with results cached, switching feature or subgroup answers in under
150 ms of server time for 1,000 ICI curves; the ICI view with 1,000 curves renders in the
browser in under 1 s; a warm feature switch is drawn in under 1 s end to end (median of
>= 10 switches, issue 11).

Workload: the X3 interaction simulation (Casalicchio et al. 2018, Sec. 6.1) as in the
``demo-x3`` demo, but with 1,000 test rows (so ``max_curves=1000`` explains 1,000 rows) and
the demo's random forest (60 trees, min_samples_leaf=5), saved with skops and registered as
a workspace in a temporary cache folder.

1. Server time, in-process (no HTTP). After one cold pass fills the cache (timed: the ICE/ICI
   profiles of all features, then the permutation PFI of all rows and of the subgroups
   ``X3 == 0`` and ``X3 == 1``), one user action is what the callbacks do for it:
   ``update_state`` (+ the controller's URL and dropdown options), ``resolve_state``,
   the ``render`` of every registered view (one callback each), plus serialising every
   callback's response the way Dash does (``dash._utils.to_json`` = ``to_json_plotly`` of
   ``{"multi": true, "response": {id: {prop: value}}}``). Timed per transition (features
   X1 -> X2 -> X3 -> X1; subgroups "" -> X3 == 0 -> X3 == 1 -> ""), each repetition runs
   the whole cycle after ``gc.collect()``; median and p95 are reported with the share of
   each stage. Not included: Flask/HTTP, request parsing and Dash's output validation.
2. Browser (Playwright, Debian's Chromium, headless) against ``gunicorn -c gunicorn.conf.py
   app:server -w 2`` on the same cache. Checked: the 1,000 background curves are ONE
   SVG scatter trace (WebGL drawn by SwiftShader took 1.5-3.5 s). The ICI figures of X1 and
   X2 exactly as Dash delivered them (captured ``_dash-update-component`` responses) are
   drawn with ``Plotly.react`` (a) on a fresh div of the ICI graph's size (a first draw; the
   target) and (b) in place, one div switching between the two figures; each timed from the
   call until the next animation frame begins (the frame is drawn), plus one more frame. End
   to end, as a user sees a switch: from the
   pointer-down on the feature dropdown's option (or on Apply/Clear of the subgroup box) until
   the ICI title names the new feature (the PI curves the new subgroup), two frames later
   (drawn), and until no callback is pending (every view). The headless browser draws WebGL
   with SwiftShader (on the CPU): frame times are far above those of a real GPU.
   An untimed extra pass wraps the figure builders, aggregations, store reads and each
   response's serialisation to show where the server time goes.

Run: ``python benchmarks/speed_dashboard.py [--quick] [--repeats N] [--no-browser]``.
Writes ``benchmarks/out/speed_dashboard.json``. The machine has few cores and may be shared:
the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout

import dash
import plotly
import sklearn
from dash import no_update
from dash._utils import to_json

from dashboard import ids, jobs, planning, views
from dashboard.callbacks.compute import resolve_state
from dashboard.callbacks.drilldown import CONTROLLER_OUTPUTS, controller_outputs, normalize
from dashboard.config import Config
from dashboard.server import create_app
from dashboard.state import default_state
from dashboard.store import ModelEntry, Workspace, new_workspace_id
from dashboard.views import plan_state

N_ROWS = 1000  # test rows = explained rows = ICI curves
MAX_CURVES = 1000
SERVER_TARGET_MS = 150.0
RENDER_TARGET_MS = 1000.0
FULL = {"repeats": 40, "renders": 10, "switches": 10}
QUICK = {"repeats": 15, "renders": 5, "switches": 4}
FEATURE_CYCLE = ["X1", "X2", "X3"]
SUBGROUP_CYCLE = ["", "X3 == 0", "X3 == 1"]
STAGES = ("controller", "resolve", "views", "serialise")
OUT = ROOT / "benchmarks" / "out" / "speed_dashboard.json"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

# Output ids of each callback, in the order its function returns them (dashboard/callbacks/*.py).
CONTROLLER_OUT = [(o.component_id, o.component_property) for o in CONTROLLER_OUTPUTS.values()]
RESOLVE_OUT = [(ids.RESULTS, "data"), (ids.JOB_REQUEST, "data"), (ids.STATUS, "children")]
VIEW_OUT = {v.name: list(v.outputs.values()) for v in views.REGISTRY}


# --- workload -------------------------------------------------------------------------------
def build_workspace(ctx) -> Workspace:
    """The X3 simulation with N_ROWS test rows and the demo's random forest (skops), registered
    in the context's store like ``dashboard.demos.build_demo`` does."""
    import skops.io as sio
    from sklearn.ensemble import RandomForestRegressor

    from compute.datasets import x3_interaction

    X_train, y_train = x3_interaction(5000, random_state=1)
    X_test, y_test = x3_interaction(N_ROWS, random_state=2)
    forest = RandomForestRegressor(n_estimators=60, min_samples_leaf=5, random_state=0, n_jobs=-1)
    forest.fit(X_train, y_train)
    data = X_test.assign(Y=y_test)
    data_rel, data_sha = ctx.store.keep_data(data)
    features = tuple(str(c) for c in data.columns if c != "Y")
    path = ctx.store.root / "demos" / "bench-x3-random_forest.skops"
    sio.dump(forest, path)
    rel, sha = ctx.store.keep_model(path, ".skops")
    ws = Workspace(
        id=new_workspace_id(),
        title=f"X3 simulation, {N_ROWS} rows (benchmark)",
        data_path=data_rel,
        data_sha=data_sha,
        target="Y",
        task="regression",
        loss="squared_error",
        output=None,
        models=(ModelEntry(name="random forest", path=rel, sha=sha, features=features),),
        demo=False,
        features=features,
    )
    ctx.store.save_workspace(ws)
    return ws


def _run(ctx, ws: Workspace, tasks: list[dict]) -> float:
    """Run some planned tasks in this process (the job's body without the isolation);
    returns wall seconds."""
    start = time.perf_counter()
    jobs.run(ctx.store, ws, tasks, policy=ctx.policy, n_jobs=ctx.config.n_jobs)
    return time.perf_counter() - start


def _pending(ctx, ws: Workspace, state: dict) -> list[dict]:
    return planning.missing(ctx.store, plan_state(ctx, ws, state)["tasks"])


def warm_cache(ctx, ws: Workspace) -> dict:
    """Fill the cache for every state the benchmark visits; time the cold passes."""
    state, _ = normalize(ctx, {**default_state(), "ws": ws.id})
    todo = _pending(ctx, ws, state)
    if not todo:
        raise SystemExit("a fresh cache folder already holds the results?")
    cold = {}
    cold["profiles"] = _run(ctx, ws, [t for t in todo if t["kind"] == "profiles"])  # ICE/ICI of all features
    cold["pfi_all"] = _run(ctx, ws, [t for t in todo if t["kind"] != "profiles"])
    for condition in SUBGROUP_CYCLE[1:]:
        sub, error = normalize(ctx, {**state, "subgroup": condition})
        assert error is None and sub["subgroup"] == condition, error
        todo = _pending(ctx, ws, sub)
        if todo:
            assert all(t["kind"] != "profiles" for t in todo), todo  # a subgroup's own: the row tasks only
            cold[f"pfi[{condition}]"] = _run(ctx, ws, todo)
    resolved = resolve_state(ctx, state, None)
    results, request = resolved.results, resolved.request
    assert request is no_update and "keys" in results, "the cache is not warm"
    cold["n_features"] = len(ws.features)
    return cold


# --- one switch, as the callbacks do it --------------------------------------------------------
def _response(outputs, values) -> bytes:
    """The body Dash sends back for one callback (no_update outputs left out)."""
    response: dict = {}
    for (cid, prop), value in zip(outputs, values):
        if value is not no_update:
            response.setdefault(cid, {})[prop] = value
    return to_json({"multi": True, "response": response}).encode()


def controller(ctx, state, trigger, inputs):
    """The body of the ``controller`` callback (dashboard/callbacks/drilldown.py)."""
    return controller_outputs(ctx, state, trigger, inputs)


def switch(ctx, state, trigger, inputs, breakdown: dict | None = None) -> tuple[dict, dict, dict]:
    """One user action: (new state, seconds per stage, bytes per callback response).
    ``breakdown``: collects the serialisation seconds of each callback's response."""
    t0 = time.perf_counter()
    ctrl = controller(ctx, state, trigger, inputs)
    new = ctrl["state"]
    t1 = time.perf_counter()
    resolved = resolve_state(ctx, new, None)
    t2 = time.perf_counter()
    rendered = {v.name: views.render(ctx, v, resolved.results) for v in views.REGISTRY}  # one callback each
    t3 = time.perf_counter()
    bodies, serialise = {}, {}
    outputs = [
        ("controller", CONTROLLER_OUT, [ctrl[k] for k in CONTROLLER_OUTPUTS]),
        ("resolve", RESOLVE_OUT, [resolved.results, resolved.request, resolved.status]),
    ]
    outputs += [(name, VIEW_OUT[name], list(out.values())) for name, out in rendered.items()]
    for name, outs, values in outputs:
        s0 = time.perf_counter()
        bodies[name] = _response(outs, values)
        serialise[f"to_json {name} response"] = time.perf_counter() - s0
    t4 = time.perf_counter()
    if breakdown is not None:
        for name, sec in serialise.items():
            breakdown.setdefault(name, []).append(sec)
    if resolved.request is not no_update:
        raise SystemExit(f"the switch to {new} needs a job: the cache is not warm")
    ici_bytes = len(to_json(rendered["ici"]["figure"]).encode())
    stages = dict(zip(STAGES, np.diff([t0, t1, t2, t3, t4])))
    sizes = {k: len(v) for k, v in bodies.items()}
    sizes["ici figure"] = ici_bytes
    return new, stages, sizes


def _feature_step(target):
    return ids.FEATURE_SELECT, {"feature": target}


def _subgroup_step(target):
    if target:
        return ids.SUBGROUP_APPLY, {"subgroup_text": target}
    return ids.SUBGROUP_CLEAR, {}


def time_switches(ctx, ws: Workspace, repeats: int) -> dict:
    """{transition: {"stages": [per-rep dict], "sizes": dict}} for both cycles."""
    cycles = [
        ("feature", FEATURE_CYCLE, _feature_step, "feature"),
        ("subgroup", SUBGROUP_CYCLE, _subgroup_step, "subgroup"),
    ]
    out = {}
    for kind, cycle, step, key in cycles:
        state, _ = normalize(ctx, {**default_state(), "ws": ws.id, "feature": "X1"})
        runs = {}
        for rep in range(repeats + 2):  # two untimed cycles first (imports, parquet and page caches)
            for _i, target in enumerate(cycle[1:] + cycle[:1]):
                source = state[key]
                trigger, inputs = step(target)
                inputs = {**inputs, "previous_subgroup": state.get("subgroup", "")}
                gc.collect()
                new, stages, sizes = switch(ctx, state, trigger, inputs)
                assert new[key] == target, (new, target)
                label = f"{kind} {source or '(all rows)'} -> {target or '(all rows)'}"
                entry = runs.setdefault(label, {"stages": [], "sizes": sizes})
                if rep >= 2:
                    entry["stages"].append(stages)
                state = new
        out.update(runs)
    return out


def _pct(values, q) -> float:
    return float(np.percentile(np.asarray(values, float), q))


def summarise_server(runs: dict) -> list[dict]:
    rows = []
    for label, entry in runs.items():
        totals = [sum(s.values()) * 1e3 for s in entry["stages"]]
        stage_ms = {k: statistics.median(s[k] for s in entry["stages"]) * 1e3 for k in STAGES}
        median, p95 = statistics.median(totals), _pct(totals, 95)
        rows.append(
            {
                "action": label,
                "n": len(totals),
                "median_ms": median,
                "p95_ms": p95,
                "min_ms": min(totals),
                "stage_median_ms": stage_ms,
                "payload_bytes": sum(v for k, v in entry["sizes"].items() if k != "ici figure"),
                "ici_figure_bytes": entry["sizes"]["ici figure"],
                "response_bytes": {k: v for k, v in entry["sizes"].items() if k != "ici figure"},
                "target_ms": SERVER_TARGET_MS,
                "result": "PASS" if median < SERVER_TARGET_MS else "FAIL",
                "p95_under_target": p95 < SERVER_TARGET_MS,
            }
        )
    return rows


def stage_shares(runs: dict) -> dict:
    """Share of the summed time of every timed switch spent in each stage."""
    sums = {k: sum(s[k] for e in runs.values() for s in e["stages"]) for k in STAGES}
    total = sum(sums.values())
    return {k: v / total for k, v in sums.items()}


# --- where the time goes: an untimed pass with the view helpers wrapped ---------------------------
def _wrapped_targets(ctx):
    import compute
    from dashboard import figures

    names = [
        (figures, n)
        for n in (
            "pfi_figure",
            "sfimp_figure",
            "global_ci_figure",
            "pi_figure",
            "ici_figure",
            "ice_figure",
            "ale_figure",
            "ciu_figure",
            "influence_figure",
            "empty_figure",
            "table_data",
        )
    ]
    names += [(planning, "select_rows")]
    names += [(compute.ProfileSummary, n) for n in ("conditional_pfi", "global_ci", "influential", "ciu")]
    names += [(compute, "ale_from_profile"), (ctx.store, "get"), (ctx.store, "workspace"), (ctx.store, "data")]
    return names


def helper_breakdown(ctx, ws: Workspace, passes: int) -> list[tuple[str, float, int]]:
    """[(helper, mean ms per switch, calls per switch)] over ``passes`` runs of both cycles,
    largest first. Helpers are the figure builders and aggregations the views call, the store
    reads and the serialisation of each callback's response."""
    log: dict[str, list[float]] = {}
    originals = []

    def wrap(owner, name):
        fn = getattr(owner, name)
        label = f"{getattr(owner, '__name__', 'store').split('.')[-1]}.{name}"

        def timed(*a, **k):
            start = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                log.setdefault(label, []).append(time.perf_counter() - start)

        originals.append((owner, name, fn, name in vars(owner)))
        setattr(owner, name, timed)

    for owner, name in _wrapped_targets(ctx):
        wrap(owner, name)
    n_switches = 0
    try:
        for _kind, cycle, step, _key in (
            ("feature", FEATURE_CYCLE, _feature_step, "feature"),
            ("subgroup", SUBGROUP_CYCLE, _subgroup_step, "subgroup"),
        ):
            state, _ = normalize(ctx, {**default_state(), "ws": ws.id, "feature": "X1"})
            for _ in range(passes):
                for target in cycle[1:] + cycle[:1]:
                    trigger, inputs = step(target)
                    state, _, _ = switch(
                        ctx, state, trigger, {**inputs, "previous_subgroup": state.get("subgroup", "")}, breakdown=log
                    )
                    n_switches += 1
    finally:
        for owner, name, fn, had in reversed(originals):
            if had:
                setattr(owner, name, fn)
            else:
                delattr(owner, name)  # the instance attribute that shadowed the store's method
    rows = [(label, 1e3 * sum(ts) / n_switches, len(ts) / n_switches) for label, ts in log.items()]
    return sorted(rows, key=lambda r: -r[1])


def plotly_costs() -> dict:
    """Two plotly.py costs behind the view stages, measured alone (median ms of 7): the
    template of each figure, and the curve trace's customdata as a list or a numpy array."""
    import plotly.graph_objects as go

    from dashboard import figures

    def med(fn, n=7):
        fn()
        ts = []
        for _ in range(n):
            start = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - start)
        return 1e3 * statistics.median(ts)

    width = 61  # 60 grid points + the gap
    x = np.tile(np.r_[np.linspace(0, 1, width - 1), np.nan], MAX_CURVES)
    y = np.random.default_rng(0).normal(size=x.size)
    labels = np.repeat(np.arange(MAX_CURVES), width)
    start_figure = getattr(figures, "_figure", None) or (lambda: go.Figure(layout={"template": figures.TEMPLATE}))
    return {
        "a figure, template='plotly_white' named": med(lambda: go.Figure().update_layout(template="plotly_white")),
        "a figure as dashboard.figures starts one": med(start_figure),
        f"add Scattergl of {MAX_CURVES} curves, customdata list": med(
            lambda: go.Figure().add_trace(go.Scattergl(x=x, y=y, customdata=labels.tolist()))
        ),
        f"add Scattergl of {MAX_CURVES} curves, customdata int array": med(
            lambda: go.Figure().add_trace(go.Scattergl(x=x, y=y, customdata=labels))
        ),
    }


# --- browser -------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_gunicorn(cache: Path, log_path: Path):
    import requests

    port = _free_port()
    env = {**os.environ, "WIP_CACHE_DIR": str(cache), "WIP_MAX_CURVES": str(MAX_CURVES), "WIP_SECRET_KEY": "bench"}
    log = open(log_path, "w")  # noqa: SIM115 (closed by stop_gunicorn)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            "gunicorn.conf.py",
            "app:server",
            "-w",
            "2",
            "-b",
            f"127.0.0.1:{port}",
            "--no-control-socket",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        if proc.poll() is not None:
            break
        try:
            if requests.get(url + "/", timeout=2).status_code == 200:
                return proc, log, url
        except requests.RequestException:
            time.sleep(0.3)
    stop_gunicorn(proc, log)
    raise RuntimeError("gunicorn did not start:\n" + log_path.read_text()[-3000:])


def stop_gunicorn(proc, log) -> None:
    if proc.poll() is None:
        proc.terminate()  # by PID: the master stops its workers
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    log.close()


ICI_READY = """(feature) => {
    const g = document.querySelector('#ici-graph .js-plotly-plot');
    if (!g || !g._fullData || !g._fullData.some(t => (t.name || '').startsWith('largest integral'))) return false;
    const title = g.querySelector('.gtitle');
    if (!title || !title.textContent.includes('curves of ' + feature)) return false;
    window.__t1 = performance.now();
    return true;
}"""

PI_SUBGROUP_READY = """(cond) => {
    const g = document.querySelector('#pi-graph .js-plotly-plot');
    const i = document.querySelector('#ici-graph .js-plotly-plot');
    if (!g || !g._fullData || !i || !i._fullData) return false;
    const names = g._fullData.map(t => t.name || '');
    const ok = cond ? names.some(n => n.startsWith(cond + ' (n='))
                    : !names.some(n => n.startsWith('not ('));
    const title = (i.querySelector('.gtitle') || {}).textContent || '';
    if (!ok || (cond ? !title.includes('in the subgroup') : title.includes('in the subgroup'))) return false;
    window.__t1 = performance.now();
    return true;
}"""

IDLE = "() => !document.querySelector('._dash-loading-callback')"

MARK_POINTER = """() => { window.__t0 = null; window.__t1 = null;
    document.addEventListener('pointerdown', () => { window.__t0 = performance.now(); },
                              {capture: true, once: true}); }"""

TRACES = """() => {
    const g = document.querySelector('#ici-graph .js-plotly-plot');
    return g._fullData.map(t => {
        const x = Array.from(t.x || []);
        let gaps = 0;
        for (const v of x) if (v === null || (typeof v === 'number' && Number.isNaN(v))) gaps += 1;
        return {type: t.type, name: t.name || '', n_points: x.length, n_gaps: gaps};
    });
}"""

RENDER = """async ([texts, repeats]) => {
    // texts: ICI figures (JSON text of Dash responses) of two features. "fresh": Plotly.react on a
    // new div of the ICI graph's size (a first draw: new WebGL context); "in place": one div that
    // switches between the two figures (what a feature switch does to the graph).
    const src = document.querySelector('#ici-graph .js-plotly-plot');
    const box = src.getBoundingClientRect();
    const frame = () => new Promise(r => requestAnimationFrame(() => r()));
    const newDiv = () => {
        const div = document.createElement('div');
        div.style.width = box.width + 'px';
        div.style.height = box.height + 'px';
        document.body.appendChild(div);
        return div;
    };
    const draw = async (div, text) => {
        const p0 = performance.now();
        const fig = JSON.parse(text);                       // as dcc.Graph gets it (not timed below)
        const t0 = performance.now();
        await Plotly.react(div, fig.data, fig.layout, {displaylogo: false});
        const t1 = performance.now();
        await frame();                                      // the WebGL frame is drawn
        const t2 = performance.now();
        await frame();                                      // ... and the next one begins
        const t3 = performance.now();
        return {parse: t0 - p0, react: t1 - t0, frame1: t2 - t0, frame2: t3 - t0};
    };
    const fresh = [], inPlace = [];
    let canvases = null;
    for (let i = 0; i < repeats; i++) {
        const div = newDiv();
        await frame();
        fresh.push(await draw(div, texts[i % texts.length]));
        if (canvases === null) canvases = div.querySelectorAll('canvas').length;
        Plotly.purge(div);
        div.remove();
    }
    const div = newDiv();
    await draw(div, texts[0]);
    for (let i = 0; i < repeats; i++) inPlace.push(await draw(div, texts[(i + 1) % texts.length]));
    Plotly.purge(div);
    div.remove();
    return {fresh, inPlace, width: box.width, height: box.height, canvases};
}"""

DRAWN = """async () => { await new Promise(r => requestAnimationFrame(r));
    await new Promise(r => requestAnimationFrame(r)); return performance.now(); }"""

WEBGL = """() => { const c = document.createElement('canvas');
    const gl = c.getContext('webgl2') || c.getContext('webgl');
    if (!gl) return null;
    const d = gl.getExtension('WEBGL_debug_renderer_info');
    return d ? gl.getParameter(d.UNMASKED_RENDERER_WEBGL) : gl.getParameter(gl.RENDERER); }"""


def _timed_switch(page, ready: str, arg: str, source: str, target: str) -> dict:
    """After a click armed with MARK_POINTER: ms from the pointer-down until the view shows
    the new state (``ready``), until two more frames have begun (drawn), until no callback
    is pending (idle)."""
    page.wait_for_function(ready, arg=arg, polling="raf")
    drawn = page.evaluate(DRAWN)
    t0, t1 = page.evaluate("() => [window.__t0, window.__t1]")
    if t0 is None:
        raise RuntimeError(f"the click for {target} was not seen (pointerdown)")
    page.wait_for_function(IDLE, polling="raf")
    idle = page.evaluate("() => performance.now()")
    return {"from": source, "to": target, "shown_ms": t1 - t0, "drawn_ms": drawn - t0, "idle_ms": idle - t0}


def browser_bench(url: str, ws: Workspace, cfg: dict) -> dict:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    captured = []  # (figure json text) of the ICI graph, as Dash delivered it

    def on_response(response):
        if "_dash-update-component" not in response.url:
            return
        try:
            body = response.json()
        except (ValueError, PlaywrightError):  # not JSON, or the body is gone
            return
        fig = ((body or {}).get("response") or {}).get(ids.ICI_GRAPH, {}).get("figure")
        if fig is not None:
            title = str(((fig.get("layout") or {}).get("title") or {}).get("text", ""))
            captured.append({"text": json.dumps(fig), "title": title, "response_bytes": len(response.body())})

    out: dict = {}
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1800})
            page = context.new_page()
            page.set_default_timeout(120_000)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("response", on_response)

            start = time.perf_counter()
            page.goto(f"{url}/?ws={ws.id}&feature=X1")
            page.click("#section-tab-feature")  # the section of the curve views (drawn when open)
            page.wait_for_function(ICI_READY, arg="X1", polling="raf")
            page.wait_for_function(IDLE)
            out["first_load_ms"] = (time.perf_counter() - start) * 1e3  # includes loading plotly.js
            out["webgl_renderer_page"] = page.evaluate(WEBGL)

            traces = page.evaluate(TRACES)
            curves = [t for t in traces if t["type"] == "scatter" and t["name"].startswith("ICI curves")]
            out["ici_traces"] = traces
            out["ici_curve_traces"] = len(curves)
            out["ici_curves_in_trace"] = curves[0]["n_gaps"] if len(curves) == 1 else None
            out["ici_traces_ok"] = (
                len(curves) == 1
                and curves[0]["n_gaps"] == MAX_CURVES
                and curves[0]["name"] == f"ICI curves ({MAX_CURVES})"
            )

            # end-to-end: the feature dropdown, as a user picks a feature
            out["switch_feature"] = []
            current = "X1"
            for _ in range(cfg["switches"]):
                target = FEATURE_CYCLE[(FEATURE_CYCLE.index(current) + 1) % len(FEATURE_CYCLE)]
                page.wait_for_function(IDLE)
                page.click(f"#{ids.FEATURE_SELECT}")
                option = page.get_by_role("option", name=target, exact=True)
                option.wait_for()
                page.evaluate(MARK_POINTER)
                option.click()
                out["switch_feature"].append(_timed_switch(page, ICI_READY, target, current, target))
                current = target

            # end-to-end: the subgroup box + Apply (Clear for all rows)
            out["switch_subgroup"] = []
            current = ""
            for _ in range(cfg["switches"]):
                target = SUBGROUP_CYCLE[(SUBGROUP_CYCLE.index(current) + 1) % len(SUBGROUP_CYCLE)]
                page.wait_for_function(IDLE)
                if target:
                    page.fill(f"#{ids.SUBGROUP_TEXT}", target)
                page.evaluate(MARK_POINTER)
                page.click(f"#{ids.SUBGROUP_APPLY}" if target else f"#{ids.SUBGROUP_CLEAR}")
                out["switch_subgroup"].append(
                    _timed_switch(page, PI_SUBGROUP_READY, target, current or "(all rows)", target or "(all rows)")
                )
                current = target

            # the ICI view alone: the figures of X1 and X2 (all rows) as Dash delivered them
            figs = [
                next(
                    (c for c in reversed(captured) if f"curves of {f}:" in c["title"] and "subgroup" not in c["title"]),
                    None,
                )
                for f in ("X1", "X2")
            ]
            if None in figs:
                raise RuntimeError("the ICI figures of X1 and X2 were not seen in the Dash responses")
            out["ici_figure_bytes"] = len(figs[0]["text"].encode())
            out["feature_response_bytes"] = figs[0]["response_bytes"]
            render = page.evaluate(RENDER, [[f["text"] for f in figs], cfg["renders"]])
            out["render_fresh"], out["render_in_place"] = render["fresh"], render["inPlace"]
            out["render_box"] = [render["width"], render["height"]]
            out["render_canvases"] = render["canvases"]
            context.close()
        finally:
            browser.close()
    out["browser_errors"] = errors
    return out


# --- report -----------------------------------------------------------------------------------
def print_server(rows: list[dict], shares: dict, cold: dict) -> None:
    print(f"\nserver time of one switch, results cached ({N_ROWS} ICI curves), in-process, ms (stage columns: medians)")
    head = "".join(f"{s[:7]:>8s}" for s in STAGES)
    print(f"  {'action':38s} {'median':>7s} {'p95':>7s} {head} {'KiB':>6s}  {'target':10s} result")
    for r in rows:
        stages = "".join(f"{r['stage_median_ms'][s]:8.1f}" for s in STAGES)
        p95 = "" if r["p95_under_target"] else " (p95 over)"
        print(
            f"  {r['action']:38s} {r['median_ms']:7.1f} {r['p95_ms']:7.1f} {stages} "
            f"{r['payload_bytes'] / 1024:6.0f}  < {SERVER_TARGET_MS:.0f} ms   {r['result']}{p95}"
        )
    print(f"  {'share of time':38s} {'':7s} {'':7s} " + "".join(f"{100 * shares[s]:7.0f}%" for s in STAGES))
    worst = max(rows, key=lambda r: r["median_ms"])
    per_feature = cold["profiles"] / cold["n_features"]
    print(
        f"\ncold model work (jobs.run, filled once): ICE/ICI profiles of {cold['n_features']} features "
        f"{cold['profiles']:.2f} s ({per_feature:.2f} s per feature), permutation PFI of all rows "
        f"{cold['pfi_all']:.2f} s" + "".join(f", {k} {v:.2f} s" for k, v in cold.items() if k.startswith("pfi["))
    )
    print(
        f"  cached switch / cold profile pass: slowest median switch {worst['median_ms']:.1f} ms = "
        f"{worst['median_ms'] / 1e3 / cold['profiles']:.3f}x the profiles pass "
        f"({worst['median_ms'] / 1e3 / per_feature:.3f}x one feature's pass)"
    )


def print_breakdown(helpers: list, costs: dict) -> None:
    print("\nwhere the server time goes (untimed pass with the helpers wrapped; mean over all switches)")
    print(f"  {'helper':40s} {'ms/switch':>9s} {'calls':>6s}")
    for label, ms, calls in helpers[:14]:
        print(f"  {label:40s} {ms:9.1f} {calls:6.1f}")
    print("  plotly costs measured alone (median ms):")
    for label, ms in costs.items():
        print(f"    {label:58s} {ms:8.1f}")


def summarise_browser(b: dict) -> list[dict]:
    """Table rows (measure, n, median, p95, target, result) of the browser measures."""

    def row(label, values, target=None):
        med = statistics.median(values)
        result = "-" if target is None else ("PASS" if med < target else "FAIL")
        return {
            "measure": label,
            "n": len(values),
            "median_ms": med,
            "p95_ms": _pct(values, 95),
            "target_ms": target,
            "result": result,
        }

    fresh, in_place = b["render_fresh"], b["render_in_place"]
    rows = [
        row("ICI render, fresh div: Plotly.react + 1 frame", [r["frame1"] for r in fresh], RENDER_TARGET_MS),
        row("  of which Plotly.react (promise resolved)", [r["react"] for r in fresh]),
        row("  fresh div, + 2 frames", [r["frame2"] for r in fresh]),
        row("  JSON.parse of the figure (not included)", [r["parse"] for r in fresh]),
        row("ICI render in place (X1 <-> X2): react + 1 frame", [r["frame1"] for r in in_place]),
        row("  in place, of which Plotly.react", [r["react"] for r in in_place]),
    ]
    for key, what in (("switch_feature", "feature dropdown"), ("switch_subgroup", "subgroup Apply/Clear")):
        rows.append(row(f"switch via {what}: click -> new title shown", [x["shown_ms"] for x in b[key]]))
        rows.append(row("  click -> 2 frames later (drawn)", [x["drawn_ms"] for x in b[key]]))
        rows.append(row("  click -> no callback pending (all views)", [x["idle_ms"] for x in b[key]]))
    return rows


def print_browser(b: dict) -> None:
    if "skipped" in b:
        print(f"\nbrowser: skipped ({b['skipped']})")
        return
    print(
        f"\nbrowser: headless Chromium {b.get('chromium', '?')}, gunicorn -w 2 on the same cache; "
        f"WebGL: {b.get('webgl_renderer_page') or 'none'}"
    )
    print(f"  first page load until the ICI view shows (plotly.js loading included): {b['first_load_ms']:.0f} ms")
    print(
        f"  ICI traces: {len(b['ici_traces'])}; SVG 'ICI curves' traces: {b['ici_curve_traces']}, "
        f"curves in it: {b['ici_curves_in_trace']} -> {'OK' if b['ici_traces_ok'] else 'UNEXPECTED'}"
    )
    print(
        f"  ICI figure as delivered: {b['ici_figure_bytes'] / 1024:.0f} KiB (feature-views response "
        f"{b['feature_response_bytes'] / 1024:.0f} KiB); graph box {b['render_box'][0]:.0f} x "
        f"{b['render_box'][1]:.0f} px, {b['render_canvases']} canvases"
    )
    print(f"  {'measure (ms)':52s} {'n':>3s} {'median':>8s} {'p95':>8s}  {'target':10s} result")
    for r in b["table"]:
        target = "-" if r["target_ms"] is None else f"< {r['target_ms']:.0f} ms"
        print(f"  {r['measure']:52s} {r['n']:3d} {r['median_ms']:8.0f} {r['p95_ms']:8.0f}  {target:10s} {r['result']}")
    for key in ("switch_feature", "switch_subgroup"):
        print(f"  {key}: " + ", ".join(f"{x['from']} -> {x['to']} {x['drawn_ms']:.0f}" for x in b[key]))
    if b["browser_errors"]:
        print(f"  browser console errors: {b['browser_errors'][:5]}")


def final_table(rows: list[dict], cold: dict, browser: dict) -> list[dict]:
    """The issue's targets, one row each, plus the context numbers (result "-")."""
    out = []
    for kind in ("feature", "subgroup"):
        mine = [r for r in rows if r["action"].startswith(kind)]
        worst = max(mine, key=lambda r: r["median_ms"])
        out.append(
            {
                "what": f"server time, {kind} switch, cached (slowest: {worst['action'][len(kind) + 1 :]})",
                "median_ms": worst["median_ms"],
                "p95_ms": max(r["p95_ms"] for r in mine),
                "target": f"< {SERVER_TARGET_MS:.0f} ms",
                "result": "PASS" if all(r["result"] == "PASS" for r in mine) else "FAIL",
            }
        )
    out.append(
        {
            "what": f"cold ICE/ICI pass, {cold['n_features']} features (run_request)",
            "median_ms": 1e3 * cold["profiles"],
            "p95_ms": None,
            "target": "-",
            "result": "-",
        }
    )
    if "table" in browser:
        render = browser["table"][0]
        out.append(
            {
                "what": f"browser: ICI view, {MAX_CURVES} curves, render (fresh div + 1 frame)",
                "median_ms": render["median_ms"],
                "p95_ms": render["p95_ms"],
                "target": f"< {RENDER_TARGET_MS:.0f} ms",
                "result": render["result"],
            }
        )
        out.append(
            {
                "what": f"browser: the {MAX_CURVES} curves are ONE SVG scatter trace",
                "median_ms": None,
                "p95_ms": None,
                "target": "1 trace",
                "result": "PASS" if browser["ici_traces_ok"] else "FAIL",
            }
        )
        for key, what in (("switch_feature", "feature dropdown"), ("switch_subgroup", "subgroup Apply")):
            drawn = [x["drawn_ms"] for x in browser[key]]
            out.append(
                {
                    "what": f"browser: end-to-end switch via {what} (click -> drawn)",
                    "median_ms": statistics.median(drawn),
                    "p95_ms": _pct(drawn, 95),
                    "target": f"< {RENDER_TARGET_MS:.0f} ms" if key == "switch_feature" else "-",
                    "result": (
                        ("PASS" if statistics.median(drawn) < RENDER_TARGET_MS else "FAIL")
                        if key == "switch_feature"
                        else "-"
                    ),
                }
            )
            idle = [x["idle_ms"] for x in browser[key]]
            out.append(
                {
                    "what": "  ... click -> no callback pending (every view of the section)",
                    "median_ms": statistics.median(idle),
                    "p95_ms": _pct(idle, 95),
                    "target": "-",
                    "result": "-",
                }
            )
    return out


def print_final(final: list[dict]) -> None:
    print("\nFINAL")
    print(f"  {'measure':70s} {'median ms':>10s} {'p95 ms':>8s}  {'target':9s} result")
    for r in final:
        med = "" if r["median_ms"] is None else f"{r['median_ms']:.0f}"
        p95 = "" if r["p95_ms"] is None else f"{r['p95_ms']:.0f}"
        print(f"  {r['what']:70s} {med:>10s} {p95:>8s}  {r['target']:9s} {r['result']}")


def _chromium_version() -> str:
    import re

    try:
        text = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return "?"
    found = re.search(r"\d+(\.\d+)+", text)
    return found.group(0) if found else "?"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Dashboard speed: cached switch server time, browser render time.")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--repeats", type=int, default=None, help="timed switches per action (default 40, quick 15)")
    parser.add_argument("--no-browser", action="store_true", help="server time only")
    args = parser.parse_args(argv)
    if args.repeats is not None and args.repeats < 1:
        parser.error("--repeats must be at least 1")
    cfg = dict(QUICK if args.quick else FULL)
    if args.repeats:
        cfg["repeats"] = args.repeats

    load_before = os.getloadavg()
    print(
        f"python {platform.python_version()}, cores {os.cpu_count()}; dash {dash.__version__}, "
        f"plotly {plotly.__version__}, scikit-learn {sklearn.__version__}; load average "
        f"{load_before[0]:.2f} (1 min)"
    )
    print(
        f"workload: X3 simulation, {N_ROWS} rows, random forest (60 trees), max_curves={MAX_CURVES}; "
        f"{cfg['repeats']} timed switches per action, {cfg['renders']} renders, {cfg['switches']} browser switches"
    )

    tmp = Path(tempfile.mkdtemp(prefix="wip-bench-"))
    report: dict = {
        "quick": args.quick,
        "config": cfg,
        "n_rows": N_ROWS,
        "max_curves": MAX_CURVES,
        "cores": os.cpu_count(),
        "versions": {"python": platform.python_version(), "dash": dash.__version__, "plotly": plotly.__version__},
    }
    try:
        app = create_app(Config(cache_dir=str(tmp), max_curves=MAX_CURVES, warm=False, secret_key="bench"))
        ctx = app._wip_context
        start = time.perf_counter()
        ws = build_workspace(ctx)
        print(f"built workspace {ws.id} in {time.perf_counter() - start:.1f} s (training + skops)")
        cold = warm_cache(ctx, ws)
        runs = time_switches(ctx, ws, cfg["repeats"])
        rows, shares = summarise_server(runs), stage_shares(runs)
        print_server(rows, shares, cold)
        helpers = helper_breakdown(ctx, ws, passes=2 if args.quick else 4)
        costs = plotly_costs()
        print_breakdown(helpers, costs)
        report.update(
            server=rows,
            stage_share=shares,
            cold_seconds=cold,
            cached_over_cold=max(r["median_ms"] for r in rows) / 1e3 / cold["profiles"],
            helpers_ms_per_switch=[{"helper": h, "ms_per_switch": ms, "calls_per_switch": c} for h, ms, c in helpers],
            plotly_costs_ms=costs,
        )

        if args.no_browser:
            browser = {"skipped": "--no-browser"}
        elif not Path(CHROMIUM).exists():
            browser = {"skipped": f"{CHROMIUM} is missing (apt-get install chromium)"}
        else:
            proc, log, url = start_gunicorn(tmp, tmp / "gunicorn.log")
            try:
                browser = browser_bench(url, ws, cfg)
            finally:
                stop_gunicorn(proc, log)
            browser["chromium"] = _chromium_version()
            browser["table"] = summarise_browser(browser)
        print_browser(browser)
        report["browser"] = browser
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    load_after = os.getloadavg()
    report["load_average"] = {"before": load_before, "after": load_after}
    final = final_table(rows, cold, browser)
    print_final(final)
    report["final"] = final
    verdicts = [r["result"] for r in final]
    passed, failed = verdicts.count("PASS"), verdicts.count("FAIL")
    report["summary"] = {"passed": passed, "failed": failed}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2, default=float))
    noisy = " (busy machine: numbers may be noisy)" if max(load_before[0], load_after[0]) > 0.8 * os.cpu_count() else ""
    print(
        f"\nload average {load_before[0]:.2f} before, {load_after[0]:.2f} after{noisy}; wrote {OUT.relative_to(ROOT)}"
    )
    print(f"SUMMARY: {passed} passed, {failed} failed" + (" [quick]" if args.quick else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
