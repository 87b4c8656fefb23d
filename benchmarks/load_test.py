"""Load test: N concurrent sessions drive the dashboard over HTTP, the way the Dash renderer does.

No browser: each session is a small emulation of the Dash renderer (``dash-renderer``'s
``handleServerside``) over ``requests``, so 20-50 sessions fit on a 2-core machine. A session

1. loads the page: ``GET /`` (reads ``_dash-config``: the ``end_id`` token the renderer echoes
   as ``?endId=`` on every callback request), ``GET /_dash-layout`` (the initial value of every
   component property) and ``GET /_dash-dependencies`` (the callback map), then fires the
   initial callbacks (all callbacks without ``prevent_initial_call``);
2. then does ``--actions`` user actions, a seeded random mix of
   - feature switches: ``feature-select.value`` set to another feature (X1/X2/X3),
   - subgroup changes: ``subgroup-text.value`` typed (no callback listens to it) and
     ``subgroup-apply.n_clicks`` + 1 (``X3 == 0``, ``X3 == 1``, ``X1 > 0``), or
     ``subgroup-clear.n_clicks`` + 1, and
   - section switches: ``section-tabs.value`` set to another section key (the tabs Overview,
     Feature, Observation, Subgroups; the keys are read from the page),
   with a think time between actions (``--mix`` sets the shares of the three kinds).

Every event is propagated like the renderer does it: the callbacks with a changed property
as Input are requested; a requested callback waits while a pending or running callback can
still change one of its inputs (transitively, as ``getReadyCallbacks`` does); ready
server-side callbacks are POSTed (``/_dash-update-component`` with ``output``, ``outputs``,
``inputs`` and ``state`` filled from the session's property values when it is sent,
``changedPropIds``) over up to ``--lanes`` connections, as a browser does; each answer is
applied when it arrives and triggers the callbacks listening to what it changed (a callback
is never re-fired by its own outputs); the values returned (``{"multi": true, "response":
{id: {prop: value}}}``) become the session's property values.

Clientside callbacks run instantly in the session, in Python. The page's views are fed by
one clientside callback, the fan-out (``FAN_OUT_JS`` in ``dashboard/views/__init__.py``):
inputs ``results.data`` and ``section-tabs.value``, outputs the ``view-input-<name>`` store
of every view. Its JavaScript is read from the page (the inline script Dash serves under
the callback's ``clientside_function`` name), matched against the copy this script emulates
(``FAN_OUT_TEMPLATE``: a page whose JavaScript differs stops the run: update the emulation),
and its two arguments, the view names and their sections, are parsed from it (and checked
against ``dashboard.views.REGISTRY`` when importable). Per view, as the JavaScript does: no
signature in the record -> the record (an error goes to every view); the store already
holds that signature -> no update; a view of a section that is not open -> a "hidden"
marker once until it is drawn again (its callback answers a placeholder); else the record and
its signature (the view is drawn). The other clientside callbacks of the page are not in
the measured flow (clicks and hovers on curves, the what-if form, suggested-subgroup
buttons, uploads and loads: ``CLIENTSIDE_NOT_NEEDED`` says why for each); one that is
triggered all the same is reported as a check failure, never skipped silently.

For the demo a feature or subgroup switch is: controller -> ``resolve`` (+ ``notes``) ->
``subgroup_size`` and the fan-out -> the callbacks ``view:<name>`` of the open section's
views whose signature changed (and a ``view:<name> (hidden)`` placeholder for each view of
the other sections whose signature changed); a section switch is the fan-out -> the views
of the opened section not drawn for the current signatures yet (none when they are).

Background callbacks (``run_job``) follow Dash's protocol: the first answer carries the signed
``cacheKey``/``job`` handles, then the session polls every ``interval`` ms (inputs nulled, as
the renderer does) until the answer has a ``response``; its ``running`` outputs are applied
when it is sent and when it ends, and its progress as it comes, triggering the callbacks
that listen to them (``job-active.data``: the watchdog ``watch``), as the renderer does.

One action = the whole chain of requests an event causes. Recorded: per-request latency
(by callback; a view's placeholder requests apart from its drawings), per-action latency
(by kind: ``load``, ``feature``, ``subgroup``, ``section``), HTTP errors (status not
200/204, no answer), Dash errors (a callback answer without ``response``) and check
failures: the state or the results do not show what the user asked for, a results record
with an error, a view of the open section not drawn for the current signature (or drawn
empty: ``EXPECT_TRACES``), a view of another section showing anything but its placeholder
or its drawing for the current signature (never another state's numbers). Actions that
needed a background computation in the measured phase are counted.

The script starts its own ``gunicorn -c gunicorn.conf.py app:server -w 2`` on a free loopback
port with a fresh cache folder (``WIP_CACHE_DIR``; ``WIP_SECRET_KEY=load``) or targets
``--url`` (loopback addresses only). Before the measured phase one session warms the cache:
the demo's ICE/ICI passes and PFI of all rows and of every subgroup used (the measured phase
is cached interaction; ``--cold`` skips this, so the first sessions trigger the computations).

Bounded: at most ``--max-requests`` requests and ``--max-seconds`` seconds in the measured
phase (sessions stop at the bound; a cut action is not an error), ``--timeout`` per request,
``--warm-timeout`` for the warm-up. Loopback only: nothing is sent elsewhere (proxies from
the environment are ignored).

Run::

    python benchmarks/load_test.py --quick            # 5 sessions x 5 actions, < 60 s
    python benchmarks/load_test.py                    # 20 sessions x 30 actions
    python benchmarks/load_test.py --sessions 50
    python benchmarks/load_test.py --url http://127.0.0.1:8050   # a server you started

Prints sessions held concurrently, actions and requests served, errors, requests/s,
p50/p95/p99 latency per request and per action, and (with psutil) the CPU seconds of the
gunicorn processes, of this script and of everything else on the machine (other jobs:
a noisy machine is reported as such). Writes ``benchmarks/out/load_test.json`` (``--out``).
Exit status 1 when any request or check failed.
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import ipaddress
import json
import os
import platform
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from urllib.parse import urlsplit

import requests

try:
    import psutil
except ImportError:  # CPU and memory of the server are then not reported
    psutil = None

try:
    import orjson

    def loads(raw: bytes):
        return orjson.loads(raw)

    def dumps(obj) -> bytes:
        return orjson.dumps(obj)
except ImportError:

    def loads(raw: bytes):
        return json.loads(raw)

    def dumps(obj) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()


ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out" / "load_test.json"
LOOPBACK_NAMES = {"127.0.0.1", "localhost", "::1"}
SUBGROUPS = ("X3 == 0", "X3 == 1", "X1 > 0")
QUICK = {"sessions": 5, "actions": 5, "max_seconds": 25.0}  # with the warm-up, < 60 s on 2 idle cores
MAX_CALLS_PER_ACTION = 120  # a runaway chain (callbacks firing each other) is an error
ACTION_KINDS = ("feature", "subgroup", "section")
MIX = "0.4,0.3,0.3"  # default shares of feature switches, subgroup changes and section switches

# Readable names of the dashboard's callbacks, by their first output (generic fallback: "id.prop");
# the views' callbacks are named "view:<name>" after the store they listen to, the fan-out "fan_out".
CALLBACK_NAMES = {
    "state.data": "controller",
    "results.data": "resolve",
    "job-done.data": "run_job",
    "hover-info.children": "hovered",
    "subgroup-size.children": "subgroup_size",
    "ws-notes.children": "notes",
    "output-select.options": "target_options",
    "model-files-info.children": "model_feedback",
    "data-file-info.children": "data_feedback",
    "loaded-ws.data": "load",
    "download.data": "download",
}
# callbacks whose first output is an allow_duplicate one, by their first input
DUPLICATE_NAMES = {
    "job-done.data": "finish",
    "job-active.data": "watch",
    "cancel.n_clicks": "cancelled",
    "load-cancel.n_clicks": "load_cancelled",
}


# The fan-out clientside callback this script emulates (``FanOut.run``): the page's own script,
# read from dashboard/fan_out.py (the standard library alone: loaded by its path, without the
# dashboard's packages), whose two %s the page fills with the views' names and sections (JSON).
# The page's JavaScript must match it (whitespace aside), else the run stops: update FanOut.run.
def _fan_out_module():
    spec = importlib.util.spec_from_file_location("wip_fan_out", ROOT / "dashboard" / "fan_out.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_FAN_OUT = _fan_out_module()
FAN_OUT_TEMPLATE = _FAN_OUT.FAN_OUT_JS
# The page's other clientside callbacks, by their output: none is in the measured flow (page
# load, feature, subgroup and section switches), so none is emulated. One triggered anyway is
# reported as a check failure (see Client._launch).
CLIENTSIDE_NOT_NEEDED = {
    "clicked-row.data": "a click on an ICI/ICE curve (selecting an observation): not in the action mix",
    "hovered-row.data": "a hover on an ICI/ICE curve: not in the action mix",
    "whatif-edit.data": "the what-if form's fields (pattern-matching ids, prevent_initial_call): not in the mix",
    "suggested-pick.data": "a suggested-subgroup button (prevent_initial_call): subgroups are typed here",
    "my-workspaces.data": "after loading one's own data set (Load): not in the action mix",
    "load-closed.data": "after loading one's own data set (Load): not in the action mix",
    "model-files.data": "the upload buttons (a file chooser): not in the action mix",
    "data-file.data": "the upload buttons (a file chooser): not in the action mix",
}
# Clientside callbacks the mix does trigger whose outputs no callback reads: run as "no
# update" (what they draw is the browser's business), checked to feed nothing when the map is read.
CLIENTSIDE_INERT = {
    "page.className": "presentation mode: the page's class, the toolbar button's words and the title line",
}
# Figures that must have traces when their view is drawn for the demo: those that have them in
# every feature x subgroup state of the demo (checked in-process; SFIMP, what-if, contributions
# and the caveats' group figure depend on a button or an observation). Any other drawn view only
# has to be drawn for the current signature, without a wait or "hidden" message.
EXPECT_TRACES = {
    "performance": ("performance-fit-graph", "performance-feature-graph"),
    "pfi": ("pfi-graph",),
    "pfi_convergence": ("convergence-graph",),
    "global_ci": ("global-ci-graph",),
    "pi": ("pi-graph",),
    "ici": ("ici-graph",),
    "ice": ("ice-graph",),
    "ale": ("ale-graph",),
    "ciu": ("ciu-graph",),
    "influence": ("influence-graph",),
}
HIDDEN_TEXT = _FAN_OUT.HIDDEN  # a view of a section not open: its placeholder's text
WAITING_TEXT = "Waiting for results…"  # dashboard.views.base.waiting(None): a record the view could not read
PLACEHOLDERS: dict[str, dict] = {}  # view name -> {"id.prop": value} of placeholder(view, HIDDEN) (registry_check)
NO_UPDATE = object()  # dash_clientside.no_update
UNDEFINED = object()  # a property never set (JSON.stringify leaves it out)
INERT = object()  # a clientside callback whose outputs no callback reads (CLIENTSIDE_INERT)


# --- errors ---------------------------------------------------------------------------------
class Stop(Exception):
    """The request or time budget is spent: the session ends (not an error)."""


class RequestFailed(Exception):
    """An HTTP error, no answer, or a Dash answer without ``response``."""


class CheckFailed(Exception):
    """The answers arrived but do not show what the user asked for."""


def _chain(exc: BaseException):
    """An exception and its causes and contexts, and the exceptions in its args (urllib3 wraps)."""
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or any(e is s for s in seen):
            continue
        seen.append(e)
        todo += [e.__cause__, e.__context__] + [a for a in getattr(e, "args", ()) if isinstance(a, BaseException)]
        reason = getattr(e, "reason", None)
        if isinstance(reason, BaseException):
            todo.append(reason)
    return seen


# --- the callback map -----------------------------------------------------------------------
def _split_output(output: str) -> list[tuple[str, str]]:
    """``..a.b...c.d..`` (several outputs) or ``a.b`` -> [(id, property with any @hash)]."""
    parts = output[2:-2].split("...") if output.startswith("..") else [output]
    out = []
    for part in parts:
        cid, _, prop = part.rpartition(".")
        out.append((cid, prop))
    return out


def _norm_js(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def clientside_sources(html: str) -> dict[str, str]:
    """The inline clientside functions of a Dash page: function name (a hash) -> JavaScript."""
    found = {}
    for m in re.finditer(
        r'ns\["([^"]+)"\]\s*=\s*(.*?);\s*\}\)\(\);\s*</script>', html, re.DOTALL
    ):  # Dash: (function() { ... ns["<name>"] = <function>; })();
        found[m.group(1)] = m.group(2)
    return found


def _js_truthy(value) -> bool:
    if value is UNDEFINED or value is None or value is False:
        return False
    if isinstance(value, (int, float)):
        return value != 0 and value == value  # 0 and NaN are falsy
    if isinstance(value, str):
        return value != ""
    return True  # objects and arrays, empty or not


def _js_get(obj, key):
    """``obj[key]`` (undefined for a missing key or a value that is not an object)."""
    return obj.get(key, UNDEFINED) if isinstance(obj, dict) else UNDEFINED


def _js_strict_equal(a, b) -> bool:
    """``a === b``: primitives by value and type, objects by identity."""
    if a is UNDEFINED or b is UNDEFINED or a is None or b is None:
        return a is b
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    if isinstance(a, (str, int, float)) or isinstance(b, (str, int, float)):
        return False
    return a is b


class FanOut:
    """``FAN_OUT_JS`` (dashboard/fan_out.py), in Python: results record and open section
    -> each view's input store. Built from the JavaScript the page serves, which must be
    ``FAN_OUT_TEMPLATE`` with the views' names and sections filled in."""

    def __init__(self, names: list[str], sections: list[str], stores: list[str]):
        if not (len(names) == len(sections) == len(stores)):
            raise ValueError(f"fan-out: {len(names)} names, {len(sections)} sections, {len(stores)} outputs")
        self.names, self.sections, self.stores = names, sections, stores
        self.section_keys = list(dict.fromkeys(sections))
        self.view_of_store = dict(zip(stores, names))
        self.section_of = dict(zip(names, sections))

    @classmethod
    def parse(cls, source: str, stores: list[str]) -> FanOut | None:
        """From the page's JavaScript; None if it is not the template's (the logic changed)."""
        head, middle, tail = _norm_js(FAN_OUT_TEMPLATE).split("%s")
        m = re.fullmatch(re.escape(head) + "(.*?)" + re.escape(middle) + "(.*?)" + re.escape(tail), _norm_js(source))
        if not m:
            return None
        return cls(json.loads(m.group(1)), json.loads(m.group(2)), stores)

    def run(self, results, open_section, previous: list) -> list:
        """The JavaScript, line by line (``previous``: each store's current data, or UNDEFINED)."""
        sigs = _js_get(results, "sigs") if _js_truthy(results) else UNDEFINED
        sigs = sigs if _js_truthy(sigs) else None
        out: list = []
        for i, name in enumerate(self.names):
            sig = _js_get(sigs, name) if _js_truthy(sigs) else None
            sig = sig if _js_truthy(sig) else None
            prev = previous[i]
            if not _js_truthy(sig):
                out.append({"sig": None} if results is UNDEFINED else {"results": results, "sig": None})
            elif _js_truthy(prev) and _js_strict_equal(_js_get(prev, "sig"), sig):
                out.append(NO_UPDATE)
            elif not _js_strict_equal(self.sections[i], open_section):
                if _js_truthy(prev) and _js_truthy(_js_get(prev, "hidden")):
                    out.append(NO_UPDATE)
                else:
                    out.append({"results": None, "sig": None, "hidden": sig})
            else:
                out.append({"results": results, "sig": sig})
        return out


