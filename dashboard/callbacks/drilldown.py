"""The controller: every drill-down input (URL, dropdowns, clicks, subgroup box) -> one state.

One callback owns the state, the URL and the controls' values, so they never disagree
(Dash allows a callback to have the same property as input and output; separate
callbacks would form a cycle).
"""

from __future__ import annotations

import json
import re

import pandas as pd
from dash import ALL, Input, Output, State, no_update
from dash import ctx as dash_ctx

import compute

from .. import ids, labels, views
from ..demos import DEMOS
from ..start import start_ws
from ..state import (
    Event,
    Field,
    clean_state,
    default_state,
    normalize,
    search_from_state,
    state_from_search,
    view_fields,
)
from ..views import Select
from .clientside import CLICKED_ROW_JS, HOVERED_ROW_JS, PRESENT_JS, SUGGESTED_JS, VIEW_LINK_JS, WHATIF_JS


def _click_value(click):
    """customdata of the first clicked point (a feature name or a row label), or None."""
    try:
        point = (click or {})["points"][0]
    except (KeyError, IndexError, TypeError):
        return None
    value = point.get("customdata")
    if isinstance(value, list):
        value = value[0] if value else None
    return value


def parse_values(text: str):
    """Values typed in the condition builder: numbers where they parse, else strings;
    several values separated by commas (for ``in`` and ``between``)."""
    parts = [p.strip() for p in str(text or "").split(",") if p.strip()]

    def one(p):
        low = p.lower()
        if low in ("true", "false"):
            return low == "true"
        try:
            return int(p)
        except ValueError:
            pass
        try:
            return float(p)
        except ValueError:
            return p.strip("'\"")

    return [one(p) for p in parts]


def build_condition(column, op, value_text) -> str:
    """One condition from the builder, in the language of ``parse_subgroup``."""
    if not column:
        raise compute.SubgroupError("Choose a column for the condition.")
    values = parse_values(value_text)
    if op in ("is missing", "is not missing"):
        return compute.format_condition(column, op)
    if op == "between":
        if len(values) != 2:
            raise compute.SubgroupError("'between' needs two values separated by a comma, e.g. 0, 1.5.")
        return compute.format_condition(column, op, tuple(values))
    if op in ("in", "not in"):
        if not values:
            raise compute.SubgroupError(f"'{op}' needs one or more values separated by commas.")
        return compute.format_condition(column, op, values)
    if len(values) != 1:
        raise compute.SubgroupError(f"'{op}' needs exactly one value (got {value_text!r}).")
    return compute.format_condition(column, op, values[0])


def update_state(ctx, state: dict | None, trigger: str | None, inputs: dict) -> tuple[dict, str | None]:
    """Apply one event to the state. Returns (new state, error message for the subgroup box).

    The event's reducer (``REDUCERS[trigger]``) maps (state, inputs) to a new state; a
    reducer that raises on a malformed value leaves the state as it was."""
    fresh = not (isinstance(state, dict) and state.get("ws"))
    state = clean_state(state)
    inputs = inputs if isinstance(inputs, dict) else {}
    reducer = from_url if (fresh or trigger is None) else REDUCERS.get(trigger, lambda st, _inputs: st)
    if trigger == ids.EXCLUDE_SELECTED and not fresh and state.get("obs") is None:
        reducer = _exclude_default(ctx)
    try:
        state = clean_state(reducer(dict(state), inputs))
        if reducer is from_url and "ws=" not in str(inputs.get("search") or ""):
            state["ws"] = start_ws(ctx) or state["ws"]  # the root address: the operator's data set, if any
    except compute.SubgroupError as exc:
        return state, str(exc)
    except (TypeError, ValueError, AttributeError, KeyError):  # a forged or malformed input value
        pass  # the event is ignored; the state stays what it was
    previous = inputs.get("previous_subgroup", "")
    return normalize(ctx, state, previous_subgroup=previous if isinstance(previous, str) else "")


# --- reducers: (state, inputs) -> state, one per triggering input ---------------------------------
def from_url(state, inputs):
    return state_from_search(inputs.get("search"))


def choose_ws(state, inputs):
    return {**default_state(), "ws": inputs.get("ws")}


