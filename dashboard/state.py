"""Drill-down state: what the URL holds, and the server context callbacks share.

The state (workspace, model, feature, subgroup, selected observation, display options)
lives in the URL query string and in a ``dcc.Store``; nothing per user lives in the
server's memory. :class:`Context` bundles what every callback needs: configuration, the
on-disk store and the model-loading policy.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any
from urllib.parse import parse_qs, urlencode

import pandas as pd

import compute

from .broker import broker_for
from .config import Config
from .demos import DEFAULT_DEMO, build_demo
from .isolation import Limits
from .loading import Policy
from .rows import clean_edits, row_label, select_rows
from .slots import JobSlots
from .store import Store

# the page's own fields; views add theirs (View(state=...), see Field). ``exclude`` and ``edit``
# stay the page's: they are cleaned against the data set (rows it holds; the selected row's
# columns and levels), which a field cleaned from its value alone cannot do, and ``edit``
# belongs to the selected observation (dropped when it changes)
CORE_FIELDS = (
    "ws",
    "model",
    "feature",
    "subgroup",
    "obs",
    "exclude",
    "edit",
    "present",  # presentation mode: how the page is laid out, never what is computed
)


@dataclass(frozen=True)
class Field:
    """A drill-down state field a view owns (``View(state=(Field(...),))``): kept in the
    state and the URL like the page's own fields, cleaned from whatever the browser sends,
    and (``control``: component id and property) set by a control the view draws, which
    shows the state's value. A view declares it in its module; the state's defaults,
    cleaning and URL, and the controller's input, reducer and output, come from here.

    ``clean(raw)``: a valid value from any JSON value or URL text, else ``default``;
    ``read(raw)``: the control's value as a value of the field, raising ``ValueError`` or
    ``TypeError`` on one that is not (the click is then ignored; ``clean`` bounds it);
    ``text(value)``: the value as URL text (left out of the URL when it is the default).
    ``clicks``: components (id, ``"clickData"``) whose clicked point's ``customdata`` is
    read as a value of the field too (a cell of a matrix selecting a pair).
    ``show(value)``: the value as the control shows it (default: as it is); ``parse(text)``:
    URL text as a value (default: ``clean``). ``events``: buttons that change the field
    (:class:`Event`: "More repetitions" doubles it, a toggle flips it)."""

    name: str
    default: Any
    clean: Callable[[Any], Any]
    read: Callable[[Any], Any]
    text: Callable[[Any], str] = str
    control: tuple[str, str] | None = None
    clicks: tuple[tuple[str, str], ...] = ()
    show: Callable[[Any], Any] | None = None
    parse: Callable[[str], Any] | None = None
    events: tuple[Event, ...] = ()

    def from_url(self, text: str) -> Any:
        return self.parse(text) if self.parse is not None else self.clean(text)


@dataclass(frozen=True)
class Event:
    """A button of a view that changes one of its fields: ``step(value)`` is the field's new
    value when ``(id, prop)`` fires (``clean`` then bounds it); the controller's input and
    reducer (named after ``step``) come from it."""

    id: str
    step: Callable[[Any], Any]
    prop: str = "n_clicks"


def int_field(
    name: str,
    default: int,
    *,
    low: int,
    high: int,
    control: tuple[str, str] | None = None,
    events: tuple[Event, ...] = (),
) -> Field:
    """A whole number in [low, high]: out-of-range values are clamped, others give the default."""

    def clean(raw) -> int:
        if isinstance(raw, str):
            try:
                raw = int(raw.strip())
            except ValueError:
                return default
        if not isinstance(raw, int) or isinstance(raw, bool):
            return default
        return min(max(raw, low), high)

    def read(raw) -> int:
        if isinstance(raw, bool):
            raise TypeError("not a whole number")
        try:
            return int(raw)
        except OverflowError:  # an infinite float (JSON's Infinity): refused like NaN, not an HTTP 500
            raise ValueError("not a finite number") from None

    return Field(name, default, clean, read, str, control, events=events)


def bool_field(
    name: str,
    default: bool = False,
    *,
    control: tuple[str, str] | None = None,
    read: Callable[[Any], bool] | None = None,
    show: Callable[[bool], Any] | None = None,
    events: tuple[Event, ...] = (),
) -> Field:
    """Yes or no: anything but a JSON boolean gives the default; ``1``/``0`` in the URL.
    ``read``/``show``: the control's value as the field's and back (a checklist's ``["c"]``)."""

    def clean(raw) -> bool:
        return raw if isinstance(raw, bool) else default

    def parse(text: str) -> bool:
        return {"1": True, "0": False}.get(text, default)

    def text(value: bool) -> str:
        return "1" if value else "0"

    def strict(raw) -> bool:
        if not isinstance(raw, bool):
            raise TypeError("not a yes or no")
        return raw

    return Field(name, default, clean, read or strict, text, control, show=show, parse=parse, events=events)


_VIEW_FIELDS: dict[str, Field] = {}


def add_fields(fields) -> None:
    """Register the fields a view declares (``View`` does, when a view module is imported)."""
    for field in fields:
        known = _VIEW_FIELDS.get(field.name)
        if field.name in CORE_FIELDS or (known is not None and known != field):
            raise ValueError(f"the state field {field.name!r} is declared twice")
        _VIEW_FIELDS[field.name] = field


def view_fields() -> tuple[Field, ...]:
    """The fields views declared, in the order they were registered."""
    return tuple(_VIEW_FIELDS.values())


def state_fields() -> tuple[str, ...]:
    """Every field of the state: the page's own, then the views'."""
    return CORE_FIELDS + tuple(_VIEW_FIELDS)


@dataclass(frozen=True)
class Context:
    config: Config
    store: Store
    policy: Policy

    @property
    def load_limits(self) -> Limits:
        """Limits of a process that reads an uploaded file or loads a model."""
        return Limits(
            self.config.load_timeout, self.config.job_memory_mb * 2**20, option="--load-timeout / --job-memory-mb"
        )

    @cached_property
    def slots(self) -> JobSlots:
        """Each client's share of the computations and loads running at once."""
        return JobSlots(
            self.store.root,
            per_client=self.config.jobs_per_client,
            total=self.config.job_slots,
            lease=self.config.job_timeout + self.config.load_timeout,
        )

    @property
    def job_limits(self) -> Limits:
        """Limits of a process that computes results with the models."""
        return Limits(
            self.config.job_timeout, self.config.job_memory_mb * 2**20, option="--job-timeout / --job-memory-mb"
        )


def make_context(config: Config) -> Context:
    remote = broker_for(
        config.celery_broker,
        config.secret_key,
        max_bytes=max(config.upload_limit_mb, 512) * 2**20,
        object_store=config.object_store,
    )
    store = Store(config.cache_path, size_limit_mb=config.cache_size_mb, build_demo=build_demo, remote=remote)
    policy = Policy(
        allow_pickle=config.allow_pickle,
        allow_user_types=config.allow_user_types,
        max_bytes=config.upload_limit_mb * 2**20,
        max_rows=config.max_rows,
    )
    return Context(config=config, store=store, policy=policy)


def default_state() -> dict:
    return {
        "ws": DEFAULT_DEMO,
        "model": None,
        "feature": None,
        "subgroup": "",
        "obs": None,
        "exclude": [],
        "edit": {},
        "present": False,
        **{field.name: field.default for field in _VIEW_FIELDS.values()},
    }


MAX_TEXT = 2000  # longest feature, model, observation or subgroup text kept
MAX_EXCLUDED = 5000  # most excluded observations kept
_ID_LIKE = 200  # longest workspace id or excluded row label kept
MAX_EDITS = 500  # most edited values (what-if) kept


def clean_state(raw) -> dict:
    """A state with every field of the expected type and within what the UI allows.

    Whatever the browser sends (the state store, a job request, a forged value) passes
    through here before the server plans anything from it: unknown keys are dropped,
    wrong types fall back to the default, texts and lists are capped, and the views' fields
    are cleaned by their own rules (``Field.clean``: PFI's repetitions clamped). Validity
    against the workspace is ``normalize``'s job.
    """
    state = default_state()
    if not isinstance(raw, dict):
        return state
    ws = raw.get("ws")
    if isinstance(ws, str) and 0 < len(ws) <= _ID_LIKE:
        state["ws"] = ws
    for key in ("model", "feature", "obs"):
        value = raw.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        if isinstance(value, str) and len(value) <= MAX_TEXT:
            state[key] = value
    subgroup = raw.get("subgroup")
    if isinstance(subgroup, str):
        state["subgroup"] = subgroup.strip()[:MAX_TEXT]
    state["present"] = raw.get("present") is True
    for field in _VIEW_FIELDS.values():
        state[field.name] = field.clean(raw.get(field.name, field.default))
    exclude = raw.get("exclude")
    if isinstance(exclude, list):
        kept = [
            str(e)
            for e in exclude[:MAX_EXCLUDED]
            if isinstance(e, (str, int)) and not isinstance(e, bool) and len(str(e)) <= _ID_LIKE
        ]
        state["exclude"] = sorted(set(kept))
    state["edit"] = _clean_edit(raw.get("edit")) if state["obs"] is not None else {}
    return state


def _clean_edit(raw) -> dict:
    """What-if edits: column name -> a finite number or a level's text (validity against the
    data is ``normalize``'s job)."""
    if not isinstance(raw, dict):
        return {}
    kept: dict[str, int | float | str] = {}
    for key, value in list(raw.items())[:MAX_EDITS]:
        if not isinstance(key, str) or len(key) > MAX_TEXT:
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool) and _finite(value):
            kept[key] = value
        elif isinstance(value, str) and len(value) <= MAX_TEXT:
            kept[key] = value
    return dict(sorted(kept.items()))


