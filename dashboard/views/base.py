"""What a view is: its panel, the results it needs, and a render returning named outputs.

A view module defines one :class:`View`. The registry (``dashboard.views.REGISTRY``) is
iterated by the layout (panels), the job planner (task kinds), the callbacks (one per
view, ``output=dict(...)``), the HTML report and the CSV exports; nothing indexes a tuple.

``render(ctx, inp)`` receives :class:`Inputs`, the state and results of one drill-down,
already cleaned and planned by the server, and returns a dict with one entry per name in
``outputs``. When results are not ready the registry renders ``placeholder`` instead.
"""

from __future__ import annotations

import html as html_lib
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from _plotly_utils.utils import PlotlyJSONEncoder
from dash import dcc
from plotly.offline import get_plotlyjs

import compute

from .. import figures, labels, planning, tasks
from ..state import CORE_FIELDS, Field, add_fields, state_fields
from ..store import Failed, Lru

# the built-in tasks a view can need (``View(needs=...)``; their specs in dashboard.tasks)
PROFILES, PFI, SFIMP = tasks.PROFILES.kind, tasks.PFI.kind, tasks.SFIMP.kind
# ``View(reads=ALL_FIELDS)``: every field of the state, the views' own included (a view
# reads all but the what-if edit unless it says otherwise)
ALL_FIELDS = frozenset({"<every field>"})


# The page's sections, in tab order: (key, tab label, the question the section answers).
SECTIONS = (
    ("overview", "Overview", "How good are the models, and which features does their performance rely on?"),
    ("feature", "Feature", "How does the chosen feature act: where in its range, and for which rows?"),
    ("observation", "Observation", "Why does one row get its prediction, and what if it were different?"),
    ("subgroups", "Subgroups", "Does the picture change on a subgroup of the rows?"),
)


@dataclass(frozen=True)
class Control:
    """An input of a view that only changes how cached results are drawn (a threshold): the
    component property it reads and the value used while it has none. The view checks
    the value; it never decides what is computed."""

    id: str
    prop: str
    default: Any = None


@dataclass(frozen=True)
class Select:
    """A click in one of the view's components that selects a feature or an observation:
    ``prop`` ``"clickData"`` for a graph (the clicked point's customdata is the feature or
    the row label), ``"active_cell"`` for a table (the clicked row's id). The controller's
    input and reducer for it are generated from the registry."""

    id: str
    field: str  # "feature" or "obs"
    prop: str = "clickData"

    def __post_init__(self):
        if self.field not in ("feature", "obs") or self.prop not in ("clickData", "active_cell"):
            raise ValueError(f"a Select sets 'feature' or 'obs' from clickData or active_cell (got {self})")