def loaded_ws(state, inputs):
    return {**default_state(), "ws": inputs["loaded"]} if inputs.get("loaded") else state


def choose_model(state, inputs):
    return {**state, "model": inputs.get("model")}


def choose_feature(state, inputs):
    return {**state, "feature": inputs.get("feature")}


def select_input(select: Select) -> str:
    """The controller's input name of a view's selection (``View(selects=...)``)."""
    return "select_" + re.sub(r"\W", "_", select.id)


def selection_reducer(select: Select):
    """The reducer of a view's selection: the clicked point's customdata (a graph) or the
    clicked row's id (a table) becomes the state's feature or observation."""
    name = select_input(select)

    def reducer(state, inputs):
        raw = inputs.get(name)
        value = (raw or {}).get("row_id") if select.prop == "active_cell" else _click_value(raw)
        if value is None:
            return state
        return {**state, "feature": str(value)} if select.field == "feature" else _select(state, value)

    reducer.__name__ = f"select_{select.field}"
    return reducer


def field_input(field: Field) -> str:
    """The controller's input (and output) name of a view's state field (``View(state=...)``)."""
    return "field_" + field.name


def field_reducer(field: Field):
    """The reducer of a view's state field: its control's value, read as the field's
    (``clean_state`` then bounds it; a value that is not one leaves the state as it was)."""
    name = field_input(field)

    def reducer(state, inputs):
        return {**state, field.name: field.read(inputs.get(name))}

    reducer.__name__ = f"set_{field.name}"
    return reducer


def event_input(event: Event) -> str:
    """The controller's input name of a button that changes a view's field (``Field.events``)."""
    return "event_" + re.sub(r"\W", "_", event.id)


def event_reducer(field: Field, event: Event):
    """The reducer of such a button: the field's value stepped (``Event.step``), named after
    the step ("more_repeats")."""

    def reducer(state, inputs):
        return {**state, field.name: event.step(state.get(field.name, field.default))}

    reducer.__name__ = event.step.__name__
    return reducer


def click_input(field: Field, component: str) -> str:
    """The controller's input name of a click that sets a view's state field (``Field.clicks``)."""
    return "click_" + field.name + "_" + re.sub(r"\W", "_", component)


def click_reducer(field: Field, component: str):
    """The reducer of such a click: the clicked point's customdata, read as the field's."""
    name = click_input(field, component)

    def reducer(state, inputs):
        value = _click_value(inputs.get(name))
        return state if value is None else {**state, field.name: field.read(value)}

    reducer.__name__ = f"click_{field.name}"
    return reducer


def _select(state, row):
    """Select an observation; what-if edits belong to the row they were made on."""
    row = str(row)
    return state if row == state.get("obs") else {**state, "obs": row, "edit": {}}


def click_curve_row(state, inputs):
    clicked = inputs.get("clicked") or {}
    return state if clicked.get("row") is None else _select(state, clicked["row"])


def edit_values(state, inputs):
    """The what-if form's values (every field: normalize keeps those that differ from the
    row's own), for the row the form was drawn for."""
    sent = inputs.get("whatif") or {}
    if state.get("obs") is None and sent.get("row") is not None:  # the form of the default observation:
        return {**state, "obs": str(sent["row"]), "edit": dict(sent.get("edit") or {})}  # editing selects it
    if str(sent.get("row")) != str(state.get("obs")):
        return state  # a form of another row (the selection moved on)
    return {**state, "edit": dict(sent.get("edit") or {})}


def reset_edits(state, inputs):
    return {**state, "edit": {}}


def apply_subgroup(state, inputs):
    return {**state, "subgroup": (inputs.get("subgroup_text") or "").strip()}


def pick_suggested(state, inputs):
    """A suggested subgroup's button: its condition, parsed and checked like typed text."""
    sent = inputs.get("suggested") or {}
    condition = sent.get("condition") if isinstance(sent, dict) else None
    return {**state, "subgroup": condition.strip()} if isinstance(condition, str) else state


def clear_subgroup(state, inputs):
    return {**state, "subgroup": ""}