def _finite(value) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond float range
        return False


def state_from_search(search: str | None) -> dict:
    """Parse a query string (``?ws=demo-x3&feature=X1&subgroup=X3%20%3D%3D%200``) leniently:
    unknown keys are ignored and bad values fall back to defaults (validated later)."""
    state = default_state()
    query = parse_qs((search or "").lstrip("?"), keep_blank_values=False)
    one = {k: v[-1] for k, v in query.items() if k in state_fields() and v}
    for key in ("ws", "model", "feature", "subgroup", "obs"):
        if key in one:
            state[key] = one[key][:MAX_TEXT]
    state["present"] = one.get("present") == "1"
    for field in _VIEW_FIELDS.values():
        if field.name in one:
            state[field.name] = field.from_url(one[field.name])
    if one.get("exclude"):
        state["exclude"] = [e for e in one["exclude"].split(",") if e][:MAX_EXCLUDED]
    if one.get("edit"):
        try:
            state["edit"] = json.loads(one["edit"][: MAX_EDITS * (MAX_TEXT + 8)])
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's limit
            state["edit"] = {}
    return clean_state(state)


def search_from_state(state: dict) -> str:
    """The query string of a state; default values are left out to keep URLs short."""
    query = {"ws": state.get("ws")}
    for key in ("model", "feature", "subgroup", "obs"):
        if state.get(key) not in (None, ""):
            query[key] = str(state[key])
    if state.get("present"):
        query["present"] = "1"
    for field in _VIEW_FIELDS.values():
        value = state.get(field.name, field.default)
        if value != field.default:
            query[field.name] = field.text(value)
    if state.get("exclude"):
        query["exclude"] = ",".join(str(e) for e in state["exclude"])
    if state.get("edit") and state.get("obs") is not None:
        query["edit"] = json.dumps(state["edit"], sort_keys=True, separators=(",", ":"))
    return "?" + urlencode(query)