class Callback:
    def __init__(self, dep: dict):
        self.output = dep["output"]
        self.multi = self.output.startswith("..")
        self.outputs = _split_output(self.output)
        self.inputs = [(i["id"], i["property"]) for i in dep.get("inputs", [])]
        self.state = [(s["id"], s["property"]) for s in dep.get("state", [])]
        self.prevent_initial_call = bool(dep.get("prevent_initial_call"))
        self.clientside = dep.get("clientside_function") or None  # {"namespace", "function_name"}
        self.background = dep.get("background") or dep.get("long") or None
        self.running = dep.get("running") or None  # {"running": {"id.prop": value}, "runningOff": {...}}
        self.input_keys = {f"{c}.{p}" for c, p in self.inputs}
        self.output_keys = {f"{c}.{p.split('@')[0]}" for c, p in self.outputs}
        self.own_inputs = self.input_keys - self.output_keys  # the renderer ignores inputs it also outputs
        first_id, first_prop = self.outputs[0]
        key = f"{first_id}.{first_prop.split('@')[0]}"
        first_input = f"{self.inputs[0][0]}.{self.inputs[0][1]}" if self.inputs else ""
        if "@" in first_prop:
            self.name = DUPLICATE_NAMES.get(first_input, key + "@dup")
        else:
            self.name = CALLBACK_NAMES.get(key, key)
        if self.clientside:
            self.name = "clientside:" + key
        self.first_output = key
        self.emulation: FanOut | object | None = None  # the fan-out, INERT, or None (not emulated)
        self.view: str | None = None  # a view's callback: the view's name
        self.downstream: set[str] = set()  # every property this callback can change, transitively

    def __repr__(self):
        return f"<Callback {self.name}>"


