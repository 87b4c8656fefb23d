"""Issue 40, item 3: recovery from a damaged cache without a reload.

A demo's states are computed, then the cache is damaged as a full disk, a crash or an
operator's slip leaves it: result files truncated, garbled or deleted, inline rows of
diskcache's SQLite table overwritten, the workspace record truncated. The same states are
then asked for once, along the page's own path (resolve -> the one job it asks for -> the
job's end -> every view rendered), in a fresh interpreter (a new worker: nothing read
before the damage is in its memory). Every damaged entry must be found when read and
computed again by that one job, and the first view must show the numbers of the
undisturbed run.

Each run is a fresh interpreter (``PAGE``), never a fork of pytest (a process that started
an OpenMP pool must not fork model jobs)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

STATES = [
    {"ws": "demo-x3"},
    {"ws": "demo-x3", "feature": "X2", "subgroup": "X3 == 0", "obs": "12", "sfimp": True},
]

#: one page visit per state, as a worker serves it; prints what each view drew as JSON
PAGE = r"""
import base64, json, sys
import numpy as np
import plotly.graph_objects as go
from dashboard import views
from dashboard.callbacks import compute as cc
from dashboard.config import Config
from dashboard.server import create_app
from dashboard.state import default_state, normalize

ctx = create_app(Config(cache_dir=sys.argv[1], max_curves=150))._wip_context
CLIENT = "10.0.0.1"


def plain(value):
    "JSON of a view's outputs, Plotly's packed arrays unpacked to lists of numbers."
    if isinstance(value, go.Figure):
        value = value.to_plotly_json()
    if hasattr(value, "to_plotly_json"):
        value = value.to_plotly_json()
    if isinstance(value, dict):
        if set(value) >= {"bdata", "dtype"}:
            arr = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
            return arr.astype(float).tolist()
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


out = []
for changes in json.loads(sys.argv[2]):
    state = normalize(ctx, {**default_state(), **changes})[0]
    first = cc.resolve_state(ctx, state, None, client=CLIENT)  # the page's resolve
    jobs, results = 0, first.results
    if isinstance(first.request, dict):  # the page waits for this job, and only this one
        jobs += 1
        done = cc.run_request(ctx, first.request, None, client=CLIENT)
        results = cc.finish_job(ctx, state, done)["results"]
    inp = views.load_inputs(ctx, results)
    drawn = {v.name: plain(views.render(ctx, v, results, inp)) for v in views.REGISTRY}
    out.append({"jobs": jobs, "error": results.get("error"), "pending": bool(results.get("pending")),
                "drawn": drawn})
print(json.dumps(out))
"""


def _visit(cache: Path) -> list[dict]:
    done = subprocess.run(
        [sys.executable, "-c", PAGE, str(cache), json.dumps(STATES)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        # one CPU for joblib: the demo's forest (n_jobs=-1) then sums its trees in one order, so a
        # computation gives the same bits every time (else shares and orders on ties may flip)
        env={**os.environ, "PYTHONPATH": str(ROOT), "LOKY_MAX_CPU_COUNT": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _differences(a, b, where: str = "") -> list[str]:
    """Where two drawn outputs differ: numbers beyond 1e-9 (relative), any text, any shape."""
    if isinstance(a, bool) or isinstance(b, bool) or not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
        if type(a) is not type(b):
            return [f"{where}: {type(a).__name__} != {type(b).__name__}"]
    if isinstance(a, dict):
        if set(a) != set(b):
            return [f"{where}: keys {sorted(set(a) ^ set(b))}"]
        return [d for k in a for d in _differences(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _differences(x, y, f"{where}[{i}]")]
    if isinstance(a, (int, float)) and not isinstance(a, bool):
        same = (np.isnan(a) and np.isnan(b)) or np.isclose(a, b, rtol=1e-9, atol=1e-12)
        return [] if same else [f"{where}: {a!r} != {b!r}"]
    return [] if a == b else [f"{where}: {str(a)[:80]!r} != {str(b)[:80]!r}"]


def _damage(cache: Path, files: int, rows: int) -> dict:
    """Damage up to ``files`` result files (truncated, garbled, deleted in turn) and up to
    ``rows`` inline rows of the result table (their value blobs cut or overwritten); returns
    how many of each."""
    results = cache / "results"
    found = sorted(results.rglob("*.val"))[:files]
    for k, path in enumerate(found):
        blob = path.read_bytes()
        if k % 3 == 0:
            path.write_bytes(blob[: len(blob) // 2])  # truncated
        elif k % 3 == 1:
            middle = len(blob) // 2
            path.write_bytes(blob[:middle] + bytes(b ^ 0xFF for b in blob[middle : middle + 64]) + blob[middle + 64 :])
        else:
            path.unlink()  # lost
    with sqlite3.connect(results / "cache.db") as db:
        inline = db.execute("SELECT rowid, value FROM Cache WHERE typeof(value) = 'blob' ORDER BY rowid").fetchall()
        for k, (rowid, value) in enumerate(inline[:rows]):
            garbled = value[:-8] + b"\x00" * 8 if k % 2 else value[: len(value) // 3]
            db.execute("UPDATE Cache SET value = ? WHERE rowid = ?", (garbled, rowid))
    return {"files": len(found), "rows": min(rows, len(inline))}


def _same(before: list[dict], after: list[dict]) -> None:
    for state, b, a in zip(STATES, before, after):
        assert a["error"] is None and not a["pending"], (state, a["error"])
        differences = _differences(b["drawn"], a["drawn"])
        assert not differences, (state, differences[:10])


def test_the_first_view_after_damage_shows_the_undisturbed_numbers(tmp_path):
    cache = tmp_path / "cache"
    undisturbed = _visit(cache)
    assert all(v["error"] is None and not v["pending"] for v in undisturbed), [v["error"] for v in undisturbed]

    damaged = _damage(cache, files=6, rows=17)
    assert damaged["files"] >= 2 and damaged["rows"] >= 10, damaged
    first = _visit(cache)
    _same(undisturbed, first)  # no reload: the first view after the damage
    assert all(v["jobs"] <= 1 for v in first) and sum(v["jobs"] for v in first) >= 1, [v["jobs"] for v in first]

    # the workspace record truncated, then lost: restored from its copy, nothing computed again
    record = cache / "workspaces" / "demo-x3.json"
    good = record.read_text()
    record.write_text(good[:40])
    restored = _visit(cache)
    _same(undisturbed, restored)
    assert [v["jobs"] for v in restored] == [0, 0]
    assert record.read_text() == good
    record.unlink()
    assert [v["jobs"] for v in _visit(cache)] == [0, 0] and record.read_text() == good
