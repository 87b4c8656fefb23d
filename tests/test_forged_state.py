"""Forged state at scale (issue 29): every server callback of the page, through Dash's own
callback route, given hostile values in well-formed envelopes (non-finite and enormous
numbers, huge strings, deep nesting, unknown columns and levels, thousands of what-if edits,
forged URLs); and forged job requests run by the job body. No 5xx, nothing cached that the
cleaned states do not plan.

The values are drawn from a seeded generator, so a failure names its seed and repeats."""

from __future__ import annotations

import json
import random

import pytest

from dashboard import ids, views, warm
from dashboard.callbacks.compute import run_request
from dashboard.config import Config
from dashboard.server import create_app
from dashboard.state import MAX_EDITS, clean_state, normalize, state_fields, state_from_search
from dashboard.views import plan_state

HUGE = "x" * 300_000  # with the envelope, well under the 2 MiB body limit
EDITS = {f"col{k}": k for k in range(3 * MAX_EDITS)} | {"X1": 1e308, "X2": "level?", "X3": 1}
ATOMS = [
    None,
    True,
    False,
    0,
    -1,
    2**63,
    10**400,
    1e308,
    -1e308,
    float("nan"),
    float("inf"),
    float("-inf"),
    -0.0,
    "",
    HUGE,
    "demo-x3",
    "demo-diabetes",
    "X1",
    "X3",
    "X9",
    "random forest",
    "X3 == 0",
    "`X1` > 0.2 and X3 == 1",
    "X1 > 1e999",
    "X3 in (0, 1, 'nope')",
    "__import__('os').system('id')",
    "X1.__class__.__mro__",
    "@pd.io.common",
    "(" * 3000,
    "\x00\ud800",
    "../../../etc/passwd",
    "?ws=demo-x3&obs=3&edit=" + json.dumps(EDITS),
    "?ws=demo-x3&repeats=99999999999&ale_k=-5&obs=1e999&exclude=" + ",".join(map(str, range(20_000))),
    "?ws=../../x&feature=%00&subgroup=" + "(" * 500,
]
STATE_KEYS = [*state_fields(), "results", "keys", "sigs", "pending", "state", "request", "nonce", "error"]


def hostile(rng: random.Random, depth: int = 0):
    """A JSON value a forged request might carry."""
    roll = rng.random()
    if depth > 6 or roll < 0.45:
        atom = rng.choice(ATOMS)
        return atom if depth == 0 or atom is not HUGE else "x" * 3000  # one huge string per request at most
    if roll < 0.55:
        return EDITS
    if roll < 0.62:  # deep nesting, within the route's depth limit
        value: object = rng.choice(ATOMS)
        for _ in range(rng.randint(20, 60)):
            value = {"state": value} if rng.random() < 0.5 else [value]
        return value
    if roll < 0.8:
        if depth == 0 and rng.random() < 0.3:  # thousands of items (row labels, edits)
            return list(range(rng.choice([5000, 20_000])))
        return [hostile(rng, depth + 1) for _ in range(rng.choice([1, 3, 20] if depth == 0 else [1, 2]))]
    keys = rng.sample(STATE_KEYS, rng.randint(1, len(STATE_KEYS) if depth == 0 else 3))
    return {k: hostile(rng, depth + 1) for k in keys}


PLAUSIBLE = {
    "model": ["random forest", "linear model", None],
    "feature": ["X1", "X2", "X3"],
    "subgroup": ["", "X3 == 0", "X1 > 0.3", "X2 between -1, 1"],
    "obs": ["3", "17", 5, None],
    "edit": [{"X1": 0.25}, {"X3": 1}, {"X1": 1e308, "X3": "level?"}, EDITS],
    "exclude": [["1", "2"], list(range(300))],
    "repeats": [2, 10, 50],
    "ale_k": [5, 20],
}


def forged_state(rng: random.Random) -> dict:
    """A state-shaped dict on the demo: mostly values the page could send (so the views get
    past the state's cleaning and draw), some fields hostile."""
    state: dict = {"ws": "demo-x3" if rng.random() < 0.8 else hostile(rng, 1)}
    for key in STATE_KEYS[1 : len(state_fields())]:
        if rng.random() < 0.25:
            state[key] = hostile(rng, 1)
        elif key in PLAUSIBLE:
            state[key] = rng.choice(PLAUSIBLE[key])
    return state


def forged_record(rng: random.Random) -> dict:
    """What the page stores for a view: the results record (a state and its keys) and a
    signature; the keys and signature are the browser's, so hostile."""
    return {
        "results": {"state": forged_state(rng), "keys": hostile(rng, 1), "sigs": hostile(rng, 1)},
        "sig": hostile(rng, 1),
    }


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    cache = tmp_path_factory.mktemp("forged-cache")
    return create_app(Config(cache_dir=str(cache), max_curves=40, load_timeout=4.0, job_memory_mb=3072))


def _result_keys(ctx) -> set[str]:
    return set(ctx.store.results.iterkeys())


def _prop(spec: str) -> dict:
    spec = spec.split("@", 1)[0]
    cid, prop = spec.rsplit(".", 1)
    return {"id": json.loads(cid) if cid.startswith("{") else cid, "property": prop}


def _outputs(output: str):
    if output.startswith(".."):
        return [_prop(s) for s in output.strip(".").split("...")]
    return _prop(output)