class CallbackMap:
    def __init__(self, deps: list[dict], sources: dict[str, str]):
        self.callbacks = [Callback(d) for d in deps]
        self.by_input: dict[str, list[Callback]] = {}
        for cb in self.callbacks:
            for key in cb.input_keys:
                self.by_input.setdefault(key, []).append(cb)
        for cb in self.callbacks:
            seen, frontier = set(cb.output_keys), list(cb.output_keys)
            while frontier:
                key = frontier.pop()
                for nxt in self.by_input.get(key, ()):
                    if nxt is cb:
                        continue
                    for out in nxt.output_keys - seen:
                        seen.add(out)
                        frontier.append(out)
            cb.downstream = seen
        # the fan-out: the clientside callback from results.data and section-tabs.value to the views' stores
        self.fan_out: FanOut | None = None
        self.views: dict[str, Callback] = {}  # view name -> its callback
        self.problems: list[str] = []
        self.not_emulated: dict[str, str] = {}
        for cb in self.callbacks:
            if not cb.clientside:
                continue
            if cb.input_keys == {"results.data", "section-tabs.value"}:
                source = sources.get(cb.clientside.get("function_name", ""))
                stores = [f"{c}.{p}" for c, p in cb.outputs]
                fan = FanOut.parse(source, stores) if source is not None else None
                if fan is None:
                    self.problems.append(
                        "the page's fan-out (clientside: results.data, section-tabs.value -> view stores) is "
                        + ("not served inline" if source is None else "not FAN_OUT_TEMPLATE: update the emulation")
                    )
                    continue
                cb.emulation, cb.name, self.fan_out = fan, "fan_out", fan
            elif cb.first_output in CLIENTSIDE_INERT:
                read = sorted(k for k in cb.output_keys if self.by_input.get(k))
                if read:
                    self.problems.append(f"{cb.name} is counted inert but {read} feed other callbacks: emulate it")
                cb.emulation = INERT
            else:
                self.not_emulated[cb.name] = CLIENTSIDE_NOT_NEEDED.get(cb.first_output, "unknown to this script")
        if self.fan_out is None and not self.problems:
            self.problems.append("the page has no fan-out clientside callback (results.data -> view stores)")
        if self.fan_out is not None:
            for cb in self.callbacks:
                if cb.clientside:
                    continue
                views = [self.fan_out.view_of_store[k] for k in cb.input_keys if k in self.fan_out.view_of_store]
                if len(views) == 1:
                    cb.view, cb.name = views[0], f"view:{views[0]}"
                    self.views[views[0]] = cb
            unbound = set(self.fan_out.names) - set(self.views)
            if unbound:
                self.problems.append(f"views without a callback on their store: {sorted(unbound)}")

    def initial(self) -> list[Callback]:
        return [cb for cb in self.callbacks if not cb.prevent_initial_call]


_MAP_CACHE: dict[tuple, CallbackMap] = {}
_MAP_LOCK = threading.Lock()


def callback_map(raw: bytes, sources: dict[str, str]) -> CallbackMap:
    """Parsed once per distinct ``/_dash-dependencies`` body and clientside functions (every
    session still fetches them)."""
    key = (raw, tuple(sorted(sources.items())))
    with _MAP_LOCK:
        if key not in _MAP_CACHE:
            _MAP_CACHE[key] = CallbackMap(loads(raw), sources)
        return _MAP_CACHE[key]


def side_updates(mapping) -> dict:
    """Running, progress or side updates (``{"id.prop": value}`` or ``{id: {prop: value}}``) as
    ``{id: {prop: value}}``."""
    out: dict = {}
    for key, value in (mapping or {}).items() if isinstance(mapping, dict) else ():
        if isinstance(value, dict) and "." not in key:
            out.setdefault(key, {}).update(value)
        else:
            cid, _, prop = key.rpartition(".")
            out.setdefault(cid, {})[prop] = value
    return out


def layout_props(node, out: dict, types: dict) -> dict:
    """Every property of every component with an id in a ``/_dash-layout`` tree, as "id.prop"
    (and each such component's type in ``types``)."""
    if isinstance(node, list):
        for child in node:
            layout_props(child, out, types)
    elif isinstance(node, dict) and "props" in node and "type" in node:
        props = node.get("props") or {}
        cid = props.get("id")
        if isinstance(cid, str):
            types[cid] = node["type"]
        for prop, value in props.items():
            if isinstance(cid, str) and prop != "id":
                out[f"{cid}.{prop}"] = value
            if isinstance(value, (dict, list)):
                layout_props(value, out, types)
    return out


def mount_changes(props: dict, types: dict, url: str, search: str) -> set[str]:
    """What components set on themselves when the page mounts (dash-core-components):
    ``dcc.Location`` sets pathname, search, href and hash from the address bar; a memory
    ``dcc.Store`` whose ``data`` is explicitly null sets ``data`` to its (empty) stored value,
    undefined. Callbacks with these properties as Input fire (``prevent_initial_call`` or not)."""
    changed = set()
    for cid, kind in types.items():
        if kind == "Location":
            for prop, value in (("pathname", "/"), ("search", search), ("href", url), ("hash", "")):
                props[f"{cid}.{prop}"] = value
                changed.add(f"{cid}.{prop}")
        elif kind == "Store" and f"{cid}.data" in props and props[f"{cid}.data"] is None:
            del props[f"{cid}.data"]
            changed |= {f"{cid}.data", f"{cid}.modified_timestamp"}
    return changed