@dataclass(frozen=True)
class View:
    name: str
    section: str  # the page section (tab) it belongs to: a key of SECTIONS
    order: int  # place in its section: panels are sorted by it (gaps leave room for new views)
    title: str  # panel heading
    question: str  # one line in plain words: the question the view answers
    outputs: dict[str, tuple[str, str]]  # output name -> (component id, property)
    render: Callable[..., dict]  # (ctx, Inputs) -> {output name: value}
    body: Callable[[], list] = lambda: []  # panel components (the output components)
    extra: Callable[[], Any] | None = None  # tools in the panel header
    needs: frozenset = frozenset()  # task kinds the view reads
    placeholder: Callable[[str], dict] | None = None  # outputs while results are missing
    report: Callable[[dict], list[str]] | None = None  # HTML parts from the rendered outputs
    exports: dict[str, Callable] = field(default_factory=dict)  # button id -> (ctx, Inputs) -> download
    tasks: tuple[planning.TaskSpec, ...] = ()  # results this view computes itself (planned and cached)
    parts: tuple[planning.TaskSpec, ...] = ()  # the parts its tasks split into (their ``split``; never planned)
    controls: dict[str, Control] = field(default_factory=dict)  # name -> the control
    selects: tuple[Select, ...] = ()  # clicks in the view that select a feature or an observation
    wide: bool = False  # the panel spans the page's full width (tables with many columns)
    method: str = ""  # the method, its paper and equation: a "method" note, not the headline
    # the state fields render reads besides its own (``state``), by name for the page's
    # fields and by reference for another view's (``other.FIELD``, its Field: removing that
    # view then fails at import, not on a visitor's request; a name of no field fails when the
    # registry is built). None: every field but the what-if edit. A view is drawn again only
    # when one of them, or the availability of a result it reads, changes; tests check that
    # changing any other field leaves its outputs as they were.
    reads: frozenset | None = None
    state: tuple[Field, ...] = ()  # state fields this view owns (kept in the URL, set by its controls)
    # The numbers the view shows, as the compute library defines them, by name: a Series
    # (one number per label: bars, a table column), an array (a curve) or a float (a number
    # in a sentence). ``(inp) -> dict``, {} when it shows none for this state. A test renders
    # every view and finds each of them on the page unchanged (1e-12; a float in text to the
    # digits it is written with): the page shows compute's numbers, never its own.
    library: Callable[[Inputs], dict[str, Any]] | None = None

    def __post_init__(self):
        add_fields(self.state)  # the state's defaults, cleaning and URL know them from here on

    @property
    def read_names(self) -> frozenset:
        """The names of the fields ``reads`` lists (a Field by its name), its own fields added."""
        listed = frozenset(r.name if isinstance(r, Field) else r for r in (self.reads or ()))
        return listed | {f.name for f in self.state}

    @property
    def fields(self) -> frozenset:
        """The state fields render reads."""
        if self.reads is None:
            return frozenset(state_fields()) - {"edit", "present"}
        return frozenset(state_fields()) if self.reads == ALL_FIELDS else self.read_names


def check_reads(views) -> None:
    """Every field the views read is the page's or declared by one of these views (``state``):
    a view reading the field of a view no longer registered (by name, or by a reference to a
    Field its module no longer declares) fails when the registry is built, naming both."""
    declared = set(CORE_FIELDS) | {f.name for v in views for f in v.state}
    unknown = {v.name: sorted(v.read_names - declared) for v in views if v.reads != ALL_FIELDS}
    unknown = {name: fields for name, fields in unknown.items() if fields}
    if unknown:
        raise RuntimeError(
            f"views read state fields no registered view declares (View.state): {unknown}; declared: {sorted(declared)}"
        )