def add_condition(state, inputs):
    condition = build_condition(inputs.get("cond_column"), inputs.get("cond_op"), inputs.get("cond_value"))
    current = (state.get("subgroup") or "").strip()
    return {**state, "subgroup": f"({current}) and {condition}" if current else condition}


def toggle_present(state, inputs):
    return {**state, "present": not state.get("present")}


def _exclude_default(ctx):
    """The reducer of "Exclude selected observation" with none chosen: it excludes the row
    every panel shows by default (the planner's, once the curves are cached), and a new
    default takes its place."""

    def reducer(state, inputs):
        resolved = views.resolve(ctx, state)
        shown = resolved.shown if resolved is not None else {}
        if shown.get("obs") is None:
            return state
        return {**state, "exclude": sorted(set(state.get("exclude") or []) | {str(shown["obs"])})}

    return reducer


def exclude_selected(state, inputs):
    if state.get("obs") is None:
        return state
    return {**state, "exclude": sorted(set(state.get("exclude") or []) | {str(state["obs"])})}


def exclude_negative(state, inputs):
    negative = inputs.get("negative") or []
    return {**state, "exclude": sorted(set(state.get("exclude") or []) | {str(e) for e in negative})}


def clear_exclusions(state, inputs):
    return {**state, "exclude": []}


REDUCERS = {
    ids.URL: from_url,
    ids.PRESENT: toggle_present,
    ids.WS_SELECT: choose_ws,
    ids.LOADED_WS: loaded_ws,
    ids.MODEL_SELECT: choose_model,
    ids.FEATURE_SELECT: choose_feature,
    ids.CLICKED_ROW: click_curve_row,
    ids.SUBGROUP_APPLY: apply_subgroup,
    ids.SUBGROUP_TEXT: apply_subgroup,
    ids.SUBGROUP_CLEAR: clear_subgroup,
    ids.SUGGESTED_PICK: pick_suggested,
    ids.COND_ADD: add_condition,
    ids.EXCLUDE_SELECTED: exclude_selected,
    ids.EXCLUDE_NEGATIVE: exclude_negative,
    ids.EXCLUDE_CLEAR: clear_exclusions,
    ids.WHATIF_EDIT: edit_values,
    ids.WHATIF_RESET: reset_edits,
    # the views' clicks that select a feature or an observation (View(selects=...))
    **{select.id: selection_reducer(select) for select in views.selects()},
    # the views' own state fields, set by their controls (View(state=...))
    **{field.control[0]: field_reducer(field) for field in view_fields() if field.control},
    **{cid: click_reducer(field, cid) for field in view_fields() for cid, _ in field.clicks},
    **{event.id: event_reducer(field, event) for field in view_fields() for event in field.events},
}