# --- measurements ---------------------------------------------------------------------------
def percentile(values, q: float):
    if not values:
        return None
    data = sorted(values)
    pos = (len(data) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def summary_ms(seconds: list[float], nbytes: list[int] | None = None) -> dict:
    if not seconds:
        return {"n": 0}
    out = {
        "n": len(seconds),
        "mean": 1000 * sum(seconds) / len(seconds),
        **{f"p{q}": 1000 * percentile(seconds, q) for q in (50, 95, 99)},
        "max": 1000 * max(seconds),
    }
    if nbytes:
        out["mean_response_kib"] = sum(nbytes) / len(nbytes) / 1024
    return out


class Stats:
    """Thread-safe record of one phase, and its request and time budget."""

    def __init__(self, max_requests: int, max_seconds: float):
        self.lock = threading.Lock()
        self.max_requests = max_requests
        self.deadline = time.monotonic() + max_seconds
        self.stop = threading.Event()
        self.issued = 0
        self.requests: list[tuple] = []  # (kind, seconds, status, bytes in, bytes out, ok)
        self.actions: list[dict] = []
        self.errors: list[str] = []
        self.n_errors = {"http": 0, "dash": 0, "check": 0}
        self.resets: list[str] = []  # connections reset under a request, retried
        self.active = 0
        self.max_active = 0
        self.events: list[tuple[float, int]] = []  # (monotonic time, active sessions after it)
        self.sessions = {"started": 0, "completed": 0, "stopped_by_budget": 0, "gave_up": 0}

    def restart_clock(self, max_seconds: float) -> None:
        self.deadline = time.monotonic() + max_seconds

    def acquire(self) -> None:
        """Count one request; raise Stop when a bound is reached."""
        if self.stop.is_set():
            raise Stop()
        if time.monotonic() > self.deadline:
            self.stop.set()
            raise Stop()
        with self.lock:
            if self.issued >= self.max_requests:
                self.stop.set()
                raise Stop()
            self.issued += 1

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def request(self, kind, seconds, status, nbytes_in, nbytes_out, ok) -> None:
        with self.lock:
            self.requests.append((kind, seconds, status, nbytes_in, nbytes_out, ok))

    def error(self, category: str, message: str) -> None:
        with self.lock:
            self.n_errors[category] += 1
            if len(self.errors) < 200:
                self.errors.append(f"[{category}] {message}")

    def reset(self, message: str) -> None:
        with self.lock:
            self.resets.append(message)

    def action(self, record: dict) -> None:
        with self.lock:
            self.actions.append(record)

    def session(self, delta: int) -> None:
        with self.lock:
            self.active += delta
            self.max_active = max(self.max_active, self.active)
            self.events.append((time.monotonic(), self.active))

    def held(self, n: int) -> dict:
        """Time with all n sessions active, and the time-averaged number of active sessions."""
        if not self.events:
            return {"all_active_seconds": 0.0, "mean_active": 0.0}
        full = weighted = 0.0
        for (t0, active), (t1, _) in zip(self.events, self.events[1:]):
            weighted += active * (t1 - t0)
            if active >= n:
                full += t1 - t0
        span = self.events[-1][0] - self.events[0][0]
        return {"all_active_seconds": full, "mean_active": weighted / span if span > 0 else 0.0}


# --- one emulated browser tab ---------------------------------------------------------------
class Client:
    def __init__(
        self,
        base: str,
        stats: Stats,
        *,
        lanes: int,
        timeout: float,
        job_timeout: float,
        assets: bool = False,
        retry: bool = True,
    ):
        self.base = base.rstrip("/")
        self.stats = stats
        self.lanes = max(1, lanes)
        self.timeout = timeout
        self.job_timeout = job_timeout
        self.assets = assets
        self.retry = retry
        self._tls = threading.local()
        self._sessions: list[requests.Session] = []
        self._sessions_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self.prefix = "/"
        self.end_id = None
        self.map: CallbackMap | None = None
        self.props: dict = {}
        self.drawn: dict[str, tuple] = {}  # view name -> what its callback last drew (_note_view)
        self.props_lock = threading.Lock()
        self._action: dict | None = None

    # transport
    def _session(self) -> requests.Session:
        s = getattr(self._tls, "session", None)
        if s is None:
            s = requests.Session()
            s.trust_env = False  # no proxies or netrc from the environment: loopback only
            s.headers.update({"Accept": "application/json", "Content-Type": "application/json"})
            self._tls.session = s
            with self._sessions_lock:
                self._sessions.append(s)
        return s

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        for s in self._sessions:
            s.close()

    def _http(self, kind: str, method: str, path: str, *, params=None, body: bytes | None = None):
        """One request, timed and recorded. Returns (status, content bytes).

        A request whose connection, reused from the pool, was reset or closed before any
        answer came is retried once on a new connection (unless ``--no-retry``), as browsers
        do (Chromium resends a request when a reused keep-alive connection fails before the
        response headers); each such reset is counted (``resets_retried``) with how long the
        connection had been idle."""
        self.stats.acquire()
        session = self._session()
        idle = time.monotonic() - getattr(self._tls, "last_end", time.monotonic())
        start = time.perf_counter()
        try:
            try:
                resp = session.request(method, self.base + path, params=params, data=body, timeout=self.timeout)
            except requests.ConnectionError as exc:
                reset = any(
                    isinstance(e, (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected))
                    for e in _chain(exc)
                )
                if not (reset and self.retry and hasattr(self._tls, "last_end")):
                    raise
                self.stats.reset(
                    f"{kind}: {type(exc).__name__} after {time.perf_counter() - start:.2f} s on a "
                    f"connection idle for {idle:.1f} s; retried"
                )
                self.stats.acquire()
                start = time.perf_counter()
                resp = session.request(method, self.base + path, params=params, data=body, timeout=self.timeout)
            content = resp.content
        except requests.RequestException as exc:
            seconds = time.perf_counter() - start
            self._tls.last_end = time.monotonic()
            self.stats.request(kind, seconds, None, 0, len(body or b""), False)
            self._count(kind)
            conn = f"a connection idle for {idle:.1f} s" if hasattr(self._tls, "last_end") else "a new connection"
            self.stats.error(
                "http", f"{kind}: no answer after {seconds:.1f} s on {conn}: {type(exc).__name__}: {exc}"[:400]
            )
            raise RequestFailed(kind) from exc
        seconds = time.perf_counter() - start
        self._tls.last_end = time.monotonic()
        ok = resp.status_code in (200, 204)
        self.stats.request(kind, seconds, resp.status_code, len(content), len(body or b""), ok)
        self._count(kind)
        if not ok:
            text = content[:300].decode("utf-8", "replace").replace("\n", " ")
            self.stats.error("http", f"{kind}: HTTP {resp.status_code}: {text}")
            raise RequestFailed(kind)
        return resp.status_code, content

    def _count(self, kind: str) -> None:
        if self._action is not None:
            with self.props_lock:
                self._action["requests"] += 1

    def _url(self, name: str) -> str:
        return self.prefix.rstrip("/") + "/" + name

    # the page
    def load(self, search: str = "") -> list[str]:
        _, html = self._http("GET /", "GET", "/" + search)
        text = html.decode("utf-8", "replace")
        m = re.search(r'<script id="_dash-config" type="application/json">(.*?)</script>', text, re.DOTALL)
        if not m:
            self.stats.error("dash", "GET /: no _dash-config in the page")
            raise RequestFailed("GET /")
        config = json.loads(m.group(1))
        self.prefix = config.get("requests_pathname_prefix") or "/"
        self.end_id = config.get("end_id")
        if self.assets:
            for url in re.findall(r'<script src="([^"]+)"', text) + re.findall(
                r'<link rel="stylesheet" href="([^"]+)"', text
            ):
                if url.startswith("/"):
                    self._http("asset", "GET", url)
        _, raw_layout = self._http("GET /_dash-layout", "GET", self._url("_dash-layout"))
        _, raw_deps = self._http("GET /_dash-dependencies", "GET", self._url("_dash-dependencies"))
        cmap = callback_map(raw_deps, clientside_sources(text))
        if cmap.problems:
            self.stats.error("check", "page: " + "; ".join(cmap.problems))
            raise CheckFailed("page")
        types: dict = {}
        props = layout_props(loads(raw_layout), {}, types)
        mounted = mount_changes(props, types, self.base + "/" + search, search)
        with self.props_lock:
            self.props = props
            self.drawn = {}
        self.map = cmap
        pending = {cb: cb.input_keys & mounted for cb in cmap.initial()}
        for key in mounted:
            for cb in cmap.by_input.get(key, ()):
                pending.setdefault(cb, set()).add(key)
        return self.run(pending)

    # events
    def set_prop(self, key: str, value) -> None:
        with self.props_lock:
            self.props[key] = value

    def get(self, key: str, default=None):
        with self.props_lock:
            return self.props.get(key, default)

    def event(self, *changed: str) -> list[str]:
        """The user changed these properties: fire their callbacks and everything that follows."""
        assert self.map is not None
        pending: dict[Callback, set] = {}
        for key in changed:
            for cb in self.map.by_input.get(key, ()):
                pending.setdefault(cb, set()).add(key)
        return self.run(pending)

    def click(self, button: str) -> list[str]:
        key = f"{button}.n_clicks"
        self.set_prop(key, (self.get(key) or 0) + 1)
        return self.event(key)

    def run(self, pending: dict) -> list[str]:
        """The renderer's loop: run the ready clientside callbacks at once, send the ready
        server-side ones (up to ``lanes`` at a time), apply each answer as it arrives and
        request the callbacks it triggers; until nothing is pending or running. A callback
        is ready when no other pending or running callback can change one of its inputs
        (transitively). Returns the callbacks fired, in the order they finished."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.lanes)
        fired: list[str] = []
        inflight: dict[Future, tuple[Callback, dict]] = {}
        failure: BaseException | None = None
        while pending or inflight:
            if failure is None:
                try:
                    self._launch_ready(pending, inflight, fired)
                except (RequestFailed, Stop, CheckFailed) as exc:
                    failure = exc
            if not inflight:
                if failure is not None or not pending:
                    break
                continue
            done, _ = wait(list(inflight), return_when=FIRST_COMPLETED)
            for fut in done:
                cb, payload = inflight.pop(fut)
                try:
                    steps = fut.result()
                except (RequestFailed, Stop, CheckFailed) as exc:
                    failure = failure or exc  # the others still finish (the browser waits for them too)
                    continue
                fired.append(cb.name)
                self._note_view(cb, payload)
                for updates in steps:  # side updates (progress, running off), then the answer
                    self._trigger(cb, self._apply(updates), pending)
        if failure is not None:
            raise failure
        return fired

    def _launch_ready(self, pending: dict, inflight: dict, fired: list[str]) -> None:
        while pending:
            active = list(pending) + [cb for cb, _ in inflight.values()]
            ready = [
                cb for cb in pending if not any(cb.own_inputs & other.downstream for other in active if other is not cb)
            ]
            if not ready:
                if inflight:
                    return  # an answer will unblock them
                ready = [next(iter(pending))]  # a cycle: the renderer takes the first as ready
            again = False  # the session's values changed here: what is ready is computed anew
            for cb in ready:
                changed = pending.pop(cb)
                if len(fired) + len(inflight) + 1 > MAX_CALLS_PER_ACTION:
                    self.stats.error("check", f"runaway chain: {fired + [c.name for c, _ in inflight.values()]}")
                    raise CheckFailed("runaway chain")
                if cb.clientside:  # instant, in the session; its outputs may trigger or unblock others
                    updates = self._clientside(cb, changed)
                    fired.append(cb.name)
                    self._trigger(cb, self._apply(updates), pending)
                    again = True
                    break
                payload = self._payload(cb, changed)  # the values when it is sent
                inflight[self._pool.submit(self.fire, cb, payload)] = (cb, payload)  # type: ignore[union-attr]
                if cb.running:  # the renderer applies the running values as it sends the request
                    self._trigger(cb, self._apply(side_updates(cb.running.get("running"))), pending)
                    again = True
                    break
            if not again:
                return

    def _trigger(self, cb: Callback, changed: list[str], pending: dict) -> None:
        assert self.map is not None
        for key in changed:
            for nxt in self.map.by_input.get(key, ()):
                if nxt is not cb:
                    pending.setdefault(nxt, set()).add(key)

    def _clientside(self, cb: Callback, changed: set) -> dict:
        """A clientside callback, in Python: only the fan-out is emulated (CLIENTSIDE_NOT_NEEDED)."""
        fan = cb.emulation
        if fan is INERT:
            return {}
        if fan is None:
            why = self.map.not_emulated.get(cb.name, "") if self.map else ""
            self.stats.error(
                "check", f"{cb.name} was triggered by {sorted(changed)} but is not emulated ({why}): extend the script"
            )
            raise CheckFailed(cb.name)
        assert isinstance(fan, FanOut)
        with self.props_lock:
            results = self.props.get("results.data", UNDEFINED)
            section = self.props.get("section-tabs.value", UNDEFINED)
            previous = [self.props.get(k, UNDEFINED) for k in fan.stores]
        updates: dict = {}
        for key, value in zip(fan.stores, fan.run(results, section, previous)):
            if value is not NO_UPDATE:
                cid, _, prop = key.rpartition(".")
                updates.setdefault(cid, {})[prop] = value
        return updates

    def _note_view(self, cb: Callback, payload: dict) -> None:
        """What a view's callback drew: ("sig", s) for signature s, ("hidden", s) a placeholder."""
        if cb.view is None:
            return
        given = payload["inputs"][0].get("value") if payload["inputs"] else None
        given = given if isinstance(given, dict) else {}
        mode = ("hidden", given["hidden"]) if given.get("hidden") else ("sig", given.get("sig"))
        with self.props_lock:
            self.drawn[cb.view] = mode
            if self._action is not None:
                self._action["hidden" if mode[0] == "hidden" else "drawn"] += 1

    def _apply(self, updates: dict) -> list[str]:
        changed = []
        with self.props_lock:
            for cid, props in (updates or {}).items():
                for prop, value in props.items():
                    key = f"{cid}.{prop}"
                    self.props[key] = value
                    changed.append(key)
        return changed

    def _payload(self, cb: Callback, changed: set) -> dict:
        with self.props_lock:

            def vals(pairs):
                out = []
                for cid, prop in pairs:
                    item = {"id": cid, "property": prop}
                    key = f"{cid}.{prop}"
                    if key in self.props:  # undefined values are left out, as JSON.stringify does
                        item["value"] = self.props[key]
                    out.append(item)
                return out

            outputs = [{"id": cid, "property": prop} for cid, prop in cb.outputs]
            payload = {
                "output": cb.output,
                "outputs": outputs if cb.multi else outputs[0],
                "inputs": vals(cb.inputs),
                "changedPropIds": sorted(changed),
                "parsedChangedPropsIds": sorted(changed),
            }
            if cb.state:
                payload["state"] = vals(cb.state)
            body = dumps(payload)  # serialised now: later changes to the session do not leak in
        payload["_body"] = body
        return payload

    @staticmethod
    def _kind(cb: Callback, payload: dict) -> str:
        if cb.view is not None and payload["inputs"]:
            given = payload["inputs"][0].get("value")
            if isinstance(given, dict) and given.get("hidden"):
                return f"{cb.name} (hidden)"
        return cb.name

    def fire(self, cb: Callback, payload: dict) -> list[dict]:
        """POST one callback (and poll it if it runs in the background). Returns the updates to
        apply in order: side updates (progress, the running values off), then the answer."""
        body = payload["_body"]
        kind = self._kind(cb, payload)
        params = {"endId": self.end_id} if self.end_id else None
        path = self._url("_dash-update-component")
        off = side_updates((cb.running or {}).get("runningOff"))
        status, content = self._http(kind, "POST", path, params=params, body=body)
        if status == 204:  # PreventUpdate
            return [off] if off else []
        data = self._json(kind, content)
        if "response" in data:
            return ([off] if off else []) + [self._updates(cb, data)]
        if not cb.background:
            self.stats.error("dash", f"{kind}: answer without 'response': {content[:200]!r}")
            raise RequestFailed(kind)
        cache_key, job = data.get("cacheKey"), data.get("job")
        if not cache_key or not job:
            self.stats.error("dash", f"{kind}: background answer without cacheKey/job: {content[:200]!r}")
            raise RequestFailed(kind)
        if self._action is not None:
            with self.props_lock:
                self._action["jobs"] += 1
        steps: list[dict] = []
        default = side_updates(data.get("progressDefault"))
        # the renderer polls with the handles and the inputs' values nulled
        polled = {k: v for k, v in payload.items() if k != "_body"}
        polled["inputs"] = [{**i, "value": None} for i in payload["inputs"]]
        if "state" in payload:
            polled["state"] = [{**s, "value": None} for s in payload["state"]]
        body = dumps(polled)
        params = {**(params or {}), "cacheKey": cache_key, "job": job}
        interval = float((cb.background or {}).get("interval", 500)) / 1000.0
        deadline = time.monotonic() + self.job_timeout
        while True:
            if self.stats.stop.wait(interval):
                raise Stop()
            if time.monotonic() > deadline:
                self.stats.error("check", f"{kind}: the background job did not finish in {self.job_timeout:.0f} s")
                raise CheckFailed(kind)
            status, content = self._http(kind + " (poll)", "POST", path, params=params, body=body)
            ending = [u for u in (off, default) if u]
            if status == 204:
                return steps + ending
            data = self._json(kind, content)
            for extra in ("sideUpdate", "progress"):  # applied in order, as the renderer does
                side = side_updates(data.get(extra))
                if side:
                    steps.append(side)
            default = default or side_updates(data.get("progressDefault"))
            if "response" in data:
                return steps + [u for u in (off, default) if u] + [self._updates(cb, data)]

    def _json(self, kind: str, content: bytes) -> dict:
        try:
            data = loads(content)
        except ValueError:
            self.stats.error("dash", f"{kind}: not JSON: {content[:200]!r}")
            raise RequestFailed(kind) from None
        if not isinstance(data, dict):
            self.stats.error("dash", f"{kind}: not a JSON object: {content[:200]!r}")
            raise RequestFailed(kind)
        return data

    @staticmethod
    def _updates(cb: Callback, data: dict) -> dict:
        response = data["response"]
        if data.get("multi"):
            return response
        cid = cb.output[: cb.output.rfind(".")]  # older single-output shape {"props": {...}}
        return {cid: response.get("props", response)}

    # the user's actions
    def start_action(self, kind: str, detail: str) -> dict:
        self._action = {"kind": kind, "detail": detail, "requests": 0, "jobs": 0, "drawn": 0, "hidden": 0}
        return self._action

    def end_action(self) -> None:
        self._action = None


# --- checks ---------------------------------------------------------------------------------
def _has_traces(fig) -> bool:
    return isinstance(fig, dict) and bool(fig.get("data"))


def _comparable(key: str, value):
    """A figure without ``layout.margin``: dashboard/figures/theme.py ``_style`` merges a figure's own
    margin into the module's MARGIN dict (it shares it), so a placeholder's margins depend on
    which figure the worker drew before; that is no state's numbers."""
    if key.endswith(".figure") and isinstance(value, dict) and isinstance(value.get("layout"), dict):
        return {**value, "layout": {k: v for k, v in value["layout"].items() if k != "margin"}}
    return value


def _not_placeholder(name: str, outs: dict) -> list[str]:
    """The outputs of a hidden view that are not its placeholder: compared with the registry's
    own placeholder when known (registry_check), else no figure with traces, no table rows."""
    expected = PLACEHOLDERS.get(name)
    if expected is not None:
        return [
            f"{k} = {json.dumps(v, default=str)[:100]}"
            for k, v in outs.items()
            if _comparable(k, v) != _comparable(k, expected.get(k))
        ]
    return [
        k
        for k, v in outs.items()
        if (k.endswith(".figure") and _has_traces(v)) or (k.endswith(".data") and isinstance(v, list) and v)
    ]


def check_views(client: Client, what: str, *, feature=None, subgroup=None, section=None) -> None:
    """The state and the results show what the user asked for; every view of the open section
    was drawn for the current signature (not a placeholder, with traces where EXPECT_TRACES
    says); every other view shows its placeholder or its drawing for the current signature."""
    problems = []
    state = client.get("state.data") or {}
    results = client.get("results.data") or {}
    if not isinstance(state, dict) or not state.get("ws"):
        problems.append(f"no state ({state!r:.120})")
    if not isinstance(results, dict) or "keys" not in results:
        problems.append(f"no results ({results!r:.200})")
    elif results.get("error"):
        problems.append(f"results error: {results['error']}")
    elif results.get("pending"):
        problems.append("results still pending (a job did not finish)")
    rstate = results.get("state") if isinstance(results, dict) else None
    rstate = rstate if isinstance(rstate, dict) else {}
    if feature is not None and (state.get("feature") != feature or rstate.get("feature") != feature):
        problems.append(
            f"asked feature {feature!r}, state has {state.get('feature')!r}, results {rstate.get('feature')!r}"
        )
    if subgroup is not None and (
        (state.get("subgroup") or "") != subgroup or (rstate.get("subgroup") or "") != subgroup
    ):
        problems.append(
            f"asked subgroup {subgroup!r}, state has {state.get('subgroup')!r}, results {rstate.get('subgroup')!r}"
        )
    open_section = client.get("section-tabs.value")
    if section is not None and open_section != section:
        problems.append(f"asked section {section!r}, the tabs show {open_section!r}")
    error_box = client.get("subgroup-error.children")
    if error_box:
        problems.append(f"subgroup error shown: {error_box!r:.200}")
    cmap = client.map
    sigs = results.get("sigs") if isinstance(results, dict) else None
    if cmap is None or cmap.fan_out is None:
        problems.append("no callback map")
    elif not isinstance(sigs, dict) or set(cmap.fan_out.names) - set(sigs):
        problems.append(f"results without a signature per view ({sigs!r:.200})")
    else:
        fan = cmap.fan_out
        with client.props_lock:
            drawn = dict(client.drawn)
        for name, view_section, store in zip(fan.names, fan.sections, fan.stores):
            sig, mode = sigs[name], drawn.get(name)
            outs = {f"{c}.{p.split('@')[0]}": client.get(f"{c}.{p.split('@')[0]}") for c, p in cmap.views[name].outputs}
            text = json.dumps(outs, default=str, ensure_ascii=False)
            given = client.get(store)
            if view_section == open_section:
                if mode != ("sig", sig) or not isinstance(given, dict) or given.get("sig") != sig:
                    problems.append(f"{name} (open section): drew {mode}, store {given!r:.80}, signature {sig}")
                elif HIDDEN_TEXT in text or WAITING_TEXT in text:
                    problems.append(f"{name} (open section): drawn as a placeholder ({text[:160]})")
                else:
                    empty = [g for g in EXPECT_TRACES.get(name, ()) if not _has_traces(client.get(f"{g}.figure"))]
                    if empty:
                        problems.append(f"{name}: {empty} without traces")
            elif mode == ("sig", sig):
                pass  # drawn earlier for exactly the current signature: what it shows is current
            elif mode[0] == "hidden":  # a placeholder holds no state: blanked once, whatever the signature
                wrong = _not_placeholder(name, outs)
                if wrong:
                    problems.append(f"{name} (hidden): not its placeholder: {wrong}")
            else:
                problems.append(f"{name} (section {view_section} not open): shows {mode}, signature is {sig}")
    if problems:
        client.stats.error("check", f"{what}: " + "; ".join(problems[:6]) + (" …" if len(problems) > 6 else ""))
        raise CheckFailed(what)


def do_action(client: Client, stats: Stats, kind: str, detail: str, fn) -> bool:
    """Run one action; record its latency. Returns False if it failed."""
    record = client.start_action(kind, detail)
    start = time.perf_counter()
    ok, cut = True, False
    try:
        fn()
    except Stop:
        cut = True
    except (RequestFailed, CheckFailed):
        ok = False
    except Exception as exc:  # noqa: BLE001 - a bug here must not hang the run
        ok = False
        where = traceback.extract_tb(exc.__traceback__)[-1]
        stats.error("check", f"{kind} {detail}: {type(exc).__name__}: {exc} (load_test.py line {where.lineno})"[:400])
    finally:
        client.end_action()
    record.update(seconds=time.perf_counter() - start, ok=ok, cut=cut)
    if not cut:
        stats.action(record)
    if cut:
        raise Stop()
    return ok


def load_page(client: Client, stats: Stats, search: str = "") -> bool:
    def go():
        client.load(search)
        check_views(client, "page load")

    return do_action(client, stats, "load", search or "/", go)


def switch_feature(client: Client, stats: Stats, feature: str) -> bool:
    def go():
        client.set_prop("feature-select.value", feature)
        client.event("feature-select.value")
        check_views(client, f"feature {feature}", feature=feature)

    return do_action(client, stats, "feature", feature, go)


def apply_subgroup(client: Client, stats: Stats, text: str) -> bool:
    def go():
        if text:
            client.set_prop("subgroup-text.value", text)  # typing: no callback listens to it
            client.click("subgroup-apply")
        else:
            client.click("subgroup-clear")
        check_views(client, f"subgroup {text or '(clear)'}", subgroup=text)

    return do_action(client, stats, "subgroup", text or "(clear)", go)


def open_section(client: Client, stats: Stats, key: str) -> bool:
    """A click on a section's tab: dcc.Tabs sets its value (only the fan-out listens)."""

    def go():
        client.set_prop("section-tabs.value", key)
        client.event("section-tabs.value")
        check_views(client, f"section {key}", section=key)

    return do_action(client, stats, "section", key, go)


def features_of(client: Client) -> list[str]:
    options = client.get("feature-select.options") or []
    return [o["value"] if isinstance(o, dict) else o for o in options]


def sections_of(client: Client) -> list[str]:
    fan = client.map.fan_out if client.map is not None else None
    return list(fan.section_keys) if fan is not None else []


# --- the server -----------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_loopback(url: str) -> str:
    """The URL, if its host is a loopback address (and resolves only to loopback addresses)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or host not in LOOPBACK_NAMES:
        raise SystemExit(f"refusing {url!r}: only http(s)://127.0.0.1, localhost or [::1] (loopback) may be targeted")
    try:
        addresses = {str(a[4][0]) for a in socket.getaddrinfo(host, parts.port or 80, proto=socket.IPPROTO_TCP)}
    except OSError as exc:
        raise SystemExit(f"cannot resolve {host!r}: {exc}") from None
    if not addresses or not all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses):
        raise SystemExit(f"refusing {url!r}: {host} resolves to {sorted(addresses)}, not only loopback")
    return f"{parts.scheme}://{parts.netloc}"


class Server:
    """gunicorn -c gunicorn.conf.py app:server on a free loopback port (as tests/test_browser.py)."""

    def __init__(self, cache_dir: Path, workers: int, threads: int | None):
        self.cache_dir = cache_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = cache_dir / "gunicorn.log"
        env = {**os.environ, "WIP_CACHE_DIR": str(cache_dir), "WIP_SECRET_KEY": "load"}
        cmd = [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            str(ROOT / "gunicorn.conf.py"),
            "app:server",
            "-w",
            str(workers),
            "-b",
            f"127.0.0.1:{self.port}",
            "--no-control-socket",
        ]
        if threads:
            cmd += ["--threads", str(threads)]
        self.cmd = cmd
        self._log = open(self.log_path, "w")  # noqa: SIM115 - open while gunicorn runs
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid

    def wait_ready(self, seconds: float = 90.0) -> None:
        deadline = time.monotonic() + seconds
        with requests.Session() as s:
            s.trust_env = False
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    if s.get(self.url + "/", timeout=5).status_code == 200:
                        return
                except requests.RequestException:
                    pass
                time.sleep(0.3)
        tail = self.log_path.read_text(errors="replace")[-3000:]
        self.stop()
        raise SystemExit(f"gunicorn did not start:\n{tail}")

    def stop(self) -> None:
        """SIGTERM to the master by its PID; then SIGKILL to any process of its tree left (by PID)."""
        tree = []
        if psutil is not None:
            try:
                tree = psutil.Process(self.pid).children(recursive=True)
            except psutil.Error:
                tree = []
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        for child in tree:
            try:
                if child.is_running() and child.status() != psutil.STATUS_ZOMBIE:
                    child.kill()
            except psutil.Error:
                pass
        self._log.close()

    def log_report(self, since: int = 0) -> dict:
        text = self.log_path.read_text(errors="replace")[since:]
        lines = text.splitlines()
        bad = [ln for ln in lines if re.search(r"Traceback|\bERROR\b|CRITICAL|WORKER TIMEOUT|Exception", ln)]
        return {
            "errors": len(bad),
            "first": bad[:10],
            "worker_boots": sum("Booting worker" in ln for ln in lines),
            "worker_recycles": sum("Autorestarting worker" in ln for ln in lines),
        }


def listener_pid(url: str):
    """The gunicorn master serving a --url (best effort, for CPU figures)."""
    if psutil is None:
        return None
    port = urlsplit(url).port or 80
    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                proc = psutil.Process(conn.pid)
                parent = proc.parent()
                if parent is not None and parent.cmdline() == proc.cmdline():
                    proc = parent
                return proc.pid
    except (psutil.Error, OSError):
        return None
    return None


class Monitor(threading.Thread):
    """CPU seconds and memory of the server's process tree, this script and the whole machine.

    The tree (gunicorn master, workers, background jobs and their forks) is sampled every
    0.25 s; each process's own CPU time is kept under (pid, start time), so processes that end
    during the run count up to their last sample (a process shorter than a sample is missed)."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid = pid
        self.halt = threading.Event()
        self.peak_rss = 0
        self.peak_procs = 0
        self.first: dict = {}
        self.last: dict = {}

    def sample(self) -> bool:
        if psutil is None or self.pid is None:
            return False
        try:
            root = psutil.Process(self.pid)
            procs = [root] + root.children(recursive=True)
        except psutil.Error:
            return False
        rss = n = 0
        for proc in procs:
            try:
                with proc.oneshot():
                    key = (proc.pid, proc.create_time())
                    t = proc.cpu_times()
                    rss += proc.memory_info().rss
            except psutil.Error:
                continue
            self.last[key] = t.user + t.system
            n += 1
        self.peak_rss = max(self.peak_rss, rss)
        self.peak_procs = max(self.peak_procs, n)
        return True

    def tree_cpu(self):
        if not self.last:
            return None
        return sum(v - self.first.get(k, 0.0) for k, v in self.last.items())

    @staticmethod
    def machine_busy():
        if psutil is None:
            return None
        t = psutil.cpu_times()
        return sum(t) - t.idle - getattr(t, "iowait", 0) - getattr(t, "guest", 0) - getattr(t, "guest_nice", 0)

    def begin(self):
        self.t0 = time.monotonic()
        if self.sample():
            self.first = dict(self.last)
        self.client0 = time.process_time()
        self.machine0 = self.machine_busy()
        self.load0 = os.getloadavg()
        self.start()

    def run(self):
        while not self.halt.wait(0.25):
            self.sample()

    def end(self) -> dict:
        self.halt.set()
        self.join(timeout=5)
        wall = time.monotonic() - self.t0
        self.sample()
        cpu = self.tree_cpu()
        client = time.process_time() - self.client0
        machine1 = self.machine_busy()
        out = {
            "wall_seconds": wall,
            "client_cpu_seconds": client,
            "loadavg_before": self.load0,
            "loadavg_after": os.getloadavg(),
            "cpus": os.cpu_count(),
        }
        if cpu is not None:
            out["server_cpu_seconds"] = cpu
            out["server_cores_used"] = cpu / wall if wall > 0 else None
            out["server_processes_seen"] = len(self.last)
            out["server_peak_rss_mb"] = self.peak_rss / 2**20
            out["server_peak_processes"] = self.peak_procs
        if self.machine0 is not None:
            busy = machine1 - self.machine0
            out["machine_cpu_seconds"] = busy
            if "server_cpu_seconds" in out:
                other = busy - out["server_cpu_seconds"] - client
                out["other_cpu_seconds"] = other
                out["other_cores_used"] = other / wall if wall > 0 else None
        return out


# --- phases ---------------------------------------------------------------------------------
def registry_check(fan: FanOut) -> list[str]:
    """The fan-out's arguments parsed from the page against what ``dashboard.callbacks.views``
    formats in (the registry's names and sections), and the texts the checks look for."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    try:
        from dashboard import views
    except Exception as exc:  # noqa: BLE001 - another environment: the page's own word is used
        return [f"dashboard.views not importable here ({type(exc).__name__}: {exc}); not cross-checked"]
    problems = []
    names, sections = [v.name for v in views.REGISTRY], [v.section for v in views.REGISTRY]
    if names != fan.names or sections != fan.sections:
        page = list(zip(fan.names, fan.sections))
        problems.append(f"the page's views {page} != REGISTRY {list(zip(names, sections))}")
    if [f"{views.input_id(v)}.data" for v in views.REGISTRY] != fan.stores:
        problems.append(f"the fan-out's outputs {fan.stores} are not the registry's input stores")
    if views.base.waiting(None) != WAITING_TEXT:
        problems.append("the placeholder text changed: update WAITING_TEXT")
    try:  # each view's placeholder for a section not open, as its callback answers it (JSON)
        from plotly.io.json import to_json_plotly

        for view in views.REGISTRY:
            out = views.placeholder(view, HIDDEN_TEXT)
            PLACEHOLDERS[view.name] = {
                "{}.{}".format(*view.outputs[k]): v for k, v in loads(to_json_plotly(out).encode()).items()
            }
    except Exception as exc:  # noqa: BLE001 - the checks then fall back to "no traces, no rows"
        problems.append(f"placeholders not computed here ({type(exc).__name__}: {exc})")
    return problems


def warm_up(base: str, args, subgroups) -> dict:
    """One session computes what the measured phase visits; then checks it is all cached."""
    stats = Stats(max_requests=100_000, max_seconds=args.warm_timeout)
    client = Client(base, stats, lanes=args.lanes, timeout=max(args.timeout, 120), job_timeout=args.warm_timeout)
    start = time.perf_counter()
    try:
        if not load_page(client, stats):
            raise SystemExit("warm-up: the page did not load:\n  " + "\n  ".join(stats.errors[:10]))
        assert client.map is not None and client.map.fan_out is not None
        mismatch = registry_check(client.map.fan_out)
        if mismatch and not args.url:
            raise SystemExit("warm-up: the page and dashboard.views disagree:\n  " + "\n  ".join(mismatch))
        for line in mismatch:
            print(f"warm-up: NOTE {line}", flush=True)
        features = features_of(client)
        sections = sections_of(client)
        for text in list(subgroups) + [""]:
            apply_subgroup(client, stats, text)
        for key in sections[1:] + sections[:1]:  # every view drawn once (and checked) before measuring
            open_section(client, stats, key)
        jobs_first = sum(a["jobs"] for a in stats.actions)
        jobs_second = None
        if not args.quick:  # second pass: all cached now? (the measured phase counts it too)
            n_first = len(stats.actions)
            for feature in features[1:] + features[:1]:
                switch_feature(client, stats, feature)
            for text in list(subgroups) + [""]:
                apply_subgroup(client, stats, text)
            jobs_second = sum(a["jobs"] for a in stats.actions[n_first:])
    except Stop:
        raise SystemExit(f"warm-up did not finish in {args.warm_timeout:.0f} s") from None
    finally:
        client.close()
    errors = sum(stats.n_errors.values())
    if errors:
        raise SystemExit("warm-up failed:\n  " + "\n  ".join(stats.errors[:10]))
    return {
        "seconds": time.perf_counter() - start,
        "jobs": jobs_first,
        "jobs_on_second_pass": jobs_second,
        "features": features,
        "subgroups": list(subgroups),
        "sections": sections,
        "not_emulated": dict(client.map.not_emulated) if client.map is not None else {},
        "requests": len(stats.requests),
        "actions": [
            {k: a[k] for k in ("kind", "detail", "seconds", "jobs", "requests", "drawn", "hidden")}
            for a in stats.actions
        ],
    }


def session_main(i: int, base: str, args, stats: Stats, subgroups, barrier: threading.Barrier) -> None:
    rng = random.Random(args.seed * 100_003 + i)
    client = Client(
        base,
        stats,
        lanes=args.lanes,
        timeout=args.timeout,
        job_timeout=args.job_timeout,
        assets=args.assets,
        retry=not args.no_retry,
    )
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        return
    if args.ramp > 0 and stats.stop.wait(args.ramp * i / max(args.sessions, 1)):
        return
    stats.session(+1)
    with stats.lock:
        stats.sessions["started"] += 1
    outcome = "completed"
    failures_in_a_row = 0
    try:
        ok = load_page(client, stats)
        failures_in_a_row = 0 if ok else 1
        for _ in range(args.actions):
            if failures_in_a_row >= 3:
                outcome = "gave_up"
                break
            if args.think > 0 and stats.stop.wait(args.think * rng.uniform(0.5, 1.5)):
                raise Stop()
            features = features_of(client) or ["X1", "X2", "X3"]
            state = client.get("state.data") or {}
            kind = rng.choices(ACTION_KINDS, weights=args.mix_weights)[0]
            if client.map is None:  # the page load failed: the user reloads
                ok = load_page(client, stats)
            elif kind == "feature":
                choices = [f for f in features if f != state.get("feature")] or features
                ok = switch_feature(client, stats, rng.choice(choices))
            elif kind == "subgroup":
                current = state.get("subgroup") or ""
                choices = [s for s in list(subgroups) + [""] if s != current]
                ok = apply_subgroup(client, stats, rng.choice(choices))
            else:
                sections = sections_of(client)
                choices = [k for k in sections if k != client.get("section-tabs.value")] or sections
                ok = open_section(client, stats, rng.choice(choices))
            failures_in_a_row = 0 if ok else failures_in_a_row + 1
    except Stop:
        outcome = "stopped_by_budget"
    finally:
        stats.session(-1)
        with stats.lock:
            stats.sessions[outcome] += 1
        client.close()


def measure(base: str, args, subgroups) -> tuple[Stats, float]:
    stats = Stats(max_requests=args.max_requests, max_seconds=args.max_seconds + 3600)
    barrier = threading.Barrier(args.sessions + 1)
    threads = [
        threading.Thread(
            target=session_main, args=(i, base, args, stats, subgroups, barrier), name=f"session-{i}", daemon=True
        )
        for i in range(args.sessions)
    ]
    for t in threads:
        t.start()
    stats.restart_clock(args.max_seconds)
    start = time.perf_counter()
    barrier.wait()
    hard_end = time.monotonic() + args.max_seconds + args.timeout + 30
    for t in threads:
        t.join(timeout=max(0.0, hard_end - time.monotonic()))
    stats.stop.set()
    return stats, time.perf_counter() - start


def report(stats: Stats, wall: float, args) -> dict:
    reqs = stats.requests
    by_kind: dict[str, list[float]] = {}
    bytes_by_kind: dict[str, list[int]] = {}
    for kind, sec, _status, nbytes, *_ in reqs:
        by_kind.setdefault(kind, []).append(sec)
        bytes_by_kind.setdefault(kind, []).append(nbytes)
    acts = stats.actions
    by_action: dict[str, list[float]] = {}
    for a in acts:
        by_action.setdefault(a["kind"], []).append(a["seconds"])
    per_kind = {}
    for k in sorted(by_action):
        mine = [a for a in acts if a["kind"] == k]
        per_kind[k] = {
            f: sum(a[f] for a in mine) / len(mine) for f in ("requests", "drawn", "hidden")
        }  # means per action of the kind
    served = sum(1 for r in reqs if r[5])
    return {
        "wall_seconds": wall,
        "sessions": {
            "asked": args.sessions,
            **stats.sessions,
            "max_concurrent": stats.max_active,
            **stats.held(args.sessions),
        },
        "actions": {
            "total": len(acts),
            "ok": sum(a["ok"] for a in acts),
            "by_kind": {k: len(v) for k, v in sorted(by_action.items())},
            "needed_computation": sum(1 for a in acts if a["jobs"]),
            "per_second": len(acts) / wall if wall > 0 else None,
        },
        "requests": {
            "total": len(reqs),
            "served": served,
            "per_second": served / wall if wall > 0 else None,
            "bytes_in": sum(r[3] for r in reqs),
            "bytes_out": sum(r[4] for r in reqs),
            "budget_hit": stats.issued >= args.max_requests,
        },
        "errors": {"total": sum(stats.n_errors.values()), **stats.n_errors, "first": stats.errors[:20]},
        "resets_retried": {"total": len(stats.resets), "first": stats.resets[:20]},
        "latency_ms": {
            "request": summary_ms([r[1] for r in reqs]),
            "request_by_kind": {k: summary_ms(v, bytes_by_kind[k]) for k, v in sorted(by_kind.items())},
            "action": summary_ms([a["seconds"] for a in acts]),
            "action_by_kind": {k: summary_ms(v) for k, v in sorted(by_action.items())},
        },
        "requests_per_action": (sum(a["requests"] for a in acts) / len(acts)) if acts else None,
        "per_action_kind": per_kind,
    }


def fmt(s: dict) -> str:
    if not s.get("n"):
        return "n=0"
    text = f"n={s['n']:<5} p50 {s['p50']:7.1f}  p95 {s['p95']:7.1f}  p99 {s['p99']:7.1f}  max {s['max']:7.1f}"
    if "mean_response_kib" in s:
        text += f"   {s['mean_response_kib']:7.1f} KiB/answer"
    return text


def print_report(res: dict, resources: dict, warm: dict | None, args, target: str) -> None:
    s, a, r, e, lat = res["sessions"], res["actions"], res["requests"], res["errors"], res["latency_ms"]
    print(f"\nmeasured phase: {res['wall_seconds']:.1f} s wall against {target}")
    print(
        f"  sessions   : {s['asked']} asked, {s['started']} started, max {s['max_concurrent']} concurrently active "
        f"(all {s['asked']} active for {s['all_active_seconds']:.1f} s, mean {s['mean_active']:.1f}); "
        f"{s['completed']} completed, {s['stopped_by_budget']} stopped by the budget, {s['gave_up']} gave up"
    )
    print(
        f"  actions    : {a['total']} ({', '.join(f'{k} {v}' for k, v in a['by_kind'].items())}), "
        f"{a['ok']} ok, {a['needed_computation']} needed a computation, {a['per_second']:.1f}/s; "
        f"{res['requests_per_action'] or 0:.1f} requests per action"
    )
    print(
        f"  requests   : {r['served']} served of {r['total']} ({r['per_second']:.1f}/s), "
        f"{r['bytes_in'] / 2**20:.1f} MiB down, {r['bytes_out'] / 2**20:.1f} MiB up"
        + ("; request budget reached" if r["budget_hit"] else "")
    )
    print(f"  errors     : {e['total']} (http {e['http']}, dash {e['dash']}, check {e['check']})")
    for msg in e["first"][:5]:
        print(f"      {msg[:300]}")
    resets = res["resets_retried"]
    if resets["total"]:
        print(
            f"  resets     : {resets['total']} request(s) hit a keep-alive connection the server closed, "
            "retried once on a new connection (as a browser does)"
        )
        for msg in resets["first"][:3]:
            print(f"      {msg[:300]}")
    print(f"  latency ms per request : {fmt(lat['request'])}")
    for kind, v in lat["request_by_kind"].items():
        print(f"      {kind:<24} {fmt(v)}")
    print(f"  latency ms per action  : {fmt(lat['action'])}")
    for kind, v in lat["action_by_kind"].items():
        means = res["per_action_kind"].get(kind, {})
        print(
            f"      {kind:<24} {fmt(v)}   {means.get('requests', 0):4.1f} req/action "
            f"({means.get('drawn', 0):.1f} views drawn, {means.get('hidden', 0):.1f} placeholders)"
        )
    cpus = resources.get("cpus")
    line = f"  CPU        : {cpus} cores; this script {resources['client_cpu_seconds']:.1f} s"
    if "server_cpu_seconds" in resources:
        line = (
            f"  CPU        : {cpus} cores; server (gunicorn tree) {resources['server_cpu_seconds']:.1f} s "
            f"= {resources['server_cores_used']:.2f} cores, peak RSS {resources['server_peak_rss_mb']:.0f} MiB "
            f"in {resources['server_peak_processes']} processes; this script {resources['client_cpu_seconds']:.1f} s"
        )
        if "other_cpu_seconds" in resources:
            line += (
                f"; other processes {resources['other_cpu_seconds']:.1f} s = {resources['other_cores_used']:.2f} cores"
            )
    print(line)
    if resources.get("server_cpu_per_action") is not None:
        print(
            f"  capacity   : {resources['server_cpu_per_action']:.2f} server CPU-seconds per action -> at most "
            f"~{resources['capacity_actions_per_second']:.1f} actions/s if the server had all {cpus} cores"
        )
    print(
        f"  load avg   : before {' '.join(f'{x:.2f}' for x in resources['loadavg_before'])}, "
        f"after {' '.join(f'{x:.2f}' for x in resources['loadavg_after'])}"
    )
    if resources.get("other_cores_used") is not None and resources["other_cores_used"] > 0.2:
        print(
            f"  NOTE: other processes used {resources['other_cores_used']:.2f} cores during the run: the "
            "machine was shared, latencies are pessimistic"
        )


# --- main -----------------------------------------------------------------------------------
def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--sessions", type=int, default=20, help="concurrent sessions")
    p.add_argument("--actions", type=int, default=30, help="actions per session after its page load")
    p.add_argument("--think", type=float, default=0.2, help="think time between actions, seconds (x U(0.5, 1.5))")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-requests", type=int, default=5000, help="request budget of the measured phase")
    p.add_argument("--max-seconds", type=float, default=120.0, help="time budget of the measured phase")
    p.add_argument(
        "--quick",
        action="store_true",
        help="5 sessions x 5 actions, 25 s budget, no second warm-up pass (< 60 s in all on idle cores)",
    )
    p.add_argument("--url", help="target this server (loopback only) instead of starting gunicorn")
    p.add_argument("--cache-dir", help="cache folder of the gunicorn started here (default: a temporary one)")
    p.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    p.add_argument("--threads", type=int, default=None, help="gunicorn threads per worker (default: gunicorn.conf.py)")
    p.add_argument("--cold", action="store_true", help="no warm-up: the measured phase includes the first computations")
    p.add_argument("--subgroups", default=";".join(SUBGROUPS), help="subgroups to apply, separated by ';'")
    p.add_argument(
        "--mix",
        default=MIX,
        help="shares of feature switches, subgroup changes and section switches among the actions",
    )
    p.add_argument("--lanes", type=int, default=6, help="parallel connections per session (a browser uses 6)")
    p.add_argument("--ramp", type=float, default=0.0, help="spread the session starts over this many seconds")
    p.add_argument("--assets", action="store_true", help="page loads also fetch the page's scripts and stylesheets")
    p.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="per request, seconds (the renderer has none; gunicorn.conf.py's worker timeout is 120)",
    )
    p.add_argument("--job-timeout", type=float, default=300.0, help="a background job in the measured phase, seconds")
    p.add_argument("--warm-timeout", type=float, default=600.0, help="the warm-up, seconds")
    p.add_argument(
        "--no-retry",
        action="store_true",
        help="count a reset keep-alive connection as an error instead of retrying once as browsers do",
    )
    p.add_argument("--out", default=str(OUT), help="JSON report")
    args = p.parse_args(argv)
    if args.quick:
        args.sessions, args.actions = QUICK["sessions"], QUICK["actions"]
        args.max_seconds = min(args.max_seconds, QUICK["max_seconds"])
    if args.sessions < 1 or args.actions < 0 or args.max_requests < 1 or args.max_seconds <= 0:
        p.error("--sessions >= 1, --actions >= 0, --max-requests >= 1, --max-seconds > 0")
    subgroups = tuple(s.strip() for s in args.subgroups.split(";") if s.strip())
    try:
        args.mix_weights = [float(x) for x in args.mix.split(",")]
    except ValueError:
        args.mix_weights = []
    if len(args.mix_weights) != len(ACTION_KINDS) or min(args.mix_weights) < 0 or sum(args.mix_weights) <= 0:
        p.error(f"--mix: {len(ACTION_KINDS)} non-negative shares ({', '.join(ACTION_KINDS)}), e.g. {MIX}")

    server = None
    tmp = None
    started = time.perf_counter()
    try:
        if args.url:
            base = check_loopback(args.url)
            server_pid = listener_pid(base)
            target = f"{base} (given)"
        else:
            if args.cache_dir:
                cache = Path(args.cache_dir).resolve()
                cache.mkdir(parents=True, exist_ok=True)
            else:
                tmp = cache = Path(tempfile.mkdtemp(prefix="wip-load-"))
            server = Server(cache, args.workers, args.threads)
            print(f"starting: {' '.join(server.cmd[1:])} (pid {server.pid}, cache {cache})", flush=True)
            server.wait_ready()
            base, server_pid = server.url, server.pid
            threads = f", {args.threads} threads" if args.threads else ""
            target = f"gunicorn -w {args.workers} (gthread{threads}) at {base}"
        print(
            f"load test: {args.sessions} sessions x (page load + {args.actions} actions), think {args.think} s, "
            f"seed {args.seed}, bounds {args.max_requests} requests / {args.max_seconds:.0f} s; "
            f"{os.cpu_count()} CPUs, load avg {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
            flush=True,
        )

        warm = None
        if not args.cold:
            warm = warm_up(base, args, subgroups)
            print(
                f"warm-up: {warm['seconds']:.1f} s, {warm['jobs']} background job(s) computed the demo and the "
                f"subgroups {', '.join(subgroups)}"
                + (
                    ""
                    if warm["jobs_on_second_pass"] is None
                    else f"; second pass: {warm['jobs_on_second_pass']} job(s)"
                )
                + f"; sections {', '.join(warm['sections'])} opened; fan-out emulated, other clientside "
                f"callbacks not in the flow: {', '.join(sorted(warm['not_emulated']))}",
                flush=True,
            )
        log_mark = server.log_path.stat().st_size if server else 0

        monitor = Monitor(server_pid)
        monitor.begin()
        stats, wall = measure(base, args, subgroups)
        resources = monitor.end()
        res = report(stats, wall, args)
        if resources.get("server_cpu_seconds") is not None and res["actions"]["total"]:
            per_action = resources["server_cpu_seconds"] / res["actions"]["total"]
            resources["server_cpu_per_action"] = per_action
            resources["capacity_actions_per_second"] = (os.cpu_count() or 1) / per_action if per_action > 0 else None
        log = server.log_report(log_mark) if server else None
        print_report(res, resources, warm, args, target)
        if log is not None:
            print(
                f"  server log : {log['errors']} error line(s), {log['worker_recycles']} worker recycle(s) "
                f"(max_requests), {log['worker_boots']} worker boot(s) during the measured phase"
            )
            for line in log["first"][:5]:
                print(f"      {line[:300]}")

        out = {
            "config": {k: v for k, v in vars(args).items()},
            "target": target,
            "environment": {
                "python": platform.python_version(),
                "platform": platform.platform(),
                "cpus": os.cpu_count(),
                "requests": requests.__version__,
                "psutil": getattr(psutil, "__version__", None),
            },
            "warm_up": warm,
            "measured": res,
            "resources": resources,
            "server_log": log,
            "total_seconds": time.perf_counter() - started,
        }
        path = Path(args.out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(out, indent=2, default=str))
        print(f"total {time.perf_counter() - started:.1f} s; wrote {path}")
        return 1 if res["errors"]["total"] else 0
    finally:
        if server is not None:
            server.stop()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