def held_row(value, rows: pd.Index) -> str | None:
    """A row label from the URL or the browser as the data set spells it (``03`` is row 3's
    ``3``), or None for a row it does not hold: any other spelling, or a made-up label, would
    be a new state (and new cache entries) selecting the same rows."""
    label = row_label(value, rows)
    return str(label) if label in rows else None


def normalize(ctx, state: dict, *, previous_subgroup: str = "", error=None) -> tuple[dict, str | None]:
    """Make a state valid for its workspace: known ids, a model, a feature, rows it holds (the
    observation, the excluded ones), a parseable subgroup."""
    state = clean_state(state)
    ws = ctx.store.workspace(state.get("ws"))
    if ws is None:
        error = (
            f"Data set {state.get('ws')!r} could not be read on this server (its record is damaged); load its "
            "files again. Showing a demo instead."
            if ctx.store.workspace_damaged(state.get("ws"))
            else f"Data set {state.get('ws')!r} is not available on this server (uploads expire); showing a demo "
            "instead."
        )
        state = {**default_state()}
        ws = ctx.store.workspace(state["ws"])
    model = ws.model(state.get("model"))
    state["model"] = model.name
    if state.get("feature") not in model.features:
        state["feature"] = model.features[0]
    # the rows' labels are read only for a state that names rows: a plain state plans without the data set
    rows = ctx.store.data(ws).index if state.get("obs") is not None or state["exclude"] else pd.RangeIndex(0)
    if state.get("obs") is not None:
        state["obs"] = held_row(state["obs"], rows)  # None: another data set's row, or one typed in a URL
    state["exclude"] = sorted({label for label in (held_row(e, rows) for e in state["exclude"]) if label is not None})
    if state.get("obs") is None or not state.get("edit"):
        state["edit"] = {}
    else:
        data = ctx.store.data(ws)
        state["edit"] = clean_edits(data, model.features, row_label(state["obs"], rows), state["edit"])
    if state.get("subgroup"):
        try:
            mask = select_rows(ctx.store.data(ws), state["subgroup"])
            if not mask.any():
                raise compute.SubgroupError(
                    f"Subgroup {state['subgroup']!r} selects 0 of {len(mask)} rows; choose another condition."
                )
        except compute.SubgroupError as exc:
            error = f"{exc}"
            state["subgroup"] = previous_subgroup if previous_subgroup != state["subgroup"] else ""
    return state, error