# The controller's Dash inputs (by the names update_state reads) and outputs.
CONTROLLER_INPUTS = {
    "search": Input(ids.URL, "search"),
    "ws": Input(ids.WS_SELECT, "value"),
    "model": Input(ids.MODEL_SELECT, "value"),
    "feature": Input(ids.FEATURE_SELECT, "value"),
    "clicked": Input(ids.CLICKED_ROW, "data"),
    "apply": Input(ids.SUBGROUP_APPLY, "n_clicks"),
    "submit": Input(ids.SUBGROUP_TEXT, "n_submit"),
    "clear": Input(ids.SUBGROUP_CLEAR, "n_clicks"),
    "add": Input(ids.COND_ADD, "n_clicks"),
    "present": Input(ids.PRESENT, "n_clicks"),
    "exclude_selected": Input(ids.EXCLUDE_SELECTED, "n_clicks"),
    "exclude_negative": Input(ids.EXCLUDE_NEGATIVE, "n_clicks"),
    "exclude_clear": Input(ids.EXCLUDE_CLEAR, "n_clicks"),
    "loaded": Input(ids.LOADED_WS, "data"),
    "whatif": Input(ids.WHATIF_EDIT, "data"),
    "suggested": Input(ids.SUGGESTED_PICK, "data"),
    "whatif_reset": Input(ids.WHATIF_RESET, "n_clicks"),
    "subgroup_text": State(ids.SUBGROUP_TEXT, "value"),
    "cond_column": State(ids.COND_COLUMN, "value"),
    "cond_op": State(ids.COND_OP, "value"),
    "cond_value": State(ids.COND_VALUE, "value"),
    "negative": State(ids.NEGATIVE, "data"),
    "mine": State(ids.MY_WORKSPACES, "data"),
    "state": State(ids.STATE, "data"),
    **{select_input(select): Input(select.id, select.prop) for select in views.selects()},
    **{field_input(field): Input(*field.control) for field in view_fields() if field.control},
    **{click_input(field, cid): Input(cid, prop) for field in view_fields() for cid, prop in field.clicks},
    **{event_input(event): Input(event.id, event.prop) for field in view_fields() for event in field.events},
}
CONTROLLER_OUTPUTS = {
    "state": Output(ids.STATE, "data"),
    "search": Output(ids.URL, "search"),
    "ws": Output(ids.WS_SELECT, "value"),
    "model": Output(ids.MODEL_SELECT, "value"),
    "feature": Output(ids.FEATURE_SELECT, "value"),
    "subgroup_text": Output(ids.SUBGROUP_TEXT, "value"),
    "subgroup_error": Output(ids.SUBGROUP_ERROR, "children"),
    "ws_options": Output(ids.WS_SELECT, "options"),
    "model_options": Output(ids.MODEL_SELECT, "options"),
    "feature_options": Output(ids.FEATURE_SELECT, "options"),
    "column_options": Output(ids.COND_COLUMN, "options"),
    "subgroup_placeholder": Output(ids.SUBGROUP_TEXT, "placeholder"),
    **{field_input(field): Output(*field.control) for field in view_fields() if field.control},
}


def register(app, ctx) -> None:
    app.clientside_callback(
        CLICKED_ROW_JS,
        Output(ids.CLICKED_ROW, "data"),
        Input(ids.ICI_GRAPH, "clickData"),
        Input(ids.ICE_GRAPH, "clickData"),
        prevent_initial_call=True,
    )
    field = {"type": ids.WHATIF_VALUE, "column": ALL, "row": ALL}
    app.clientside_callback(
        WHATIF_JS,
        Output(ids.WHATIF_EDIT, "data"),
        Input(field, "value"),
        State(field, "id"),
        prevent_initial_call=True,
    )
    button = {"type": ids.SUGGESTED, "condition": ALL}
    app.clientside_callback(
        SUGGESTED_JS,
        Output(ids.SUGGESTED_PICK, "data"),
        Input(button, "n_clicks"),
        State(button, "id"),
        prevent_initial_call=True,
    )
    link = {"type": ids.VIEW_LINK, "view": ALL, "section": ALL}
    app.clientside_callback(
        VIEW_LINK_JS,
        Output(ids.SECTION_TABS, "value"),
        Input(link, "n_clicks"),
        prevent_initial_call=True,
    )
    app.clientside_callback(
        HOVERED_ROW_JS,
        Output(ids.HOVERED_ROW, "data"),
        Input(ids.ICI_GRAPH, "hoverData"),
        Input(ids.ICE_GRAPH, "hoverData"),
        prevent_initial_call=True,
    )

    # presentation mode: the page's class (style.css folds controls and notes, enlarges type;
    # assets/present.js enlarges the charts' text), the toolbar button's pressed state and
    # words, and the line naming the data set, models and rows (the pickers are folded)
    app.clientside_callback(
        PRESENT_JS,
        Output(ids.PAGE, "className"),
        Output(ids.PRESENT, "aria-pressed"),
        Output(ids.PRESENT, "children"),
        Output(ids.PRESENT_TITLE, "children"),
        Input(ids.STATE, "data"),
        Input(ids.WS_SELECT, "options"),
        Input(ids.MODEL_SELECT, "options"),
    )

    # the data sets this tab loaded, for the data-set list (the browser's session storage)
    app.clientside_callback(
        """
        function(loaded, mine) {
            if (!loaded) { return dash_clientside.no_update; }
            const list = (mine || []).filter(function(m) { return m !== loaded; });
            list.push(loaded);
            return list.slice(-MAX_MINE);
        }
        """.replace("MAX_MINE", str(MAX_MINE)),
        Output(ids.MY_WORKSPACES, "data"),
        Input(ids.LOADED_WS, "data"),
        State(ids.MY_WORKSPACES, "data"),
        prevent_initial_call=True,
    )

    @app.callback(output=CONTROLLER_OUTPUTS, inputs=CONTROLLER_INPUTS)
    def controller(**values):
        trigger = dash_ctx.triggered_id
        state = values.pop("state")
        inputs = {
            **values,
            "previous_subgroup": (state or {}).get("subgroup", "") if isinstance(state, dict) else "",
            "negative": values.get("negative") or [],
        }
        return controller_outputs(ctx, state, trigger, inputs)