class Inputs:
    """One drill-down's state and results, as every view reads them. An Inputs is shared by
    every request of its state in this process (memoised by the cleaned state), so a result
    read is kept only once it is found: results are immutable and keyed by content, while a
    result still missing (a job running, or a record posted before the job ended) is read
    again by the next request instead of staying missing for every later visitor."""

    def __init__(self, ctx, state: dict, ws, data: pd.DataFrame, mask, keys: dict):
        self.ctx, self.state, self.ws, self.data, self.mask, self.keys = ctx, state, ws, data, mask, keys
        self._found: dict[str, Any] = {}

    @property
    def feature(self):
        return self.state["feature"]

    # --- labels: presentation only (dashboard.labels); every key stays the column name ---
    @cached_property
    def names(self) -> dict[str, str]:
        """Column name -> label of the labelled features (what figure builders take)."""
        return labels.feature_names(self.ws)

    def label(self, name) -> str:
        """A feature as people read it: its label, or its column name."""
        return labels.feature_label(self.ws, name)

    def class_label(self, value) -> str:
        """A class as people read it: its label, or the class value as text."""
        return labels.class_label(self.ws, value)

    def _get(self, key):
        """The cached result of ``key`` (None while missing). A task that could not be
        computed for this state's data (:class:`~dashboard.store.Failed`) raises its reason
        as an ``InputError``: the view reading it shows that reason in its place (``render``),
        and no other view is touched."""
        value = _RESULTS.get(key, lambda: self.ctx.store.get(key)) if key else None
        if isinstance(value, Failed):
            raise compute.InputError(value.message)
        return value

    def _once_found(self, name: str, read: Callable[[], Any], complete: Callable[[Any], bool]):
        if name in self._found:
            return self._found[name]
        value = read()
        if complete(value):
            self._found[name] = value
        return value

    def _per_model(self, kind: str) -> dict:
        found = {name: self._get(key) for name, key in self.keys.get(kind, {}).items()}
        return {name: value for name, value in found.items() if value is not None}

    @property
    def summary(self) -> compute.ProfileSummary | None:
        return self._once_found("summary", lambda: self._get(self.keys["summary"]), _present)

    def profile_of(self, feature) -> compute.FeatureProfile | None:
        """Any feature's cached ICE/ICI profile (the profiles task computes every feature's)."""
        return self._get(self.keys["profiles"].get(feature))

    @property
    def profile(self) -> compute.FeatureProfile | None:
        return self._once_found("profile", lambda: self._get(self.keys["profiles"].get(self.feature)), _present)

    @property
    def pfi(self) -> dict:
        return self._once_found(
            "pfi", lambda: self._per_model("pfi"), lambda found: len(found) == len(self.keys["pfi"])
        )

    @property
    def sfimp(self) -> dict:
        return self._once_found(
            "sfimp", lambda: self._per_model("sfimp"), lambda found: len(found) == len(self.keys["sfimp"])
        )

    def results(self, kind: str) -> dict:
        """A view-declared task's results (``View(tasks=...)``): model name -> result, for
        the models whose result is cached."""
        return self._per_model(kind)

    @property
    def profile_mask(self):
        """The subgroup as a boolean array over the profile's rows (None: no subgroup)."""
        if self.mask is None or self.profile is None:
            return None
        profile = self.profile
        return self._once_found(
            "profile_mask", lambda: self.mask.reindex(profile.rows).fillna(False).to_numpy(bool), _present
        )

    @property
    def rows_line(self) -> str:
        """The selected rows and, when the curves explain a sample, its size (toolbar)."""
        text = self.selection
        try:
            summary = self.summary
        except compute.ExplainError:  # no curves for these rows: the views say why
            return text
        if summary is not None and len(summary.rows) < len(self.data):
            text += f"; curves and CIU on a {len(summary.rows):,}-row sample of {len(self.data):,}"
        return text

    @cached_property
    def selection(self) -> str:
        """The rows the global views use, for titles."""
        n = len(self.data)
        text = (
            f"all {n:,} rows"
            if self.mask is None
            else (f"subgroup {self.state['subgroup']}: {int(self.mask.sum()):,} of {n:,} rows")
        )
        if self.state.get("exclude"):
            text += f", {len(self.state['exclude'])} excluded"
        return text


#: First characters that make a spreadsheet read a cell as a formula (OWASP "CSV injection"),
#: with their full-width forms, which some spreadsheets normalise.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")
_FILENAME_UNSAFE = re.compile(r"[^A-Za-z0-9._ -]+")


def csv_cell(value):
    """A text cell a spreadsheet would run (``=cmd|...``, ``@SUM(...)``, a leading tab) made
    inert with a leading apostrophe, as OWASP recommends; numbers, and text that reads as a
    number ("-1.5"), stay as they are."""
    if not isinstance(value, str) or not value.startswith(FORMULA_STARTS):
        return value
    try:
        float(value)
    except ValueError:
        return "'" + value
    return value