def _server_callbacks(app) -> list[dict]:
    """The page's callbacks that run on the server and start no background job."""
    deps = app.server.test_client().get("/_dash-dependencies").get_json()
    return [d for d in deps if not d.get("clientside_function") and not app.callback_map[d["output"]].get("background")]


def _value(rng: random.Random, dep: dict):
    """A hostile input value; a pattern-matching (ALL) input gets a list of them."""
    return hostile(rng)


def test_every_server_callback_survives_hostile_values(app):
    """~30 envelopes per callback through /_dash-update-component: no 5xx, the server keeps
    serving, and nothing is computed or cached (these callbacks only read) but the quick
    tasks (the what-if) of a state the page's resolve callback is sent, which it computes as
    the job would (issue 28; ``dashboard.warm``)."""
    ctx = app._wip_context
    client = app.server.test_client()
    callbacks = _server_callbacks(app)
    assert len(callbacks) >= 25, len(callbacks)
    assert client.get("/").status_code == 200
    for state in ({"ws": "demo-x3"}, {"ws": "demo-x3", "obs": "3", "edit": {"X1": 0.25}, "subgroup": "X3 == 0"}):
        clean, _ = normalize(ctx, clean_state(state))  # results to draw for records that clean to these
        assert run_request(ctx, {"state": clean}).get("ok")
    before = _result_keys(ctx)
    statuses: dict[int, int] = {}
    failures = []
    for n, dep in enumerate(callbacks):
        rng = random.Random(n)
        for attempt in range(30):
            inputs, states = [], []
            for spec, into in ((dep["inputs"], inputs), (dep["state"], states)):
                for item in spec:
                    cid = item["id"]
                    if cid.startswith("{"):  # pattern-matching: a list of forged components
                        pattern = json.loads(cid)
                        forged = {k: (hostile(rng) if v == ["ALL"] else v) for k, v in pattern.items()}
                        into.append([{"id": forged, "property": item["property"], "value": hostile(rng)}])
                    elif cid.startswith("view-input-") and rng.random() < 0.8:
                        into.append({"id": cid, "property": item["property"], "value": forged_record(rng)})
                    elif cid == ids.STATE or item["property"] == "data" and rng.random() < 0.5:
                        into.append({"id": cid, "property": item["property"], "value": forged_state(rng)})
                    else:
                        into.append({"id": cid, "property": item["property"], "value": hostile(rng)})
            changed = [f"{dep['inputs'][0]['id']}.{dep['inputs'][0]['property']}"] if dep["inputs"] else []
            body = {
                "output": dep["output"],
                "outputs": _outputs(dep["output"]),
                "inputs": inputs,
                "state": states,
                "changedPropIds": changed,
            }
            response = client.post("/_dash-update-component", data=json.dumps(body), content_type="application/json")
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            if response.status_code >= 500:
                failures.append((dep["output"][:80], n, attempt, response.get_data(as_text=True)[:200]))
    assert not failures, failures[:5]
    assert sum(statuses.values()) == 30 * len(callbacks)
    assert client.get("/").status_code == 200
    quick = {spec.kind for spec in views.needed_specs() if spec.quick}
    assert quick == {"whatif"}
    added = _result_keys(ctx) - before
    assert before <= _result_keys(ctx)
    assert {key.split(":")[0] for key in added} <= quick, "a read-only callback cached results"
    warm.stop_all()


def test_forged_urls_clean_to_states_within_the_uis_bounds():
    """The URL is typed by anyone: every forged query string cleans to a bounded state."""
    rng = random.Random(7)
    for search in [a for a in ATOMS if isinstance(a, str) and a.startswith("?")] + [
        "?" + "&".join(f"{k}={rng.choice(['', '1', '-1', '1e999', 'nan', HUGE[:5000]])}" for k in STATE_KEYS)
        for _ in range(200)
    ]:
        state = state_from_search(search)
        assert state == clean_state(state)
        assert 2 <= state["repeats"] <= 200 and 2 <= state["ale_k"] <= 200
        assert len(state["edit"]) <= MAX_EDITS and len(state["exclude"]) <= 5000
        assert all(len(str(v)) <= 2000 for v in state.values() if isinstance(v, str))
        assert len(json.dumps(state)) < 1_000_000


def test_forged_job_requests_cache_only_what_their_cleaned_states_plan(app):
    """25 forged job requests through the job body: each either fails with a message or
    writes only keys its cleaned, normalized state plans."""
    ctx = app._wip_context
    rng = random.Random(11)
    planned: set[str] = set()
    before = _result_keys(ctx)
    outcomes = {"ok": 0, "error": 0}
    for _ in range(25):
        request = {"state": forged_state(rng), "request": hostile(rng), "nonce": hostile(rng), "tasks": hostile(rng)}
        if rng.random() < 0.3:
            request = hostile(rng)
        done = run_request(ctx, request)
        assert isinstance(done, dict) and ("ok" in done or "error" in done), done
        outcomes["ok" if done.get("ok") else "error"] += 1
        raw = request.get("state") if isinstance(request, dict) else None
        if isinstance(raw, dict) and raw.get("ws"):
            state, _ = normalize(ctx, clean_state(raw))
            for value in plan_state(ctx, ctx.store.workspace(state["ws"]), state)["keys"].values():
                planned.update(value.values() if isinstance(value, dict) else [value])
    written = _result_keys(ctx) - before
    assert written and written <= planned, sorted(written - planned)[:5]
    assert outcomes["ok"] >= 5, outcomes