def controller_outputs(ctx, state, trigger, inputs) -> dict:
    """The controller's outputs for one event (the names of CONTROLLER_OUTPUTS): state, URL
    search, control values (the views' fields' too), the subgroup box and its error, and the
    dropdown options."""
    new, error = update_state(ctx, state, trigger, inputs)
    if new == state and trigger != ids.URL and error is None:
        return {**{name: no_update for name in CONTROLLER_OUTPUTS}, "subgroup_error": None}
    subgroup_box = no_update if (error and trigger in (ids.SUBGROUP_APPLY, ids.SUBGROUP_TEXT)) else new["subgroup"]
    return {
        "state": new,
        "search": search_from_state(new),
        "ws": new["ws"],
        "model": new["model"],
        "feature": new["feature"],
        "subgroup_text": subgroup_box,
        "subgroup_error": error,
        **control_options(ctx, new, inputs.get("mine")),
        "subgroup_placeholder": subgroup_example(ctx, new),
        **{field_input(field): _shown(field, new[field.name]) for field in view_fields() if field.control},
    }


def _shown(field: Field, value):
    """A field's value as its control shows it."""
    return value if field.show is None else field.show(value)


def subgroup_example(ctx, state) -> str:
    """The subgroup box's hint, on this data set's own first feature (its median, or its most
    common level), in the condition language."""
    ws = ctx.store.workspace((state or {}).get("ws"))
    if ws is None:
        return "all rows; type a condition"
    data = ctx.store.data(ws)
    feature = ws.model(state.get("model")).features[0]
    column = data[feature]
    try:
        if pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column):
            value = float(f"{float(column.median()):.3g}")
            condition = compute.format_condition(feature, ">", int(value) if value.is_integer() else value)
        else:
            condition = compute.format_condition(feature, "==", column.mode(dropna=True).iloc[0])
    except (compute.ExplainError, IndexError, TypeError, ValueError):
        return "all rows; type a condition"
    return f"all rows; e.g. {condition}"


MAX_MINE = 20  # uploads a tab lists


def control_options(ctx, state, mine=None):
    """Dropdown options for the state's workspace: the demos, the data sets this browser tab
    loaded (``mine``, kept in its session storage: switching to a demo does not lose them;
    only ids that exist are listed) and the current one."""
    ws = ctx.store.workspace((state or {}).get("ws"))
    demos = [{"label": v, "value": k} for k, v in DEMOS.items()]
    listed = set(DEMOS)
    own = [m for m in mine if isinstance(m, str) and 0 < len(m) <= 200] if isinstance(mine, list) else []
    for ws_id in [*own[-MAX_MINE:], *([ws.id] if ws is not None else [])]:
        if ws_id in listed:
            continue
        found = ctx.store.workspace(ws_id)
        if found is not None and not found.demo:
            demos.append({"label": found.title, "value": found.id})
            listed.add(ws_id)
    if ws is None:
        return {"ws_options": demos, "model_options": [], "feature_options": [], "column_options": []}
    model = ws.model(state.get("model"))
    columns = [c for c in ctx.store.data(ws).columns]
    return {
        "ws_options": demos,
        "model_options": [m.name for m in ws.models],
        # a labelled feature reads "Yearly income (k$) (income_k)"; the value stays the column
        "feature_options": [{"label": labels.option_label(ws, f), "value": f} for f in model.features],
        "column_options": [
            {"label": labels.option_label(ws, c), "value": json.dumps(c) if not isinstance(c, str) else c}
            for c in columns
        ],
    }