def _inert(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with every text cell, column name and row label passed through :func:`csv_cell`."""
    out = frame.copy()
    for i in range(out.shape[1]):
        values = out.iloc[:, i]
        if not (pd.api.types.is_numeric_dtype(values.dtype) or pd.api.types.is_bool_dtype(values.dtype)):
            out.isetitem(i, values.astype(object).map(csv_cell))
    out.columns = [csv_cell(str(c)) if not isinstance(c, (int, float)) else c for c in out.columns]
    if isinstance(out.index, pd.MultiIndex):
        out.index = pd.MultiIndex.from_tuples([tuple(csv_cell(v) for v in t) for t in out.index], names=out.index.names)
    else:
        out.index = pd.Index([csv_cell(v) for v in out.index], name=out.index.name)
    return out


def csv_download(frame: pd.DataFrame, filename: str, **to_csv) -> dict:
    """A CSV download of ``frame`` (full precision, every column named) with no cell a
    spreadsheet would run, under a file name made of safe characters. Every view's CSV
    export goes through here (a registry-wide test checks the downloads)."""
    stem = _FILENAME_UNSAFE.sub("_", filename.removesuffix(".csv"))[:120].strip("._ ") or "export"
    return dcc.send_data_frame(_inert(frame).to_csv, f"{stem}.csv", **to_csv)


_RESULTS = Lru(12)  # unsealed results: a profile is read by several views


def _present(value) -> bool:
    return value is not None


# --- helpers shared by view modules ------------------------------------------------------------
def empty(message: str):
    return figures.empty_figure(message)


DATA_ROLE_NOTES = {
    "pfi": {
        "training": "These rows trained the models: PFI here measures what each model relies on to fit them, "
        "memorisation included; on held-out data it shows what generalises.",
        "unknown": "Whether the models trained on these rows was not said at Load: on training data PFI also "
        "measures what a model memorised.",
    },
    "performance": {
        "training": "These rows trained the models: their errors here are optimistic; held-out data shows how "
        "they do on new rows.",
        "unknown": "Whether the models trained on these rows was not said at Load: on training data these "
        "errors are optimistic.",
    },
}


def data_role_note(ws, view: str) -> str:
    """One line on what the data is (asked at Load): nothing for held-out data."""
    return DATA_ROLE_NOTES[view].get(getattr(ws, "data_role", "unknown"), "")


def waiting(results) -> str:
    """The message of a results record that holds an error, else the waiting text."""
    error = results.get("error") if isinstance(results, dict) else None
    return str(error) if error else "Waiting for results…"


#: What a figure's JSON must not hold inside a <script> element (plotly.io's own list):
#: "</script>" and "<!--" would end or change the element; U+2028/2029 end a line in older JS.
_SCRIPT_UNSAFE = (("<", "\\u003c"), (">", "\\u003e"), ("/", "\\u002f"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))


def figure_json(part) -> str:
    """One part of a figure (its data or layout) as JSON for a <script> element.

    Written here on purpose rather than by ``plotly.io.to_html``, whose encoder is orjson
    when that package happens to be installed (non-ASCII written as itself) and the standard
    ``json`` module otherwise (non-ASCII escaped as ``\\uXXXX``): the report must be the same
    file on every machine. Non-ASCII text is written as itself, like the report's prose (the
    document is UTF-8); the characters that could end the script early are escaped."""
    text = json.dumps(part, cls=PlotlyJSONEncoder, separators=(",", ":"), ensure_ascii=False)
    for unsafe, safe in _SCRIPT_UNSAFE:
        text = text.replace(unsafe, safe)
    return text


def figure_html(fig, *, first: bool = False) -> str:
    """A figure as an HTML fragment of the report: its div and the script drawing it, with
    plotly.js inlined before the first figure (the report is one file, read offline)."""
    fig_dict = (fig if isinstance(fig, go.Figure) else go.Figure(fig)).to_plotly_json()
    layout = fig_dict.get("layout", {})
    height = layout.get("height", layout.get("template", {}).get("layout", {}).get("height", "100%"))
    height = f"{height}px" if isinstance(height, int | float) else str(height)
    div_id = str(uuid.uuid4())
    config = json.dumps({"displaylogo": False, "responsive": True})
    script = f'<script charset="utf-8">{get_plotlyjs()}</script>' if first else ""
    return (
        f'<div style="height:{html_lib.escape(height)}; width:100%;">{script}'
        f'<div id="{div_id}" class="plotly-graph-div" style="height:100%; width:100%;"></div>'
        f'<script>Plotly.newPlot("{div_id}", {figure_json(fig_dict.get("data", []))}, '
        f"{figure_json(layout)}, {config});</script></div>"
    )


def table_html(rows: list[dict], cols: list[dict]) -> str:
    if not rows:
        return ""
    head = "".join(f"<th>{html_lib.escape(str(c['name']))}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{html_lib.escape(figures.shown_number(r.get(c['id'])))}</td>" for c in cols) + "</tr>"
        for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def text_html(text) -> str:
    return f"<p>{html_lib.escape(str(text))}</p>" if text else ""


def is_figure_ready(fig) -> bool:
    """False for the placeholder figures (an annotation and no traces)."""
    return bool(getattr(fig, "data", None))
